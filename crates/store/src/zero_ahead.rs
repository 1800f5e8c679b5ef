//! Zeros written ahead of the CommitLog's appends, under SYNC_FLUSH.
//!
//! Why: CommitLog segments are sparse files (creating one costs nothing, so a broker starts in
//! milliseconds), and a block is allocated when the first page that lands in it is written
//! back. Under SYNC_FLUSH that is the group commit's msync: on this project's box (ext4 without
//! a journal) each msync into fresh pages also writes the allocation's metadata and waits for
//! it, one more round trip to the disk per group commit. A C probe, 8.5 KiB appended and
//! msynced 5,000 times: 88–94 µs per msync into a sparse file, 52–55 µs into one written
//! before, 114 µs into one `fallocate`d (unwritten extents are converted at writeback, which is
//! metadata again). A W2 run (8 s, four alternating pairs) into a segment zeroed beforehand:
//! 55–57 k msg/s against 46–50 k.
//!
//! How: a thread keeps the bytes after the append position of the newest segment zeroed up to
//! `commitLogZeroAheadBytes` ahead ([`MappedFile::zero_ahead`]: chunks of 128 KiB under the
//! segment's write lock, then writeback started without waiting), so the blocks are allocated
//! before records reach them and the allocation's metadata goes out with one msync per chunk
//! instead of every msync. The flush thread wakes it after a group commit once the appends came
//! [`ZERO_AHEAD_STEP`] closer. It costs one extra write of each byte of the log (zeros, then the
//! record), which is why only SYNC_FLUSH uses it: under ASYNC_FLUSH nobody waits for an msync.
//! RocketMQ's counterpart is `warmMapedFileEnable` (off by default), which writes a whole
//! segment when it is created; ahead of the appends, Comet's first segment needs no wait.

use std::sync::Arc;
use std::time::Duration;

use crate::commit_log::CommitLog;
use crate::error::StoreError;
use crate::flush::{ServiceState, Waker};
use crate::mapped_file::OS_PAGE_SIZE;

/// Default of `commitLogZeroAheadBytes`: bytes kept zeroed after the append position.
pub const DEFAULT_COMMIT_LOG_ZERO_AHEAD_BYTES: u64 = 8 * 1024 * 1024;
/// Appended bytes between two zeroing rounds: each round's writeback is about that large, and
/// the msyncs queued behind it wait for it (4 MiB rounds, 8 s W2: send p99 2.9–4.2 ms against
/// 1.8–2.5 ms without zeros ahead).
pub const ZERO_AHEAD_STEP: usize = 1024 * 1024;
/// How long the thread sleeps when nobody wakes it (a safety net, not the mechanism).
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// The zero-ahead thread (see the module docs).
pub struct ZeroAheadService {
    commit_log: Arc<CommitLog>,
    ahead: usize,
    waker: Waker,
    state: ServiceState,
}

impl std::fmt::Debug for ZeroAheadService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZeroAheadService")
            .field("ahead", &self.ahead)
            .finish()
    }
}

impl ZeroAheadService {
    /// `ahead`: bytes to keep zeroed after the append position (positive).
    pub fn new(commit_log: Arc<CommitLog>, ahead: usize) -> Arc<Self> {
        assert!(ahead > 0, "a zero-ahead service needs a distance");
        Arc::new(Self {
            commit_log,
            ahead,
            waker: Waker::new(),
            state: ServiceState::default(),
        })
    }

    pub fn start(self: &Arc<Self>) -> Result<(), StoreError> {
        let me = Arc::clone(self);
        self.state.spawn("comet-commitlog-zero", move || me.run())
    }

    /// Wakes the thread once the appends came [`ZERO_AHEAD_STEP`] closer to the end of the
    /// zeros of the newest segment (two atomic loads otherwise: the flush thread calls it per
    /// flush).
    pub fn wake_if_needed(&self) {
        let Some(file) = self.commit_log.mapped_file_queue().last_file() else {
            return;
        };
        let step = ZERO_AHEAD_STEP.min(self.ahead / 2);
        let wanted = (file.appended_position() + self.ahead - step).min(file.file_size());
        if file.zeroed_to() < wanted {
            self.waker.wake();
        }
    }

    fn run(&self) {
        while !self.state.is_stopped() {
            self.waker.wait(IDLE_WAIT);
            if self.state.is_stopped() {
                break;
            }
            if let Err(e) = self.zero_once() {
                tracing::warn!(error = %e, "writing zeros ahead of the commit log failed");
            }
        }
    }

    /// Zeroes the newest segment up to the distance after its append position; returns the
    /// bytes written.
    pub fn zero_once(&self) -> Result<usize, StoreError> {
        let Some(file) = self.commit_log.mapped_file_queue().last_file() else {
            return Ok(0);
        };
        let to = file
            .appended_position()
            .next_multiple_of(OS_PAGE_SIZE)
            .saturating_add(self.ahead);
        file.zero_ahead(to)
    }

    pub fn shutdown(&self) {
        self.state.stop(&self.waker);
    }
}
