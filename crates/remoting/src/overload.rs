//! Overload reporting: counters of every time the transport refused or deferred work, and
//! rate-limited warnings naming the peer and the reason.
//!
//! An operator who sees clients getting SYSTEM_BUSY must find the cause in the broker log, but a
//! flood of refused requests must not turn into a flood of log lines (which would cost more than
//! the requests). So every event is *counted* — [`TransportStats`] is what tests and metrics
//! read — and *logged* at most once per [`OVERLOAD_LOG_INTERVAL`] per reason, each line carrying
//! how many events it stands for.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::limits::OVERLOAD_LOG_INTERVAL;

/// Why the transport refused or deferred work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverloadReason {
    /// A processor's `reject()` (flow control) made the transport answer SYSTEM_BUSY.
    ProcessorBusy,
    /// A call to the peer was refused because the connection's unsent bytes are over the
    /// write-buffer high-water mark (the peer does not read fast enough).
    WriteBufferFull,
    /// A server connection stopped reading requests until its unsent responses drain.
    ReadsPaused,
}

impl OverloadReason {
    const ALL: [OverloadReason; 3] = [
        OverloadReason::ProcessorBusy,
        OverloadReason::WriteBufferFull,
        OverloadReason::ReadsPaused,
    ];

    fn index(self) -> usize {
        match self {
            OverloadReason::ProcessorBusy => 0,
            OverloadReason::WriteBufferFull => 1,
            OverloadReason::ReadsPaused => 2,
        }
    }

    /// The log text of this reason.
    pub fn describe(self) -> &'static str {
        match self {
            OverloadReason::ProcessorBusy => {
                "request refused with SYSTEM_BUSY: the processor is in flow control"
            }
            OverloadReason::WriteBufferFull => {
                "call refused: the peer's write buffer is over the high-water mark (it does not read)"
            }
            OverloadReason::ReadsPaused => {
                "reading paused: the peer's unsent responses are over the write-buffer high-water mark"
            }
        }
    }
}

/// Counters of one endpoint (a server or a client), shared by all its connections.
#[derive(Debug, Default)]
pub struct TransportStats {
    counts: [AtomicU64; 3],
}

impl TransportStats {
    /// Events of `reason` since the endpoint started.
    pub fn count(&self, reason: OverloadReason) -> u64 {
        self.counts
            .get(reason.index())
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Requests answered SYSTEM_BUSY because a processor was in flow control.
    pub fn system_busy_answers(&self) -> u64 {
        self.count(OverloadReason::ProcessorBusy)
    }

    /// Calls to a peer refused because its connection's write buffer was full.
    pub fn write_buffer_refusals(&self) -> u64 {
        self.count(OverloadReason::WriteBufferFull)
    }

    /// Times a connection stopped reading because its unsent responses were over the bound.
    pub fn read_pauses(&self) -> u64 {
        self.count(OverloadReason::ReadsPaused)
    }

    fn add(&self, reason: OverloadReason) {
        if let Some(c) = self.counts.get(reason.index()) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Lets one event through per interval and counts the ones it holds back.
#[derive(Debug)]
pub(crate) struct LogLimiter {
    interval: Duration,
    state: Mutex<LimiterState>,
}

#[derive(Debug, Default)]
struct LimiterState {
    last: Option<Instant>,
    suppressed: u64,
}

impl LogLimiter {
    pub(crate) fn new(interval: Duration) -> Self {
        Self {
            interval,
            state: Mutex::new(LimiterState::default()),
        }
    }

    /// `Some(suppressed)` when an event at `now` may be logged — `suppressed` being the events
    /// held back since the last logged one — and `None` when it must be held back.
    pub(crate) fn admit(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock();
        let due = state
            .last
            .is_none_or(|last| now.saturating_duration_since(last) >= self.interval);
        if due {
            state.last = Some(now);
            Some(std::mem::take(&mut state.suppressed))
        } else {
            state.suppressed += 1;
            None
        }
    }
}

/// Counts overload events and logs them, rate-limited. One per endpoint.
#[derive(Debug)]
pub(crate) struct OverloadMonitor {
    stats: std::sync::Arc<TransportStats>,
    limiters: [LogLimiter; 3],
}

impl Default for OverloadMonitor {
    fn default() -> Self {
        Self {
            stats: std::sync::Arc::default(),
            limiters: OverloadReason::ALL.map(|_| LogLimiter::new(OVERLOAD_LOG_INTERVAL)),
        }
    }
}

impl OverloadMonitor {
    pub(crate) fn stats(&self) -> std::sync::Arc<TransportStats> {
        std::sync::Arc::clone(&self.stats)
    }

    /// Counts one event and logs a warning naming `peer` and the reason unless one was logged
    /// less than [`OVERLOAD_LOG_INTERVAL`] ago.
    pub(crate) fn report(&self, reason: OverloadReason, peer: SocketAddr, detail: &str) {
        self.stats.add(reason);
        let Some(limiter) = self.limiters.get(reason.index()) else {
            return;
        };
        if let Some(suppressed) = limiter.admit(Instant::now()) {
            tracing::warn!(
                peer = %peer,
                reason = reason.describe(),
                detail,
                similar_events_not_logged = suppressed,
                "transport overload"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limiter_admits_one_event_per_interval_and_counts_the_rest() {
        let limiter = LogLimiter::new(Duration::from_secs(5));
        let t0 = Instant::now();
        assert_eq!(limiter.admit(t0), Some(0));
        for ms in [1, 100, 4_999] {
            assert_eq!(limiter.admit(t0 + Duration::from_millis(ms)), None);
        }
        assert_eq!(limiter.admit(t0 + Duration::from_secs(5)), Some(3));
        assert_eq!(limiter.admit(t0 + Duration::from_secs(6)), None);
        assert_eq!(limiter.admit(t0 + Duration::from_secs(11)), Some(1));
    }

    #[test]
    fn every_report_is_counted_even_when_not_logged() {
        let monitor = OverloadMonitor::default();
        let peer: SocketAddr = ([127, 0, 0, 1], 1).into();
        for _ in 0..10 {
            monitor.report(OverloadReason::ProcessorBusy, peer, "test");
        }
        monitor.report(OverloadReason::WriteBufferFull, peer, "test");
        let stats = monitor.stats();
        assert_eq!(stats.system_busy_answers(), 10);
        assert_eq!(stats.write_buffer_refusals(), 1);
        assert_eq!(stats.read_pauses(), 0);
    }
}
