//! The count of bytes read through the store's mappings that paces the page release thread
//! (see `page_release.rs` for why pages are released and what a release covers).
//!
//! The CommitLog holds the count and adds to it on every read through a mapping; the release
//! thread waits on it and takes each due round. It is a module of its own because both sides use
//! it: the CommitLog stays below the release service, which walks the CommitLog.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::service::Waker;

/// Counts the bytes read from mapped store files and wakes the release thread every
/// `threshold` of them. Lives in the CommitLog, which every such read goes through.
#[derive(Debug, Default)]
pub struct PageReleaseTrigger {
    read_bytes: AtomicU64,
    threshold: u64,
    waker: Waker,
}

impl PageReleaseTrigger {
    /// A trigger that fires every `threshold` bytes; 0 never fires.
    pub fn new(threshold: u64) -> Self {
        Self {
            read_bytes: AtomicU64::new(0),
            threshold,
            waker: Waker::new(),
        }
    }

    /// Records `bytes` read through the mapping; wakes the release thread on crossing the
    /// threshold (one atomic add otherwise).
    pub fn note(&self, bytes: u64) {
        if self.threshold == 0 || bytes == 0 {
            return;
        }
        let before = self.read_bytes.fetch_add(bytes, Ordering::Relaxed);
        if before < self.threshold && before.saturating_add(bytes) >= self.threshold {
            self.waker.wake();
        }
    }

    /// Whether pages are released at all (`mappedPagesReleaseBytes` > 0).
    pub fn is_enabled(&self) -> bool {
        self.threshold > 0
    }

    /// The bytes read between two releases (`mappedPagesReleaseBytes`).
    pub fn threshold(&self) -> u64 {
        self.threshold
    }

    /// What the release thread waits on.
    pub(crate) fn waker(&self) -> &Waker {
        &self.waker
    }

    /// Whether a release is due; resets the count if so.
    pub(crate) fn take_due(&self) -> bool {
        if !self.is_enabled() || self.read_bytes.load(Ordering::Relaxed) < self.threshold {
            return false;
        }
        self.read_bytes.store(0, Ordering::Relaxed);
        true
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_trigger_fires_once_per_threshold_and_never_when_off() {
        let trigger = PageReleaseTrigger::new(100);
        trigger.note(60);
        assert!(!trigger.take_due());
        trigger.note(60);
        assert!(trigger.take_due());
        assert!(!trigger.take_due(), "taking resets the count");
        assert!(
            trigger.waker.wait(Duration::ZERO),
            "crossing woke the thread"
        );
        trigger.note(99);
        assert!(
            !trigger.waker.wait(Duration::ZERO),
            "no wake below the threshold"
        );

        let off = PageReleaseTrigger::new(0);
        off.note(u64::MAX);
        assert!(!off.take_due());
        assert!(!off.waker.wait(Duration::ZERO));
    }
}
