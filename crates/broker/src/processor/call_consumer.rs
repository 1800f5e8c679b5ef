//! Admin requests the broker relays to one consumer client: GET_CONSUMER_RUNNING_INFO (307) and
//! CONSUME_MESSAGE_DIRECTLY (309).
//!
//! The admin names the group and the client id; the broker finds that client's connection among
//! the group's live members, sends it a request with the same header fields (and, for 309, the
//! stored message looked up by its offset msgId as the body), waits a bounded time for the answer
//! and hands the client's response back unchanged.

use std::sync::Arc;
use std::time::Duration;

use comet_protocol::RemotingCommand;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::command::ExtFields;
use comet_protocol::headers::{
    ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader,
};
use comet_protocol::message::id::decode_offset_msg_id;
use comet_protocol::message::record;
use comet_remoting::{Channel, RemotingError, RequestProcessor};
use futures::future::BoxFuture;

use crate::context::BrokerContext;
use crate::processor::{Rejection, decode_header, error_response};

/// How long the broker waits for the client's answer (Java `Broker2Client.callClient`).
pub const CALL_CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// Oldest client version (`MQVersion` ordinal of V3_1_8_SNAPSHOT) that answers these requests.
pub const MIN_CLIENT_VERSION: i32 = 62;

/// Relays 307 and 309 to the consumer client they name.
pub struct CallConsumerProcessor {
    ctx: Arc<BrokerContext>,
}

impl CallConsumerProcessor {
    /// A processor over the broker's consumer table and store.
    pub fn new(ctx: Arc<BrokerContext>) -> Self {
        CallConsumerProcessor { ctx }
    }
}

impl RequestProcessor for CallConsumerProcessor {
    fn process(
        &self,
        _channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let ctx = Arc::clone(&self.ctx);
        Box::pin(async move {
            let prepared = match RequestCode::from(request.code) {
                RequestCode::GetConsumerRunningInfo => running_info_request(&request),
                RequestCode::ConsumeMessageDirectly => consume_directly_request(&ctx, request),
                _ => Err(Box::new(error_response(
                    ResponseCode::RequestCodeNotSupported,
                    format!("request code {} is not relayed to consumers", request.code),
                ))),
            };
            Some(match prepared {
                Ok(call) => call_consumer(&ctx, call).await,
                Err(rejection) => *rejection,
            })
        })
    }
}

/// A request to relay, and to whom.
struct ConsumerCall {
    request: RemotingCommand,
    group: String,
    client_id: String,
}

fn running_info_request(request: &RemotingCommand) -> Result<ConsumerCall, Rejection> {
    let header: GetConsumerRunningInfoRequestHeader = decode_header(request)?;
    Ok(ConsumerCall {
        request: relayed(request, request.ext_fields.clone()),
        group: header.consumer_group,
        client_id: header.client_id,
    })
}

/// Adds what the client needs besides the admin's header (the broker's name, the topic's and
/// group's system flags) and puts the stored message in the body.
fn consume_directly_request(
    ctx: &BrokerContext,
    request: RemotingCommand,
) -> Result<ConsumerCall, Rejection> {
    let header: ConsumeMessageDirectlyResultRequestHeader = decode_header(&request)?;
    let mut ext = request.ext_fields.clone().unwrap_or_default();
    ext.insert("brokerName", &ctx.config.broker_name);
    if let Some(topic) = header.topic.as_deref().filter(|t| !t.is_empty())
        && let Some(config) = ctx.topic_config.select(topic)
    {
        ext.insert("topicSysFlag", config.topic_sys_flag.to_string());
    }
    if !header.consumer_group.is_empty()
        && let Some(config) = ctx.subscription_groups.find(&header.consumer_group)
    {
        ext.insert("groupSysFlag", config.group_sys_flag.to_string());
    }
    let msg_id = header.msg_id.unwrap_or_default();
    let record = decode_offset_msg_id(&msg_id)
        .ok()
        .and_then(|(_, offset)| ctx.store.commit_log().get_record(offset))
        .filter(|r| record::decode_record_view(r).is_ok())
        .ok_or_else(|| {
            Box::new(error_response(
                ResponseCode::SystemError,
                format!("can not find message by the msgId <{msg_id}>"),
            ))
        })?;
    Ok(ConsumerCall {
        request: relayed(&request, Some(ext)).with_body(record),
        group: header.consumer_group,
        client_id: header.client_id.unwrap_or_default(),
    })
}

/// A fresh request with `request`'s code and the given header fields.
fn relayed(request: &RemotingCommand, ext: Option<ExtFields>) -> RemotingCommand {
    let mut relayed = RemotingCommand::request(request.code);
    relayed.ext_fields = ext;
    relayed
}

/// Sends the call to the client's connection and returns its response, or the error Java's
/// broker answers: the client is not online, too old, silent, or the connection failed.
async fn call_consumer(ctx: &BrokerContext, call: ConsumerCall) -> RemotingCommand {
    let ConsumerCall {
        request,
        group,
        client_id,
    } = call;
    let Some(client) = ctx.consumers.find_channel(&group, &client_id) else {
        return error_response(
            ResponseCode::SystemError,
            format!("The Consumer <{group}> <{client_id}> not online"),
        );
    };
    if client.version < MIN_CLIENT_VERSION {
        return error_response(
            ResponseCode::SystemError,
            format!(
                "The Consumer <{client_id}> Version <{}> too low to finish, please upgrade it to V3_1_8_SNAPSHOT",
                comet_protocol::version::version_name(client.version)
                    .map_or_else(|| client.version.to_string(), str::to_owned)
            ),
        );
    }
    match client.channel.invoke(request, CALL_CLIENT_TIMEOUT).await {
        Ok(response) => response,
        Err(e @ RemotingError::Timeout { .. }) => error_response(
            ResponseCode::ConsumeMsgTimeout,
            format!("consumer <{group}> <{client_id}> Timeout: {e}"),
        ),
        Err(e) => error_response(
            ResponseCode::SystemError,
            format!("invoke consumer <{group}> <{client_id}> Exception: {e}"),
        ),
    }
}
