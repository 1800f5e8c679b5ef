//! QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33): finding messages outside the queue order.
//!
//! QUERY_MESSAGE looks a key up in the IndexFile within a store-time range; with the ext field
//! `_UNIQUE_KEY_QUERY=true` the key is a message's UNIQ_KEY (the client msgId) and the result size
//! is fixed at [`DEFAULT_QUERY_MAX_NUM`], as RocketMQ does (one id can map to a few records:
//! retries keep the UNIQ_KEY). VIEW_MESSAGE_BY_ID reads the record at a CommitLog offset — the
//! offset a client decodes from an offset msgId, which is also why the store host in those
//! ids must be the broker's reachable address.
//!
//! Both answer with stored records back to back, exactly as a pull does (QUERY_MESSAGE
//! hands them over as body parts, each written from the mapped CommitLog).

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CommandHeaderExt, QueryMessageRequestHeader, QueryMessageResponseHeader, UNIQUE_KEY_QUERY,
    ViewMessageRequestHeader,
};
use comet_protocol::message::record;
use comet_remoting::{Channel, RequestProcessor};
use comet_store::QueryMessageResult;
use futures::future::BoxFuture;

use crate::context::BrokerContext;
use crate::processor::{Answer, answer, decode_header, error_response};

/// `maxNum` of a unique-key query (RocketMQ `defaultQueryMaxNum`).
pub const DEFAULT_QUERY_MAX_NUM: usize = 32;
/// Most records one key query returns (RocketMQ `maxMsgsNumBatch`).
pub const MAX_MSGS_NUM_BATCH: usize = 64;

/// Messages of `topic` whose UNIQ_KEY is `key`, newest first, within the whole store time range.
/// Used by admin lookups by client msgId.
pub fn lookup_by_unique_key(ctx: &BrokerContext, topic: &str, key: &str) -> QueryMessageResult {
    ctx.store
        .query_message(topic, key, DEFAULT_QUERY_MAX_NUM, 0, i64::MAX)
}

/// Handles codes 12 and 33.
#[derive(Debug)]
pub struct QueryMessageProcessor {
    ctx: Arc<BrokerContext>,
}

impl QueryMessageProcessor {
    pub fn new(ctx: Arc<BrokerContext>) -> Self {
        Self { ctx }
    }

    fn handle(&self, request: &RemotingCommand) -> RemotingCommand {
        match RequestCode::from_code(request.code) {
            RequestCode::QueryMessage => answer(self.query_message(request)),
            RequestCode::ViewMessageById => answer(self.view_message(request)),
            other => error_response(
                ResponseCode::RequestCodeNotSupported,
                format!("request type {} not supported", other.code()),
            ),
        }
    }

    fn query_message(&self, request: &RemotingCommand) -> Answer {
        let header: QueryMessageRequestHeader = decode_header(request)?;
        let unique = request
            .ext(UNIQUE_KEY_QUERY)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let max_num = if unique {
            DEFAULT_QUERY_MAX_NUM
        } else {
            usize::try_from(header.max_num).unwrap_or(0)
        }
        .min(MAX_MSGS_NUM_BATCH);
        let result = self.ctx.store.query_message(
            &header.topic,
            &header.key,
            max_num,
            header.begin_timestamp,
            header.end_timestamp,
        );
        let response_header = QueryMessageResponseHeader {
            index_last_update_timestamp: result.index_last_update_timestamp,
            index_last_update_phyoffset: result.index_last_update_phy_offset,
        };
        let mut response = if result.messages.is_empty() {
            error_response(
                ResponseCode::QueryNotFound,
                "can not find message, maybe time range not correct",
            )
        } else {
            let mut ok = RemotingCommand::response(ResponseCode::Success, None);
            ok.body_parts = result.messages;
            ok
        };
        response.encode_header(&response_header);
        Ok(response)
    }

    fn view_message(&self, request: &RemotingCommand) -> Answer {
        let header: ViewMessageRequestHeader = decode_header(request)?;
        // Only a well-formed record is returned: an arbitrary offset inside a record or in a
        // segment's blank tail must not hand out raw bytes.
        let record = self
            .ctx
            .store
            .commit_log()
            .get_record(header.offset)
            .filter(|r| record::decode_record_view(r).is_ok());
        Ok(match record {
            Some(record) => {
                RemotingCommand::response(ResponseCode::Success, None).with_body(record)
            }
            None => error_response(
                ResponseCode::SystemError,
                format!("can not find message by the offset, {}", header.offset),
            ),
        })
    }
}

impl RequestProcessor for QueryMessageProcessor {
    fn process(
        &self,
        _channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let response = self.handle(&request);
        Box::pin(async move { Some(response) })
    }
}
