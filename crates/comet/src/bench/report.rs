//! Counting, live progress and the final report of a bench run.
//!
//! Hot-path accounting is a few relaxed atomic adds ([`Counters`]); latencies go into HDR
//! histograms owned by each sender and merged at the end, so measuring does not serialise the
//! senders on a lock. A ticker task reads the counters every interval and shows the live rate:
//! an indicatif progress bar when stderr is a terminal, a plain line otherwise (CI logs, scripts).

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Smallest latency a histogram tracks, in nanoseconds.
pub const HISTOGRAM_LOWEST_NANOS: u64 = 1;
/// Largest latency a histogram tracks (one hour); larger values are clamped to it.
pub const HISTOGRAM_HIGHEST_NANOS: u64 = 3_600_000_000_000;
/// Significant decimal digits the histograms keep.
pub const HISTOGRAM_SIGFIG: u8 = 3;
/// Bytes in a megabyte for the MB/s figures (decimal, as throughput is usually quoted).
pub const BYTES_PER_MB: f64 = 1_000_000.0;

/// A new latency histogram with the bounds above.
pub fn new_histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(
        HISTOGRAM_LOWEST_NANOS,
        HISTOGRAM_HIGHEST_NANOS,
        HISTOGRAM_SIGFIG,
    )
    .context("creating a latency histogram")
}

/// `d` in nanoseconds (saturating at `u64::MAX`).
pub fn nanos_of(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Records `nanos`, clamped into the histogram's range (so recording never fails).
pub fn record_nanos(hist: &mut Histogram<u64>, nanos: u64) {
    let clamped = nanos.clamp(HISTOGRAM_LOWEST_NANOS, HISTOGRAM_HIGHEST_NANOS);
    hist.saturating_record(clamped);
}

/// Live counters of a run, shared by the senders or consumers and the ticker.
#[derive(Debug, Default)]
pub struct Counters {
    pub ok: AtomicU64,
    pub failed: AtomicU64,
    pub bytes: AtomicU64,
}

impl Counters {
    pub fn add_ok(&self, messages: u64, bytes: u64) {
        self.ok.fetch_add(messages, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn add_failed(&self, messages: u64) {
        self.failed.fetch_add(messages, Ordering::Relaxed);
    }

    pub fn ok(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// Percentiles of a latency histogram, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub min_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl LatencySummary {
    /// The summary of a histogram of nanosecond values; `None` when it is empty.
    pub fn of(hist: &Histogram<u64>) -> Option<Self> {
        if hist.is_empty() {
            return None;
        }
        let us = |nanos: u64| nanos as f64 / 1000.0;
        Some(LatencySummary {
            count: hist.len(),
            min_us: us(hist.min()),
            mean_us: hist.mean() / 1000.0,
            p50_us: us(hist.value_at_quantile(0.50)),
            p90_us: us(hist.value_at_quantile(0.90)),
            p99_us: us(hist.value_at_quantile(0.99)),
            p999_us: us(hist.value_at_quantile(0.999)),
            max_us: us(hist.max()),
        })
    }

    pub fn to_json(self) -> Value {
        json!({
            "count": self.count,
            "min_us": round2(self.min_us),
            "mean_us": round2(self.mean_us),
            "p50_us": round2(self.p50_us),
            "p90_us": round2(self.p90_us),
            "p99_us": round2(self.p99_us),
            "p99_9_us": round2(self.p999_us),
            "max_us": round2(self.max_us),
        })
    }

    /// One line: `p50 1.23 ms  p90 ...`.
    pub fn to_text(self) -> String {
        format!(
            "p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  (n={}, mean {})",
            fmt_us(self.p50_us),
            fmt_us(self.p90_us),
            fmt_us(self.p99_us),
            fmt_us(self.p999_us),
            fmt_us(self.max_us),
            self.count,
            fmt_us(self.mean_us)
        )
    }
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// A microsecond figure in the most readable unit.
pub fn fmt_us(us: f64) -> String {
    if us >= 1_000_000.0 {
        format!("{:.2} s", us / 1_000_000.0)
    } else if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

/// Messages (or bytes) per second over `elapsed`; 0 for an empty interval.
pub fn per_sec(amount: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        amount as f64 / secs
    } else {
        0.0
    }
}

/// The final figures of a run.
#[derive(Debug, Clone)]
pub struct Report {
    /// `produce`, `consume` or `e2e`.
    pub command: &'static str,
    /// Settings that shaped the run (mode, producers, size, ...), echoed in the output.
    pub settings: Value,
    pub elapsed: Duration,
    pub messages: u64,
    pub failed: u64,
    pub bytes: u64,
    /// Name of the latency measured (`send_rt`, `e2e`) and its summary.
    pub latency: Option<(&'static str, LatencySummary)>,
    /// Further figures (lost messages, first error, ...).
    pub extra: serde_json::Map<String, Value>,
}

impl Report {
    pub fn tps(&self) -> f64 {
        per_sec(self.messages, self.elapsed)
    }

    pub fn mb_per_sec(&self) -> f64 {
        per_sec(self.bytes, self.elapsed) / BYTES_PER_MB
    }

    pub fn to_json(&self) -> Value {
        let mut out = json!({
            "command": self.command,
            "settings": self.settings,
            "elapsed_secs": round2(self.elapsed.as_secs_f64()),
            "messages": self.messages,
            "failed": self.failed,
            "bytes": self.bytes,
            "tps": round2(self.tps()),
            "mb_per_sec": round2(self.mb_per_sec()),
        });
        if let Some(obj) = out.as_object_mut() {
            if let Some((name, summary)) = &self.latency {
                obj.insert((*name).to_owned(), summary.to_json());
            }
            for (k, v) in &self.extra {
                obj.insert(k.clone(), v.clone());
            }
        }
        out
    }

    pub fn to_text(&self) -> String {
        let mut text = format!(
            "{} {}\n  {} messages ({} failed) in {:.2} s: {:.0} msg/s, {:.2} MB/s\n",
            self.command,
            self.settings,
            self.messages,
            self.failed,
            self.elapsed.as_secs_f64(),
            self.tps(),
            self.mb_per_sec()
        );
        if let Some((name, summary)) = &self.latency {
            text.push_str(&format!("  {name}: {}\n", summary.to_text()));
        }
        for (k, v) in &self.extra {
            text.push_str(&format!("  {k}: {v}\n"));
        }
        text
    }

    /// Prints the report on stdout in the requested form.
    pub fn print(&self, json: bool) {
        if json {
            println!("{}", self.to_json());
        } else {
            print!("{}", self.to_text());
        }
    }
}

/// The ticker showing live progress; stop it with [`Progress::finish`].
pub struct Progress {
    task: JoinHandle<()>,
    bar: Option<ProgressBar>,
}

impl Progress {
    /// Starts showing `counters` every `interval`. `planned` is the run length, when known, for
    /// the bar's length (a count of messages or a duration).
    pub fn start(
        label: &'static str,
        counters: Arc<Counters>,
        interval: Duration,
        planned: Planned,
    ) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let (len, template) = match planned {
                Planned::Messages(n) => (
                    n,
                    "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} msgs {msg}",
                ),
                Planned::Duration(d) => (
                    d.as_secs().max(1),
                    "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} s {msg}",
                ),
            };
            let bar = ProgressBar::new(len);
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style);
            }
            bar.set_prefix(label);
            bar
        });
        let ticker_bar = bar.clone();
        let task = tokio::spawn(async move {
            let start = Instant::now();
            let mut ticker = tokio::time::interval_at(start + interval, interval);
            let (mut last_ok, mut last_bytes, mut last_at) = (0u64, 0u64, start);
            loop {
                ticker.tick().await;
                let now = Instant::now();
                let (ok, bytes, failed) = (counters.ok(), counters.bytes(), counters.failed());
                let window = now - last_at;
                let tps = per_sec(ok - last_ok.min(ok), window);
                let mbs = per_sec(bytes - last_bytes.min(bytes), window) / BYTES_PER_MB;
                (last_ok, last_bytes, last_at) = (ok, bytes, now);
                let line = format!("{tps:>9.0} msg/s {mbs:>8.2} MB/s  ok={ok} failed={failed}");
                match (&ticker_bar, planned) {
                    (Some(bar), Planned::Messages(_)) => {
                        bar.set_position(ok);
                        bar.set_message(line);
                    }
                    (Some(bar), Planned::Duration(_)) => {
                        bar.set_position((now - start).as_secs());
                        bar.set_message(line);
                    }
                    (None, _) => {
                        eprintln!("[{label} {:>6.1}s] {line}", (now - start).as_secs_f64());
                    }
                }
            }
        });
        Progress { task, bar }
    }

    /// Stops the ticker and clears the bar.
    pub fn finish(self) {
        self.task.abort();
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// How long a run is planned to be, for the progress bar.
#[derive(Debug, Clone, Copy)]
pub enum Planned {
    Messages(u64),
    Duration(Duration),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_reports_the_recorded_distribution() {
        let mut hist = new_histogram().expect("histogram");
        // 1..=1000 µs, one sample each.
        for us in 1..=1000u64 {
            record_nanos(&mut hist, us * 1000);
        }
        let s = LatencySummary::of(&hist).expect("non-empty");
        assert_eq!(s.count, 1000);
        // Three significant digits: quantiles within 0.1 % of the exact value.
        let close = |got: f64, want: f64| (got - want).abs() <= want * 0.001 + 1e-9;
        assert!(close(s.p50_us, 500.0), "{}", s.p50_us);
        assert!(close(s.p90_us, 900.0), "{}", s.p90_us);
        assert!(close(s.p99_us, 990.0), "{}", s.p99_us);
        assert!(close(s.p999_us, 999.0), "{}", s.p999_us);
        assert!(close(s.max_us, 1000.0), "{}", s.max_us);
        assert!(close(s.min_us, 1.0), "{}", s.min_us);
        assert!(LatencySummary::of(&new_histogram().expect("histogram")).is_none());
    }

    #[test]
    fn out_of_range_values_are_clamped_not_lost() {
        let mut hist = new_histogram().expect("histogram");
        record_nanos(&mut hist, 0);
        record_nanos(&mut hist, u64::MAX);
        assert_eq!(hist.len(), 2);
        assert!(hist.max() >= HISTOGRAM_HIGHEST_NANOS);
    }

    #[test]
    fn report_json_has_rates_and_latency() {
        let mut hist = new_histogram().expect("histogram");
        record_nanos(&mut hist, 2_000_000);
        let report = Report {
            command: "produce",
            settings: json!({"mode": "sync"}),
            elapsed: Duration::from_secs(2),
            messages: 1000,
            failed: 3,
            bytes: 2_000_000,
            latency: LatencySummary::of(&hist).map(|s| ("send_rt", s)),
            extra: serde_json::Map::new(),
        };
        let v = report.to_json();
        assert_eq!(v["tps"], json!(500.0));
        assert_eq!(v["mb_per_sec"], json!(1.0));
        assert_eq!(v["failed"], json!(3));
        assert_eq!(v["send_rt"]["count"], json!(1));
        assert!(report.to_text().contains("500 msg/s"));
    }

    #[test]
    fn units_are_readable() {
        assert_eq!(fmt_us(12.4), "12 µs");
        assert_eq!(fmt_us(1500.0), "1.50 ms");
        assert_eq!(fmt_us(2_500_000.0), "2.50 s");
        assert_eq!(per_sec(10, Duration::ZERO), 0.0);
    }
}
