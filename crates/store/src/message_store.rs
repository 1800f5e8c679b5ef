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
//! Reads return zero-copy [`Bytes`] slices of the mapped CommitLog.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use comet_protocol::message::properties::keys;
use comet_protocol::message::{MessageExt, record};
use parking_lot::{Mutex, RwLock};

use crate::checkpoint::Checkpoint;
use crate::cleanup::{self, DiskPressure, DiskThresholds};
use crate::commit_log::{Commit, CommitLog, MessageExtBatch, PutMessageResult, PutMessageStatus};
use crate::config::{FlushDiskType, MessageStoreConfig};
use crate::consume_queue::{CQ_STORE_UNIT_SIZE, ConsumeQueueTable, CqUnit};
use crate::dispatch::{Dispatcher, MessageArrivingListener, ReputService};
use crate::error::StoreError;
use crate::flush::{
    CommitLogFlusher, DispatchProgress, FlushConsumeQueueService, ServiceState, Waker,
};
use crate::index_service::{IndexConfig, IndexService};
use crate::mapped_file::MappedFile;
use crate::page_release::{PageReleaseService, ReleasedPages};
use crate::recovery::{RecoveryContext, RecoveryReport, recover};
use crate::zero_ahead::{AheadMethod, ZeroAheadService};

/// Minimum ConsumeQueue span (bytes) a filtered pull scans (`maxFilterMessageSize`, §12).
pub const MAX_FILTER_MESSAGE_SIZE: usize = 16_000;
/// Upper bound on the bytes one `get_message` returns (RocketMQ `MAX_PULL_MSG_SIZE`, 128 MiB).
pub const MAX_PULL_MSG_SIZE: usize = 128 * 1024 * 1024;
/// Lower bound applied to the caller's byte budget (RocketMQ uses `max(maxTotalMsgSize, 100)`).
pub const MIN_PULL_MSG_SIZE: usize = 100;
/// Fewest ConsumeQueue units read per chunk by `get_message`.
const MIN_READ_CHUNK_UNITS: usize = 32;
/// Most ConsumeQueue units read per chunk by `get_message`, whatever `maxMsgNums` a peer sends:
/// the chunk is allocated up front, and a pull never returns more than the transfer-count limits
/// anyway (further chunks are read only when the filter skips units).
const MAX_READ_CHUNK_UNITS: usize = 1024;

/// Outcome of [`MessageStore::get_message`] (RocketMQ `GetMessageStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GetMessageStatus {
    /// Messages returned; `next_begin_offset` is the offset after the last unit examined.
    Found,
    /// Units examined but none matched the filter; `next_begin_offset` is after the last unit
    /// examined, so the next pull continues past them.
    NoMatchedMessage,
    /// The units point at CommitLog data already deleted by retention; `next_begin_offset` is
    /// after the last unit examined.
    MessageWasRemoving,
    /// The ConsumeQueue file holding the offset is gone; `next_begin_offset` is the first
    /// offset of the next ConsumeQueue file.
    OffsetFoundNull,
    /// `offset > max`; `next_begin_offset` is `max`.
    OffsetOverflowBadly,
    /// `offset == max` (nothing new yet, a long-poll candidate); `next_begin_offset` is `offset`.
    OffsetOverflowOne,
    /// `offset < min` (retention removed it); `next_begin_offset` is `min`.
    OffsetTooSmall,
    /// The queue cannot exist (invalid topic directory name or queue id); `next_begin_offset` 0.
    NoMatchedLogicQueue,
    /// The queue has no message (`max == 0`, including a queue never written); `next_begin_offset` 0.
    NoMessageInQueue,
}

/// Result of [`MessageStore::get_message`].
#[derive(Debug, Clone)]
pub struct GetMessageResult {
    pub status: GetMessageStatus,
    /// Whole records, zero-copy slices of the mapped CommitLog, in queue order.
    pub messages: Vec<Bytes>,
    /// The same records as `messages`, adjacent ones joined into one slice: what a pull
    /// response sends. A batch is stored contiguously, so a pull of it is one buffer the socket
    /// writer hands to the kernel as it is, instead of 32 records of 1 KiB each below its
    /// copy threshold (a tenth of the broker's instructions serving a catching-up consumer).
    pub transfer: Vec<Bytes>,
    /// Queue offset of each returned record.
    pub queue_offsets: Vec<i64>,
    pub next_begin_offset: i64,
    pub min_offset: i64,
    pub max_offset: i64,
    /// The reader is further behind than `access_message_in_memory_max_ratio` of RAM.
    pub suggest_pulling_from_slave: bool,
    pub buffer_total_size: usize,
    pub msg_count: usize,
}

impl GetMessageResult {
    fn new(status: GetMessageStatus, next_begin_offset: i64, min: i64, max: i64) -> Self {
        Self {
            status,
            messages: Vec::new(),
            transfer: Vec::new(),
            queue_offsets: Vec::new(),
            next_begin_offset,
            min_offset: min,
            max_offset: max,
            suggest_pulling_from_slave: false,
            buffer_total_size: 0,
            msg_count: 0,
        }
    }
}

/// The records one `get_message` read, as runs of adjacent records of one mapped file: each run
/// becomes one [`Bytes`] (one allocation) that the records are sliced from.
struct RecordRuns {
    runs: Vec<Run>,
    /// Position in its file, size and queue offset of each record, in queue order.
    records: Vec<(usize, usize, i64)>,
}

/// `[start, end)` of `file`, holding `records` records.
struct Run {
    file: Arc<MappedFile>,
    start: usize,
    end: usize,
    records: usize,
}

impl RecordRuns {
    fn with_capacity(records: usize) -> Self {
        RecordRuns {
            runs: Vec::new(),
            records: Vec::with_capacity(records),
        }
    }

    /// Adds the record of `size` bytes at `pos` of `file`, joining the last run if it ends there.
    fn push(&mut self, file: Arc<MappedFile>, pos: usize, size: usize, queue_offset: i64) {
        self.records.push((pos, size, queue_offset));
        if let Some(run) = self.runs.last_mut()
            && run.end == pos
            && Arc::ptr_eq(&run.file, &file)
        {
            run.end += size;
            run.records += 1;
            return;
        }
        self.runs.push(Run {
            file,
            start: pos,
            end: pos + size,
            records: 1,
        });
    }

    /// Fills `result`'s records, their queue offsets and the transfer buffers.
    fn finish(self, result: &mut GetMessageResult) {
        result.messages.reserve(self.records.len());
        result.queue_offsets.reserve(self.records.len());
        let mut records = self.records.into_iter();
        for run in self.runs {
            let joined = run.file.slice(run.start, run.end - run.start);
            for (pos, size, queue_offset) in records.by_ref().take(run.records) {
                // Every record was published when it was located, and a file's wrote
                // position never moves back, so the run's slice cannot fail; if it did, its
                // records would be left out, counts included, rather than sent torn.
                let Some(joined) = &joined else {
                    result.msg_count -= 1;
                    result.buffer_total_size -= size;
                    continue;
                };
                result
                    .messages
                    .push(joined.slice(pos - run.start..pos - run.start + size));
                result.queue_offsets.push(queue_offset);
            }
            match joined {
                Some(joined) => result.transfer.push(joined),
                None => tracing::error!(
                    file = %run.file.path().display(),
                    start = run.start,
                    end = run.end,
                    "published records could not be sliced; left out of the pull"
                ),
            }
        }
        if result.msg_count == 0 && result.status == GetMessageStatus::Found {
            result.status = GetMessageStatus::MessageWasRemoving;
        }
    }
}

/// Server-side filtering of a pull (tags code first, then the full record).
pub trait MessageFilter: Send + Sync {
    /// Decides from the ConsumeQueue unit's tags code alone.
    fn is_matched_by_consume_queue(&self, tags_code: i64) -> bool;
    /// Decides from the whole stored record (§5.1), for property-based filters.
    fn is_matched_by_commit_log(&self, record: &[u8]) -> bool;
}

/// Result of [`MessageStore::query_message`].
#[derive(Debug, Clone, Default)]
pub struct QueryMessageResult {
    /// Whole records, newest first.
    pub messages: Vec<Bytes>,
    /// CommitLog offset of each record.
    pub commit_log_offsets: Vec<i64>,
    /// `endPhyOffset` of the index when queried.
    pub index_last_update_phy_offset: i64,
    /// Latest index timestamp known durable.
    pub index_last_update_timestamp: i64,
    pub buffer_total_size: usize,
}

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
}

/// A point-in-time copy of [`StoreStats`] plus store positions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStatsSnapshot {
    pub put_message_times_total: u64,
    pub put_message_size_total: u64,
    pub put_message_failed_times: u64,
    pub put_message_flush_timeouts: u64,
    pub get_message_times_found: u64,
    pub get_message_times_miss: u64,
    pub get_message_transferred_msg_count: u64,
    pub dispatched_records: u64,
    pub commit_log_min_offset: i64,
    pub commit_log_max_offset: i64,
    pub commit_log_flushed_offset: i64,
    pub dispatch_behind_bytes: i64,
}

/// Retention thread: deletes old CommitLog segments, then the ConsumeQueue and index files
/// that pointed only into them, and watches disk usage.
struct CleanupService {
    config: MessageStoreConfig,
    commit_log: Arc<CommitLog>,
    queues: Arc<ConsumeQueueTable>,
    index: Option<Arc<RwLock<IndexService>>>,
    disk_full: Arc<AtomicBool>,
    manual_delete: AtomicBool,
    last_min_phy: AtomicI64,
    waker: Waker,
    state: ServiceState,
}

impl CleanupService {
    fn thresholds(&self) -> DiskThresholds {
        let mut t = DiskThresholds::from_max_used_percent(self.config.disk_max_used_space_ratio);
        t.clean_forcibly_ratio = f64::from(self.config.disk_space_clean_forcibly_ratio) / 100.0;
        t.warning_ratio = f64::from(self.config.disk_space_warning_level_ratio) / 100.0;
        t
    }

    fn run_once(&self) -> Result<usize, StoreError> {
        let dir = self.commit_log.dir();
        let ratio = cleanup::disk_usage(dir).ok().and_then(|u| u.used_ratio());
        let pressure = cleanup::assess_disk(ratio, &self.thresholds());
        let manual = self.manual_delete.swap(false, Ordering::AcqRel);
        let decision = cleanup::decide(
            &self.config.delete_when,
            cleanup::local_hour_now(),
            pressure,
            manual,
            true,
        );
        let was_full = self.disk_full.swap(decision.disk_full, Ordering::AcqRel);
        if decision.disk_full && !was_full {
            tracing::error!(path = %dir.display(), ?ratio,
                "disk usage above diskSpaceWarningLevelRatio: refusing writes (SERVICE_NOT_AVAILABLE) until space is reclaimed");
        } else if !decision.disk_full && was_full {
            tracing::info!(path = %dir.display(), ?ratio, "disk usage back below the warning level: writes accepted again");
        }
        if pressure != DiskPressure::Normal {
            tracing::warn!(path = %dir.display(), ?ratio, ?pressure, "commit log disk is filling up");
        }
        let mut deleted = 0;
        if decision.delete {
            let reserved =
                Duration::from_secs(self.config.file_reserved_time_hours.saturating_mul(3600));
            deleted = self.commit_log.mapped_file_queue().delete_expired_by_time(
                reserved,
                self.config.delete_commit_log_files_interval,
                decision.clean_immediately,
                self.config.delete_files_batch_max,
            )?;
        }
        self.clean_logics()?;
        Ok(deleted)
    }

    /// Deletes ConsumeQueue/index files wholly before the CommitLog start and corrects the
    /// queues' min offsets (only when the CommitLog start moved).
    fn clean_logics(&self) -> Result<(), StoreError> {
        let min_phy = self.commit_log.min_offset();
        if self.last_min_phy.swap(min_phy, Ordering::AcqRel) == min_phy {
            return Ok(());
        }
        self.queues.delete_expired(min_phy)?;
        if let Some(index) = &self.index {
            index.write().delete_expired(min_phy)?;
        }
        Ok(())
    }
}

/// The store.
pub struct MessageStore {
    config: MessageStoreConfig,
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

/// Takes an exclusive `flock` on the store's `lock` file.
fn acquire_lock(path: &Path) -> Result<File, StoreError> {
    use std::os::fd::AsRawFd;
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| StoreError::io(path, e))?;
    // SAFETY: plain syscall on a descriptor we own.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.kind() == std::io::ErrorKind::WouldBlock {
            return Err(StoreError::Locked(path.to_path_buf()));
        }
        return Err(StoreError::io(path, err));
    }
    file.set_len(0).map_err(|e| StoreError::io(path, e))?;
    file.write_all(b"lock")
        .map_err(|e| StoreError::io(path, e))?;
    Ok(file)
}

/// Writes the `abort` marker (containing our pid) durably.
fn create_abort_file(path: &Path) -> Result<(), StoreError> {
    let mut file = File::create(path).map_err(|e| StoreError::io(path, e))?;
    file.write_all(std::process::id().to_string().as_bytes())
        .map_err(|e| StoreError::io(path, e))?;
    file.sync_all().map_err(|e| StoreError::io(path, e))
}

fn total_physical_memory() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let (pages, page_size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    match (u64::try_from(pages), u64::try_from(page_size)) {
        (Ok(p), Ok(s)) => p.saturating_mul(s),
        _ => u64::MAX,
    }
}

/// Whether the WAIT property asks for durability (missing means true).
fn wait_store_msg_ok(props: &comet_protocol::message::Properties) -> bool {
    props.get(keys::WAIT_STORE_MSG_OK) != Some("false")
}

impl MessageStore {
    /// Opens (creating if needed) the store described by `config`, recovers it and starts its
    /// services.
    pub fn open(config: MessageStoreConfig) -> Result<Arc<Self>, StoreError> {
        config.validate()?;
        let root = config.store_path_root_dir.clone();
        std::fs::create_dir_all(&root).map_err(|e| StoreError::io(&root, e))?;
        let lock_file = acquire_lock(&config.lock_path())?;
        let abnormal = config.abort_path().exists();
        if abnormal {
            tracing::warn!(root = %root.display(), "abort file found: the last run did not shut down cleanly");
        }
        let checkpoint = Arc::new(Checkpoint::open(&config.checkpoint_path())?);
        let commit_log = Arc::new(CommitLog::new(&config));
        commit_log.load()?;
        let queues = Arc::new(ConsumeQueueTable::load(
            &root,
            config.consume_queue_entries_per_file,
        )?);
        let index = if config.message_index_enable {
            Some(Arc::new(RwLock::new(IndexService::open(
                &root,
                IndexConfig {
                    max_hash_slot_num: config.max_hash_slot_num,
                    max_index_num: config.max_index_num,
                },
            )?)))
        } else {
            None
        };
        let delay_levels = config.delay_levels_millis()?;
        let recovery_dispatcher =
            Dispatcher::new(Arc::clone(&queues), index.clone(), delay_levels.clone());
        let report = recover(
            &RecoveryContext {
                commit_log: &commit_log,
                queues: &queues,
                index: index.as_deref(),
                dispatcher: &recovery_dispatcher,
                checkpoint: &checkpoint,
                check_crc: config.check_crc_on_recover,
                message_index_safe: config.message_index_safe,
            },
            abnormal,
        )?;
        create_abort_file(&config.abort_path())?;

        let reput = ReputService::new(
            Arc::clone(&commit_log),
            Dispatcher::new(Arc::clone(&queues), index.clone(), delay_levels),
            config.flush_disk_type,
            Arc::new(Waker::new()),
            report.max_phy_offset,
        );
        // Under SYNC_FLUSH records become dispatchable when flushed: the flush thread dispatches
        // them itself once it has answered the flush's waiters (see `dispatch.rs`).
        let flushed_reput = Arc::clone(&reput);
        let zero_ahead = (config.commit_log_zero_ahead_bytes > 0).then(|| {
            let ahead = usize::try_from(config.commit_log_zero_ahead_bytes)
                .unwrap_or(usize::MAX)
                .min(config.mapped_file_size_commit_log);
            ZeroAheadService::new(
                Arc::clone(&commit_log),
                ahead,
                AheadMethod::for_flush(config.flush_disk_type),
            )
        });
        let flushed_zero_ahead = zero_ahead.clone();
        let flusher = CommitLogFlusher::new(
            &config,
            Arc::clone(&commit_log),
            Arc::clone(&checkpoint),
            Arc::new(move || {
                flushed_reput.dispatch_now();
                if let Some(zero_ahead) = &flushed_zero_ahead {
                    zero_ahead.wake_if_needed();
                }
            }),
        );
        let progress: Arc<dyn DispatchProgress> = reput.clone();
        let cq_flusher = FlushConsumeQueueService::new(
            &config,
            Arc::clone(&queues),
            index.clone(),
            Arc::clone(&checkpoint),
            progress,
        );
        let disk_full = Arc::new(AtomicBool::new(false));
        let cleanup = Arc::new(CleanupService {
            config: config.clone(),
            commit_log: Arc::clone(&commit_log),
            queues: Arc::clone(&queues),
            index: index.clone(),
            disk_full: Arc::clone(&disk_full),
            manual_delete: AtomicBool::new(false),
            last_min_phy: AtomicI64::new(commit_log.min_offset()),
            waker: Waker::new(),
            state: ServiceState::default(),
        });

        let dispatch_position = Arc::clone(&reput);
        let page_release = PageReleaseService::new(
            Arc::clone(&commit_log),
            Arc::clone(&queues),
            index.clone(),
            move || dispatch_position.reput_from_offset(),
            Arc::clone(&checkpoint),
            config.commit_log_page_cache_bytes,
            config.message_index_safe,
        );

        let store = Arc::new(Self {
            config,
            commit_log,
            queues,
            index,
            checkpoint,
            flusher,
            reput,
            cq_flusher,
            cleanup,
            page_release,
            zero_ahead,
            recovery_report: report,
            running: AtomicBool::new(true),
            disk_full,
            stats: StoreStats::default(),
            total_physical_memory: total_physical_memory(),
            shutdown_lock: Mutex::new(false),
            lock_file: Mutex::new(Some(lock_file)),
        });
        store.start_services()?;
        Ok(store)
    }

    fn start_services(&self) -> Result<(), StoreError> {
        self.flusher.start()?;
        self.reput.start()?;
        self.cq_flusher.start()?;
        self.page_release.start()?;
        if let Some(zero_ahead) = &self.zero_ahead {
            zero_ahead.start()?;
        }
        let cleanup = Arc::clone(&self.cleanup);
        let interval = self.config.clean_resource_interval;
        self.cleanup.state.spawn("comet-cleanup", move || {
            while !cleanup.state.is_stopped() {
                cleanup.waker.wait(interval);
                if cleanup.state.is_stopped() {
                    break;
                }
                if let Err(e) = cleanup.run_once() {
                    tracing::error!(error = %e, "cleanup round failed");
                }
            }
        })
    }

    pub fn config(&self) -> &MessageStoreConfig {
        &self.config
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

    fn check_store_status(&self) -> Result<(), PutMessageStatus> {
        if !self.running.load(Ordering::Acquire) {
            tracing::warn!("message store is shut down; put refused");
            return Err(PutMessageStatus::ServiceNotAvailable);
        }
        if self.disk_full.load(Ordering::Acquire) {
            tracing::warn!("commit log disk is full; put refused");
            return Err(PutMessageStatus::ServiceNotAvailable);
        }
        Ok(())
    }

    /// Stores one message (see [`CommitLog::put_message`] for what the caller fills in).
    ///
    /// Under SYNC_FLUSH with `WAIT` not `false`, resolves once the record is durable, or with
    /// FLUSH_DISK_TIMEOUT after `sync_flush_timeout` (the timeout needs a Tokio runtime; outside
    /// one the put waits for the flush thread's answer).
    pub async fn put_message(&self, msg: MessageExt) -> PutMessageResult {
        self.put_message_with(msg, Commit::Now).await
    }

    /// [`MessageStore::put_message`] whose record may be left pending ([`Commit::Deferred`]):
    /// it is neither readable nor dispatched until [`MessageStore::commit_pending`] (or the flush
    /// thread, at its next round) writes it. The broker answers sends this way and commits
    /// before their responses leave (`comet_remoting::ResponseFence`). Under SYNC_FLUSH a
    /// deferred put that asks to wait returns at once with [`PutMessageResult::flush_until`]:
    /// the caller answers only once [`MessageStore::flushed_watch`] reaches it, or after
    /// [`MessageStore::sync_flush_timeout`] with FLUSH_DISK_TIMEOUT (reporting it through
    /// [`MessageStore::note_flush_timeout`]).
    pub async fn put_message_with(&self, msg: MessageExt, commit: Commit) -> PutMessageResult {
        if let Err(status) = self.check_store_status() {
            return self.failed(status);
        }
        let wait = wait_store_msg_ok(&msg.properties);
        match self.commit_log.put_message_with(msg, commit) {
            Ok(append) => self.after_append(append, wait, commit).await,
            Err(status) => self.failed(status),
        }
    }

    /// Stores a batch as consecutive records (one segment, consecutive queue offsets).
    pub async fn put_messages(&self, batch: MessageExtBatch) -> PutMessageResult {
        self.put_messages_with(batch, Commit::Now).await
    }

    /// [`MessageStore::put_messages`], committed now or left pending (see
    /// [`MessageStore::put_message_with`]).
    pub async fn put_messages_with(
        &self,
        batch: MessageExtBatch,
        commit: Commit,
    ) -> PutMessageResult {
        if let Err(status) = self.check_store_status() {
            return self.failed(status);
        }
        let wait = batch
            .messages
            .first()
            .is_none_or(|m| wait_store_msg_ok(&m.properties));
        match self.commit_log.put_messages_with(batch, commit) {
            Ok(append) => self.after_append(append, wait, commit).await,
            Err(status) => self.failed(status),
        }
    }

    /// Writes the records deferred puts left pending and, under ASYNC_FLUSH, dispatches them
    /// (under SYNC_FLUSH the flush after this does: the flush thread is woken for it).
    /// On return every put made before the call is readable, unless the write failed (then the
    /// records stay pending and the next commit retries them).
    pub fn commit_pending(&self) -> Result<(), StoreError> {
        if self.write_pending()? {
            self.flush_pending();
        }
        Ok(())
    }

    /// [`MessageStore::commit_pending`] without the SYNC_FLUSH wake-up: the caller calls
    /// [`MessageStore::flush_pending`] next. Returns whether it wrote anything.
    pub fn write_pending(&self) -> Result<bool, StoreError> {
        let wrote = self.commit_log.commit()?;
        if wrote && self.flusher.mode() == FlushDiskType::AsyncFlush {
            self.reput.dispatch_now();
            self.flusher.wake_if_needed();
            self.prepare_ahead_if_needed();
        }
        Ok(wrote)
    }

    /// SYNC_FLUSH: sees that what is written gets flushed (and then dispatched): wakes the flush
    /// thread, which runs the next group commit (under load it is polling for it, so this costs
    /// a flag). Nothing to do under ASYNC_FLUSH or when everything is flushed.
    pub fn flush_pending(&self) {
        if self.flusher.mode() != FlushDiskType::SyncFlush
            || self.commit_log.flushed_where() >= self.commit_log.max_offset()
        {
            return;
        }
        // The flush thread leaves pending records to their writers, so it learns of written
        // ones here.
        self.flusher.wake();
    }

    /// Under ASYNC_FLUSH the appends, not the flush, tell the prepare-ahead thread they came
    /// closer (the timed flush runs every 500 ms, tens of MiB apart at full rate).
    fn prepare_ahead_if_needed(&self) {
        if let Some(zero_ahead) = &self.zero_ahead {
            zero_ahead.wake_if_needed();
        }
    }

    fn failed(&self, status: PutMessageStatus) -> PutMessageResult {
        self.stats
            .put_message_failed_times
            .fetch_add(1, Ordering::Relaxed);
        PutMessageResult::failed(status)
    }

    async fn after_append(
        &self,
        append: crate::commit_log::AppendMessageResult,
        wait: bool,
        commit: Commit,
    ) -> PutMessageResult {
        self.stats
            .put_message_times_total
            .fetch_add(append.msg_num as u64, Ordering::Relaxed);
        self.stats
            .put_message_size_total
            .fetch_add(append.wrote_bytes as u64, Ordering::Relaxed);
        let mut status = PutMessageStatus::PutOk;
        match self.flusher.mode() {
            // A deferred record is dispatched by whoever commits it.
            FlushDiskType::AsyncFlush if commit == Commit::Deferred => {}
            FlushDiskType::AsyncFlush => {
                self.reput.dispatch_now();
                self.flusher.wake_if_needed();
                self.prepare_ahead_if_needed();
            }
            FlushDiskType::SyncFlush if wait => {
                let end =
                    append.wrote_offset + i64::try_from(append.wrote_bytes).unwrap_or(i64::MAX);
                if commit == Commit::Deferred {
                    // The caller holds its answer; whoever writes the record sees it flushed
                    // (`flush_pending` after `write_pending`, or `commit_pending`).
                    return PutMessageResult {
                        status,
                        append: Some(append),
                        flush_until: Some(end),
                    };
                }
                let rx = self.flusher.request(end);
                let durable = if tokio::runtime::Handle::try_current().is_ok() {
                    matches!(
                        tokio::time::timeout(self.config.sync_flush_timeout, rx).await,
                        Ok(Ok(true))
                    )
                } else {
                    // Outside a Tokio runtime there is no timer: wait for the flush thread, which
                    // always answers (on success, failure or shutdown).
                    matches!(rx.await, Ok(true))
                };
                if !durable {
                    self.note_flush_timeout(end);
                    status = PutMessageStatus::FlushDiskTimeout;
                }
            }
            FlushDiskType::SyncFlush => self.flusher.wake(),
        }
        PutMessageResult {
            status,
            append: Some(append),
            flush_until: None,
        }
    }

    /// The CommitLog's flushed offset, published by the flush thread after each flush: what the
    /// answers of deferred SYNC_FLUSH puts wait for ([`PutMessageResult::flush_until`]).
    pub fn flushed_watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.flusher.flushed_watch()
    }

    /// How long a SYNC_FLUSH put waits for its flush before it answers FLUSH_DISK_TIMEOUT.
    pub fn sync_flush_timeout(&self) -> std::time::Duration {
        self.config.sync_flush_timeout
    }

    /// Counts and logs a SYNC_FLUSH put whose flush to `until` did not complete in time (the
    /// record is still stored).
    pub fn note_flush_timeout(&self, until: i64) {
        tracing::warn!(until, "sync flush did not complete in time");
        self.stats
            .put_message_flush_timeouts
            .fetch_add(1, Ordering::Relaxed);
    }

    fn is_in_memory(&self, offset_py: i64, max_offset_py: i64) -> bool {
        let memory = self.total_physical_memory as f64
            * (f64::from(self.config.access_message_in_memory_max_ratio) / 100.0);
        ((max_offset_py - offset_py) as f64) <= memory
    }

    /// RocketMQ's `isTheBatchFull`: whether adding a record of `size` would exceed a limit.
    fn is_the_batch_full(
        &self,
        size: usize,
        max_msg_nums: usize,
        max_pull_size: usize,
        buffer_total: usize,
        message_total: usize,
        in_memory: bool,
    ) -> bool {
        if buffer_total == 0 || message_total == 0 {
            return false;
        }
        if message_total + 1 > max_msg_nums || buffer_total + size > max_pull_size {
            return true;
        }
        let (max_bytes, max_count) = if in_memory {
            (
                self.config.max_transfer_bytes_on_message_in_memory,
                self.config.max_transfer_count_on_message_in_memory,
            )
        } else {
            (
                self.config.max_transfer_bytes_on_message_in_disk,
                self.config.max_transfer_count_on_message_in_disk,
            )
        };
        buffer_total + size > max_bytes || message_total >= max_count
    }

    /// Pulls up to `max_msg_nums` messages / `max_total_bytes` bytes of (topic, queue id) from
    /// queue offset `offset`, following RocketMQ's `DefaultMessageStore.getMessage`:
    ///
    /// - no such queue → `NoMatchedLogicQueue` (invalid name/id) or `NoMessageInQueue`
    ///   (`next_begin_offset` 0);
    /// - `max == 0` → `NoMessageInQueue`, next 0; `offset < min` → `OffsetTooSmall`, next `min`;
    ///   `offset == max` → `OffsetOverflowOne`, next `offset`; `offset > max` →
    ///   `OffsetOverflowBadly`, next `max`;
    /// - otherwise units are scanned from `offset` (at most
    ///   `max(16000 bytes, max_msg_nums × 20)` of ConsumeQueue): each unit examined moves
    ///   `next_begin_offset` past it; filtered-out units give `NoMatchedMessage`, units whose
    ///   CommitLog segment was deleted give `MessageWasRemoving` (and skip to the next segment),
    ///   a missing ConsumeQueue file gives `OffsetFoundNull` with next = the next file's first
    ///   offset; any record returned makes it `Found`.
    // The parameters mirror RocketMQ's `getMessage` one for one (the broker maps them from the
    // pull request header); a wrapper struct would only rename them.
    #[allow(clippy::too_many_arguments)]
    pub fn get_message(
        &self,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msg_nums: usize,
        max_total_bytes: usize,
        filter: Option<&dyn MessageFilter>,
    ) -> GetMessageResult {
        let result = self.get_message_inner(
            topic,
            queue_id,
            offset,
            max_msg_nums,
            max_total_bytes,
            filter,
        );
        if result.status == GetMessageStatus::Found {
            self.stats
                .get_message_times_found
                .fetch_add(1, Ordering::Relaxed);
            self.stats
                .get_message_transferred_msg_count
                .fetch_add(result.msg_count as u64, Ordering::Relaxed);
        } else {
            self.stats
                .get_message_times_miss
                .fetch_add(1, Ordering::Relaxed);
        }
        tracing::trace!(group, topic, queue_id, offset, status = ?result.status, "get_message");
        result
    }

    fn get_message_inner(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msg_nums: usize,
        max_total_bytes: usize,
        filter: Option<&dyn MessageFilter>,
    ) -> GetMessageResult {
        let Some(queue) = self.queues.find(topic, queue_id) else {
            let valid = queue_id >= 0
                && !topic.is_empty()
                && topic != "."
                && topic != ".."
                && !topic.contains(['/', '\\', '\0']);
            let status = if valid {
                GetMessageStatus::NoMessageInQueue
            } else {
                GetMessageStatus::NoMatchedLogicQueue
            };
            return GetMessageResult::new(status, 0, 0, 0);
        };
        let max_offset_py = self.commit_log.max_offset();
        let cq = queue.read();
        let min = cq.min_offset();
        let max = cq.max_offset();
        if max == 0 {
            return GetMessageResult::new(GetMessageStatus::NoMessageInQueue, 0, min, max);
        }
        if offset < min {
            return GetMessageResult::new(GetMessageStatus::OffsetTooSmall, min, min, max);
        }
        if offset == max {
            return GetMessageResult::new(GetMessageStatus::OffsetOverflowOne, offset, min, max);
        }
        if offset > max {
            return GetMessageResult::new(GetMessageStatus::OffsetOverflowBadly, max, min, max);
        }

        let max_msg_nums = max_msg_nums.max(1);
        let max_filter_size =
            MAX_FILTER_MESSAGE_SIZE.max(max_msg_nums.saturating_mul(CQ_STORE_UNIT_SIZE));
        let max_pull_size = max_total_bytes.clamp(MIN_PULL_MSG_SIZE, MAX_PULL_MSG_SIZE);
        let scan_units = max_filter_size / CQ_STORE_UNIT_SIZE + 1;
        // Units are read in chunks: an unfiltered pull usually needs only `max_msg_nums`.
        let chunk = max_msg_nums
            .min(MAX_READ_CHUNK_UNITS)
            .clamp(MIN_READ_CHUNK_UNITS, scan_units);
        let mut units: Vec<CqUnit> = Vec::with_capacity(chunk);
        cq.read(offset, chunk, &mut units);
        drop(cq);

        let mut result =
            GetMessageResult::new(GetMessageStatus::NoMatchedMessage, offset, min, max);
        if units.is_empty() {
            let per_file =
                i64::try_from(self.config.consume_queue_entries_per_file).unwrap_or(i64::MAX);
            result.status = GetMessageStatus::OffsetFoundNull;
            result.next_begin_offset = offset - offset.rem_euclid(per_file) + per_file;
            tracing::warn!(
                topic,
                queue_id,
                offset,
                min,
                max,
                next = result.next_begin_offset,
                "consume queue file missing for offset; skipping to the next file"
            );
            return result;
        }
        let mut next_phy_file_start: Option<i64> = None;
        let mut runs = RecordRuns::with_capacity(max_msg_nums.min(MAX_READ_CHUNK_UNITS));
        let mut max_phy_pulling = 0i64;
        let mut examined = 0usize;
        'scan: loop {
            for unit in &units {
                let queue_offset = offset + i64::try_from(examined).unwrap_or(i64::MAX);
                if queue_offset >= max || examined * CQ_STORE_UNIT_SIZE > max_filter_size {
                    break 'scan;
                }
                let size = usize::try_from(unit.size).unwrap_or(0);
                let in_memory = self.is_in_memory(unit.commit_log_offset, max_offset_py);
                if self.is_the_batch_full(
                    size,
                    max_msg_nums,
                    max_pull_size,
                    result.buffer_total_size,
                    result.msg_count,
                    in_memory,
                ) || result.buffer_total_size >= max_pull_size
                {
                    break 'scan;
                }
                examined += 1;
                max_phy_pulling = unit.commit_log_offset;
                result.next_begin_offset = queue_offset + 1;
                if let Some(start) = next_phy_file_start
                    && unit.commit_log_offset < start
                {
                    continue;
                }
                if let Some(f) = filter
                    && !f.is_matched_by_consume_queue(unit.tags_code)
                {
                    if result.buffer_total_size == 0 {
                        result.status = GetMessageStatus::NoMatchedMessage;
                    }
                    continue;
                }
                let Some((file, pos)) = self.commit_log.locate(unit.commit_log_offset, unit.size)
                else {
                    if result.buffer_total_size == 0 {
                        result.status = GetMessageStatus::MessageWasRemoving;
                    }
                    next_phy_file_start =
                        Some(self.commit_log.roll_next_file(unit.commit_log_offset));
                    continue;
                };
                if let Some(f) = filter
                    && !file
                        .read_at(pos, size)
                        .is_some_and(|record| f.is_matched_by_commit_log(record))
                {
                    if result.buffer_total_size == 0 {
                        result.status = GetMessageStatus::NoMatchedMessage;
                    }
                    continue;
                }
                runs.push(file, pos, size, queue_offset);
                result.buffer_total_size += size;
                result.msg_count += 1;
                result.status = GetMessageStatus::Found;
                next_phy_file_start = None;
            }
            if examined >= scan_units {
                break;
            }
            units.clear();
            let from = offset + i64::try_from(examined).unwrap_or(i64::MAX);
            queue
                .read()
                .read(from, chunk.min(scan_units - examined), &mut units);
            if units.is_empty() {
                break;
            }
        }
        runs.finish(&mut result);
        self.commit_log.note_read(result.buffer_total_size);
        let diff = max_offset_py - max_phy_pulling;
        let memory = self.total_physical_memory as f64
            * (f64::from(self.config.access_message_in_memory_max_ratio) / 100.0);
        result.suggest_pulling_from_slave = diff as f64 > memory;
        result
    }

    /// The message stored at `commit_log_offset`, decoded (body shares the mapped memory).
    pub fn lookup_message_by_offset(&self, commit_log_offset: i64) -> Option<MessageExt> {
        let bytes = self.commit_log.get_record(commit_log_offset)?;
        record::decode_record(&bytes, false).ok()
    }

    /// The raw `size` bytes at `commit_log_offset` (one record).
    pub fn select_one_message_by_offset(&self, commit_log_offset: i64, size: i32) -> Option<Bytes> {
        self.commit_log.get_message(commit_log_offset, size)
    }

    /// Messages of `topic` indexed under `key` (UNIQ_KEY or a KEYS entry) stored within
    /// `[begin_ts, end_ts]`, newest first, at most `max_num`. Hash collisions are filtered out
    /// by checking each record's topic and keys.
    pub fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin_ts: i64,
        end_ts: i64,
    ) -> QueryMessageResult {
        let mut result = QueryMessageResult {
            index_last_update_timestamp: self.checkpoint.index_msg_timestamp(),
            ..QueryMessageResult::default()
        };
        let Some(index) = &self.index else {
            return result;
        };
        let (offsets, end_phy) = {
            let index = index.read();
            (
                index.query(topic, key, max_num, begin_ts, end_ts),
                index.max_physical_offset(),
            )
        };
        result.index_last_update_phy_offset = end_phy;
        let mut seen = std::collections::HashSet::new();
        for offset in offsets {
            if result.messages.len() >= max_num || !seen.insert(offset) {
                continue;
            }
            let Some(bytes) = self.commit_log.get_record(offset) else {
                continue;
            };
            let Ok(view) = record::decode_record_view(&bytes) else {
                continue;
            };
            let matches_key = view.property(keys::UNIQ_KEY) == Some(key)
                || view
                    .property(keys::KEYS)
                    .is_some_and(|ks| ks.split(' ').any(|k| k == key));
            if view.topic != topic || !matches_key {
                continue;
            }
            result.buffer_total_size += bytes.len();
            result.commit_log_offsets.push(offset);
            result.messages.push(bytes);
        }
        result
    }

    /// First queue offset stored at or after `timestamp_ms` (0 for an unknown queue).
    pub fn get_offset_in_queue_by_time(
        &self,
        topic: &str,
        queue_id: i32,
        timestamp_ms: i64,
    ) -> i64 {
        let Some(queue) = self.queues.find(topic, queue_id) else {
            return 0;
        };
        let cl = &self.commit_log;
        let lookup = |offset: i64, size: i32| cl.pickup_store_timestamp(offset, size);
        queue.read().offset_by_time(timestamp_ms, &lookup)
    }

    /// Min offset of the queue (0 for an unknown queue).
    pub fn get_min_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.queues
            .find(topic, queue_id)
            .map_or(0, |q| q.read().min_offset())
    }

    /// Max offset (next to be written) of the queue (0 for an unknown queue).
    pub fn get_max_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.queues
            .find(topic, queue_id)
            .map_or(0, |q| q.read().max_offset())
    }

    /// CommitLog offset of the message at `queue_offset` (0 if there is none).
    pub fn get_commit_log_offset_in_queue(
        &self,
        topic: &str,
        queue_id: i32,
        queue_offset: i64,
    ) -> i64 {
        self.queues
            .find(topic, queue_id)
            .and_then(|q| q.read().get(queue_offset))
            .map_or(0, |u| u.commit_log_offset)
    }

    /// Store timestamp of the message at `queue_offset` (-1 if there is none).
    pub fn get_message_store_timestamp(
        &self,
        topic: &str,
        queue_id: i32,
        queue_offset: i64,
    ) -> i64 {
        self.queues
            .find(topic, queue_id)
            .and_then(|q| q.read().get(queue_offset))
            .and_then(|u| {
                self.commit_log
                    .pickup_store_timestamp(u.commit_log_offset, u.size)
            })
            .unwrap_or(-1)
    }

    /// Store timestamp of the oldest message of the queue (-1 if there is none).
    pub fn get_earliest_message_time(&self, topic: &str, queue_id: i32) -> i64 {
        let Some(queue) = self.queues.find(topic, queue_id) else {
            return -1;
        };
        let min = queue.read().min_offset();
        self.get_message_store_timestamp(topic, queue_id, min)
    }

    /// First CommitLog offset still stored.
    pub fn min_phy_offset(&self) -> i64 {
        self.commit_log.min_offset()
    }

    /// End of the CommitLog.
    pub fn max_phy_offset(&self) -> i64 {
        self.commit_log.max_offset()
    }

    /// Removes topics: their ConsumeQueues (files included) and queue-offset counters. The
    /// CommitLog records stay until retention. Returns the number of queues removed.
    pub fn delete_topics(&self, topics: &[&str]) -> Result<usize, StoreError> {
        let mut removed = 0;
        for topic in topics {
            removed += self.queues.remove_topic(topic)?;
            self.commit_log.remove_topic(topic);
        }
        Ok(removed)
    }

    /// Asks the cleanup service to delete expired files at its next round regardless of the
    /// hour (RocketMQ `executeDeleteFilesManually`).
    pub fn execute_delete_files_manually(&self) {
        self.cleanup.manual_delete.store(true, Ordering::Release);
        self.cleanup.waker.wake();
    }

    /// Runs one retention round now on the caller's thread; returns CommitLog segments deleted.
    pub fn run_cleanup_once(&self) -> Result<usize, StoreError> {
        self.cleanup.run_once()
    }

    /// Deletes up to `batch_max` CommitLog segments older than `expired` (any age with
    /// `clean_immediately`), without touching the ConsumeQueues; see
    /// [`MessageStore::clean_expired_consume_queues`] for the second step.
    pub fn delete_expired_commit_log(
        &self,
        expired: Duration,
        clean_immediately: bool,
        batch_max: usize,
    ) -> Result<usize, StoreError> {
        self.commit_log.mapped_file_queue().delete_expired_by_time(
            expired,
            Duration::ZERO,
            clean_immediately,
            batch_max,
        )
    }

    /// Deletes ConsumeQueue/index files wholly before the CommitLog start and moves the queues'
    /// min offsets up to it.
    pub fn clean_expired_consume_queues(&self) -> Result<(), StoreError> {
        self.cleanup.last_min_phy.store(i64::MIN, Ordering::Release);
        self.cleanup.clean_logics()
    }

    /// Whether writes are currently refused because the disk is full.
    pub fn is_disk_full(&self) -> bool {
        self.disk_full.load(Ordering::Acquire)
    }

    /// Flushes the CommitLog, ConsumeQueues, index and checkpoint now.
    pub fn flush(&self) -> Result<i64, StoreError> {
        let flushed = self.flusher.flush_all()?;
        self.cq_flusher.flush_all()?;
        Ok(flushed)
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

    /// Counters and positions.
    pub fn stats(&self) -> StoreStatsSnapshot {
        let s = &self.stats;
        StoreStatsSnapshot {
            put_message_times_total: s.put_message_times_total.load(Ordering::Relaxed),
            put_message_size_total: s.put_message_size_total.load(Ordering::Relaxed),
            put_message_failed_times: s.put_message_failed_times.load(Ordering::Relaxed),
            put_message_flush_timeouts: s.put_message_flush_timeouts.load(Ordering::Relaxed),
            get_message_times_found: s.get_message_times_found.load(Ordering::Relaxed),
            get_message_times_miss: s.get_message_times_miss.load(Ordering::Relaxed),
            get_message_transferred_msg_count: s
                .get_message_transferred_msg_count
                .load(Ordering::Relaxed),
            dispatched_records: self.reput.dispatched_records(),
            commit_log_min_offset: self.commit_log.min_offset(),
            commit_log_max_offset: self.commit_log.max_offset(),
            commit_log_flushed_offset: self.commit_log.flushed_where(),
            dispatch_behind_bytes: self.reput.behind(),
        }
    }

    /// Unmaps the pages of the mapped files behind the readers now, as the release thread does
    /// every `mapped_pages_release_bytes` read (`page_release.rs`), every ConsumeQueue file
    /// included.
    pub fn release_mapped_pages(&self) -> Result<ReleasedPages, StoreError> {
        self.page_release.release_once(true)
    }

    /// Whether the store accepts puts.
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// Stops the services, flushes everything, writes the checkpoint and removes the `abort`
    /// file. Idempotent.
    pub fn shutdown(&self) -> Result<(), StoreError> {
        let mut done = self.shutdown_lock.lock();
        if *done {
            return Ok(());
        }
        self.running.store(false, Ordering::Release);
        self.stop_services();
        // The flusher's final flush made the whole CommitLog durable; dispatch must now cover it.
        let end = self.commit_log.max_offset();
        if !self.reput.wait_dispatched(end, Duration::ZERO) {
            self.reput.do_reput();
        }
        if self.reput.reput_from_offset() < end {
            tracing::warn!(
                dispatched = self.reput.reput_from_offset(),
                end,
                "dispatch incomplete at shutdown; leaving the abort file for recovery"
            );
            self.cq_flusher.flush_all()?;
            *done = true;
            self.lock_file.lock().take();
            return Ok(());
        }
        self.cq_flusher.flush_all()?;
        let abort = self.config.abort_path();
        match std::fs::remove_file(&abort) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(&abort, e)),
        }
        *done = true;
        self.lock_file.lock().take();
        tracing::info!(root = %self.config.store_path_root_dir.display(), "message store shut down cleanly");
        Ok(())
    }

    fn stop_services(&self) {
        self.cleanup.state.stop(&self.cleanup.waker);
        self.page_release.shutdown();
        if let Some(zero_ahead) = &self.zero_ahead {
            zero_ahead.shutdown();
        }
        self.flusher.shutdown();
        self.reput.shutdown();
        self.cq_flusher.shutdown();
    }
}

impl Drop for MessageStore {
    fn drop(&mut self) {
        // Without `shutdown`, stop the threads but keep the abort file: the next open recovers
        // as after a crash.
        if !*self.shutdown_lock.lock() {
            self.running.store(false, Ordering::Release);
            self.stop_services();
        }
    }
}
