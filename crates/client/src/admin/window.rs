//! Reading a topic by time, and resending a dead letter, whether or not a group has a client
//! online.
//!
//! - A time window of a topic is read by locating the window's first offset in each queue
//!   (SEARCH_OFFSET_BY_TIMESTAMP) and pulling as the tools group, which commits nothing.
//! - One dead-lettered message is resent to its original topic as a plain send, so no consumer
//!   has to be online.

use comet_protocol::message::MessageExt;
use comet_protocol::message::properties::keys;

use super::{DlqResendOutcome, MQAdmin, OffsetRange};
use crate::error::Result;
use crate::message::Message;
use crate::producer::DefaultMQProducer;

impl MQAdmin {
    /// Messages of `topic` stored in `[begin, end]` (ms), at most `max`, ordered by store time.
    /// Reads as [`super::TOOLS_CONSUMER_GROUP`] and commits nothing (each queue's range from
    /// [`MQAdmin::offset_ranges`], read with [`MQAdmin::pull_range`]). The second value tells
    /// whether the window held more than `max` messages.
    pub async fn messages_by_time(
        &self,
        topic: &str,
        begin: i64,
        end: i64,
        max: usize,
    ) -> Result<(Vec<MessageExt>, bool)> {
        let mut out = Vec::new();
        for (queue, addr, range) in self.offset_ranges(topic, Some(begin), Some(end)).await? {
            // The end search lands on the first message at or after `end`, which may be inside
            // the window: read one past it and let the time filter decide. One more than asked
            // for, so an overflow is detected.
            let range = OffsetRange {
                from: range.from,
                to: range.to.saturating_add(1),
            };
            let mut found = Vec::new();
            self.pull_range(
                &addr,
                topic,
                queue.queue_id,
                range,
                max.saturating_add(1),
                &mut found,
            )
            .await?;
            found.retain(|m| m.store_timestamp >= begin && m.store_timestamp <= end);
            out.append(&mut found);
        }
        out.sort_by_key(|m| (m.store_timestamp, m.commit_log_offset));
        let truncated = out.len() > max;
        out.truncate(max);
        Ok((out, truncated))
    }

    /// Sends one dead-lettered message back to its original topic with `producer` (body, flag,
    /// tags, keys and user properties kept). A plain send: no client of the group needs to be
    /// online.
    pub async fn resend_dlq_message(
        &self,
        msg: &MessageExt,
        producer: &DefaultMQProducer,
    ) -> DlqResendOutcome {
        let msg_id = msg.msg_id();
        let Some(topic) = Self::dlq_origin_topic(msg) else {
            return DlqResendOutcome {
                msg_id,
                topic: String::new(),
                error: Some("the original topic is unknown".to_owned()),
            };
        };
        let mut copy = Message::new(topic.clone(), msg.body.clone());
        copy.flag = msg.flag;
        for (key, value) in msg.properties.iter() {
            if !BROKER_SET_PROPERTIES.contains(&key) {
                // Reserved keys are refused by design: tags and keys are copied below.
                let _ = copy.put_user_property(key, value);
            }
        }
        if let Some(tags) = msg.tags() {
            copy.set_tags(tags);
        }
        let keys: Vec<String> = msg.keys().map(str::to_owned).collect();
        if !keys.is_empty() {
            copy.set_keys(keys);
        }
        let error = producer.send(copy).await.err().map(|e| e.to_string());
        DlqResendOutcome {
            msg_id,
            topic,
            error,
        }
    }
}

/// Properties the broker sets on a dead-lettered or stored message; a resent copy must not carry
/// them.
const BROKER_SET_PROPERTIES: &[&str] = &[
    keys::DLQ_ORIGIN_TOPIC,
    keys::DLQ_ORIGIN_MESSAGE_ID,
    keys::ORIGIN_MESSAGE_ID,
    keys::CONSUME_START_TIMESTAMP,
    keys::CLUSTER,
    keys::BORN_HOST,
    keys::BORN_TIMESTAMP,
    keys::CRC32,
];
