//! The two shapes of a transaction listener, what they answer, and the one the transaction
//! producer runs.
//!
//! [`TransactionListener`] is RocketMQ's interface as it is: two blocking methods, each answering
//! a [`LocalTransactionState`]. A check runs
//! on a blocking thread, so it may query a database with a blocking driver.
//! [`AsyncTransactionListener`] is the same contract for applications whose local transactions
//! are async (an async database driver, a call to another service): its methods are written as
//! `async fn` and run as tasks of the runtime. The producer wraps either in [`Runner`], which
//! also turns a panicking listener into an UNKNOWN answer (the broker checks again later).

use std::any::Any;
use std::future::Future;
use std::sync::Arc;

use comet_protocol::headers::transaction_flag;
use futures::FutureExt;
use futures::future::BoxFuture;

use crate::message::{Message, MessageExt};

/// The outcome of a local transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LocalTransactionState {
    /// Deliver the message.
    CommitMessage,
    /// Drop the message.
    RollbackMessage,
    /// Not decided yet: the broker will check later.
    Unknown,
}

impl LocalTransactionState {
    /// The `commitOrRollback` value of END_TRANSACTION.
    pub fn commit_or_rollback(self) -> i32 {
        match self {
            LocalTransactionState::CommitMessage => transaction_flag::COMMIT,
            LocalTransactionState::RollbackMessage => transaction_flag::ROLLBACK,
            LocalTransactionState::Unknown => transaction_flag::NOT_TYPE,
        }
    }
}

/// The application side of transactional messages.
///
/// `execute_local_transaction` runs on the task that called
/// [`TransactionProducer::send_message_in_transaction`](super::TransactionProducer::send_message_in_transaction),
/// right after the half was stored; it should be short or non-blocking.
/// `check_local_transaction` runs on a blocking thread of the check pool and may block
/// (database lookups are the usual case).
pub trait TransactionListener: Send + Sync + 'static {
    /// Runs the local transaction for `msg` (`arg` is what the sender passed along).
    fn execute_local_transaction(
        &self,
        msg: &Message,
        arg: &(dyn Any + Send + Sync),
    ) -> LocalTransactionState;

    /// Tells the broker how the transaction of a pending half ended.
    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState;
}

/// The application side of transactional messages, with async methods (an `async fn` in the
/// implementation satisfies each method; its future must be `Send`).
///
/// `execute_local_transaction` runs on the task that called
/// [`TransactionProducer::send_message_in_transaction`](super::TransactionProducer::send_message_in_transaction)
/// once the half message is stored; `check_local_transaction` runs as a task of the runtime
/// when the broker asks about a pending half. Neither should block the thread: blocking work
/// belongs in [`TransactionListener`], whose checks run on blocking threads.
pub trait AsyncTransactionListener: Send + Sync + 'static {
    /// Runs the local transaction for `msg` (`arg` is what the sender passed along). Java
    /// `executeLocalTransaction`.
    fn execute_local_transaction(
        &self,
        msg: &Message,
        arg: &(dyn Any + Send + Sync),
    ) -> impl Future<Output = LocalTransactionState> + Send;

    /// Tells the broker how the transaction of a pending half ended. Java
    /// `checkLocalTransaction`.
    fn check_local_transaction(
        &self,
        msg: &MessageExt,
    ) -> impl Future<Output = LocalTransactionState> + Send;
}

/// A listener's answer, or the remark END_TRANSACTION carries when the listener failed.
pub(crate) type Outcome = std::result::Result<LocalTransactionState, String>;

/// The listener as the transaction producer runs it, whichever shape the application gave.
pub(crate) trait Runner: Send + Sync + 'static {
    /// Runs the local transaction of a stored half.
    fn execute<'a>(
        &'a self,
        msg: &'a Message,
        arg: &'a (dyn Any + Send + Sync),
    ) -> BoxFuture<'a, Outcome>;

    /// Answers a broker check of a pending half.
    fn check(self: Arc<Self>, msg: Arc<MessageExt>) -> BoxFuture<'static, Outcome>;
}

/// Runs a [`TransactionListener`]: executes inline, checks on a blocking thread.
pub(crate) struct Blocking(pub(crate) Arc<dyn TransactionListener>);

impl Runner for Blocking {
    fn execute<'a>(
        &'a self,
        msg: &'a Message,
        arg: &'a (dyn Any + Send + Sync),
    ) -> BoxFuture<'a, Outcome> {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.0.execute_local_transaction(msg, arg)
        }))
        .map_err(|_| "executeLocalTransaction panicked".to_string());
        Box::pin(std::future::ready(outcome))
    }

    fn check(self: Arc<Self>, msg: Arc<MessageExt>) -> BoxFuture<'static, Outcome> {
        Box::pin(async move {
            tokio::task::spawn_blocking(move || self.0.check_local_transaction(&msg))
                .await
                .map_err(|e| format!("checkLocalTransaction failed: {e}"))
        })
    }
}

/// Runs an [`AsyncTransactionListener`]: executes on the sender's task, checks as a task.
pub(crate) struct Async<L>(pub(crate) L);

impl<L: AsyncTransactionListener> Runner for Async<L> {
    fn execute<'a>(
        &'a self,
        msg: &'a Message,
        arg: &'a (dyn Any + Send + Sync),
    ) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            std::panic::AssertUnwindSafe(self.0.execute_local_transaction(msg, arg))
                .catch_unwind()
                .await
                .map_err(|_| "executeLocalTransaction panicked".to_string())
        })
    }

    fn check(self: Arc<Self>, msg: Arc<MessageExt>) -> BoxFuture<'static, Outcome> {
        Box::pin(async move {
            tokio::spawn(async move { self.0.check_local_transaction(&msg).await })
                .await
                .map_err(|e| format!("checkLocalTransaction failed: {e}"))
        })
    }
}
