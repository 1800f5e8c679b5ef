//! Which brokers are alive, as this controller sees them: the table of their latest heartbeats.
//!
//! Brokers send BROKER_HEARTBEAT to every controller, so each controller keeps its own table
//! (it is not replicated). A broker is alive while its latest heartbeat is younger than the
//! timeout it announced. A broker leaves the table when the connection its heartbeats came on
//! closes (a killed broker's kernel closes it at once) or when a scan finds it silent past its
//! timeout (a hung broker); either way the controller is told so it can elect a new master.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::replicas::Candidate;

/// Most brokers one controller tracks: heartbeats from more are ignored, so a misbehaving
/// client cannot grow the table without bound.
pub const MAX_TRACKED_BROKERS: usize = 10_000;

/// One heartbeat, with Apache's defaults for what it left out already applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    pub cluster: String,
    pub broker_name: String,
    pub broker_id: u64,
    pub address: String,
    pub epoch: i32,
    pub max_offset: i64,
    pub confirm_offset: i64,
    pub timeout: Duration,
    pub priority: i32,
}

/// A broker that stopped being alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Departed {
    pub cluster: String,
    pub broker_name: String,
    pub broker_id: u64,
}

#[derive(Debug, Clone)]
struct Live {
    heartbeat: Heartbeat,
    channel: u64,
    last_seen: Instant,
}

/// The heartbeat table.
#[derive(Debug, Default)]
pub struct Liveness {
    brokers: Mutex<HashMap<(String, u64), Live>>,
}

impl Liveness {
    /// Records a heartbeat that arrived on connection `channel` at `now`.
    pub fn heartbeat(&self, beat: Heartbeat, channel: u64, now: Instant) {
        let mut brokers = self.brokers.lock();
        let key = (beat.broker_name.clone(), beat.broker_id);
        let full = brokers.len() >= MAX_TRACKED_BROKERS;
        match brokers.get_mut(&key) {
            Some(live) => {
                // Within one epoch the log only grows: an older report (reordered) never lowers
                // what a newer one said.
                let newer = beat.epoch > live.heartbeat.epoch
                    || (beat.epoch == live.heartbeat.epoch
                        && beat.max_offset > live.heartbeat.max_offset);
                let previous = live.heartbeat.clone();
                live.heartbeat = beat;
                if !newer {
                    live.heartbeat.epoch = previous.epoch;
                    live.heartbeat.max_offset = previous.max_offset;
                    live.heartbeat.confirm_offset = previous.confirm_offset;
                }
                live.channel = channel;
                live.last_seen = now;
            }
            None if full => {
                tracing::warn!(
                    broker = %beat.broker_name,
                    id = beat.broker_id,
                    limit = MAX_TRACKED_BROKERS,
                    "heartbeat ignored: the controller tracks its maximum number of brokers"
                );
            }
            None => {
                brokers.insert(
                    key,
                    Live {
                        heartbeat: beat,
                        channel,
                        last_seen: now,
                    },
                );
            }
        }
    }

    fn is_fresh(live: &Live, now: Instant) -> bool {
        now.saturating_duration_since(live.last_seen) <= live.heartbeat.timeout
    }

    /// Whether broker `id` of `broker_name` is alive at `now`.
    pub fn is_alive(&self, broker_name: &str, id: u64, now: Instant) -> bool {
        self.brokers
            .lock()
            .get(&(broker_name.to_owned(), id))
            .is_some_and(|live| Self::is_fresh(live, now))
    }

    /// The ids of `broker_name` alive at `now`.
    pub fn alive_ids(&self, broker_name: &str, now: Instant) -> BTreeSet<u64> {
        self.brokers
            .lock()
            .iter()
            .filter(|((name, _), live)| name == broker_name && Self::is_fresh(live, now))
            .map(|((_, id), _)| *id)
            .collect()
    }

    /// The brokers of `broker_name` alive at `now`, as election candidates.
    pub fn candidates(&self, broker_name: &str, now: Instant) -> Vec<Candidate> {
        let mut out: Vec<Candidate> = self
            .brokers
            .lock()
            .iter()
            .filter(|((name, _), live)| name == broker_name && Self::is_fresh(live, now))
            .map(|((_, id), live)| Candidate {
                broker_id: *id,
                epoch: live.heartbeat.epoch,
                max_offset: live.heartbeat.max_offset,
                priority: live.heartbeat.priority,
            })
            .collect();
        out.sort_by_key(|c| c.broker_id);
        out
    }

    /// Removes the brokers silent past their timeout at `now`.
    pub fn expire(&self, now: Instant) -> Vec<Departed> {
        self.remove_where(|live| !Self::is_fresh(live, now))
    }

    /// Removes the brokers whose heartbeats came on connection `channel`, which closed.
    pub fn channel_closed(&self, channel: u64) -> Vec<Departed> {
        self.remove_where(|live| live.channel == channel)
    }

    fn remove_where(&self, gone: impl Fn(&Live) -> bool) -> Vec<Departed> {
        let mut brokers = self.brokers.lock();
        let mut departed = Vec::new();
        brokers.retain(|(name, id), live| {
            if gone(live) {
                departed.push(Departed {
                    cluster: live.heartbeat.cluster.clone(),
                    broker_name: name.clone(),
                    broker_id: *id,
                });
                false
            } else {
                true
            }
        });
        departed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(id: u64, epoch: i32, max_offset: i64) -> Heartbeat {
        Heartbeat {
            cluster: "c".into(),
            broker_name: "b".into(),
            broker_id: id,
            address: format!("127.0.0.1:{id}"),
            epoch,
            max_offset,
            confirm_offset: max_offset,
            timeout: Duration::from_secs(10),
            priority: i32::MAX,
        }
    }

    #[test]
    fn a_broker_is_alive_until_its_timeout_passes() {
        let table = Liveness::default();
        let t0 = Instant::now();
        table.heartbeat(beat(1, 1, 10), 7, t0);
        assert!(table.is_alive("b", 1, t0 + Duration::from_secs(10)));
        assert!(!table.is_alive("b", 1, t0 + Duration::from_secs(11)));
        assert!(table.expire(t0 + Duration::from_secs(5)).is_empty());
        let gone = table.expire(t0 + Duration::from_secs(11));
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].broker_id, 1);
        assert!(table.alive_ids("b", t0).is_empty());
    }

    #[test]
    fn a_closed_connection_removes_its_brokers_at_once() {
        let table = Liveness::default();
        let t0 = Instant::now();
        table.heartbeat(beat(1, 1, 10), 7, t0);
        table.heartbeat(beat(2, 1, 10), 8, t0);
        assert_eq!(table.channel_closed(7).len(), 1);
        assert_eq!(table.alive_ids("b", t0), BTreeSet::from([2]));
    }

    #[test]
    fn an_older_report_never_lowers_the_log_position() {
        let table = Liveness::default();
        let t0 = Instant::now();
        table.heartbeat(beat(1, 2, 100), 7, t0);
        table.heartbeat(beat(1, 2, 50), 7, t0);
        table.heartbeat(beat(1, 1, 500), 7, t0);
        let c = table.candidates("b", t0);
        assert_eq!((c[0].epoch, c[0].max_offset), (2, 100));
        table.heartbeat(beat(1, 3, 10), 7, t0);
        let c = table.candidates("b", t0);
        assert_eq!((c[0].epoch, c[0].max_offset), (3, 10));
    }
}
