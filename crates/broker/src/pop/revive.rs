//! The revive service: reads the revive log and brings back what nobody acked in time.
//!
//! One task walks every revive queue in order. An ack is filed in the queue's
//! [`AckBook`]; a checkpoint (written as a timer message, so it shows up in the log only once its
//! batch's invisible time has ended) settles its batch: each message without an ack is put into
//! queue 0 of the group's POP retry topic (`%RETRY%<group>_<topic>`, created with one queue)
//! with `reconsumeTimes + 1` and `1ST_POP_TIME`, where the next pop finds it; one already
//! delivered `retryMaxTimes` times goes to the dead-letter topic `%DLQ%<group>` instead, stored
//! as RocketMQ's proxy stores it (see [`mark_dead_letter`]).
//!
//! How far each queue was read is committed as the offset of `CID_RMQ_SYS_REVIVE_GROUP`, but
//! never past the first ack still waiting for its checkpoint, so a restart reads every needed
//! ack again (see the module docs of [`crate::pop`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use comet_protocol::body::perm;
use comet_protocol::message::MessageExt;
use comet_protocol::message::properties::keys;
use comet_protocol::message::record::decode_record;
use comet_protocol::naming::{RETRY_GROUP_TOPIC_PREFIX, dlq_topic};
use comet_protocol::time::now_millis;
use comet_store::message_store::MAX_PULL_MSG_SIZE;
use tokio::task::JoinHandle;

use crate::context::BrokerContext;
use crate::pop::REVIVE_GROUP;
use crate::pop::checkpoint::{ACK_TAG, AckBook, AckMsg, BATCH_ACK_TAG, CK_TAG, PopCheckPoint};
use crate::pop::handle::pop_retry_topic;

/// Pause between two walks over the revive queues.
pub const REVIVE_POLL: Duration = Duration::from_millis(100);
/// Revive-log records read per step.
pub const RECORDS_PER_STEP: usize = 32;
/// How long after its batch's invisible time ended an ack whose checkpoint never arrived is
/// kept (ms).
pub const ACK_GRACE_MS: i64 = 5 * 60 * 1000;

/// A revive-log record: `body` in revive queue `queue_id`, tagged `tag`.
pub fn log_message(ctx: &BrokerContext, body: Vec<u8>, queue_id: i32, tag: &str) -> MessageExt {
    let mut msg = MessageExt::new(ctx.pop.revive_topic.clone(), Bytes::from(body));
    msg.queue_id = queue_id;
    msg.properties.insert(keys::TAGS, tag);
    msg.born_timestamp = now_millis();
    msg.born_host = ctx.store_host;
    msg.store_host = ctx.store_host;
    msg
}

/// Per revive queue: where reading goes on, and the acks waiting for their checkpoint.
#[derive(Debug, Default)]
struct QueueState {
    read_to: Option<i64>,
    book: AckBook,
}

/// Spawns the revive task (masters only).
pub fn start(ctx: &Arc<BrokerContext>) -> JoinHandle<()> {
    let weak = Arc::downgrade(ctx);
    let shutdown = ctx.shutdown.clone();
    let queues = usize::try_from(ctx.pop.revive_queue_num()).unwrap_or(1);
    tokio::spawn(async move {
        let mut states: Vec<QueueState> = (0..queues).map(|_| QueueState::default()).collect();
        loop {
            {
                let Some(ctx) = weak.upgrade() else { return };
                for (qid, state) in states.iter_mut().enumerate() {
                    let qid = i32::try_from(qid).unwrap_or(0);
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = revive_queue(&ctx, qid, state) => {}
                    }
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(REVIVE_POLL) => {}
            }
        }
    })
}

/// Reads one revive queue as far as it goes; stops early (to retry later) when a revival fails.
async fn revive_queue(ctx: &BrokerContext, qid: i32, state: &mut QueueState) {
    let topic = ctx.pop.revive_topic.clone();
    let mut offset = match state.read_to {
        Some(offset) => offset,
        None => {
            let committed = ctx.consumer_offsets.query_offset(REVIVE_GROUP, &topic, qid);
            if committed >= 0 {
                committed
            } else {
                ctx.store.get_min_offset_in_queue(&topic, qid).max(0)
            }
        }
    };
    'read: loop {
        let result = ctx.store.get_message(
            REVIVE_GROUP,
            &topic,
            qid,
            offset,
            RECORDS_PER_STEP,
            MAX_PULL_MSG_SIZE,
            None,
        );
        if result.messages.is_empty() {
            if result.next_begin_offset > offset {
                offset = result.next_begin_offset;
                continue;
            }
            break;
        }
        for (record, queue_offset) in result.messages.iter().zip(result.queue_offsets.iter()) {
            if !handle_record(ctx, record, *queue_offset, &mut state.book).await {
                break 'read;
            }
            offset = queue_offset + 1;
        }
    }
    state.read_to = Some(offset);
    state.book.forget_overdue(now_millis());
    let safe = state.book.safe_offset(offset);
    if ctx.consumer_offsets.query_offset(REVIVE_GROUP, &topic, qid) != safe {
        ctx.consumer_offsets
            .commit_offset("PopReviveService", REVIVE_GROUP, &topic, qid, safe);
    }
}

/// Files an ack or settles a checkpoint; `false` when a revival failed and must be retried.
async fn handle_record(
    ctx: &BrokerContext,
    record: &Bytes,
    log_offset: i64,
    book: &mut AckBook,
) -> bool {
    let Ok(msg) = decode_record(record, false) else {
        tracing::warn!(log_offset, "revive log record does not decode; skipped");
        return true;
    };
    match msg.tags() {
        Some(CK_TAG) => {
            let Ok(ck) = serde_json::from_slice::<PopCheckPoint>(&msg.body) else {
                tracing::warn!(log_offset, "unreadable POP checkpoint; skipped");
                return true;
            };
            for offset in book.unacked(&ck) {
                if !revive_one(ctx, &ck, offset).await {
                    return false;
                }
            }
            book.forget(&ck);
            ctx.pop
                .stats
                .checkpoints_settled
                .fetch_add(1, Ordering::Relaxed);
            true
        }
        Some(ACK_TAG) | Some(BATCH_ACK_TAG) => {
            match serde_json::from_slice::<AckMsg>(&msg.body) {
                Ok(ack) => book.record(&ack, log_offset, ACK_GRACE_MS),
                Err(_) => tracing::warn!(log_offset, "unreadable POP ack; skipped"),
            }
            true
        }
        _ => true,
    }
}

/// Puts message `offset` of a checkpoint's queue back for its group: into the POP retry topic,
/// or the dead-letter topic once its deliveries are used up. `false` when the store refused.
async fn revive_one(ctx: &BrokerContext, ck: &PopCheckPoint, offset: i64) -> bool {
    let found = ctx.store.get_message(
        REVIVE_GROUP,
        &ck.topic,
        ck.queue_id,
        offset,
        1,
        MAX_PULL_MSG_SIZE,
        None,
    );
    let original = match (found.messages.first(), found.queue_offsets.first()) {
        (Some(record), Some(o)) if *o == offset => decode_record(record, false).ok(),
        _ => None,
    };
    let Some(original) = original else {
        tracing::warn!(topic = %ck.topic, queue_id = ck.queue_id, offset, "message to revive is gone; skipped");
        return true;
    };
    let max_times = ctx
        .subscription_groups
        .find_or_create(&ck.group)
        .map_or(comet_protocol::headers::DEFAULT_MAX_RECONSUME_TIMES, |g| {
            g.retry_max_times
        });
    let dead = original.reconsume_times >= max_times;
    let retry_topic = if ck.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        ck.topic.clone()
    } else {
        pop_retry_topic(&ck.group, &ck.topic)
    };
    let target = if dead {
        dlq_topic(&ck.group)
    } else {
        retry_topic.clone()
    };
    if ctx
        .topic_config
        .create_topic_in_send_message_back(&target, 1, perm::PERM_READ_WRITE, 0)
        .is_none()
    {
        tracing::error!(topic = %target, "cannot create the POP retry/DLQ topic");
        return true;
    }
    let mut copy = revived_copy(ctx, &original, target, ck.pop_time);
    if dead {
        mark_dead_letter(&mut copy, &original, &retry_topic);
    }
    let result = crate::core::put::put_message(ctx, copy).await;
    if !result.status.is_written() {
        tracing::error!(status = ?result.status, "reviving a POP message failed; retrying");
        return false;
    }
    if dead {
        ctx.traffic.record_dlq(&ck.group, &ck.topic);
        ctx.pop.stats.dead_lettered.fetch_add(1, Ordering::Relaxed);
    } else {
        ctx.pop.stats.revived.fetch_add(1, Ordering::Relaxed);
    }
    true
}

/// The copy of a message that comes back in `topic` queue 0: same body, flag, sys flag, born
/// time and properties, `reconsumeTimes + 1`, and `1ST_POP_TIME` set on its first return.
/// Delay and timer requests are dropped so it is visible at once.
pub fn revived_copy(
    ctx: &BrokerContext,
    original: &MessageExt,
    topic: String,
    pop_time: i64,
) -> MessageExt {
    let mut copy = MessageExt::new(topic, original.body.clone());
    copy.queue_id = 0;
    copy.flag = original.flag;
    copy.sys_flag = original.sys_flag;
    copy.born_timestamp = original.born_timestamp;
    copy.born_host = ctx.store_host;
    copy.store_host = ctx.store_host;
    copy.reconsume_times = original.reconsume_times.saturating_add(1);
    copy.properties = original.properties.clone();
    for key in [
        keys::DELAY_TIME_LEVEL,
        keys::TIMER_DELIVER_MS,
        keys::TIMER_DELAY_SEC,
        keys::TIMER_DELAY_MS,
        keys::POP_CK,
    ] {
        copy.properties.remove(key);
    }
    if original.reconsume_times == 0 || copy.properties.get(keys::FIRST_POP_TIME).is_none() {
        copy.properties
            .insert(keys::FIRST_POP_TIME, pop_time.to_string());
    }
    copy
}

/// Gives a revived copy bound for the dead-letter topic what RocketMQ's proxy stores there. The
/// proxy dead-letters a POP message on the first receive after its last attempt, by sending back
/// the copy already revived into the POP retry topic: the stored record counts one more
/// reconsume than that copy and carries the send-back's properties, `RETRY_TOPIC` (the retry
/// topic `retry_topic`, unless the message already names one), `ORIGIN_MESSAGE_ID` (unless
/// already set), `WAIT=false` and `DELAY=0`.
pub fn mark_dead_letter(copy: &mut MessageExt, original: &MessageExt, retry_topic: &str) {
    copy.reconsume_times = copy.reconsume_times.saturating_add(1);
    if !copy.properties.contains_key(keys::RETRY_TOPIC) {
        copy.properties.insert(keys::RETRY_TOPIC, retry_topic);
    }
    let has_origin = copy
        .properties
        .get(keys::ORIGIN_MESSAGE_ID)
        .is_some_and(|id| !id.trim().is_empty());
    if !has_origin {
        copy.properties
            .insert(keys::ORIGIN_MESSAGE_ID, original.offset_msg_id());
    }
    copy.properties.insert(keys::WAIT_STORE_MSG_OK, "false");
    copy.properties.insert(keys::DELAY_TIME_LEVEL, "0");
}
