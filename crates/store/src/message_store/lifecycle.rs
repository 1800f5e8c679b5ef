//! Opening a store (lock, load, recovery, the background services) and shutting it down.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use super::services::CleanupService;
use super::{MessageStore, StoreStats};
use crate::checkpoint::Checkpoint;
use crate::commit_log::CommitLog;
use crate::config::MessageStoreConfig;
use crate::consume_queue::ConsumeQueueTable;
use crate::dispatch::{Dispatcher, ReputService};
use crate::error::StoreError;
use crate::flush::{CommitLogFlusher, DispatchProgress, FlushConsumeQueueService};
use crate::index_service::{IndexConfig, IndexService};
use crate::live::LiveSettings;
use crate::os;
use crate::page_release::PageReleaseService;
use crate::recovery::{RecoveryContext, recover};
use crate::service::Waker;
use crate::zero_ahead::{AheadMethod, ZeroAheadService};

/// Takes an exclusive `flock` on the store's `lock` file.
fn acquire_lock(path: &Path) -> Result<File, StoreError> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| StoreError::io(path, e))?;
    // `File::try_lock` is `flock(LOCK_EX | LOCK_NB)` on the platforms we build for.
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Err(StoreError::Locked(path.to_path_buf())),
        Err(TryLockError::Error(err)) => return Err(StoreError::io(path, err)),
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

/// Bytes of RAM (physical pages × page size), `u64::MAX` when the system does not say.
fn total_physical_memory() -> u64 {
    os::physical_memory_bytes().unwrap_or(u64::MAX)
}

/// The background services of a store, built once recovery found where the log ends.
struct Services {
    /// The settings that change while the store runs, shared by the services below.
    live: Arc<LiveSettings>,
    reput: Arc<ReputService>,
    zero_ahead: Option<Arc<ZeroAheadService>>,
    flusher: Arc<CommitLogFlusher>,
    cq_flusher: Arc<FlushConsumeQueueService>,
    disk_full: Arc<AtomicBool>,
    cleanup: Arc<CleanupService>,
    page_release: Arc<PageReleaseService>,
}

impl Services {
    /// Builds (without starting) dispatch from `dispatch_from` with the `dispatcher` recovery
    /// used, the CommitLog flush with its prepare-ahead thread, the ConsumeQueue/checkpoint
    /// flush, retention and page release, all sharing the dispatcher's live settings.
    fn new(
        config: &MessageStoreConfig,
        commit_log: &Arc<CommitLog>,
        queues: &Arc<ConsumeQueueTable>,
        index: &Option<Arc<RwLock<IndexService>>>,
        checkpoint: &Arc<Checkpoint>,
        dispatcher: Dispatcher,
        dispatch_from: i64,
    ) -> Self {
        let live = Arc::clone(dispatcher.live());
        let reput = ReputService::new(
            Arc::clone(commit_log),
            dispatcher,
            config.flush_disk_type,
            Arc::new(Waker::new()),
            dispatch_from,
        );
        // Under SYNC_FLUSH records become dispatchable when flushed: the flush thread dispatches
        // them itself once it has answered the flush's waiters (see `dispatch.rs`).
        let flushed_reput = Arc::clone(&reput);
        let zero_ahead = (config.commit_log_zero_ahead_bytes > 0).then(|| {
            let ahead = usize::try_from(config.commit_log_zero_ahead_bytes)
                .unwrap_or(usize::MAX)
                .min(config.mapped_file_size_commit_log);
            ZeroAheadService::new(
                Arc::clone(commit_log),
                ahead,
                AheadMethod::for_flush(config.flush_disk_type),
            )
        });
        let flushed_zero_ahead = zero_ahead.clone();
        let flusher = CommitLogFlusher::new(
            config,
            Arc::clone(&live),
            Arc::clone(commit_log),
            Arc::clone(checkpoint),
            Arc::new(move || {
                flushed_reput.dispatch_now();
                if let Some(zero_ahead) = &flushed_zero_ahead {
                    zero_ahead.wake_if_needed();
                }
            }),
        );
        let progress: Arc<dyn DispatchProgress> = reput.clone();
        let cq_flusher = FlushConsumeQueueService::new(
            config,
            Arc::clone(&live),
            Arc::clone(queues),
            index.clone(),
            Arc::clone(checkpoint),
            progress,
        );
        let disk_full = Arc::new(AtomicBool::new(false));
        let cleanup = CleanupService::new(
            config.clone(),
            Arc::clone(&live),
            Arc::clone(commit_log),
            Arc::clone(queues),
            index.clone(),
            Arc::clone(&disk_full),
        );

        let dispatch_position = Arc::clone(&reput);
        let page_release = PageReleaseService::new(
            Arc::clone(commit_log),
            Arc::clone(queues),
            index.clone(),
            move || dispatch_position.reput_from_offset(),
            Arc::clone(checkpoint),
            config.commit_log_page_cache_bytes,
            config.message_index_safe,
        );
        Services {
            live,
            reput,
            zero_ahead,
            flusher,
            cq_flusher,
            disk_full,
            cleanup,
            page_release,
        }
    }
}

/// Opens the IndexService under `root`, whatever `messageIndexEnable` says (as RocketMQ does):
/// the key may be turned on while the store runs. It makes no file before its first entry.
fn open_index(
    config: &MessageStoreConfig,
    root: &Path,
) -> Result<Option<Arc<RwLock<IndexService>>>, StoreError> {
    let index = IndexService::open(
        root,
        IndexConfig {
            max_hash_slot_num: config.max_hash_slot_num,
            max_index_num: config.max_index_num,
        },
    )?;
    Ok(Some(Arc::new(RwLock::new(index))))
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
        let index = open_index(&config, &root)?;
        // Recovery re-dispatches with the settings the store then runs with.
        let dispatcher = Dispatcher::new(
            Arc::clone(&queues),
            index.clone(),
            LiveSettings::of(&config),
            config.delay_levels_millis()?,
        );
        // An index not kept up while indexing was off covers nothing recovery may skip.
        let indexing = config.message_index_enable;
        let report = recover(
            &RecoveryContext {
                commit_log: &commit_log,
                queues: &queues,
                index: index.as_deref().filter(|_| indexing),
                dispatcher: &dispatcher,
                checkpoint: &checkpoint,
                check_crc: config.check_crc_on_recover,
                message_index_safe: config.message_index_safe,
            },
            abnormal,
        )?;
        if let Some(index) = index.as_ref().filter(|_| !indexing) {
            // Nothing it holds may point past the recovered end, should indexing be turned on.
            index.write().truncate_dirty(report.max_phy_offset)?;
        }
        create_abort_file(&config.abort_path())?;

        let services = Services::new(
            &config,
            &commit_log,
            &queues,
            &index,
            &checkpoint,
            dispatcher,
            report.max_phy_offset,
        );
        let store = Arc::new(Self {
            config,
            live: services.live,
            commit_log,
            queues,
            index,
            checkpoint,
            flusher: services.flusher,
            reput: services.reput,
            cq_flusher: services.cq_flusher,
            cleanup: services.cleanup,
            page_release: services.page_release,
            zero_ahead: services.zero_ahead,
            recovery_report: report,
            running: AtomicBool::new(true),
            disk_full: services.disk_full,
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
        self.cleanup.start()
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
        self.cleanup.stop();
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
