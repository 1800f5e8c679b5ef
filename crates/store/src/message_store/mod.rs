//! The message store facade: what the broker talks to.
//!
//! [`MessageStore::open`] takes the `lock`, loads the CommitLog, ConsumeQueues and index,
//! recovers (abnormally if the `abort` file of a previous run survived), writes a new `abort`
//! file, and starts the background services: CommitLog flush (async or group commit), reput
//! (dispatch), ConsumeQueue/checkpoint flush and retention cleanup. [`MessageStore::shutdown`]
//! stops them in dependency order, flushes everything, writes the checkpoint and removes `abort`.
//!
//! Puts are `async`: the record is written under a short mutex on the caller's thread, and only
//! the wait for durability (SYNC_FLUSH) is awaited, so broker tasks never block on an msync.
//! Reads return zero-copy [`Bytes`](bytes::Bytes) slices of the mapped CommitLog.
//!
//! Layout: this module holds the store itself and its accessors; `lifecycle.rs` opening
//! (locking, loading, recovery, the background services) and shutting down; `put.rs` the put
//! path (sends); `get.rs` the pull path; `query.rs` lookups by offset, key and time, and the
//! statistics; `services.rs` retention, explicit flushes and page release.

mod get;
mod lifecycle;
mod put;
mod query;
mod replica;
mod services;

use std::fs::File;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use crate::checkpoint::Checkpoint;
use crate::commit_log::CommitLog;
use crate::config::MessageStoreConfig;
use crate::consume_queue::ConsumeQueueTable;
use crate::dispatch::{MessageArrivingListener, ReputService};
use crate::flush::{CommitLogFlusher, FlushConsumeQueueService};
use crate::index_service::IndexService;
use crate::live::{LiveSettings, LiveStoreSettings};
use crate::page_release::PageReleaseService;
use crate::recovery::RecoveryReport;
use crate::zero_ahead::ZeroAheadService;

pub use get::{
    GetMessageResult, GetMessageStatus, MAX_FILTER_MESSAGE_SIZE, MAX_PULL_MSG_SIZE,
    MIN_PULL_MSG_SIZE, MessageFilter,
};
pub use query::{QueryMessageResult, StoreStatsSnapshot};
use services::CleanupService;

/// Counters for runtime info.
#[derive(Debug, Default)]
pub struct StoreStats {
    put_message_times_total: AtomicU64,
    put_message_size_total: AtomicU64,
    put_message_failed_times: AtomicU64,
    put_message_flush_timeouts: AtomicU64,
    get_message_times_found: AtomicU64,
    get_message_times_miss: AtomicU64,
    get_message_transferred_msg_count: AtomicU64,
    /// Puts by how long they took, in [`PUT_TIME_BUCKETS_MS`] (not cumulative).
    put_time_buckets: [AtomicU64; PUT_TIME_BUCKETS_MS.len() + 1],
    put_time_max_ms: AtomicU64,
    get_time_max_ms: AtomicU64,
}

/// Upper bounds (inclusive, in whole milliseconds) of the put-time distribution RocketMQ's
/// runtime info reports (`putMessageDistributeTime`: `[<=0ms]`, `[0~10ms]`, ... `[5~10s]`; the
/// last bucket, `[10s~]`, is unbounded).
pub const PUT_TIME_BUCKETS_MS: [u64; 12] = [
    0, 10, 50, 100, 200, 500, 1_000, 2_000, 3_000, 4_000, 5_000, 10_000,
];

impl StoreStats {
    /// A put that took `took` from its call to its result.
    pub(crate) fn record_put_time(&self, took: std::time::Duration) {
        let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        let bucket = PUT_TIME_BUCKETS_MS
            .iter()
            .position(|b| ms <= *b)
            .unwrap_or(PUT_TIME_BUCKETS_MS.len());
        self.put_time_buckets[bucket].fetch_add(1, Ordering::Relaxed);
        // A read first: a new maximum is rare, and the read leaves the cache line shared.
        if ms > self.put_time_max_ms.load(Ordering::Relaxed) {
            self.put_time_max_ms.fetch_max(ms, Ordering::Relaxed);
        }
    }

    /// A read that took `took`.
    pub(crate) fn record_get_time(&self, took: std::time::Duration) {
        let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        if ms > self.get_time_max_ms.load(Ordering::Relaxed) {
            self.get_time_max_ms.fetch_max(ms, Ordering::Relaxed);
        }
    }
}

/// The store.
pub struct MessageStore {
    /// The configuration the store was opened with; the part that may change while it runs is
    /// read from `live` instead.
    config: MessageStoreConfig,
    /// The settings that change while the store runs (`live.rs`).
    live: Arc<LiveSettings>,
    commit_log: Arc<CommitLog>,
    queues: Arc<ConsumeQueueTable>,
    index: Option<Arc<RwLock<IndexService>>>,
    checkpoint: Arc<Checkpoint>,
    flusher: Arc<CommitLogFlusher>,
    reput: Arc<ReputService>,
    cq_flusher: Arc<FlushConsumeQueueService>,
    cleanup: Arc<CleanupService>,
    page_release: Arc<PageReleaseService>,
    /// The prepare-ahead thread (`zero_ahead.rs`), with `commitLogZeroAheadBytes` > 0 only.
    zero_ahead: Option<Arc<ZeroAheadService>>,
    recovery_report: RecoveryReport,
    running: AtomicBool,
    disk_full: Arc<AtomicBool>,
    stats: StoreStats,
    total_physical_memory: u64,
    shutdown_lock: Mutex<bool>,
    /// The flock on `lock`, released at shutdown so the directory can be reopened.
    lock_file: Mutex<Option<File>>,
}

impl std::fmt::Debug for MessageStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageStore")
            .field("root", &self.config.store_path_root_dir)
            .field("max_phy_offset", &self.max_phy_offset())
            .finish()
    }
}

impl MessageStore {
    /// The configuration the store was opened with. The fields of [`LiveStoreSettings`] may
    /// have changed since: read them with [`MessageStore::live_settings`].
    pub fn config(&self) -> &MessageStoreConfig {
        &self.config
    }

    /// The settings in force that may change while the store runs.
    pub fn live_settings(&self) -> Arc<LiveStoreSettings> {
        self.live.get().clone()
    }

    /// Puts `settings` in force: later puts, pulls and flushes use them, and the flush and
    /// retention threads are woken so a new period counts from now rather than after the old
    /// one ran out.
    pub fn set_live_settings(&self, settings: LiveStoreSettings) {
        self.commit_log
            .set_max_message_size(settings.max_message_size);
        let previous = self.live.set(settings);
        tracing::info!(?previous, now = ?self.live.get(), "store settings changed while running");
        self.flusher.wake();
        self.cq_flusher.wake();
        self.cleanup.wake();
    }

    /// What start-up recovery found.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery_report
    }

    /// The CommitLog (for the broker's transaction and HA services).
    pub fn commit_log(&self) -> &Arc<CommitLog> {
        &self.commit_log
    }

    /// The ConsumeQueues.
    pub fn consume_queues(&self) -> &Arc<ConsumeQueueTable> {
        &self.queues
    }

    pub fn checkpoint(&self) -> &Arc<Checkpoint> {
        &self.checkpoint
    }

    /// Registers (or clears) the listener woken for every dispatched consumable message.
    pub fn set_arriving_listener(&self, listener: Option<Arc<dyn MessageArrivingListener>>) {
        self.reput.set_listener(listener);
    }

    /// First CommitLog offset still stored.
    pub fn min_phy_offset(&self) -> i64 {
        self.commit_log.min_offset()
    }

    /// End of the CommitLog.
    pub fn max_phy_offset(&self) -> i64 {
        self.commit_log.max_offset()
    }

    /// Blocks until every record below `offset` is dispatched (ConsumeQueue, index, listener),
    /// or `timeout` passes. Under SYNC_FLUSH only flushed records are dispatched.
    pub fn wait_dispatched(&self, offset: i64, timeout: Duration) -> bool {
        self.reput.wait_dispatched(offset, timeout)
    }

    /// Next CommitLog offset to be dispatched.
    pub fn dispatched_offset(&self) -> i64 {
        self.reput.reput_from_offset()
    }

    /// Whether the store accepts puts.
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }
}
