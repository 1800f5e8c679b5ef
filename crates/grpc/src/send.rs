//! SendMessage: each v2 message becomes the message a RocketMQ producer would send (the
//! properties it would set), stored by the broker's write path ([`comet_broker::core::put::send`]), so
//! a gRPC send passes the same checks and store path as a remoting one.
//!
//! Field mapping (as Apache's proxy maps them): `message_id` → UNIQ_KEY, `tag` → TAGS, `keys` →
//! KEYS (space-joined), `message_group` → `__SHARDINGKEY`, `delivery_attempt` → RECONSUME_TIME
//! (0 when absent), `born_host` → `__BORNHOST` (the peer when empty), `born_timestamp` →
//! BORN_TIMESTAMP, `trace_context` → TRACE_CONTEXT, user properties as given, GZIP encoding →
//! the COMPRESSED sys flag. The producer group is the topic name, stored as PGROUP. The client's queue id is ignored: a message
//! with a group goes to the queue Guava's `consistentHash(group.hashCode(), writeQueues)` picks
//! (so one group stays on one queue, on the queue a Java proxy would pick), others to a queue the
//! broker picks.
//!
//! `delivery_timestamp` → TIMER_DELIVER_MS: the broker's timer wheel parks the message until
//! then, and the entry carries its recall handle. As on Apache's proxy, a time more than
//! [`MAX_DELAY`] (one day) ahead is refused with ILLEGAL_DELIVERY_TIME; the declared DELAY type
//! alone changes nothing. The message's type, read from the properties it is stored with, must be
//! one its topic takes (see [`message_type`]).
//!
//! A TRANSACTION message is stored as a half (`TRAN_MSG=true`, the PREPARED sys flag; its
//! `orphaned_transaction_recovery_duration` → CHECK_IMMUNITY_TIME_IN_SECONDS, at most one hour,
//! else BAD_REQUEST), and where it lies is remembered for EndTransaction
//! ([`super::transaction`]).
//!
//! Each message of a request gets its own entry.

use std::net::SocketAddr;
use std::time::Duration;

use comet_grpc_proto::v2;
use comet_protocol::code::ResponseCode;
use comet_protocol::message::id::{UniqIdGenerator, decode_offset_msg_id};
use comet_protocol::message::properties::keys;
use comet_protocol::message::{Properties, sysflag};
use comet_protocol::naming::AUTO_CREATE_TOPIC_KEY_TOPIC;
use comet_store::Commit;

use super::transaction::{GrpcTransactions, HalfLocation};
use super::{message_type, status};
use comet_broker::config::DEFAULT_TOPIC_QUEUE_NUMS;
use comet_broker::context::BrokerContext;
use comet_broker::core::put::{self, ProducedMessage, Stored};
/// Property of the trace context a client propagates.
pub const TRACE_CONTEXT: &str = "TRACE_CONTEXT";
/// Most user properties one message may carry.
pub const MAX_USER_PROPERTIES: usize = 128;
/// Most bytes of user properties, tag and keys together.
pub const MAX_PROPERTIES_BYTES: usize = 16 * 1024;
/// A message group must be shorter than this many bytes.
pub const MAX_MESSAGE_GROUP_BYTES: usize = 64;
/// How far ahead a `delivery_timestamp` may lie (Apache's proxy `maxDelayTimeMills`); the timer
/// wheel's own bound (`timerMaxDelaySec`) applies after it.
pub const MAX_DELAY: Duration = Duration::from_secs(24 * 60 * 60);
/// Longest orphaned-transaction recovery duration a message may ask for (Apache's proxy
/// `maxTransactionRecoverySecond`).
pub const MAX_TRANSACTION_RECOVERY: Duration = Duration::from_secs(60 * 60);

/// Property keys the broker or the client library set: a user property may not use them.
pub(crate) const RESERVED_KEYS: &[&str] = &[
    keys::TAGS,
    keys::KEYS,
    keys::WAIT_STORE_MSG_OK,
    keys::DELAY_TIME_LEVEL,
    keys::RETRY_TOPIC,
    keys::REAL_TOPIC,
    keys::REAL_QUEUE_ID,
    keys::TRANSACTION_PREPARED,
    keys::PRODUCER_GROUP,
    keys::TRANSACTION_PREPARED_QUEUE_OFFSET,
    keys::TRANSACTION_ID,
    keys::TRANSACTION_CHECK_TIMES,
    keys::CHECK_IMMUNITY_TIME_IN_SECONDS,
    keys::UNIQ_KEY,
    keys::MIN_OFFSET,
    keys::MAX_OFFSET,
    keys::RECONSUME_TIME,
    keys::MAX_RECONSUME_TIMES,
    keys::CONSUME_START_TIMESTAMP,
    keys::ORIGIN_MESSAGE_ID,
    keys::CLUSTER,
    keys::MSG_REGION,
    keys::TRACE_SWITCH,
    keys::INSTANCE_ID,
    keys::CORRELATION_ID,
    keys::MESSAGE_REPLY_TO_CLIENT,
    keys::MESSAGE_TTL,
    keys::REPLY_MESSAGE_ARRIVE_TIME,
    keys::PUSH_REPLY_TIME,
    keys::MESSAGE_TYPE,
    keys::BUYER_ID,
    keys::TRANSFER_FLAG,
    keys::CORRECTION_FLAG,
    keys::MQ2_FLAG,
    keys::EXTEND_UNIQ_INFO,
    keys::POP_CK,
    keys::POP_CK_OFFSET,
    keys::FIRST_POP_TIME,
    keys::TIMER_DELIVER_MS,
    keys::TIMER_DELAY_SEC,
    keys::TIMER_DELAY_MS,
    keys::TIMER_OUT_MS,
    keys::TIMER_ENQUEUE_MS,
    keys::TIMER_DEQUEUE_MS,
    keys::TIMER_ROLL_TIMES,
    keys::TIMER_DEL_UNIQKEY,
    keys::TIMER_DELAY_LEVEL,
    keys::INNER_NUM,
    keys::INNER_BASE,
    keys::SHARDING_KEY,
    keys::DLQ_ORIGIN_TOPIC,
    keys::DLQ_ORIGIN_MESSAGE_ID,
    keys::BORN_HOST,
    keys::BORN_TIMESTAMP,
    TRACE_CONTEXT,
];

/// Stores the messages of `request` (see the module docs).
pub async fn send_message(
    ctx: &BrokerContext,
    uniq_ids: &UniqIdGenerator,
    transactions: &GrpcTransactions,
    peer: SocketAddr,
    request: v2::SendMessageRequest,
) -> v2::SendMessageResponse {
    let Some(first) = request.messages.first() else {
        return refused(status::of(v2::Code::BadRequest, "no message to send"));
    };
    let topic = topic_of(first).to_owned();
    if request.messages.iter().any(|m| topic_of(m) != topic) {
        return refused(status::of(
            v2::Code::BadRequest,
            "the messages of one request must share their topic",
        ));
    }
    let mut entries = Vec::with_capacity(request.messages.len());
    for message in request.messages {
        entries.push(send_one(ctx, uniq_ids, transactions, peer, message).await);
    }
    let first_code = entries
        .first()
        .and_then(|e| e.status.as_ref())
        .map(|s| s.code);
    let status = if entries
        .iter()
        .all(|e| e.status.as_ref().map(|s| s.code) == first_code)
    {
        entries.first().and_then(|e| e.status.clone())
    } else {
        Some(status::of(
            v2::Code::MultipleResults,
            "the messages had different results",
        ))
    };
    v2::SendMessageResponse { status, entries }
}

fn refused(status: v2::Status) -> v2::SendMessageResponse {
    v2::SendMessageResponse {
        status: Some(status),
        entries: Vec::new(),
    }
}

fn topic_of(message: &v2::Message) -> &str {
    message.topic.as_ref().map_or("", |t| t.name.as_str())
}

async fn send_one(
    ctx: &BrokerContext,
    uniq_ids: &UniqIdGenerator,
    transactions: &GrpcTransactions,
    peer: SocketAddr,
    message: v2::Message,
) -> v2::SendResultEntry {
    let message_id = message
        .system_properties
        .as_ref()
        .map(|p| p.message_id.clone())
        .unwrap_or_default();
    let failed = |status: v2::Status| v2::SendResultEntry {
        status: Some(status),
        message_id: message_id.clone(),
        ..v2::SendResultEntry::default()
    };
    let produced = match to_produced(ctx, peer, message) {
        Ok(produced) => produced,
        Err(status) => return failed(status),
    };
    let topic = produced.topic.clone();
    // No connection's writer commits the append before the answer: it is committed at once,
    // and the answer waits here for the flush or the slaves as configured.
    let mut stored = match put::send(ctx, uniq_ids, produced, Commit::Now).await {
        Ok(stored) => stored,
        Err(refusal) => return failed(status::of(status::code_of(refusal.code), refusal.remark)),
    };
    put::wait_durable(ctx, &mut stored).await;
    if stored.code != ResponseCode::Success {
        let remark = stored
            .remark
            .map_or_else(|| stored.code.name().to_owned(), str::to_owned);
        return failed(status::of(status::code_of(stored.code), remark));
    }
    let transaction_id = stored
        .transaction_id
        .clone()
        .unwrap_or_else(|| message_id.clone());
    if stored.half {
        remember_half(transactions, &topic, &transaction_id, &message_id, &stored);
    }
    v2::SendResultEntry {
        status: Some(status::ok()),
        transaction_id,
        message_id,
        offset: stored.queue_offset,
        recall_handle: stored.recall_handle.unwrap_or_default(),
    }
}

/// Remembers where the half just stored for transaction `transaction_id` lies, so that
/// EndTransaction can name it (see [`super::transaction`]).
fn remember_half(
    transactions: &GrpcTransactions,
    topic: &str,
    transaction_id: &str,
    message_id: &str,
    sent: &Stored,
) {
    match decode_offset_msg_id(&sent.msg_id) {
        Ok((_, commit_log_offset)) => transactions.remember(
            topic,
            transaction_id,
            HalfLocation {
                commit_log_offset,
                tran_state_table_offset: sent.queue_offset,
                message_id: message_id.to_owned(),
            },
        ),
        Err(e) => tracing::warn!(msg_id = %sent.msg_id, error = %e,
            "a half's offset message id is unreadable: its transaction cannot be ended over gRPC"),
    }
}

/// The message a producer sending `message` hands the broker, or the status refusing it.
pub fn to_produced(
    ctx: &BrokerContext,
    peer: SocketAddr,
    message: v2::Message,
) -> Result<ProducedMessage, v2::Status> {
    let topic = topic_of(&message).to_owned();
    let system = message.system_properties.unwrap_or_default();
    check_body(ctx, &message.body)?;
    if system.message_id.trim().is_empty() {
        return Err(status::of(
            v2::Code::IllegalMessageId,
            "message_id is blank",
        ));
    }
    let deliver_at = system
        .delivery_timestamp
        .as_ref()
        .map(timestamp_millis)
        .map(check_delivery_time)
        .transpose()?;
    let transactional = system.message_type() == v2::MessageType::Transaction;
    let recovery_secs = match &system.orphaned_transaction_recovery_duration {
        Some(d) if transactional => Some(check_recovery(d)?),
        _ => None,
    };
    check_tag_keys_group(&system)?;
    check_user_properties(&system, &message.user_properties)?;
    let topic_config = ctx.topic_config.select(&topic);

    let mut properties = Properties::new();
    for (key, value) in &message.user_properties {
        properties.insert(key, value);
    }
    properties.insert(keys::UNIQ_KEY, &system.message_id);
    properties.insert(keys::PRODUCER_GROUP, &topic);
    if let Some(tag) = &system.tag {
        properties.insert(keys::TAGS, tag);
    }
    if !system.keys.is_empty() {
        properties.insert(keys::KEYS, system.keys.join(" "));
    }
    if let Some(group) = &system.message_group {
        properties.insert(keys::SHARDING_KEY, group);
    }
    properties.insert(
        keys::RECONSUME_TIME,
        system.delivery_attempt.unwrap_or(0).to_string(),
    );
    let born_host = if system.born_host.is_empty() {
        peer.to_string()
    } else {
        system.born_host.clone()
    };
    properties.insert(keys::BORN_HOST, born_host);
    let born_timestamp = system
        .born_timestamp
        .as_ref()
        .map_or_else(comet_protocol::time::now_millis, timestamp_millis);
    properties.insert(keys::BORN_TIMESTAMP, born_timestamp.to_string());
    if let Some(trace) = &system.trace_context {
        properties.insert(TRACE_CONTEXT, trace);
    }
    if let Some(at) = deliver_at {
        properties.insert(keys::TIMER_DELIVER_MS, at.to_string());
    }
    if transactional {
        properties.insert(keys::TRANSACTION_PREPARED, "true");
    }
    if let Some(secs) = recovery_secs {
        properties.insert(keys::CHECK_IMMUNITY_TIME_IN_SECONDS, secs.to_string());
    }
    if let Some(config) = &topic_config
        && ctx.live_config().enable_topic_message_type_check
    {
        message_type::check(&topic, config, &properties)?;
    }

    let queue_id = match (&system.message_group, &topic_config) {
        (Some(group), Some(config)) if config.write_queue_nums > 0 => {
            consistent_hash(i64::from(java_string_hash(group)), config.write_queue_nums)
        }
        _ => -1,
    };
    let mut sys_flag = if system.body_encoding() == v2::Encoding::Gzip {
        sysflag::COMPRESSED
    } else {
        0
    };
    if transactional {
        sys_flag |= sysflag::TRANSACTION_PREPARED_TYPE;
    }
    let properties_len = properties.encode().len();
    Ok(ProducedMessage {
        topic,
        queue_id,
        body: message.body.into(),
        flag: 0,
        sys_flag,
        born_timestamp,
        born_host: peer,
        properties,
        properties_len,
        reconsume_times: system.delivery_attempt.unwrap_or(0),
        max_reconsume_times: None,
        unit_mode: false,
        default_topic: AUTO_CREATE_TOPIC_KEY_TOPIC.to_owned(),
        default_topic_queue_nums: DEFAULT_TOPIC_QUEUE_NUMS,
        batch: false,
    })
}

fn check_body(ctx: &BrokerContext, body: &[u8]) -> Result<(), v2::Status> {
    if body.is_empty() {
        return Err(status::of(
            v2::Code::MessageBodyEmpty,
            "the message body is empty",
        ));
    }
    let max = ctx.live_config().max_message_size;
    if body.len() > max {
        return Err(status::of(
            v2::Code::MessageBodyTooLarge,
            format!(
                "the message body of {} bytes is over maxMessageSize {max}",
                body.len()
            ),
        ));
    }
    Ok(())
}

/// Whether `s` holds a control character (which also guards the property separators).
fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

fn check_tag_keys_group(system: &v2::SystemProperties) -> Result<(), v2::Status> {
    if let Some(tag) = &system.tag
        && (tag.trim().is_empty() || tag.contains('|') || has_control(tag))
    {
        return Err(status::of(
            v2::Code::IllegalMessageTag,
            format!("tag {tag:?} is blank or holds '|' or a control character"),
        ));
    }
    if let Some(key) = system
        .keys
        .iter()
        .find(|k| k.trim().is_empty() || has_control(k))
    {
        return Err(status::of(
            v2::Code::IllegalMessageKey,
            format!("key {key:?} is blank or holds a control character"),
        ));
    }
    if let Some(group) = &system.message_group
        && (group.trim().is_empty() || group.len() >= MAX_MESSAGE_GROUP_BYTES || has_control(group))
    {
        return Err(status::of(
            v2::Code::IllegalMessageGroup,
            format!(
                "message group {group:?} is blank, holds a control character or is not under {MAX_MESSAGE_GROUP_BYTES} bytes"
            ),
        ));
    }
    Ok(())
}

fn check_user_properties(
    system: &v2::SystemProperties,
    user: &std::collections::HashMap<String, String>,
) -> Result<(), v2::Status> {
    if let Some(key) = user.keys().find(|k| RESERVED_KEYS.contains(&k.as_str())) {
        return Err(status::of(
            v2::Code::IllegalMessagePropertyKey,
            format!("property {key} is reserved"),
        ));
    }
    if let Some((key, _)) = user
        .iter()
        .find(|(k, v)| k.trim().is_empty() || has_control(k) || has_control(v))
    {
        return Err(status::of(
            v2::Code::IllegalMessagePropertyKey,
            format!("property {key:?} is blank or holds a control character"),
        ));
    }
    let bytes = user.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
        + system.tag.as_ref().map_or(0, String::len)
        + system.keys.iter().map(String::len).sum::<usize>();
    if user.len() > MAX_USER_PROPERTIES || bytes > MAX_PROPERTIES_BYTES {
        return Err(status::of(
            v2::Code::MessagePropertiesTooLarge,
            format!(
                "{} properties of {bytes} bytes (with tag and keys) exceed {MAX_USER_PROPERTIES} properties or {MAX_PROPERTIES_BYTES} bytes",
                user.len()
            ),
        ));
    }
    Ok(())
}

/// The orphaned-transaction recovery duration in seconds, refused above
/// [`MAX_TRANSACTION_RECOVERY`] with BAD_REQUEST (as Apache's proxy refuses it).
fn check_recovery(duration: &prost_types::Duration) -> Result<i64, v2::Status> {
    let secs = duration.seconds.max(0);
    let max = i64::try_from(MAX_TRANSACTION_RECOVERY.as_secs()).unwrap_or(i64::MAX);
    if secs > max {
        return Err(status::of(
            v2::Code::BadRequest,
            format!("the orphaned transaction recovery duration of {secs} s is over {max} s"),
        ));
    }
    Ok(secs)
}

/// Refuses a delivery time more than [`MAX_DELAY`] ahead; returns it.
fn check_delivery_time(deliver_at_ms: i64) -> Result<i64, v2::Status> {
    let max = i64::try_from(MAX_DELAY.as_millis()).unwrap_or(i64::MAX);
    if deliver_at_ms.saturating_sub(comet_protocol::time::now_millis()) > max {
        return Err(status::of(
            v2::Code::IllegalDeliveryTime,
            format!("the delivery time is more than {max} ms ahead"),
        ));
    }
    Ok(deliver_at_ms)
}

fn timestamp_millis(t: &prost_types::Timestamp) -> i64 {
    t.seconds
        .saturating_mul(1000)
        .saturating_add(i64::from(t.nanos / 1_000_000))
}

/// Java's `String.hashCode` (over UTF-16 code units, wrapping).
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// Guava's `Hashing.consistentHash(input, buckets)`: the bucket in `0..buckets` for `input`,
/// moving as few inputs as possible when `buckets` grows.
pub fn consistent_hash(input: i64, buckets: i32) -> i32 {
    if buckets <= 1 {
        return 0;
    }
    // Guava's linear congruential generator, seeded with the input.
    let mut state = input;
    let mut next_double = || {
        state = state
            .wrapping_mul(2_862_933_555_777_941_757)
            .wrapping_add(1);
        // (int) (state >>> 33), then + 1, as Java computes them.
        let high = ((state as u64) >> 33) as i32;
        f64::from(high.wrapping_add(1)) / f64::from(1u32 << 31)
    };
    let mut candidate: i32 = 0;
    loop {
        let next = (f64::from(candidate + 1) / next_double()) as i64;
        if (0..i64::from(buckets)).contains(&next) {
            candidate = i32::try_from(next).unwrap_or(0);
        } else {
            return candidate;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_string_hash_matches_java() {
        // "hello".hashCode() and "".hashCode() in Java.
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash(""), 0);
        // Overflowing: "polygenelubricants".hashCode() == Integer.MIN_VALUE.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
    }

    #[test]
    fn consistent_hash_stays_in_range_and_is_stable() {
        for input in [-5i64, 0, 1, 99_162_322, i64::from(i32::MIN)] {
            for buckets in 1..20 {
                let b = consistent_hash(input, buckets);
                assert!((0..buckets).contains(&b));
                assert_eq!(b, consistent_hash(input, buckets));
            }
        }
        assert_eq!(consistent_hash(7, 1), 0);
    }

    #[test]
    fn consistent_hash_matches_guava() {
        // Hashing.consistentHash(group.hashCode(), buckets) as Guava 32 computes it.
        let guava = [
            ("order-42", [0, 3, 3, 10]),
            ("g", [1, 1, 1, 12]),
            ("hello", [0, 3, 4, 8]),
            ("polygenelubricants", [1, 2, 2, 2]),
        ];
        for (group, buckets) in guava {
            for (n, want) in [2, 4, 8, 16].into_iter().zip(buckets) {
                let got = consistent_hash(i64::from(java_string_hash(group)), n);
                assert_eq!(got, want, "{group} over {n} buckets");
            }
        }
    }

    #[test]
    fn tags_keys_and_groups_are_checked() {
        let mut system = v2::SystemProperties {
            tag: Some("a|b".into()),
            ..Default::default()
        };
        assert_eq!(
            check_tag_keys_group(&system).unwrap_err().code(),
            v2::Code::IllegalMessageTag
        );
        system.tag = Some("TagA".into());
        system.keys = vec!["k1".into(), " ".into()];
        assert_eq!(
            check_tag_keys_group(&system).unwrap_err().code(),
            v2::Code::IllegalMessageKey
        );
        system.keys = vec!["k1".into()];
        system.message_group = Some("g".repeat(MAX_MESSAGE_GROUP_BYTES));
        assert_eq!(
            check_tag_keys_group(&system).unwrap_err().code(),
            v2::Code::IllegalMessageGroup
        );
        system.message_group = Some("g".into());
        assert!(check_tag_keys_group(&system).is_ok());
    }

    #[test]
    fn reserved_and_oversized_properties_are_refused() {
        let system = v2::SystemProperties::default();
        let reserved = [("UNIQ_KEY".to_owned(), "x".to_owned())].into();
        assert_eq!(
            check_user_properties(&system, &reserved)
                .unwrap_err()
                .code(),
            v2::Code::IllegalMessagePropertyKey
        );
        let separator = [("a".to_owned(), "x\u{1}y".to_owned())].into();
        assert_eq!(
            check_user_properties(&system, &separator)
                .unwrap_err()
                .code(),
            v2::Code::IllegalMessagePropertyKey
        );
        let many = (0..=MAX_USER_PROPERTIES)
            .map(|i| (format!("k{i}"), "v".to_owned()))
            .collect();
        assert_eq!(
            check_user_properties(&system, &many).unwrap_err().code(),
            v2::Code::MessagePropertiesTooLarge
        );
        let fine = [("a".to_owned(), "b".to_owned())].into();
        assert!(check_user_properties(&system, &fine).is_ok());
    }
}
