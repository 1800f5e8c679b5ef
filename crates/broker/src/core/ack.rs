//! Acks of popped messages and changes of their invisible time (RocketMQ's ACK_MESSAGE,
//! BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME; gRPC's AckMessage and
//! ChangeInvisibleDuration).
//!
//! An ack is written to the revive queue of the popped batch at once (tag `ack`, `bAck` for
//! several offsets); the revive service matches it to the batch's checkpoint on topic, group,
//! queue, start offset and pop time. As in RocketMQ the broker checks only that the topic,
//! queue and offset exist, not whether the handle has expired: an ack after the invisible time
//! may come too late to stop a redelivery. Changing the invisible time writes a one-message
//! checkpoint popped now with the new time, then acks the message under its old handle; the
//! answer carries what the new handle is built from. A FIFO handle (revive queue 999) acts on
//! the queue's batch instead ([`crate::pop::fifo`]): an ack moves the group's offset past the
//! acked prefix, a change sets when that message becomes visible again.

use base64::Engine;
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::{AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader};
use comet_protocol::time::now_millis;
use serde::Deserialize;

use super::Refusal;
use super::pop::write_checkpoint;
use crate::context::BrokerContext;
use crate::pop::checkpoint::{ACK_TAG, AckMsg, BATCH_ACK_TAG, PopCheckPoint};
use crate::pop::handle::{FIFO_REVIVE_QID, ReceiptHandle, real_topic};

/// The checks every ack and change shares: the topic exists, the queue is one of its read
/// queues, the offset lies within the queue (`max_exclusive`: below its max offset).
fn check_target(
    ctx: &BrokerContext,
    topic: &str,
    queue_id: i32,
    offset: i64,
    max_exclusive: bool,
) -> Result<(), Refusal> {
    let Some(config) = ctx.topic_config.select(topic) else {
        return Err(Refusal::new(
            ResponseCode::TopicNotExist,
            format!("topic[{topic}] not exist, apply first please!"),
        ));
    };
    if queue_id < 0 || queue_id >= config.read_queue_nums {
        return Err(Refusal::new(
            ResponseCode::MessageIllegal,
            format!(
                "queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}]",
                config.read_queue_nums
            ),
        ));
    }
    let min = ctx.store.get_min_offset_in_queue(topic, queue_id);
    let max = ctx.store.get_max_offset_in_queue(topic, queue_id);
    let above = if max_exclusive {
        offset >= max
    } else {
        offset > max
    };
    if offset < min || above {
        return Err(Refusal::new(
            ResponseCode::NoMessage,
            format!(
                "offset is illegal, key:{topic}@{queue_id}, commit:{offset}, store:{min}~{max}"
            ),
        ));
    }
    Ok(())
}

fn parse_handle(text: &str) -> Result<ReceiptHandle, Refusal> {
    ReceiptHandle::decode(text).map_err(|e| {
        Refusal::new(
            ResponseCode::InvalidParameter,
            format!("illegal extraInfo {text:?}: {e}"),
        )
    })
}

/// Acks one popped message (ACK_MESSAGE).
pub async fn ack(ctx: &BrokerContext, header: &AckMessageRequestHeader) -> Result<(), Refusal> {
    check_target(ctx, &header.topic, header.queue_id, header.offset, false)?;
    let handle = parse_handle(&header.extra_info)?;
    if handle.is_fifo() {
        ack_fifo(
            ctx,
            &header.consumer_group,
            &header.topic,
            header.queue_id,
            handle.pop_time,
            header.offset,
        );
        return Ok(());
    }
    let ack = single_ack(
        &handle,
        &header.consumer_group,
        &header.topic,
        header.queue_id,
        header.offset,
    );
    write_ack(ctx, &ack, handle.revive_qid).await
}

/// A FIFO ack: the group's offset moves past the acked prefix of the batch, and held pops wake.
fn ack_fifo(
    ctx: &BrokerContext,
    group: &str,
    topic: &str,
    queue_id: i32,
    pop_time: i64,
    offset: i64,
) {
    let key = crate::pop::fifo::key(topic, group, queue_id);
    if let Some(next) = ctx.pop.fifo.ack(&key, pop_time, offset)
        && next > ctx.consumer_offsets.query_offset(group, topic, queue_id)
    {
        ctx.consumer_offsets
            .commit_offset("ackOrderly", group, topic, queue_id, next);
    }
    ctx.pop.notify_arrival(topic);
}

/// One entry of a BATCH_ACK_MESSAGE body (RocketMQ's `BatchAck`).
#[derive(Debug, Deserialize)]
pub struct BatchAck {
    #[serde(rename = "c", alias = "consumerGroup")]
    group: String,
    #[serde(rename = "t", alias = "topic")]
    topic: String,
    #[serde(rename = "r", alias = "retry", default)]
    retry: String,
    #[serde(rename = "so", alias = "startOffset")]
    start_offset: i64,
    #[serde(rename = "q", alias = "queueId")]
    queue_id: i32,
    #[serde(rename = "rq", alias = "reviveQueueId")]
    revive_qid: i32,
    #[serde(rename = "pt", alias = "popTime")]
    pop_time: i64,
    #[serde(rename = "it", alias = "invisibleTime", default)]
    invisible_time: i64,
    /// The acked offsets minus `start_offset`, as the bytes of a Java `BitSet` in base64.
    #[serde(rename = "b", alias = "bitSet", default)]
    bit_set: Option<String>,
}

/// The BATCH_ACK_MESSAGE body (RocketMQ's `BatchAckMessageRequestBody`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchAckBody {
    #[serde(default)]
    broker_name: String,
    #[serde(default)]
    acks: Vec<BatchAck>,
}

/// The set bits of a Java `BitSet.toByteArray()` (little-endian bytes, bit 0 first).
pub fn bit_set_indexes(bytes: &[u8]) -> Vec<i64> {
    let mut out = Vec::new();
    for (i, byte) in bytes.iter().enumerate() {
        for bit in 0..8 {
            if byte & (1 << bit) != 0 {
                out.push(i as i64 * 8 + bit);
            }
        }
    }
    out
}

/// Acks several messages of several popped batches (BATCH_ACK_MESSAGE): one `bAck` record per
/// entry, for its offsets within the queue. `None`: the body did not decode.
pub async fn batch_ack(ctx: &BrokerContext, body: Option<BatchAckBody>) -> Result<(), Refusal> {
    let Some(body) = body.filter(|b| !b.acks.is_empty()) else {
        return Err(Refusal::new(
            ResponseCode::NoMessage,
            "no ack in the request",
        ));
    };
    for entry in &body.acks {
        let topic = real_topic(&entry.topic, &entry.group, &entry.retry);
        let bits = entry
            .bit_set
            .as_deref()
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .unwrap_or_default();
        let min = ctx.store.get_min_offset_in_queue(&topic, entry.queue_id);
        let max = ctx.store.get_max_offset_in_queue(&topic, entry.queue_id);
        let offsets: Vec<i64> = bit_set_indexes(&bits)
            .into_iter()
            .map(|i| entry.start_offset + i)
            .filter(|o| *o >= min && *o <= max)
            .collect();
        if entry.revive_qid == FIFO_REVIVE_QID {
            for offset in offsets {
                ack_fifo(
                    ctx,
                    &entry.group,
                    &topic,
                    entry.queue_id,
                    entry.pop_time,
                    offset,
                );
            }
            continue;
        }
        if offsets.is_empty() {
            continue;
        }
        let ack = AckMsg {
            ack_offset: -1,
            start_offset: entry.start_offset,
            group: entry.group.clone(),
            topic,
            queue_id: entry.queue_id,
            pop_time: entry.pop_time,
            broker_name: body.broker_name.clone(),
            ack_offsets: offsets,
            invisible_time: entry.invisible_time,
        };
        write_ack(ctx, &ack, entry.revive_qid).await?;
    }
    Ok(())
}

/// One message among several acked together (gRPC AckMessage's entries).
#[derive(Debug, Clone)]
pub struct AckTarget {
    /// The topic it was popped from (the group's POP retry topic for a retried message).
    pub topic: String,
    pub queue_id: i32,
    pub offset: i64,
    pub handle: ReceiptHandle,
}

/// Acks several messages popped by `group`: the messages of one popped batch (one checkpoint)
/// are acked by one `bAck` record, not one record each, so acking a received batch costs one
/// write; FIFO messages are acked as [`ack`] acks them. Each target is checked as [`ack`] checks
/// it. Returns each target's outcome, in order.
pub async fn ack_many(
    ctx: &BrokerContext,
    group: &str,
    targets: &[AckTarget],
) -> Vec<Result<(), Refusal>> {
    let mut outcomes = Vec::with_capacity(targets.len());
    // The ack of each popped batch, its revive queue and the targets it covers.
    let mut batches: Vec<(AckMsg, i32, Vec<usize>)> = Vec::new();
    for (i, target) in targets.iter().enumerate() {
        let checked = check_target(ctx, &target.topic, target.queue_id, target.offset, false);
        let failed = checked.is_err();
        outcomes.push(checked);
        if failed {
            continue;
        }
        let handle = &target.handle;
        if handle.is_fifo() {
            ack_fifo(
                ctx,
                group,
                &target.topic,
                target.queue_id,
                handle.pop_time,
                target.offset,
            );
            continue;
        }
        let same_batch = |(ack, qid, _): &&mut (AckMsg, i32, Vec<usize>)| {
            ack.topic == target.topic
                && ack.queue_id == target.queue_id
                && ack.start_offset == handle.ck_start_offset
                && ack.pop_time == handle.pop_time
                && ack.invisible_time == handle.invisible_time
                && ack.broker_name == handle.broker_name
                && *qid == handle.revive_qid
        };
        match batches.iter_mut().find(same_batch) {
            Some((ack, _, covered)) => {
                ack.ack_offsets.push(target.offset);
                covered.push(i);
            }
            None => {
                let mut ack = single_ack(handle, group, &target.topic, target.queue_id, -1);
                ack.ack_offsets.push(target.offset);
                batches.push((ack, handle.revive_qid, vec![i]));
            }
        }
    }
    for (mut ack, revive_qid, covered) in batches {
        // One message alone is acked as ACK_MESSAGE acks it.
        if let [offset] = ack.ack_offsets[..] {
            ack.ack_offset = offset;
            ack.ack_offsets.clear();
        }
        if let Err(refusal) = write_ack(ctx, &ack, revive_qid).await {
            for i in covered {
                outcomes[i] = Err(refusal.clone());
            }
        }
    }
    outcomes
}

/// The ack of the message at `offset` popped under `handle`.
fn single_ack(
    handle: &ReceiptHandle,
    group: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
) -> AckMsg {
    AckMsg {
        ack_offset: offset,
        start_offset: handle.ck_start_offset,
        group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id,
        pop_time: handle.pop_time,
        broker_name: handle.broker_name.clone(),
        ack_offsets: Vec::new(),
        invisible_time: handle.invisible_time,
    }
}

/// Stores an ack in revive queue `revive_qid`.
async fn write_ack(ctx: &BrokerContext, ack: &AckMsg, revive_qid: i32) -> Result<(), Refusal> {
    let body = serde_json::to_vec(ack)
        .map_err(|e| Refusal::new(ResponseCode::SystemError, e.to_string()))?;
    let tag = if ack.ack_offsets.is_empty() {
        ACK_TAG
    } else {
        BATCH_ACK_TAG
    };
    let qid = revive_qid.clamp(0, ctx.pop.revive_queue_num() - 1);
    let msg = crate::pop::revive::log_message(ctx, body, qid, tag);
    let result = crate::core::put::put_message(ctx, msg).await;
    if result.status.is_written() {
        Ok(())
    } else {
        Err(Refusal::new(
            ResponseCode::SystemError,
            super::put::put_status_name(result.status),
        ))
    }
}

/// What the new receipt handle of a message whose invisible time changed is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvisibleChanged {
    pub pop_time: i64,
    pub invisible_time: i64,
    pub revive_qid: i32,
}

/// Changes how long a popped message stays invisible (CHANGE_MESSAGE_INVISIBLETIME).
pub async fn change_invisible(
    ctx: &BrokerContext,
    header: &ChangeInvisibleTimeRequestHeader,
) -> Result<InvisibleChanged, Refusal> {
    check_target(ctx, &header.topic, header.queue_id, header.offset, true)?;
    let handle = parse_handle(&header.extra_info)?;
    // The new checkpoint's pop time must differ from the old handle's: the ack of the old
    // handle written below would otherwise match the new checkpoint too (same queue, start
    // offset and pop time) and the message would never come back.
    let now = now_millis().max(handle.pop_time.saturating_add(1));
    if handle.is_fifo() {
        ctx.pop.fifo.change_invisible(
            &crate::pop::fifo::key(&header.topic, &header.consumer_group, header.queue_id),
            handle.pop_time,
            header.offset,
            now,
            header.invisible_time,
        );
        return Ok(InvisibleChanged {
            pop_time: now,
            invisible_time: header.invisible_time,
            revive_qid: FIFO_REVIVE_QID,
        });
    }
    let ck = PopCheckPoint {
        start_offset: header.offset,
        pop_time: now,
        invisible_time: header.invisible_time,
        bit_map: 0,
        num: 1,
        queue_id: header.queue_id,
        topic: header.topic.clone(),
        group: header.consumer_group.clone(),
        revive_offset: 0,
        queue_offset_diff: vec![0],
        broker_name: handle.broker_name.clone(),
        re_put_times: String::new(),
    };
    if !write_checkpoint(ctx, &ck, handle.revive_qid).await {
        return Err(Refusal::new(
            ResponseCode::SystemError,
            "writing the new checkpoint failed",
        ));
    }
    let old = single_ack(
        &handle,
        &header.consumer_group,
        &header.topic,
        header.queue_id,
        header.offset,
    );
    write_ack(ctx, &old, handle.revive_qid).await?;
    Ok(InvisibleChanged {
        pop_time: now,
        invisible_time: header.invisible_time,
        revive_qid: handle.revive_qid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_bit_set_bytes_decode_bit_zero_first() {
        // BitSet {0, 3, 9}.toByteArray() = [0b0000_1001, 0b0000_0010].
        assert_eq!(bit_set_indexes(&[0b0000_1001, 0b0000_0010]), vec![0, 3, 9]);
        let body: BatchAckBody = serde_json::from_str(
            r#"{"brokerName":"b","acks":[{"c":"g","t":"T","r":"1","so":4,"q":0,"rq":2,"pt":9,"it":1000,"b":"CQI="}]}"#,
        )
        .unwrap();
        let a = &body.acks[0];
        let bits = base64::engine::general_purpose::STANDARD
            .decode(a.bit_set.as_deref().unwrap())
            .unwrap();
        assert_eq!(bit_set_indexes(&bits), vec![0, 3, 9]);
        assert_eq!(real_topic(&a.topic, &a.group, &a.retry), "%RETRY%g_T");
    }
}
