//! Consumer group requests: GET_CONSUMER_LIST_BY_GROUP (38), QUERY_CONSUMER_OFFSET (14) and
//! UPDATE_CONSUMER_OFFSET (15).
//!
//! The offsets are the broker's core operations ([`crate::core::offsets`]); an offset query the
//! core has no answer for is QUERY_NOT_FOUND, which makes the client apply its
//! `consumeFromWhere`.
//!
//! UPDATE_CONSUMER_OFFSET is normally oneway (the transport then sends nothing), but the Go
//! client sends it as a normal request and waits, so it is always answered when asked.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::body::{GetConsumerListByGroupResponseBody, to_fastjson_bytes};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CommandHeaderExt, GetConsumerListByGroupRequestHeader, QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader, UpdateConsumerOffsetRequestHeader,
};
use comet_remoting::{Channel, RequestProcessor};
use futures::future::BoxFuture;

use crate::context::BrokerContext;
use crate::core::offsets;
use crate::processor::{Answer, answer, client_host, decode_header, error_response, reject};

/// Handles codes 38, 14 and 15.
#[derive(Debug)]
pub struct ConsumerManageProcessor {
    ctx: Arc<BrokerContext>,
}

impl ConsumerManageProcessor {
    pub fn new(ctx: Arc<BrokerContext>) -> Self {
        Self { ctx }
    }

    fn handle(&self, channel: &Channel, request: &RemotingCommand) -> RemotingCommand {
        match RequestCode::from_code(request.code) {
            RequestCode::GetConsumerListByGroup => answer(self.consumer_list(request)),
            RequestCode::QueryConsumerOffset => answer(self.query_offset(request)),
            RequestCode::UpdateConsumerOffset => answer(self.update_offset(channel, request)),
            other => error_response(
                ResponseCode::RequestCodeNotSupported,
                format!("request type {} not supported", other.code()),
            ),
        }
    }

    fn consumer_list(&self, request: &RemotingCommand) -> Answer {
        let header: GetConsumerListByGroupRequestHeader = decode_header(request)?;
        let group = header.consumer_group;
        let ids = self.ctx.consumers.consumer_ids(&group);
        if ids.is_empty() {
            return Err(reject(
                ResponseCode::SystemError,
                format!("no consumer for this group, {group}"),
            ));
        }
        let body = GetConsumerListByGroupResponseBody {
            consumer_id_list: ids,
        };
        Ok(match to_fastjson_bytes(&body) {
            Ok(bytes) => RemotingCommand::response(ResponseCode::Success, None).with_body(bytes),
            Err(e) => error_response(
                ResponseCode::SystemError,
                format!("encode consumer list: {e}"),
            ),
        })
    }

    fn query_offset(&self, request: &RemotingCommand) -> Answer {
        let header: QueryConsumerOffsetRequestHeader = decode_header(request)?;
        let offset = offsets::query_consumer_offset(
            &self.ctx,
            &header.consumer_group,
            &header.topic,
            header.queue_id,
            header.set_zero_if_not_found != Some(false),
        );
        Ok(match offset {
            Some(offset) => {
                let mut response = RemotingCommand::response(ResponseCode::Success, None);
                response.encode_header(&QueryConsumerOffsetResponseHeader { offset });
                response
            }
            None => error_response(
                ResponseCode::QueryNotFound,
                "Not found, do not set to zero, maybe this group boot first",
            ),
        })
    }

    fn update_offset(&self, channel: &Channel, request: &RemotingCommand) -> Answer {
        let header: UpdateConsumerOffsetRequestHeader = decode_header(request)?;
        offsets::commit_consumer_offset(
            &self.ctx,
            &client_host(channel),
            &header.consumer_group,
            &header.topic,
            header.queue_id,
            header.commit_offset,
        )
        .map_err(|refusal| reject(refusal.code, refusal.remark))?;
        Ok(RemotingCommand::response(ResponseCode::Success, None))
    }
}

impl RequestProcessor for ConsumerManageProcessor {
    fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let response = self.handle(channel, &request);
        Box::pin(async move { Some(response) })
    }
}
