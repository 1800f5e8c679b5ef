//! `rocketmq_rpc_latency`: how long the broker took to answer each request, by request code,
//! response code, whether the request was held (long polling) and whether it was oneway.
//!
//! A request is timed from the moment its frame was handed to the processor to the moment the
//! processor's answer was ready to be written (the time an answer then waits in the connection's
//! write queue is not included). A held pull is timed from its suspension to its answer.
//!
//! Recording costs a search of a short per-thread list and three relaxed atomic adds; a broker
//! with its metrics endpoint off installs no observer and records nothing. The table is bounded
//! ([`MAX_SERIES`] label sets): a client sending invented request codes cannot grow it without
//! limit; answers beyond the bound are counted in [`RpcLatency::dropped`].

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::table::BoundedTable;

/// Most label sets the table keeps.
pub const MAX_SERIES: usize = 4096;

/// Upper bounds of the latency buckets, in microseconds (Apache's: 1, 3, 5, 7, 10 and 100 ms,
/// 1, 2 and 3 s; the last bucket is +Inf).
pub const LATENCY_BUCKETS_US: [u64; 9] = [
    1_000, 3_000, 5_000, 7_000, 10_000, 100_000, 1_000_000, 2_000_000, 3_000_000,
];

/// The labels of one series besides the constant ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RpcKey {
    pub request_code: i32,
    pub response_code: i32,
    pub long_polling: bool,
    pub oneway: bool,
}

/// One series: counts per bucket (not cumulative; the last is +Inf), the number of answers and
/// the sum of their latencies.
#[derive(Debug, Default)]
pub struct LatencyHistogram {
    pub buckets: [AtomicU64; 10],
    pub count: AtomicU64,
    pub sum_us: AtomicU64,
}

impl LatencyHistogram {
    fn observe(&self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let bucket = LATENCY_BUCKETS_US
            .iter()
            .position(|b| us <= *b)
            .unwrap_or(LATENCY_BUCKETS_US.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }
}

/// Series a thread remembers, per recorder: a short list searched front to back, so the few
/// codes a busy connection sends are found in a compare or two, without hashing.
const CACHED_PER_THREAD: usize = 64;

type Cache = Vec<(u64, RpcKey, Arc<LatencyHistogram>)>;

thread_local! {
    static CACHE: RefCell<Cache> = const { RefCell::new(Vec::new()) };
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The broker's request latencies.
#[derive(Debug)]
pub struct RpcLatency {
    enabled: bool,
    id: u64,
    table: BoundedTable<RpcKey, LatencyHistogram>,
    /// Answers not recorded because the table was full.
    pub dropped: AtomicU64,
}

impl RpcLatency {
    /// Latencies that record when `enabled` (the metrics endpoint is on).
    pub fn new(enabled: bool) -> Self {
        RpcLatency {
            enabled,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            table: BoundedTable::new(MAX_SERIES),
            dropped: AtomicU64::new(0),
        }
    }

    /// Whether answers are recorded.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// One answer to a request of `key.request_code`, ready after `elapsed`.
    pub fn record(&self, key: RpcKey, elapsed: Duration) {
        if !self.enabled {
            return;
        }
        let recorded = CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            if let Some((_, _, h)) = cache.iter().find(|(id, k, _)| *id == self.id && *k == key) {
                h.observe(elapsed);
                return true;
            }
            let Some(h) = self.table.get_or_insert(&key) else {
                return false;
            };
            h.observe(elapsed);
            if cache.len() < CACHED_PER_THREAD {
                cache.push((self.id, key, h));
            }
            true
        });
        if !recorded {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every series recorded so far.
    pub fn snapshot(&self) -> Vec<(RpcKey, Arc<LatencyHistogram>)> {
        self.table.snapshot()
    }
}

impl comet_remoting::RequestObserver for RpcLatency {
    fn answered(&self, request_code: i32, response_code: i32, oneway: bool, elapsed: Duration) {
        let key = RpcKey {
            request_code,
            response_code,
            long_polling: false,
            oneway,
        };
        self.record(key, elapsed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(request_code: i32) -> RpcKey {
        RpcKey {
            request_code,
            response_code: 0,
            long_polling: false,
            oneway: false,
        }
    }

    fn counts(h: &LatencyHistogram) -> Vec<u64> {
        h.buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect()
    }

    #[test]
    fn answers_land_in_apache_s_buckets() {
        let rpc = RpcLatency::new(true);
        for ms in [0, 1, 2, 8, 150, 2_500, 60_000] {
            rpc.record(key(10), Duration::from_millis(ms));
        }
        let rows = rpc.snapshot();
        assert_eq!(rows.len(), 1);
        let h = &rows[0].1;
        // <=1 ms: 0 and 1; <=3: 2; <=10: 8; <=1 s: 150; <=3 s: 2500; +Inf: 60 s.
        assert_eq!(counts(h), [2, 1, 0, 0, 1, 0, 1, 0, 1, 1]);
        assert_eq!(h.count.load(Ordering::Relaxed), 7);
        assert_eq!(h.sum_us.load(Ordering::Relaxed), 62_661_000);
    }

    #[test]
    fn a_disabled_recorder_records_nothing() {
        let rpc = RpcLatency::new(false);
        rpc.record(key(10), Duration::from_millis(1));
        assert!(rpc.snapshot().is_empty());
    }

    #[test]
    fn the_table_is_bounded() {
        let rpc = RpcLatency::new(true);
        let extra = 10;
        for code in 0..(MAX_SERIES + extra) {
            rpc.record(key(code as i32), Duration::from_micros(5));
        }
        assert_eq!(rpc.snapshot().len(), MAX_SERIES);
        assert_eq!(rpc.dropped.load(Ordering::Relaxed), extra as u64);
    }
}
