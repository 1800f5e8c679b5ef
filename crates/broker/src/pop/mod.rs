//! POP consumption (RocketMQ 5.x): the broker, not the client, chooses what each consumer
//! reads, and a message handed out stays invisible to the group until it is acked or its
//! invisible time ends, when it comes back.
//!
//! - [`crate::core::pop`]: POP_MESSAGE reads the topic's queues (and the group's POP retry topic
//!   `%RETRY%<group>_<topic>`), advances the group's offset at once, and records one
//!   checkpoint per queue batch; PEEK_MESSAGE reads without either; NOTIFICATION and
//!   POLLING_INFO answer whether messages wait.
//! - [`crate::core::ack`]: ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME.
//! - [`revive`]: brings back what was not acked in time.
//!
//! Crash safety follows RocketMQ's design: checkpoints and acks are messages of the revive log
//! `rmq_sys_REVIVE_LOG_<cluster>` ([`checkpoint`]). A checkpoint is a timer message due when its
//! batch's invisible time ends, so the timer wheel (itself crash-safe) keeps it; an ack is
//! stored at once. The revive service reads the log in order, so it sees every ack written in
//! time before the checkpoint it belongs to, and it persists how far it has read only up to the
//! first ack it still needs. After a crash it reads again from there: un-acked messages are
//! always brought back, some acked ones possibly twice (at-least-once).

pub mod arrivals;
pub mod assignment;
pub mod checkpoint;
pub mod fifo;
pub mod handle;
pub mod notify;
pub mod request_mode;
pub mod revive;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

/// Prefix of the revive log topic; the cluster name follows.
pub const REVIVE_TOPIC_PREFIX: &str = "rmq_sys_REVIVE_LOG_";
/// The group the revive service reads the revive log as.
pub const REVIVE_GROUP: &str = "CID_RMQ_SYS_REVIVE_GROUP";

/// The revive log topic of `cluster`.
pub fn revive_topic(cluster: &str) -> String {
    format!("{REVIVE_TOPIC_PREFIX}{cluster}")
}

/// Counters of the revive service (for tests and metrics).
#[derive(Debug, Default)]
pub struct PopStats {
    /// Checkpoints written by pops and invisible-time changes.
    pub checkpoints_written: AtomicU64,
    /// Checkpoints the revive service has settled.
    pub checkpoints_settled: AtomicU64,
    /// Messages put back into a retry topic.
    pub revived: AtomicU64,
    /// Messages moved to the group's dead-letter topic.
    pub dead_lettered: AtomicU64,
}

/// The POP state shared by the processors and the revive service.
#[derive(Debug)]
pub struct PopService {
    /// The revive log topic.
    pub revive_topic: String,
    revive_queue_num: i32,
    next_revive_qid: AtomicUsize,
    busy_queues: Mutex<HashSet<String>>,
    /// Wake-ups of held pops and notifications by arriving messages.
    pub arrivals: arrivals::Arrivals,
    /// What the revive service did.
    pub stats: PopStats,
    /// The batches of FIFO pops.
    pub fifo: fifo::FifoBook,
    /// PULL or POP per topic and group.
    pub request_modes: request_mode::MessageRequestModeManager,
}

impl PopService {
    /// The service for a broker of `cluster` with `revive_queue_num` revive queues.
    pub fn new(
        cluster: &str,
        revive_queue_num: i32,
        request_modes: request_mode::MessageRequestModeManager,
        fifo: fifo::FifoBook,
    ) -> Self {
        PopService {
            revive_topic: revive_topic(cluster),
            revive_queue_num: revive_queue_num.max(1),
            next_revive_qid: AtomicUsize::new(0),
            busy_queues: Mutex::new(HashSet::new()),
            arrivals: arrivals::Arrivals::default(),
            stats: PopStats::default(),
            fifo,
            request_modes,
        }
    }

    /// Queues of the revive log.
    pub fn revive_queue_num(&self) -> i32 {
        self.revive_queue_num
    }

    /// The revive queue of the next pop (round robin).
    pub fn next_revive_qid(&self) -> i32 {
        let n = self.next_revive_qid.fetch_add(1, Ordering::Relaxed);
        i32::try_from(n % self.revive_queue_num.unsigned_abs() as usize).unwrap_or(0)
    }

    /// Claims `topic@group@qid` for one pop; `None` when another pop reads it now.
    pub fn try_lock(&self, key: String) -> Option<QueueGuard<'_>> {
        if self.busy_queues.lock().insert(key.clone()) {
            Some(QueueGuard { service: self, key })
        } else {
            None
        }
    }

    /// A message arrived in `topic`: wakes the pops held on it.
    pub fn notify_arrival(&self, topic: &str) {
        self.arrivals.notify(topic);
    }

    /// Held pops and notifications right now.
    pub fn held_count(&self) -> usize {
        self.arrivals.held()
    }
}

/// A claimed queue (see [`PopService::try_lock`]); released on drop.
#[derive(Debug)]
pub struct QueueGuard<'a> {
    service: &'a PopService,
    key: String,
}

impl Drop for QueueGuard<'_> {
    fn drop(&mut self) {
        self.service.busy_queues.lock().remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revive_queues_rotate_and_queue_locks_exclude() {
        let dir = tempfile::tempdir().unwrap();
        let modes = request_mode::MessageRequestModeManager::open(dir.path()).unwrap();
        let s = PopService::new("DefaultCluster", 3, modes, fifo::FifoBook::default());
        assert_eq!(s.revive_topic, "rmq_sys_REVIVE_LOG_DefaultCluster");
        let qids: Vec<i32> = (0..4).map(|_| s.next_revive_qid()).collect();
        assert_eq!(qids, vec![0, 1, 2, 0]);
        let g = s.try_lock("T@g@0".into()).unwrap();
        assert!(s.try_lock("T@g@0".into()).is_none());
        assert!(s.try_lock("T@g@1".into()).is_some());
        drop(g);
        assert!(s.try_lock("T@g@0".into()).is_some());
    }
}
