//! `RebalanceLockManager`: which client of a consumer group owns which message queue.
//!
//! Orderly consumers must own a queue exclusively, even for the moments when two clients briefly
//! disagree about the rebalance result. They LOCK_BATCH_MQ their queues on the broker every 20 s
//! and only consume a queue while the lock is held; the broker grants a queue to a client when it
//! is free, already held by that client (the lock is refreshed), or held by a client that has not
//! refreshed it for `lock_max_live` (60 s: a crashed client's queues are taken over).
//! UNLOCK_BATCH_MQ releases queues the client gave away; only the holder can release.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use comet_protocol::body::MessageQueue;
use parking_lot::Mutex;

use crate::client::{Clock, system_clock};

/// Most consumer groups with locks.
pub const MAX_LOCK_GROUPS: usize = 100_000;
/// Most locked queues per group.
pub const MAX_LOCKS_PER_GROUP: usize = 100_000;

#[derive(Debug, Clone)]
struct LockEntry {
    client_id: String,
    last_update_millis: i64,
}

impl LockEntry {
    fn is_expired(&self, now: i64, max_live: i64) -> bool {
        now.saturating_sub(self.last_update_millis) > max_live
    }
}

/// Per-group queue locks.
#[derive(Debug)]
pub struct RebalanceLockManager {
    table: Mutex<HashMap<String, HashMap<MessageQueue, LockEntry>>>,
    lock_max_live: Duration,
    clock: Arc<dyn Clock>,
}

impl RebalanceLockManager {
    /// Locks not refreshed within `lock_max_live` (RocketMQ: 60 s) may be taken over.
    pub fn new(lock_max_live: Duration) -> Self {
        Self::with_clock(lock_max_live, system_clock())
    }

    pub fn with_clock(lock_max_live: Duration, clock: Arc<dyn Clock>) -> Self {
        Self {
            table: Mutex::new(HashMap::new()),
            lock_max_live,
            clock,
        }
    }

    fn max_live_millis(&self) -> i64 {
        i64::try_from(self.lock_max_live.as_millis()).unwrap_or(i64::MAX)
    }

    /// Tries to lock every queue of `mqs` for `client_id`; returns the queues it now holds.
    pub fn try_lock_batch(
        &self,
        group: &str,
        mqs: &BTreeSet<MessageQueue>,
        client_id: &str,
    ) -> BTreeSet<MessageQueue> {
        let now = self.clock.now_millis();
        let max_live = self.max_live_millis();
        let mut table = self.table.lock();
        if !table.contains_key(group) && table.len() >= MAX_LOCK_GROUPS {
            tracing::warn!(group, "rebalance lock table full");
            return BTreeSet::new();
        }
        let locks = table.entry(group.to_owned()).or_default();
        let mut granted = BTreeSet::new();
        for mq in mqs {
            let held = locks.len();
            match locks.get_mut(mq) {
                Some(entry) if entry.client_id == client_id => {
                    entry.last_update_millis = now;
                    granted.insert(mq.clone());
                }
                Some(entry) if entry.is_expired(now, max_live) => {
                    tracing::info!(group, queue = %mq, old = %entry.client_id, new = client_id,
                        "expired queue lock taken over");
                    entry.client_id = client_id.to_owned();
                    entry.last_update_millis = now;
                    granted.insert(mq.clone());
                }
                Some(_) => {}
                None if held < MAX_LOCKS_PER_GROUP => {
                    locks.insert(
                        mq.clone(),
                        LockEntry {
                            client_id: client_id.to_owned(),
                            last_update_millis: now,
                        },
                    );
                    granted.insert(mq.clone());
                }
                None => {}
            }
        }
        if locks.is_empty() {
            table.remove(group);
        }
        granted
    }

    /// Releases the queues of `mqs` that `client_id` holds.
    pub fn unlock_batch(&self, group: &str, mqs: &BTreeSet<MessageQueue>, client_id: &str) {
        let mut table = self.table.lock();
        let Some(locks) = table.get_mut(group) else {
            return;
        };
        for mq in mqs {
            if locks.get(mq).is_some_and(|e| e.client_id == client_id) {
                locks.remove(mq);
            }
        }
        if locks.is_empty() {
            table.remove(group);
        }
    }

    /// `true` when `client_id` holds an unexpired lock on `mq`.
    pub fn is_locked(&self, group: &str, mq: &MessageQueue, client_id: &str) -> bool {
        let now = self.clock.now_millis();
        self.table
            .lock()
            .get(group)
            .and_then(|locks| locks.get(mq))
            .is_some_and(|e| e.client_id == client_id && !e.is_expired(now, self.max_live_millis()))
    }

    /// `true` when any client holds an unexpired lock in `group` (an orderly group is active).
    pub fn has_live_lock(&self, group: &str) -> bool {
        let now = self.clock.now_millis();
        let max_live = self.max_live_millis();
        self.table
            .lock()
            .get(group)
            .is_some_and(|locks| locks.values().any(|e| !e.is_expired(now, max_live)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ManualClock;

    fn mqs(ids: &[i32]) -> BTreeSet<MessageQueue> {
        ids.iter()
            .map(|i| MessageQueue::new("T", "b", *i))
            .collect()
    }

    #[test]
    fn lock_refresh_contend_expire_unlock() {
        let clock = Arc::new(ManualClock::new(0));
        let m = RebalanceLockManager::with_clock(Duration::from_secs(60), clock.clone());
        assert_eq!(m.try_lock_batch("g", &mqs(&[0, 1]), "c1"), mqs(&[0, 1]));
        // Another client gets only the free queue.
        assert_eq!(m.try_lock_batch("g", &mqs(&[1, 2]), "c2"), mqs(&[2]));
        assert!(m.is_locked("g", &MessageQueue::new("T", "b", 1), "c1"));
        // c1 refreshes queue 0 at t=50 s; queue 1 stays at t=0.
        clock.advance(50_000);
        assert_eq!(m.try_lock_batch("g", &mqs(&[0]), "c1"), mqs(&[0]));
        clock.advance(10_001);
        // Queue 1 (last refreshed 60.001 s ago) is taken over; queue 0 (10.001 s) is not.
        assert_eq!(m.try_lock_batch("g", &mqs(&[0, 1]), "c2"), mqs(&[1]));
        assert!(!m.is_locked("g", &MessageQueue::new("T", "b", 1), "c1"));
        // Only the holder can unlock.
        m.unlock_batch("g", &mqs(&[0]), "c2");
        assert!(m.is_locked("g", &MessageQueue::new("T", "b", 0), "c1"));
        m.unlock_batch("g", &mqs(&[0]), "c1");
        assert_eq!(m.try_lock_batch("g", &mqs(&[0]), "c2"), mqs(&[0]));
        assert!(m.has_live_lock("g"));
        assert!(!m.has_live_lock("other"));
    }
}
