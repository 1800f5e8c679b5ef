//! Half messages: how a transactional send is parked, how it is recognised again, and the
//! messages derived from it (the committed message, the re-put copy of a check).
//!
//! A half message is the producer's message stored in `RMQ_SYS_TRANS_HALF_TOPIC` queue 0 with
//! its real destination in `REAL_TOPIC`/`REAL_QID` and its transaction type reset to NOT, so the
//! store indexes and queues it like any message but no consumer of the real topic sees it. Every
//! function here is a pure transformation of [`MessageExt`]s, so the rules can be tested without a
//! store.

use comet_protocol::headers::EndTransactionRequestHeader;
use comet_protocol::message::properties::keys;
use comet_protocol::message::{MessageExt, Properties, sysflag};
use thiserror::Error;

use comet_protocol::naming::TRANS_HALF_TOPIC;

/// Queue of [`TRANS_HALF_TOPIC`] every half message goes to (RocketMQ uses queue 0 only).
pub const HALF_QUEUE_ID: i32 = 0;

/// Why a stored record cannot be ended as the END_TRANSACTION request asks.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HalfError {
    #[error("the message at commitLogOffset {offset} is in topic {topic}, not a half message")]
    NotHalf { offset: i64, topic: String },
    #[error("the producer group wrong: the half message belongs to {stored:?}, not {requested}")]
    ProducerGroup {
        stored: Option<String>,
        requested: String,
    },
    #[error(
        "the transaction state table offset wrong: half queue offset {stored}, request {requested}"
    )]
    QueueOffset { stored: i64, requested: i64 },
    #[error("the message id wrong: half message {stored:?}, request {requested}")]
    MsgId {
        stored: Option<String>,
        requested: String,
    },
    #[error("the half message has no valid REAL_TOPIC/REAL_QID")]
    NoRealTopic,
}

/// Java's `Boolean.parseBoolean`: `"true"` in any case.
fn is_true(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// Whether a single send is the half of a transaction: TRAN_MSG=true or the PREPARED sysflag,
/// except a consumer's re-send of a delayed retry (RocketMQ lets those through as normal
/// messages).
pub fn is_half_send(properties: &Properties, sys_flag: i32, reconsume_times: i32) -> bool {
    let marked = is_true(properties.get(keys::TRANSACTION_PREPARED))
        || sysflag::transaction_type(sys_flag) == sysflag::TRANSACTION_PREPARED_TYPE;
    let delayed_retry = reconsume_times > 0
        && properties
            .get(keys::DELAY_TIME_LEVEL)
            .and_then(|l| l.trim().parse::<i32>().ok())
            .is_some_and(|l| l > 0);
    marked && !delayed_retry
}

/// Rewrites a producer's message into its half: real topic and queue saved, transaction id =
/// UNIQ_KEY, transaction type NOT, half topic queue 0. Everything else stays as the producer
/// sent it, WAIT included (PGROUP is what the check needs; TRAN_MSG stays even on the committed
/// message, as in Apache).
pub fn into_half(msg: &mut MessageExt) {
    msg.properties.insert(keys::REAL_TOPIC, msg.topic.clone());
    msg.properties
        .insert(keys::REAL_QUEUE_ID, msg.queue_id.to_string());
    if let Some(uniq) = msg.uniq_key().map(str::to_owned) {
        msg.properties.insert(keys::TRANSACTION_ID, uniq);
    }
    msg.sys_flag = sysflag::with_transaction_type(msg.sys_flag, sysflag::TRANSACTION_NOT_TYPE);
    msg.topic = TRANS_HALF_TOPIC.to_owned();
    msg.queue_id = HALF_QUEUE_ID;
}

/// The transaction a stored half belongs to: the queue offset of its first copy. Re-put copies
/// carry it in TRAN_PREPARED_QUEUE_OFFSET; the first copy is its own identity.
pub fn transaction_identity(half: &MessageExt) -> i64 {
    prepared_queue_offset(half).unwrap_or(half.queue_offset)
}

/// TRAN_PREPARED_QUEUE_OFFSET, if present and numeric.
pub fn prepared_queue_offset(half: &MessageExt) -> Option<i64> {
    half.properties
        .get(keys::TRANSACTION_PREPARED_QUEUE_OFFSET)
        .and_then(|v| v.trim().parse().ok())
}

/// How many checks the half has had (TRANSACTION_CHECK_TIMES; absent = none yet). A malformed
/// value counts as "exhausted" so a corrupt record cannot be checked forever.
pub fn check_times(half: &MessageExt) -> i32 {
    match half.properties.get(keys::TRANSACTION_CHECK_TIMES) {
        None => 0,
        Some(v) => v.trim().parse().unwrap_or(i32::MAX),
    }
}

/// The first-check delay a producer asked for (CHECK_IMMUNITY_TIME_IN_SECONDS) in ms, or
/// `default_ms` when the property is malformed. `None` when absent.
pub fn check_immunity_millis(half: &MessageExt, default_ms: i64) -> Option<i64> {
    let raw = half.properties.get(keys::CHECK_IMMUNITY_TIME_IN_SECONDS)?;
    Some(
        raw.trim()
            .parse::<i64>()
            .ok()
            .filter(|s| *s >= 0)
            .map_or(default_ms, |s| s.saturating_mul(1000)),
    )
}

/// RocketMQ's `checkPrepareMessage` plus the message-id check: the record at the request's
/// commit-log offset must be a half of this producer group at the request's queue offset, with
/// the request's message id (its UNIQ_KEY, or its offset msgId for a producer that sent that).
pub fn validate_for_end(
    half: &MessageExt,
    header: &EndTransactionRequestHeader,
) -> Result<(), HalfError> {
    if half.topic != TRANS_HALF_TOPIC {
        return Err(HalfError::NotHalf {
            offset: half.commit_log_offset,
            topic: half.topic.clone(),
        });
    }
    let group = half.properties.get(keys::PRODUCER_GROUP);
    if group != Some(header.producer_group.as_str()) {
        return Err(HalfError::ProducerGroup {
            stored: group.map(str::to_owned),
            requested: header.producer_group.clone(),
        });
    }
    if half.queue_offset != header.tran_state_table_offset {
        return Err(HalfError::QueueOffset {
            stored: half.queue_offset,
            requested: header.tran_state_table_offset,
        });
    }
    let uniq = half.uniq_key();
    if uniq != Some(header.msg_id.as_str()) && half.offset_msg_id() != header.msg_id {
        return Err(HalfError::MsgId {
            stored: uniq.map(str::to_owned),
            requested: header.msg_id.clone(),
        });
    }
    Ok(())
}

/// The real topic and queue a half message was sent to.
pub fn real_destination(half: &MessageExt) -> Result<(String, i32), HalfError> {
    let topic = half
        .properties
        .get(keys::REAL_TOPIC)
        .filter(|t| !t.is_empty())
        .ok_or(HalfError::NoRealTopic)?;
    let queue_id = half
        .properties
        .get(keys::REAL_QUEUE_ID)
        .and_then(|q| q.trim().parse::<i32>().ok())
        .filter(|q| *q >= 0)
        .ok_or(HalfError::NoRealTopic)?;
    Ok((topic.to_owned(), queue_id))
}

/// The message a commit stores: the half's body, flag, born info and properties in its real
/// topic and queue, type COMMIT, `preparedTransactionOffset` = the half's commit-log offset.
///
/// The properties are the half's as stored, as Apache RocketMQ 5.3.3 writes them (captured in
/// `crates/protocol/tests/fixtures/*-tx`): TRAN_MSG=true, REAL_TOPIC, REAL_QID, the transaction
/// id and, for a half committed after a check, TRANSACTION_CHECK_TIMES all stay (Apache clears
/// REAL_TOPIC/REAL_QID from its in-memory map only after the stored string was built). WAIT stays
/// as the producer sent it, so under SYNC_FLUSH the commit is durable before its op record is
/// written. Only TRAN_PREPARED_QUEUE_OFFSET goes: it is Comet's bookkeeping on every re-put copy
/// (Apache writes it only on immunity copies) and means nothing outside the half queue.
pub fn committed_message(half: &MessageExt) -> Result<MessageExt, HalfError> {
    let (topic, queue_id) = real_destination(half)?;
    let mut msg = MessageExt::new(topic, half.body.clone());
    msg.queue_id = queue_id;
    msg.flag = half.flag;
    msg.properties = half.properties.clone();
    msg.properties
        .remove(keys::TRANSACTION_PREPARED_QUEUE_OFFSET);
    msg.sys_flag = sysflag::with_transaction_type(half.sys_flag, sysflag::TRANSACTION_COMMIT_TYPE);
    msg.born_timestamp = half.born_timestamp;
    msg.born_host = half.born_host;
    msg.store_host = half.store_host;
    msg.reconsume_times = half.reconsume_times;
    msg.prepared_transaction_offset = half.commit_log_offset;
    Ok(msg)
}

/// A copy of `half` to put back into the half queue (a check, or an immunity wait): same body,
/// born info and properties, TRAN_PREPARED_QUEUE_OFFSET naming the transaction's first copy,
/// and `check_times` when given.
pub fn renewed_half(half: &MessageExt, check_times: Option<i32>) -> MessageExt {
    let mut copy = MessageExt::new(TRANS_HALF_TOPIC, half.body.clone());
    copy.queue_id = half.queue_id;
    copy.flag = half.flag;
    copy.properties = half.properties.clone();
    copy.properties.insert(
        keys::TRANSACTION_PREPARED_QUEUE_OFFSET,
        transaction_identity(half).to_string(),
    );
    if let Some(times) = check_times {
        copy.properties
            .insert(keys::TRANSACTION_CHECK_TIMES, times.to_string());
    }
    copy.sys_flag = half.sys_flag;
    copy.born_timestamp = half.born_timestamp;
    copy.born_host = half.born_host;
    copy.store_host = half.store_host;
    copy.reconsume_times = half.reconsume_times;
    copy.prepared_transaction_offset = half.prepared_transaction_offset;
    copy
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn producer_message() -> MessageExt {
        let mut msg = MessageExt::new("Orders", Bytes::from_static(b"body"));
        msg.queue_id = 3;
        msg.sys_flag = sysflag::TRANSACTION_PREPARED_TYPE | sysflag::COMPRESSED;
        msg.properties.insert(keys::TRANSACTION_PREPARED, "true");
        msg.properties.insert(keys::PRODUCER_GROUP, "pg");
        msg.properties.insert(keys::UNIQ_KEY, "U1");
        msg
    }

    fn header(group: &str, queue_offset: i64, msg_id: &str) -> EndTransactionRequestHeader {
        EndTransactionRequestHeader {
            topic: None,
            producer_group: group.to_owned(),
            tran_state_table_offset: queue_offset,
            commit_log_offset: 0,
            commit_or_rollback: sysflag::TRANSACTION_COMMIT_TYPE,
            from_transaction_check: None,
            msg_id: msg_id.to_owned(),
            transaction_id: None,
            rpc: Default::default(),
        }
    }

    #[test]
    fn half_detection() {
        let msg = producer_message();
        assert!(is_half_send(&msg.properties, 0, 0));
        assert!(is_half_send(
            &Properties::new(),
            sysflag::TRANSACTION_PREPARED_TYPE,
            0
        ));
        assert!(!is_half_send(&Properties::new(), 0, 0));
        let mut retry = msg.properties.clone();
        retry.insert(keys::DELAY_TIME_LEVEL, "3");
        assert!(!is_half_send(&retry, 0, 1));
        assert!(is_half_send(&retry, 0, 0));
        let upper: Properties = [(keys::TRANSACTION_PREPARED, "TRUE")].into_iter().collect();
        assert!(is_half_send(&upper, 0, 0));
    }

    #[test]
    fn into_half_then_commit_restores_the_message() {
        let mut half = producer_message();
        into_half(&mut half);
        assert_eq!((half.topic.as_str(), half.queue_id), (TRANS_HALF_TOPIC, 0));
        assert_eq!(half.properties.get(keys::REAL_TOPIC), Some("Orders"));
        assert_eq!(half.properties.get(keys::REAL_QUEUE_ID), Some("3"));
        assert_eq!(half.properties.get(keys::TRANSACTION_ID), Some("U1"));
        assert_eq!(
            sysflag::transaction_type(half.sys_flag),
            sysflag::TRANSACTION_NOT_TYPE
        );
        assert_ne!(half.sys_flag & sysflag::COMPRESSED, 0);

        half.commit_log_offset = 4096;
        half.queue_offset = 7;
        let committed = committed_message(&half).unwrap();
        assert_eq!(
            (committed.topic.as_str(), committed.queue_id),
            ("Orders", 3)
        );
        assert_eq!(
            sysflag::transaction_type(committed.sys_flag),
            sysflag::TRANSACTION_COMMIT_TYPE
        );
        assert_eq!(committed.prepared_transaction_offset, 4096);
        // Apache 5.3.3 keeps the half's bookkeeping in the committed record.
        assert_eq!(
            committed.properties.get(keys::TRANSACTION_PREPARED),
            Some("true")
        );
        assert_eq!(committed.properties.get(keys::REAL_TOPIC), Some("Orders"));
        assert_eq!(committed.properties.get(keys::REAL_QUEUE_ID), Some("3"));
        assert_eq!(committed.properties.get(keys::TRANSACTION_ID), Some("U1"));
        assert_eq!(committed.properties.get(keys::PRODUCER_GROUP), Some("pg"));
        assert_eq!(committed.uniq_key(), Some("U1"));

        // A copy's TRAN_PREPARED_QUEUE_OFFSET is Comet's own and stays in the half queue; the
        // check count travels on, as in Apache.
        let copy = renewed_half(&half, Some(1));
        let committed = committed_message(&copy).unwrap();
        assert_eq!(
            committed
                .properties
                .get(keys::TRANSACTION_PREPARED_QUEUE_OFFSET),
            None
        );
        assert_eq!(
            committed.properties.get(keys::TRANSACTION_CHECK_TIMES),
            Some("1")
        );
    }

    #[test]
    fn validation_names_the_mismatch() {
        let mut half = producer_message();
        into_half(&mut half);
        half.queue_offset = 5;
        assert_eq!(validate_for_end(&half, &header("pg", 5, "U1")), Ok(()));
        assert!(matches!(
            validate_for_end(&half, &header("other", 5, "U1")),
            Err(HalfError::ProducerGroup { .. })
        ));
        assert!(matches!(
            validate_for_end(&half, &header("pg", 6, "U1")),
            Err(HalfError::QueueOffset {
                stored: 5,
                requested: 6
            })
        ));
        assert!(matches!(
            validate_for_end(&half, &header("pg", 5, "U2")),
            Err(HalfError::MsgId { .. })
        ));
        let offset_id = half.offset_msg_id();
        assert_eq!(
            validate_for_end(&half, &header("pg", 5, &offset_id)),
            Ok(())
        );
        let normal = producer_message();
        assert!(matches!(
            validate_for_end(&normal, &header("pg", 0, "U1")),
            Err(HalfError::NotHalf { .. })
        ));
    }

    #[test]
    fn renewed_copies_keep_the_transaction_identity() {
        let mut half = producer_message();
        into_half(&mut half);
        half.queue_offset = 9;
        half.born_timestamp = 1234;
        assert_eq!(check_times(&half), 0);
        let copy = renewed_half(&half, Some(1));
        assert_eq!(transaction_identity(&copy), 9);
        assert_eq!(check_times(&copy), 1);
        assert_eq!(copy.born_timestamp, 1234);
        let mut moved = copy.clone();
        moved.queue_offset = 20;
        let again = renewed_half(&moved, Some(2));
        assert_eq!(transaction_identity(&again), 9);
        assert_eq!(check_times(&again), 2);

        let mut bad = half.clone();
        bad.properties.insert(keys::TRANSACTION_CHECK_TIMES, "x");
        assert_eq!(check_times(&bad), i32::MAX);
    }

    #[test]
    fn immunity_time() {
        let mut half = producer_message();
        assert_eq!(check_immunity_millis(&half, 6000), None);
        half.properties
            .insert(keys::CHECK_IMMUNITY_TIME_IN_SECONDS, "20");
        assert_eq!(check_immunity_millis(&half, 6000), Some(20_000));
        half.properties
            .insert(keys::CHECK_IMMUNITY_TIME_IN_SECONDS, "soon");
        assert_eq!(check_immunity_millis(&half, 6000), Some(6000));
    }

    #[test]
    fn missing_real_topic_is_an_error() {
        let mut half = MessageExt::new(TRANS_HALF_TOPIC, Bytes::new());
        half.properties.insert(keys::REAL_TOPIC, "T");
        half.properties.insert(keys::REAL_QUEUE_ID, "-1");
        assert_eq!(committed_message(&half), Err(HalfError::NoRealTopic));
    }
}
