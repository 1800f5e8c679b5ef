//! Consumer group requests: GET_CONSUMER_LIST_BY_GROUP (38), QUERY_CONSUMER_OFFSET (14) and
//! UPDATE_CONSUMER_OFFSET (15).
//!
//! QUERY_CONSUMER_OFFSET decides where a consumer without a committed offset starts. Answering
//! QUERY_NOT_FOUND makes the client apply its `consumeFromWhere`; answering 0 makes it read
//! from the start. RocketMQ answers 0 only when the client allows it (`setZeroIfNotFound`, absent =
//! allowed) and the queue still holds its very first message — otherwise a new group would replay
//! a queue that retention has already cut.
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
        let (group, topic, queue_id) = (
            header.consumer_group.as_str(),
            header.topic.as_str(),
            header.queue_id,
        );
        let stored = self
            .ctx
            .consumer_offsets
            .query_offset(group, topic, queue_id);
        let offset = if stored >= 0 {
            Some(stored)
        } else if header.set_zero_if_not_found == Some(false) {
            None
        } else if self.first_message_present(topic, queue_id) {
            Some(0)
        } else {
            None
        };
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

    /// The queue still starts at offset 0 and its first message is still readable.
    fn first_message_present(&self, topic: &str, queue_id: i32) -> bool {
        let store = &self.ctx.store;
        store.get_min_offset_in_queue(topic, queue_id) <= 0
            && store.get_max_offset_in_queue(topic, queue_id) > 0
            && store.get_message_store_timestamp(topic, queue_id, 0) >= 0
    }

    fn update_offset(&self, channel: &Channel, request: &RemotingCommand) -> Answer {
        let header: UpdateConsumerOffsetRequestHeader = decode_header(request)?;
        let group = header.consumer_group.as_str();
        let topic = header.topic.as_str();
        if !self.ctx.subscription_groups.contains(group) {
            return Err(reject(
                ResponseCode::SubscriptionGroupNotExist,
                format!("subscription group [{group}] does not exist"),
            ));
        }
        if self.ctx.topic_config.select(topic).is_none() {
            return Err(reject(
                ResponseCode::TopicNotExist,
                format!("topic[{topic}] not exist, apply first please!"),
            ));
        }
        self.ctx.consumer_offsets.commit_offset(
            client_host(channel),
            group,
            topic,
            header.queue_id,
            header.commit_offset,
        );
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
