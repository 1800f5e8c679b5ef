//! Pacing and counting shared by concurrent senders.
//!
//! A fixed-rate run must not let one slow sender lower the rate of the others, nor let senders
//! burst to catch up after a stall beyond what the schedule allows, so the senders share one
//! schedule: message `k` of the run is due at `start + k / rate`. A `--count` limit is a shared
//! quota taken atomically, so exactly `count` messages are sent however many senders there are.
//!
//! The schedule is released by a timer thread of its own ([`Pacer`]), not by the senders sleeping
//! on tokio's timer: that timer has a 1 ms resolution, so at 10,000 msg/s it woke ten senders at
//! once every millisecond, and the ten messages then queued behind each other through producer,
//! broker and consumer. At 10,000 msg/s from 32 senders to a push consumer, that burst, not the
//! broker, set half of the median send-to-consume latency (p50 0.18 ms at 1,000 msg/s, 0.40 ms
//! at 10,000). The thread sleeps until each slot is due (with a
//! 1 µs timer slack) and hands it out as a permit, so a sender wakes when its message is due.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

/// Highest rate accepted; beyond it the slot spacing would round to zero nanoseconds.
pub const MAX_RATE_PER_SEC: f64 = 1e9;
/// Longest the pacer thread sleeps before it looks again whether its schedule was closed.
const PACER_MAX_SLEEP: Duration = Duration::from_millis(10);
/// Timer slack of the pacer thread (Linux's default is 50 µs, half a slot at 10,000 msg/s).
#[cfg(target_os = "linux")]
const PACER_TIMER_SLACK_NANOS: libc::c_ulong = 1_000;

/// Nanoseconds between two slots of `rate` messages per second; `None` for a non-positive or
/// absurd rate.
pub fn slot_spacing_nanos(rate: f64) -> Option<f64> {
    if !rate.is_finite() || rate <= 0.0 || rate > MAX_RATE_PER_SEC {
        return None;
    }
    Some(1e9 / rate)
}

/// Offset from the start at which slot `k` is due.
fn offset_of(slot: u64, spacing_nanos: f64) -> Duration {
    // f64 holds slot counts exactly up to 2^53, far beyond any run.
    Duration::from_nanos((slot as f64 * spacing_nanos) as u64)
}

/// Slots due `elapsed` after the start (slot 0 is due at once).
fn slots_due(elapsed: Duration, spacing_nanos: f64) -> u64 {
    (elapsed.as_nanos() as f64 / spacing_nanos) as u64 + 1
}

/// A shared fixed-rate schedule, released slot by slot by a timer thread. Closing the
/// semaphore (at the deadline, or when the pacer is dropped) ends the schedule for both sides.
#[derive(Debug)]
pub struct Pacer {
    permits: Arc<Semaphore>,
    thread: Option<JoinHandle<()>>,
}

impl Pacer {
    /// Starts releasing `rate` messages per second now, until `deadline` (then every waiting
    /// sender is told the schedule is over). `None` for a bad rate or when no thread can start.
    pub fn start(rate: f64, deadline: Option<Instant>) -> Option<Self> {
        let spacing = slot_spacing_nanos(rate)?;
        let permits = Arc::new(Semaphore::new(0));
        let thread = {
            let permits = Arc::clone(&permits);
            std::thread::Builder::new()
                .name("comet-bench-pacer".to_owned())
                .spawn(move || release_slots(spacing, deadline, &permits))
                .ok()?
        };
        Some(Pacer {
            permits,
            thread: Some(thread),
        })
    }

    /// Waits for the next `n` slots; `false` once the schedule is over.
    pub async fn acquire(&self, n: u64) -> bool {
        let Ok(n) = u32::try_from(n) else {
            return false;
        };
        match self.permits.acquire_many(n).await {
            Ok(permit) => {
                permit.forget();
                true
            }
            Err(_) => false,
        }
    }
}

impl Drop for Pacer {
    fn drop(&mut self) {
        self.permits.close();
        if let Some(thread) = self.thread.take() {
            // The thread sleeps parked: woken, it sees the close at once, so this join (often
            // on an async task) waits microseconds, not up to PACER_MAX_SLEEP.
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

/// The pacer thread: releases every slot once it is due, until the deadline or until the
/// semaphore is closed.
fn release_slots(spacing: f64, deadline: Option<Instant>, permits: &Semaphore) {
    set_fine_timer_slack();
    let start = Instant::now();
    let mut given = 0u64;
    while !permits.is_closed() {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        let due = slots_due(now - start, spacing);
        if due > given {
            // Slots not taken accumulate (senders that fell behind catch up, as the schedule
            // allows), within the semaphore's bound.
            let room = Semaphore::MAX_PERMITS.saturating_sub(permits.available_permits());
            let n = usize::try_from(due - given).unwrap_or(usize::MAX).min(room);
            permits.add_permits(n);
            given += n as u64;
        }
        let next = start + offset_of(given, spacing);
        let wait = next
            .saturating_duration_since(Instant::now())
            .min(PACER_MAX_SLEEP);
        if !wait.is_zero() {
            // Parked rather than asleep, so that dropping the pacer wakes it (a spurious wake-up
            // only makes it look again).
            std::thread::park_timeout(wait);
        }
    }
    permits.close();
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn set_fine_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and only affects the calling thread.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, PACER_TIMER_SLACK_NANOS, 0, 0, 0) };
    if rc != 0 {
        tracing::debug!("cannot lower the pacer thread's timer slack");
    }
}

#[cfg(not(target_os = "linux"))]
fn set_fine_timer_slack() {}

/// A shared message quota (`--count`); unlimited when built with `None`.
#[derive(Debug)]
pub struct Quota {
    remaining: Option<AtomicU64>,
}

impl Quota {
    pub fn new(limit: Option<u64>) -> Self {
        Quota {
            remaining: limit.map(AtomicU64::new),
        }
    }

    /// Takes up to `want` messages from the quota; returns how many were granted (0 once spent).
    pub fn take(&self, want: u64) -> u64 {
        let Some(remaining) = &self.remaining else {
            return want;
        };
        let mut current = remaining.load(Ordering::Relaxed);
        loop {
            let granted = current.min(want);
            if granted == 0 {
                return 0;
            }
            match remaining.compare_exchange_weak(
                current,
                current - granted,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return granted,
                Err(actual) => current = actual,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_evenly_spaced() {
        let spacing = slot_spacing_nanos(1000.0).expect("valid rate");
        assert_eq!(offset_of(0, spacing), Duration::ZERO);
        assert_eq!(offset_of(1, spacing), Duration::from_millis(1));
        assert_eq!(offset_of(2500, spacing), Duration::from_millis(2500));
        assert_eq!(slots_due(Duration::ZERO, spacing), 1);
        assert_eq!(slots_due(Duration::from_micros(999), spacing), 1);
        assert_eq!(slots_due(Duration::from_millis(1), spacing), 2);
        assert_eq!(slots_due(Duration::from_millis(2500), spacing), 2501);
    }

    #[test]
    fn absurd_rates_are_refused() {
        for rate in [0.0, -5.0, f64::NAN, f64::INFINITY, 2e9] {
            assert!(slot_spacing_nanos(rate).is_none(), "{rate}");
            assert!(Pacer::start(rate, None).is_none(), "{rate}");
        }
    }

    #[tokio::test]
    async fn the_schedule_ends_at_the_deadline_and_never_runs_ahead() {
        let rate = 20_000.0;
        let started = Instant::now();
        let deadline = started + Duration::from_millis(50);
        let pacer = Pacer::start(rate, Some(deadline)).expect("pacer");
        let mut taken = 0u64;
        while pacer.acquire(1).await {
            taken += 1;
            // A slot is never handed out before it is due.
            let due = offset_of(taken - 1, 1e9 / rate);
            assert!(started.elapsed() >= due, "slot {taken} early");
        }
        assert!(Instant::now() >= deadline);
        assert!(taken >= 1, "slot 0 is due at once");
        assert!(taken <= slots_due(Duration::from_millis(50), 1e9 / rate));
    }

    #[tokio::test]
    async fn a_closed_schedule_wakes_its_waiters() {
        let pacer = Arc::new(Pacer::start(0.001, None).expect("pacer"));
        assert!(pacer.acquire(1).await, "slot 0 is due at once");
        let waiter = {
            let pacer = Arc::clone(&pacer);
            tokio::spawn(async move { pacer.acquire(1).await })
        };
        // The next slot is 1000 s away: only the close can end the wait.
        pacer.permits.close();
        assert!(!waiter.await.expect("waiter"));
    }

    #[test]
    fn quota_grants_exactly_the_limit_across_threads() {
        let quota = std::sync::Arc::new(Quota::new(Some(10_007)));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let q = std::sync::Arc::clone(&quota);
                std::thread::spawn(move || {
                    let mut got = 0;
                    loop {
                        let n = q.take(32);
                        if n == 0 {
                            return got;
                        }
                        got += n;
                    }
                })
            })
            .collect();
        let total: u64 = handles.into_iter().map(|h| h.join().expect("thread")).sum();
        assert_eq!(total, 10_007);
        assert_eq!(quota.take(1), 0);
        assert_eq!(Quota::new(None).take(5), 5);
    }
}
