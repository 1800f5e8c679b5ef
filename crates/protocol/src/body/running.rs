//! Bodies of the two requests a broker forwards from an admin tool to one consumer client:
//! GET_CONSUMER_RUNNING_INFO ([`ConsumerRunningInfo`]) and CONSUME_MESSAGE_DIRECTLY
//! ([`ConsumeMessageDirectlyResult`]).
//!
//! The running info is keyed by MessageQueue (`mqTable`, `mqPopTable`); encode it with
//! [`to_fastjson_bytes`](super::to_fastjson_bytes) so the keys come out as objects in key
//! position, the form the Java tools parse. Every property value is a string, because the Java
//! side reads them with `Properties.getProperty`, which ignores non-string values.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::heartbeat::SubscriptionData;
use super::queue::MessageQueue;

/// Property: the name server addresses the client uses, each followed by `;`.
pub const PROP_NAMESERVER_ADDR: &str = "PROP_NAMESERVER_ADDR";
/// Property: the consume service's core worker count.
pub const PROP_THREADPOOL_CORE_SIZE: &str = "PROP_THREADPOOL_CORE_SIZE";
/// Property: `true` for an orderly consumer (the key is spelled without the underscore).
pub const PROP_CONSUME_ORDERLY: &str = "PROP_CONSUMEORDERLY";
/// Property: `CONSUME_PASSIVELY` (push) or `CONSUME_ACTIVELY` (pull).
pub const PROP_CONSUME_TYPE: &str = "PROP_CONSUME_TYPE";
/// Property: the client's version name, e.g. `V5_3_3`.
pub const PROP_CLIENT_VERSION: &str = "PROP_CLIENT_VERSION";
/// Property: wall-clock ms when the consumer started.
pub const PROP_CONSUMER_START_TIMESTAMP: &str = "PROP_CONSUMER_START_TIMESTAMP";

/// What one consumer client reports about one of its groups (Java `ConsumerRunningInfo`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerRunningInfo {
    /// The consumer's configuration and the `PROP_*` entries, all as strings.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
    /// The group's subscriptions, sorted by topic then expression.
    #[serde(default)]
    pub subscription_set: Vec<SubscriptionData>,
    /// Every queue the client holds, with its process queue's state.
    #[serde(default)]
    pub mq_table: BTreeMap<MessageQueue, ProcessQueueInfo>,
    /// Queues consumed by POP (always empty for a remoting push consumer).
    #[serde(default)]
    pub mq_pop_table: BTreeMap<MessageQueue, PopProcessQueueInfo>,
    /// Consume statistics by topic.
    #[serde(default)]
    pub status_table: BTreeMap<String, ConsumeStatus>,
    /// Free-form entries an application adds.
    #[serde(default)]
    pub user_consumer_info: BTreeMap<String, String>,
    /// A dump of the client's threads or tasks, when the request asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jstack: Option<String>,
}

impl ConsumerRunningInfo {
    /// The property `key`, if set.
    pub fn property(&self, key: &str) -> Option<&str> {
        self.properties.get(key).map(String::as_str)
    }

    /// Whether the client is a push consumer (`PROP_CONSUME_TYPE` is `CONSUME_PASSIVELY`).
    pub fn is_push_type(&self) -> bool {
        self.property(PROP_CONSUME_TYPE) == Some("CONSUME_PASSIVELY")
    }
}

/// The state of one process queue (Java `ProcessQueueInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessQueueInfo {
    /// The offset the client would commit now.
    #[serde(default)]
    pub commit_offset: i64,
    /// Lowest offset cached and not yet consumed.
    #[serde(default)]
    pub cached_msg_min_offset: i64,
    /// Highest offset cached.
    #[serde(default)]
    pub cached_msg_max_offset: i64,
    /// Messages cached.
    #[serde(default)]
    pub cached_msg_count: i32,
    /// Bodies cached, in whole MiB.
    #[serde(default, rename = "cachedMsgSizeInMiB")]
    pub cached_msg_size_in_mib: i32,
    /// Lowest offset an orderly listener holds uncommitted.
    #[serde(default)]
    pub transaction_msg_min_offset: i64,
    /// Highest offset an orderly listener holds uncommitted.
    #[serde(default)]
    pub transaction_msg_max_offset: i64,
    /// Messages an orderly listener holds uncommitted.
    #[serde(default)]
    pub transaction_msg_count: i32,
    /// Whether the broker lock of the queue is held (orderly).
    #[serde(default)]
    pub locked: bool,
    /// Failed unlock attempts.
    #[serde(default)]
    pub try_unlock_times: i64,
    /// Wall-clock ms of the last lock.
    #[serde(default)]
    pub last_lock_timestamp: i64,
    /// Whether the queue was given up (Java's spelling).
    #[serde(default)]
    pub droped: bool,
    /// Wall-clock ms of the last pull.
    #[serde(default)]
    pub last_pull_timestamp: i64,
    /// Wall-clock ms of the last consumption.
    #[serde(default)]
    pub last_consume_timestamp: i64,
}

/// The state of one POP queue (Java `PopProcessQueueInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PopProcessQueueInfo {
    /// Messages popped and not yet acknowledged.
    #[serde(default)]
    pub wait_ack_count: i32,
    /// Whether the queue was given up.
    #[serde(default)]
    pub droped: bool,
    /// Wall-clock ms of the last pop.
    #[serde(default)]
    pub last_pop_timestamp: i64,
}

/// Consume statistics of one topic (Java `ConsumeStatus`): averages over the last minute.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ConsumeStatus {
    /// Mean pull round trip, ms.
    #[serde(default, rename = "pullRT")]
    pub pull_rt: f64,
    /// Messages pulled per second.
    #[serde(default, rename = "pullTPS")]
    pub pull_tps: f64,
    /// Mean listener time, ms.
    #[serde(default, rename = "consumeRT")]
    pub consume_rt: f64,
    /// Messages consumed successfully per second.
    #[serde(default, rename = "consumeOKTPS")]
    pub consume_ok_tps: f64,
    /// Messages whose consumption failed, per second.
    #[serde(default, rename = "consumeFailedTPS")]
    pub consume_failed_tps: f64,
    /// Failed messages over the last hour.
    #[serde(default, rename = "consumeFailedMsgs")]
    pub consume_failed_msgs: i64,
}

/// How a listener handled a message delivered by CONSUME_MESSAGE_DIRECTLY (Java `CMResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CMResult {
    /// Consumed (concurrent `CONSUME_SUCCESS`, orderly `SUCCESS`).
    #[serde(rename = "CR_SUCCESS")]
    Success,
    /// Asked to be retried later (concurrent `RECONSUME_LATER`, orderly suspend).
    #[serde(rename = "CR_LATER")]
    Later,
    /// Orderly `ROLLBACK`.
    #[serde(rename = "CR_ROLLBACK")]
    Rollback,
    /// Orderly `COMMIT`.
    #[serde(rename = "CR_COMMIT")]
    Commit,
    /// The listener failed (threw, or in Rust panicked).
    #[serde(rename = "CR_THROW_EXCEPTION")]
    ThrowException,
    /// The listener returned no status.
    #[serde(rename = "CR_RETURN_NULL")]
    ReturnNull,
}

impl CMResult {
    /// Java's constant name, e.g. `CR_SUCCESS`.
    pub fn name(self) -> &'static str {
        match self {
            CMResult::Success => "CR_SUCCESS",
            CMResult::Later => "CR_LATER",
            CMResult::Rollback => "CR_ROLLBACK",
            CMResult::Commit => "CR_COMMIT",
            CMResult::ThrowException => "CR_THROW_EXCEPTION",
            CMResult::ReturnNull => "CR_RETURN_NULL",
        }
    }
}

/// The answer of CONSUME_MESSAGE_DIRECTLY (Java `ConsumeMessageDirectlyResult`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumeMessageDirectlyResult {
    /// Whether the consumer is orderly.
    #[serde(default)]
    pub order: bool,
    /// Orderly: whether the listener left auto-commit on; always `true` for a concurrent one.
    #[serde(default = "default_true")]
    pub auto_commit: bool,
    /// The listener's outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consume_result: Option<CMResult>,
    /// Why the listener failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remark: Option<String>,
    /// How long the listener call took, ms (Java's spelling).
    #[serde(default)]
    pub spent_time_mills: i64,
}

fn default_true() -> bool {
    true
}

impl Default for ConsumeMessageDirectlyResult {
    fn default() -> Self {
        ConsumeMessageDirectlyResult {
            order: false,
            auto_commit: true,
            consume_result: None,
            remark: None,
            spent_time_mills: 0,
        }
    }
}

impl std::fmt::Display for ConsumeMessageDirectlyResult {
    /// The text Java's `toString` prints (what mqadmin shows).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ConsumeMessageDirectlyResult [order={}, autoCommit={}, consumeResult={}, remark={}, spentTimeMills={}]",
            self.order,
            self.auto_commit,
            self.consume_result.map_or("null", CMResult::name),
            self.remark.as_deref().unwrap_or("null"),
            self.spent_time_mills
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::{from_fastjson, to_fastjson};

    #[test]
    fn running_info_has_java_shape_and_round_trips() {
        let mut info = ConsumerRunningInfo::default();
        info.properties
            .insert(PROP_CONSUME_TYPE.into(), "CONSUME_PASSIVELY".into());
        info.mq_table.insert(
            MessageQueue::new("T", "b", 1),
            ProcessQueueInfo {
                commit_offset: 7,
                cached_msg_size_in_mib: 2,
                droped: true,
                ..Default::default()
            },
        );
        info.status_table.insert(
            "T".into(),
            ConsumeStatus {
                consume_ok_tps: 1.5,
                ..Default::default()
            },
        );
        let text = to_fastjson(&info).expect("encodes");
        assert!(
            text.contains(r#""mqTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"cachedMsgCount":0,"cachedMsgMaxOffset":0,"cachedMsgMinOffset":0,"cachedMsgSizeInMiB":2,"commitOffset":7,"droped":true,"#),
            "{text}"
        );
        assert!(text.contains(r#""mqPopTable":{}"#), "{text}");
        assert!(
            text.contains(r#""statusTable":{"T":{"consumeFailedMsgs":0,"consumeFailedTPS":0.0,"consumeOKTPS":1.5,"consumeRT":0.0,"pullRT":0.0,"pullTPS":0.0}}"#),
            "{text}"
        );
        assert!(!text.contains("jstack"), "{text}");
        let back: ConsumerRunningInfo = from_fastjson(text.as_bytes()).expect("decodes");
        assert_eq!(back, info);
        assert!(back.is_push_type());
    }

    #[test]
    fn direct_result_uses_java_names() {
        let result = ConsumeMessageDirectlyResult {
            consume_result: Some(CMResult::ThrowException),
            remark: Some("boom".into()),
            spent_time_mills: 3,
            ..Default::default()
        };
        assert_eq!(
            to_fastjson(&result).expect("encodes"),
            r#"{"autoCommit":true,"consumeResult":"CR_THROW_EXCEPTION","order":false,"remark":"boom","spentTimeMills":3}"#
        );
        let java =
            br#"{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"spentTimeMills":0}"#;
        let back: ConsumeMessageDirectlyResult = from_fastjson(java).expect("decodes");
        assert_eq!(back.consume_result, Some(CMResult::Success));
        assert_eq!(
            back.to_string(),
            "ConsumeMessageDirectlyResult [order=false, autoCommit=true, consumeResult=CR_SUCCESS, remark=null, spentTimeMills=0]"
        );
    }
}
