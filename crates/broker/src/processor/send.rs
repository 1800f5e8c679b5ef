//! SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).
//!
//! The checks run in RocketMQ's order, so a client sees the same code and a remark of the same
//! meaning as from a Java broker: header decoding (V1 keys for 10, V2 keys for 310/320; batch or
//! single decided by the `batch`/`m` flag), broker write permission, topic name, send-forbidden
//! system topics, topic lookup with auto-creation from the `defaultTopic` template, queue id,
//! topic write permission, then retry-topic rules (a `%RETRY%group` message that exhausted its
//! reconsume budget goes to `%DLQ%group`), then message size and properties size.
//! A single send marked transactional (TRAN_MSG=true or the PREPARED sysflag) is stored as a half
//! message (see [`crate::transaction`]) after the same checks on its real topic; a transactional
//! batch is refused, as RocketMQ does.
//!
//! The response is written only after the store acknowledged the message — under SYNC_FLUSH that
//! is after the msync — so "SEND_OK" always means "durable as configured". A oneway send is
//! stored the same way and not answered (the transport drops the response).
//!
//! An answered send leaves its record pending in the CommitLog ([`Commit::Deferred`]) and the
//! connection commits before it writes responses ([`super::fence::CommitBeforeReply`], the
//! server's [`comet_remoting::ResponseFence`]): the sends read from a connection in one go are written with one `pwrite`,
//! and still no answer leaves before its message is in the page cache. A oneway send has no
//! answer to wait for, so it commits at once. Under SYNC_FLUSH the send does not wait for the
//! flush on a task of its own either: its answer carries a [`ResponseHold`] on the record's end
//! offset, and the connection's writer keeps it until the flush thread reports the CommitLog
//! flushed that far, so one group commit releases its answers with one wake-up and one write.
//!
//! [`put_message`] is also the store entry for the broker's own re-puts (send-back, DLQ, delay
//! delivery, timer delivery): it applies the timer rewrite ([`crate::timer`]) and the delay-level rewrite (DELAY ≥ 1 → `SCHEDULE_TOPIC_XXXX`, queue
//! `level − 1`, REAL_TOPIC/REAL_QID saved), after which the store gives the ConsumeQueue unit the
//! delivery time as tags code.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use comet_protocol::body::{TopicConfig, TopicFilterType, perm};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{SendMessageRequestHeader, SendMessageResponseHeader};
use comet_protocol::limits::MAX_PROPERTIES_LEN;
use comet_protocol::message::id::UniqIdGenerator;
use comet_protocol::message::properties::keys;
use comet_protocol::message::{MessageExt, Properties, sysflag};
use comet_protocol::time::now_millis;
use comet_protocol::{ProtocolError, RemotingCommand, ResponseHold};
use comet_remoting::{Channel, RequestProcessor};
use comet_store::{Commit, MessageExtBatch, PutMessageResult, PutMessageStatus};
use futures::future::BoxFuture;

use crate::config::BrokerConfig;
use crate::context::BrokerContext;
use crate::metrics::traffic::MessageType;
use crate::processor::{Rejection, error_response, reject};
use crate::transaction;
use comet_protocol::naming::{
    DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, SCHEDULE_TOPIC, dlq_topic,
    is_not_allowed_send_topic, validate_topic,
};

/// Request version from which the header's `maxReconsumeTimes` overrides the group's
/// `retryMaxTimes` (`MQVersion.V3_4_9`).
pub const MAX_RECONSUME_TIMES_MIN_VERSION: i32 = 121;
/// Queues of a dead-letter topic.
pub const DLQ_NUMS_PER_GROUP: i32 = 1;
/// TopicConfig `topicSysFlag` bit of a unit topic.
pub const TOPIC_SYS_FLAG_UNIT: i32 = 0x1;

/// Handles the three send codes.
pub struct SendMessageProcessor {
    ctx: Arc<BrokerContext>,
    uniq_ids: Arc<UniqIdGenerator>,
}

impl SendMessageProcessor {
    pub fn new(ctx: Arc<BrokerContext>) -> Self {
        let uniq_ids = Arc::new(UniqIdGenerator::with_ip(ctx.store_host.ip()));
        SendMessageProcessor { ctx, uniq_ids }
    }
}

impl RequestProcessor for SendMessageProcessor {
    fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let ctx = Arc::clone(&self.ctx);
        let uniq_ids = Arc::clone(&self.uniq_ids);
        let peer = channel.remote_addr();
        Box::pin(async move {
            let mut response = handle_send(&ctx, &uniq_ids, peer, &request).await;
            // The Java client reads both keys unconditionally on some codes; always send them.
            let ext = response.ext_mut();
            let live = ctx.live_config();
            if !ext.contains_key("MSG_REGION") {
                ext.insert("MSG_REGION", &live.region_id);
            }
            if !ext.contains_key("TRACE_ON") {
                ext.insert("TRACE_ON", bool_text(live.trace_on));
            }
            Some(response)
        })
    }
}

/// The V1 name of a V2 header key, for remarks a human can act on.
fn v1_field_name(key: &str) -> &str {
    match key {
        "a" => "producerGroup",
        "b" => "topic",
        "c" => "defaultTopic",
        "d" => "defaultTopicQueueNums",
        "e" => "queueId",
        "f" => "sysFlag",
        "g" => "bornTimestamp",
        "h" => "flag",
        "i" => "properties",
        "j" => "reconsumeTimes",
        "k" => "unitMode",
        "l" => "maxReconsumeTimes",
        "m" => "batch",
        "n" => "brokerName",
        other => other,
    }
}

fn header_error(code: i32, err: &ProtocolError) -> RemotingCommand {
    let v2 = code != RequestCode::SendMessage.code();
    let remark = match err {
        ProtocolError::MissingField(key) if v2 => {
            format!(
                "bad send header: field `{key}` ({}) is missing",
                v1_field_name(key)
            )
        }
        ProtocolError::MalformedField { field, value } if v2 => format!(
            "bad send header: field `{field}` ({}) has malformed value {value:?}",
            v1_field_name(field)
        ),
        other => format!("bad send header: {other}"),
    };
    error_response(ResponseCode::SystemError, remark)
}

/// A random queue below `n` (a producer that sent `queueId < 0`).
fn random_queue(n: i32) -> i32 {
    use std::hash::{BuildHasher, Hasher};
    if n <= 1 {
        return 0;
    }
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_i64(comet_protocol::time::now_millis());
    i32::try_from(h.finish() % u64::from(n.unsigned_abs())).unwrap_or(0)
}

async fn handle_send(
    ctx: &BrokerContext,
    uniq_ids: &UniqIdGenerator,
    peer: SocketAddr,
    request: &RemotingCommand,
) -> RemotingCommand {
    let empty = comet_protocol::ExtFields::new();
    let ext = request.ext_fields.as_ref().unwrap_or(&empty);
    let header = match SendMessageRequestHeader::decode_for_code(request.code, ext) {
        Ok(h) => h,
        Err(e) => return header_error(request.code, &e),
    };
    if ctx.config.is_slave() {
        return slave_refusal(ctx, &header.topic);
    }
    let (topic_config, queue_id) = match check_topic_and_queue(ctx, &header, peer) {
        Ok(v) => v,
        Err(rsp) => return *rsp,
    };
    if header.is_batch() {
        send_batch(ctx, &header, topic_config, queue_id, peer, request).await
    } else {
        send_single(
            ctx,
            uniq_ids,
            &header,
            topic_config,
            queue_id,
            peer,
            request,
        )
        .await
    }
}

/// Stores the message of a send request built inside the broker (the gRPC endpoint translates
/// each `SendMessage` into one) through the same checks and store path as a remoting send, and
/// returns the response a remoting producer would get. There is no connection whose writer could
/// commit the append before the answer leaves, so the request is handled as a oneway send is:
/// committed at once (see [`CommitBeforeReply`] for the deferred path).
pub async fn send_in_process(
    ctx: &BrokerContext,
    uniq_ids: &UniqIdGenerator,
    peer: SocketAddr,
    mut request: RemotingCommand,
) -> RemotingCommand {
    request.mark_oneway();
    let mut response = handle_send(ctx, uniq_ids, peer, &request).await;
    // The slave connections send what was just written, as after a connection's commit.
    ctx.replication.master.wake(ctx.store.max_phy_offset());
    if let Some(hold) = response.hold.take() {
        // SYNC_FLUSH or SYNC_MASTER: the answer waits as a connection's writer would make it
        // wait, and turns into the hold's timeout code when the flush or the slaves are late.
        ctx.store.flush_pending();
        let mut released = ctx
            .replication
            .released()
            .unwrap_or_else(|| ctx.store.flushed_watch());
        let timeout = ctx
            .replication
            .slave_timeout()
            .unwrap_or_else(|| ctx.store.sync_flush_timeout());
        let reached =
            tokio::time::timeout(timeout, released.wait_for(|&at| at >= hold.until)).await;
        if !matches!(reached, Ok(Ok(_))) {
            response.code = hold.expired_code;
        }
    }
    response
}

/// RocketMQ's `msgCheck`: permission, topic name, topic existence (auto-creating it), queue id.
/// Returns the topic config and the queue to write (random if the client sent a negative one).
fn check_topic_and_queue(
    ctx: &BrokerContext,
    header: &SendMessageRequestHeader,
    peer: SocketAddr,
) -> Result<(TopicConfig, i32), Rejection> {
    let config = &ctx.config;
    let topic = header.topic.as_str();
    let broker_permission = ctx.broker_permission();
    if !perm::is_writeable(broker_permission) {
        return Err(reject(
            ResponseCode::NoPermission,
            format!(
                "the broker[{}] sending message is forbidden (brokerPermission={broker_permission})",
                config.broker_name
            ),
        ));
    }
    if let Err(e) = validate_topic(topic) {
        return Err(reject(ResponseCode::InvalidParameter, e.to_string()));
    }
    if is_not_allowed_send_topic(topic) {
        return Err(reject(
            ResponseCode::NoPermission,
            format!("Sending message to topic[{topic}] is forbidden."),
        ));
    }
    let topic_config = match ctx.topic_config.select(topic) {
        Some(t) => t,
        None => {
            let topic_sys_flag = if header.unit_mode.unwrap_or(false) {
                TOPIC_SYS_FLAG_UNIT
            } else {
                0
            };
            let mut created = ctx.topic_config.create_topic_in_send_message_method(
                topic,
                &header.default_topic,
                header.default_topic_queue_nums,
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
            match created {
                Some(t) => t,
                None => {
                    return Err(reject(
                        ResponseCode::TopicNotExist,
                        format!(
                            "topic[{topic}] not exist, apply first please! Create it with the \
                             UPDATE_AND_CREATE_TOPIC admin command (mqadmin updateTopic -t {topic} -c {}), \
                             or enable autoCreateTopicEnable on broker {}",
                            config.broker_cluster_name, config.broker_name
                        ),
                    ));
                }
            }
        }
    };
    let queue_nums = topic_config
        .read_queue_nums
        .max(topic_config.write_queue_nums);
    if header.queue_id >= queue_nums {
        return Err(reject(
            ResponseCode::InvalidParameter,
            format!(
                "request queueId[{}] is illegal, topic[{topic}] has {} write / {} read queues; producer {peer}",
                header.queue_id, topic_config.write_queue_nums, topic_config.read_queue_nums
            ),
        ));
    }
    if !perm::is_writeable(topic_config.perm) {
        return Err(reject(
            ResponseCode::NoPermission,
            format!(
                "the topic[{topic}] sending message is forbidden (perm {})",
                perm::to_text(topic_config.perm)
            ),
        ));
    }
    let queue_id = if header.queue_id < 0 {
        random_queue(topic_config.write_queue_nums)
    } else {
        header.queue_id
    };
    Ok((topic_config, queue_id))
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

fn body_of(request: &RemotingCommand) -> Bytes {
    request.body.clone().unwrap_or_default()
}

fn check_sizes(
    ctx: &BrokerContext,
    body_len: usize,
    properties: Option<&str>,
) -> Result<(), Rejection> {
    let max = ctx.live_config().max_message_size;
    if body_len > max {
        return Err(reject(
            ResponseCode::MessageIllegal,
            format!("the message body size {body_len} is larger than maxMessageSize {max}"),
        ));
    }
    let props_len = properties.map_or(0, str::len);
    if props_len > MAX_PROPERTIES_LEN {
        return Err(reject(
            ResponseCode::MessageIllegal,
            format!(
                "the message properties length {props_len} exceeds the limit {MAX_PROPERTIES_LEN}"
            ),
        ));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn send_single(
    ctx: &BrokerContext,
    uniq_ids: &UniqIdGenerator,
    header: &SendMessageRequestHeader,
    topic_config: TopicConfig,
    queue_id: i32,
    peer: SocketAddr,
    request: &RemotingCommand,
) -> RemotingCommand {
    let body = body_of(request);
    if let Err(rsp) = check_sizes(ctx, body.len(), header.properties.as_deref()) {
        return *rsp;
    }
    let mut properties = header
        .properties
        .as_deref()
        .map(Properties::parse)
        .unwrap_or_default();
    properties.remove_transient();
    let half = transaction::half::is_half_send(
        &properties,
        header.sys_flag,
        header.reconsume_times.unwrap_or(0),
    );
    let mut msg = MessageExt::new(header.topic.clone(), body);
    msg.queue_id = queue_id;
    msg.flag = header.flag;
    msg.born_timestamp = header.born_timestamp;
    msg.born_host = peer;
    msg.store_host = ctx.store_host;
    msg.reconsume_times = header.reconsume_times.unwrap_or(0);
    msg.sys_flag = stored_sys_flag(header.sys_flag, &topic_config, peer, ctx.store_host);
    if properties.get(keys::UNIQ_KEY).is_none_or(str::is_empty) {
        properties.insert(keys::UNIQ_KEY, uniq_ids.next_id());
    }
    properties.extend(broker_properties(&ctx.live_config()));
    msg.properties = properties;
    let response_queue_id = msg.queue_id;

    if let Err(rsp) = handle_retry_and_dlq(ctx, header, request.version, &mut msg) {
        return *rsp;
    }
    let uniq_key = msg.uniq_key().map(str::to_owned);
    let wait = msg.properties.get(keys::WAIT_STORE_MSG_OK) != Some("false");
    let kind = MessageType::of(&msg.properties);
    let mut recall_handle = None;
    let result = if half {
        // The half waits in RMQ_SYS_TRANS_HALF_TOPIC for END_TRANSACTION (no delay rewrite:
        // a delay applies to the committed message).
        transaction::half::into_half(&mut msg);
        ctx.store.put_message_with(msg, commit_for(request)).await
    } else {
        // The timer rewrite runs before the put here (the put sees a timer-topic message and
        // leaves it): the answer to a parked message carries its recall handle.
        match ctx.timer.transform(&mut msg, now_millis) {
            Ok(parked) => {
                if parked {
                    recall_handle = crate::timer::recall_handle(&ctx.config.broker_name, &msg);
                }
                put_message_with(ctx, msg, commit_for(request)).await
            }
            Err(status) => PutMessageResult::failed(status),
        }
    };
    ctx.traffic.record_put(&header.topic, kind, &result);
    if recall_handle.is_some() && result.status.is_written() {
        ctx.traffic.record_timer(&header.topic, false);
    }
    let mut response = send_response(ctx, result, response_queue_id, uniq_key, wait);
    if let Some(handle) = recall_handle.filter(|_| response.code == ResponseCode::Success.code()) {
        response.ext_mut().insert("recallHandle", &handle);
    }
    response
}

/// Retry-topic rules (`handleRetryAndDLQ`): the group must exist; a message whose reconsume count
/// exceeded the budget goes to `%DLQ%group` (created on demand, one queue).
fn handle_retry_and_dlq(
    ctx: &BrokerContext,
    header: &SendMessageRequestHeader,
    version: i32,
    msg: &mut MessageExt,
) -> Result<(), Rejection> {
    let Some(group) = msg.topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) else {
        return Ok(());
    };
    let group = group.to_owned();
    let Some(group_config) = ctx.subscription_groups.find_or_create(&group) else {
        return Err(reject(
            ResponseCode::SubscriptionGroupNotExist,
            format!("subscription group not exist, {group}"),
        ));
    };
    let max_reconsume_times = match header.max_reconsume_times {
        Some(max) if version >= MAX_RECONSUME_TIMES_MIN_VERSION => max,
        _ => group_config.retry_max_times,
    };
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
            return Err(reject(
                ResponseCode::SystemError,
                format!("topic[{dlq}] not exist"),
            ));
        };
        tracing::info!(group = %group, reconsume_times = msg.reconsume_times, max_reconsume_times,
            orderly_locked, "retry budget exhausted or orderly group; message goes to {dlq}");
        let origin = msg
            .properties
            .get(keys::RETRY_TOPIC)
            .unwrap_or(&header.topic);
        ctx.traffic.record_dlq(&group, origin);
        msg.topic = dlq;
        msg.queue_id = random_queue(dlq_config.write_queue_nums);
        msg.properties.remove(keys::DELAY_TIME_LEVEL);
    }
    Ok(())
}

async fn send_batch(
    ctx: &BrokerContext,
    header: &SendMessageRequestHeader,
    topic_config: TopicConfig,
    queue_id: i32,
    peer: SocketAddr,
    request: &RemotingCommand,
) -> RemotingCommand {
    let topic = header.topic.as_str();
    if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) || topic.starts_with(DLQ_GROUP_TOPIC_PREFIX) {
        return error_response(
            ResponseCode::MessageIllegal,
            format!("batch request does not support retry group {topic}"),
        );
    }
    let batch_properties = header
        .properties
        .as_deref()
        .map(Properties::parse)
        .unwrap_or_default();
    if transaction::half::is_half_send(&batch_properties, header.sys_flag, 0) {
        return error_response(
            ResponseCode::MessageIllegal,
            "batch message does not support transaction: send transactional messages one by one",
        );
    }
    let body = body_of(request);
    if let Err(rsp) = check_sizes(ctx, body.len(), header.properties.as_deref()) {
        return *rsp;
    }
    let mut batch = match MessageExtBatch::from_body(topic, queue_id, &body, peer, ctx.store_host) {
        Ok(b) => b,
        Err(e) => {
            return error_response(ResponseCode::MessageIllegal, format!("bad batch body: {e}"));
        }
    };
    if batch.messages.is_empty() {
        return error_response(ResponseCode::MessageIllegal, "bad batch body: no message");
    }
    let live = ctx.live_config();
    let appended = batch_member_properties(&live, &batch_properties);
    for entry in &mut batch.messages {
        entry.properties.remove_transient();
        entry.properties.extend(appended.iter().copied());
    }
    batch.sys_flag = stored_sys_flag(header.sys_flag, &topic_config, peer, ctx.store_host);
    batch.born_timestamp = header.born_timestamp;
    batch.reconsume_times = header.reconsume_times.unwrap_or(0);
    let batch_uniq_key = batch_properties.get(keys::UNIQ_KEY).map(str::to_owned);
    let wait = batch_properties.get(keys::WAIT_STORE_MSG_OK) != Some("false");
    let result = ctx
        .store
        .put_messages_with(batch, commit_for(request))
        .await;
    ctx.traffic
        .record_put(topic, MessageType::of(&batch_properties), &result);
    send_response(ctx, result, queue_id, batch_uniq_key, wait)
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
fn bool_text(b: bool) -> &'static str {
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
/// (see [`crate::timer`]) or for the delay queue when it carries `DELAY ≥ 1`.
pub async fn put_message(ctx: &BrokerContext, msg: MessageExt) -> PutMessageResult {
    put_message_with(ctx, msg, Commit::Now).await
}

/// [`put_message`], committed now or left for the response fence.
async fn put_message_with(
    ctx: &BrokerContext,
    mut msg: MessageExt,
    commit: Commit,
) -> PutMessageResult {
    if let Err(status) = ctx.timer.transform(&mut msg, now_millis) {
        return PutMessageResult::failed(status);
    }
    apply_delay_level(&mut msg, ctx.schedule.max_delay_level());
    ctx.store.put_message_with(msg, commit).await
}

/// [`put_message`] of a delay or timer message falling due: no client waits for it, so it is
/// never held for a SYNC_FLUSH (see [`comet_store::MessageStore::put_message_unawaited`]).
pub async fn put_due_message(ctx: &BrokerContext, mut msg: MessageExt) -> PutMessageResult {
    if let Err(status) = ctx.timer.transform(&mut msg, now_millis) {
        return PutMessageResult::failed(status);
    }
    apply_delay_level(&mut msg, ctx.schedule.max_delay_level());
    ctx.store.put_message_unawaited(msg).await
}

/// An answered send defers its commit to the response fence; a oneway one has no response.
fn commit_for(request: &RemotingCommand) -> Commit {
    if request.is_oneway() {
        Commit::Now
    } else {
        Commit::Deferred
    }
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

fn send_response(
    ctx: &BrokerContext,
    result: PutMessageResult,
    queue_id: i32,
    uniq_key: Option<String>,
    wait: bool,
) -> RemotingCommand {
    let (code, remark) = status_response_code(result.status);
    let Some(append) = result.append.filter(|_| result.status.is_written()) else {
        if result.status == PutMessageStatus::WheelTimerMsgIllegal {
            return error_response(code, crate::timer::illegal_remark(&ctx.config));
        }
        let remark = remark.unwrap_or("the message was not stored");
        return error_response(code, remark);
    };
    let mut header = SendMessageResponseHeader::new(append.msg_id, queue_id, append.logics_offset);
    header.transaction_id = uniq_key;
    let live = ctx.live_config();
    header.msg_region = Some(live.region_id.clone());
    header.trace_on = Some(live.trace_on);
    let mut response = comet_protocol::headers::response_with_header(code, &header);
    response.remark = remark.map(str::to_owned);
    // SYNC_MASTER: the connection writes the answer once enough brokers hold the record (and,
    // under SYNC_FLUSH, it is on the master's disk), or FLUSH_SLAVE_TIMEOUT after
    // `slaveTimeout`. SYNC_FLUSH alone: once the CommitLog is flushed past the record, or
    // FLUSH_DISK_TIMEOUT after `syncFlushTimeout` ([`CommitBeforeReply`]).
    response.hold = if wait && ctx.replication.waits_for_slaves() && code == ResponseCode::Success {
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
    response
}

/// A slave stores only what its master sends: a send to a topic it knows is refused as a
/// Java slave's store refuses it (SERVICE_NOT_AVAILABLE), one to a topic it does not know with
/// TOPIC_NOT_EXIST (a slave creates no topic: its topics come from its master).
fn slave_refusal(ctx: &BrokerContext, topic: &str) -> RemotingCommand {
    if ctx.topic_config.select(topic).is_none() {
        return error_response(
            ResponseCode::TopicNotExist,
            format!("topic[{topic}] not exist, apply first please!"),
        );
    }
    let (code, remark) = status_response_code(PutMessageStatus::ServiceNotAvailable);
    error_response(code, remark.unwrap_or("messages are put to the slave"))
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
    fn v2_keys_are_explained() {
        let rsp = header_error(310, &ProtocolError::MissingField("b"));
        let remark = rsp.remark.unwrap_or_default();
        assert!(
            remark.contains("`b`") && remark.contains("topic"),
            "{remark}"
        );
        let rsp = header_error(10, &ProtocolError::MissingField("queueId"));
        assert!(rsp.remark.unwrap_or_default().contains("queueId"));
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
