//! Making the CommitLog (and the structures derived from it) durable.
//!
//! Two policies, as in RocketMQ:
//! - **ASYNC_FLUSH**: a put is acknowledged once the record is in the page cache. A flush thread
//!   msyncs every `flush_interval_commit_log`, or sooner once `flush_commit_log_least_pages`
//!   pages are dirty, and everything at least every `flush_commit_log_thorough_interval`.
//! - **SYNC_FLUSH** with group commit: a put registers "make offset X durable" and awaits a
//!   oneshot. The flush thread takes *all* pending requests at once, does one msync covering the
//!   highest of them (everything appended so far), and completes them together, so N concurrent
//!   writers pay for one msync, not N. A put not completed within `sync_flush_timeout` answers
//!   FLUSH_DISK_TIMEOUT (the record is still stored). The broker's sends do not wait on a
//!   oneshot each: their put returns the offset the flush must reach, and the connection holds
//!   the answers until the flushed offset published after every flush
//!   ([`CommitLogFlusher::flushed_watch`]) reaches it. Under load the thread polls for the next
//!   group commit instead of sleeping ([`PollWindow`]), so handing each one to it costs no
//!   wake-up, and the msync never blocks a connection's thread.
//!
//! Waiting is event-driven ([`Waker`], a condvar with a pending flag): appends wake the thread,
//! and the thread wakes the reput service after a flush (under SYNC_FLUSH consumers may only see
//! flushed data). Timeouts on the waits are safety nets, not the mechanism.
//!
//! [`FlushConsumeQueueService`] periodically flushes ConsumeQueues and the index and then writes
//! the checkpoint, whose timestamps recovery relies on.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use tokio::sync::{oneshot, watch};

use crate::checkpoint::Checkpoint;
use crate::commit_log::CommitLog;
use crate::config::{FlushDiskType, MessageStoreConfig};
use crate::consume_queue::ConsumeQueueTable;
use crate::error::StoreError;
use crate::index_service::IndexService;
use crate::live::LiveSettings;
use crate::mapped_file::OS_PAGE_SIZE;
use crate::service::{ServiceState, Waker};

/// Upper bounds of the CommitLog flush-latency buckets, in microseconds (the last bucket, past
/// one second, is unbounded).
pub const FLUSH_LATENCY_BUCKETS_US: [u64; 10] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 50_000, 100_000, 1_000_000,
];

/// What the CommitLog flushes did: how many made progress, how many bytes they made durable in
/// all (bytes per flush is the size of a group commit), and how long each took.
#[derive(Debug, Default)]
pub struct FlushStats {
    flushes: AtomicU64,
    flushed_bytes: AtomicU64,
    latency_buckets: [AtomicU64; FLUSH_LATENCY_BUCKETS_US.len() + 1],
    latency_sum_us: AtomicU64,
}

/// A copy of [`FlushStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushStatsSnapshot {
    /// Flushes that made data durable.
    pub flushes: u64,
    /// Bytes those flushes made durable.
    pub flushed_bytes: u64,
    /// Flushes per bucket of [`FLUSH_LATENCY_BUCKETS_US`] (not cumulative; the last is +Inf).
    pub latency_buckets: [u64; FLUSH_LATENCY_BUCKETS_US.len() + 1],
    /// Time those flushes took in all, in microseconds.
    pub latency_sum_us: u64,
}

impl FlushStats {
    fn record(&self, bytes: u64, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let bucket = FLUSH_LATENCY_BUCKETS_US
            .iter()
            .position(|b| us <= *b)
            .unwrap_or(FLUSH_LATENCY_BUCKETS_US.len());
        self.flushes.fetch_add(1, Ordering::Relaxed);
        self.flushed_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.latency_buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.latency_sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> FlushStatsSnapshot {
        FlushStatsSnapshot {
            flushes: self.flushes.load(Ordering::Relaxed),
            flushed_bytes: self.flushed_bytes.load(Ordering::Relaxed),
            latency_buckets: std::array::from_fn(|i| {
                self.latency_buckets[i].load(Ordering::Relaxed)
            }),
            latency_sum_us: self.latency_sum_us.load(Ordering::Relaxed),
        }
    }
}

/// Attempts at the final flush on shutdown before giving up (RocketMQ `RETRY_TIMES_OVER`).
pub const SHUTDOWN_FLUSH_RETRIES: usize = 10;

/// What one flush did: the flushed offset after it, and whether it moved.
#[derive(Debug, Clone, Copy)]
struct Flush {
    offset: i64,
    progressed: bool,
}

/// What a flush does with appends still pending in the CommitLog.
#[derive(Debug, Clone, Copy)]
enum Pending {
    /// Writes them, waiting for the write lock (an explicit or final flush).
    Commit,
    /// Writes them unless a writer holds the lock (it is appending or committing): the periodic
    /// flushes, for records whose writer never committed them (a connection closed before its
    /// answer went out). The flush thread does not queue behind a writer (a profile under
    /// SYNC_FLUSH load showed one `sched_yield` of the lock's spin per group commit).
    CommitIfUncontended,
    /// Leaves them: a group commit with waiters. Each waiting put committed its own record
    /// before it asked for the flush; the records pending now belong to sends still being read,
    /// which their connection writes together before it holds their answers (the broker's
    /// response fence). Writing them here put those writes on the thread every waiting send
    /// queues on.
    Leave,
}

/// Longest the SYNC_FLUSH thread polls for the next group commit before it sleeps.
pub const GROUP_COMMIT_POLL_MAX: Duration = Duration::from_millis(2);

/// Shortest poll: a window that shrinks below it closes (the thread sleeps at once), and a
/// closed one that grows opens at it.
pub const GROUP_COMMIT_POLL_MIN: Duration = Duration::from_micros(50);

/// How long the SYNC_FLUSH thread polls for the next group commit before sleeping, adapted as
/// the kernel's haltpoll cpuidle governor adapts its own window.
///
/// Why poll: a sleeping thread is woken through a futex, and on this project's box (a VM) the
/// wake-up of a thread whose vCPU halted costs tens of microseconds on every group commit's
/// path, twice when the thread's answer then wakes a sleeping tokio worker. Flushing on the
/// connection's own thread avoided the hand-off but blocked that thread for the msync, so the
/// next sends were read only after it. Measured with 32 synchronous SYNC_FLUSH senders on one
/// connection (10 s runs, alternated): 44–53 k msg/s flushing on the connection's thread,
/// 54–57 k through a thread polling 300 µs, 62–69 k polling 1.5 ms.
///
/// Why adapt: polling burns the core it runs on when nobody yields to it, so a thread that
/// polls in vain (sends sparser than the window) narrows its window until it sleeps at once,
/// and one woken soon after it went to sleep widens it again: a request that came within
/// [`GROUP_COMMIT_POLL_MAX`] of the last group commit would have been caught by a wider window.
#[derive(Debug, Default)]
pub struct PollWindow {
    current: Duration,
}

impl PollWindow {
    /// How long to poll now.
    pub fn current(&self) -> Duration {
        self.current
    }

    /// The poll missed; `idle` is how long after the poll began the thread was woken (`None`:
    /// not at all, the sleep timed out).
    pub fn missed(&mut self, idle: Option<Duration>) {
        self.current = match idle {
            Some(idle) if idle <= GROUP_COMMIT_POLL_MAX => (self.current * 2)
                .max(GROUP_COMMIT_POLL_MIN)
                .min(GROUP_COMMIT_POLL_MAX),
            _ => {
                let half = self.current / 2;
                if half < GROUP_COMMIT_POLL_MIN {
                    Duration::ZERO
                } else {
                    half
                }
            }
        };
        debug_assert!(self.current <= GROUP_COMMIT_POLL_MAX);
    }
}

/// One SYNC_FLUSH waiter.
struct GroupCommitRequest {
    next_offset: i64,
    done: oneshot::Sender<bool>,
}

/// The CommitLog flush thread, in either policy.
pub struct CommitLogFlusher {
    commit_log: Arc<CommitLog>,
    checkpoint: Arc<Checkpoint>,
    mode: FlushDiskType,
    /// The period, the dirty-page threshold and whether the flush is timed, read on every use.
    live: Arc<LiveSettings>,
    thorough_interval: Duration,
    requests: Mutex<Vec<GroupCommitRequest>>,
    waker: Waker,
    /// Called on the thread that flushed after every flush that made progress, once the flush's
    /// waiters are answered (dispatch under SYNC_FLUSH, see `dispatch.rs`).
    on_flushed: Arc<dyn Fn() + Send + Sync>,
    /// The flushed offset, published after every flush: the answers of deferred SYNC_FLUSH
    /// puts wait on it (see [`CommitLogFlusher::flushed_watch`]).
    flushed: watch::Sender<u64>,
    stats: FlushStats,
    state: ServiceState,
}

impl std::fmt::Debug for CommitLogFlusher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitLogFlusher")
            .field("mode", &self.mode)
            .finish()
    }
}

impl CommitLogFlusher {
    pub fn new(
        config: &MessageStoreConfig,
        live: Arc<LiveSettings>,
        commit_log: Arc<CommitLog>,
        checkpoint: Arc<Checkpoint>,
        on_flushed: Arc<dyn Fn() + Send + Sync>,
    ) -> Arc<Self> {
        Arc::new(Self {
            commit_log,
            checkpoint,
            mode: config.flush_disk_type,
            live,
            thorough_interval: config.flush_commit_log_thorough_interval,
            requests: Mutex::new(Vec::new()),
            waker: Waker::new(),
            on_flushed,
            flushed: watch::Sender::new(0),
            stats: FlushStats::default(),
            state: ServiceState::default(),
        })
    }

    /// The CommitLog's flushed offset as the flush thread publishes it after each flush (never
    /// ahead of the truth; until the first flush after start it may lag behind). Receivers
    /// holding answers for a position ask for a flush first (a commit wakes the thread).
    pub fn flushed_watch(&self) -> watch::Receiver<u64> {
        self.flushed.subscribe()
    }

    /// The flushes' counters.
    pub fn stats(&self) -> FlushStatsSnapshot {
        self.stats.snapshot()
    }

    fn publish_flushed(&self, offset: i64) {
        let offset = u64::try_from(offset).unwrap_or(0);
        self.flushed.send_if_modified(|seen| {
            let moved = offset > *seen;
            if moved {
                *seen = offset;
            }
            moved
        });
    }

    /// Starts the flush thread.
    pub fn start(self: &Arc<Self>) -> Result<(), StoreError> {
        let me = Arc::clone(self);
        self.state.spawn("comet-commitlog-flush", move || me.run())
    }

    pub fn mode(&self) -> FlushDiskType {
        self.mode
    }

    /// SYNC_FLUSH: registers a waiter for `next_offset` (the end of the caller's record) and
    /// wakes the thread. The receiver yields true once durable, false if the flush failed or the
    /// service stopped.
    pub fn request(&self, next_offset: i64) -> oneshot::Receiver<bool> {
        let (tx, rx) = oneshot::channel();
        if self.commit_log.flushed_where() >= next_offset {
            let _ = tx.send(true);
            return rx;
        }
        if self.state.is_stopped() {
            let _ = tx.send(false);
            return rx;
        }
        self.requests.lock().push(GroupCommitRequest {
            next_offset,
            done: tx,
        });
        self.waker.wake();
        rx
    }

    /// Wakes the thread unconditionally (SYNC_FLUSH puts that do not wait still need flushing
    /// before they become visible to consumers).
    pub fn wake(&self) {
        self.waker.wake();
    }

    /// ASYNC_FLUSH: wakes the thread once enough pages are dirty to be worth an msync, unless the
    /// flush is timed (then it only runs every interval).
    pub fn wake_if_needed(&self) {
        let live = self.live.get();
        if live.flush_commit_log_timed {
            return;
        }
        let dirty = self.commit_log.max_offset() - self.commit_log.flushed_where();
        let threshold = i64::try_from(live.flush_commit_log_least_pages.max(1) * OS_PAGE_SIZE)
            .unwrap_or(i64::MAX);
        if dirty >= threshold {
            self.waker.wake();
        }
    }

    /// Flushes everything written so far; returns the new flushed offset and records the store
    /// timestamp it covers in the checkpoint.
    pub fn flush_all(&self) -> Result<i64, StoreError> {
        let flush = self.flush_with(0, Pending::Commit)?;
        if flush.progressed {
            (self.on_flushed)();
        }
        Ok(flush.offset)
    }

    /// One flush. The caller calls `on_flushed` when it made progress, at the point that suits
    /// it (a group commit answers its waiters first).
    fn flush_with(&self, least_pages: usize, commit: Pending) -> Result<Flush, StoreError> {
        // Deferred appends first (whoever deferred them commits them before relying on them;
        // this covers a write that failed there and any whose answer never went out). A failed
        // write is retried by the next commit; what is already written is still flushed.
        let committed = match commit {
            Pending::Commit => self.commit_log.commit(),
            Pending::CommitIfUncontended => self.commit_log.try_commit(),
            Pending::Leave => Ok(false),
        };
        if let Err(e) = committed {
            tracing::error!(error = %e, "commit log commit failed");
        }
        // Read the timestamp before the end offset: the record carrying it is then below the
        // end, so once we flushed past the end that timestamp is durable. A record's timestamp
        // is set when the record is placed, which for a deferred append is before its bytes are
        // written; so the timestamp counts only when nothing placed in the segment still waits
        // for its write (the positions are read after the timestamp). A skipped round leaves
        // the checkpoint's timestamp older, which only makes recovery start earlier.
        let ts = self
            .commit_log
            .mapped_file_queue()
            .last_file()
            .map_or(0, |f| {
                let ts = f.store_timestamp();
                if f.appended_position() == f.wrote_position() {
                    ts
                } else {
                    0
                }
            });
        let target = self.commit_log.max_offset();
        let before = self.commit_log.flushed_where();
        let began = Instant::now();
        let flushed = self.commit_log.mapped_file_queue().flush(least_pages)?;
        if flushed > before {
            let bytes = u64::try_from(flushed - before).unwrap_or(0);
            self.stats.record(bytes, began.elapsed());
        }
        // The durable end never passes the written end: the checkpoint and the SYNC_FLUSH
        // answers below would otherwise count unwritten bytes as durable.
        let written = self.commit_log.max_offset();
        assert!(
            flushed <= written,
            "commit log flushed to {flushed}, past its written end {written}"
        );
        if flushed >= target && ts > 0 {
            self.checkpoint.set_physic_msg_timestamp(ts);
        }
        self.publish_flushed(flushed);
        Ok(Flush {
            offset: flushed,
            progressed: flushed > before,
        })
    }

    fn run(&self) {
        let mut last_thorough = Instant::now();
        let mut window = PollWindow::default();
        while !self.state.is_stopped() {
            match self.mode {
                FlushDiskType::AsyncFlush => {
                    // The period is read each time: a change takes effect from the next wait
                    // (and a change wakes the thread, so a shorter one need not wait out the
                    // longer one).
                    self.waker.wait(self.live.get().flush_interval_commit_log);
                    let thorough = last_thorough.elapsed() >= self.thorough_interval;
                    if thorough {
                        last_thorough = Instant::now();
                    }
                    let least = if thorough {
                        0
                    } else {
                        self.live.get().flush_commit_log_least_pages
                    };
                    match self.flush_with(least, Pending::CommitIfUncontended) {
                        Ok(flush) if flush.progressed => (self.on_flushed)(),
                        Ok(_) => {}
                        Err(e) => tracing::error!(error = %e, "commit log flush failed"),
                    }
                }
                FlushDiskType::SyncFlush => {
                    let began = Instant::now();
                    if !self.waker.poll(window.current()) {
                        let woken = self.waker.wait(self.live.get().flush_interval_commit_log);
                        window.missed(woken.then(|| began.elapsed()));
                    }
                    self.group_commit();
                }
            }
        }
        // Final flush: retry a few times so a transient error does not lose the tail.
        let mut progressed = false;
        for attempt in 1..=SHUTDOWN_FLUSH_RETRIES {
            match self.flush_with(0, Pending::Commit) {
                Ok(flush) => {
                    progressed |= flush.progressed;
                    if flush.offset >= self.commit_log.max_offset() {
                        break;
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, attempt, "final commit log flush failed");
                    // Segments before the failing one may have been flushed.
                    progressed = true;
                }
            }
        }
        if progressed {
            (self.on_flushed)();
        }
        self.group_commit();
    }

    /// The flush thread's group commit: every request pending, one flush.
    fn group_commit(&self) {
        let commit = if self.requests.lock().is_empty() {
            Pending::CommitIfUncontended
        } else {
            Pending::Leave
        };
        self.commit_group(commit);
    }

    /// Takes every pending request, flushes once, completes them all.
    fn commit_group(&self, commit: Pending) {
        let pending = std::mem::take(&mut *self.requests.lock());
        let flush = self.flush_with(0, commit).unwrap_or_else(|e| {
            tracing::error!(error = %e, "group commit flush failed");
            // Segments before the failing one may have been flushed: let dispatch look.
            Flush {
                offset: self.commit_log.flushed_where(),
                progressed: true,
            }
        });
        for req in pending {
            let _ = req.done.send(flush.offset >= req.next_offset);
        }
        // Requests that came in during the msync for records it covered need not wait for the
        // next one.
        let covered: Vec<_> = self
            .requests
            .lock()
            .extract_if(.., |req| req.next_offset <= flush.offset)
            .collect();
        for req in covered {
            let _ = req.done.send(true);
        }
        if flush.progressed {
            (self.on_flushed)();
        }
    }

    /// Stops the thread after a final flush and waits for it.
    pub fn shutdown(&self) {
        self.state.stop(&self.waker);
        // Anyone who raced the stop gets an answer rather than a timeout.
        for req in std::mem::take(&mut *self.requests.lock()) {
            let _ = req
                .done
                .send(self.commit_log.flushed_where() >= req.next_offset);
        }
    }
}

/// Source of the "newest dispatched record" timestamp (the reput service).
pub trait DispatchProgress: Send + Sync {
    /// Store timestamp of the last record dispatched to the ConsumeQueues and index.
    fn last_dispatched_store_timestamp(&self) -> i64;
}

/// Periodically flushes ConsumeQueues and the index, then persists the checkpoint.
///
/// The newest IndexFile is flushed on this period only under `messageIndexSafe`, when recovery
/// relies on the index timestamp; otherwise, as in RocketMQ, an IndexFile is flushed once it is
/// full and at shutdown. Its hash slots are written all over its 20 MB: an msync every second wrote
/// back and write-protected thousands of slot pages, each cleaned page costing the dispatch path a
/// write fault and the CPUs running the broker a TLB shoot-down. A process crash loses nothing
/// either way (the page cache keeps the mapping's writes); after a power loss, entries the kernel
/// had not yet written back are missing from the index, as in RocketMQ without `messageIndexSafe`.
pub struct FlushConsumeQueueService {
    queues: Arc<ConsumeQueueTable>,
    index: Option<Arc<RwLock<IndexService>>>,
    /// `messageIndexSafe`: flush the newest IndexFile on the period too.
    message_index_safe: bool,
    checkpoint: Arc<Checkpoint>,
    progress: Arc<dyn DispatchProgress>,
    /// Its period (`flushIntervalConsumeQueue`), read each time the thread goes to sleep.
    live: Arc<LiveSettings>,
    waker: Waker,
    state: ServiceState,
}

impl std::fmt::Debug for FlushConsumeQueueService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlushConsumeQueueService")
            .field("interval", &self.live.get().flush_interval_consume_queue)
            .finish()
    }
}

impl FlushConsumeQueueService {
    pub fn new(
        config: &MessageStoreConfig,
        live: Arc<LiveSettings>,
        queues: Arc<ConsumeQueueTable>,
        index: Option<Arc<RwLock<IndexService>>>,
        checkpoint: Arc<Checkpoint>,
        progress: Arc<dyn DispatchProgress>,
    ) -> Arc<Self> {
        Arc::new(Self {
            queues,
            index,
            message_index_safe: config.message_index_safe,
            checkpoint,
            progress,
            live,
            waker: Waker::new(),
            state: ServiceState::default(),
        })
    }

    pub fn start(self: &Arc<Self>) -> Result<(), StoreError> {
        let me = Arc::clone(self);
        self.state.spawn("comet-cq-flush", move || {
            while !me.state.is_stopped() {
                me.prepare_index_standby();
                me.waker.wait(me.live.get().flush_interval_consume_queue);
                if let Err(e) = me.flush_once() {
                    tracing::error!(error = %e, "consume queue flush failed");
                }
            }
        })
    }

    /// The periodic flush: all ConsumeQueues, the full IndexFiles (and the newest one under
    /// `messageIndexSafe`), then the checkpoint.
    pub fn flush_once(&self) -> Result<(), StoreError> {
        self.flush(self.message_index_safe)
    }

    /// Flushes all ConsumeQueues and every IndexFile, then writes the checkpoint (shutdown, and
    /// an explicit flush of the store).
    pub fn flush_all(&self) -> Result<(), StoreError> {
        self.flush(true)
    }

    fn flush(&self, newest_index_file: bool) -> Result<(), StoreError> {
        let ts = self.progress.last_dispatched_store_timestamp();
        // Neither flush holds the locks dispatch appends under while it waits for the disk.
        self.queues.flush()?;
        // The index timestamp says how far the index is durable. While indexing is off the
        // index holds everything dispatch means it to: its files are flushed whole.
        let indexing = self.live.get().message_index_enable;
        let newest_index_file = newest_index_file || !indexing;
        let index_ts = match &self.index {
            Some(index) => {
                let (handles, full_files_end) = index.read().flush_handles(newest_index_file);
                for handle in handles {
                    handle.flush()?;
                }
                if newest_index_file {
                    ts
                } else {
                    full_files_end
                }
            }
            None => ts,
        };
        if ts > 0 {
            self.checkpoint.set_logics_msg_timestamp(ts);
        }
        if index_ts > 0 {
            self.checkpoint.set_index_msg_timestamp(index_ts);
        }
        self.checkpoint.flush()
    }

    /// Makes the next IndexFile ahead of the roll if one is due (see `index_service.rs`), with
    /// no lock held while the file is created; none while indexing is off.
    pub fn prepare_index_standby(&self) {
        let Some(index) = &self.index else {
            return;
        };
        if !self.live.get().message_index_enable {
            return;
        }
        let plan = {
            let index = index.read();
            if !index.standby_due() {
                return;
            }
            index.standby().plan()
        };
        if let Some(plan) = plan
            && let Err(e) = plan.make()
        {
            tracing::warn!(error = %e, "cannot make the next index file ahead; the roll will");
        }
    }

    /// Wakes the thread for a flush now (it then sleeps its period as read after that flush).
    pub fn wake(&self) {
        self.waker.wake();
    }

    /// Stops the thread (the caller does the final `flush_once`) and deletes an unused standby
    /// IndexFile.
    pub fn shutdown(&self) {
        self.state.stop(&self.waker);
        if let Some(index) = &self.index
            && let Err(e) = index.read().standby().discard()
        {
            tracing::warn!(error = %e, "cannot delete the unused index file made ahead");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commit_log::append_test_message;
    use std::sync::atomic::AtomicUsize;

    /// A CommitLog and its flusher in `mode`, thread not started; counts `on_flushed` calls.
    fn parts(
        root: &std::path::Path,
        mode: FlushDiskType,
    ) -> (Arc<CommitLog>, Arc<CommitLogFlusher>, Arc<AtomicUsize>) {
        let mut config = MessageStoreConfig::with_root(root);
        config.mapped_file_size_commit_log = 1024 * 1024;
        config.flush_disk_type = mode;
        let commit_log = Arc::new(CommitLog::new(&config));
        commit_log.load().expect("load");
        let checkpoint = Arc::new(Checkpoint::open(&root.join("checkpoint")).expect("checkpoint"));
        let flushes = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&flushes);
        let flusher = CommitLogFlusher::new(
            &config,
            LiveSettings::of(&config),
            Arc::clone(&commit_log),
            checkpoint,
            Arc::new(move || {
                counted.fetch_add(1, Ordering::SeqCst);
            }),
        );
        (commit_log, flusher, flushes)
    }

    /// The SYNC_FLUSH thread answers every waiter its group commit covers, publishes the
    /// flushed offset and calls `on_flushed`, for requests made while it sleeps and while it
    /// polls after a group commit.
    #[test]
    fn the_flush_thread_answers_the_waiters_its_group_commit_covers() {
        const WAIT: Duration = Duration::from_secs(30);
        let dir = tempfile::tempdir().expect("tempdir");
        let (commit_log, flusher, flushes) = parts(dir.path(), FlushDiskType::SyncFlush);
        flusher.start().expect("start");
        let published = flusher.flushed_watch();
        for round in 0..3 {
            append_test_message(&commit_log, "Waiters", 0, 64);
            let first = flusher.request(commit_log.max_offset());
            append_test_message(&commit_log, "Waiters", 0, 64);
            let end = commit_log.max_offset();
            let second = flusher.request(end);
            for rx in [first, second] {
                let (tx, answered) = std::sync::mpsc::channel();
                std::thread::spawn(move || tx.send(rx.blocking_recv()));
                assert_eq!(answered.recv_timeout(WAIT), Ok(Ok(true)), "round {round}");
            }
            assert!(commit_log.flushed_where() >= end);
            assert!(*published.borrow() >= u64::try_from(end).expect("offset"));
            // The next round's requests come while the thread polls (right away) or after
            // it went to sleep.
            if round == 1 {
                std::thread::sleep(GROUP_COMMIT_POLL_MAX * 2);
            }
        }
        assert!(flushes.load(Ordering::SeqCst) >= 1);
        flusher.shutdown();
    }

    /// Every flush leaves the durable end at the written end, never past it, and the
    /// checkpoint's CommitLog timestamp is then the newest (flushed) record's.
    #[test]
    fn flushes_never_pass_the_written_end_and_the_checkpoint_follows_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (commit_log, flusher, _) = parts(dir.path(), FlushDiskType::AsyncFlush);
        for _ in 0..5 {
            append_test_message(&commit_log, "Flushed", 0, 300);
            let flushed = flusher.flush_all().expect("flush");
            assert_eq!(flushed, commit_log.max_offset());
            assert_eq!(commit_log.flushed_where(), flushed);
            let newest = commit_log
                .mapped_file_queue()
                .last_file()
                .map_or(0, |f| f.store_timestamp());
            assert!(newest > 0);
            assert_eq!(flusher.checkpoint.physic_msg_timestamp(), newest);
        }
        // Every flush made progress and is counted, with the bytes it made durable.
        let stats = flusher.stats();
        assert_eq!(stats.flushes, 5);
        assert_eq!(
            stats.flushed_bytes,
            u64::try_from(commit_log.flushed_where()).unwrap()
        );
        assert_eq!(stats.latency_buckets.iter().sum::<u64>(), 5);
        // A flush with nothing new is not counted.
        flusher.flush_all().expect("flush");
        assert_eq!(flusher.stats().flushes, 5);
    }

    /// A deferred record's timestamp is set before its bytes are written: a flush in between
    /// must not hand it to the checkpoint, whose timestamp recovery trusts as durable.
    #[test]
    fn the_checkpoint_takes_no_timestamp_of_a_record_still_waiting_for_its_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (commit_log, flusher, _) = parts(dir.path(), FlushDiskType::AsyncFlush);
        append_test_message(&commit_log, "Written", 0, 300);
        flusher.flush_all().expect("flush");
        let written_ts = flusher.checkpoint.physic_msg_timestamp();
        assert!(written_ts > 0);
        // The next record must carry a later millisecond to be told apart.
        while comet_protocol::time::now_millis() <= written_ts {
            std::hint::spin_loop();
        }
        let mut msg = comet_protocol::message::MessageExt::new("Deferred", vec![7u8; 300].into());
        msg.born_host = std::net::SocketAddr::from(([127, 0, 0, 1], 1));
        msg.store_host = msg.born_host;
        assert!(
            commit_log
                .put_message_with(msg, crate::commit_log::Commit::Deferred)
                .is_ok()
        );
        let newest = commit_log.mapped_file_queue().last_file().expect("segment");
        let pending_ts = newest.store_timestamp();
        assert!(pending_ts > written_ts && newest.appended_position() > newest.wrote_position());

        flusher.flush_with(0, Pending::Leave).expect("flush");
        assert_eq!(flusher.checkpoint.physic_msg_timestamp(), written_ts);

        commit_log.commit().expect("commit");
        flusher.flush_all().expect("flush");
        assert_eq!(flusher.checkpoint.physic_msg_timestamp(), pending_ts);
    }

    struct FixedProgress(i64);

    impl DispatchProgress for FixedProgress {
        fn last_dispatched_store_timestamp(&self) -> i64 {
            self.0
        }
    }

    /// The periodic flush leaves the newest IndexFile to the kernel (and its timestamp out of
    /// the checkpoint) unless `messageIndexSafe`; full files and the final flush take it all.
    #[test]
    fn the_newest_index_file_is_flushed_periodically_only_when_index_safe() {
        use crate::index_service::IndexConfig;
        for safe in [false, true] {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut config = MessageStoreConfig::with_root(dir.path());
            config.message_index_safe = safe;
            let cfg = IndexConfig {
                max_hash_slot_num: 8,
                max_index_num: 3,
            };
            let index = Arc::new(RwLock::new(
                IndexService::open(dir.path(), cfg).expect("index"),
            ));
            let checkpoint =
                Arc::new(Checkpoint::open(&dir.path().join("checkpoint")).expect("checkpoint"));
            let service = FlushConsumeQueueService::new(
                &config,
                LiveSettings::of(&config),
                Arc::new(ConsumeQueueTable::new(dir.path(), 1000)),
                Some(Arc::clone(&index)),
                Arc::clone(&checkpoint),
                Arc::new(FixedProgress(9_000)),
            );
            let put = |i: i64| {
                index
                    .write()
                    .put("T", &[format!("k{i}").as_str()], i * 100, i * 1000)
                    .expect("put");
            };
            put(1);
            service.flush_once().expect("flush");
            assert_eq!(checkpoint.logics_msg_timestamp(), 9_000);
            let newest_dirty = index.read().flush_handles(true).0.len();
            if safe {
                assert_eq!(checkpoint.index_msg_timestamp(), 9_000, "safe: flushed");
                assert_eq!(newest_dirty, 0);
            } else {
                assert_eq!(checkpoint.index_msg_timestamp(), 0, "nothing durable yet");
                assert_eq!(newest_dirty, 1, "the newest file is left dirty");
            }
            // Two entries fill a file: the next put rolls, and the full file is flushed.
            put(2);
            put(3);
            assert_eq!(index.read().files().len(), 2);
            service.flush_once().expect("flush");
            let (handles, full_end) = index.read().flush_handles(false);
            assert!(handles.is_empty(), "the full file was flushed");
            assert_eq!(full_end, 2_000);
            let expected = if safe { 9_000 } else { 2_000 };
            assert_eq!(checkpoint.index_msg_timestamp(), expected);
            // The final flush takes the newest file too.
            service.flush_all().expect("flush all");
            assert!(index.read().flush_handles(true).0.is_empty());
            assert_eq!(checkpoint.index_msg_timestamp(), 9_000);
        }
    }

    /// Under ASYNC_FLUSH an append asks for a flush once `least_pages` are dirty, unless the flush
    /// is timed: then only the interval runs it. Observed through the waker, with no thread
    /// consuming its wake-ups.
    #[test]
    fn timed_async_flush_is_not_woken_by_appends() {
        for timed in [true, false] {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut config = MessageStoreConfig::with_root(dir.path());
            config.mapped_file_size_commit_log = 1024 * 1024;
            config.flush_commit_log_timed = timed;
            let commit_log = Arc::new(CommitLog::new(&config));
            commit_log.load().expect("load");
            let checkpoint =
                Arc::new(Checkpoint::open(&dir.path().join("checkpoint")).expect("checkpoint"));
            let flusher = CommitLogFlusher::new(
                &config,
                LiveSettings::of(&config),
                Arc::clone(&commit_log),
                checkpoint,
                Arc::new(|| {}),
            );
            while commit_log.max_offset() < 8 * OS_PAGE_SIZE as i64 {
                crate::commit_log::append_test_message(&commit_log, "Timed", 0, 1024);
                flusher.wake_if_needed();
            }
            assert_eq!(
                flusher.waker.wait(Duration::ZERO),
                !timed,
                "timed = {timed}"
            );
        }
    }

    /// The window opens at the minimum when a wake-up came soon after the thread slept,
    /// doubles up to the maximum while that goes on, and halves down to closed when wake-ups
    /// come later than the maximum or not at all.
    #[test]
    fn poll_window_widens_on_near_misses_and_closes_on_far_ones() {
        let mut window = PollWindow::default();
        assert_eq!(window.current(), Duration::ZERO, "starts closed");
        window.missed(Some(Duration::from_micros(300)));
        assert_eq!(window.current(), GROUP_COMMIT_POLL_MIN);
        window.missed(Some(Duration::from_micros(300)));
        assert_eq!(window.current(), GROUP_COMMIT_POLL_MIN * 2);
        for _ in 0..20 {
            window.missed(Some(GROUP_COMMIT_POLL_MAX));
        }
        assert_eq!(window.current(), GROUP_COMMIT_POLL_MAX, "capped");
        window.missed(None);
        assert_eq!(window.current(), GROUP_COMMIT_POLL_MAX / 2);
        window.missed(Some(GROUP_COMMIT_POLL_MAX + Duration::from_micros(1)));
        assert_eq!(window.current(), GROUP_COMMIT_POLL_MAX / 4);
        for _ in 0..20 {
            window.missed(None);
        }
        assert_eq!(window.current(), Duration::ZERO, "closed again");
    }
}
