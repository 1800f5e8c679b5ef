//! Latency fault tolerance (`sendLatencyFaultEnable`), as in the Java producer.
//!
//! A broker that answered slowly, or not at all, is probably busy or gone; sending the next
//! messages elsewhere for a while avoids piling more requests onto it. After each send the
//! broker is marked unavailable for a time looked up from the send's latency, a failure counting
//! as [`FAILURE_LATENCY_MS`]. Queue selection then prefers available brokers, then the "least
//! bad" one, then any.
//!
//! Time comes from an injected [`Clock`] (the workspace's shared one), so the isolation windows
//! can be tested without sleeping.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use comet_protocol::body::MessageQueue;
use comet_remoting::clock::{Clock, system_clock};
use parking_lot::Mutex;

use crate::route::{TopicPublishInfo, random_start};

/// Latency thresholds (ms) of the isolation table.
pub const LATENCY_MAX_MS: [u64; 7] = [50, 100, 550, 1800, 3000, 5000, 15000];
/// Isolation (ms) for a latency at or above the threshold at the same index.
pub const NOT_AVAILABLE_DURATION_MS: [u64; 7] = [0, 0, 2000, 5000, 6000, 10000, 30000];
/// The latency a failed send counts as (10 s of isolation with the default table).
pub const FAILURE_LATENCY_MS: u64 = 10_000;

/// What is known about one broker.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FaultItem {
    current_latency_ms: u64,
    /// The broker may be used again from this time on (epoch ms).
    available_from_ms: i64,
}

/// Per-broker isolation windows and the queue selection that honours them.
pub struct LatencyFaultTolerance {
    clock: Arc<dyn Clock>,
    items: Mutex<HashMap<String, FaultItem>>,
    /// Rotates among the least bad brokers when none is available.
    which_item_worst: AtomicU32,
}

impl Default for LatencyFaultTolerance {
    fn default() -> Self {
        Self::new(system_clock())
    }
}

impl std::fmt::Debug for LatencyFaultTolerance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LatencyFaultTolerance")
            .field("items", &*self.items.lock())
            .finish()
    }
}

impl LatencyFaultTolerance {
    /// A fault table reading time from `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        LatencyFaultTolerance {
            clock,
            items: Mutex::new(HashMap::new()),
            which_item_worst: AtomicU32::new(random_start()),
        }
    }

    /// How long a broker is avoided after a send with `latency_ms` (the Java producer's table:
    /// the duration of the largest latency step `latency_ms` reaches).
    pub fn not_available_duration(latency_ms: u64) -> u64 {
        LATENCY_MAX_MS
            .iter()
            .zip(NOT_AVAILABLE_DURATION_MS.iter())
            .rev()
            .find(|(max, _)| latency_ms >= **max)
            .map_or(0, |(_, duration)| *duration)
    }

    /// Records the outcome of a send to `broker`: its latency, or a failure (`isolation`).
    pub fn update_fault_item(&self, broker: &str, latency_ms: u64, isolation: bool) {
        let effective = if isolation {
            FAILURE_LATENCY_MS
        } else {
            latency_ms
        };
        let duration = i64::try_from(Self::not_available_duration(effective)).unwrap_or(i64::MAX);
        let now = self.clock.now_millis();
        self.items.lock().insert(
            broker.to_string(),
            FaultItem {
                current_latency_ms: effective,
                available_from_ms: now.saturating_add(duration),
            },
        );
    }

    /// Whether `broker` is outside its isolation window (unknown brokers are available).
    pub fn is_available(&self, broker: &str) -> bool {
        let now = self.clock.now_millis();
        self.items
            .lock()
            .get(broker)
            .is_none_or(|item| now >= item.available_from_ms)
    }

    /// Forgets what is recorded about `broker`.
    pub fn remove(&self, broker: &str) {
        self.items.lock().remove(broker);
    }

    /// One of the better half of the known brokers (available first, then lower latency, then
    /// earlier end of isolation), rotating among them; `None` if no broker is known.
    pub fn pick_one_at_least(&self) -> Option<String> {
        let now = self.clock.now_millis();
        let mut items: Vec<(String, FaultItem)> = self
            .items
            .lock()
            .iter()
            .map(|(name, item)| (name.clone(), item.clone()))
            .collect();
        if items.is_empty() {
            return None;
        }
        items.sort_by(|(an, a), (bn, b)| {
            let a_available = now >= a.available_from_ms;
            let b_available = now >= b.available_from_ms;
            b_available
                .cmp(&a_available)
                .then(a.current_latency_ms.cmp(&b.current_latency_ms))
                .then(a.available_from_ms.cmp(&b.available_from_ms))
                .then(an.cmp(bn))
        });
        let half = items.len().div_ceil(2);
        let index = self.which_item_worst.fetch_add(1, Ordering::Relaxed) as usize % half;
        items.into_iter().nth(index).map(|(name, _)| name)
    }

    /// Picks a queue of `info`: round-robin over available brokers other than `last_broker`,
    /// then any available broker, then a queue of the least bad broker, then plain round-robin.
    pub fn select_one_message_queue(
        &self,
        info: &TopicPublishInfo,
        last_broker: Option<&str>,
    ) -> Option<MessageQueue> {
        let len = info.message_queues.len();
        if len == 0 {
            return None;
        }
        let start = info.next_index() % len;
        let candidates = || (0..len).filter_map(|i| info.message_queues.get((start + i) % len));
        if let Some(mq) = candidates().find(|mq| {
            Some(mq.broker_name.as_str()) != last_broker && self.is_available(&mq.broker_name)
        }) {
            return Some(mq.clone());
        }
        if let Some(mq) = candidates().find(|mq| self.is_available(&mq.broker_name)) {
            return Some(mq.clone());
        }
        if let Some(broker) = self.pick_one_at_least() {
            if let Some(mq) = candidates().find(|mq| mq.broker_name == broker) {
                return Some(mq.clone());
            }
            // The broker no longer serves this topic; forget it.
            self.remove(&broker);
        }
        info.select_one_avoiding(last_broker)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use comet_protocol::body::{BrokerData, QueueData, TopicRouteData, perm};

    use comet_remoting::clock::ManualClock;

    use super::*;

    fn info(brokers: &[&str]) -> TopicPublishInfo {
        let route = TopicRouteData {
            queue_datas: brokers
                .iter()
                .map(|b| QueueData {
                    broker_name: (*b).to_string(),
                    read_queue_nums: 2,
                    write_queue_nums: 2,
                    perm: perm::PERM_READ_WRITE,
                    topic_sys_flag: 0,
                })
                .collect(),
            broker_datas: brokers
                .iter()
                .map(|b| BrokerData {
                    broker_name: (*b).to_string(),
                    broker_addrs: BTreeMap::from([(0, format!("{b}:1"))]),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        TopicPublishInfo::from_route("T", &route)
    }

    #[test]
    fn isolation_table_matches_the_java_client() {
        let cases = [
            (0, 0),
            (49, 0),
            (100, 0),
            (549, 0),
            (550, 2000),
            (1799, 2000),
            (1800, 5000),
            (3000, 6000),
            (5000, 10000),
            (14_999, 10000),
            (15_000, 30000),
            (u64::MAX, 30000),
        ];
        for (latency, expected) in cases {
            assert_eq!(
                LatencyFaultTolerance::not_available_duration(latency),
                expected,
                "latency {latency}"
            );
        }
    }

    #[test]
    fn isolation_window_ends_on_time() {
        let clock = Arc::new(ManualClock::new(1_000));
        let fault = LatencyFaultTolerance::new(Arc::clone(&clock) as Arc<dyn Clock>);
        assert!(fault.is_available("a"));
        fault.update_fault_item("a", 600, false);
        assert!(!fault.is_available("a"));
        clock.advance(1_999);
        assert!(!fault.is_available("a"));
        clock.advance(1);
        assert!(fault.is_available("a"));
        // A failure isolates for 10 s.
        fault.update_fault_item("a", 5, true);
        clock.advance(9_999);
        assert!(!fault.is_available("a"));
        clock.advance(1);
        assert!(fault.is_available("a"));
        // A fast send keeps the broker available.
        fault.update_fault_item("b", 20, false);
        assert!(fault.is_available("b"));
    }

    #[test]
    fn selection_skips_isolated_brokers_until_they_recover() {
        let clock = Arc::new(ManualClock::new(0));
        let fault = LatencyFaultTolerance::new(Arc::clone(&clock) as Arc<dyn Clock>);
        let info = info(&["a", "b"]);
        fault.update_fault_item("a", 0, true);
        for _ in 0..20 {
            let mq = fault.select_one_message_queue(&info, None).expect("queue");
            assert_eq!(mq.broker_name, "b");
        }
        clock.advance(FAILURE_LATENCY_MS as i64);
        let brokers: std::collections::HashSet<_> = (0..20)
            .filter_map(|_| fault.select_one_message_queue(&info, None))
            .map(|mq| mq.broker_name)
            .collect();
        assert_eq!(brokers.len(), 2, "both brokers used again after recovery");
    }

    #[test]
    fn selection_avoids_the_last_broker_when_another_is_available() {
        let fault = LatencyFaultTolerance::new(Arc::new(ManualClock::new(0)));
        let info = info(&["a", "b"]);
        for _ in 0..20 {
            let mq = fault
                .select_one_message_queue(&info, Some("a"))
                .expect("queue");
            assert_eq!(mq.broker_name, "b");
        }
    }

    #[test]
    fn all_isolated_falls_back_to_the_least_bad_broker() {
        let fault = LatencyFaultTolerance::new(Arc::new(ManualClock::new(0)));
        let info = info(&["a", "b", "c", "d"]);
        fault.update_fault_item("a", 20_000, false);
        fault.update_fault_item("b", 600, false);
        fault.update_fault_item("c", 20_000, false);
        fault.update_fault_item("d", 20_000, false);
        // Better half of four = two brokers: b (lowest latency) and one of the rest.
        let picked: std::collections::HashSet<_> = (0..20)
            .filter_map(|_| fault.select_one_message_queue(&info, None))
            .map(|mq| mq.broker_name)
            .collect();
        assert!(picked.contains("b"));
        assert_eq!(picked.len(), 2);
        let only = LatencyFaultTolerance::new(Arc::new(ManualClock::new(0)));
        assert_eq!(only.pick_one_at_least(), None);
    }

    #[test]
    fn unknown_least_bad_broker_is_forgotten() {
        let fault = LatencyFaultTolerance::new(Arc::new(ManualClock::new(0)));
        let info = info(&["a"]);
        fault.update_fault_item("a", 20_000, false);
        fault.update_fault_item("gone", 0, true);
        fault.update_fault_item("gone2", 0, true);
        for _ in 0..10 {
            let mq = fault.select_one_message_queue(&info, None).expect("queue");
            assert_eq!(mq.broker_name, "a");
        }
    }
}
