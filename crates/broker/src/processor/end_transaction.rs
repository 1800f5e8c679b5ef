//! END_TRANSACTION (37): the producer's (or a check's) verdict on a half message.
//!
//! Commit: the half is loaded by `commitLogOffset`, validated against the request (half topic,
//! producer group, queue offset, message id), re-stored in its real topic as a COMMIT message —
//! consumers see it from here on — and finished with an op record. Rollback: validated the same
//! way and finished with an op record only. Unknown (0) and PREPARED change nothing: the check
//! service asks again later. As in RocketMQ, a producer that set CHECK_IMMUNITY_TIME_IN_SECONDS
//! must end its transaction within that time; afterwards only an answer to a check is accepted
//! (ILLEGAL_OPERATION).
//!
//! Java producers send this oneway (the transport then drops the answer); Go 2.1.2 sends it
//! without the oneway bit and so sees the answers, which follow Apache RocketMQ 5.3.3 as captured
//! in `crates/protocol/tests/fixtures/go-2.1.2-tx`: a commit is answered SUCCESS without remark, a
//! rollback SUCCESS with Apache's remark of an unset response ([`ROLLBACK_REMARK`]), and "unknown"
//! (or any state other than commit and rollback) gets no answer at all. A request that cannot be
//! applied is answered with an error code and a remark saying what did not match. Every ignored
//! request is logged with its reason, since a oneway sender never learns it.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::{EndTransactionRequestHeader, transaction_flag};
use comet_remoting::{Channel, RequestProcessor};
use futures::future::BoxFuture;

use crate::context::BrokerContext;
use crate::core::put::{put_message, status_response_code};
use crate::processor::{decode_header, error_response};
use crate::transaction::TransactionService;
use crate::transaction::half;

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
            end_transaction(&ctx, &service, &header, peer, request.remark.as_deref()).await
        })
    }
}

/// Remark of Apache's answer to an applied rollback: the default remark of a response whose code
/// was never set, left in place when the code became SUCCESS.
pub const ROLLBACK_REMARK: &str = "not set any response code";

/// The answer to an applied (or already applied) commit or rollback.
fn success(commit: bool) -> RemotingCommand {
    let remark = (!commit).then(|| ROLLBACK_REMARK.to_owned());
    RemotingCommand::response(ResponseCode::Success, remark)
}

/// Applies one END_TRANSACTION (see the module docs). `None`: nothing to answer.
pub async fn end_transaction(
    ctx: &BrokerContext,
    service: &TransactionService,
    header: &EndTransactionRequestHeader,
    peer: std::net::SocketAddr,
    remark: Option<&str>,
) -> Option<RemotingCommand> {
    if ctx.config.is_slave() {
        tracing::warn!(%peer, "END_TRANSACTION sent to a slave refused");
        return Some(error_response(
            ResponseCode::SlaveNotAvailable,
            "Message store is slave mode, so end transaction is forbidden. ",
        ));
    }
    let from_check = header.from_transaction_check.unwrap_or(false);
    let commit = match header.commit_or_rollback {
        transaction_flag::COMMIT => true,
        transaction_flag::ROLLBACK => false,
        transaction_flag::NOT_TYPE => {
            tracing::info!(%peer, producer_group = %header.producer_group, msg_id = %header.msg_id,
                from_check, remark, "END_TRANSACTION with state unknown: left to the check service");
            return None;
        }
        other => {
            tracing::warn!(%peer, commit_or_rollback = other, msg_id = %header.msg_id,
                "END_TRANSACTION with a state other than 0 (unknown), 8 (commit), 12 (rollback) ignored");
            return None;
        }
    };
    Some(apply(ctx, service, header, peer, commit, from_check).await)
}

/// Ends the transaction of `header` with a commit or a rollback.
async fn apply(
    ctx: &BrokerContext,
    service: &TransactionService,
    header: &EndTransactionRequestHeader,
    peer: std::net::SocketAddr,
    commit: bool,
    from_check: bool,
) -> RemotingCommand {
    let Some(stored) = ctx.store.lookup_message_by_offset(header.commit_log_offset) else {
        tracing::warn!(%peer, commit_log_offset = header.commit_log_offset, msg_id = %header.msg_id,
            commit, "END_TRANSACTION for a message not in the commit log ignored");
        return error_response(
            ResponseCode::SystemError,
            format!(
                "Find prepared transaction message failed: nothing at commitLogOffset {}",
                header.commit_log_offset
            ),
        );
    };
    if let Err(e) = half::validate_for_end(&stored, header) {
        tracing::warn!(%peer, error = %e, commit, "END_TRANSACTION rejected");
        return error_response(ResponseCode::SystemError, e.to_string());
    }
    if !from_check && past_check_immunity(ctx, &stored) {
        tracing::warn!(%peer, msg_id = %header.msg_id, commit,
            "END_TRANSACTION after the half's CHECK_IMMUNITY_TIME_IN_SECONDS refused; the check decides");
        return error_response(
            ResponseCode::IllegalOperation,
            "the half message is older than its CHECK_IMMUNITY_TIME_IN_SECONDS: only an answer to a check may end it now",
        );
    }
    let identity = half::transaction_identity(&stored);
    if !service.begin_end(identity) {
        tracing::info!(%peer, msg_id = %header.msg_id, commit, from_check,
            "END_TRANSACTION for an already ended transaction ignored");
        return success(commit);
    }
    if commit {
        let msg = match half::committed_message(&stored) {
            Ok(m) => m,
            Err(e) => {
                service.abandon_end(identity);
                tracing::error!(error = %e, msg_id = %header.msg_id, "cannot commit a half message");
                return error_response(ResponseCode::SystemError, e.to_string());
            }
        };
        let result = put_message(ctx, msg).await;
        if !result.status.is_written() {
            service.abandon_end(identity);
            let (code, remark) = status_response_code(result.status);
            tracing::error!(status = ?result.status, msg_id = %header.msg_id,
                "storing a committed transaction message failed");
            return error_response(
                code,
                remark.unwrap_or("storing the committed message failed"),
            );
        }
    }
    let real_topic = stored
        .properties
        .get(comet_protocol::message::properties::keys::REAL_TOPIC)
        .unwrap_or(&stored.topic);
    let took_ms = comet_protocol::time::now_millis().saturating_sub(stored.born_timestamp);
    ctx.traffic
        .record_end_transaction(real_topic, commit, u64::try_from(took_ms).unwrap_or(0));
    // The verdict stands once the final message is stored; a lost op record only costs one
    // more check, whose answer is then ignored as a duplicate.
    service.write_op(ctx, &stored).await;
    tracing::debug!(msg_id = %header.msg_id, commit, from_check, "transaction ended");
    success(commit)
}

/// RocketMQ's `rejectCommitOrRollback`: a producer that asked for a first-check delay must end
/// its transaction within it; later, only an answer to a check may (ILLEGAL_OPERATION otherwise).
fn past_check_immunity(
    ctx: &BrokerContext,
    half_message: &comet_protocol::message::MessageExt,
) -> bool {
    let timeout = i64::try_from(ctx.live_config().transaction_timeout_ms).unwrap_or(i64::MAX);
    half::check_immunity_millis(half_message, timeout).is_some_and(|immunity| {
        comet_protocol::time::now_millis().saturating_sub(half_message.born_timestamp) > immunity
    })
}
