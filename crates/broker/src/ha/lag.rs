//! How long replication takes: from the master writing bytes to the first slave acknowledging
//! them. The send path notes each write's end ([`ReplicationLag::written`], only while a slave
//! is connected); each acknowledgement takes the writes it covers off the queue and records their
//! age. The figures are reported by GET_BROKER_RUNTIME_INFO (`haReplicationLag*`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use hdrhistogram::Histogram;
use parking_lot::Mutex;

/// Writes remembered while waiting for their acknowledgement: a bound on memory when no slave
/// acknowledges (the oldest are forgotten first).
const MAX_PENDING_WRITES: usize = 8192;
/// Longest lag the histogram tells apart (longer ones count as this), in µs.
const MAX_LAG_MICROS: u64 = 60_000_000;

/// Replication lag figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LagSummary {
    pub samples: u64,
    pub p50_micros: u64,
    pub p99_micros: u64,
    pub p999_micros: u64,
    pub max_micros: u64,
}

/// See the module docs.
#[derive(Debug)]
pub struct ReplicationLag {
    slaves: AtomicUsize,
    pending: Mutex<VecDeque<(i64, Instant)>>,
    histogram: Mutex<Option<Histogram<u64>>>,
}

impl Default for ReplicationLag {
    fn default() -> Self {
        Self {
            slaves: AtomicUsize::new(0),
            pending: Mutex::new(VecDeque::new()),
            histogram: Mutex::new(Histogram::new_with_bounds(1, MAX_LAG_MICROS, 3).ok()),
        }
    }
}

impl ReplicationLag {
    /// A slave connection opened or closed.
    pub fn slave_connected(&self, connected: bool) {
        if connected {
            self.slaves.fetch_add(1, Ordering::AcqRel);
        } else if self.slaves.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.pending.lock().clear();
        }
    }

    /// The master wrote the log up to `end`.
    pub fn written(&self, end: i64) {
        if self.slaves.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut pending = self.pending.lock();
        if pending.back().is_some_and(|(last, _)| *last >= end) {
            return;
        }
        if pending.len() == MAX_PENDING_WRITES {
            pending.pop_front();
        }
        pending.push_back((end, Instant::now()));
    }

    /// A slave acknowledged the log up to `acked`.
    pub fn acked(&self, acked: i64) {
        let now = Instant::now();
        let mut ages = Vec::new();
        {
            let mut pending = self.pending.lock();
            while pending.front().is_some_and(|(end, _)| *end <= acked) {
                if let Some((_, at)) = pending.pop_front() {
                    ages.push(now.saturating_duration_since(at));
                }
            }
        }
        if ages.is_empty() {
            return;
        }
        if let Some(h) = self.histogram.lock().as_mut() {
            for age in ages {
                let micros = u64::try_from(age.as_micros()).unwrap_or(u64::MAX);
                h.saturating_record(micros.clamp(1, MAX_LAG_MICROS));
            }
        }
    }

    /// The figures so far.
    pub fn summary(&self) -> LagSummary {
        let guard = self.histogram.lock();
        let Some(h) = guard.as_ref() else {
            return LagSummary::default();
        };
        LagSummary {
            samples: h.len(),
            p50_micros: h.value_at_quantile(0.5),
            p99_micros: h.value_at_quantile(0.99),
            p999_micros: h.value_at_quantile(0.999),
            max_micros: h.max(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ack_measures_the_writes_it_covers() {
        let lag = ReplicationLag::default();
        lag.written(100);
        assert!(
            lag.pending.lock().is_empty(),
            "nothing noted without a slave"
        );
        lag.slave_connected(true);
        lag.written(100);
        lag.written(200);
        lag.written(150);
        lag.written(300);
        assert_eq!(lag.pending.lock().len(), 3);
        lag.acked(250);
        assert_eq!(lag.summary().samples, 2);
        assert_eq!(lag.pending.lock().len(), 1);
        lag.slave_connected(false);
        assert!(lag.pending.lock().is_empty(), "forgotten without slaves");
    }
}
