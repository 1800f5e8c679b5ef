//! Queue-offset lookups: GET_MAX_OFFSET (30), GET_MIN_OFFSET (31),
//! SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32), QUERY_BROKER_OFFSET (13)
//! and GET_ALL_CONSUMER_OFFSET (43).
//!
//! Consumers call these when they have no committed offset yet (to apply their
//! `consumeFromWhere`) and admin tools call them to show lag and to reset offsets by time. They
//! are pure reads of the store and the offset table; an unknown queue reads as empty (offset 0,
//! store time −1), as RocketMQ does.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    BoundaryType, CommandHeaderExt, GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader, GetMaxOffsetRequestHeader, GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader, GetMinOffsetResponseHeader, SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
};
use comet_remoting::{Channel, RequestProcessor};
use futures::future::BoxFuture;

use crate::context::BrokerContext;
use crate::processor::{Answer, answer, decode_header, error_response};

/// Handles the offset lookup codes.
#[derive(Debug)]
pub struct OffsetProcessor {
    ctx: Arc<BrokerContext>,
}

impl OffsetProcessor {
    pub fn new(ctx: Arc<BrokerContext>) -> Self {
        Self { ctx }
    }

    fn handle(&self, request: &RemotingCommand) -> RemotingCommand {
        match RequestCode::from_code(request.code) {
            RequestCode::GetMaxOffset => answer(self.max_offset(request)),
            RequestCode::GetMinOffset => answer(self.min_offset(request)),
            RequestCode::SearchOffsetByTimestamp => answer(self.search_offset(request)),
            RequestCode::GetEarliestMsgStoretime => answer(self.earliest_store_time(request)),
            RequestCode::QueryBrokerOffset => self.broker_offset(),
            RequestCode::GetAllConsumerOffset => self.all_consumer_offsets(),
            other => error_response(
                ResponseCode::RequestCodeNotSupported,
                format!("request type {} not supported", other.code()),
            ),
        }
    }

    fn max_offset(&self, request: &RemotingCommand) -> Answer {
        let header: GetMaxOffsetRequestHeader = decode_header(request)?;
        let offset = self
            .ctx
            .store
            .get_max_offset_in_queue(&header.topic, header.queue_id);
        Ok(offset_response(&GetMaxOffsetResponseHeader { offset }))
    }

    fn min_offset(&self, request: &RemotingCommand) -> Answer {
        let header: GetMinOffsetRequestHeader = decode_header(request)?;
        let offset = self
            .ctx
            .store
            .get_min_offset_in_queue(&header.topic, header.queue_id);
        Ok(offset_response(&GetMinOffsetResponseHeader { offset }))
    }

    fn search_offset(&self, request: &RemotingCommand) -> Answer {
        let header: SearchOffsetRequestHeader = decode_header(request)?;
        let offset = match header.boundary_type.unwrap_or_default() {
            BoundaryType::Lower => self.ctx.store.get_offset_in_queue_by_time(
                &header.topic,
                header.queue_id,
                header.timestamp,
            ),
            BoundaryType::Upper => self.upper_offset_by_time(&header),
        };
        Ok(offset_response(&SearchOffsetResponseHeader { offset }))
    }

    /// The last offset stored at or before the timestamp (several messages can share one
    /// millisecond; "upper" asks for the last of them). Falls back to the lower bound when no
    /// message is that old.
    fn upper_offset_by_time(&self, header: &SearchOffsetRequestHeader) -> i64 {
        let store = &self.ctx.store;
        let (topic, queue_id, ts) = (header.topic.as_str(), header.queue_id, header.timestamp);
        let min = store.get_min_offset_in_queue(topic, queue_id);
        let max = store.get_max_offset_in_queue(topic, queue_id);
        let (mut lo, mut hi) = (min, max);
        // Invariant: every offset < lo is stored at or before ts; every offset >= hi is not
        // (or unreadable). Binary search over store timestamps, O(log n) reads.
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let stored = store.get_message_store_timestamp(topic, queue_id, mid);
            if stored >= 0 && stored <= ts {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo > min {
            lo - 1
        } else {
            store.get_offset_in_queue_by_time(topic, queue_id, ts)
        }
    }

    fn earliest_store_time(&self, request: &RemotingCommand) -> Answer {
        let header: GetEarliestMsgStoretimeRequestHeader = decode_header(request)?;
        let timestamp = self
            .ctx
            .store
            .get_earliest_message_time(&header.topic, header.queue_id);
        Ok(offset_response(&GetEarliestMsgStoretimeResponseHeader {
            timestamp,
        }))
    }

    /// QUERY_BROKER_OFFSET: the end of the CommitLog (header `offset`).
    fn broker_offset(&self) -> RemotingCommand {
        offset_response(&GetMaxOffsetResponseHeader {
            offset: self.ctx.store.max_phy_offset(),
        })
    }

    /// GET_ALL_CONSUMER_OFFSET: the consumer offset table as consumerOffset.json holds it.
    fn all_consumer_offsets(&self) -> RemotingCommand {
        match self.ctx.consumer_offsets.encode() {
            Ok(content) if !content.is_empty() => {
                RemotingCommand::response(ResponseCode::Success, None)
                    .with_body(content.into_bytes())
            }
            Ok(_) => error_response(
                ResponseCode::SystemError,
                "No consumer offset in this broker",
            ),
            Err(e) => error_response(
                ResponseCode::SystemError,
                format!("get all consumer offset from master broker exception: {e}"),
            ),
        }
    }
}

fn offset_response<H: comet_protocol::headers::CommandHeader>(header: &H) -> RemotingCommand {
    let mut response = RemotingCommand::response(ResponseCode::Success, None);
    response.encode_header(header);
    response
}

impl RequestProcessor for OffsetProcessor {
    fn process(
        &self,
        _channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let response = self.handle(&request);
        Box::pin(async move { Some(response) })
    }
}
