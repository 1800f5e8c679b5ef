//! Releasing the pages of the store's mapped files that the broker has read and moved past.
//!
//! Why: every page of a mapped file the broker touches stays mapped into the process until the
//! mapping goes, and a CommitLog segment is mapped for as long as it exists. Dispatch reads each
//! record right after it is appended and a pull reads what it sends, so without this the
//! broker's resident set grew by every byte it stored or served: 5 GB after a minute of W1, the
//! whole 14 GB log after a minute of batch sends. Those pages are page cache, reclaimable and
//! shared, but the resident set is what operators watch and what the kernel's OOM badness
//! counts. (Apache RocketMQ's broker shows the same growth.)
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

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use crate::commit_log::CommitLog;
use crate::consume_queue::ConsumeQueueTable;
use crate::error::StoreError;
use crate::flush::{ServiceState, Waker, spawn_service};
use crate::index_service::IndexService;

/// Default of `mappedPagesReleaseBytes`: bytes read from the CommitLog between two releases.
pub const DEFAULT_MAPPED_PAGES_RELEASE_BYTES: u64 = 64 * 1024 * 1024;
/// CommitLog bytes before the dispatch position left mapped (at most the release interval).
pub const KEEP_BEHIND_DISPATCH: u64 = 8 * 1024 * 1024;
/// How long the release thread sleeps when nothing wakes it (it only checks for shutdown then).
const IDLE_WAIT: Duration = Duration::from_secs(1);
/// Every this many rounds, ConsumeQueue files nobody wrote since the last round are released
/// too (pages consumers read from them); the other rounds skip them without a syscall.
pub const CONSUME_QUEUE_SWEEP_ROUNDS: u64 = 16;

/// Counts the bytes read from mapped store files and wakes the release thread every
/// `threshold` of them. Lives in the [`CommitLog`], which every such read goes through.
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

    /// Whether a release is due; resets the count if so.
    fn take_due(&self) -> bool {
        if !self.is_enabled() || self.read_bytes.load(Ordering::Relaxed) < self.threshold {
            return false;
        }
        self.read_bytes.store(0, Ordering::Relaxed);
        true
    }

    fn keep_behind(&self) -> u64 {
        KEEP_BEHIND_DISPATCH.min(self.threshold)
    }
}

/// What one release covered, in bytes: the ranges handed to `madvise`, whether or not their
/// pages were mapped at the time (a file released before counts again).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReleasedPages {
    pub commit_log: u64,
    pub consume_queues: u64,
    pub index: u64,
}

/// The release thread and what it walks.
pub struct PageReleaseService {
    commit_log: Arc<CommitLog>,
    queues: Arc<ConsumeQueueTable>,
    index: Option<Arc<RwLock<IndexService>>>,
    /// Where dispatch stands (the CommitLog below it is read and moved past).
    dispatched: Box<dyn Fn() -> i64 + Send + Sync>,
    state: ServiceState,
    thread: Mutex<Option<JoinHandle<()>>>,
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
    ) -> Arc<Self> {
        Arc::new(Self {
            commit_log,
            queues,
            index,
            dispatched: Box::new(dispatched),
            state: ServiceState::default(),
            thread: Mutex::new(None),
        })
    }

    /// Starts the thread (not when the trigger is off). The first round runs at once: recovery
    /// has just read the newest segments.
    pub fn start(self: &Arc<Self>) -> Result<(), StoreError> {
        if !self.commit_log.page_release().is_enabled() {
            return Ok(());
        }
        let service = Arc::clone(self);
        let handle = spawn_service("comet-page-release", move || {
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
                service.commit_log.page_release().waker.wait(IDLE_WAIT);
                due = service.commit_log.page_release().take_due();
            }
        })?;
        *self.thread.lock() = Some(handle);
        Ok(())
    }

    /// Stops and joins the thread.
    pub fn shutdown(&self) {
        self.state.stop();
        self.commit_log.page_release().waker.wake();
        if let Some(handle) = self.thread.lock().take()
            && handle.join().is_err()
        {
            tracing::error!("page release thread panicked");
        }
    }

    /// One round over the CommitLog, the ConsumeQueues and the index (see the module docs);
    /// `all_queues` includes the ConsumeQueue files nobody wrote since the last round.
    pub fn release_once(&self, all_queues: bool) -> Result<ReleasedPages, StoreError> {
        let mut released = ReleasedPages::default();
        let keep_from = (self.dispatched)().saturating_sub(
            i64::try_from(self.commit_log.page_release().keep_behind()).unwrap_or(0),
        );
        for file in self.commit_log.mapped_file_queue().files() {
            let from = file.file_from_offset();
            if from >= keep_from {
                break;
            }
            let below = usize::try_from(keep_from - from)
                .unwrap_or(usize::MAX)
                .min(file.file_size());
            released.commit_log += file.release_pages_below(below)? as u64;
        }
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
