//! `PullRequest`: one queue's turn in its pull loop.
//!
//! Rebalance creates one per newly owned queue and hands it to the consumer; the push consumer's
//! [`PullMessageService`](crate::consumer::push::PullMessageService) then circulates it — take it,
//! pull, and put it back, at once or after a delay — and the lite pull consumer turns it into the
//! queue's pull task. It carries the [`ProcessQueue`] the pulled messages go to and the offset of
//! the next pull.

use std::sync::Arc;

use crate::consumer::MessageQueue;
use crate::consumer::process_queue::ProcessQueue;

/// One queue's pull loop: handed from rebalance to the PullMessageService and back after every
/// pull (Java `PullRequest`).
#[derive(Debug, Clone)]
pub struct PullRequest {
    /// The group pulling.
    pub consumer_group: String,
    /// The queue pulled.
    pub message_queue: MessageQueue,
    /// What the consumer caches of the queue.
    pub process_queue: Arc<ProcessQueue>,
    /// Offset of the next pull.
    pub next_offset: i64,
    /// Orderly: whether the start offset was already re-read from the broker after the queue
    /// was first locked.
    pub previously_locked: bool,
}
