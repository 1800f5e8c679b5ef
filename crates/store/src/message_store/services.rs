//! Retention (the cleanup thread and its manual triggers), explicit flushes and page release.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use parking_lot::RwLock;

use super::MessageStore;
use crate::cleanup::{self, DiskPressure, DiskThresholds};
use crate::commit_log::CommitLog;
use crate::config::MessageStoreConfig;
use crate::consume_queue::ConsumeQueueTable;
use crate::error::StoreError;
use crate::index_service::IndexService;
use crate::live::{LiveSettings, LiveStoreSettings};
use crate::page_release::ReleasedPages;
use crate::service::{ServiceState, Waker};

/// Retention thread: deletes old CommitLog segments, then the ConsumeQueue and index files
/// that pointed only into them, and watches disk usage.
pub(super) struct CleanupService {
    config: MessageStoreConfig,
    /// Retention period, hours, disk thresholds and round period, read every round.
    live: Arc<LiveSettings>,
    commit_log: Arc<CommitLog>,
    queues: Arc<ConsumeQueueTable>,
    index: Option<Arc<RwLock<IndexService>>>,
    disk_full: Arc<AtomicBool>,
    manual_delete: AtomicBool,
    last_min_phy: AtomicI64,
    /// Held through a round: the thread's rounds and those run on a caller's thread
    /// ([`MessageStore::run_cleanup_once`]) would otherwise delete the same files at once.
    round: parking_lot::Mutex<()>,
    waker: Waker,
    state: ServiceState,
}

impl CleanupService {
    pub(super) fn new(
        config: MessageStoreConfig,
        live: Arc<LiveSettings>,
        commit_log: Arc<CommitLog>,
        queues: Arc<ConsumeQueueTable>,
        index: Option<Arc<RwLock<IndexService>>>,
        disk_full: Arc<AtomicBool>,
    ) -> Arc<Self> {
        let last_min_phy = AtomicI64::new(commit_log.min_offset());
        Arc::new(CleanupService {
            config,
            live,
            commit_log,
            queues,
            index,
            disk_full,
            manual_delete: AtomicBool::new(false),
            last_min_phy,
            round: parking_lot::Mutex::new(()),
            waker: Waker::new(),
            state: ServiceState::default(),
        })
    }

    /// Starts the retention thread: a round every `cleanResourceInterval` (as in force when
    /// the thread goes to sleep), or sooner when woken.
    pub(super) fn start(self: &Arc<Self>) -> Result<(), StoreError> {
        let cleanup = Arc::clone(self);
        self.state.spawn("comet-cleanup", move || {
            while !cleanup.state.is_stopped() {
                cleanup
                    .waker
                    .wait(cleanup.live.get().clean_resource_interval);
                if cleanup.state.is_stopped() {
                    break;
                }
                if let Err(e) = cleanup.run_once() {
                    tracing::error!(error = %e, "cleanup round failed");
                }
            }
        })
    }

    /// Wakes the retention thread for a round now.
    pub(super) fn wake(&self) {
        self.waker.wake();
    }

    /// Stops the retention thread and waits for it.
    pub(super) fn stop(&self) {
        self.state.stop(&self.waker);
    }

    fn thresholds(live: &LiveStoreSettings) -> DiskThresholds {
        let mut t = DiskThresholds::from_max_used_percent(live.disk_max_used_space_ratio);
        t.clean_forcibly_ratio = f64::from(live.disk_space_clean_forcibly_ratio) / 100.0;
        t.warning_ratio = f64::from(live.disk_space_warning_level_ratio) / 100.0;
        t
    }

    fn run_once(&self) -> Result<usize, StoreError> {
        let _round = self.round.lock();
        let live = self.live.get();
        let dir = self.commit_log.dir();
        let ratio = cleanup::disk_usage(dir).ok().and_then(|u| u.used_ratio());
        let pressure = cleanup::assess_disk(ratio, &Self::thresholds(&live));
        let manual = self.manual_delete.swap(false, Ordering::AcqRel);
        let decision = cleanup::decide(
            &live.delete_when,
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
            let reserved = Duration::from_secs(live.file_reserved_time_hours.saturating_mul(3600));
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

impl MessageStore {
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

    /// Unmaps the pages of the mapped files behind the readers now, as the release thread does
    /// every `mapped_pages_release_bytes` read (`page_release.rs`), every ConsumeQueue file
    /// included.
    pub fn release_mapped_pages(&self) -> Result<ReleasedPages, StoreError> {
        self.page_release.release_once(true)
    }
}
