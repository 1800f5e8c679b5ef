//! Consumer statistics (`ConsumerStatsManager`): pull RT/TPS and consume OK/failed TPS and RT per
//! topic, as the Java client reports them in running info (`ConsumeStatus`).
//!
//! Each figure is a small sliding window of per-second buckets rather than Java's
//! minute/hour snapshots: running info only ever shows "the last minute", and a fixed ring of
//! buckets keeps the cost per update to one lock and an add.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Width of the sliding window the rates and averages cover.
pub const STATS_WINDOW: Duration = Duration::from_secs(60);
const BUCKETS: usize = 60;

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// Second (since the manager started) this bucket counts; stale buckets are reset.
    second: u64,
    sum: u64,
    times: u64,
}

/// A sliding window of per-second sums and counts.
#[derive(Debug)]
struct Window {
    buckets: [Bucket; BUCKETS],
}

impl Window {
    fn new() -> Self {
        Window {
            buckets: [Bucket::default(); BUCKETS],
        }
    }

    fn add(&mut self, second: u64, value: u64) {
        let slot = usize::try_from(second % BUCKETS as u64).unwrap_or(0);
        if let Some(bucket) = self.buckets.get_mut(slot) {
            if bucket.second != second {
                *bucket = Bucket {
                    second,
                    sum: 0,
                    times: 0,
                };
            }
            bucket.sum += value;
            bucket.times += 1;
        }
    }

    /// (sum, times) over the buckets of the last window.
    fn totals(&self, now_second: u64) -> (u64, u64) {
        self.buckets
            .iter()
            .filter(|b| b.times > 0 && now_second.saturating_sub(b.second) < BUCKETS as u64)
            .fold((0, 0), |(s, t), b| (s + b.sum, t + b.times))
    }
}

/// One topic's figures, as in Java's `ConsumeStatus`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ConsumeStatus {
    /// Average pull round trip (ms).
    pub pull_rt: f64,
    /// Messages pulled per second.
    pub pull_tps: f64,
    /// Average listener time per batch (ms).
    pub consume_rt: f64,
    /// Messages consumed successfully per second.
    pub consume_ok_tps: f64,
    /// Messages whose consumption failed per second.
    pub consume_failed_tps: f64,
    /// Messages failed over the window.
    pub consume_failed_msgs: u64,
}

#[derive(Debug)]
struct TopicStats {
    pull_rt: Window,
    pull_tps: Window,
    consume_rt: Window,
    consume_ok_tps: Window,
    consume_failed_tps: Window,
}

impl TopicStats {
    fn new() -> Self {
        TopicStats {
            pull_rt: Window::new(),
            pull_tps: Window::new(),
            consume_rt: Window::new(),
            consume_ok_tps: Window::new(),
            consume_failed_tps: Window::new(),
        }
    }
}

/// Per-topic consume statistics of one consumer group.
#[derive(Debug)]
pub struct ConsumerStatsManager {
    started: Instant,
    topics: Mutex<HashMap<String, TopicStats>>,
}

impl Default for ConsumerStatsManager {
    fn default() -> Self {
        Self::new()
    }
}

impl ConsumerStatsManager {
    /// Empty statistics.
    pub fn new() -> Self {
        ConsumerStatsManager {
            started: Instant::now(),
            topics: Mutex::new(HashMap::new()),
        }
    }

    fn second(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    fn with(&self, topic: &str, f: impl FnOnce(&mut TopicStats, u64)) {
        let second = self.second();
        let mut topics = self.topics.lock();
        // Look up by `&str` first: `entry` would allocate the topic name on every update, and
        // updates happen several times per consumed message.
        if let Some(stats) = topics.get_mut(topic) {
            f(stats, second);
            return;
        }
        f(
            topics
                .entry(topic.to_owned())
                .or_insert_with(TopicStats::new),
            second,
        );
    }

    /// Records the round trip of one pull of `topic` (ms).
    pub fn inc_pull_rt(&self, topic: &str, rt_millis: u64) {
        self.with(topic, |s, sec| s.pull_rt.add(sec, rt_millis));
    }

    /// Records `msgs` messages pulled from `topic`.
    pub fn inc_pull_tps(&self, topic: &str, msgs: u64) {
        self.with(topic, |s, sec| s.pull_tps.add(sec, msgs));
    }

    /// Records the listener time of one batch of `topic` (ms).
    pub fn inc_consume_rt(&self, topic: &str, rt_millis: u64) {
        self.with(topic, |s, sec| s.consume_rt.add(sec, rt_millis));
    }

    /// Records `msgs` messages of `topic` consumed successfully.
    pub fn inc_consume_ok_tps(&self, topic: &str, msgs: u64) {
        self.with(topic, |s, sec| s.consume_ok_tps.add(sec, msgs));
    }

    /// Records `msgs` messages of `topic` whose consumption failed.
    pub fn inc_consume_failed_tps(&self, topic: &str, msgs: u64) {
        self.with(topic, |s, sec| s.consume_failed_tps.add(sec, msgs));
    }

    /// One finished listener call: its RT and how many messages succeeded and failed, under one
    /// lock and one clock read (the three `inc_consume_*` calls cost three of each, per message at
    /// the default batch size of 1).
    pub fn inc_consume(&self, topic: &str, rt_millis: u64, ok: u64, failed: u64) {
        self.with(topic, |s, sec| {
            s.consume_rt.add(sec, rt_millis);
            if ok > 0 {
                s.consume_ok_tps.add(sec, ok);
            }
            if failed > 0 {
                s.consume_failed_tps.add(sec, failed);
            }
        });
    }

    /// The figures of `topic` over the last [`STATS_WINDOW`].
    pub fn consume_status(&self, topic: &str) -> ConsumeStatus {
        let now = self.second();
        let topics = self.topics.lock();
        let Some(s) = topics.get(topic) else {
            return ConsumeStatus::default();
        };
        // Rates are over the part of the window that has elapsed (at least one second).
        let span = (now + 1).min(BUCKETS as u64) as f64;
        let avg = |w: &Window| {
            let (sum, times) = w.totals(now);
            if times == 0 {
                0.0
            } else {
                sum as f64 / times as f64
            }
        };
        let rate = |w: &Window| w.totals(now).0 as f64 / span;
        ConsumeStatus {
            pull_rt: avg(&s.pull_rt),
            pull_tps: rate(&s.pull_tps),
            consume_rt: avg(&s.consume_rt),
            consume_ok_tps: rate(&s.consume_ok_tps),
            consume_failed_tps: rate(&s.consume_failed_tps),
            consume_failed_msgs: s.consume_failed_tps.totals(now).0,
        }
    }

    /// Topics with figures.
    pub fn topics(&self) -> Vec<String> {
        self.topics.lock().keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn averages_and_totals_per_topic() {
        let m = ConsumerStatsManager::new();
        m.inc_pull_rt("T", 10);
        m.inc_pull_rt("T", 30);
        m.inc_consume_ok_tps("T", 5);
        m.inc_consume_failed_tps("T", 2);
        m.inc_consume_failed_tps("U", 7);
        let s = m.consume_status("T");
        assert!((s.pull_rt - 20.0).abs() < f64::EPSILON);
        assert_eq!(s.consume_failed_msgs, 2);
        assert!(s.consume_ok_tps > 0.0);
        assert_eq!(m.consume_status("V"), ConsumeStatus::default());
        let mut topics = m.topics();
        topics.sort();
        assert_eq!(topics, vec!["T", "U"]);
    }

    #[test]
    fn one_combined_update_equals_the_three_separate_ones() {
        let separate = ConsumerStatsManager::new();
        let combined = ConsumerStatsManager::new();
        for (rt, ok, failed) in [(4, 1, 0), (9, 0, 1), (2, 3, 2)] {
            separate.inc_consume_rt("T", rt);
            if ok > 0 {
                separate.inc_consume_ok_tps("T", ok);
            }
            if failed > 0 {
                separate.inc_consume_failed_tps("T", failed);
            }
            combined.inc_consume("T", rt, ok, failed);
        }
        let c = combined.consume_status("T");
        assert_eq!(separate.consume_status("T"), c);
        assert!((c.consume_rt - 5.0).abs() < f64::EPSILON);
        assert_eq!(c.consume_failed_msgs, 3);
    }
}
