//! A consumer gives back a message it failed to process (RocketMQ's CONSUMER_SEND_MSG_BACK,
//! gRPC's ForwardMessageToDeadLetterQueue).
//!
//! The broker re-publishes a copy: to `%RETRY%<group>` with a delay level —
//! `3 + reconsumeTimes` unless the client chose one, so retries back off 10 s, 30 s, 1 min, … —
//! or, once the message has been retried `maxReconsumeTimes` times (or the client asks with a
//! negative level), to the dead-letter topic `%DLQ%<group>` (1 queue, read/write as in RocketMQ
//! 5.x, so operators can consume it), where nothing redelivers it. The copy keeps body, flag,
//! properties, sys flag, born time and hosts; it gains `RETRY_TOPIC` (the original topic, kept
//! across rounds), `ORIGIN_MESSAGE_ID` (the first round's offset msgId) and `reconsumeTimes + 1`.
//!
//! The copy goes through the broker's write path ([`super::put::put_message`]), which turns a
//! `DELAY` level into a SCHEDULE_TOPIC_XXXX record; the schedule service moves it to the retry
//! topic when due, where the group's push consumers (subscribed to `%RETRY%<group>`) pick it up.

use comet_protocol::body::perm;
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::ConsumerSendMsgBackRequestHeader;
use comet_protocol::message::MessageExt;
use comet_protocol::message::properties::keys;
use comet_protocol::naming::{dlq_topic, retry_topic};
use comet_store::PutMessageStatus;

use super::Refusal;
use super::put::{DLQ_NUMS_PER_GROUP, put_status_name};
use crate::context::BrokerContext;
use crate::processor::client_manage::TOPIC_SYS_FLAG_UNIT_SUB;
use crate::processor::random_below;

/// Delay level added to `reconsumeTimes` when the client leaves the level to the broker.
pub const RETRY_BASE_DELAY_LEVEL: i32 = 3;

/// Where a message given back goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendBackTarget {
    pub dead_letter: bool,
    /// DELAY level of the copy (0 for the DLQ).
    pub delay_level: i32,
}

/// Where a message given back goes: the DLQ when the retries are used up or the client asks for
/// it, else the retry topic with the client's level or `3 + reconsumeTimes`.
pub fn decide_target(
    reconsume_times: i32,
    max_reconsume_times: i32,
    delay_level: i32,
) -> SendBackTarget {
    if reconsume_times >= max_reconsume_times || delay_level < 0 {
        SendBackTarget {
            dead_letter: true,
            delay_level: 0,
        }
    } else if delay_level == 0 {
        SendBackTarget {
            dead_letter: false,
            delay_level: RETRY_BASE_DELAY_LEVEL.saturating_add(reconsume_times),
        }
    } else {
        SendBackTarget {
            dead_letter: false,
            delay_level,
        }
    }
}

/// Runs one send-back. `honour_max_reconsume_times`: the header's `maxReconsumeTimes`, when
/// given, overrides the group's retry budget (clients since `V3_4_9` send it).
pub async fn send_back(
    ctx: &BrokerContext,
    header: &ConsumerSendMsgBackRequestHeader,
    honour_max_reconsume_times: bool,
) -> Result<(), Refusal> {
    let group = header.group.as_str();
    let Some(group_config) = ctx.subscription_groups.find_or_create(group) else {
        return Err(Refusal::new(
            ResponseCode::SubscriptionGroupNotExist,
            format!("subscription group not exist, {group}"),
        ));
    };
    if !perm::is_writeable(ctx.broker_permission()) {
        return Err(Refusal::new(
            ResponseCode::NoPermission,
            format!(
                "the broker[{}] sending message is forbidden",
                ctx.store_host.ip()
            ),
        ));
    }
    if group_config.retry_queue_nums <= 0 {
        // RocketMQ's answer when a group has retries disabled: accepted and discarded.
        return Ok(());
    }

    let mut topic = retry_topic(group);
    let topic_sys_flag = if header.unit_mode == Some(true) {
        TOPIC_SYS_FLAG_UNIT_SUB
    } else {
        0
    };
    let Some(retry_config) = ctx.topic_config.create_topic_in_send_message_back(
        &topic,
        group_config.retry_queue_nums,
        perm::PERM_READ_WRITE,
        topic_sys_flag,
    ) else {
        return Err(Refusal::new(
            ResponseCode::SystemError,
            format!("topic[{topic}] not exist"),
        ));
    };
    if !perm::is_writeable(retry_config.perm) {
        return Err(Refusal::new(
            ResponseCode::NoPermission,
            format!("the topic[{topic}] sending message is forbidden"),
        ));
    }
    let mut queue_id = random_below(retry_config.write_queue_nums.max(1));

    let Some(original) = ctx.store.lookup_message_by_offset(header.offset) else {
        return Err(Refusal::new(
            ResponseCode::SystemError,
            format!("look message by offset failed, {}", header.offset),
        ));
    };

    let mut max_reconsume_times = group_config.retry_max_times;
    if honour_max_reconsume_times && let Some(times) = header.max_reconsume_times {
        max_reconsume_times = times;
    }
    let target = decide_target(
        original.reconsume_times,
        max_reconsume_times,
        header.delay_level,
    );
    if target.dead_letter {
        let origin = header.origin_topic.as_deref().unwrap_or(&original.topic);
        ctx.traffic.record_dlq(group, origin);
        topic = dlq_topic(group);
        queue_id = random_below(DLQ_NUMS_PER_GROUP);
        if ctx
            .topic_config
            .create_topic_in_send_message_back(&topic, DLQ_NUMS_PER_GROUP, perm::PERM_READ_WRITE, 0)
            .is_none()
        {
            return Err(Refusal::new(
                ResponseCode::SystemError,
                format!("topic[{topic}] not exist"),
            ));
        }
    }

    let copy = retry_copy(&original, topic, queue_id, target.delay_level);
    let result = crate::core::put::put_message(ctx, copy).await;
    if result.status != PutMessageStatus::PutOk {
        return Err(Refusal::new(
            ResponseCode::SystemError,
            put_status_name(result.status),
        ));
    }
    tracing::debug!(
        group,
        dead_letter = target.dead_letter,
        delay_level = target.delay_level,
        reconsume_times = original.reconsume_times + 1,
        "message sent back"
    );
    Ok(())
}

/// The copy of `original` to store in `topic`/`queue_id` with `delay_level`.
pub fn retry_copy(
    original: &MessageExt,
    topic: String,
    queue_id: i32,
    delay_level: i32,
) -> MessageExt {
    let mut copy = MessageExt::new(topic, original.body.clone());
    copy.flag = original.flag;
    copy.properties = original.properties.clone();
    if !copy.properties.contains_key(keys::RETRY_TOPIC) {
        copy.properties
            .insert(keys::RETRY_TOPIC, original.topic.clone());
    }
    copy.properties.insert(keys::WAIT_STORE_MSG_OK, "false");
    copy.properties
        .insert(keys::DELAY_TIME_LEVEL, delay_level.to_string());
    let has_origin = copy
        .properties
        .get(keys::ORIGIN_MESSAGE_ID)
        .is_some_and(|id| !id.trim().is_empty());
    if !has_origin {
        copy.properties
            .insert(keys::ORIGIN_MESSAGE_ID, original.offset_msg_id());
    }
    copy.queue_id = queue_id;
    copy.sys_flag = original.sys_flag;
    copy.born_timestamp = original.born_timestamp;
    copy.born_host = original.born_host;
    copy.store_host = original.store_host;
    copy.reconsume_times = original.reconsume_times.saturating_add(1);
    copy
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn target_follows_section_6_8() {
        // First failure, broker decides: level 3 (10 s).
        assert_eq!(
            decide_target(0, 16, 0),
            SendBackTarget {
                dead_letter: false,
                delay_level: 3
            }
        );
        assert_eq!(decide_target(5, 16, 0).delay_level, 8);
        // Client-chosen level is kept.
        assert_eq!(decide_target(5, 16, 2).delay_level, 2);
        // Retries used up, or a negative level: DLQ.
        assert!(decide_target(16, 16, 0).dead_letter);
        assert!(decide_target(0, 16, -1).dead_letter);
        assert!(!decide_target(15, 16, 0).dead_letter);
    }

    #[test]
    fn copy_keeps_the_first_topic_and_origin_id() {
        let mut original = MessageExt::new("T", Bytes::from_static(b"body"));
        original.commit_log_offset = 4096;
        original.flag = 7;
        original.reconsume_times = 2;
        original.properties.insert(keys::TAGS, "TagA");
        let first = retry_copy(&original, "%RETRY%g".into(), 0, 5);
        assert_eq!(first.properties.get(keys::RETRY_TOPIC), Some("T"));
        assert_eq!(first.properties.get(keys::DELAY_TIME_LEVEL), Some("5"));
        assert_eq!(first.properties.get(keys::WAIT_STORE_MSG_OK), Some("false"));
        assert_eq!(first.properties.get(keys::TAGS), Some("TagA"));
        assert_eq!(
            first
                .properties
                .get(keys::ORIGIN_MESSAGE_ID)
                .map(str::to_owned),
            Some(original.offset_msg_id())
        );
        assert_eq!((first.reconsume_times, first.flag), (3, 7));

        // A later round (the copy read back from %RETRY%g) keeps RETRY_TOPIC and the origin id.
        let mut stored = first.clone();
        stored.commit_log_offset = 9999;
        let second = retry_copy(&stored, "%RETRY%g".into(), 0, 6);
        assert_eq!(second.properties.get(keys::RETRY_TOPIC), Some("T"));
        assert_eq!(
            second
                .properties
                .get(keys::ORIGIN_MESSAGE_ID)
                .map(str::to_owned),
            Some(original.offset_msg_id())
        );
        assert_eq!(second.reconsume_times, 4);
    }
}
