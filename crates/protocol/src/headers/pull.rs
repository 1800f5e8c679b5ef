//! PULL_MESSAGE (11) / LITE_PULL_MESSAGE (361) request and the pull response, plus
//! the `PullSysFlag` bits that tell the broker whether to commit an offset, hold the request for
//! long polling, and use the request's own subscription.

use crate::headers::command_header;

/// `PullSysFlag` bits and helpers.
pub mod pull_sys_flag {
    /// Persist `commitOffset` for the group.
    pub const COMMIT_OFFSET: i32 = 0x1;
    /// The broker may hold the request (long polling).
    pub const SUSPEND: i32 = 0x2;
    /// Use `subscription`/`expressionType` from this request instead of the heartbeat's.
    pub const SUBSCRIPTION: i32 = 0x4;
    /// Class filter mode (legacy).
    pub const CLASS_FILTER: i32 = 0x8;
    /// 5.x lite pull consumer.
    pub const LITE_PULL: i32 = 0x10;

    /// Assembles a flag from its parts.
    pub const fn build(
        commit_offset: bool,
        suspend: bool,
        subscription: bool,
        class_filter: bool,
    ) -> i32 {
        (if commit_offset { COMMIT_OFFSET } else { 0 })
            | (if suspend { SUSPEND } else { 0 })
            | (if subscription { SUBSCRIPTION } else { 0 })
            | (if class_filter { CLASS_FILTER } else { 0 })
    }

    /// [`build`] plus the LITE_PULL bit.
    pub const fn build_lite(
        commit_offset: bool,
        suspend: bool,
        subscription: bool,
        class_filter: bool,
    ) -> i32 {
        build(commit_offset, suspend, subscription, class_filter) | LITE_PULL
    }

    pub const fn has_commit_offset(flag: i32) -> bool {
        flag & COMMIT_OFFSET != 0
    }

    pub const fn has_suspend(flag: i32) -> bool {
        flag & SUSPEND != 0
    }

    pub const fn has_subscription(flag: i32) -> bool {
        flag & SUBSCRIPTION != 0
    }

    pub const fn has_class_filter(flag: i32) -> bool {
        flag & CLASS_FILTER != 0
    }

    pub const fn has_lite_pull(flag: i32) -> bool {
        flag & LITE_PULL != 0
    }

    /// The flag with COMMIT_OFFSET cleared (pulls served by a slave must not commit).
    pub const fn clear_commit_offset(flag: i32) -> i32 {
        flag & !COMMIT_OFFSET
    }
}

/// Java push consumer's long-poll hold time (ms).
pub const DEFAULT_SUSPEND_TIMEOUT_MILLIS: i64 = 15_000;
/// Java push consumer's `maxMsgNums`.
pub const DEFAULT_PULL_BATCH_SIZE: i32 = 32;

command_header! {
    /// PULL_MESSAGE / LITE_PULL_MESSAGE request.
    pub struct PullMessageRequestHeader [rpc] {
        req consumer_group: String => "consumerGroup",
        req topic: String => "topic",
        req queue_id: i32 => "queueId",
        /// Logical (ConsumeQueue) offset to read from.
        req queue_offset: i64 => "queueOffset",
        req max_msg_nums: i32 => "maxMsgNums",
        /// [`pull_sys_flag`] bits.
        req sys_flag: i32 => "sysFlag",
        req commit_offset: i64 => "commitOffset",
        req suspend_timeout_millis: i64 => "suspendTimeoutMillis",
        opt subscription: String => "subscription",
        req sub_version: i64 => "subVersion",
        /// `TAG` (default) or `SQL92`.
        opt expression_type: String => "expressionType",
        opt max_msg_bytes: i32 => "maxMsgBytes",
        opt request_source: i32 => "requestSource",
        /// The real key is misspelled `proxyFrowardClientId`.
        opt proxy_forward_client_id: String => "proxyFrowardClientId",
    }
}

impl PullMessageRequestHeader {
    pub fn has_commit_offset(&self) -> bool {
        pull_sys_flag::has_commit_offset(self.sys_flag)
    }

    pub fn has_suspend(&self) -> bool {
        pull_sys_flag::has_suspend(self.sys_flag)
    }

    pub fn has_subscription(&self) -> bool {
        pull_sys_flag::has_subscription(self.sys_flag)
    }

    pub fn has_class_filter(&self) -> bool {
        pull_sys_flag::has_class_filter(self.sys_flag)
    }

    pub fn has_lite_pull(&self) -> bool {
        pull_sys_flag::has_lite_pull(self.sys_flag)
    }
}

command_header! {
    /// Pull response. `remark` carries the store status name (e.g. `FOUND`).
    pub struct PullMessageResponseHeader {
        /// 0 = master; where the client should pull next.
        req suggest_which_broker_id: i64 => "suggestWhichBrokerId",
        req next_begin_offset: i64 => "nextBeginOffset",
        req min_offset: i64 => "minOffset",
        /// Next offset to be written.
        req max_offset: i64 => "maxOffset",
        opt offset_delta: i64 => "offsetDelta",
        opt topic_sys_flag: i32 => "topicSysFlag",
        opt group_sys_flag: i32 => "groupSysFlag",
        opt forbidden_type: i32 => "forbiddenType",
    }
}

#[cfg(test)]
mod tests {
    use super::pull_sys_flag::*;
    use super::*;
    use crate::command::ExtFields;
    use crate::headers::CommandHeader;

    #[test]
    fn sys_flag_bits() {
        let f = build(true, true, false, false);
        assert_eq!(f, 3);
        assert!(has_commit_offset(f) && has_suspend(f) && !has_subscription(f));
        assert_eq!(clear_commit_offset(f), SUSPEND);
        assert_eq!(build_lite(false, true, true, false), 0x16);
        assert!(has_lite_pull(build_lite(false, false, false, false)));
        assert!(has_class_filter(build(false, false, false, true)));
    }

    #[test]
    fn pull_request_keys() {
        let ext: ExtFields = [
            ("consumerGroup", "g"),
            ("topic", "T"),
            ("queueId", "0"),
            ("queueOffset", "12"),
            ("maxMsgNums", "32"),
            ("sysFlag", "6"),
            ("commitOffset", "0"),
            ("suspendTimeoutMillis", "20000"),
            ("subscription", "*"),
            ("subVersion", "1700000000000"),
            ("expressionType", "TAG"),
            ("bname", "broker-a"),
        ]
        .into_iter()
        .collect();
        let h = PullMessageRequestHeader::from_ext_fields(&ext).unwrap();
        assert!(h.has_subscription() && h.has_suspend() && !h.has_commit_offset());
        assert_eq!(h.queue_offset, 12);
        assert_eq!(h.rpc.broker_name.as_deref(), Some("broker-a"));
        let mut out = ExtFields::new();
        h.to_ext_fields(&mut out);
        assert_eq!(PullMessageRequestHeader::from_ext_fields(&out).unwrap(), h);
    }
}
