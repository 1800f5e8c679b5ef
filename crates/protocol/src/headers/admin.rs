//! Admin and statistics headers: topic and subscription-group management, stats queries,
//! message queries by key or offset, offset reset, and the admin → broker → client forwards.

use crate::body::topic::TopicFilterType;
use crate::error::{ProtocolError, Result};
use crate::headers::{HeaderValue, ValueKind, command_header};

impl HeaderValue for TopicFilterType {
    const KIND: ValueKind = ValueKind::OneOf(&["SINGLE_TAG", "MULTI_TAG"]);
    fn parse(field: &'static str, raw: &str) -> Result<Self> {
        TopicFilterType::from_name(raw).ok_or_else(|| ProtocolError::MalformedField {
            field,
            value: raw.to_owned(),
        })
    }

    fn write_text(&self, out: &mut String) {
        out.push_str(self.name());
    }
}

command_header! {
    /// UPDATE_AND_CREATE_TOPIC (17).
    pub struct CreateTopicRequestHeader [rpc] {
        req topic: String => "topic",
        req default_topic: String => "defaultTopic",
        req read_queue_nums: i32 => "readQueueNums",
        req write_queue_nums: i32 => "writeQueueNums",
        req perm: i32 => "perm",
        req topic_filter_type: TopicFilterType => "topicFilterType",
        opt topic_sys_flag: i32 => "topicSysFlag",
        req order: bool => "order",
        /// 5.x attribute changes, e.g. `+message.type=NORMAL`.
        opt attributes: String => "attributes",
        opt force: bool => "force",
    }
}

command_header! {
    /// DELETE_TOPIC_IN_BROKER (215).
    pub struct DeleteTopicRequestHeader [rpc] {
        req topic: String => "topic",
    }
}

command_header! {
    /// GET_TOPIC_CONFIG (351).
    pub struct GetTopicConfigRequestHeader [rpc] {
        req topic: String => "topic",
    }
}

command_header! {
    /// GET_TOPIC_STATS_INFO (202); the answer is a TopicStatsTable body.
    pub struct GetTopicStatsInfoRequestHeader [rpc] {
        req topic: String => "topic",
    }
}

command_header! {
    /// GET_CONSUME_STATS (208); the answer is a ConsumeStats body.
    pub struct GetConsumeStatsRequestHeader [rpc] {
        req consumer_group: String => "consumerGroup",
        opt topic: String => "topic",
        /// 5.x: several topics, `;`-separated.
        opt topic_list: String => "topicList",
    }
}

command_header! {
    /// GET_CONSUMER_CONNECTION_LIST (203); the answer is a ConsumerConnection body.
    pub struct GetConsumerConnectionListRequestHeader [rpc] {
        req consumer_group: String => "consumerGroup",
    }
}

command_header! {
    /// GET_PRODUCER_CONNECTION_LIST (204).
    pub struct GetProducerConnectionListRequestHeader [rpc] {
        req producer_group: String => "producerGroup",
    }
}

command_header! {
    /// GET_SUBSCRIPTIONGROUP_CONFIG (352).
    pub struct GetSubscriptionGroupConfigRequestHeader [rpc] {
        req group: String => "group",
    }
}

command_header! {
    /// DELETE_SUBSCRIPTIONGROUP (207).
    pub struct DeleteSubscriptionGroupRequestHeader [rpc] {
        req group_name: String => "groupName",
        opt clean_offset: bool => "cleanOffset",
    }
}

command_header! {
    /// QUERY_TOPIC_CONSUME_BY_WHO (300).
    pub struct QueryTopicConsumeByWhoRequestHeader [rpc] {
        req topic: String => "topic",
    }
}

command_header! {
    /// QUERY_CONSUME_TIME_SPAN (303).
    pub struct QueryConsumeTimeSpanRequestHeader [rpc] {
        req topic: String => "topic",
        req group: String => "group",
    }
}

command_header! {
    /// GET_CONSUMER_RUNNING_INFO (307): admin → broker, forwarded broker → client.
    pub struct GetConsumerRunningInfoRequestHeader [rpc] {
        req consumer_group: String => "consumerGroup",
        req client_id: String => "clientId",
        opt jstack_enable: bool => "jstackEnable",
    }
}

command_header! {
    /// CONSUME_MESSAGE_DIRECTLY (309): admin → broker → client.
    pub struct ConsumeMessageDirectlyResultRequestHeader [rpc] {
        req consumer_group: String => "consumerGroup",
        opt client_id: String => "clientId",
        opt msg_id: String => "msgId",
        opt broker_name: String => "brokerName",
        opt topic: String => "topic",
        opt topic_sys_flag: i32 => "topicSysFlag",
        opt group_sys_flag: i32 => "groupSysFlag",
    }
}

command_header! {
    /// QUERY_MESSAGE (12). Ext `_UNIQUE_KEY_QUERY=true` means `key` is a UNIQ_KEY.
    pub struct QueryMessageRequestHeader [rpc] {
        req topic: String => "topic",
        req key: String => "key",
        req max_num: i32 => "maxNum",
        req begin_timestamp: i64 => "beginTimestamp",
        req end_timestamp: i64 => "endTimestamp",
    }
}

/// Ext key marking a QUERY_MESSAGE by UNIQ_KEY.
pub const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";

command_header! {
    /// Response to QUERY_MESSAGE.
    pub struct QueryMessageResponseHeader {
        req index_last_update_timestamp: i64 => "indexLastUpdateTimestamp",
        req index_last_update_phyoffset: i64 => "indexLastUpdatePhyoffset",
    }
}

command_header! {
    /// VIEW_MESSAGE_BY_ID (33).
    pub struct ViewMessageRequestHeader [rpc] {
        /// Commit-log offset.
        req offset: i64 => "offset",
        opt topic: String => "topic",
    }
}

command_header! {
    /// INVOKE_BROKER_TO_RESET_OFFSET (222), and RESET_CONSUMER_CLIENT_OFFSET (220) broker →
    /// clients, whose body is a ResetOffsetBody.
    pub struct ResetOffsetRequestHeader [rpc] {
        req group: String => "group",
        req topic: String => "topic",
        /// Absent means every queue (Java default −1).
        opt queue_id: i32 => "queueId",
        opt offset: i64 => "offset",
        req timestamp: i64 => "timestamp",
        req is_force: bool => "isForce",
    }
}

impl ResetOffsetRequestHeader {
    /// The queue to reset, or −1 for all.
    pub fn queue_id_or_all(&self) -> i32 {
        self.queue_id.unwrap_or(-1)
    }
}

command_header! {
    /// GET_CONSUMER_STATUS_FROM_CLIENT (221) / INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223).
    pub struct GetConsumerStatusRequestHeader [rpc] {
        req topic: String => "topic",
        req group: String => "group",
        opt client_addr: String => "clientAddr",
    }
}

command_header! {
    /// GET_BROKER_CONSUME_STATS (317): every group's consume stats on the broker; with
    /// `isOrder`, only the topics marked orderly.
    pub struct GetConsumeStatsInBrokerHeader [rpc] {
        req is_order: bool => "isOrder",
    }
}

command_header! {
    /// VIEW_BROKER_STATS_DATA (315): one statistic of the broker; the answer is a
    /// BrokerStatsData body.
    pub struct ViewBrokerStatsDataRequestHeader [rpc] {
        req stats_name: String => "statsName",
        req stats_key: String => "statsKey",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::ExtFields;
    use crate::headers::CommandHeader;

    #[test]
    fn create_topic_filter_type() {
        let h = CreateTopicRequestHeader {
            topic: "T".into(),
            default_topic: "TBW102".into(),
            read_queue_nums: 8,
            write_queue_nums: 8,
            perm: 6,
            topic_filter_type: TopicFilterType::MultiTag,
            order: false,
            ..Default::default()
        };
        let mut ext = ExtFields::new();
        h.to_ext_fields(&mut ext);
        assert_eq!(ext.get("topicFilterType"), Some("MULTI_TAG"));
        assert_eq!(ext.get("order"), Some("false"));
        assert_eq!(CreateTopicRequestHeader::from_ext_fields(&ext).unwrap(), h);
        ext.insert("topicFilterType", "NONE");
        assert!(matches!(
            CreateTopicRequestHeader::from_ext_fields(&ext),
            Err(ProtocolError::MalformedField {
                field: "topicFilterType",
                ..
            })
        ));
    }
}
