//! Statistics and admin bodies: ConsumeStats, TopicStatsTable,
//! ConsumerConnection, GetConsumerListByGroupResponseBody, ResetOffsetBody, TopicList, KVTable.
//!
//! ConsumeStats, TopicStatsTable and ResetOffsetBody are keyed by MessageQueue; encode them with
//! the fastjson writer so the keys come out as objects, which Java and the Go client parse (the Go
//! client even splits the text on `,{` and `}:`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::heartbeat::{ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData};
use super::queue::MessageQueue;

/// Offsets of one queue for one consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OffsetWrapper {
    #[serde(default)]
    pub broker_offset: i64,
    #[serde(default)]
    pub consumer_offset: i64,
    /// 5.x: offset pulled so far.
    #[serde(default)]
    pub pull_offset: i64,
    /// Store time of the last consumed message.
    #[serde(default)]
    pub last_timestamp: i64,
}

/// GET_CONSUME_STATS body.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumeStats {
    #[serde(default)]
    pub offset_table: HashMap<MessageQueue, OffsetWrapper>,
    #[serde(default)]
    pub consume_tps: f64,
}

impl ConsumeStats {
    /// Sum of `brokerOffset - consumerOffset` over all queues.
    pub fn diff_total(&self) -> i64 {
        self.offset_table
            .values()
            .map(|o| o.broker_offset.saturating_sub(o.consumer_offset))
            .sum()
    }
}

/// Offsets of one queue of a topic.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicOffset {
    #[serde(default)]
    pub min_offset: i64,
    #[serde(default)]
    pub max_offset: i64,
    #[serde(default)]
    pub last_update_timestamp: i64,
}

/// GET_TOPIC_STATS_INFO body.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicStatsTable {
    #[serde(default)]
    pub offset_table: HashMap<MessageQueue, TopicOffset>,
    /// 5.x only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_put_tps: Option<f64>,
}

/// One client connection of a group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    #[serde(default)]
    pub client_id: String,
    #[serde(default)]
    pub client_addr: String,
    /// LanguageCode name.
    #[serde(default)]
    pub language: String,
    #[serde(default)]
    pub version: i32,
}

/// GET_CONSUMER_CONNECTION_LIST body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerConnection {
    #[serde(default)]
    pub connection_set: BTreeSet<Connection>,
    #[serde(default)]
    pub subscription_table: HashMap<String, SubscriptionData>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consume_type: Option<ConsumeType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_model: Option<MessageModel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consume_from_where: Option<ConsumeFromWhere>,
}

/// GET_PRODUCER_CONNECTION_LIST body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerConnection {
    #[serde(default)]
    pub connection_set: BTreeSet<Connection>,
}

/// One producer connection in [`ProducerTableInfo`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerInfo {
    #[serde(default)]
    pub client_id: String,
    /// The connection's remote address as Java prints a socket address (`/ip:port`).
    #[serde(default, rename = "remoteIP")]
    pub remote_ip: String,
    #[serde(default)]
    pub language: String,
    #[serde(default)]
    pub version: i32,
    #[serde(default)]
    pub last_update_timestamp: i64,
}

/// GET_ALL_PRODUCER_INFO body: every producer connection, by producer group.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerTableInfo {
    #[serde(default)]
    pub data: BTreeMap<String, Vec<ProducerInfo>>,
}

/// GET_CONSUMER_LIST_BY_GROUP response body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetConsumerListByGroupResponseBody {
    #[serde(default)]
    pub consumer_id_list: Vec<String>,
}

/// RESET_CONSUMER_CLIENT_OFFSET request body / INVOKE_BROKER_TO_RESET_OFFSET response body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResetOffsetBody {
    #[serde(default)]
    pub offset_table: HashMap<MessageQueue, i64>,
}

/// A list of topic names (GET_ALL_TOPIC_LIST_FROM_NAMESERVER and friends).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicList {
    #[serde(default)]
    pub topic_list: BTreeSet<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_addr: Option<String>,
}

/// A string map (KV config namespaces, broker config).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KvTable {
    #[serde(default)]
    pub table: HashMap<String, String>,
}

/// QUERY_TOPIC_CONSUME_BY_WHO body: the groups that consume a topic.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupList {
    #[serde(default)]
    pub group_list: BTreeSet<String>,
}

/// GET_BROKER_CONSUME_STATS body: every subscription group's consume stats on one broker, one
/// `{group: [stats per topic]}` map per group.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumeStatsList {
    #[serde(default)]
    pub consume_stats_list: Vec<HashMap<String, Vec<ConsumeStats>>>,
    #[serde(default)]
    pub broker_addr: String,
    /// Sum of every queue's `brokerOffset - consumerOffset`.
    #[serde(default)]
    pub total_diff: i64,
    /// Sum of every queue's `brokerOffset - pullOffset`.
    #[serde(default)]
    pub total_inflight_diff: i64,
}

/// One window of a broker statistic (VIEW_BROKER_STATS_DATA): the count in the window, its
/// rate per second and the average time per operation.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerStatsItem {
    /// Operations (messages) counted in the window.
    #[serde(default)]
    pub sum: i64,
    /// Operations per second over the window.
    #[serde(default)]
    pub tps: f64,
    /// Average time per operation, milliseconds.
    #[serde(default)]
    pub avgpt: f64,
}

/// VIEW_BROKER_STATS_DATA body: one statistic (`TOPIC_PUT_NUMS` of a topic, `GROUP_GET_NUMS` of
/// `topic@group`, ...) over the last minute, hour and day.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerStatsData {
    /// The last minute.
    #[serde(default)]
    pub stats_minute: BrokerStatsItem,
    /// The last hour.
    #[serde(default)]
    pub stats_hour: BrokerStatsItem,
    /// The last day.
    #[serde(default)]
    pub stats_day: BrokerStatsItem,
}

/// Statistic name of a topic's stored messages (`statsKey` = the topic).
pub const STATS_TOPIC_PUT_NUMS: &str = "TOPIC_PUT_NUMS";
/// Statistic name of a group's fetched messages (`statsKey` = `topic@group`).
pub const STATS_GROUP_GET_NUMS: &str = "GROUP_GET_NUMS";

/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG body: a broker's subscription groups by name.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionGroupWrapper {
    /// Group name → configuration.
    #[serde(default)]
    pub subscription_group_table: HashMap<String, super::topic::SubscriptionGroupConfig>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::lenient::{from_fastjson, to_fastjson};

    #[test]
    fn consume_stats_fastjson_form() {
        let src = r#"{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":120,"consumerOffset":118,"lastTimestamp":1700000000000,"pullOffset":120}}}"#;
        let stats: ConsumeStats = from_fastjson(src.as_bytes()).unwrap();
        assert_eq!(stats.diff_total(), 2);
        assert_eq!(to_fastjson(&stats).unwrap(), src);
    }

    #[test]
    fn reset_offset_body_splits_like_go() {
        let body = ResetOffsetBody {
            offset_table: HashMap::from([
                (MessageQueue::new("T", "b", 0), 5),
                (MessageQueue::new("T", "b", 1), 7),
            ]),
        };
        let text = to_fastjson(&body).unwrap();
        assert_eq!(
            text,
            r#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5,{"brokerName":"b","queueId":1,"topic":"T"}:7}}"#
        );
        // The Go client's parser: strip the wrapper, split entries on ",{" and key/value on "}:".
        let inner = text
            .trim_start_matches(r#"{"offsetTable":{"#)
            .trim_end_matches("}}");
        let entries: Vec<&str> = inner.split(",{").collect();
        assert_eq!(entries.len(), 2);
        assert!(entries.iter().all(|e| e.contains("}:")));
        let back: ResetOffsetBody = from_fastjson(text.as_bytes()).unwrap();
        assert_eq!(back, body);
    }

    #[test]
    fn small_bodies() {
        let tl = TopicList {
            topic_list: ["B".to_owned(), "A".to_owned()].into(),
            broker_addr: None,
        };
        assert_eq!(to_fastjson(&tl).unwrap(), r#"{"topicList":["A","B"]}"#);
        let kv: KvTable = from_fastjson(br#"{"table":{"k":"v"}}"#).unwrap();
        assert_eq!(kv.table["k"], "v");
        let ids: GetConsumerListByGroupResponseBody =
            from_fastjson(br#"{"consumerIdList":["10.0.0.5@1234#987654321"]}"#).unwrap();
        assert_eq!(ids.consumer_id_list.len(), 1);
        let tst: TopicStatsTable = from_fastjson(
            br#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":1,"maxOffset":9,"minOffset":0}}}"#,
        )
        .unwrap();
        assert_eq!(
            tst.offset_table.values().next().map(|o| o.max_offset),
            Some(9)
        );
        assert_eq!(tst.topic_put_tps, None);
    }
}
