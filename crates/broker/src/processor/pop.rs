//! The POP requests: POP_MESSAGE (200050), PEEK_MESSAGE (200052), NOTIFICATION (200054),
//! POLLING_INFO (200055), SET_MESSAGE_REQUEST_MODE, QUERY_ASSIGNMENT, and the acks
//! (ACK_MESSAGE 200051, BATCH_ACK_MESSAGE 200151, CHANGE_MESSAGE_INVISIBLETIME 200053): each
//! decoded, run by the broker's POP operations ([`crate::core::pop`], [`crate::core::ack`]) and
//! answered as a Java broker answers.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
    CommandHeaderExt, PopMessageRequestHeader, PopMessageResponseHeader,
};
use comet_protocol::naming::RETRY_GROUP_TOPIC_PREFIX;
use comet_remoting::{Channel, RequestProcessor};
use futures::future::BoxFuture;

use crate::context::BrokerContext;
use crate::core::Refusal;
use crate::core::pop::{Popped, pop};
use crate::processor::{Answer, answer, client_host, decode_header, reject};

/// Handles the POP read requests.
#[derive(Debug)]
pub struct PopMessageProcessor {
    ctx: Arc<BrokerContext>,
}

impl PopMessageProcessor {
    /// A processor over `ctx`.
    pub fn new(ctx: Arc<BrokerContext>) -> Self {
        Self { ctx }
    }
}

impl RequestProcessor for PopMessageProcessor {
    fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let ctx = Arc::clone(&self.ctx);
        let client = client_host(channel);
        Box::pin(async move {
            let response = match RequestCode::from_code(request.code) {
                RequestCode::PopMessage => answer(pop_message(&ctx, &client, &request).await),
                RequestCode::PeekMessage => answer(crate::pop::notify::peek(&ctx, &request)),
                RequestCode::Notification => {
                    answer(crate::pop::notify::notification(&ctx, &request).await)
                }
                RequestCode::SetMessageRequestMode => set_request_mode(&ctx, &request),
                RequestCode::QueryAssignment => {
                    crate::pop::assignment::query_assignment(&ctx, &request)
                }
                RequestCode::GetAllMessageRequestMode => {
                    RemotingCommand::response(ResponseCode::Success, None)
                        .with_body(ctx.pop.request_modes.encode().into_bytes())
                }
                RequestCode::PollingInfo => {
                    answer(crate::pop::notify::polling_info(&ctx, &request))
                }
                _ => crate::processor::error_response(
                    ResponseCode::RequestCodeNotSupported,
                    format!("request code {} not supported", request.code),
                ),
            };
            Some(response)
        })
    }
}

/// SET_MESSAGE_REQUEST_MODE: the body names the topic, group, mode and share count.
fn set_request_mode(ctx: &BrokerContext, request: &RemotingCommand) -> RemotingCommand {
    use crate::pop::request_mode::MessageRequestMode;
    let mode: Option<MessageRequestMode> = request
        .body
        .as_ref()
        .and_then(|b| serde_json::from_slice(b).ok());
    let Some(mode) = mode else {
        return crate::processor::error_response(
            ResponseCode::SystemError,
            "set message request mode: body does not decode",
        );
    };
    if mode.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        return crate::processor::error_response(
            ResponseCode::NoPermission,
            "retry topic is not allowed to set mode",
        );
    }
    if ctx.topic_config.select(&mode.topic).is_none() {
        return crate::processor::error_response(
            ResponseCode::TopicNotExist,
            format!("topic[{}] not exist", mode.topic),
        );
    }
    if ctx
        .subscription_groups
        .find_or_create(&mode.consumer_group)
        .is_none()
    {
        return crate::processor::error_response(
            ResponseCode::SubscriptionGroupNotExist,
            "subscription group does not exist",
        );
    }
    match ctx.pop.request_modes.set(mode) {
        Ok(()) => RemotingCommand::response(ResponseCode::Success, None),
        Err(e) => crate::processor::error_response(ResponseCode::SystemError, e.to_string()),
    }
}

/// POP_MESSAGE: SUCCESS with the records, POLLING_TIMEOUT when none came within the poll
/// time, POLLING_FULL when too many pops are held.
async fn pop_message(ctx: &Arc<BrokerContext>, client: &str, request: &RemotingCommand) -> Answer {
    let header: PopMessageRequestHeader = decode_header(request)?;
    let result = match pop(ctx, client, header).await.map_err(refused)? {
        Popped::Batch(result) => result,
        Popped::PollingFull => {
            return Ok(RemotingCommand::response(
                ResponseCode::PollingFull,
                Some("NO_MESSAGE_IN_QUEUE".to_owned()),
            ));
        }
    };
    let batch = result.batch;
    let found = !batch.records.is_empty();
    let (code, remark) = if found {
        (ResponseCode::Success, "FOUND")
    } else {
        (ResponseCode::PollingTimeout, "NO_MESSAGE_IN_QUEUE")
    };
    let header = PopMessageResponseHeader {
        pop_time: result.pop_time,
        invisible_time: result.invisible_time,
        revive_qid: result.revive_qid,
        rest_num: batch.rest_num,
        start_offset_info: Some(batch.start_info),
        msg_offset_info: Some(batch.msg_info),
        order_count_info: result.order.then_some(batch.order_info),
    };
    let mut response = RemotingCommand::response(code, Some(remark.to_owned()));
    response.encode_header(&header);
    if found {
        response.body_parts = batch.records;
    }
    Ok(response)
}

/// The answer to a refused operation.
fn refused(refusal: Refusal) -> Box<RemotingCommand> {
    reject(refusal.code, refusal.remark)
}

/// Handles the acks and invisible-time changes of POP consumers.
#[derive(Debug)]
pub struct AckMessageProcessor {
    ctx: Arc<BrokerContext>,
}

impl AckMessageProcessor {
    /// A processor over `ctx`.
    pub fn new(ctx: Arc<BrokerContext>) -> Self {
        Self { ctx }
    }
}

impl RequestProcessor for AckMessageProcessor {
    fn process(
        &self,
        _channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let ctx = Arc::clone(&self.ctx);
        Box::pin(async move {
            let result = match RequestCode::from_code(request.code) {
                RequestCode::AckMessage => ack_message(&ctx, &request).await,
                RequestCode::BatchAckMessage => batch_ack_message(&ctx, &request).await,
                RequestCode::ChangeMessageInvisibletime => {
                    change_invisible_time(&ctx, &request).await
                }
                _ => Err(reject(
                    ResponseCode::MessageIllegal,
                    format!(
                        "AckMessageProcessor failed to process RequestCode: {}",
                        request.code
                    ),
                )),
            };
            Some(answer(result))
        })
    }
}

async fn ack_message(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let header: AckMessageRequestHeader = decode_header(request)?;
    crate::core::ack::ack(ctx, &header).await.map_err(refused)?;
    Ok(RemotingCommand::response(ResponseCode::Success, None))
}

async fn batch_ack_message(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let body = request
        .body
        .as_ref()
        .and_then(|b| serde_json::from_slice(b).ok());
    crate::core::ack::batch_ack(ctx, body)
        .await
        .map_err(refused)?;
    Ok(RemotingCommand::response(ResponseCode::Success, None))
}

async fn change_invisible_time(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let header: ChangeInvisibleTimeRequestHeader = decode_header(request)?;
    let changed = crate::core::ack::change_invisible(ctx, &header)
        .await
        .map_err(refused)?;
    let mut response = RemotingCommand::response(ResponseCode::Success, None);
    response.encode_header(&ChangeInvisibleTimeResponseHeader {
        pop_time: changed.pop_time,
        invisible_time: changed.invisible_time,
        revive_qid: changed.revive_qid,
    });
    Ok(response)
}
