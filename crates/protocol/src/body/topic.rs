//! Topic and subscription-group configuration as exchanged in JSON: `TopicConfig` (REGISTER_BROKER
//! bodies, topics.json, GET_ALL_TOPIC_CONFIG), `DataVersion`, `TopicConfigSerializeWrapper` and
//! `SubscriptionGroupConfig` (subscriptionGroup.json, admin commands).
//!
//! Missing keys take RocketMQ's class defaults through serde default functions, because Java omits
//! nothing but older peers and hand-edited config files may; unknown keys are ignored, as fastjson
//! does. Field names are fastjson's (camelCase of the Java bean properties).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::time::now_millis;

/// Topic and broker permission bits (`PermName`).
pub mod perm {
    /// Priority flag (unused by routing, kept for completeness).
    pub const PERM_PRIORITY: i32 = 8;
    /// Consumers may read from the queues.
    pub const PERM_READ: i32 = 4;
    /// Producers may write to the queues.
    pub const PERM_WRITE: i32 = 2;
    /// The topic is a template: sends naming it as `defaultTopic` may auto-create topics.
    pub const PERM_INHERIT: i32 = 1;
    /// READ | WRITE, the permission of a normal topic.
    pub const PERM_READ_WRITE: i32 = PERM_READ | PERM_WRITE;

    pub const fn is_readable(perm: i32) -> bool {
        perm & PERM_READ != 0
    }

    pub const fn is_writeable(perm: i32) -> bool {
        perm & PERM_WRITE != 0
    }

    pub const fn is_inherited(perm: i32) -> bool {
        perm & PERM_INHERIT != 0
    }

    /// The `RW-`-style text mqadmin prints (`R`, `W`, `X` for inherit, `-` for absent bits).
    pub fn to_text(perm: i32) -> String {
        let mut s = String::with_capacity(3);
        s.push(if is_readable(perm) { 'R' } else { '-' });
        s.push(if is_writeable(perm) { 'W' } else { '-' });
        s.push(if is_inherited(perm) { 'X' } else { '-' });
        s
    }
}

/// Queue count of a `TopicConfig` created without explicit numbers (Java class default).
pub const DEFAULT_TOPIC_QUEUE_NUMS: i32 = 16;
/// Permission of a `TopicConfig` created without an explicit one.
pub const DEFAULT_TOPIC_PERM: i32 = perm::PERM_READ_WRITE;

/// How tags of a topic are filtered. Only informative today; both values behave the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TopicFilterType {
    #[default]
    SingleTag,
    MultiTag,
}

impl TopicFilterType {
    pub fn name(self) -> &'static str {
        match self {
            TopicFilterType::SingleTag => "SINGLE_TAG",
            TopicFilterType::MultiTag => "MULTI_TAG",
        }
    }

    /// Parses the RocketMQ name; `None` for anything else.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "SINGLE_TAG" => Some(TopicFilterType::SingleTag),
            "MULTI_TAG" => Some(TopicFilterType::MultiTag),
            _ => None,
        }
    }
}

/// One topic's configuration on a broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfig {
    #[serde(default)]
    pub topic_name: String,
    #[serde(default = "default_topic_queue_nums")]
    pub read_queue_nums: i32,
    #[serde(default = "default_topic_queue_nums")]
    pub write_queue_nums: i32,
    #[serde(default = "default_topic_perm")]
    pub perm: i32,
    #[serde(default)]
    pub topic_filter_type: TopicFilterType,
    /// Bit 0 = unit topic, bit 1 = unit-sub topic.
    #[serde(default)]
    pub topic_sys_flag: i32,
    #[serde(default)]
    pub order: bool,
    /// 5.x topic attributes, e.g. `message.type` → `NORMAL`.
    #[serde(default)]
    pub attributes: HashMap<String, String>,
}

fn default_topic_queue_nums() -> i32 {
    DEFAULT_TOPIC_QUEUE_NUMS
}

fn default_topic_perm() -> i32 {
    DEFAULT_TOPIC_PERM
}

impl Default for TopicConfig {
    fn default() -> Self {
        Self::new("")
    }
}

impl TopicConfig {
    /// A topic with the class defaults: 16/16 queues, perm RW, SINGLE_TAG.
    pub fn new(topic_name: impl Into<String>) -> Self {
        TopicConfig {
            topic_name: topic_name.into(),
            read_queue_nums: DEFAULT_TOPIC_QUEUE_NUMS,
            write_queue_nums: DEFAULT_TOPIC_QUEUE_NUMS,
            perm: DEFAULT_TOPIC_PERM,
            topic_filter_type: TopicFilterType::SingleTag,
            topic_sys_flag: 0,
            order: false,
            attributes: HashMap::new(),
        }
    }

    /// A topic with explicit queue numbers and permission.
    pub fn with_queues(topic_name: impl Into<String>, read: i32, write: i32, perm: i32) -> Self {
        TopicConfig {
            read_queue_nums: read,
            write_queue_nums: write,
            perm,
            ..Self::new(topic_name)
        }
    }
}

/// Version stamp of a broker's topic table; the name server re-reads topics only when it changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataVersion {
    #[serde(default)]
    pub timestamp: i64,
    #[serde(default)]
    pub counter: i64,
    #[serde(default)]
    pub state_version: i64,
}

impl Default for DataVersion {
    /// Stamped with the current time and a zero counter, as Java's constructor does.
    fn default() -> Self {
        DataVersion {
            timestamp: now_millis(),
            counter: 0,
            state_version: 0,
        }
    }
}

impl DataVersion {
    /// Bumps the counter and restamps the time (`nextVersion`).
    pub fn next_version(&mut self) {
        self.next_version_with_state(self.state_version);
    }

    /// Bumps the counter, restamps the time and sets the state version.
    pub fn next_version_with_state(&mut self, state_version: i64) {
        self.timestamp = now_millis();
        self.counter = self.counter.wrapping_add(1);
        self.state_version = state_version;
    }
}

/// The topic table a broker registers with (and persists as topics.json).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfigSerializeWrapper {
    #[serde(default)]
    pub topic_config_table: HashMap<String, TopicConfig>,
    #[serde(default)]
    pub data_version: DataVersion,
    /// 5.x static-topic mapping info (`brokerName`-scoped); kept as raw JSON, Comet does not
    /// implement static topics but must not drop what a Java broker sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_queue_mapping_info_map: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_queue_mapping_detail_map: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapping_data_version: Option<DataVersion>,
}

/// Retry count of a subscription group (`retryMaxTimes` default).
pub const DEFAULT_RETRY_MAX_TIMES: i32 = 16;
/// Retry queues per group (`retryQueueNums` default).
pub const DEFAULT_RETRY_QUEUE_NUMS: i32 = 1;
/// Push consume timeout in minutes (`consumeTimeoutMinute` default).
pub const DEFAULT_CONSUME_TIMEOUT_MINUTE: i32 = 15;
/// Broker id consumers are redirected to when they fall behind (`whichBrokerWhenConsumeSlowly`).
pub const DEFAULT_WHICH_BROKER_WHEN_CONSUME_SLOWLY: i64 = 1;

/// A consumer group's configuration on a broker (with Apache's defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionGroupConfig {
    #[serde(default)]
    pub group_name: String,
    #[serde(default = "yes")]
    pub consume_enable: bool,
    #[serde(default = "yes")]
    pub consume_from_min_enable: bool,
    #[serde(default = "yes")]
    pub consume_broadcast_enable: bool,
    #[serde(default)]
    pub consume_message_orderly: bool,
    #[serde(default = "default_retry_queue_nums")]
    pub retry_queue_nums: i32,
    #[serde(default = "default_retry_max_times")]
    pub retry_max_times: i32,
    /// 5.x retry policy object; kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_retry_policy: Option<serde_json::Value>,
    /// Broker id consumers of this group read from (0 = master).
    #[serde(default)]
    pub broker_id: i64,
    #[serde(default = "default_which_broker_when_consume_slowly")]
    pub which_broker_when_consume_slowly: i64,
    #[serde(default = "yes")]
    pub notify_consumer_ids_changed_enable: bool,
    #[serde(default)]
    pub group_sys_flag: i32,
    #[serde(default = "default_consume_timeout_minute")]
    pub consume_timeout_minute: i32,
    /// 5.x simple subscription set; kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_data_set: Option<serde_json::Value>,
    #[serde(default)]
    pub attributes: HashMap<String, String>,
}

fn yes() -> bool {
    true
}

fn default_retry_queue_nums() -> i32 {
    DEFAULT_RETRY_QUEUE_NUMS
}

fn default_retry_max_times() -> i32 {
    DEFAULT_RETRY_MAX_TIMES
}

fn default_which_broker_when_consume_slowly() -> i64 {
    DEFAULT_WHICH_BROKER_WHEN_CONSUME_SLOWLY
}

fn default_consume_timeout_minute() -> i32 {
    DEFAULT_CONSUME_TIMEOUT_MINUTE
}

impl SubscriptionGroupConfig {
    /// A group with every RocketMQ default.
    pub fn new(group_name: impl Into<String>) -> Self {
        SubscriptionGroupConfig {
            group_name: group_name.into(),
            consume_enable: true,
            consume_from_min_enable: true,
            consume_broadcast_enable: true,
            consume_message_orderly: false,
            retry_queue_nums: DEFAULT_RETRY_QUEUE_NUMS,
            retry_max_times: DEFAULT_RETRY_MAX_TIMES,
            group_retry_policy: None,
            broker_id: 0,
            which_broker_when_consume_slowly: DEFAULT_WHICH_BROKER_WHEN_CONSUME_SLOWLY,
            notify_consumer_ids_changed_enable: true,
            group_sys_flag: 0,
            consume_timeout_minute: DEFAULT_CONSUME_TIMEOUT_MINUTE,
            subscription_data_set: None,
            attributes: HashMap::new(),
        }
    }
}

impl Default for SubscriptionGroupConfig {
    fn default() -> Self {
        Self::new("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::lenient::{from_fastjson, to_fastjson};

    #[test]
    fn topic_config_defaults_and_wire_form() {
        let t: TopicConfig = from_fastjson(br#"{"topicName":"T"}"#).unwrap();
        assert_eq!(t, TopicConfig::new("T"));
        assert_eq!((t.read_queue_nums, t.write_queue_nums, t.perm), (16, 16, 6));
        let t = TopicConfig::with_queues("TopicTest", 4, 4, perm::PERM_READ_WRITE);
        assert_eq!(
            to_fastjson(&t).unwrap(),
            r#"{"attributes":{},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}"#
        );
        let back: TopicConfig = from_fastjson(to_fastjson(&t).unwrap().as_bytes()).unwrap();
        assert_eq!(back, t);
        let multi: TopicConfig =
            from_fastjson(br#"{"topicName":"M","topicFilterType":"MULTI_TAG","perm":7}"#).unwrap();
        assert_eq!(multi.topic_filter_type, TopicFilterType::MultiTag);
        assert!(perm::is_inherited(multi.perm));
        assert!(from_fastjson::<TopicConfig>(br#"{"topicFilterType":"BOGUS"}"#).is_err());
    }

    #[test]
    fn perm_helpers() {
        assert_eq!(perm::to_text(7), "RWX");
        assert_eq!(perm::to_text(4), "R--");
        assert!(!perm::is_writeable(perm::PERM_READ));
    }

    #[test]
    fn data_version_bumps() {
        let mut v = DataVersion {
            timestamp: 1,
            counter: 3,
            state_version: 0,
        };
        v.next_version();
        assert_eq!(v.counter, 4);
        assert!(v.timestamp > 1);
        assert_eq!(
            to_fastjson(&DataVersion {
                timestamp: 5,
                counter: 2,
                state_version: 0
            })
            .unwrap(),
            r#"{"counter":2,"stateVersion":0,"timestamp":5}"#
        );
    }

    #[test]
    fn wrapper_reads_register_body_section() {
        let src = br#"{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000},"topicConfigTable":{"TopicTest":{"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":8}},"topicQueueMappingInfoMap":{}}"#;
        let w: TopicConfigSerializeWrapper = from_fastjson(src).unwrap();
        assert_eq!(w.data_version.counter, 3);
        assert_eq!(
            w.topic_config_table
                .get("TopicTest")
                .map(|t| t.read_queue_nums),
            Some(8)
        );
        assert!(w.topic_queue_mapping_info_map.is_some());
    }

    #[test]
    fn subscription_group_defaults() {
        let g: SubscriptionGroupConfig =
            from_fastjson(br#"{"groupName":"g","retryMaxTimes":3}"#).unwrap();
        let mut expected = SubscriptionGroupConfig::new("g");
        expected.retry_max_times = 3;
        assert_eq!(g, expected);
        assert!(
            g.consume_enable && g.consume_broadcast_enable && g.notify_consumer_ids_changed_enable
        );
        assert_eq!(
            (
                g.retry_queue_nums,
                g.which_broker_when_consume_slowly,
                g.consume_timeout_minute
            ),
            (1, 1, 15)
        );
        let back: SubscriptionGroupConfig =
            from_fastjson(to_fastjson(&g).unwrap().as_bytes()).unwrap();
        assert_eq!(back, g);
    }
}
