//! `PullMessageService`: the queue of [`PullRequest`]s and the loop that executes them.
//!
//! Each owned queue has exactly one PullRequest in circulation: rebalance creates it, the loop
//! takes it and starts a pull, and the pull's outcome puts it back — at once, or after a delay
//! (flow control, errors, `pull_interval`). Java runs the loop on one thread and the pulls
//! asynchronously; here the loop is a task that spawns one task per pull, since a pull may be
//! held by the broker for the whole long-poll time. The channel is bounded so that a bug that
//! duplicated requests would show up as back-pressure instead of unbounded memory.

use std::future::Future;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::consumer::pull_request::PullRequest;

/// Capacity of the pull-request queue (more than the queues a consumer can sensibly own).
pub const PULL_REQUEST_QUEUE_CAPACITY: usize = 4096;

/// The pull-request queue of one push consumer.
#[derive(Debug)]
pub struct PullMessageService {
    tx: mpsc::Sender<PullRequest>,
    rx: Mutex<Option<mpsc::Receiver<PullRequest>>>,
    stop: CancellationToken,
    tasks: TaskTracker,
}

impl PullMessageService {
    /// A pull service whose tasks stop with `stop` and are tracked by `tasks`.
    pub fn new(stop: CancellationToken, tasks: TaskTracker) -> Self {
        let (tx, rx) = mpsc::channel(PULL_REQUEST_QUEUE_CAPACITY);
        PullMessageService {
            tx,
            rx: Mutex::new(Some(rx)),
            stop,
            tasks,
        }
    }

    /// Starts the loop: every request taken is handed to `pull` on its own task. Only the first
    /// call starts anything.
    pub fn start<F, Fut>(&self, pull: F)
    where
        F: Fn(PullRequest) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Some(mut rx) = self.rx.lock().take() else {
            return;
        };
        let stop = self.stop.clone();
        let tasks = self.tasks.clone();
        self.tasks.spawn(async move {
            loop {
                let request = tokio::select! {
                    () = stop.cancelled() => break,
                    request = rx.recv() => request,
                };
                let Some(request) = request else { break };
                tasks.spawn(pull(request));
            }
            tracing::debug!("pull message service stopped");
        });
    }

    /// Queues `request` for the loop.
    pub async fn execute_pull_request_immediately(&self, request: PullRequest) {
        if self.stop.is_cancelled() {
            return;
        }
        if self.tx.send(request).await.is_err() {
            tracing::debug!("pull message service closed, request dropped");
        }
    }

    /// Queues `request` after `delay` (unless the service stops first).
    pub fn execute_pull_request_later(&self, request: PullRequest, delay: Duration) {
        let tx = self.tx.clone();
        self.execute_task_later(
            async move {
                let _ = tx.send(request).await;
            },
            delay,
        );
    }

    /// Runs `task` after `delay`, or at once when the service stops first (for work that must
    /// not be lost on shutdown, such as a delayed broker unlock).
    pub fn execute_task_later_or_at_stop<Fut>(&self, task: Fut, delay: Duration)
    where
        Fut: Future<Output = ()> + Send + 'static,
    {
        let stop = self.stop.clone();
        self.tasks.spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = tokio::time::sleep(delay) => {}
            }
            task.await;
        });
    }

    /// Runs `task` after `delay` unless the service stops first.
    pub fn execute_task_later<Fut>(&self, task: Fut, delay: Duration)
    where
        Fut: Future<Output = ()> + Send + 'static,
    {
        if self.stop.is_cancelled() {
            return;
        }
        let stop = self.stop.clone();
        self.tasks.spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = tokio::time::sleep(delay) => task.await,
            }
        });
    }
}
