//! END_TRANSACTION (37): the header decoded, the verdict applied by
//! [`crate::core::end_transaction`], the outcome answered.
//!
//! Java producers send this oneway (the transport then drops the answer); Go 2.1.2 sends it
//! without the oneway bit and so sees the answers, which follow Apache RocketMQ 5.3.3 as captured
//! in `crates/protocol/tests/fixtures/go-2.1.2-tx`: a commit is answered SUCCESS without remark, a
//! rollback SUCCESS with Apache's remark of an unset response ([`ROLLBACK_REMARK`]), and "unknown"
//! (or any state other than commit and rollback) gets no answer at all. A request that cannot be
//! applied is answered with an error code and a remark saying what did not match.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::EndTransactionRequestHeader;
use comet_remoting::{Channel, RequestProcessor};
use futures::future::BoxFuture;

use crate::context::BrokerContext;
use crate::core::end_transaction::{Ended, end_transaction};
use crate::processor::{decode_header, error_response};
use crate::transaction::TransactionService;

/// Remark of Apache's answer to an applied rollback: the default remark of a response whose code
/// was never set, left in place when the code became SUCCESS.
pub const ROLLBACK_REMARK: &str = "not set any response code";

/// Handles END_TRANSACTION.
pub struct EndTransactionProcessor {
    ctx: Arc<BrokerContext>,
    service: Arc<TransactionService>,
}

impl EndTransactionProcessor {
    pub fn new(ctx: Arc<BrokerContext>, service: Arc<TransactionService>) -> Self {
        EndTransactionProcessor { ctx, service }
    }
}

impl RequestProcessor for EndTransactionProcessor {
    fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let ctx = Arc::clone(&self.ctx);
        let service = Arc::clone(&self.service);
        let peer = channel.remote_addr();
        Box::pin(async move {
            let header: EndTransactionRequestHeader = match decode_header(&request) {
                Ok(h) => h,
                Err(rejection) => {
                    tracing::warn!(%peer, remark = ?rejection.remark, "END_TRANSACTION with a bad header ignored");
                    return Some(*rejection);
                }
            };
            match end_transaction(&ctx, &service, &header, peer, request.remark.as_deref()).await {
                Ok(Ended::Committed) => {
                    Some(RemotingCommand::response(ResponseCode::Success, None))
                }
                Ok(Ended::RolledBack) => Some(RemotingCommand::response(
                    ResponseCode::Success,
                    Some(ROLLBACK_REMARK.to_owned()),
                )),
                Ok(Ended::Left) => None,
                Err(refusal) => Some(error_response(refusal.code, refusal.remark)),
            }
        })
    }
}
