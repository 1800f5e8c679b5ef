//! What a master's slaves hold: the offset each one acknowledged, and from them the offset up to
//! which enough brokers hold the log for a `SYNC_MASTER` to answer its sends.
//!
//! How many brokers that is (`inSyncReplicas`) may change while the master runs
//! ([`ReplicaAcks::set_required_copies`]): the offset is published again at once, from the
//! acknowledgements already received.
//!
//! A slave's acknowledgement counts only up to the bytes its connection was actually sent
//! (`master.rs`): a peer that reports offsets it never received cannot make a send look
//! replicated. Apache 5.3.3's master takes any report (its issue #3015).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use tokio::sync::watch;

/// One slave connection's acknowledged offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlaveAck {
    pub acked: i64,
}

/// The acknowledgements of every slave connection of a master.
#[derive(Debug)]
pub struct ReplicaAcks {
    /// Brokers, the master included, that must hold a byte before it counts as replicated
    /// (at least 1). Changed under the `slaves` lock, so every publication uses one value.
    required_copies: AtomicUsize,
    slaves: Mutex<HashMap<u64, SlaveAck>>,
    /// The offset held by `required_copies` brokers (`u64::MAX` when only the master's copy is
    /// required).
    replicated: watch::Sender<u64>,
}

impl ReplicaAcks {
    pub fn new(required_copies: usize) -> Self {
        let initial = if required_copies <= 1 { u64::MAX } else { 0 };
        Self {
            required_copies: AtomicUsize::new(required_copies.max(1)),
            slaves: Mutex::new(HashMap::new()),
            replicated: watch::Sender::new(initial),
        }
    }

    /// Brokers, the master included, that must hold a byte before it counts as replicated.
    pub fn required_copies(&self) -> usize {
        self.required_copies.load(Ordering::Acquire)
    }

    /// Counts `required_copies` brokers from now on (at least 1), and publishes the replicated
    /// offset they make of the acknowledgements received.
    pub fn set_required_copies(&self, required_copies: usize) {
        let slaves = self.slaves.lock();
        self.required_copies
            .store(required_copies.max(1), Ordering::Release);
        self.publish(&slaves);
    }

    /// The replicated offset, published on every change.
    pub fn replicated(&self) -> watch::Receiver<u64> {
        self.replicated.subscribe()
    }

    /// Records slave connection `id`'s acknowledgement.
    pub fn ack(&self, id: u64, acked: i64) {
        let mut slaves = self.slaves.lock();
        slaves.insert(id, SlaveAck { acked });
        self.publish(&slaves);
    }

    /// Forgets a closed connection: its copy no longer counts.
    pub fn remove(&self, id: u64) {
        let mut slaves = self.slaves.lock();
        if slaves.remove(&id).is_some() {
            self.publish(&slaves);
        }
    }

    /// The acknowledged offset of every connected slave.
    pub fn acks(&self) -> Vec<i64> {
        self.slaves.lock().values().map(|a| a.acked).collect()
    }

    /// Slaves within `max_gap` bytes of `master_end`.
    pub fn in_sync(&self, master_end: i64, max_gap: u64) -> usize {
        let gap = i64::try_from(max_gap).unwrap_or(i64::MAX);
        self.acks()
            .iter()
            .filter(|acked| master_end.saturating_sub(**acked) < gap)
            .count()
    }

    fn publish(&self, slaves: &HashMap<u64, SlaveAck>) {
        let value = replicated_offset(
            slaves.values().map(|a| a.acked).collect(),
            self.required_copies(),
        );
        self.replicated.send_if_modified(|current| {
            let changed = *current != value;
            *current = value;
            changed
        });
    }
}

/// The offset at least `required_copies - 1` of the slaves' `acks` reached (the master holds
/// everything it wrote): the largest `x` such that enough acks are `>= x`. `u64::MAX` when no
/// slave copy is required, 0 when too few slaves are connected.
pub fn replicated_offset(mut acks: Vec<i64>, required_copies: usize) -> u64 {
    let slaves_needed = required_copies.saturating_sub(1);
    if slaves_needed == 0 {
        return u64::MAX;
    }
    if acks.len() < slaves_needed {
        return 0;
    }
    acks.sort_unstable_by(|a, b| b.cmp(a));
    u64::try_from(acks[slaves_needed - 1]).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_enough_slaves_hold() {
        assert_eq!(replicated_offset(vec![], 1), u64::MAX);
        assert_eq!(replicated_offset(vec![], 2), 0);
        assert_eq!(replicated_offset(vec![30], 2), 30);
        assert_eq!(replicated_offset(vec![30, 50, 40], 2), 50);
        assert_eq!(replicated_offset(vec![30, 50, 40], 3), 40);
        assert_eq!(replicated_offset(vec![30, 50, 40], 4), 30);
        assert_eq!(replicated_offset(vec![30, 50], 4), 0);
    }

    #[test]
    fn a_closed_connection_stops_counting() {
        let acks = ReplicaAcks::new(2);
        let rx = acks.replicated();
        acks.ack(1, 100);
        assert_eq!(*rx.borrow(), 100);
        acks.ack(2, 300);
        assert_eq!(*rx.borrow(), 300);
        acks.remove(2);
        assert_eq!(*rx.borrow(), 100);
        acks.remove(1);
        assert_eq!(*rx.borrow(), 0);
        assert_eq!(acks.in_sync(1000, 500), 0);
        acks.ack(3, 600);
        assert_eq!((acks.in_sync(1000, 500), acks.in_sync(1000, 300)), (1, 0));
    }

    #[test]
    fn a_change_of_the_required_copies_publishes_again() {
        let acks = ReplicaAcks::new(2);
        let rx = acks.replicated();
        assert_eq!(*rx.borrow(), 0, "no slave yet");
        acks.set_required_copies(1);
        assert_eq!(acks.required_copies(), 1);
        assert_eq!(*rx.borrow(), u64::MAX, "only the master's copy is required");
        acks.ack(1, 100);
        acks.ack(2, 300);
        assert_eq!(*rx.borrow(), u64::MAX);
        acks.set_required_copies(3);
        assert_eq!(*rx.borrow(), 100, "both slaves must hold it");
        acks.set_required_copies(2);
        assert_eq!(*rx.borrow(), 300);
        acks.set_required_copies(0);
        assert_eq!(
            acks.required_copies(),
            1,
            "the master's own copy always counts"
        );
    }
}
