//! Wall-clock milliseconds behind a trait, shared by the name server, the broker and the client.
//!
//! Expiry logic (broker liveness, client channels, queue locks) reads "now" through [`Clock`] so
//! that tests move time with [`ManualClock`] instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// A source of milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    fn now_millis(&self) -> i64;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> i64 {
        comet_protocol::time::now_millis()
    }
}

/// A clock that only moves when told to (tests).
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicI64,
}

impl ManualClock {
    pub fn new(start_millis: i64) -> Self {
        Self {
            now: AtomicI64::new(start_millis),
        }
    }

    pub fn advance(&self, millis: i64) {
        self.now.fetch_add(millis, Ordering::SeqCst);
    }

    pub fn set(&self, millis: i64) {
        self.now.store(millis, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> i64 {
        self.now.load(Ordering::SeqCst)
    }
}

/// The system clock, shared.
pub fn system_clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(1_000);
        assert_eq!(c.now_millis(), 1_000);
        c.advance(500);
        assert_eq!(c.now_millis(), 1_500);
        c.set(7);
        assert_eq!(c.now_millis(), 7);
        assert!(SystemClock.now_millis() > 1_600_000_000_000);
    }
}
