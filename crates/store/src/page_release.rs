//! Releasing the pages of the store's mapped files that the broker has read and moved past.
//!
//! Why: every page of a mapped file the broker touches stays mapped into the process until the
//! mapping goes, and a CommitLog segment is mapped for as long as it exists. Dispatch reads each
//! record right after it is appended and a pull reads what it sends, so without this the broker's
//! resident set grew by every byte it stored or served: 5 GB after a minute of 32 synchronous
//! senders, the whole 14 GB log after a minute of batch sends. Those pages are page cache,
//! reclaimable and shared, but the resident set is what operators watch and what the kernel's OOM
//! badness counts. (Apache RocketMQ's broker shows the same growth.)
//!
//! How: `MADV_DONTNEED` on the pages behind, which for a shared file mapping only drops this
//! process's page-table entries (see [`crate::mapped_file::release_mapped_pages`]): the data
//! stays in the page cache, dirty pages are still written back, and a later read maps them again
//! with a minor fault. Readers and appenders take no part in it.
//!
//! When: the CommitLog counts the bytes dispatch and pulls read from it
//! ([`PageReleaseTrigger::note`]); each time `mappedPagesReleaseBytes` have been read, the
//! release thread wakes and unmaps
//! - the CommitLog up to [`KEEP_BEHIND_DISPATCH`] before the dispatch position (consumers
//!   reading the tail find the newest pages still mapped),
//! - every ConsumeQueue file written since the last round up to the page its next unit goes to
//!   (every [`CONSUME_QUEUE_SWEEP_ROUNDS`] rounds all of them, for the pages consumers read: a
//!   store with thousands of idle queues must not pay a syscall per file per round),
//! - the written entries of every IndexFile (its hash slots stay: each key touches a random one).
//!
//! So the mapped part of the resident set stays near `mappedPagesReleaseBytes` + the kept tail +
//! the index's hash slots, whatever the store holds. Every release is off the request path, on
//! its own thread; 0 turns the service off (RocketMQ's behaviour).
//!
//! The same rounds also bound the CommitLog's share of the page cache: flushed pages more than
//! `commitLogPageCacheBytes` behind the end are dropped from it (`POSIX_FADV_DONTNEED`), so the
//! pages new appends need are ones the kernel just freed. Why: on a virtual machine whose guest
//! reports free memory to the host (virtio-balloon free page reporting, as on this project's build
//! box), a page the guest has not touched for a while is backed by the host only on first write. An
//! append into such a page costs a host fault: after about 5 GB of fresh page cache, writing 1 GiB
//! at 150 MB/s took 2.7–2.9 s of CPU in `pwrite` instead of 0.5–0.8 s, and a 60 s run of 32
//! synchronous senders fell from 110 k to 95 k msg/s halfway through. Recycled pages keep that cost
//! off the send path. Readers within the window find their bytes cached as before; a consumer
//! further behind reads them from disk (with readahead). 0 leaves the page cache to the kernel, as
//! RocketMQ does.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use parking_lot::RwLock;

use crate::checkpoint::Checkpoint;
use crate::commit_log::CommitLog;
use crate::consume_queue::ConsumeQueueTable;
use crate::error::StoreError;
use crate::index_service::IndexService;
use crate::mapped_file::{MappedFile, OS_PAGE_SIZE};
use crate::recovery::abnormal_start;
use crate::service::ServiceState;

// The settings' defaults are kept with the other defaults in `config.rs`, and the trigger with
// the CommitLog that counts into it; both are also named here, beside what they pace.
pub use crate::config::{DEFAULT_COMMIT_LOG_PAGE_CACHE_BYTES, DEFAULT_MAPPED_PAGES_RELEASE_BYTES};
pub use crate::page_release_trigger::PageReleaseTrigger;

/// CommitLog bytes before the dispatch position left mapped (at most the release interval).
pub const KEEP_BEHIND_DISPATCH: u64 = 8 * 1024 * 1024;
/// How long the release thread sleeps when nothing wakes it (it only checks for shutdown then).
const IDLE_WAIT: Duration = Duration::from_secs(1);
/// Every this many rounds, ConsumeQueue files nobody wrote since the last round are released
/// too (pages consumers read from them); the other rounds skip them without a syscall.
pub const CONSUME_QUEUE_SWEEP_ROUNDS: u64 = 16;

/// CommitLog bytes before the dispatch position left mapped: [`KEEP_BEHIND_DISPATCH`], at most
/// the release interval.
fn keep_behind(trigger: &PageReleaseTrigger) -> u64 {
    KEEP_BEHIND_DISPATCH.min(trigger.threshold())
}

/// What one release covered, in bytes: the ranges handed to `madvise`, whether or not their
/// pages were mapped at the time (a file released before counts again).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReleasedPages {
    pub commit_log: u64,
    pub consume_queues: u64,
    pub index: u64,
    /// CommitLog bytes dropped from the page cache (each range once).
    pub page_cache: u64,
}

/// The release thread and what it walks.
pub struct PageReleaseService {
    commit_log: Arc<CommitLog>,
    queues: Arc<ConsumeQueueTable>,
    index: Option<Arc<RwLock<IndexService>>>,
    /// Where dispatch stands (the CommitLog below it is read and moved past).
    dispatched: Box<dyn Fn() -> i64 + Send + Sync>,
    /// `commitLogPageCacheBytes`; 0 keeps the page cache as the kernel has it.
    page_cache_bytes: u64,
    /// Bounds the eviction: what a crash recovery would read again stays cached.
    checkpoint: Arc<Checkpoint>,
    /// `messageIndexSafe`: the index timestamp also bounds where that recovery starts.
    message_index_safe: bool,
    /// CommitLog offset below which the page cache was already dropped.
    evicted_to: AtomicI64,
    state: ServiceState,
}

impl std::fmt::Debug for PageReleaseService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageReleaseService").finish_non_exhaustive()
    }
}

impl PageReleaseService {
    pub fn new(
        commit_log: Arc<CommitLog>,
        queues: Arc<ConsumeQueueTable>,
        index: Option<Arc<RwLock<IndexService>>>,
        dispatched: impl Fn() -> i64 + Send + Sync + 'static,
        checkpoint: Arc<Checkpoint>,
        page_cache_bytes: u64,
        message_index_safe: bool,
    ) -> Arc<Self> {
        Arc::new(Self {
            commit_log,
            queues,
            index,
            dispatched: Box::new(dispatched),
            page_cache_bytes,
            checkpoint,
            message_index_safe,
            evicted_to: AtomicI64::new(0),
            state: ServiceState::default(),
        })
    }

    /// Starts the thread (not when the trigger is off). The first round runs at once: recovery
    /// has just read the newest segments.
    pub fn start(self: &Arc<Self>) -> Result<(), StoreError> {
        if !self.commit_log.page_release().is_enabled() {
            return Ok(());
        }
        let service = Arc::clone(self);
        self.state.spawn("comet-page-release", move || {
            let mut due = true;
            // Rounds run so far (see CONSUME_QUEUE_SWEEP_ROUNDS).
            let mut round = 0u64;
            while !service.state.is_stopped() {
                if due {
                    let all_queues = round.is_multiple_of(CONSUME_QUEUE_SWEEP_ROUNDS);
                    round += 1;
                    match service.release_once(all_queues) {
                        Ok(released) => tracing::trace!(?released, "mapped pages released"),
                        Err(e) => tracing::warn!(error = %e, "releasing mapped pages failed"),
                    }
                }
                service.commit_log.page_release().waker().wait(IDLE_WAIT);
                due = service.commit_log.page_release().take_due();
            }
        })
    }

    /// Stops and joins the thread.
    pub fn shutdown(&self) {
        self.state.stop(self.commit_log.page_release().waker());
    }

    /// One round over the CommitLog, the ConsumeQueues and the index (see the module docs);
    /// `all_queues` includes the ConsumeQueue files nobody wrote since the last round.
    pub fn release_once(&self, all_queues: bool) -> Result<ReleasedPages, StoreError> {
        let mut released = ReleasedPages::default();
        let keep_from = (self.dispatched)().saturating_sub(
            i64::try_from(keep_behind(self.commit_log.page_release())).unwrap_or(0),
        );
        let files = self.commit_log.mapped_file_queue().files();
        // Before the unmapping below: this reads the first record of recent segments.
        let recovery_from = self.recovery_start(&files);
        for file in &files {
            let from = file.file_from_offset();
            if from >= keep_from {
                break;
            }
            let below = usize::try_from(keep_from - from)
                .unwrap_or(usize::MAX)
                .min(file.file_size());
            released.commit_log += file.release_pages_below(below)? as u64;
        }
        released.page_cache = self.evict_commit_log_pages(&files, recovery_from)?;
        for queue in self.queues.all() {
            let files = queue.read().files();
            for file in files {
                released.consume_queues += file.release_written_pages(all_queues)? as u64;
            }
        }
        if let Some(index) = &self.index {
            let entries = index.read().written_entries();
            for pages in entries {
                released.index += pages.release()? as u64;
            }
        }
        Ok(released)
    }

    /// The CommitLog offset at or before which an abnormal recovery would start verifying if the
    /// broker crashed now (0 when the page cache is left alone: nothing needs it then).
    fn recovery_start(&self, files: &[Arc<MappedFile>]) -> i64 {
        if self.page_cache_bytes == 0 {
            return 0;
        }
        let start = abnormal_start(
            files,
            self.checkpoint
                .persisted_min_timestamp(self.message_index_safe),
        );
        files.get(start).map_or(0, |f| f.file_from_offset())
    }

    /// Drops the flushed CommitLog pages more than `page_cache_bytes` behind the end, and
    /// before `recovery_from` (a restart after a crash reads from there, so that stays cached),
    /// from the page cache, from where the last round stopped; returns the bytes asked for.
    fn evict_commit_log_pages(
        &self,
        files: &[Arc<MappedFile>],
        recovery_from: i64,
    ) -> Result<u64, StoreError> {
        if self.page_cache_bytes == 0 {
            return Ok(0);
        }
        let keep = i64::try_from(self.page_cache_bytes).unwrap_or(i64::MAX);
        let page = OS_PAGE_SIZE as i64;
        // Segments start on page boundaries, so a page-aligned limit leaves no page between two
        // rounds' ranges.
        let limit = self
            .commit_log
            .flushed_where()
            .min(self.commit_log.max_offset().saturating_sub(keep))
            .min(recovery_from)
            / page
            * page;
        let from = self.evicted_to.load(Ordering::Relaxed);
        if limit <= from {
            return Ok(0);
        }
        let mut evicted = 0u64;
        for file in files {
            let start = file.file_from_offset();
            let size = file.file_size();
            if start >= limit {
                break;
            }
            if start.saturating_add(i64::try_from(size).unwrap_or(i64::MAX)) <= from {
                continue;
            }
            // A negative distance (the range starts before this file) means the file's start.
            let lo = usize::try_from(from - start).unwrap_or(0);
            let hi = usize::try_from(limit - start).unwrap_or(0).min(size);
            evicted += file.evict_page_cache(lo, hi)? as u64;
        }
        self.evicted_to.store(limit, Ordering::Relaxed);
        Ok(evicted)
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::path::Path;
    use std::time::Instant;

    use bytes::Bytes;
    use comet_protocol::message::MessageExt;
    use comet_protocol::message::properties::keys;

    use super::*;
    use crate::config::MessageStoreConfig;
    use crate::mapped_file::{OS_PAGE_SIZE, resident_bytes_of};
    use crate::message_store::MessageStore;

    const RELEASE_EVERY: u64 = 256 * 1024;
    const QUEUES: i32 = 4;
    const MESSAGES: usize = 3000;
    /// Hang guard for the release thread: only a failing test waits this long.
    const WAIT: Duration = Duration::from_secs(60);

    fn config(root: &Path) -> MessageStoreConfig {
        let mut cfg = MessageStoreConfig::with_root(root);
        cfg.mapped_file_size_commit_log = 1024 * 1024;
        cfg.consume_queue_entries_per_file = 256;
        cfg.max_hash_slot_num = 64;
        cfg.max_index_num = 4096;
        cfg.mapped_pages_release_bytes = RELEASE_EVERY;
        cfg.delete_when = "99".into();
        cfg.disk_max_used_space_ratio = 95;
        cfg.disk_space_clean_forcibly_ratio = 100;
        cfg.disk_space_warning_level_ratio = 100;
        cfg
    }

    fn body(i: usize) -> Bytes {
        Bytes::from(format!("{i:06}").repeat(170))
    }

    fn message(i: usize) -> MessageExt {
        let mut m = MessageExt::new("ReleaseTopic", body(i));
        m.queue_id = (i % QUEUES as usize) as i32;
        m.born_host = SocketAddr::from(([127, 0, 0, 1], 40_000));
        m.store_host = SocketAddr::from(([10, 0, 0, 1], 10_911));
        m.properties.insert(keys::KEYS, format!("key-{i}"));
        m
    }

    /// Mapped bytes of the files under `dir` now.
    fn resident_under(dir: &Path) -> u64 {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries
            .flatten()
            .map(|e| {
                let path = e.path();
                if path.is_dir() {
                    resident_under(&path)
                } else {
                    resident_bytes_of(&path)
                }
            })
            .sum()
    }

    /// Reads every message back (queue offset → CommitLog offset → record) and checks its body.
    fn check_all(store: &MessageStore) {
        for i in 0..MESSAGES {
            let queue = (i % QUEUES as usize) as i32;
            let at = (i / QUEUES as usize) as i64;
            let offset = store.get_commit_log_offset_in_queue("ReleaseTopic", queue, at);
            let found = store.lookup_message_by_offset(offset).map(|m| m.body);
            assert_eq!(found, Some(body(i)), "message {i}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn released_pages_leave_the_resident_set_and_every_byte_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let cfg = config(dir.path());
        let root = dir.path().to_path_buf();
        let store = MessageStore::open(cfg.clone()).unwrap_or_else(|e| panic!("open: {e}"));
        for i in 0..MESSAGES {
            let r = store.put_message(message(i)).await;
            assert!(r.is_ok(), "put {i}: {:?}", r.status);
        }
        assert!(store.wait_dispatched(store.max_phy_offset(), WAIT));
        check_all(&store);
        let log_bytes = u64::try_from(store.max_phy_offset()).unwrap_or(0);
        assert!(
            log_bytes > 3 * 1024 * 1024,
            "the test spans several segments"
        );

        // One round by hand: the CommitLog keeps only the tail behind dispatch, every
        // ConsumeQueue its last page, the index its header/slot page and entry tail.
        let released = store
            .release_mapped_pages()
            .unwrap_or_else(|e| panic!("release: {e}"));
        assert!(released.commit_log >= log_bytes - RELEASE_EVERY - OS_PAGE_SIZE as u64);
        let page = OS_PAGE_SIZE as u64;
        let log = resident_under(&root.join("commitlog"));
        assert!(
            log <= RELEASE_EVERY + page,
            "commit log still mapped: {log} bytes"
        );
        let cq = resident_under(&root.join("consumequeue"));
        assert!(
            cq <= QUEUES as u64 * page,
            "consume queues still mapped: {cq} bytes"
        );
        let index = resident_under(&root.join("index"));
        assert!(index <= 2 * page, "index still mapped: {index} bytes");

        // Reading everything again maps it again, with the same bytes; the release thread, woken
        // by those reads, unmaps it by itself (all but the kept tail and what was read since
        // its last round: less than one interval).
        check_all(&store);
        let deadline = Instant::now() + WAIT;
        while resident_under(&root.join("commitlog")) > 2 * RELEASE_EVERY + page {
            assert!(Instant::now() < deadline, "the release thread did not run");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }

        // Released pages were dirty ConsumeQueue and index pages, never flushed before: a
        // reopen must find every unit and key.
        store.shutdown().unwrap_or_else(|e| panic!("shutdown: {e}"));
        drop(store);
        let store = MessageStore::open(cfg).unwrap_or_else(|e| panic!("reopen: {e}"));
        check_all(&store);
        for i in [0, 1, MESSAGES / 2, MESSAGES - 1] {
            let q = store.query_message("ReleaseTopic", &format!("key-{i}"), 4, 0, i64::MAX);
            assert_eq!(q.messages.len(), 1, "key-{i}");
        }
        store.shutdown().unwrap_or_else(|e| panic!("shutdown: {e}"));
    }

    #[cfg(target_os = "linux")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn flushed_commit_log_pages_behind_the_window_and_the_checkpoint_leave_the_page_cache() {
        use crate::mapped_file::cached_bytes_of;
        const WINDOW: u64 = 1024 * 1024;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let mut cfg = config(dir.path());
        cfg.commit_log_page_cache_bytes = WINDOW;
        // The checkpoint is written only when this test says so.
        cfg.flush_interval_consume_queue = Duration::from_secs(3600);
        let store = MessageStore::open(cfg).unwrap_or_else(|e| panic!("open: {e}"));
        for i in 0..MESSAGES {
            let r = store.put_message(message(i)).await;
            assert!(r.is_ok(), "put {i}: {:?}", r.status);
        }
        assert!(store.wait_dispatched(store.max_phy_offset(), WAIT));
        store
            .commit_log()
            .mapped_file_queue()
            .flush(0)
            .unwrap_or_else(|e| panic!("flush: {e}"));
        let end = u64::try_from(store.max_phy_offset()).unwrap_or(0);
        assert!(end > 3 * WINDOW, "the test spans several segments");
        let segments = || {
            store
                .commit_log()
                .mapped_file_queue()
                .files()
                .into_iter()
                .map(|f| {
                    let from = u64::try_from(f.file_from_offset()).unwrap_or(0);
                    let (cached, droppable) = cached_bytes_of(f.path());
                    (from, from + f.file_size() as u64, cached, droppable)
                })
                .collect::<Vec<_>>()
        };

        // No checkpoint covers any record yet: a crash now would verify the whole log, so all
        // of it stays cached however far behind the window it is.
        let held = store
            .release_mapped_pages()
            .unwrap_or_else(|e| panic!("release: {e}"));
        assert_eq!(held.page_cache, 0, "nothing may go before the checkpoint");
        for (from, _, cached, _) in segments() {
            assert!(cached > 0, "segment {from} dropped");
        }

        // Once the checkpoint covers everything, a crash would verify only the newest segment:
        // the pages more than the window behind the end go (this round's or the thread's).
        let later = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(0))
            + 3_600_000;
        let checkpoint = store.checkpoint();
        checkpoint.set_physic_msg_timestamp(later);
        checkpoint.set_logics_msg_timestamp(later);
        checkpoint.set_index_msg_timestamp(later);
        checkpoint
            .flush()
            .unwrap_or_else(|e| panic!("checkpoint: {e}"));
        let files = store.commit_log().mapped_file_queue().files();
        assert_eq!(
            abnormal_start(&files, checkpoint.persisted_min_timestamp(false)),
            files.len() - 1,
            "the segment being appended to is where a recovery would start"
        );
        let first = store
            .release_mapped_pages()
            .unwrap_or_else(|e| panic!("release: {e}"));
        assert!(first.page_cache <= end - WINDOW);
        let again = store
            .release_mapped_pages()
            .unwrap_or_else(|e| panic!("release: {e}"));
        assert_eq!(again.page_cache, 0, "each range is dropped once");
        let mut behind = 0;
        for (from, to, cached, droppable) in segments() {
            if to <= end - WINDOW {
                behind += 1;
                if droppable {
                    assert_eq!(cached, 0, "segment {from} still cached");
                } else {
                    eprintln!("tmpfs: its pages cannot leave the page cache; not checked");
                }
            } else if to >= end {
                assert!(cached > 0, "the newest segment is cached");
            }
        }
        assert!(behind >= 2, "{behind} segments behind the window");

        // Nothing was lost: every message reads back (from disk where it was dropped).
        check_all(&store);
        store.shutdown().unwrap_or_else(|e| panic!("shutdown: {e}"));
    }
}
