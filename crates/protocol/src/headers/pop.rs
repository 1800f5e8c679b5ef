//! The 5.x POP consumption requests: POP_MESSAGE (200050), ACK_MESSAGE (200051),
//! CHANGE_MESSAGE_INVISIBLETIME (200053), and their responses. A popped message stays invisible
//! to the group for `invisibleTime` ms; an ack within that time consumes it, otherwise the broker
//! hands it out again. BATCH_ACK_MESSAGE (200151) carries its acks in a JSON body instead of a
//! header.

use crate::headers::command_header;

/// `initMode` of a group reading a queue for the first time: from the queue's first message.
pub const POP_INIT_MODE_MIN: i32 = 0;
/// `initMode`: from the queue's last message (what the proxy sends).
pub const POP_INIT_MODE_MAX: i32 = 1;
/// Largest `maxMsgNums` a POP_MESSAGE may ask for.
pub const POP_MAX_MSG_NUMS: i32 = 32;

command_header! {
    /// POP_MESSAGE request.
    pub struct PopMessageRequestHeader [rpc] {
        req consumer_group: String => "consumerGroup",
        req topic: String => "topic",
        /// A read queue of the topic, or -1 for all of them.
        req queue_id: i32 => "queueId",
        req max_msg_nums: i32 => "maxMsgNums",
        /// How long the popped messages stay invisible (ms).
        req invisible_time: i64 => "invisibleTime",
        /// How long the broker may hold a pop that finds nothing (ms); 0 answers at once.
        req poll_time: i64 => "pollTime",
        /// When the client sent the request (ms since the epoch).
        req born_time: i64 => "bornTime",
        /// [`POP_INIT_MODE_MIN`] or [`POP_INIT_MODE_MAX`].
        req init_mode: i32 => "initMode",
        /// `TAG` (default) or `SQL92`.
        opt exp_type: String => "expType",
        /// The filter expression (`*` when absent).
        opt exp: String => "exp",
        /// FIFO pop: the queue stays blocked while a popped batch is un-acked.
        opt order: bool => "order",
        /// Identifies a FIFO pop attempt, so a retried request gets the same batch.
        opt attempt_id: String => "attemptId",
    }
}

command_header! {
    /// POP_MESSAGE response header; the body holds the popped records.
    pub struct PopMessageResponseHeader {
        /// When the broker popped the messages (ms since the epoch).
        req pop_time: i64 => "popTime",
        req invisible_time: i64 => "invisibleTime",
        /// The revive queue the checkpoints went to (999 for FIFO pops).
        req revive_qid: i32 => "reviveQid",
        /// Messages left in the queues read, past what was popped.
        req rest_num: i64 => "restNum",
        /// `flag qid startOffset` per queue read, `;`-joined.
        opt start_offset_info: String => "startOffsetInfo",
        /// `flag qid o1,o2,…` per queue read, `;`-joined.
        opt msg_offset_info: String => "msgOffsetInfo",
        /// FIFO pops only: delivery counts.
        opt order_count_info: String => "orderCountInfo",
    }
}

command_header! {
    /// ACK_MESSAGE request.
    pub struct AckMessageRequestHeader [rpc] {
        req consumer_group: String => "consumerGroup",
        /// The topic the message was read from (a retry topic for a redelivery).
        req topic: String => "topic",
        req queue_id: i32 => "queueId",
        /// The message's receipt handle (its POP_CK property).
        req extra_info: String => "extraInfo",
        /// The message's queue offset.
        req offset: i64 => "offset",
    }
}

command_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME request.
    pub struct ChangeInvisibleTimeRequestHeader [rpc] {
        req consumer_group: String => "consumerGroup",
        req topic: String => "topic",
        req queue_id: i32 => "queueId",
        /// The message's current receipt handle.
        req extra_info: String => "extraInfo",
        req offset: i64 => "offset",
        /// The new invisible time, counted from now (ms).
        req invisible_time: i64 => "invisibleTime",
    }
}

command_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME response: what the new receipt handle is built from.
    pub struct ChangeInvisibleTimeResponseHeader {
        req pop_time: i64 => "popTime",
        req invisible_time: i64 => "invisibleTime",
        req revive_qid: i32 => "reviveQid",
    }
}

command_header! {
    /// PEEK_MESSAGE request: read what a pop would, changing nothing.
    pub struct PeekMessageRequestHeader [rpc] {
        req topic: String => "topic",
        /// A read queue of the topic, or -1 for all of them.
        req queue_id: i32 => "queueId",
        req max_msg_nums: i32 => "maxMsgNums",
        req consumer_group: String => "consumerGroup",
    }
}

command_header! {
    /// NOTIFICATION request: whether a pop would find messages, waiting up to `pollTime`.
    pub struct NotificationRequestHeader [rpc] {
        req consumer_group: String => "consumerGroup",
        req topic: String => "topic",
        /// A read queue of the topic, or -1 for all of them.
        req queue_id: i32 => "queueId",
        req poll_time: i64 => "pollTime",
        req born_time: i64 => "bornTime",
        opt order: bool => "order",
        opt attempt_id: String => "attemptId",
    }
}

command_header! {
    /// NOTIFICATION response.
    pub struct NotificationResponseHeader {
        /// A pop would find messages.
        req has_msg: bool => "hasMsg",
        /// The broker holds too many requests to wait on this one.
        req polling_full: bool => "pollingFull",
    }
}

command_header! {
    /// POLLING_INFO request.
    pub struct PollingInfoRequestHeader [rpc] {
        req consumer_group: String => "consumerGroup",
        req topic: String => "topic",
        req queue_id: i32 => "queueId",
    }
}

command_header! {
    /// POLLING_INFO response.
    pub struct PollingInfoResponseHeader {
        /// Requests held by the broker right now.
        req polling_num: i32 => "pollingNum",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::ExtFields;
    use crate::headers::CommandHeader;

    #[test]
    fn pop_header_uses_apaches_keys() {
        let mut ext = ExtFields::new();
        for (k, v) in [
            ("consumerGroup", "g"),
            ("topic", "t"),
            ("queueId", "-1"),
            ("maxMsgNums", "32"),
            ("invisibleTime", "60000"),
            ("pollTime", "0"),
            ("bornTime", "1"),
            ("initMode", "1"),
            ("order", "false"),
        ] {
            ext.insert(k, v);
        }
        let h = PopMessageRequestHeader::from_ext_fields(&ext).unwrap();
        assert_eq!((h.queue_id, h.max_msg_nums, h.init_mode), (-1, 32, 1));
        assert_eq!(h.order, Some(false));
        assert_eq!(h.exp, None);
    }
}
