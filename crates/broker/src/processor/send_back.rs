//! CONSUMER_SEND_MSG_BACK (36): the header decoded, the message given back through
//! [`crate::core::send_back`], the outcome answered.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::ConsumerSendMsgBackRequestHeader;
use comet_remoting::{Channel, RequestProcessor};
use futures::future::BoxFuture;

use crate::context::BrokerContext;
use crate::processor::{answer, decode_header, error_response};

/// First version (`V3_4_9`) whose `maxReconsumeTimes` header overrides the group's setting.
pub const MAX_RECONSUME_TIMES_HEADER_VERSION: i32 = 121;

/// Handles CONSUMER_SEND_MSG_BACK.
#[derive(Debug)]
pub struct SendBackProcessor {
    ctx: Arc<BrokerContext>,
}

impl SendBackProcessor {
    pub fn new(ctx: Arc<BrokerContext>) -> Self {
        Self { ctx }
    }
}

impl RequestProcessor for SendBackProcessor {
    fn process(
        &self,
        _channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let ctx = Arc::clone(&self.ctx);
        Box::pin(async move {
            let header: ConsumerSendMsgBackRequestHeader = match decode_header(&request) {
                Ok(header) => header,
                Err(rejection) => return Some(answer(Err(rejection))),
            };
            let honour = request.version >= MAX_RECONSUME_TIMES_HEADER_VERSION;
            Some(
                match crate::core::send_back::send_back(&ctx, &header, honour).await {
                    Ok(()) => RemotingCommand::response(ResponseCode::Success, None),
                    Err(refusal) => error_response(refusal.code, refusal.remark),
                },
            )
        })
    }
}
