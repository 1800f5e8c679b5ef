//! Who becomes master: RocketMQ's election order.
//!
//! Only a replica in the SyncStateSet holds everything the master acknowledged, so only those
//! are candidates (an unclean election, when allowed, falls back to any living replica and
//! loses what that replica lacks). A living master stays master. Otherwise the candidate with
//! the newest epoch wins, then the longest log, then the lowest election priority number; the
//! lowest id breaks what is left, so every controller picks the same broker.

use std::cmp::Reverse;

use serde::{Deserialize, Serialize};

use super::BrokerGroup;

/// A living broker as its latest heartbeat describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    pub broker_id: u64,
    /// The newest epoch in its log.
    pub epoch: i32,
    /// The end of its CommitLog.
    pub max_offset: i64,
    /// `brokerElectionPriority`: lower is preferred.
    pub priority: i32,
}

/// The broker `group` should have as master, or `None` when no replica may be.
pub fn elect(
    group: &BrokerGroup,
    designated: Option<u64>,
    alive: &[Candidate],
    allow_unclean: bool,
) -> Option<u64> {
    let known_alive = |c: &&Candidate| group.replicas.contains_key(&c.broker_id);
    let in_sync: Vec<&Candidate> = alive
        .iter()
        .filter(known_alive)
        .filter(|c| group.sync_state_set.contains(&c.broker_id))
        .collect();
    if let Some(id) = designated {
        let eligible = in_sync.iter().any(|c| c.broker_id == id)
            || (allow_unclean && alive.iter().filter(known_alive).any(|c| c.broker_id == id));
        return eligible.then_some(id);
    }
    if let Some(master) = group.master
        && in_sync.iter().any(|c| c.broker_id == master)
    {
        return Some(master);
    }
    if let Some(best) = best_of(&in_sync) {
        return Some(best);
    }
    if allow_unclean {
        let all: Vec<&Candidate> = alive.iter().filter(known_alive).collect();
        return best_of(&all);
    }
    None
}

fn best_of(candidates: &[&Candidate]) -> Option<u64> {
    candidates
        .iter()
        .min_by_key(|c| {
            (
                Reverse(c.epoch),
                Reverse(c.max_offset),
                c.priority,
                c.broker_id,
            )
        })
        .map(|c| c.broker_id)
}
