//! The newest CommitLog segment prepared ahead of its appends: zeroed under SYNC_FLUSH,
//! allocated under ASYNC_FLUSH.
//!
//! Why: CommitLog segments are sparse files (creating one costs nothing, so a broker starts in
//! milliseconds), and a block is allocated when the first page that lands in it is written
//! back. On this project's box (ext4 without a journal) that costs each flush mode something
//! different:
//!
//! - **SYNC_FLUSH**: the group commit's msync also writes the allocation's metadata and waits for
//!   it, one more round trip to the disk per group commit. A C probe, 8.5 KiB appended and msynced
//!   5,000 times: 88–94 µs per msync into a sparse file, 52–55 µs into one written before, 114 µs
//!   into one `fallocate`d (unwritten extents are converted at writeback, which is metadata again).
//!   32 synchronous senders (8 s runs, four alternating pairs) into a segment zeroed beforehand:
//!   55–57 k msg/s against 46–50 k. So SYNC_FLUSH writes zeros ahead.
//! - **ASYNC_FLUSH**: nobody waits for the timed flush, but the flush's writeback allocates the
//!   blocks of everything appended since the last one while holding the file's block-map lock, and
//!   an append (`pwrite`) into a page the file never had takes that lock for its delayed
//!   allocation: the send path stopped for 1–35 ms at a time behind the flush (32 synchronous
//!   senders on this box: 9–16 such stalls per 6 s, 76–127 ms in all; with blocks allocated ahead,
//!   none over 4 ms). Zeros would write every byte twice; allocating (`fallocate`) writes nothing
//!   and is enough, since an append into allocated blocks finds its mapping without the lock. So
//!   ASYNC_FLUSH allocates ahead.
//!
//! How: a thread keeps the bytes after the append position of the newest segment prepared up to
//! `commitLogZeroAheadBytes` ahead ([`MappedFile::zero_ahead`]: chunks of 128 KiB under the
//! segment's write lock, then writeback started without waiting; [`MappedFile::allocate_ahead`]:
//! `fallocate` in 1 MiB steps, no lock). It is woken once the appends came [`ZERO_AHEAD_STEP`]
//! closer: after a group commit under SYNC_FLUSH, after a commit of appends under ASYNC_FLUSH.
//! On a filesystem without `fallocate` ASYNC_FLUSH segments stay sparse (logged once).
//! RocketMQ's counterpart is `warmMapedFileEnable` (off by default), which writes a whole
//! segment when it is created; ahead of the appends, Comet's first segment needs no wait.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::commit_log::CommitLog;
use crate::config::FlushDiskType;
use crate::error::StoreError;
use crate::mapped_file::OS_PAGE_SIZE;
use crate::service::{ServiceState, Waker};

// The setting's default is kept with the other defaults in `config.rs`; it is also named here,
// beside what the setting does.
pub use crate::config::DEFAULT_COMMIT_LOG_ZERO_AHEAD_BYTES;

/// Appended bytes between two rounds: under SYNC_FLUSH each round's writeback is about that
/// large, and the msyncs queued behind it wait for it (4 MiB rounds, 8 s of 32 synchronous
/// senders: send p99 2.9–4.2 ms against 1.8–2.5 ms without zeros ahead).
pub const ZERO_AHEAD_STEP: usize = 1024 * 1024;
/// How long the thread sleeps when nobody wakes it (a safety net, not the mechanism).
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// How the range after the appends is prepared (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AheadMethod {
    /// Zeros written and their writeback started (SYNC_FLUSH).
    Zeros,
    /// Blocks allocated, nothing written (ASYNC_FLUSH).
    Allocate,
}

impl AheadMethod {
    pub fn for_flush(mode: FlushDiskType) -> Self {
        match mode {
            FlushDiskType::SyncFlush => AheadMethod::Zeros,
            FlushDiskType::AsyncFlush => AheadMethod::Allocate,
        }
    }
}

/// The prepare-ahead thread (see the module docs).
pub struct ZeroAheadService {
    commit_log: Arc<CommitLog>,
    ahead: usize,
    method: AheadMethod,
    /// Set once the filesystem refused to allocate ahead: the thread then does nothing.
    unsupported: AtomicBool,
    waker: Waker,
    state: ServiceState,
}

impl std::fmt::Debug for ZeroAheadService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZeroAheadService")
            .field("ahead", &self.ahead)
            .field("method", &self.method)
            .finish()
    }
}

impl ZeroAheadService {
    /// `ahead`: bytes to keep prepared after the append position (positive).
    pub fn new(commit_log: Arc<CommitLog>, ahead: usize, method: AheadMethod) -> Arc<Self> {
        assert!(ahead > 0, "a zero-ahead service needs a distance");
        Arc::new(Self {
            commit_log,
            ahead,
            method,
            unsupported: AtomicBool::new(false),
            waker: Waker::new(),
            state: ServiceState::default(),
        })
    }

    pub fn start(self: &Arc<Self>) -> Result<(), StoreError> {
        let me = Arc::clone(self);
        self.state.spawn("comet-commitlog-zero", move || me.run())
    }

    /// Wakes the thread once the appends came [`ZERO_AHEAD_STEP`] closer to the end of the
    /// prepared range of the newest segment (a read lock and two atomic loads otherwise: it is
    /// called per flush, or per commit of appends).
    pub fn wake_if_needed(&self) {
        if self.unsupported.load(Ordering::Relaxed) {
            return;
        }
        let Some(file) = self.commit_log.mapped_file_queue().last_file() else {
            return;
        };
        let step = ZERO_AHEAD_STEP.min(self.ahead / 2);
        let wanted = (file.appended_position() + self.ahead - step).min(file.file_size());
        if file.prepared_to() < wanted {
            self.waker.wake();
        }
    }

    fn run(&self) {
        while !self.state.is_stopped() {
            self.waker.wait(IDLE_WAIT);
            if self.state.is_stopped() {
                break;
            }
            if let Err(e) = self.prepare_once() {
                tracing::warn!(error = %e, "preparing the commit log ahead of its appends failed");
            }
        }
    }

    /// Prepares the newest segment up to the distance after its append position; returns the
    /// bytes zeroed or allocated.
    pub fn prepare_once(&self) -> Result<usize, StoreError> {
        if self.unsupported.load(Ordering::Relaxed) {
            return Ok(0);
        }
        let Some(file) = self.commit_log.mapped_file_queue().last_file() else {
            return Ok(0);
        };
        let to = file
            .appended_position()
            .next_multiple_of(OS_PAGE_SIZE)
            .saturating_add(self.ahead);
        match self.method {
            AheadMethod::Zeros => file.zero_ahead(to),
            AheadMethod::Allocate => match file.allocate_ahead(to)? {
                Some(n) => Ok(n),
                None => {
                    self.unsupported.store(true, Ordering::Relaxed);
                    tracing::info!(
                        path = %file.path().display(),
                        "the filesystem cannot allocate blocks ahead (no fallocate); \
                         commit log segments stay sparse until written back"
                    );
                    Ok(0)
                }
            },
        }
    }

    pub fn shutdown(&self) {
        self.state.stop(&self.waker);
    }
}
