//! Pacing and counting shared by concurrent senders.
//!
//! A fixed-rate run must not let one slow sender lower the rate of the others, nor let senders
//! burst to catch up after a stall beyond what the schedule allows, so the senders share one
//! schedule: message `k` of the run is due at `start + k / rate`. Each sender claims the next slots
//! with one atomic add and sleeps until the first one is due. A `--count` limit is a shared quota
//! claimed the same way, so exactly `count` messages are sent however many senders there are.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// Highest rate accepted; beyond it the slot spacing would round to zero nanoseconds.
pub const MAX_RATE_PER_SEC: f64 = 1e9;

/// A shared fixed-rate schedule.
#[derive(Debug)]
pub struct Pacer {
    start: Instant,
    nanos_per_msg: f64,
    next_slot: AtomicU64,
}

impl Pacer {
    /// A schedule of `rate` messages per second starting now. `None` for a non-positive or
    /// absurd rate.
    pub fn new(rate: f64) -> Option<Self> {
        if !rate.is_finite() || rate <= 0.0 || rate > MAX_RATE_PER_SEC {
            return None;
        }
        Some(Pacer {
            start: Instant::now(),
            nanos_per_msg: 1e9 / rate,
            next_slot: AtomicU64::new(0),
        })
    }

    /// Offset from the start at which slot `k` is due.
    pub fn offset_of(&self, slot: u64) -> Duration {
        // f64 holds slot counts exactly up to 2^53, far beyond any run.
        Duration::from_nanos((slot as f64 * self.nanos_per_msg) as u64)
    }

    /// Claims `n` consecutive slots and returns when the first one is due.
    pub fn claim(&self, n: u64) -> Instant {
        let slot = self.next_slot.fetch_add(n, Ordering::Relaxed);
        self.start + self.offset_of(slot)
    }
}

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
    fn slots_are_evenly_spaced_and_claimed_in_order() {
        let pacer = Pacer::new(1000.0).expect("valid rate");
        assert_eq!(pacer.offset_of(0), Duration::ZERO);
        assert_eq!(pacer.offset_of(1), Duration::from_millis(1));
        assert_eq!(pacer.offset_of(2500), Duration::from_millis(2500));
        let first = pacer.claim(1);
        let second = pacer.claim(32);
        let third = pacer.claim(1);
        assert_eq!(second - first, Duration::from_millis(1));
        assert_eq!(third - second, Duration::from_millis(32));
    }

    #[test]
    fn absurd_rates_are_refused() {
        for rate in [0.0, -5.0, f64::NAN, f64::INFINITY, 2e9] {
            assert!(Pacer::new(rate).is_none(), "{rate}");
        }
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
