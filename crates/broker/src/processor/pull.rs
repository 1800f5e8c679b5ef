//! PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361): reading a queue.
//!
//! The checks run in RocketMQ's order, because clients react to the exact response code: broker
//! read permission, subscription group (SUBSCRIPTION_GROUP_NOT_EXIST / consumeEnable), topic
//! (TOPIC_NOT_EXIST / read permission / queue id), then the subscription — from the request when
//! the SUBSCRIPTION bit is set, otherwise from the group's heartbeat (SUBSCRIPTION_NOT_EXIST,
//! SUBSCRIPTION_NOT_LATEST, broadcast permission). The store result maps to a response code as a
//! Java broker maps it ([`response_code`]); the response header always carries the queue's
//! bounds and the next offset, and the remark is the store status name.
//!
//! A pull that finds nothing new (PULL_NOT_FOUND) with the SUSPEND bit is held by the
//! broker's pull hold service instead of being
//! answered; a held pull re-enters [`process_pull`] with `allow_suspend = false`, which also keeps
//! it from committing its offset a second time.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::body::heartbeat::EXPRESSION_TYPE_TAG;
use comet_protocol::body::{MessageModel, perm};
use comet_protocol::body::{SubscriptionData, SubscriptionGroupConfig, TopicConfig};
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::{
    CommandHeaderExt, PullMessageRequestHeader, PullMessageResponseHeader,
};
use comet_remoting::{Channel, RequestProcessor};
use comet_store::message_store::MAX_PULL_MSG_SIZE;
use comet_store::{GetMessageResult, GetMessageStatus};
use futures::future::BoxFuture;
use tokio::time::Instant;

use crate::context::BrokerContext;
use crate::filter::{TagFilter, is_tag_type};
use crate::long_polling::{HeldPull, HeldPullAnswerer};
use crate::processor::{Rejection, client_host, decode_header, error_response, reject};

/// Broker id of a group's master.
pub const MASTER_ID: i64 = 0;

/// Handles PULL_MESSAGE and LITE_PULL_MESSAGE.
#[derive(Debug)]
pub struct PullMessageProcessor {
    ctx: Arc<BrokerContext>,
}

impl PullMessageProcessor {
    pub fn new(ctx: Arc<BrokerContext>) -> Self {
        Self { ctx }
    }
}

impl RequestProcessor for PullMessageProcessor {
    fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let response = process_pull(&self.ctx, channel, &request, true);
        Box::pin(async move { response })
    }
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

/// Runs one pull. `None` means the pull is held (answered later by the hold service); that only
/// happens with `allow_suspend`, which is also what marks a first attempt (commit allowed).
pub fn process_pull(
    ctx: &Arc<BrokerContext>,
    channel: &Channel,
    request: &RemotingCommand,
    allow_suspend: bool,
) -> Option<RemotingCommand> {
    pull(ctx, channel, request, allow_suspend).unwrap_or_else(|rejection| Some(*rejection))
}

fn pull(
    ctx: &Arc<BrokerContext>,
    channel: &Channel,
    request: &RemotingCommand,
    allow_suspend: bool,
) -> Result<Option<RemotingCommand>, Rejection> {
    if ctx.config.is_slave() && !ctx.live_config().slave_read_enable {
        // A Java slave without slaveReadEnable rejects the request before any processing.
        return Err(reject(
            ResponseCode::SystemBusy,
            "[REJECTREQUEST]system busy, start flow control for a while",
        ));
    }
    let header: PullMessageRequestHeader = decode_header(request)?;
    let topic = header.topic.as_str();
    let group = header.consumer_group.as_str();
    let (group_config, _topic_config) = check_access(ctx, channel, &header)?;
    let subscription = resolve_subscription(ctx, &header, group_config.consume_broadcast_enable)?;
    if !is_tag_type(Some(subscription.expression_type.as_str())) {
        return Err(reject(
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
    let suggested = suggest_broker(ctx, &group_config, result.suggest_pulling_from_slave);
    let response = build_response(code, result, suggested);

    // A slave keeps the offsets its master sends it; a consumer's pull does not commit there.
    if allow_suspend && header.has_commit_offset() && !ctx.config.is_slave() {
        ctx.consumer_offsets.commit_offset(
            client_host(channel),
            group,
            topic,
            header.queue_id,
            header.commit_offset,
        );
    }

    if code == ResponseCode::PullNotFound
        && allow_suspend
        && header.has_suspend()
        && hold(ctx, channel, request, &header, filter)
    {
        return Ok(None);
    }
    Ok(Some(response))
}

/// The checks before a pull reads anything: the broker and the topic are readable, the group
/// exists (or is created) and may consume, the queue id is one of the topic's read queues.
fn check_access(
    ctx: &BrokerContext,
    channel: &Channel,
    header: &PullMessageRequestHeader,
) -> Result<(SubscriptionGroupConfig, TopicConfig), Rejection> {
    let topic = header.topic.as_str();
    let group = header.consumer_group.as_str();
    if !perm::is_readable(ctx.broker_permission()) {
        return Err(reject(
            ResponseCode::NoPermission,
            format!(
                "the broker[{}] pulling message is forbidden",
                ctx.store_host.ip()
            ),
        ));
    }
    let Some(group_config) = ctx.subscription_groups.find_or_create(group) else {
        return Err(reject(
            ResponseCode::SubscriptionGroupNotExist,
            format!("subscription group [{group}] does not exist"),
        ));
    };
    if !group_config.consume_enable {
        return Err(reject(
            ResponseCode::NoPermission,
            format!("subscription group no permission, {group}"),
        ));
    }
    let Some(topic_config) = ctx.topic_config.select(topic) else {
        return Err(reject(
            ResponseCode::TopicNotExist,
            format!("topic[{topic}] not exist, apply first please!"),
        ));
    };
    if !perm::is_readable(topic_config.perm) {
        return Err(reject(
            ResponseCode::NoPermission,
            format!("the topic[{topic}] pulling message is forbidden"),
        ));
    }
    if header.queue_id < 0 || header.queue_id >= topic_config.read_queue_nums {
        return Err(reject(
            ResponseCode::SystemError,
            format!(
                "queueId[{}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}] consumer:[{}]",
                header.queue_id,
                topic_config.read_queue_nums,
                client_host(channel)
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

/// Hands a pull that found nothing to the hold service; false when the hold table is full and
/// the pull must be answered now.
fn hold(
    ctx: &Arc<BrokerContext>,
    channel: &Channel,
    request: &RemotingCommand,
    header: &PullMessageRequestHeader,
    filter: TagFilter,
) -> bool {
    let topic = header.topic.as_str();
    let held = HeldPull {
        request: request.clone(),
        channel: channel.clone(),
        pull_from_offset: header.queue_offset,
        filter,
        suspended_at: Instant::now(),
        hold_time: ctx.pull_hold.hold_time(header.suspend_timeout_millis),
    };
    ctx.pull_hold.bind(|| PullAnswerer::of(ctx));
    match ctx.pull_hold.hold(topic, header.queue_id, held) {
        Ok(()) => {
            // A message may have been dispatched between the read and the hold: its wake-up
            // found nothing to wake. Re-check so it is not left to the timer.
            let max = ctx.store.get_max_offset_in_queue(topic, header.queue_id);
            if max > header.queue_offset {
                ctx.pull_hold
                    .notify_message_arriving(topic, header.queue_id, max, None);
            }
            true
        }
        Err(_) => {
            tracing::debug!(
                topic,
                queue_id = header.queue_id,
                "hold table full; answering now"
            );
            false
        }
    }
}

/// The subscription the pull filters with.
fn resolve_subscription(
    ctx: &BrokerContext,
    header: &PullMessageRequestHeader,
    consume_broadcast_enable: bool,
) -> Result<SubscriptionData, Rejection> {
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
        return Err(Box::new(error_response(
            ResponseCode::SubscriptionNotExist,
            format!("the consumer's group info not exist, group: {group}"),
        )));
    };
    if !consume_broadcast_enable && info.message_model == MessageModel::Broadcasting {
        return Err(Box::new(error_response(
            ResponseCode::NoPermission,
            format!("the consumer group[{group}] can not consume by broadcast way"),
        )));
    }
    let Some(data) = info.subscription(topic).cloned() else {
        return Err(Box::new(error_response(
            ResponseCode::SubscriptionNotExist,
            format!("the consumer's subscription not exist, group: {group}, topic: {topic}"),
        )));
    };
    if data.sub_version < header.sub_version {
        return Err(Box::new(error_response(
            ResponseCode::SubscriptionNotLatest,
            format!(
                "the consumer's subscription not latest, group: {group}, topic: {topic}, stored version {} < {}",
                data.sub_version, header.sub_version
            ),
        )));
    }
    Ok(data)
}

/// The pull response: header with the queue bounds, remark = status name, body = records.
fn build_response(code: ResponseCode, result: GetMessageResult, suggested: i64) -> RemotingCommand {
    let header = PullMessageResponseHeader {
        suggest_which_broker_id: suggested,
        next_begin_offset: result.next_begin_offset,
        min_offset: result.min_offset,
        max_offset: result.max_offset,
        ..Default::default()
    };
    let mut response = RemotingCommand::response(code, Some(status_name(result.status).to_owned()));
    response.encode_header(&header);
    if code == ResponseCode::Success {
        // Slices of the mapped CommitLog (adjacent records joined), handed to the socket as
        // they are (one vectored write), never copied into one body: a catch-up read moves
        // gigabytes, and a copy per pull would cost more CPU than the rest of the pull.
        response.body_parts = result.transfer;
    }
    response
}

/// Answers the pulls the hold service kept: each runs again, now without suspension, and its
/// response goes to the original request, timed from the suspension for the request-latency
/// metrics.
#[derive(Debug)]
pub struct PullAnswerer {
    ctx: std::sync::Weak<BrokerContext>,
}

impl PullAnswerer {
    /// The answerer of `ctx`'s held pulls.
    pub fn of(ctx: &Arc<BrokerContext>) -> Arc<dyn HeldPullAnswerer> {
        Arc::new(PullAnswerer {
            ctx: Arc::downgrade(ctx),
        })
    }
}

impl HeldPullAnswerer for PullAnswerer {
    fn max_offset(&self, topic: &str, queue_id: i32) -> Option<i64> {
        let ctx = self.ctx.upgrade()?;
        Some(ctx.store.get_max_offset_in_queue(topic, queue_id))
    }

    fn respond(
        &self,
        channel: &Channel,
        request: &RemotingCommand,
        suspended_at: Instant,
    ) -> Option<RemotingCommand> {
        let ctx = self.ctx.upgrade()?;
        let mut response = process_pull(&ctx, channel, request, false)?;
        let key = crate::metrics::rpc::RpcKey {
            request_code: request.code,
            response_code: response.code,
            long_polling: true,
            oneway: false,
        };
        ctx.rpc.record(key, suspended_at.elapsed());
        response.opaque = request.opaque;
        response.serialize_type = request.serialize_type;
        Some(response)
    }
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
