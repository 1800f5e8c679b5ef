//! Storing a message: the broker's one write path.
//!
//! A producer's message ([`ProducedMessage`], from a remoting send or a gRPC SendMessage) passes
//! RocketMQ's checks in RocketMQ's order — broker write permission, topic name, send-forbidden
//! system topics, topic lookup with auto-creation from the `defaultTopic` template, queue id,
//! topic write permission, retry-topic rules (a `%RETRY%group` message that exhausted its
//! reconsume budget goes to `%DLQ%group`), then message size and properties size — and is stored
//! as it is, as a half message (transactional), or rewritten for the timer wheel or the delay
//! queue. Each refusal carries the code and remark a Java broker would answer with.
//!
//! [`put_message`] is the same store entry for the broker's own re-puts (send-back, DLQ, delay
//! delivery, timer delivery, POP checkpoints and retries, transaction commits): the timer rewrite
//! (timer messages) and the delay-level rewrite (DELAY ≥ 1 → `SCHEDULE_TOPIC_XXXX`, queue
//! `level − 1`, REAL_TOPIC/REAL_QID saved), after which the store gives the ConsumeQueue unit
//! the delivery time as tags code.
//!
//! What "stored" means is the caller's to wait for: [`Stored::hold`] says how far the CommitLog
//! must be flushed (SYNC_FLUSH) or replicated (SYNC_MASTER) before the message is as durable as
//! configured; a connection's writer waits for it before it writes the answer, and
//! [`wait_durable`] waits for it where there is no such writer.

use std::net::SocketAddr;

use bytes::Bytes;
use comet_protocol::ResponseHold;
use comet_protocol::body::{TopicConfig, TopicFilterType, perm};
use comet_protocol::code::ResponseCode;
use comet_protocol::limits::MAX_PROPERTIES_LEN;
use comet_protocol::message::id::UniqIdGenerator;
use comet_protocol::message::properties::keys;
use comet_protocol::message::{MessageExt, Properties, sysflag};
use comet_protocol::naming::{
    DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, SCHEDULE_TOPIC, dlq_topic,
    is_not_allowed_send_topic, validate_topic,
};
use comet_protocol::time::now_millis;
use comet_store::{Commit, MessageExtBatch, PutMessageResult, PutMessageStatus};

use super::Refusal;
use crate::config::BrokerConfig;
use crate::context::BrokerContext;
use crate::metrics::traffic::MessageType;
use crate::transaction;

/// Queues of a dead-letter topic.
pub const DLQ_NUMS_PER_GROUP: i32 = 1;
/// TopicConfig `topicSysFlag` bit of a unit topic.
pub const TOPIC_SYS_FLAG_UNIT: i32 = 0x1;

/// A message as a producer hands it to the broker.
#[derive(Debug, Clone)]
pub struct ProducedMessage {
    pub topic: String,
    /// The queue asked for; negative: the broker picks one.
    pub queue_id: i32,
    /// The body, or a batch's encoded messages when `batch`.
    pub body: Bytes,
    pub flag: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    /// The properties (a batch's properties for the whole batch).
    pub properties: Properties,
    /// Length of the properties as the producer encoded them (bounded by
    /// [`MAX_PROPERTIES_LEN`]).
    pub properties_len: usize,
    pub reconsume_times: i32,
    /// The producer's retry budget for a `%RETRY%` message; `None`: the group's `retryMaxTimes`.
    pub max_reconsume_times: Option<i32>,
    /// Topic created on the fly is a unit topic.
    pub unit_mode: bool,
    /// The template of a topic created on the fly (`TBW102`).
    pub default_topic: String,
    pub default_topic_queue_nums: i32,
    /// The body holds a batch of messages.
    pub batch: bool,
}

/// A message the store took: what the producer is told.
#[derive(Debug, Clone)]
pub struct Stored {
    /// SUCCESS, or the code of a message stored but not as durable as configured
    /// (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE).
    pub code: ResponseCode,
    pub remark: Option<&'static str>,
    /// Offset message id (store host and CommitLog offset) of the message, or of a batch's
    /// messages joined by commas.
    pub msg_id: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    /// The producer's unique id of the message (UNIQ_KEY), which is also a half's transaction id.
    pub transaction_id: Option<String>,
    /// Whether the message was stored as a half message (transactional send).
    pub half: bool,
    /// A timer message's recall handle.
    pub recall_handle: Option<String>,
    /// How far the store must go before the message is as durable as configured; see the
    /// module docs.
    pub hold: Option<ResponseHold>,
}

/// A random queue below `n` (a producer that sent `queueId < 0`).
fn random_queue(n: i32) -> i32 {
    use std::hash::{BuildHasher, Hasher};
    if n <= 1 {
        return 0;
    }
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_i64(now_millis());
    i32::try_from(h.finish() % u64::from(n.unsigned_abs())).unwrap_or(0)
}

/// Stores a producer's message (see the module docs). `commit` says whether the append is
/// committed now or left to the caller's response fence.
pub async fn send(
    ctx: &BrokerContext,
    uniq_ids: &UniqIdGenerator,
    msg: ProducedMessage,
    commit: Commit,
) -> Result<Stored, Refusal> {
    if ctx.config.is_slave() {
        return Err(slave_refusal(ctx, &msg.topic));
    }
    let (topic_config, queue_id) = check_topic_and_queue(ctx, &msg)?;
    if msg.batch {
        send_batch(ctx, msg, &topic_config, queue_id, commit).await
    } else {
        send_single(ctx, uniq_ids, msg, &topic_config, queue_id, commit).await
    }
}

/// RocketMQ's `msgCheck`: permission, topic name, topic existence (auto-creating it), queue id.
/// Returns the topic config and the queue to write (random if the client sent a negative one).
fn check_topic_and_queue(
    ctx: &BrokerContext,
    msg: &ProducedMessage,
) -> Result<(TopicConfig, i32), Refusal> {
    let config = &ctx.config;
    let topic = msg.topic.as_str();
    let broker_permission = ctx.broker_permission();
    if !perm::is_writeable(broker_permission) {
        return Err(Refusal::new(
            ResponseCode::NoPermission,
            format!(
                "the broker[{}] sending message is forbidden (brokerPermission={broker_permission})",
                config.broker_name
            ),
        ));
    }
    if let Err(e) = validate_topic(topic) {
        return Err(Refusal::new(ResponseCode::InvalidParameter, e.to_string()));
    }
    if is_not_allowed_send_topic(topic) {
        return Err(Refusal::new(
            ResponseCode::NoPermission,
            format!("Sending message to topic[{topic}] is forbidden."),
        ));
    }
    let topic_config = match ctx.topic_config.select(topic) {
        Some(t) => t,
        None => create_on_send(ctx, msg)?,
    };
    let queue_nums = topic_config
        .read_queue_nums
        .max(topic_config.write_queue_nums);
    if msg.queue_id >= queue_nums {
        return Err(Refusal::new(
            ResponseCode::InvalidParameter,
            format!(
                "request queueId[{}] is illegal, topic[{topic}] has {} write / {} read queues; producer {}",
                msg.queue_id,
                topic_config.write_queue_nums,
                topic_config.read_queue_nums,
                msg.born_host
            ),
        ));
    }
    if !perm::is_writeable(topic_config.perm) {
        return Err(Refusal::new(
            ResponseCode::NoPermission,
            format!(
                "the topic[{topic}] sending message is forbidden (perm {})",
                perm::to_text(topic_config.perm)
            ),
        ));
    }
    let queue_id = if msg.queue_id < 0 {
        random_queue(topic_config.write_queue_nums)
    } else {
        msg.queue_id
    };
    Ok((topic_config, queue_id))
}

/// A topic created by its first send, from the producer's template (or as a retry topic).
fn create_on_send(ctx: &BrokerContext, msg: &ProducedMessage) -> Result<TopicConfig, Refusal> {
    let topic = msg.topic.as_str();
    let topic_sys_flag = if msg.unit_mode {
        TOPIC_SYS_FLAG_UNIT
    } else {
        0
    };
    let mut created = ctx.topic_config.create_topic_in_send_message_method(
        topic,
        &msg.default_topic,
        msg.default_topic_queue_nums,
        topic_sys_flag,
    );
    if created.is_none() && topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        created = ctx.topic_config.create_topic_in_send_message_back(
            topic,
            1,
            perm::PERM_READ_WRITE,
            topic_sys_flag,
        );
    }
    created.ok_or_else(|| {
        let config = &ctx.config;
        Refusal::new(
            ResponseCode::TopicNotExist,
            format!(
                "topic[{topic}] not exist, apply first please! Create it with the \
                 UPDATE_AND_CREATE_TOPIC admin command (mqadmin updateTopic -t {topic} -c {}), \
                 or enable autoCreateTopicEnable on broker {}",
                config.broker_cluster_name, config.broker_name
            ),
        )
    })
}

/// The sys flag to store: the producer's bits, MULTI_TAGS for MULTI_TAG topics, and the host
/// family bits derived from the sockets.
fn stored_sys_flag(
    header_flag: i32,
    topic: &TopicConfig,
    born: SocketAddr,
    store: SocketAddr,
) -> i32 {
    let mut flag = header_flag;
    if topic.topic_filter_type == TopicFilterType::MultiTag {
        flag |= sysflag::MULTI_TAGS;
    }
    sysflag::with_host_families(flag, born.is_ipv6(), store.is_ipv6())
}

fn check_sizes(ctx: &BrokerContext, body_len: usize, props_len: usize) -> Result<(), Refusal> {
    let max = ctx.live_config().max_message_size;
    if body_len > max {
        return Err(Refusal::new(
            ResponseCode::MessageIllegal,
            format!("the message body size {body_len} is larger than maxMessageSize {max}"),
        ));
    }
    if props_len > MAX_PROPERTIES_LEN {
        return Err(Refusal::new(
            ResponseCode::MessageIllegal,
            format!(
                "the message properties length {props_len} exceeds the limit {MAX_PROPERTIES_LEN}"
            ),
        ));
    }
    Ok(())
}

async fn send_single(
    ctx: &BrokerContext,
    uniq_ids: &UniqIdGenerator,
    produced: ProducedMessage,
    topic_config: &TopicConfig,
    queue_id: i32,
    commit: Commit,
) -> Result<Stored, Refusal> {
    check_sizes(ctx, produced.body.len(), produced.properties_len)?;
    let mut properties = produced.properties;
    properties.remove_transient();
    let half =
        transaction::half::is_half_send(&properties, produced.sys_flag, produced.reconsume_times);
    let topic = produced.topic.clone();
    let mut msg = MessageExt::new(produced.topic, produced.body);
    msg.queue_id = queue_id;
    msg.flag = produced.flag;
    msg.born_timestamp = produced.born_timestamp;
    msg.born_host = produced.born_host;
    msg.store_host = ctx.store_host;
    msg.reconsume_times = produced.reconsume_times;
    msg.sys_flag = stored_sys_flag(
        produced.sys_flag,
        topic_config,
        produced.born_host,
        ctx.store_host,
    );
    if properties.get(keys::UNIQ_KEY).is_none_or(str::is_empty) {
        properties.insert(keys::UNIQ_KEY, uniq_ids.next_id());
    }
    properties.extend(broker_properties(&ctx.live_config()));
    msg.properties = properties;
    handle_retry_and_dlq(ctx, produced.max_reconsume_times, &topic, &mut msg)?;
    let uniq_key = msg.uniq_key().map(str::to_owned);
    let wait = msg.properties.get(keys::WAIT_STORE_MSG_OK) != Some("false");
    let kind = MessageType::of(&msg.properties);
    let mut recall_handle = None;
    let result = if half {
        // The half waits in RMQ_SYS_TRANS_HALF_TOPIC for END_TRANSACTION (no delay rewrite:
        // a delay applies to the committed message).
        transaction::half::into_half(&mut msg);
        ctx.store.put_message_with(msg, commit).await
    } else {
        // The timer rewrite runs before the put here (the put sees a timer-topic message and
        // leaves it): the answer to a parked message carries its recall handle.
        let parked = ctx
            .timer
            .transform(&mut msg, &ctx.live_config(), now_millis);
        match parked {
            Ok(parked) => {
                if parked {
                    recall_handle = crate::timer::recall_handle(&ctx.config.broker_name, &msg);
                }
                put_message_with(ctx, msg, commit).await
            }
            Err(status) => PutMessageResult::failed(status),
        }
    };
    ctx.traffic.record_put(&topic, kind, &result);
    if recall_handle.is_some() && result.status.is_written() {
        ctx.traffic.record_timer(&topic, false);
    }
    let mut stored = stored(ctx, result, queue_id, uniq_key, wait)?;
    stored.half = half;
    if stored.code == ResponseCode::Success {
        stored.recall_handle = recall_handle;
    }
    Ok(stored)
}

/// Retry-topic rules (`handleRetryAndDLQ`): the group must exist; a message whose reconsume count
/// exceeded the budget goes to `%DLQ%group` (created on demand, one queue).
fn handle_retry_and_dlq(
    ctx: &BrokerContext,
    max_reconsume_times: Option<i32>,
    sent_topic: &str,
    msg: &mut MessageExt,
) -> Result<(), Refusal> {
    let Some(group) = msg.topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) else {
        return Ok(());
    };
    let group = group.to_owned();
    let Some(group_config) = ctx.subscription_groups.find_or_create(&group) else {
        return Err(Refusal::new(
            ResponseCode::SubscriptionGroupNotExist,
            format!("subscription group not exist, {group}"),
        ));
    };
    let max_reconsume_times = max_reconsume_times.unwrap_or(group_config.retry_max_times);
    // An orderly consumer holds queue locks: its failed messages must not come back out of order
    // through the retry topic, so they go straight to the DLQ (as RocketMQ's broker does).
    let orderly_locked = ctx.rebalance_locks.has_live_lock(&group);
    if msg.reconsume_times > max_reconsume_times || orderly_locked {
        let dlq = dlq_topic(&group);
        let Some(dlq_config) = ctx.topic_config.create_topic_in_send_message_back(
            &dlq,
            DLQ_NUMS_PER_GROUP,
            perm::PERM_READ_WRITE,
            0,
        ) else {
            return Err(Refusal::new(
                ResponseCode::SystemError,
                format!("topic[{dlq}] not exist"),
            ));
        };
        tracing::info!(group = %group, reconsume_times = msg.reconsume_times, max_reconsume_times,
            orderly_locked, "retry budget exhausted or orderly group; message goes to {dlq}");
        let origin = msg.properties.get(keys::RETRY_TOPIC).unwrap_or(sent_topic);
        ctx.traffic.record_dlq(&group, origin);
        msg.topic = dlq;
        msg.queue_id = random_queue(dlq_config.write_queue_nums);
        msg.properties.remove(keys::DELAY_TIME_LEVEL);
    }
    Ok(())
}

async fn send_batch(
    ctx: &BrokerContext,
    produced: ProducedMessage,
    topic_config: &TopicConfig,
    queue_id: i32,
    commit: Commit,
) -> Result<Stored, Refusal> {
    let topic = produced.topic.as_str();
    if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) || topic.starts_with(DLQ_GROUP_TOPIC_PREFIX) {
        return Err(Refusal::new(
            ResponseCode::MessageIllegal,
            format!("batch request does not support retry group {topic}"),
        ));
    }
    let batch_properties = &produced.properties;
    if transaction::half::is_half_send(batch_properties, produced.sys_flag, 0) {
        return Err(Refusal::new(
            ResponseCode::MessageIllegal,
            "batch message does not support transaction: send transactional messages one by one",
        ));
    }
    check_sizes(ctx, produced.body.len(), produced.properties_len)?;
    let mut batch = MessageExtBatch::from_body(
        topic,
        queue_id,
        &produced.body,
        produced.born_host,
        ctx.store_host,
    )
    .map_err(|e| Refusal::new(ResponseCode::MessageIllegal, format!("bad batch body: {e}")))?;
    if batch.messages.is_empty() {
        return Err(Refusal::new(
            ResponseCode::MessageIllegal,
            "bad batch body: no message",
        ));
    }
    let live = ctx.live_config();
    let appended = batch_member_properties(&live, batch_properties);
    for entry in &mut batch.messages {
        entry.properties.remove_transient();
        entry.properties.extend(appended.iter().copied());
    }
    batch.sys_flag = stored_sys_flag(
        produced.sys_flag,
        topic_config,
        produced.born_host,
        ctx.store_host,
    );
    batch.born_timestamp = produced.born_timestamp;
    batch.reconsume_times = produced.reconsume_times;
    let batch_uniq_key = batch_properties.get(keys::UNIQ_KEY).map(str::to_owned);
    let wait = batch_properties.get(keys::WAIT_STORE_MSG_OK) != Some("false");
    let result = ctx.store.put_messages_with(batch, commit).await;
    ctx.traffic
        .record_put(topic, MessageType::of(batch_properties), &result);
    stored(ctx, result, queue_id, batch_uniq_key, wait)
}

/// What the producer is told of a store outcome: where the message went and how long its
/// answer waits, or the refusal (RocketMQ `handlePutMessageResult`).
fn stored(
    ctx: &BrokerContext,
    result: PutMessageResult,
    queue_id: i32,
    uniq_key: Option<String>,
    wait: bool,
) -> Result<Stored, Refusal> {
    let (code, remark) = status_response_code(result.status);
    let Some(append) = result.append.filter(|_| result.status.is_written()) else {
        if result.status == PutMessageStatus::WheelTimerMsgIllegal {
            return Err(Refusal::new(
                code,
                crate::timer::illegal_remark(&ctx.live_config()),
            ));
        }
        return Err(Refusal::new(
            code,
            remark.unwrap_or("the message was not stored"),
        ));
    };
    // SYNC_MASTER: the answer waits until enough brokers hold the record (and, under SYNC_FLUSH,
    // it is on the master's disk), or answers FLUSH_SLAVE_TIMEOUT after `slaveTimeout`.
    // SYNC_FLUSH alone: until the CommitLog is flushed past the record, or FLUSH_DISK_TIMEOUT
    // after `syncFlushTimeout`.
    let hold = if wait && ctx.replication.waits_for_slaves() && code == ResponseCode::Success {
        let end = append.wrote_offset + i64::try_from(append.wrote_bytes).unwrap_or(i64::MAX);
        Some(ResponseHold {
            until: u64::try_from(end).unwrap_or(0),
            expired_code: ResponseCode::FlushSlaveTimeout.code(),
        })
    } else {
        result.flush_until.map(|until| ResponseHold {
            until: u64::try_from(until).unwrap_or(0),
            expired_code: ResponseCode::FlushDiskTimeout.code(),
        })
    };
    Ok(Stored {
        code,
        remark,
        msg_id: append.msg_id,
        queue_id,
        queue_offset: append.logics_offset,
        transaction_id: uniq_key,
        half: false,
        recall_handle: None,
        hold,
    })
}

/// Waits, where no connection's writer does, until a message sent with [`Commit::Now`] is as
/// durable as configured ([`Stored::hold`]); past the flush or replication timeout the outcome
/// becomes that timeout's code, as a remoting producer's answer would.
pub async fn wait_durable(ctx: &BrokerContext, stored: &mut Stored) {
    // The slave connections send what was just written, as after a connection's commit.
    ctx.replication.master.wake(ctx.store.max_phy_offset());
    let Some(hold) = stored.hold.take() else {
        return;
    };
    ctx.store.flush_pending();
    let mut released = ctx
        .replication
        .released()
        .unwrap_or_else(|| ctx.store.flushed_watch());
    let timeout = ctx
        .replication
        .slave_timeout()
        .unwrap_or_else(|| ctx.store.sync_flush_timeout());
    let reached = tokio::time::timeout(timeout, released.wait_for(|&at| at >= hold.until)).await;
    if !matches!(reached, Ok(Ok(_))) {
        stored.code = ResponseCode::from(hold.expired_code);
    }
}

/// What the broker adds to the properties of every message it accepts from a producer, in this
/// order after the producer's own: MSG_REGION (`regionId`), CLUSTER (`brokerClusterName`) and
/// TRACE_ON (`traceOn`) — the values the send response announces. Apache RocketMQ 5.3.3 stores
/// the same three on every message (see the pull responses in
/// `crates/protocol/tests/fixtures/java-5.3.3-json`). Re-puts of stored messages (send-back,
/// DLQ, delay delivery, commit) copy them with the rest of the properties, and setting a key
/// replaces it in place, so a message never carries two.
/// `live` is the configuration in force ([`BrokerContext::live_config`]).
pub fn broker_properties(live: &BrokerConfig) -> [(&'static str, &str); 3] {
    [
        (keys::MSG_REGION, live.region_id.as_str()),
        (keys::CLUSTER, live.broker_cluster_name.as_str()),
        (keys::TRACE_SWITCH, bool_text(live.trace_on)),
    ]
}

/// Java's `Boolean.toString`, without a `String` per message.
pub fn bool_text(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

/// What every member of a batch gets appended: MSG_REGION, CLUSTER, the batch-level WAIT (when
/// the producer sent one) and TRACE_ON. Apache appends its whole batch-level properties string to
/// each member; Comet leaves out the batch-level UNIQ_KEY, so every member keeps the id its
/// producer gave it (and that the producer reports in its SendResult).
pub fn batch_member_properties<'a>(
    live: &'a BrokerConfig,
    batch_properties: &'a Properties,
) -> Vec<(&'static str, &'a str)> {
    let [region, cluster, trace] = broker_properties(live);
    let mut appended = vec![region, cluster];
    if let Some(wait) = batch_properties.get(keys::WAIT_STORE_MSG_OK) {
        appended.push((keys::WAIT_STORE_MSG_OK, wait));
    }
    appended.push(trace);
    appended
}

/// Stores a message, rewriting it for the timer wheel first when it carries a timer property
/// (a timer message) or for the delay queue when it carries `DELAY ≥ 1`.
pub async fn put_message(ctx: &BrokerContext, msg: MessageExt) -> PutMessageResult {
    put_message_with(ctx, msg, Commit::Now).await
}

/// [`put_message`], committed now or left for the response fence.
async fn put_message_with(
    ctx: &BrokerContext,
    mut msg: MessageExt,
    commit: Commit,
) -> PutMessageResult {
    let timer = ctx
        .timer
        .transform(&mut msg, &ctx.live_config(), now_millis);
    if let Err(status) = timer {
        return PutMessageResult::failed(status);
    }
    apply_delay_level(&mut msg, ctx.schedule.max_delay_level());
    ctx.store.put_message_with(msg, commit).await
}

/// [`put_message`] of a delay or timer message falling due: no client waits for it, so it is
/// never held for a SYNC_FLUSH (see [`comet_store::MessageStore::put_message_unawaited`]).
pub async fn put_due_message(ctx: &BrokerContext, mut msg: MessageExt) -> PutMessageResult {
    let timer = ctx
        .timer
        .transform(&mut msg, &ctx.live_config(), now_millis);
    if let Err(status) = timer {
        return PutMessageResult::failed(status);
    }
    apply_delay_level(&mut msg, ctx.schedule.max_delay_level());
    ctx.store.put_message_unawaited(msg).await
}

/// The delay-level rewrite: a non-transactional or commit message with `DELAY ≥ 1` is
/// parked in `SCHEDULE_TOPIC_XXXX` queue `level − 1` (level clamped to `max_level`), its real
/// topic and queue saved in REAL_TOPIC/REAL_QID. Returns whether it was rewritten.
pub fn apply_delay_level(msg: &mut MessageExt, max_level: i32) -> bool {
    let tran = sysflag::transaction_type(msg.sys_flag);
    if tran != sysflag::TRANSACTION_NOT_TYPE && tran != sysflag::TRANSACTION_COMMIT_TYPE {
        return false;
    }
    let Some(level) = msg
        .properties
        .get(keys::DELAY_TIME_LEVEL)
        .and_then(|l| l.trim().parse::<i32>().ok())
    else {
        return false;
    };
    if level <= 0 || max_level <= 0 {
        return false;
    }
    let level = level.min(max_level);
    msg.properties
        .insert(keys::DELAY_TIME_LEVEL, level.to_string());
    msg.properties.insert(keys::REAL_TOPIC, msg.topic.clone());
    msg.properties
        .insert(keys::REAL_QUEUE_ID, msg.queue_id.to_string());
    msg.topic = SCHEDULE_TOPIC.to_owned();
    msg.queue_id = level - 1;
    true
}

/// Response code and remark for a store outcome (RocketMQ `handlePutMessageResult`).
pub fn status_response_code(status: PutMessageStatus) -> (ResponseCode, Option<&'static str>) {
    match status {
        PutMessageStatus::PutOk => (ResponseCode::Success, None),
        PutMessageStatus::FlushDiskTimeout => (ResponseCode::FlushDiskTimeout, None),
        PutMessageStatus::FlushSlaveTimeout => (ResponseCode::FlushSlaveTimeout, None),
        PutMessageStatus::SlaveNotAvailable => (ResponseCode::SlaveNotAvailable, None),
        PutMessageStatus::CreateMappedFileFailed => (
            ResponseCode::SystemError,
            Some("create mapped file failed, server is busy or broken."),
        ),
        PutMessageStatus::MessageIllegal | PutMessageStatus::PropertiesSizeExceeded => (
            ResponseCode::MessageIllegal,
            Some(
                "the message is illegal, maybe msg body or properties length not matched, or the topic name is too long",
            ),
        ),
        PutMessageStatus::ServiceNotAvailable => (
            ResponseCode::ServiceNotAvailable,
            Some(
                "service not available now. It may be caused by one of the following reasons: the broker's disk is full, messages are put to the slave, message store has been shut down, etc.",
            ),
        ),
        PutMessageStatus::OsPageCacheBusy => (
            ResponseCode::SystemBusy,
            Some("[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
        ),
        PutMessageStatus::LmqConsumeQueueNumExceeded => (
            ResponseCode::SystemError,
            Some(
                "[LMQ_CONSUME_QUEUE_NUM_EXCEEDED]broker config enableLmq and enableMultiDispatch, lmq consumeQueue num exceed maxLmqConsumeQueueNum config num",
            ),
        ),
        PutMessageStatus::UnknownError => (ResponseCode::SystemError, Some("UNKNOWN_ERROR")),
        // The remark names the configured maximum: see [`crate::timer::illegal_remark`].
        PutMessageStatus::WheelTimerMsgIllegal => (ResponseCode::MessageIllegal, None),
        PutMessageStatus::WheelTimerNotEnable => (
            ResponseCode::SystemError,
            Some("accurate timer message is not enabled, timerWheelEnable is false"),
        ),
    }
}

/// RocketMQ's name of a put status (the failure remark).
pub fn put_status_name(status: PutMessageStatus) -> &'static str {
    match status {
        PutMessageStatus::PutOk => "PUT_OK",
        PutMessageStatus::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
        PutMessageStatus::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
        PutMessageStatus::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
        PutMessageStatus::ServiceNotAvailable => "SERVICE_NOT_AVAILABLE",
        PutMessageStatus::CreateMappedFileFailed => "CREATE_MAPPED_FILE_FAILED",
        PutMessageStatus::MessageIllegal => "MESSAGE_ILLEGAL",
        PutMessageStatus::PropertiesSizeExceeded => "PROPERTIES_SIZE_EXCEEDED",
        PutMessageStatus::OsPageCacheBusy => "OS_PAGE_CACHE_BUSY",
        PutMessageStatus::UnknownError => "UNKNOWN_ERROR",
        PutMessageStatus::LmqConsumeQueueNumExceeded => "LMQ_CONSUME_QUEUE_NUM_EXCEEDED",
        PutMessageStatus::WheelTimerMsgIllegal => "WHEEL_TIMER_MSG_ILLEGAL",
        PutMessageStatus::WheelTimerNotEnable => "WHEEL_TIMER_NOT_ENABLE",
    }
}

/// A slave stores only what its master sends: a send to a topic it knows is refused as a
/// Java slave's store refuses it (SERVICE_NOT_AVAILABLE), one to a topic it does not know with
/// TOPIC_NOT_EXIST (a slave creates no topic: its topics come from its master).
fn slave_refusal(ctx: &BrokerContext, topic: &str) -> Refusal {
    if ctx.topic_config.select(topic).is_none() {
        return Refusal::new(
            ResponseCode::TopicNotExist,
            format!("topic[{topic}] not exist, apply first please!"),
        );
    }
    let (code, remark) = status_response_code(PutMessageStatus::ServiceNotAvailable);
    Refusal::new(code, remark.unwrap_or("messages are put to the slave"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_rewrite_follows_the_fact_sheet() {
        let mut msg = MessageExt::new("T", Bytes::new());
        msg.queue_id = 3;
        msg.properties.insert(keys::DELAY_TIME_LEVEL, "30");
        assert!(apply_delay_level(&mut msg, 18));
        assert_eq!((msg.topic.as_str(), msg.queue_id), (SCHEDULE_TOPIC, 17));
        assert_eq!(msg.properties.get(keys::REAL_TOPIC), Some("T"));
        assert_eq!(msg.properties.get(keys::REAL_QUEUE_ID), Some("3"));
        assert_eq!(msg.properties.get(keys::DELAY_TIME_LEVEL), Some("18"));

        for level in ["0", "-1", "x"] {
            let mut m = MessageExt::new("T", Bytes::new());
            m.properties.insert(keys::DELAY_TIME_LEVEL, level);
            assert!(!apply_delay_level(&mut m, 18));
            assert_eq!(m.topic, "T");
        }
        let mut prepared = MessageExt::new("T", Bytes::new());
        prepared.sys_flag = sysflag::TRANSACTION_PREPARED_TYPE;
        prepared.properties.insert(keys::DELAY_TIME_LEVEL, "1");
        assert!(!apply_delay_level(&mut prepared, 18));
    }

    #[test]
    fn status_mapping() {
        assert_eq!(
            status_response_code(PutMessageStatus::FlushDiskTimeout)
                .0
                .code(),
            10
        );
        assert_eq!(
            status_response_code(PutMessageStatus::ServiceNotAvailable)
                .0
                .code(),
            14
        );
        assert_eq!(
            status_response_code(PutMessageStatus::PropertiesSizeExceeded)
                .0
                .code(),
            13
        );
        assert_eq!(status_response_code(PutMessageStatus::PutOk).0.code(), 0);
    }

    #[test]
    fn random_queue_in_range() {
        for n in [0, 1, 4, 8] {
            for _ in 0..32 {
                let q = random_queue(n);
                assert!(q >= 0 && q < n.max(1));
            }
        }
    }
}
