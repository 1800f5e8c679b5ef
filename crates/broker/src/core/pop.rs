//! Popping messages: a POP consumer's read (RocketMQ's POP_MESSAGE, gRPC's ReceiveMessage).
//!
//! A pop checks the request in RocketMQ's order (poll time already over, broker readable,
//! batch of at most 32, timer wheel on, topic, queue id, group), then reads: the group's POP
//! retry topic first for `popFromRetryProbability` percent of the requests, then the topic's
//! queues (all of them from a random one for queue id -1), then the retry topic again if the
//! batch is not full. Each queue read is claimed (`topic@group@qid`; a busy queue is skipped),
//! starts at the group's offset (a new group starts per `initMode`; a retry topic from its
//! first message), writes its checkpoint to the revive log and only then advances the group's
//! offset past what it read. Every message returned carries its receipt handle in POP_CK, and
//! one read from the retry topic is returned under the requested topic, as RocketMQ returns it.
//! A pop that finds nothing with a poll time waits for new messages until then, and is answered
//! POLLING_TIMEOUT if none came. A FIFO pop (`order=true`) skips the retry topic and a blocked
//! queue, and records its batch instead of a checkpoint ([`crate::pop::fifo`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use comet_protocol::body::{SubscriptionData, TopicConfig, perm};
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::{POP_INIT_MODE_MIN, POP_MAX_MSG_NUMS, PopMessageRequestHeader};
use comet_protocol::message::properties::keys;
use comet_protocol::message::record::{decode_record, encode_record};
use comet_protocol::naming::RETRY_GROUP_TOPIC_PREFIX;
use comet_protocol::time::now_millis;
use comet_store::GetMessageStatus;
use comet_store::message_store::MAX_PULL_MSG_SIZE;
use tokio::time::Instant;

use super::Refusal;
use crate::context::BrokerContext;
use crate::filter::TagFilter;
use crate::pop::arrivals::{HELD_RECHECK, MAX_HELD_POPS};
use crate::pop::checkpoint::{CK_TAG, PopCheckPoint};
use crate::pop::handle::{
    ReceiptHandle, pop_retry_topic, push_msg_offset_info, push_start_offset_info, retry_flag,
};
use crate::processor::random_below;

/// How far past `bornTime + pollTime` a pop may arrive before it is refused (ms).
pub const POLL_TIME_SLACK_MS: i64 = 500;

/// What one pass over the queues collected.
#[derive(Debug, Default)]
pub struct PopBatch {
    /// The records to return, re-encoded with POP_CK.
    pub records: Vec<Bytes>,
    /// startOffsetInfo.
    pub start_info: String,
    /// msgOffsetInfo.
    pub msg_info: String,
    /// Messages left behind in the queues read.
    pub rest_num: i64,
    /// orderCountInfo (FIFO pops).
    pub order_info: String,
}

/// The parts of a pop request every queue read needs.
struct PopRequest<'a> {
    header: &'a PopMessageRequestHeader,
    client: &'a str,
    filter: TagFilter,
    pop_time: i64,
    revive_qid: i32,
    /// A FIFO pop (`order=true`).
    order: bool,
}

/// What a pop found.
#[derive(Debug)]
pub enum Popped {
    /// Messages (none when the poll time passed without one).
    Batch(PopResult),
    /// Too many pops are held already (POLLING_FULL).
    PollingFull,
}

/// A pop's messages and what the consumer builds their receipt handles and offsets from.
#[derive(Debug)]
pub struct PopResult {
    pub pop_time: i64,
    pub invisible_time: i64,
    pub revive_qid: i32,
    /// A FIFO pop (`orderCountInfo` is answered).
    pub order: bool,
    pub batch: PopBatch,
}

/// Runs one pop, holding it up to its poll time when nothing is there. `client` names the
/// consumer (its address) in the queues it claims.
pub async fn pop(
    ctx: &Arc<BrokerContext>,
    client: &str,
    mut header: PopMessageRequestHeader,
) -> Result<Popped, Refusal> {
    let now = now_millis();
    if header.born_time == 0 {
        header.born_time = now;
    }
    let topic_config = check(ctx, &header, now)?;
    if !crate::filter::is_tag_type(header.exp_type.as_deref()) {
        return Err(Refusal::new(
            ResponseCode::SystemError,
            format!(
                "The broker does not support consumer to filter message by {}",
                header.exp_type.as_deref().unwrap_or_default()
            ),
        ));
    }
    let expression = header.exp.clone().filter(|e| !e.trim().is_empty());
    let subscription = SubscriptionData::from_tag_expression(
        &header.topic,
        expression.as_deref().unwrap_or("*"),
        0,
    );
    let deadline =
        Instant::now() + Duration::from_millis(u64::try_from(header.poll_time).unwrap_or(0));
    let pop = &ctx.pop;
    let order = header.order.unwrap_or(false);
    let retry_topic = pop_retry_topic(&header.consumer_group, &header.topic);
    loop {
        let arrival = pop.arrivals.watch(&[&header.topic, &retry_topic]);
        let mut req = PopRequest {
            header: &header,
            client,
            filter: TagFilter::new(&subscription),
            pop_time: now_millis(),
            revive_qid: if order {
                crate::pop::handle::FIFO_REVIVE_QID
            } else {
                pop.next_revive_qid()
            },
            order,
        };
        let batch = pop_once(ctx, &topic_config, &mut req).await;
        let remaining = deadline.saturating_duration_since(Instant::now());
        if !batch.records.is_empty() || header.poll_time <= 0 || remaining.is_zero() {
            return Ok(Popped::Batch(result(&req, batch)));
        }
        // The count includes this request's own watch.
        if pop.held_count() > MAX_HELD_POPS {
            return Ok(Popped::PollingFull);
        }
        arrival.wait(remaining.min(HELD_RECHECK)).await;
        if ctx.is_shutting_down() {
            return Ok(Popped::Batch(result(&req, PopBatch::default())));
        }
    }
}

fn result(req: &PopRequest<'_>, batch: PopBatch) -> PopResult {
    PopResult {
        pop_time: req.pop_time,
        invisible_time: req.header.invisible_time,
        revive_qid: req.revive_qid,
        order: req.order,
        batch,
    }
}

/// RocketMQ's checks before a pop reads anything.
fn check(
    ctx: &BrokerContext,
    header: &PopMessageRequestHeader,
    now: i64,
) -> Result<TopicConfig, Refusal> {
    let ip = ctx.store_host.ip();
    if now - header.born_time - header.poll_time > POLL_TIME_SLACK_MS {
        return Err(Refusal::new(
            ResponseCode::PollingTimeout,
            format!("the broker[{ip}] pop message is timeout too much"),
        ));
    }
    if !perm::is_readable(ctx.broker_permission()) {
        return Err(Refusal::new(
            ResponseCode::NoPermission,
            format!("the broker[{ip}] pop message is forbidden"),
        ));
    }
    if header.max_msg_nums > POP_MAX_MSG_NUMS {
        return Err(Refusal::new(
            ResponseCode::InvalidParameter,
            format!("the broker[{ip}] pop message's num is greater than 32"),
        ));
    }
    if !ctx.timer.is_on(&ctx.live_config()) {
        return Err(Refusal::new(
            ResponseCode::SystemError,
            format!("the broker[{ip}] pop message is forbidden because timerWheelEnable is false"),
        ));
    }
    let topic = header.topic.as_str();
    let topic_config = super::readable_topic(ctx, topic, "peeking")?;
    if header.queue_id >= topic_config.read_queue_nums {
        return Err(Refusal::new(
            ResponseCode::InvalidParameter,
            format!(
                "queueId[{}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}]",
                header.queue_id, topic_config.read_queue_nums
            ),
        ));
    }
    let group = header.consumer_group.as_str();
    let Some(group_config) = ctx.subscription_groups.find_or_create(group) else {
        return Err(Refusal::new(
            ResponseCode::SubscriptionGroupNotExist,
            format!("subscription group [{group}] does not exist"),
        ));
    };
    if !group_config.consume_enable {
        return Err(Refusal::new(
            ResponseCode::NoPermission,
            format!("subscription group no permission, {group}"),
        ));
    }
    Ok(topic_config)
}

/// One pass over the retry topic and the requested queues.
async fn pop_once(
    ctx: &Arc<BrokerContext>,
    topic_config: &TopicConfig,
    req: &mut PopRequest<'_>,
) -> PopBatch {
    let header = req.header;
    let order = header.order.unwrap_or(false);
    let mut batch = PopBatch::default();
    let retry = pop_retry_topic(&header.consumer_group, &header.topic);
    let retry_config = ctx.topic_config.select(&retry);
    let retry_first = random_below(100) < ctx.live_config().pop_from_retry_probability;
    if retry_first
        && !order
        && let Some(rc) = &retry_config
    {
        pop_topic(ctx, rc, req, &mut batch).await;
    }
    if header.queue_id < 0 {
        pop_topic(ctx, topic_config, req, &mut batch).await;
    } else {
        pop_queue(
            ctx,
            &topic_config.topic_name,
            header.queue_id,
            req,
            &mut batch,
        )
        .await;
    }
    let room = batch.records.len() < usize::try_from(header.max_msg_nums).unwrap_or(0);
    if !retry_first
        && !order
        && room
        && let Some(rc) = &retry_config
    {
        pop_topic(ctx, rc, req, &mut batch).await;
    }
    batch
}

/// Reads every read queue of a topic, from a random one on.
async fn pop_topic(
    ctx: &Arc<BrokerContext>,
    config: &TopicConfig,
    req: &mut PopRequest<'_>,
    batch: &mut PopBatch,
) {
    let n = config.read_queue_nums.max(0);
    let first = random_below(n);
    for i in 0..n {
        pop_queue(ctx, &config.topic_name, (first + i) % n, req, batch).await;
    }
}

/// Where a group's pop of a queue starts: its committed offset, else (first read) the queue's
/// first message for `initMode` MIN and retry topics, else the backlog when it is still whole
/// (offset 0 still stored), else the last message. A first read commits what it chose.
pub fn pop_offset(
    ctx: &BrokerContext,
    group: &str,
    topic: &str,
    queue_id: i32,
    init_mode: i32,
) -> i64 {
    let committed = ctx.consumer_offsets.query_offset(group, topic, queue_id);
    if committed >= 0 {
        return committed;
    }
    let min = ctx.store.get_min_offset_in_queue(topic, queue_id);
    let offset = if init_mode == POP_INIT_MODE_MIN || topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        min
    } else if min <= 0 {
        0
    } else {
        (ctx.store.get_max_offset_in_queue(topic, queue_id) - 1).max(0)
    };
    ctx.consumer_offsets
        .commit_offset("getPopOffset", group, topic, queue_id, offset);
    offset
}

/// Reads one queue into `batch`: checkpoint first, then the offset moves on.
async fn pop_queue(
    ctx: &Arc<BrokerContext>,
    topic: &str,
    queue_id: i32,
    req: &mut PopRequest<'_>,
    batch: &mut PopBatch,
) {
    let header = req.header;
    let group = header.consumer_group.as_str();
    let lock_key = format!("{topic}@{group}@{queue_id}");
    let mut offset = pop_offset(ctx, group, topic, queue_id, header.init_mode);
    let max_offset = ctx.store.get_max_offset_in_queue(topic, queue_id);
    let wanted = usize::try_from(header.max_msg_nums).unwrap_or(0);
    let Some(_guard) = ctx.pop.try_lock(lock_key) else {
        batch.rest_num += (max_offset - offset).max(0);
        return;
    };
    if batch.records.len() >= wanted {
        batch.rest_num += (max_offset - offset).max(0);
        return;
    }
    let fifo_key = crate::pop::fifo::key(topic, group, queue_id);
    if req.order
        && ctx
            .pop
            .fifo
            .blocked(&fifo_key, header.attempt_id.as_deref(), now_millis())
    {
        return;
    }
    let is_retry = topic.starts_with(RETRY_GROUP_TOPIC_PREFIX);
    let filter: Option<&dyn comet_store::MessageFilter> =
        if is_retry { None } else { Some(&req.filter) };
    let room = wanted - batch.records.len();
    let mut result = ctx.store.get_message(
        group,
        topic,
        queue_id,
        offset,
        room,
        MAX_PULL_MSG_SIZE,
        filter,
    );
    if matches!(
        result.status,
        GetMessageStatus::OffsetTooSmall
            | GetMessageStatus::OffsetOverflowBadly
            | GetMessageStatus::OffsetFoundNull
    ) {
        // The stored offset is outside the queue: move it to where reading can go on.
        offset = result.next_begin_offset;
        ctx.consumer_offsets
            .commit_offset(req.client, group, topic, queue_id, offset);
        result = ctx.store.get_message(
            group,
            topic,
            queue_id,
            offset,
            room,
            MAX_PULL_MSG_SIZE,
            filter,
        );
    }
    if !result.messages.is_empty() {
        if !settle_batch(ctx, req, topic, queue_id, offset, &result, batch).await {
            batch.rest_num += (result.max_offset - offset).max(0);
            return;
        }
        ctx.traffic.record_out(
            topic,
            group,
            result.messages.len(),
            result.buffer_total_size,
        );
        push_start_offset_info(&mut batch.start_info, topic, queue_id, offset);
        push_msg_offset_info(&mut batch.msg_info, topic, queue_id, &result.queue_offsets);
        for record in &result.messages {
            if let Some(bytes) = with_receipt_handle(ctx, record, req, offset, queue_id) {
                batch.records.push(bytes);
            }
        }
    } else if matches!(
        result.status,
        GetMessageStatus::NoMatchedMessage
            | GetMessageStatus::OffsetFoundNull
            | GetMessageStatus::MessageWasRemoving
            | GetMessageStatus::NoMatchedLogicQueue
    ) && result.next_begin_offset > offset
    {
        // Nothing matched the filter: those messages are done for this group.
        ctx.consumer_offsets.commit_offset(
            req.client,
            group,
            topic,
            queue_id,
            result.next_begin_offset,
        );
    }
    batch.rest_num += (result.max_offset - result.next_begin_offset).max(0);
}

/// Makes a batch read from a queue stick before it is returned: an ordinary pop writes its
/// checkpoint and moves the group's offset past it; a FIFO pop records the batch (the offset
/// stays at its start) and adds its delivery counts to orderCountInfo. `false` when the
/// checkpoint could not be written.
async fn settle_batch(
    ctx: &BrokerContext,
    req: &PopRequest<'_>,
    topic: &str,
    queue_id: i32,
    offset: i64,
    result: &comet_store::GetMessageResult,
    batch: &mut PopBatch,
) -> bool {
    let header = req.header;
    let group = header.consumer_group.as_str();
    if req.order {
        let counts = ctx.pop.fifo.hand_out(
            &crate::pop::fifo::key(topic, group, queue_id),
            header.attempt_id.as_deref(),
            req.pop_time,
            header.invisible_time,
            &result.queue_offsets,
        );
        ctx.consumer_offsets
            .commit_offset(req.client, group, topic, queue_id, offset);
        let flag = retry_flag(topic);
        for (o, count) in result.queue_offsets.iter().zip(counts.iter()) {
            push_item(
                &mut batch.order_info,
                format!("{flag} qo{queue_id}%{o} {count}"),
            );
        }
        let min = counts.iter().copied().min().unwrap_or(0);
        push_item(&mut batch.order_info, format!("{flag} {queue_id} {min}"));
        return true;
    }
    let ck = PopCheckPoint {
        start_offset: offset,
        pop_time: req.pop_time,
        invisible_time: header.invisible_time,
        bit_map: 0,
        num: i32::try_from(result.messages.len()).unwrap_or(i32::MAX),
        queue_id,
        topic: topic.to_owned(),
        group: group.to_owned(),
        revive_offset: 0,
        queue_offset_diff: result
            .queue_offsets
            .iter()
            .map(|o| i32::try_from(o - offset).unwrap_or(i32::MAX))
            .collect(),
        broker_name: ctx.config.broker_name.clone(),
        re_put_times: String::new(),
    };
    if !write_checkpoint(ctx, &ck, req.revive_qid).await {
        return false;
    }
    ctx.consumer_offsets.commit_offset(
        req.client,
        group,
        topic,
        queue_id,
        result.next_begin_offset,
    );
    true
}

fn push_item(info: &mut String, item: String) {
    if !info.is_empty() {
        info.push(';');
    }
    info.push_str(&item);
}

/// A popped record re-encoded with its receipt handle in POP_CK; one read from a retry topic is
/// returned under the requested topic.
fn with_receipt_handle(
    ctx: &BrokerContext,
    record: &Bytes,
    req: &PopRequest<'_>,
    start_offset: i64,
    queue_id: i32,
) -> Option<Bytes> {
    let mut msg = match decode_record(record, false) {
        Ok(msg) => msg,
        Err(e) => {
            tracing::warn!(error = %e, "popped record does not decode; skipped");
            return None;
        }
    };
    let handle = ReceiptHandle {
        ck_start_offset: start_offset,
        pop_time: req.pop_time,
        invisible_time: req.header.invisible_time,
        revive_qid: req.revive_qid,
        retry_flag: retry_flag(&msg.topic).to_owned(),
        broker_name: ctx.config.broker_name.clone(),
        queue_id,
        queue_offset: Some(msg.queue_offset),
    };
    if msg.properties.get(keys::POP_CK).is_none() {
        msg.properties.insert(keys::POP_CK, handle.encode());
    }
    if msg.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        msg.topic = req.header.topic.clone();
    }
    let mut out = BytesMut::with_capacity(record.len() + 128);
    match encode_record(&msg, &mut out) {
        Ok(()) => Some(out.freeze()),
        Err(e) => {
            tracing::warn!(error = %e, "popped record does not re-encode; skipped");
            None
        }
    }
}

/// Stores a checkpoint in the revive log as a timer message due at its revive time; `false`
/// when the store refused it.
pub async fn write_checkpoint(ctx: &BrokerContext, ck: &PopCheckPoint, revive_qid: i32) -> bool {
    let Ok(body) = serde_json::to_vec(ck) else {
        return false;
    };
    let mut msg = crate::pop::revive::log_message(ctx, body, revive_qid, CK_TAG);
    msg.properties
        .insert(keys::TIMER_DELIVER_MS, ck.revive_time().to_string());
    let result = crate::core::put::put_message(ctx, msg).await;
    if result.status.is_written() {
        ctx.pop
            .stats
            .checkpoints_written
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        true
    } else {
        tracing::error!(status = ?result.status, topic = %ck.topic, "writing a POP checkpoint failed");
        false
    }
}
