//! How long creating (or updating) a topic or a subscription group took on the broker:
//! `rocketmq_topic_create_execution_time` and `rocketmq_consumer_group_create_execution_time`, by
//! outcome (`invocation_status`) and whether the topic or group is a system one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

/// Upper bounds of the buckets, in milliseconds (Apache's: 10 ms, 100 ms, 1 s, 3 s, 5 s; the last
/// bucket is +Inf).
pub const CREATE_TIME_BUCKETS_MS: [u64; 5] = [10, 100, 1_000, 3_000, 5_000];

/// What was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Created {
    Topic,
    Group,
}

/// The labels of one series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CreateKey {
    pub created: Created,
    pub success: bool,
    pub is_system: bool,
}

/// One series: counts per bucket (not cumulative; the last is +Inf), count and sum.
#[derive(Debug, Default)]
pub struct CreateHistogram {
    pub buckets: [AtomicU64; CREATE_TIME_BUCKETS_MS.len() + 1],
    pub count: AtomicU64,
    pub sum_ms: AtomicU64,
}

/// The broker's creation times (at most 8 series: the label space is closed).
#[derive(Debug, Default)]
pub struct CreateTimes {
    series: Mutex<HashMap<CreateKey, std::sync::Arc<CreateHistogram>>>,
}

impl CreateTimes {
    /// One creation that took `took`.
    pub fn record(&self, key: CreateKey, took: Duration) {
        let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        let h = std::sync::Arc::clone(self.series.lock().entry(key).or_default());
        let bucket = CREATE_TIME_BUCKETS_MS
            .iter()
            .position(|b| ms <= *b)
            .unwrap_or(CREATE_TIME_BUCKETS_MS.len());
        h.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        h.count.fetch_add(1, Ordering::Relaxed);
        h.sum_ms.fetch_add(ms, Ordering::Relaxed);
    }

    /// Every series recorded so far.
    pub fn snapshot(&self) -> Vec<(CreateKey, std::sync::Arc<CreateHistogram>)> {
        let mut rows: Vec<_> = self
            .series
            .lock()
            .iter()
            .map(|(k, v)| (*k, std::sync::Arc::clone(v)))
            .collect();
        rows.sort_by_key(|(k, _)| *k);
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creations_land_in_apache_s_buckets_by_outcome() {
        let times = CreateTimes::default();
        let ok = CreateKey {
            created: Created::Topic,
            success: true,
            is_system: false,
        };
        times.record(ok, Duration::from_millis(3));
        times.record(ok, Duration::from_millis(2_000));
        times.record(
            CreateKey {
                success: false,
                ..ok
            },
            Duration::from_secs(9),
        );
        let rows = times.snapshot();
        assert_eq!(rows.len(), 2);
        let (_, failed) = &rows[0];
        assert_eq!(failed.buckets[5].load(Ordering::Relaxed), 1, "+Inf");
        let (_, succeeded) = &rows[1];
        let counts: Vec<u64> = succeeded
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        assert_eq!(counts, [1, 0, 0, 1, 0, 0]);
        assert_eq!(succeeded.sum_ms.load(Ordering::Relaxed), 2_003);
    }
}
