//! RocketMQ's naming rules, in one place for the broker, the store, the client and the ACL:
//! the system topics, the retry and dead-letter topics derived from group names, and which
//! topic and group names are legal.
//!
//! Every name travels in headers and in the CommitLog's records, and a Java broker or client on
//! the other side applies the same rules (`TopicValidator`, `Validators`, `MixAll`), so they are
//! facts of the protocol rather than of any one component.

use thiserror::Error;

use crate::limits::{MAX_GROUP_LEN, MAX_TOPIC_LEN};
use crate::message::record::MAX_RECORD_TOPIC_LEN;

/// The template topic producers name as `defaultTopic` for auto-creation (`TBW102`).
pub const AUTO_CREATE_TOPIC_KEY_TOPIC: &str = "TBW102";
/// The broker's self-test topic.
pub const SELF_TEST_TOPIC: &str = "SELF_TEST_TOPIC";
/// The benchmark topic every broker creates (1024 queues).
pub const BENCHMARK_TOPIC: &str = "BenchmarkTest";
/// Topic of offset-moved events.
pub const OFFSET_MOVED_EVENT: &str = "OFFSET_MOVED_EVENT";
/// Where delayed messages wait, one queue per delay level.
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// Half (prepared) transactional messages.
pub const TRANS_HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Commit/rollback markers of half messages.
pub const TRANS_OP_HALF_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// The timer wheel's topic (5.x timer messages).
pub const TIMER_TOPIC: &str = "rmq_sys_wheel_timer";
/// The default message-trace topic.
pub const TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";
/// Prefix of retry topics (`%RETRY%<group>`).
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
/// Prefix of dead-letter topics (`%DLQ%<group>`).
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";
/// Longest retry/DLQ topic name: derived from a group name (up to 255 bytes), it may use the
/// whole of the record format's topic length.
pub const MAX_RETRY_OR_DLQ_TOPIC_LEN: usize = MAX_RECORD_TOPIC_LEN;

/// `%RETRY%<group>`.
pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")
}

/// `%DLQ%<group>`.
pub fn dlq_topic(group: &str) -> String {
    format!("{DLQ_GROUP_TOPIC_PREFIX}{group}")
}

/// Whether `topic` is a retry topic.
pub fn is_retry_topic(topic: &str) -> bool {
    topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
}

/// Whether `topic` is a dead-letter topic.
pub fn is_dlq_topic(topic: &str) -> bool {
    topic.starts_with(DLQ_GROUP_TOPIC_PREFIX)
}

/// Whether `topic` is a retry or dead-letter topic.
pub fn is_retry_or_dlq(topic: &str) -> bool {
    is_retry_topic(topic) || is_dlq_topic(topic)
}

/// Topics producers may not send to directly: the broker writes them itself.
pub fn is_not_allowed_send_topic(topic: &str) -> bool {
    matches!(
        topic,
        SCHEDULE_TOPIC | TRANS_HALF_TOPIC | TRANS_OP_HALF_TOPIC | TIMER_TOPIC
    )
}

/// Topics the brokers create for themselves or write on their own (Apache's
/// `TopicValidator.SYSTEM_TOPIC_SET` and the transaction check topic).
pub const SYSTEM_TOPICS: &[&str] = &[
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    SELF_TEST_TOPIC,
    BENCHMARK_TOPIC,
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TIMER_TOPIC,
    TRACE_TOPIC,
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "DefaultHeartBeatSyncerTopic",
];
/// Prefix of the topics a 5.x broker creates for its own services (`rmq_sys_`), matched in any
/// letter case (`RMQ_SYS_TRANS_HALF_TOPIC` shares it).
pub const SYSTEM_TOPIC_PREFIX: &str = "rmq_sys_";
/// Groups the brokers and the admin tools use for themselves (`MixAll`'s tool, filter-server,
/// self-test, ONS and transaction groups).
pub const SYSTEM_GROUPS: &[&str] = &[
    "TOOLS_CONSUMER",
    "TOOLS_PRODUCER",
    "FILTERSRV_CONSUMER",
    "__MONITOR_CONSUMER",
    "CLIENT_INNER_PRODUCER",
    "SELF_TEST_P_GROUP",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_ONSAPI_PULL",
    "CID_SYS_RMQ_TRANS",
    "CID_DefaultHeartBeatSyncerTopic",
];
/// Prefix of the system consumer groups (`CID_RMQ_SYS_`), matched in any letter case.
pub const SYSTEM_GROUP_PREFIX: &str = "CID_RMQ_SYS_";

fn starts_with_ignore_case(name: &str, prefix: &str) -> bool {
    name.get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

/// Whether `topic` is a system topic: one of [`SYSTEM_TOPICS`], one under
/// [`SYSTEM_TOPIC_PREFIX`], or one a broker names after its cluster or itself (`<cluster>`,
/// `<cluster>_REPLY_TOPIC`, `<brokerName>`). Only the caller knows the cluster and broker
/// names, so `is_cluster_or_broker` answers whether a name is one of them (`|_| false` to
/// judge by the name alone).
pub fn is_system_topic(topic: &str, is_cluster_or_broker: impl Fn(&str) -> bool) -> bool {
    SYSTEM_TOPICS.contains(&topic)
        || starts_with_ignore_case(topic, SYSTEM_TOPIC_PREFIX)
        || is_cluster_or_broker(topic)
        || topic
            .strip_suffix("_REPLY_TOPIC")
            .is_some_and(&is_cluster_or_broker)
}

/// Whether `group` is a system group: one of [`SYSTEM_GROUPS`] or one under
/// [`SYSTEM_GROUP_PREFIX`].
pub fn is_system_group(group: &str) -> bool {
    SYSTEM_GROUPS.contains(&group) || starts_with_ignore_case(group, SYSTEM_GROUP_PREFIX)
}

/// Whether `group` starts with [`SYSTEM_GROUP_PREFIX`] (any case): the only groups Apache
/// RocketMQ's metrics label `is_system`.
pub fn has_system_group_prefix(group: &str) -> bool {
    starts_with_ignore_case(group, SYSTEM_GROUP_PREFIX)
}

/// Whether `b` may appear in a topic or group name: `[%|a-zA-Z0-9_-]`.
pub fn is_legal_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-')
}

/// Why a topic name is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TopicNameError {
    #[error("the topic name is blank")]
    Blank,
    #[error("the topic name {0:?} contains illegal characters; allowed are [%|a-zA-Z0-9_-]")]
    IllegalCharacters(String),
    #[error("the topic name {name:?} is {len} bytes long, longer than {max}")]
    TooLong {
        name: String,
        len: usize,
        max: usize,
    },
}

/// Longest name `topic` may have: 127 bytes, 255 for retry/DLQ topics.
pub fn max_topic_len(topic: &str) -> usize {
    if is_retry_or_dlq(topic) {
        MAX_RETRY_OR_DLQ_TOPIC_LEN
    } else {
        MAX_TOPIC_LEN
    }
}

/// RocketMQ's `TopicValidator.validateTopic`: non-blank, `[%|a-zA-Z0-9_-]` only, at most
/// [`max_topic_len`] bytes.
pub fn validate_topic(topic: &str) -> Result<(), TopicNameError> {
    validate_topic_within(topic, max_topic_len(topic))
}

/// [`validate_topic`] with a length limit of the caller's: the Java client's `Validators`
/// holds every topic it sends to within 127 bytes.
pub fn validate_topic_within(topic: &str, max: usize) -> Result<(), TopicNameError> {
    if topic.trim().is_empty() {
        return Err(TopicNameError::Blank);
    }
    if !topic.bytes().all(is_legal_name_byte) {
        return Err(TopicNameError::IllegalCharacters(topic.to_owned()));
    }
    if topic.len() > max {
        return Err(TopicNameError::TooLong {
            name: topic.to_owned(),
            len: topic.len(),
            max,
        });
    }
    Ok(())
}

/// Why a group name is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GroupNameError {
    #[error("the group name is blank")]
    Blank,
    #[error("the group name {0:?} contains illegal characters; allowed are [%|a-zA-Z0-9_-]")]
    IllegalCharacters(String),
    #[error("the group name is {len} bytes long, longer than {max}")]
    TooLong { len: usize, max: usize },
}

/// A consumer or producer group name: the topic's character set, at most 255 bytes.
pub fn validate_group(group: &str) -> Result<(), GroupNameError> {
    if group.trim().is_empty() {
        return Err(GroupNameError::Blank);
    }
    if !group.bytes().all(is_legal_name_byte) {
        return Err(GroupNameError::IllegalCharacters(group.to_owned()));
    }
    if group.len() > MAX_GROUP_LEN {
        return Err(GroupNameError::TooLong {
            len: group.len(),
            max: MAX_GROUP_LEN,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_and_dlq_topics_derive_from_the_group() {
        assert_eq!(retry_topic("g"), "%RETRY%g");
        assert_eq!(dlq_topic("g"), "%DLQ%g");
        assert!(is_retry_topic("%RETRY%g") && !is_dlq_topic("%RETRY%g"));
        assert!(is_retry_or_dlq("%DLQ%g") && !is_retry_or_dlq("RETRY%g"));
    }

    #[test]
    fn topic_rules() {
        assert_eq!(validate_topic(" "), Err(TopicNameError::Blank));
        assert!(matches!(
            validate_topic("a b"),
            Err(TopicNameError::IllegalCharacters(_))
        ));
        assert!(validate_topic(&"t".repeat(127)).is_ok());
        assert!(matches!(
            validate_topic(&"t".repeat(128)),
            Err(TopicNameError::TooLong { max: 127, .. })
        ));
        let long_retry = retry_topic(&"g".repeat(200));
        assert!(validate_topic(&long_retry).is_ok());
        assert!(validate_topic_within(&long_retry, MAX_TOPIC_LEN).is_err());
        assert!(validate_topic(&retry_topic(&"g".repeat(249))).is_err());
    }

    #[test]
    fn topic_name_rules() {
        assert!(validate_topic("TopicTest_1-a|b%c").is_ok());
        assert_eq!(validate_topic("  "), Err(TopicNameError::Blank));
        assert!(matches!(
            validate_topic("a b"),
            Err(TopicNameError::IllegalCharacters(_))
        ));
        assert!(matches!(
            validate_topic("a.b"),
            Err(TopicNameError::IllegalCharacters(_))
        ));
        let long = "x".repeat(128);
        assert!(matches!(
            validate_topic(&long),
            Err(TopicNameError::TooLong { len: 128, .. })
        ));
        assert!(validate_topic(&retry_topic(&"g".repeat(200))).is_ok());
        assert!(is_not_allowed_send_topic(SCHEDULE_TOPIC));
        assert!(!is_not_allowed_send_topic("TopicTest"));
    }

    #[test]
    fn group_rules() {
        assert_eq!(validate_group(""), Err(GroupNameError::Blank));
        assert!(validate_group("CID_a|b%c-d_e").is_ok());
        assert!(validate_group("a/b").is_err());
        assert!(validate_group(&"g".repeat(MAX_GROUP_LEN + 1)).is_err());
    }

    #[test]
    fn group_name_rules() {
        assert!(validate_group("please_rename_unique_group_name").is_ok());
        assert_eq!(validate_group(""), Err(GroupNameError::Blank));
        assert!(validate_group("a/b").is_err());
        assert!(validate_group(&"g".repeat(MAX_GROUP_LEN + 1)).is_err());
    }

    #[test]
    fn system_topics_and_groups() {
        let none = |_: &str| false;
        for topic in [
            "TBW102",
            SCHEDULE_TOPIC,
            TRACE_TOPIC,
            "rmq_sys_REVIVE_LOG_DefaultCluster",
            "RMQ_SYS_TRANS_HALF_TOPIC",
        ] {
            assert!(is_system_topic(topic, none), "{topic}");
        }
        assert!(!is_system_topic("Orders", none));
        assert!(!is_system_topic("%RETRY%g", none));
        let cluster = |name: &str| name == "DefaultCluster" || name == "broker-a";
        assert!(is_system_topic("DefaultCluster", cluster));
        assert!(is_system_topic("DefaultCluster_REPLY_TOPIC", cluster));
        assert!(is_system_topic("broker-a", cluster));
        assert!(!is_system_topic("DefaultCluster", none));
        assert!(!is_system_topic("Orders_REPLY_TOPIC", cluster));
        for group in [
            "TOOLS_CONSUMER",
            "CID_RMQ_SYS_TRANS",
            "cid_rmq_sys_x",
            "TOOLS_PRODUCER",
        ] {
            assert!(is_system_group(group), "{group}");
        }
        assert!(!is_system_group("orders_consumer"));
        assert!(!is_system_group("CID"));
    }

    #[test]
    fn broker_written_topics_refuse_direct_sends() {
        for topic in [
            SCHEDULE_TOPIC,
            TRANS_HALF_TOPIC,
            TRANS_OP_HALF_TOPIC,
            TIMER_TOPIC,
        ] {
            assert!(is_not_allowed_send_topic(topic), "{topic}");
        }
        assert!(!is_not_allowed_send_topic(AUTO_CREATE_TOPIC_KEY_TOPIC));
    }
}
