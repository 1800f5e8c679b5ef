//! LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42): queue ownership for orderly consumers (see the
//! broker's rebalance lock table).
//!
//! The lock response lists exactly the queues the requester holds afterwards; queues held by
//! another live client are left out, and the client simply does not consume them this round.
//! Comet runs one broker per broker name, so `onlyThisBroker` needs no forwarding to replicas.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::body::{
    LockBatchRequestBody, LockBatchResponseBody, UnlockBatchRequestBody, from_fastjson,
    to_fastjson_bytes,
};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_remoting::{Channel, RequestProcessor};
use futures::future::BoxFuture;

use crate::context::BrokerContext;
use crate::processor::error_response;

/// Most queues one lock/unlock request may name.
pub const MAX_QUEUES_PER_LOCK_REQUEST: usize = 10_000;

/// Handles codes 41 and 42.
#[derive(Debug)]
pub struct LockProcessor {
    ctx: Arc<BrokerContext>,
}

impl LockProcessor {
    pub fn new(ctx: Arc<BrokerContext>) -> Self {
        Self { ctx }
    }

    fn handle(&self, request: &RemotingCommand) -> RemotingCommand {
        let code = RequestCode::from_code(request.code);
        let Some(body) = request.body.as_deref() else {
            return error_response(
                ResponseCode::SystemError,
                format!("bad request: {} needs a body", code.name()),
            );
        };
        match code {
            RequestCode::LockBatchMq => self.lock(body),
            RequestCode::UnlockBatchMq => self.unlock(body),
            other => error_response(
                ResponseCode::RequestCodeNotSupported,
                format!("request type {} not supported", other.code()),
            ),
        }
    }

    fn lock(&self, body: &[u8]) -> RemotingCommand {
        let request: LockBatchRequestBody = match from_fastjson(body) {
            Ok(r) => r,
            Err(e) => {
                return error_response(
                    ResponseCode::SystemError,
                    format!("bad request: LOCK_BATCH_MQ body is not a LockBatchRequestBody: {e}"),
                );
            }
        };
        if let Some(refusal) = check_request(
            &request.consumer_group,
            &request.client_id,
            request.mq_set.len(),
        ) {
            return refusal;
        }
        let locked = self.ctx.rebalance_locks.try_lock_batch(
            &request.consumer_group,
            &request.mq_set,
            &request.client_id,
        );
        let body = LockBatchResponseBody {
            lock_ok_mq_set: locked,
        };
        match to_fastjson_bytes(&body) {
            Ok(bytes) => RemotingCommand::response(ResponseCode::Success, None).with_body(bytes),
            Err(e) => error_response(
                ResponseCode::SystemError,
                format!("encode lock response: {e}"),
            ),
        }
    }

    fn unlock(&self, body: &[u8]) -> RemotingCommand {
        let request: UnlockBatchRequestBody = match from_fastjson(body) {
            Ok(r) => r,
            Err(e) => {
                return error_response(
                    ResponseCode::SystemError,
                    format!(
                        "bad request: UNLOCK_BATCH_MQ body is not an UnlockBatchRequestBody: {e}"
                    ),
                );
            }
        };
        if let Some(refusal) = check_request(
            &request.consumer_group,
            &request.client_id,
            request.mq_set.len(),
        ) {
            return refusal;
        }
        self.ctx.rebalance_locks.unlock_batch(
            &request.consumer_group,
            &request.mq_set,
            &request.client_id,
        );
        RemotingCommand::response(ResponseCode::Success, None)
    }
}

fn check_request(group: &str, client_id: &str, queues: usize) -> Option<RemotingCommand> {
    if group.is_empty() {
        return Some(error_response(
            ResponseCode::SystemError,
            "bad request: body field `consumerGroup` is empty",
        ));
    }
    if client_id.is_empty() {
        return Some(error_response(
            ResponseCode::SystemError,
            "bad request: body field `clientId` is empty",
        ));
    }
    if queues > MAX_QUEUES_PER_LOCK_REQUEST {
        return Some(error_response(
            ResponseCode::SystemError,
            format!(
                "bad request: body field `mqSet` has {queues} queues, at most {MAX_QUEUES_PER_LOCK_REQUEST} allowed"
            ),
        ));
    }
    None
}

impl RequestProcessor for LockProcessor {
    fn process(
        &self,
        _channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let response = self.handle(&request);
        Box::pin(async move { Some(response) })
    }
}
