//! HeartbeatData (HEART_BEAT body): which producer and consumer groups a client instance
//! runs, and each consumer group's subscriptions. Also the subscription-expression parsing that
//! client and broker must agree on (split on `||`, trim, drop empties; `*` or empty = all).

use serde::{Deserialize, Serialize};

use super::lenient::{from_fastjson, to_fastjson_bytes};
use crate::error::Result;

/// The subscription expression meaning "every tag".
pub const SUB_ALL: &str = "*";
/// `expressionType` of tag filtering.
pub const EXPRESSION_TYPE_TAG: &str = "TAG";
/// `expressionType` of SQL92 filtering.
pub const EXPRESSION_TYPE_SQL92: &str = "SQL92";

/// How a consumer gets messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConsumeType {
    /// Pull consumer.
    ConsumeActively,
    /// Push consumer.
    #[default]
    ConsumePassively,
    /// 5.x POP consumer.
    ConsumePop,
}

/// Whether a group shares queues (clustering) or every member reads everything (broadcasting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MessageModel {
    Broadcasting,
    #[default]
    Clustering,
}

/// Where a consumer group without a stored offset starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConsumeFromWhere {
    #[default]
    ConsumeFromLastOffset,
    ConsumeFromFirstOffset,
    ConsumeFromTimestamp,
    /// Deprecated.
    ConsumeFromLastOffsetAndFromMinWhenBootFirst,
    /// Deprecated.
    ConsumeFromMinOffset,
    /// Deprecated.
    ConsumeFromMaxOffset,
}

/// One producer group of a client.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerData {
    #[serde(default)]
    pub group_name: String,
}

/// One subscription of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionData {
    #[serde(default)]
    pub class_filter_mode: bool,
    #[serde(default)]
    pub topic: String,
    #[serde(default)]
    pub sub_string: String,
    #[serde(default)]
    pub tags_set: Vec<String>,
    /// Java `String.hashCode()` of each tag. Java writes numbers; the Go client writes them as
    /// JSON strings (`["2598919"]`), so both are accepted.
    #[serde(default, deserialize_with = "code_set_lenient")]
    pub code_set: Vec<i32>,
    /// Creation time in ms.
    #[serde(default)]
    pub sub_version: i64,
    #[serde(default = "default_expression_type")]
    pub expression_type: String,
}

fn default_expression_type() -> String {
    EXPRESSION_TYPE_TAG.to_owned()
}

impl SubscriptionData {
    /// Builds a TAG subscription from an expression the way the Java client does: empty or `*`
    /// means all; otherwise tags split on `||`, trimmed, empties dropped.
    pub fn from_tag_expression(
        topic: impl Into<String>,
        expression: &str,
        sub_version: i64,
    ) -> Self {
        let trimmed = expression.trim();
        let mut data = SubscriptionData {
            topic: topic.into(),
            sub_version,
            expression_type: default_expression_type(),
            ..Default::default()
        };
        if trimmed.is_empty() || trimmed == SUB_ALL {
            data.sub_string = SUB_ALL.to_owned();
        } else {
            data.sub_string = trimmed.to_owned();
            for tag in parse_tags(trimmed) {
                if !data.tags_set.iter().any(|t| t == tag) {
                    data.code_set.push(java_string_hash(tag));
                    data.tags_set.push(tag.to_owned());
                }
            }
        }
        data
    }

    /// Whether this subscription takes every tag.
    pub fn is_all(&self) -> bool {
        self.expression_type == EXPRESSION_TYPE_TAG
            && (self.sub_string == SUB_ALL || self.tags_set.is_empty())
    }

    /// Whether a message with `tag` matches (TAG subscriptions only).
    pub fn matches_tag(&self, tag: Option<&str>) -> bool {
        if self.is_all() {
            return true;
        }
        tag.is_some_and(|t| self.tags_set.iter().any(|s| s == t))
    }
}

/// Splits a tag expression on `||`, trimming each tag and dropping empty ones.
pub fn parse_tags(expression: &str) -> impl Iterator<Item = &str> {
    expression
        .split("||")
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// Java's `String.hashCode()`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 units, wrapping.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// One consumer group of a client.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerData {
    #[serde(default)]
    pub group_name: String,
    #[serde(default)]
    pub consume_type: ConsumeType,
    #[serde(default)]
    pub message_model: MessageModel,
    #[serde(default)]
    pub consume_from_where: ConsumeFromWhere,
    #[serde(default)]
    pub subscription_data_set: Vec<SubscriptionData>,
    #[serde(default)]
    pub unit_mode: bool,
}

/// The HEART_BEAT body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatData {
    #[serde(rename = "clientID", default)]
    pub client_id: String,
    #[serde(default)]
    pub producer_data_set: Vec<ProducerData>,
    #[serde(default)]
    pub consumer_data_set: Vec<ConsumerData>,
    /// 5.x; non-zero switches the broker to the heartbeat-v2 path.
    #[serde(default)]
    pub heartbeat_fingerprint: i32,
    /// 5.x.
    #[serde(default)]
    pub without_sub: bool,
}

impl HeartbeatData {
    pub fn decode(body: &[u8]) -> Result<Self> {
        from_fastjson(body)
    }

    pub fn encode(&self) -> Result<Vec<u8>> {
        to_fastjson_bytes(self)
    }
}

/// Reads a `codeSet` whose entries are numbers (Java) or numeric strings (Go).
fn code_set_lenient<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<i32>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Code {
        Number(i32),
        Text(String),
    }
    let raw = Option::<Vec<Code>>::deserialize(d)?.unwrap_or_default();
    raw.into_iter()
        .map(|c| match c {
            Code::Number(n) => Ok(n),
            Code::Text(t) => t.trim().parse::<i32>().map_err(|_| {
                serde::de::Error::custom(format!("codeSet entry {t:?} is not an integer"))
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_matches_known_values() {
        // "TagA".hashCode() and "".hashCode() in Java.
        assert_eq!(java_string_hash("TagA"), 2_598_919);
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("hello world, this overflows"), {
            let mut h: i32 = 0;
            for u in "hello world, this overflows".encode_utf16() {
                h = h.wrapping_mul(31).wrapping_add(u as i32);
            }
            h
        });
    }

    #[test]
    fn tag_expressions_are_trimmed() {
        let a = SubscriptionData::from_tag_expression("T", "TagA || TagB||", 1);
        let b = SubscriptionData::from_tag_expression("T", "TagA||TagB", 1);
        assert_eq!(a.tags_set, b.tags_set);
        assert_eq!(a.tags_set, vec!["TagA", "TagB"]);
        assert!(
            a.matches_tag(Some("TagB")) && !a.matches_tag(Some("TagC")) && !a.matches_tag(None)
        );
        let all = SubscriptionData::from_tag_expression("T", " ", 1);
        assert_eq!(all.sub_string, "*");
        assert!(all.matches_tag(None));
    }

    #[test]
    fn java_heartbeat_round_trips() {
        let src = r#"{"clientID":"10.0.0.5@1234#987654321","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"g","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","subString":"TagA","subVersion":1700000000000,"tagsSet":["TagA"],"topic":"T"}],"unitMode":false}],"heartbeatFingerprint":0,"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}],"withoutSub":false}"#;
        let hb = HeartbeatData::decode(src.as_bytes()).unwrap();
        assert_eq!(
            hb.consumer_data_set[0].consume_type,
            ConsumeType::ConsumePassively
        );
        assert_eq!(hb.encode().unwrap(), src.as_bytes());
        assert!(HeartbeatData::decode(br#"{"consumerDataSet":[{"consumeType":"NOPE"}]}"#).is_err());
    }

    #[test]
    fn go_heartbeat_code_set_as_strings_is_accepted() {
        // rocketmq-client-go v2.1.2 serialises codeSet entries as strings (utils.Set of strings).
        let body = br#"{"clientID":"192.0.2.2@1","producerDataSet":[],"consumerDataSet":[{"groupName":"g","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"classFilterMode":false,"topic":"T","subString":"TagA || TagB","tagsSet":["TagA","TagB"],"codeSet":["2598919","2598920"],"subVersion":1,"expressionType":"TAG"}],"unitMode":false}]}"#;
        let hb = HeartbeatData::decode(body).expect("Go heartbeat decodes");
        let sub = &hb.consumer_data_set[0].subscription_data_set[0];
        assert_eq!(sub.code_set, vec![2598919, 2598920]);
        let java = br#"{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"T","subString":"TagA","tagsSet":["TagA"],"codeSet":[2598919],"subVersion":1}]}],"producerDataSet":[]}"#;
        let hb = HeartbeatData::decode(java).expect("Java heartbeat decodes");
        assert_eq!(
            hb.consumer_data_set[0].subscription_data_set[0].code_set,
            vec![2598919]
        );
        let bad = br#"{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"T","codeSet":["x"]}]}]}"#;
        assert!(HeartbeatData::decode(bad).is_err());
    }
}
