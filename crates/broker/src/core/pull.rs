//! Reading a queue: a consumer's pull (RocketMQ's PULL_MESSAGE and LITE_PULL_MESSAGE).
//!
//! The checks run in RocketMQ's order, because clients react to the exact response code: broker
//! read permission, subscription group (SUBSCRIPTION_GROUP_NOT_EXIST / consumeEnable), topic
//! (TOPIC_NOT_EXIST / read permission / queue id), then the subscription — from the request when
//! the SUBSCRIPTION bit is set, otherwise from the group's heartbeat (SUBSCRIPTION_NOT_EXIST,
//! SUBSCRIPTION_NOT_LATEST, broadcast permission). The store result maps to a response code as a
//! Java broker maps it ([`response_code`]). A first attempt also commits the offset the
//! consumer carries (a slave keeps the offsets its master sends instead).

use comet_protocol::body::heartbeat::EXPRESSION_TYPE_TAG;
use comet_protocol::body::{MessageModel, perm};
use comet_protocol::body::{SubscriptionData, SubscriptionGroupConfig, TopicConfig};
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::PullMessageRequestHeader;
use comet_store::message_store::MAX_PULL_MSG_SIZE;
use comet_store::{GetMessageResult, GetMessageStatus};

use super::Refusal;
use crate::context::BrokerContext;
use crate::filter::{TagFilter, is_tag_type};

/// Broker id of a group's master.
pub const MASTER_ID: i64 = 0;

/// What a pull read.
#[derive(Debug)]
pub struct Pulled {
    /// SUCCESS with messages, else why there are none (PULL_NOT_FOUND, PULL_OFFSET_MOVED, ...).
    pub code: ResponseCode,
    pub result: GetMessageResult,
    /// Which broker of the group the consumer should pull from next.
    pub suggested_broker: i64,
    /// The subscription's filter, for a pull held until messages arrive.
    pub(crate) filter: TagFilter,
}

/// Reads `header`'s queue for `client` (its address, named in the offset log). `first_attempt`:
/// the consumer's own request, which may commit its offset (a held pull answered later is not).
pub fn pull(
    ctx: &BrokerContext,
    client: &str,
    header: &PullMessageRequestHeader,
    first_attempt: bool,
) -> Result<Pulled, Refusal> {
    if ctx.config.is_slave() && !ctx.live_config().slave_read_enable {
        // A Java slave without slaveReadEnable rejects the request before any processing.
        return Err(Refusal::new(
            ResponseCode::SystemBusy,
            "[REJECTREQUEST]system busy, start flow control for a while",
        ));
    }
    let topic = header.topic.as_str();
    let group = header.consumer_group.as_str();
    let (group_config, _topic_config) = check_access(ctx, client, header)?;
    let subscription = resolve_subscription(ctx, header, group_config.consume_broadcast_enable)?;
    if !is_tag_type(Some(subscription.expression_type.as_str())) {
        return Err(Refusal::new(
            ResponseCode::SystemError,
            format!(
                "The broker does not support consumer to filter message by {}",
                subscription.expression_type
            ),
        ));
    }
    let filter = TagFilter::new(&subscription);
    let max_bytes = header
        .max_msg_bytes
        .and_then(|b| usize::try_from(b).ok())
        .filter(|b| *b > 0)
        .unwrap_or(MAX_PULL_MSG_SIZE);
    let max_nums = usize::try_from(header.max_msg_nums).unwrap_or(0);
    let result = ctx.store.get_message(
        group,
        topic,
        header.queue_id,
        header.queue_offset,
        max_nums,
        max_bytes,
        Some(&filter),
    );
    let code = response_code(result.status, header.queue_offset);
    if matches!(code, ResponseCode::Success | ResponseCode::PullNotFound) {
        ctx.consumer_offsets.commit_pull_offset(
            group,
            topic,
            header.queue_id,
            result.next_begin_offset,
        );
    }
    if code == ResponseCode::Success {
        ctx.traffic.record_out(
            topic,
            group,
            result.messages.len(),
            result.buffer_total_size,
        );
    }
    let suggested_broker = suggest_broker(ctx, &group_config, result.suggest_pulling_from_slave);
    // A slave keeps the offsets its master sends it; a consumer's pull does not commit there.
    if first_attempt && header.has_commit_offset() && !ctx.config.is_slave() {
        ctx.consumer_offsets.commit_offset(
            client,
            group,
            topic,
            header.queue_id,
            header.commit_offset,
        );
    }
    Ok(Pulled {
        code,
        result,
        suggested_broker,
        filter,
    })
}

/// RocketMQ's name of a store status (the pull response's remark).
pub fn status_name(status: GetMessageStatus) -> &'static str {
    match status {
        GetMessageStatus::Found => "FOUND",
        GetMessageStatus::NoMatchedMessage => "NO_MATCHED_MESSAGE",
        GetMessageStatus::MessageWasRemoving => "MESSAGE_WAS_REMOVING",
        GetMessageStatus::OffsetFoundNull => "OFFSET_FOUND_NULL",
        GetMessageStatus::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
        GetMessageStatus::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
        GetMessageStatus::OffsetTooSmall => "OFFSET_TOO_SMALL",
        GetMessageStatus::NoMatchedLogicQueue => "NO_MATCHED_LOGIC_QUEUE",
        GetMessageStatus::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
    }
}

/// The response code of a store status. `request_offset` matters for an empty
/// queue: pulling it from 0 is "nothing yet", from anywhere else the offset is wrong.
pub fn response_code(status: GetMessageStatus, request_offset: i64) -> ResponseCode {
    match status {
        GetMessageStatus::Found => ResponseCode::Success,
        GetMessageStatus::NoMatchedMessage | GetMessageStatus::MessageWasRemoving => {
            ResponseCode::PullRetryImmediately
        }
        GetMessageStatus::NoMatchedLogicQueue | GetMessageStatus::NoMessageInQueue => {
            if request_offset != 0 {
                ResponseCode::PullOffsetMoved
            } else {
                ResponseCode::PullNotFound
            }
        }
        GetMessageStatus::OffsetFoundNull | GetMessageStatus::OffsetOverflowOne => {
            ResponseCode::PullNotFound
        }
        GetMessageStatus::OffsetOverflowBadly | GetMessageStatus::OffsetTooSmall => {
            ResponseCode::PullOffsetMoved
        }
    }
}

/// The checks before a pull reads anything: the broker and the topic are readable, the group
/// exists (or is created) and may consume, the queue id is one of the topic's read queues.
fn check_access(
    ctx: &BrokerContext,
    client: &str,
    header: &PullMessageRequestHeader,
) -> Result<(SubscriptionGroupConfig, TopicConfig), Refusal> {
    let topic = header.topic.as_str();
    let group = header.consumer_group.as_str();
    if !perm::is_readable(ctx.broker_permission()) {
        return Err(Refusal::new(
            ResponseCode::NoPermission,
            format!(
                "the broker[{}] pulling message is forbidden",
                ctx.store_host.ip()
            ),
        ));
    }
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
    let topic_config = super::readable_topic(ctx, topic, "pulling")?;
    if header.queue_id < 0 || header.queue_id >= topic_config.read_queue_nums {
        return Err(Refusal::new(
            ResponseCode::SystemError,
            format!(
                "queueId[{}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}] consumer:[{}]",
                header.queue_id, topic_config.read_queue_nums, client
            ),
        ));
    }
    Ok((group_config, topic_config))
}

/// Which broker of the group the consumer should pull from next: with `slaveReadEnable`, a
/// consumer further behind than memory holds is sent to the group's
/// `whichBrokerWhenConsumeSlowly` (a slave), the others to the group's `brokerId`; without it,
/// always the master.
fn suggest_broker(ctx: &BrokerContext, group: &SubscriptionGroupConfig, slowly: bool) -> i64 {
    if !ctx.live_config().slave_read_enable {
        return MASTER_ID;
    }
    if slowly {
        group.which_broker_when_consume_slowly
    } else {
        group.broker_id
    }
}

/// The subscription the pull filters with.
fn resolve_subscription(
    ctx: &BrokerContext,
    header: &PullMessageRequestHeader,
    consume_broadcast_enable: bool,
) -> Result<SubscriptionData, Refusal> {
    let group = header.consumer_group.as_str();
    let topic = header.topic.as_str();
    if header.has_subscription() {
        let expression = header.subscription.as_deref().unwrap_or("*");
        let mut data = SubscriptionData::from_tag_expression(topic, expression, header.sub_version);
        data.expression_type = header
            .expression_type
            .clone()
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| EXPRESSION_TYPE_TAG.to_owned());
        return Ok(data);
    }
    let Some(info) = ctx.consumers.group_info(group) else {
        return Err(Refusal::new(
            ResponseCode::SubscriptionNotExist,
            format!("the consumer's group info not exist, group: {group}"),
        ));
    };
    if !consume_broadcast_enable && info.message_model == MessageModel::Broadcasting {
        return Err(Refusal::new(
            ResponseCode::NoPermission,
            format!("the consumer group[{group}] can not consume by broadcast way"),
        ));
    }
    let Some(data) = info.subscription(topic).cloned() else {
        return Err(Refusal::new(
            ResponseCode::SubscriptionNotExist,
            format!("the consumer's subscription not exist, group: {group}, topic: {topic}"),
        ));
    };
    if data.sub_version < header.sub_version {
        return Err(Refusal::new(
            ResponseCode::SubscriptionNotLatest,
            format!(
                "the consumer's subscription not latest, group: {group}, topic: {topic}, stored version {} < {}",
                data.sub_version, header.sub_version
            ),
        ));
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_to_code_follows_the_fact_sheet() {
        use GetMessageStatus::*;
        assert_eq!(response_code(Found, 5), ResponseCode::Success);
        assert_eq!(
            response_code(NoMatchedMessage, 5),
            ResponseCode::PullRetryImmediately
        );
        assert_eq!(
            response_code(MessageWasRemoving, 5),
            ResponseCode::PullRetryImmediately
        );
        assert_eq!(
            response_code(NoMessageInQueue, 0),
            ResponseCode::PullNotFound
        );
        assert_eq!(
            response_code(NoMessageInQueue, 3),
            ResponseCode::PullOffsetMoved
        );
        assert_eq!(
            response_code(NoMatchedLogicQueue, 0),
            ResponseCode::PullNotFound
        );
        assert_eq!(
            response_code(NoMatchedLogicQueue, 1),
            ResponseCode::PullOffsetMoved
        );
        assert_eq!(
            response_code(OffsetTooSmall, 0),
            ResponseCode::PullOffsetMoved
        );
        assert_eq!(
            response_code(OffsetOverflowOne, 9),
            ResponseCode::PullNotFound
        );
        assert_eq!(
            response_code(OffsetOverflowBadly, 9),
            ResponseCode::PullOffsetMoved
        );
        assert_eq!(
            response_code(OffsetFoundNull, 9),
            ResponseCode::PullNotFound
        );
        assert_eq!(status_name(OffsetOverflowOne), "OFFSET_OVERFLOW_ONE");
    }
}
