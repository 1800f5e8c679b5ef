//! Per-topic and per-group message counts over the last minute, hour and day, as Apache's
//! `BrokerStatsManager` keeps them for VIEW_BROKER_STATS_DATA (mqadmin `statsAll`,
//! rocketmq-exporter): each series is sampled every 10 s (the last 7 samples span the minute),
//! every 10 min (7 samples: the hour) and every hour (25 samples: the day). A window's figures are
//! the difference between its newest and oldest sample: `sum` (messages or bytes), `tps` (per
//! second over the samples' time span) and `avgpt` (per operation: messages per send or pull).
//!
//! The counts themselves are the traffic counters ([`super::traffic`]); sampling reads them, so
//! the send and pull paths pay nothing for these windows. The first sample of a series adds a
//! zero sample one period earlier, as Apache's does, so a series seen for the first time reports
//! what it counted so far.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use parking_lot::Mutex;

/// Messages stored to a topic (key: the topic).
pub const TOPIC_PUT_NUMS: &str = "TOPIC_PUT_NUMS";
/// Bytes stored to a topic (key: the topic).
pub const TOPIC_PUT_SIZE: &str = "TOPIC_PUT_SIZE";
/// Messages a group pulled from a topic (key: `topic@group`).
pub const GROUP_GET_NUMS: &str = "GROUP_GET_NUMS";
/// Bytes a group pulled from a topic (key: `topic@group`).
pub const GROUP_GET_SIZE: &str = "GROUP_GET_SIZE";
/// Messages stored to the broker (key: the cluster name).
pub const BROKER_PUT_NUMS: &str = "BROKER_PUT_NUMS";
/// Messages pulled from the broker (key: the cluster name).
pub const BROKER_GET_NUMS: &str = "BROKER_GET_NUMS";

const NAMES: [&str; 6] = [
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    BROKER_PUT_NUMS,
    BROKER_GET_NUMS,
];

/// The three sampling granularities: period and number of samples kept.
pub(super) const MINUTE: (Duration, usize) = (Duration::from_secs(10), 7);
pub(super) const HOUR: (Duration, usize) = (Duration::from_secs(600), 7);
pub(super) const DAY: (Duration, usize) = (Duration::from_secs(3600), 25);

/// Most series kept; series beyond it are not sampled.
pub const MAX_SERIES: usize = 100_000;

/// Cumulative counts of one series at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reading {
    /// Operations (sends or pulls) so far.
    pub times: u64,
    /// Messages or bytes so far.
    pub value: u64,
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    at_ms: i64,
    reading: Reading,
}

/// A window's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WindowStats {
    pub sum: i64,
    pub tps: f64,
    pub avgpt: f64,
}

/// The minute, hour and day windows of one series.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SeriesStats {
    pub minute: WindowStats,
    pub hour: WindowStats,
    pub day: WindowStats,
}

#[derive(Debug, Default)]
struct Series {
    windows: [VecDeque<Sample>; 3],
}

fn window_stats(samples: &VecDeque<Sample>) -> WindowStats {
    let (Some(first), Some(last)) = (samples.front(), samples.back()) else {
        return WindowStats::default();
    };
    let sum = last.reading.value.saturating_sub(first.reading.value);
    let times = last.reading.times.saturating_sub(first.reading.times);
    let span_ms = (last.at_ms - first.at_ms).max(1);
    WindowStats {
        sum: i64::try_from(sum).unwrap_or(i64::MAX),
        tps: sum as f64 * 1000.0 / span_ms as f64,
        avgpt: if times > 0 {
            sum as f64 / times as f64
        } else {
            0.0
        },
    }
}

/// Adds a sample to `window` (after a zero sample one `period_ms` earlier when it is the first),
/// keeping the last `keep`.
fn push_sample(
    window: &mut VecDeque<Sample>,
    now_ms: i64,
    period_ms: i64,
    keep: usize,
    reading: Reading,
) {
    if window.is_empty() {
        window.push_back(Sample {
            at_ms: now_ms - period_ms,
            reading: Reading::default(),
        });
    }
    window.push_back(Sample {
        at_ms: now_ms,
        reading,
    });
    while window.len() > keep {
        window.pop_front();
    }
}

/// The sampled series, by (statistic name, key).
#[derive(Debug, Default)]
pub struct StatsWindows {
    series: Mutex<HashMap<(&'static str, String), Series>>,
}

impl StatsWindows {
    /// Adds a sample of every reading to the window `granularity` (0 minute, 1 hour, 2 day).
    fn sample(
        &self,
        granularity: usize,
        now_ms: i64,
        readings: Vec<((&'static str, String), Reading)>,
    ) {
        let (period, keep) = [MINUTE, HOUR, DAY][granularity];
        let period_ms = i64::try_from(period.as_millis()).unwrap_or(i64::MAX);
        let mut series = self.series.lock();
        for (key, reading) in readings {
            if !series.contains_key(&key) && series.len() >= MAX_SERIES {
                continue;
            }
            let entry = series.entry(key).or_default();
            // A series seen for the first time starts all three windows, as Apache's statistics
            // take a first sample of each when they are created.
            let windows: Vec<usize> = if entry.windows.iter().all(VecDeque::is_empty) {
                vec![0, 1, 2]
            } else {
                vec![granularity]
            };
            for g in windows {
                let (period, keep) = if g == granularity {
                    (period_ms, keep)
                } else {
                    let (p, k) = [MINUTE, HOUR, DAY][g];
                    (i64::try_from(p.as_millis()).unwrap_or(i64::MAX), k)
                };
                push_sample(&mut entry.windows[g], now_ms, period, keep, reading);
            }
        }
    }

    /// Every 10 s: the minute window.
    pub fn sample_minute(&self, now_ms: i64, readings: Vec<((&'static str, String), Reading)>) {
        self.sample(0, now_ms, readings);
    }

    /// Every 10 min: the hour window.
    pub fn sample_hour(&self, now_ms: i64, readings: Vec<((&'static str, String), Reading)>) {
        self.sample(1, now_ms, readings);
    }

    /// Every hour: the day window.
    pub fn sample_day(&self, now_ms: i64, readings: Vec<((&'static str, String), Reading)>) {
        self.sample(2, now_ms, readings);
    }

    /// The windows of a series; `None` when it has never been sampled.
    pub fn get(&self, name: &str, key: &str) -> Option<SeriesStats> {
        let name = NAMES.iter().copied().find(|n| *n == name)?;
        let series = self.series.lock();
        let found = series.get(&(name, key.to_owned()))?;
        Some(SeriesStats {
            minute: window_stats(&found.windows[0]),
            hour: window_stats(&found.windows[1]),
            day: window_stats(&found.windows[2]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(times: u64, value: u64) -> Vec<((&'static str, String), Reading)> {
        vec![((TOPIC_PUT_NUMS, "T".to_owned()), Reading { times, value })]
    }

    #[test]
    fn the_minute_window_spans_the_last_seven_samples() {
        let w = StatsWindows::default();
        assert_eq!(w.get(TOPIC_PUT_NUMS, "T"), None);
        // First sample: a zero sample 10 s earlier is added, so 50 messages in 10 s.
        w.sample_minute(100_000, reading(5, 50));
        let s = w.get(TOPIC_PUT_NUMS, "T").unwrap();
        assert_eq!(s.minute.sum, 50);
        assert!((s.minute.tps - 5.0).abs() < 1e-9);
        assert!((s.minute.avgpt - 10.0).abs() < 1e-9);
        // The first sample started the hour and day windows too (50 in 10 min, in a day).
        assert_eq!(s.hour.sum, 50);
        assert_eq!(s.day.sum, 50);
        // Ten more samples, 10 s apart, 20 messages each in 2 sends: the window keeps 7 samples,
        // 60 s, 120 messages.
        for i in 1..=10u64 {
            w.sample_minute(100_000 + 10_000 * i as i64, reading(5 + 2 * i, 50 + 20 * i));
        }
        let s = w.get(TOPIC_PUT_NUMS, "T").unwrap();
        assert_eq!(s.minute.sum, 120);
        assert!((s.minute.tps - 2.0).abs() < 1e-9);
        assert!((s.minute.avgpt - 10.0).abs() < 1e-9);
    }

    #[test]
    fn hour_and_day_windows_are_sampled_on_their_own() {
        let w = StatsWindows::default();
        w.sample_minute(0, reading(0, 0));
        w.sample_hour(600_000, reading(1, 600));
        w.sample_day(3_600_000, reading(2, 3600));
        let s = w.get(TOPIC_PUT_NUMS, "T").unwrap();
        assert_eq!(
            s.minute.sum, 0,
            "the minute window has not been sampled since"
        );
        assert_eq!(s.hour.sum, 600);
        assert!(
            (s.hour.tps - 600.0 / 1200.0).abs() < 1e-9,
            "600 over 20 min of samples"
        );
        assert_eq!(s.day.sum, 3600);
    }

    #[test]
    fn unknown_names_and_keys_are_not_found() {
        let w = StatsWindows::default();
        w.sample_minute(0, reading(1, 1));
        assert_eq!(w.get("NO_SUCH_STATS", "T"), None);
        assert_eq!(w.get(TOPIC_PUT_NUMS, "Other"), None);
    }
}
