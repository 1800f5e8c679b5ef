//! CONSUMER_SEND_MSG_BACK (36): a consumer hands a message it failed to process back to the
//! broker, which re-publishes it to the group's retry topic (or the DLQ). The response has no
//! header.

use crate::headers::command_header;

/// `maxReconsumeTimes` the Java consumer sends when the user left it unset.
pub const DEFAULT_MAX_RECONSUME_TIMES: i32 = 16;

command_header! {
    /// CONSUMER_SEND_MSG_BACK request. `bname` travels in `rpc`.
    pub struct ConsumerSendMsgBackRequestHeader [rpc] {
        /// Commit-log (physical) offset of the message.
        req offset: i64 => "offset",
        req group: String => "group",
        /// 0 = broker decides; negative = straight to the DLQ.
        req delay_level: i32 => "delayLevel",
        opt origin_msg_id: String => "originMsgId",
        opt origin_topic: String => "originTopic",
        opt unit_mode: bool => "unitMode",
        opt max_reconsume_times: i32 => "maxReconsumeTimes",
    }
}
