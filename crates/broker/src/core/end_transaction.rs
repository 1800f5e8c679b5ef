//! Ending a transaction: the producer's (or a check's) verdict on a half message (RocketMQ's
//! END_TRANSACTION, gRPC's EndTransaction).
//!
//! Commit: the half is loaded by `commitLogOffset`, validated against the request (half topic,
//! producer group, queue offset, message id), re-stored in its real topic as a COMMIT message —
//! consumers see it from here on — and finished with an op record. Rollback: validated the same
//! way and finished with an op record only. Unknown (0) and PREPARED change nothing: the check
//! service asks again later. As in RocketMQ, a producer that set CHECK_IMMUNITY_TIME_IN_SECONDS
//! must end its transaction within that time; afterwards only an answer to a check is accepted
//! (ILLEGAL_OPERATION).
//!
//! A request that cannot be applied is refused with a remark saying what did not match; a
//! request with state unknown (or any state other than commit and rollback) is left to the check
//! service. Every ignored request is logged with its reason, since a oneway sender never learns
//! it.

use comet_protocol::code::ResponseCode;
use comet_protocol::headers::{EndTransactionRequestHeader, transaction_flag};

use super::Refusal;
use super::put::{put_message, status_response_code};
use crate::context::BrokerContext;
use crate::transaction::TransactionService;
use crate::transaction::half;

/// What became of a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Committed (now, or already).
    Committed,
    /// Rolled back (now, or already).
    RolledBack,
    /// Nothing: the state was unknown, or not one RocketMQ knows; the check service asks again.
    Left,
}

/// Applies one verdict (see the module docs). `remark` is the sender's, logged with a verdict
/// left to the check service.
pub async fn end_transaction(
    ctx: &BrokerContext,
    service: &TransactionService,
    header: &EndTransactionRequestHeader,
    peer: std::net::SocketAddr,
    remark: Option<&str>,
) -> Result<Ended, Refusal> {
    if ctx.config.is_slave() {
        tracing::warn!(%peer, "END_TRANSACTION sent to a slave refused");
        return Err(Refusal::new(
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
            return Ok(Ended::Left);
        }
        other => {
            tracing::warn!(%peer, commit_or_rollback = other, msg_id = %header.msg_id,
                "END_TRANSACTION with a state other than 0 (unknown), 8 (commit), 12 (rollback) ignored");
            return Ok(Ended::Left);
        }
    };
    apply(ctx, service, header, peer, commit, from_check).await?;
    Ok(if commit {
        Ended::Committed
    } else {
        Ended::RolledBack
    })
}

/// Ends the transaction of `header` with a commit or a rollback.
async fn apply(
    ctx: &BrokerContext,
    service: &TransactionService,
    header: &EndTransactionRequestHeader,
    peer: std::net::SocketAddr,
    commit: bool,
    from_check: bool,
) -> Result<(), Refusal> {
    let Some(stored) = ctx.store.lookup_message_by_offset(header.commit_log_offset) else {
        tracing::warn!(%peer, commit_log_offset = header.commit_log_offset, msg_id = %header.msg_id,
            commit, "END_TRANSACTION for a message not in the commit log ignored");
        return Err(Refusal::new(
            ResponseCode::SystemError,
            format!(
                "Find prepared transaction message failed: nothing at commitLogOffset {}",
                header.commit_log_offset
            ),
        ));
    };
    if let Err(e) = half::validate_for_end(&stored, header) {
        tracing::warn!(%peer, error = %e, commit, "END_TRANSACTION rejected");
        return Err(Refusal::new(ResponseCode::SystemError, e.to_string()));
    }
    if !from_check && past_check_immunity(ctx, &stored) {
        tracing::warn!(%peer, msg_id = %header.msg_id, commit,
            "END_TRANSACTION after the half's CHECK_IMMUNITY_TIME_IN_SECONDS refused; the check decides");
        return Err(Refusal::new(
            ResponseCode::IllegalOperation,
            "the half message is older than its CHECK_IMMUNITY_TIME_IN_SECONDS: only an answer to a check may end it now",
        ));
    }
    let identity = half::transaction_identity(&stored);
    if !service.begin_end(identity) {
        tracing::info!(%peer, msg_id = %header.msg_id, commit, from_check,
            "END_TRANSACTION for an already ended transaction ignored");
        return Ok(());
    }
    if commit {
        let msg = match half::committed_message(&stored) {
            Ok(m) => m,
            Err(e) => {
                service.abandon_end(identity);
                tracing::error!(error = %e, msg_id = %header.msg_id, "cannot commit a half message");
                return Err(Refusal::new(ResponseCode::SystemError, e.to_string()));
            }
        };
        let result = put_message(ctx, msg).await;
        if !result.status.is_written() {
            service.abandon_end(identity);
            let (code, remark) = status_response_code(result.status);
            tracing::error!(status = ?result.status, msg_id = %header.msg_id,
                "storing a committed transaction message failed");
            return Err(Refusal::new(
                code,
                remark.unwrap_or("storing the committed message failed"),
            ));
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
    Ok(())
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
