//! Figures over time, and whether the name servers answer.
//!
//! The console samples the cluster at a fixed interval (`consoleSampleIntervalSecs`, 10 s by
//! default; see [`crate::sampler`]) into one ring buffer per series, [`HISTORY_POINTS`] points
//! each (an hour at 10 s). A series is named by a key: `cluster/in`, `cluster/out`,
//! `broker/<addr>/in`, `broker/<addr>/out`, `topic/<topic>/in`, `group/<group>/lag` and
//! `group/<group>/tps` (`/` is not allowed in topic and group names, so keys never collide).
//!
//! Topics and groups are sampled only while someone looks at them: one is *watched* from the
//! first time its chart is asked for until a whole window passes without anyone asking again,
//! and at most [`MAX_WATCHED`] topics and as many groups are watched, the one asked for least
//! recently giving way. A series whose newest point is older than the window is dropped. So the
//! memory and the requests of a round are bounded whatever the size of the cluster.
//!
//! [`Health`] records whether the name servers answered the last time the console asked them
//! (every sampling round, every `/api/status` call), so the page can show the error and the age
//! of its data during an outage.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{Value, json};

/// Points kept per series: an hour at the default 10 s interval.
pub const HISTORY_POINTS: usize = 360;
/// Most topics, and most groups, sampled at once.
pub const MAX_WATCHED: usize = 32;
/// A rate worked out from a counter spans at least this much: counters that move in steps
/// (offsets a consumer commits every few seconds) then give an even rate.
pub const RATE_WINDOW: Duration = Duration::from_secs(10);

/// One sample: milliseconds since the epoch and the value. Serialized as `[ms, value]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point(pub i64, pub f64);

/// What kind of name a watch is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    /// A topic: its rate of messages in.
    Topic,
    /// A consumer group: its lag and consume rate.
    Group,
}

struct Series {
    label: String,
    points: VecDeque<Point>,
}

#[derive(Default)]
struct Inner {
    series: HashMap<String, Series>,
    topics: HashMap<String, Instant>,
    groups: HashMap<String, Instant>,
    /// Per counter (`topic/<topic>` or `group/<group>`): its recent readings (ms, value),
    /// oldest first, spanning [`RATE_WINDOW`].
    counters: HashMap<String, VecDeque<(i64, i64)>>,
}

impl Inner {
    fn watch_map(&mut self, kind: Watched) -> &mut HashMap<String, Instant> {
        match kind {
            Watched::Topic => &mut self.topics,
            Watched::Group => &mut self.groups,
        }
    }
}

/// The ring buffers and the watched topics and groups.
pub struct History {
    interval: Duration,
    inner: Mutex<Inner>,
}

impl History {
    /// No series yet; samples come every `interval`.
    pub fn new(interval: Duration) -> Self {
        History {
            interval,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The time between two samples.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// How far back the series reach: [`HISTORY_POINTS`] intervals.
    pub fn window(&self) -> Duration {
        self.interval
            .saturating_mul(u32::try_from(HISTORY_POINTS).unwrap_or(u32::MAX))
    }

    /// Appends `point` to the series `key` (created with `label`), dropping its oldest point
    /// past [`HISTORY_POINTS`].
    pub fn record(&self, key: &str, label: &str, point: Point) {
        let mut inner = self.inner.lock();
        let series = inner
            .series
            .entry(key.to_owned())
            .or_insert_with(|| Series {
                label: label.to_owned(),
                points: VecDeque::with_capacity(HISTORY_POINTS),
            });
        if series.points.len() >= HISTORY_POINTS {
            series.points.pop_front();
        }
        series.points.push_back(point);
    }

    /// The series `keys` (those that exist), as `{"key", "label", "points": [[ms, v], ...]}`.
    pub fn get(&self, keys: &[String]) -> Vec<Value> {
        let inner = self.inner.lock();
        keys.iter()
            .filter_map(|key| {
                let s = inner.series.get(key)?;
                Some(json!({ "key": key, "label": s.label, "points": s.points }))
            })
            .collect()
    }

    /// The newest value of the series `key`, when it was sampled at most three intervals before
    /// `now_ms`.
    pub fn latest(&self, key: &str, now_ms: i64) -> Option<f64> {
        let fresh_ms = i64::try_from(self.interval.as_millis())
            .unwrap_or(i64::MAX)
            .saturating_mul(3);
        let inner = self.inner.lock();
        let point = inner.series.get(key)?.points.back()?;
        (now_ms.saturating_sub(point.0) <= fresh_ms).then_some(point.1)
    }

    /// The keys that start with `prefix` and end with `suffix`, sorted.
    pub fn keys_like(&self, prefix: &str, suffix: &str) -> Vec<String> {
        let inner = self.inner.lock();
        let mut keys: Vec<String> = inner
            .series
            .keys()
            .filter(|k| k.starts_with(prefix) && k.ends_with(suffix))
            .cloned()
            .collect();
        keys.sort();
        keys
    }

    /// Notes that someone looks at `name`; `true` when it was not watched before. When
    /// [`MAX_WATCHED`] are watched already, the one asked for least recently is dropped.
    pub fn watch(&self, kind: Watched, name: &str) -> bool {
        let mut inner = self.inner.lock();
        let map = inner.watch_map(kind);
        let new = map.insert(name.to_owned(), Instant::now()).is_none();
        if map.len() > MAX_WATCHED
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, seen)| **seen)
                .map(|(n, _)| n.clone())
        {
            map.remove(&oldest);
        }
        new
    }

    /// The watched names of `kind`; those no one asked for during a whole window are dropped.
    pub fn watched(&self, kind: Watched) -> Vec<String> {
        let window = self.window();
        let mut inner = self.inner.lock();
        let map = inner.watch_map(kind);
        map.retain(|_, seen| seen.elapsed() < window);
        let mut names: Vec<String> = map.keys().cloned().collect();
        names.sort();
        names
    }

    /// The rate of the counter `key` (`topic/<topic>`, `group/<group>`) read as `value` at
    /// `at_ms`: its change per second since the oldest reading within [`RATE_WINDOW`] (at least
    /// the previous one). `None` at the first reading, or when the counter went down (a topic
    /// created again, offsets reset), which starts the readings afresh.
    pub fn counter_rate(&self, key: &str, at_ms: i64, value: i64) -> Option<f64> {
        let window_ms = i64::try_from(RATE_WINDOW.as_millis()).unwrap_or(i64::MAX);
        let mut inner = self.inner.lock();
        let readings = inner.counters.entry(key.to_owned()).or_default();
        if readings.back().is_some_and(|&(_, last)| value < last) {
            readings.clear();
        }
        while readings.len() > 1
            && readings
                .get(1)
                .is_some_and(|&(t, _)| at_ms - t >= window_ms)
        {
            readings.pop_front();
        }
        let base = readings.front().copied();
        readings.push_back((at_ms, value));
        let (t0, v0) = base?;
        let secs = (at_ms - t0) as f64 / 1000.0;
        (secs > 0.0).then(|| (value - v0) as f64 / secs)
    }

    /// Drops the series whose newest point is older than the window, and the counters of topics
    /// and groups no longer watched.
    pub fn prune(&self, now_ms: i64) {
        let window_ms = i64::try_from(self.window().as_millis()).unwrap_or(i64::MAX);
        let mut inner = self.inner.lock();
        inner.series.retain(|_, s| {
            s.points
                .back()
                .is_some_and(|p| now_ms.saturating_sub(p.0) <= window_ms)
        });
        let Inner {
            topics,
            groups,
            counters,
            ..
        } = &mut *inner;
        counters.retain(|key, _| match key.split_once('/') {
            Some(("topic", t)) => topics.contains_key(t),
            Some(("group", g)) => groups.contains_key(g),
            _ => false,
        });
    }

    /// How many series exist.
    pub fn series_count(&self) -> usize {
        self.inner.lock().series.len()
    }
}

/// Whether the name servers answered the last time the console asked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthState {
    /// They answered the last request.
    pub ok: bool,
    /// Why the last request failed.
    pub error: Option<String>,
    /// When they last answered (ms since the epoch).
    pub last_ok_ms: Option<i64>,
    /// When they were last asked (ms since the epoch).
    pub checked_ms: Option<i64>,
}

/// The name servers' reachability, updated by every sampling round and status call.
#[derive(Default)]
pub struct Health {
    state: Mutex<HealthState>,
}

impl Health {
    /// They answered at `now_ms`.
    pub fn reached(&self, now_ms: i64) {
        let mut s = self.state.lock();
        s.ok = true;
        s.error = None;
        s.last_ok_ms = Some(now_ms);
        s.checked_ms = Some(now_ms);
    }

    /// They did not answer at `now_ms`, because of `error`.
    pub fn failed(&self, now_ms: i64, error: String) {
        let mut s = self.state.lock();
        s.ok = false;
        s.error = Some(error);
        s.checked_ms = Some(now_ms);
    }

    /// The last outcome.
    pub fn state(&self) -> HealthState {
        self.state.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_are_bounded_rings() {
        let h = History::new(Duration::from_secs(10));
        for i in 0..(HISTORY_POINTS as i64 + 5) {
            h.record("cluster/in", "in", Point(i * 10_000, i as f64));
        }
        let newest = (HISTORY_POINTS as i64 + 4) * 10_000;
        assert_eq!(h.latest("cluster/in", newest + 30_000), Some(364.0));
        assert_eq!(h.latest("cluster/in", newest + 30_001), None, "too old");
        assert_eq!(h.latest("missing", newest), None);
        let got = h.get(&["cluster/in".to_owned(), "missing".to_owned()]);
        assert_eq!(got.len(), 1);
        let points = got[0]["points"].as_array().expect("points");
        assert_eq!(points.len(), HISTORY_POINTS);
        assert_eq!(points[0][1], 5.0, "the oldest points were dropped");
        assert_eq!(got[0]["label"], "in");
        // Pruning drops series whose newest point left the window.
        let last = (HISTORY_POINTS as i64 + 4) * 10_000;
        h.prune(last + 3_600_000);
        assert_eq!(h.series_count(), 1, "exactly at the window's edge it stays");
        h.prune(last + 3_600_001);
        assert_eq!(h.series_count(), 0);
    }

    #[test]
    fn watches_are_bounded_and_rates_need_two_samples() {
        let h = History::new(Duration::from_secs(10));
        assert!(h.watch(Watched::Topic, "T0"));
        assert!(!h.watch(Watched::Topic, "T0"), "already watched");
        for i in 1..=MAX_WATCHED {
            h.watch(Watched::Topic, &format!("T{i}"));
        }
        let watched = h.watched(Watched::Topic);
        assert_eq!(watched.len(), MAX_WATCHED);
        assert!(!watched.contains(&"T0".to_owned()), "the oldest gave way");
        assert!(h.watched(Watched::Group).is_empty());
        assert_eq!(h.counter_rate("topic/T1", 1_000, 100), None);
        assert_eq!(h.counter_rate("topic/T1", 3_000, 150), Some(25.0));
        assert_eq!(
            h.counter_rate("topic/T1", 4_000, 10),
            None,
            "the counter went down"
        );
        assert_eq!(h.counter_rate("topic/T1", 5_000, 20), Some(10.0));
    }

    #[test]
    fn counter_rates_span_the_rate_window() {
        let h = History::new(Duration::from_secs(1));
        // Offsets committed in steps every 5 s: 0 at 0-4 s, 500 at 5-9 s, 1000 from 10 s.
        let step = |s: i64| (s / 5) * 500;
        let rates: Vec<Option<f64>> = (0..=20)
            .map(|s| h.counter_rate("group/g", s * 1000, step(s)))
            .collect();
        assert_eq!(rates[0], None);
        // From 10 s on, every rate spans 10 s: 1000 messages each, 100 per second.
        for (s, rate) in rates.iter().enumerate().skip(10) {
            assert_eq!(*rate, Some(100.0), "at {s} s");
        }
    }

    #[test]
    fn health_keeps_the_last_success_through_failures() {
        let health = Health::default();
        assert!(!health.state().ok);
        health.reached(1_000);
        health.failed(2_000, "connection refused".to_owned());
        let s = health.state();
        assert!(!s.ok);
        assert_eq!(s.last_ok_ms, Some(1_000));
        assert_eq!(s.checked_ms, Some(2_000));
        assert_eq!(s.error.as_deref(), Some("connection refused"));
        health.reached(3_000);
        assert_eq!(health.state().error, None);
    }
}
