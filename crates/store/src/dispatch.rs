//! Dispatch ("reput"): building the ConsumeQueues and the index from the CommitLog.
//!
//! The CommitLog is the only thing written on the put path; everything consumers read by queue
//! offset or key is derived from it here, by one thread that follows the CommitLog from the
//! dispatched offset up to the *dispatchable limit*:
//! - ASYNC_FLUSH: the written position (what is in the page cache);
//! - SYNC_FLUSH: the **flushed** position — a consumer must never see a message that a power
//!   cut could take back after the producer was told it failed or timed out;
//! - on a slave, never past the last complete record its master sent (`replica.rs`).
//!
//! Per record: a ConsumeQueue unit (not for PREPARED/ROLLBACK transaction records, which are
//! invisible until committed), index entries for UNIQ_KEY and each KEYS entry (not for ROLLBACK;
//! only while `messageIndexEnable` is on in the live settings), then the registered
//! [`MessageArrivingListener`], which wakes long-polling pull requests.
//!
//! Under ASYNC_FLUSH the appending thread dispatches its own record right after the append
//! ([`ReputService::dispatch_now`]): waking a dispatch thread for every message cost more CPU (a
//! context switch per message) than the dispatch itself, and a hop of latency before the listener.
//! Only one caller dispatches at a time; an append that finds a dispatch running leaves its record
//! to that one, which looks again before it stops, so no record waits for a timer. Under SYNC_FLUSH
//! records become dispatchable only when flushed, so the flush thread dispatches them itself, right
//! after it answered the sends its flush covered: waking this thread after every group commit cost
//! a context switch per flush (32 synchronous SYNC_FLUSH senders: broker CPU per send 21 → 19 µs,
//! 40–42 k → 41–44 k msg/s). The thread runs in both modes as a backstop on a slow timer. The same
//! [`Dispatcher`] is used synchronously by recovery to re-dispatch the log tail.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use comet_protocol::message::properties::keys;
use comet_protocol::message::record::{self, RecordView};
use comet_protocol::message::{BLANK_ENTRY_LEN, BLANK_MAGIC, sysflag, tags_hash};
use parking_lot::{Condvar, Mutex, RwLock};

use crate::commit_log::CommitLog;
use crate::config::FlushDiskType;
use crate::consume_queue::{ConsumeQueueTable, CqUnit};
use crate::error::StoreError;
use crate::flush::DispatchProgress;
use crate::index_service::IndexService;
use crate::live::LiveSettings;
use crate::service::{ServiceState, Waker};

/// Topic of delayed messages; its ConsumeQueue tags code is the delivery time.
pub use comet_protocol::naming::SCHEDULE_TOPIC;
/// Safety-net period of the reput thread's wait; wake-ups normally come from appends/flushes.
pub const REPUT_IDLE_WAIT: Duration = Duration::from_millis(1000);
/// Delivery delay used when a DELAY level has no table entry (RocketMQ's fallback).
const DEFAULT_DELIVER_DELAY_MS: i64 = 1000;

/// What the arriving listener is told about each dispatched message.
#[derive(Debug, Clone, Copy)]
pub struct MessageArrival<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    /// Queue offset of the message + 1: the queue's new max offset.
    pub max_offset: i64,
    pub tags_code: i64,
    pub store_timestamp_ms: i64,
    /// Raw properties string (`name 0x01 value 0x02` pairs), for SQL92-style filters.
    pub properties: &'a [u8],
}

/// Called by the reput thread for every message that became consumable. Implementations must be
/// quick (hand off to another task): they run on the dispatch thread.
pub trait MessageArrivingListener: Send + Sync {
    fn arriving(&self, arrival: &MessageArrival<'_>);
}

/// Everything dispatch needs from one record, borrowed from the mapped CommitLog.
#[derive(Debug, Clone, Copy)]
pub struct DispatchRequest<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub commit_log_offset: i64,
    pub msg_size: i32,
    pub tags_code: i64,
    pub store_timestamp_ms: i64,
    pub consume_queue_offset: i64,
    pub sys_flag: i32,
    pub properties: &'a [u8],
    /// UNIQ_KEY, read with TAGS in one pass over the properties.
    pub uniq_key: Option<&'a str>,
    /// KEYS (space-separated), read with TAGS in one pass over the properties.
    pub keys: Option<&'a str>,
}

impl<'a> DispatchRequest<'a> {
    /// Builds the request for a decoded record. The tags code is the Java hash of TAGS, or for
    /// SCHEDULE_TOPIC_XXXX the delivery timestamp `store_timestamp + delay(level)`.
    pub fn from_view(view: &RecordView<'a>, delay_levels_ms: &[i64]) -> Self {
        let [tags, uniq_key, user_keys, delay_level] = view.properties_of([
            keys::TAGS,
            keys::UNIQ_KEY,
            keys::KEYS,
            keys::DELAY_TIME_LEVEL,
        ]);
        let mut tags_code = tags.filter(|t| !t.is_empty()).map_or(0, tags_hash);
        if view.topic == SCHEDULE_TOPIC
            && let Some(level) = delay_level.and_then(|l| l.trim().parse::<i64>().ok())
            && level > 0
        {
            let max_level = i64::try_from(delay_levels_ms.len()).unwrap_or(i64::MAX);
            let level = level.min(max_level);
            let delay = usize::try_from(level - 1)
                .ok()
                .and_then(|i| delay_levels_ms.get(i))
                .copied()
                .unwrap_or(DEFAULT_DELIVER_DELAY_MS);
            tags_code = view.store_timestamp.saturating_add(delay);
        }
        Self {
            topic: view.topic,
            queue_id: view.queue_id,
            commit_log_offset: view.commit_log_offset,
            msg_size: view.total_size,
            tags_code,
            store_timestamp_ms: view.store_timestamp,
            consume_queue_offset: view.queue_offset,
            sys_flag: view.sys_flag,
            properties: view.properties,
            uniq_key,
            keys: user_keys,
        }
    }

    /// Whether the record gets a ConsumeQueue unit (not PREPARED or ROLLBACK).
    pub fn is_consumable(&self) -> bool {
        sysflag::gets_queue_unit(self.sys_flag)
    }

    /// Whether the record gets index entries (everything but ROLLBACK).
    pub fn is_indexed(&self) -> bool {
        sysflag::gets_index_entries(self.sys_flag)
    }
}

/// Applies dispatch requests to the ConsumeQueues and the index.
pub struct Dispatcher {
    queues: Arc<ConsumeQueueTable>,
    index: Option<Arc<RwLock<IndexService>>>,
    /// Whether records get index entries now (`messageIndexEnable`).
    live: Arc<LiveSettings>,
    delay_levels_ms: Vec<i64>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("index", &self.index.is_some())
            .finish()
    }
}

impl Dispatcher {
    /// Dispatches into `queues` and, while `live` has `messageIndexEnable` on, `index`.
    pub fn new(
        queues: Arc<ConsumeQueueTable>,
        index: Option<Arc<RwLock<IndexService>>>,
        live: Arc<LiveSettings>,
        delay_levels_ms: Vec<i64>,
    ) -> Self {
        Self {
            queues,
            index,
            live,
            delay_levels_ms,
        }
    }

    /// The live settings it reads `messageIndexEnable` from.
    pub fn live(&self) -> &Arc<LiveSettings> {
        &self.live
    }

    pub fn delay_levels_ms(&self) -> &[i64] {
        &self.delay_levels_ms
    }

    /// Writes the ConsumeQueue unit and index entries of one record. Idempotent: re-dispatching
    /// a record already present is a no-op in both.
    pub fn dispatch(&self, req: &DispatchRequest<'_>) -> Result<(), StoreError> {
        if req.is_consumable() {
            let queue = self.queues.find_or_create(req.topic, req.queue_id)?;
            queue.write().put(
                req.consume_queue_offset,
                CqUnit {
                    commit_log_offset: req.commit_log_offset,
                    size: req.msg_size,
                    tags_code: req.tags_code,
                },
            )?;
        }
        if req.is_indexed()
            && let Some(index) = &self.index
            && self.live.get().message_index_enable
        {
            let mut all: Vec<&str> = Vec::new();
            all.extend(req.uniq_key);
            if let Some(k) = req.keys {
                all.extend(k.split(' ').filter(|k| !k.is_empty()));
            }
            if !all.is_empty() {
                index.write().put(
                    req.topic,
                    &all,
                    req.commit_log_offset,
                    req.store_timestamp_ms,
                )?;
            }
        }
        Ok(())
    }
}

/// Outcome of scanning one stretch of the CommitLog.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanOutcome {
    /// Offset the scan reached (next record to look at).
    pub next_offset: i64,
    /// Records dispatched.
    pub records: u64,
}

/// Walks the records in `[from, limit)` of the CommitLog, calling `each` for every record
/// (with its decoded view). A BLANK entry, or a tail too short for one, rolls to the next
/// segment. At an undecodable record `on_bad(offset, reason)` decides: `Some(next)` continues at
/// `next` (beyond `offset`), `None` stops there.
pub fn scan_records(
    commit_log: &CommitLog,
    from: i64,
    limit: i64,
    mut each: impl FnMut(&RecordView<'_>),
    mut on_bad: impl FnMut(i64, &str) -> Option<i64>,
) -> ScanOutcome {
    let blank_len = i64::try_from(BLANK_ENTRY_LEN).unwrap_or(i64::MAX);
    let mut offset = from;
    let mut records = 0u64;
    'files: while offset < limit {
        let Some(file) = commit_log.find_file(offset) else {
            break;
        };
        let base = file.file_from_offset();
        let file_end = base + i64::try_from(file.file_size()).unwrap_or(0);
        let readable_end = base + i64::try_from(file.wrote_position()).unwrap_or(0);
        let file_full = readable_end >= file_end;
        let end = limit.min(readable_end);
        loop {
            if file_end - offset < blank_len {
                // Records always leave room for a BLANK entry, so this is the segment's end.
                if file_full {
                    offset = file_end;
                    continue 'files;
                }
                break 'files;
            }
            if offset >= end {
                break 'files;
            }
            let pos = usize::try_from(offset - base).unwrap_or(usize::MAX);
            let len = usize::try_from(end - offset).unwrap_or(0);
            let Some(buf) = file.read_at(pos, len) else {
                break 'files;
            };
            if record::peek_magic(buf) == Some(BLANK_MAGIC) {
                if file_full {
                    offset = file_end;
                    continue 'files;
                }
                break 'files;
            }
            if end < readable_end && cut_by_limit(buf, offset, file_end) {
                // The rest of the record is written but beyond `limit`: a later pass reads it
                // whole. (One that runs past the written end is judged below: no writer leaves
                // such a record below its log's end, so it is damage.)
                break 'files;
            }
            match record::decode_record_view(buf) {
                Ok(view) => {
                    each(&view);
                    records += 1;
                    offset += i64::from(view.total_size);
                }
                Err(e) => match on_bad(offset, &e.to_string()) {
                    Some(next) if next > offset => {
                        offset = next;
                        continue 'files;
                    }
                    _ => break 'files,
                },
            }
        }
    }
    ScanOutcome {
        next_offset: offset,
        records,
    }
}

/// Whether the record starting `buf` (the bytes at `offset` up to the scan's limit) continues
/// past the limit while still fitting in its segment. A slave's flushed end, which bounds
/// SYNC_FLUSH dispatch, may fall inside a record its master sent in two parts; that record is
/// incomplete for now, not undecodable.
fn cut_by_limit(buf: &[u8], offset: i64, file_end: i64) -> bool {
    match record::peek_total_size(buf) {
        None => true,
        Some(total) => {
            usize::try_from(total).is_ok_and(|t| t > buf.len())
                && offset.saturating_add(i64::from(total)) <= file_end
        }
    }
}

/// The reput thread.
pub struct ReputService {
    commit_log: Arc<CommitLog>,
    dispatcher: Dispatcher,
    mode: FlushDiskType,
    reput_from_offset: AtomicI64,
    last_store_timestamp_ms: AtomicI64,
    dispatched_records: AtomicU64,
    waker: Arc<Waker>,
    progress_lock: Mutex<()>,
    progress_cv: Condvar,
    /// Held for a whole dispatch pass: passes never overlap.
    pass: Mutex<()>,
    /// Who dispatches now, and whether an append asked for another look meanwhile.
    runner: Mutex<RunnerState>,
    listener: RwLock<Option<Arc<dyn MessageArrivingListener>>>,
    state: ServiceState,
}

/// See [`ReputService::dispatch_now`].
#[derive(Debug, Default)]
struct RunnerState {
    running: bool,
    again: bool,
}

/// Clears [`RunnerState::running`] when a dispatch pass unwinds; disarmed (`None`) on the normal
/// way out, which clears it itself.
struct Dispatching<'a>(Option<&'a Mutex<RunnerState>>);

impl Drop for Dispatching<'_> {
    fn drop(&mut self) {
        if let Some(runner) = self.0 {
            runner.lock().running = false;
        }
    }
}

impl std::fmt::Debug for ReputService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReputService")
            .field("reput_from_offset", &self.reput_from_offset())
            .finish()
    }
}

impl DispatchProgress for ReputService {
    fn last_dispatched_store_timestamp(&self) -> i64 {
        self.last_store_timestamp_ms.load(Ordering::Acquire)
    }
}

impl ReputService {
    pub fn new(
        commit_log: Arc<CommitLog>,
        dispatcher: Dispatcher,
        mode: FlushDiskType,
        waker: Arc<Waker>,
        from: i64,
    ) -> Arc<Self> {
        Arc::new(Self {
            commit_log,
            dispatcher,
            mode,
            reput_from_offset: AtomicI64::new(from),
            last_store_timestamp_ms: AtomicI64::new(0),
            dispatched_records: AtomicU64::new(0),
            waker,
            progress_lock: Mutex::new(()),
            progress_cv: Condvar::new(),
            pass: Mutex::new(()),
            runner: Mutex::new(RunnerState::default()),
            listener: RwLock::new(None),
            state: ServiceState::default(),
        })
    }

    /// Registers the listener woken for every consumable message.
    pub fn set_listener(&self, listener: Option<Arc<dyn MessageArrivingListener>>) {
        *self.listener.write() = listener;
    }

    /// Next CommitLog offset to dispatch.
    pub fn reput_from_offset(&self) -> i64 {
        self.reput_from_offset.load(Ordering::Acquire)
    }

    /// Records dispatched since start.
    pub fn dispatched_records(&self) -> u64 {
        self.dispatched_records.load(Ordering::Relaxed)
    }

    /// The offset up to which records may be dispatched (see the module docs).
    pub fn dispatch_limit(&self) -> i64 {
        let limit = match self.mode {
            FlushDiskType::AsyncFlush => self.commit_log.max_offset(),
            FlushDiskType::SyncFlush => self.commit_log.flushed_where(),
        };
        // A slave's log may end inside a record its master has not finished sending.
        limit.min(self.commit_log.dispatch_ceiling())
    }

    /// Bytes written but not yet dispatched.
    pub fn behind(&self) -> i64 {
        (self.dispatch_limit() - self.reput_from_offset()).max(0)
    }

    /// Wakes the thread (an append or a flush happened).
    pub fn wake(&self) {
        self.waker.wake();
    }

    pub fn start(self: &Arc<Self>) -> Result<(), StoreError> {
        let me = Arc::clone(self);
        self.state.spawn("comet-reput", move || {
            while !me.state.is_stopped() {
                me.dispatch_now();
                me.waker.wait(REPUT_IDLE_WAIT);
            }
            // Drain what is dispatchable so a clean shutdown leaves the queues complete.
            me.do_reput();
        })
    }

    /// Dispatches everything dispatchable, unless another caller is dispatching right now: then
    /// that caller is asked to look again before it stops, which covers everything appended
    /// before this call. Cheap when there is nothing to do.
    pub fn dispatch_now(&self) {
        {
            let mut runner = self.runner.lock();
            if runner.running {
                runner.again = true;
                return;
            }
            runner.running = true;
        }
        // Should a pass unwind (a panicking listener), the guard still clears `running`: left set,
        // every later caller would leave its record to a dispatcher that no longer exists.
        let mut dispatching = Dispatching(Some(&self.runner));
        loop {
            self.do_reput();
            let mut runner = self.runner.lock();
            if runner.again {
                runner.again = false;
            } else {
                // Cleared under the same lock that read `again`, so no request for another look
                // can slip in between.
                runner.running = false;
                dispatching.0 = None;
                return;
            }
        }
    }

    /// Dispatches everything up to the current limit, waiting for a pass in progress to end
    /// first; returns the records dispatched.
    pub fn do_reput(&self) -> u64 {
        let _pass = self.pass.lock();
        let mut total = 0;
        loop {
            let mut from = self.reput_from_offset();
            let min = self.commit_log.min_offset();
            if from < min {
                tracing::warn!(
                    from,
                    min,
                    "reput offset below the commit log start (retention); skipping ahead"
                );
                from = min;
            }
            let limit = self.dispatch_limit();
            if from >= limit {
                break;
            }
            let listener = self.listener.read().clone();
            let outcome = scan_records(
                &self.commit_log,
                from,
                limit,
                |view| {
                    let req = DispatchRequest::from_view(view, self.dispatcher.delay_levels_ms());
                    if let Err(e) = self.dispatcher.dispatch(&req) {
                        tracing::error!(topic = req.topic, queue_id = req.queue_id,
                            offset = req.commit_log_offset, error = %e, "dispatch failed");
                    }
                    self.last_store_timestamp_ms
                        .store(req.store_timestamp_ms, Ordering::Release);
                    // Publish progress before waking consumers, so a pull triggered by the
                    // listener sees the unit.
                    self.reput_from_offset.store(
                        req.commit_log_offset + i64::from(req.msg_size),
                        Ordering::Release,
                    );
                    if req.is_consumable()
                        && let Some(l) = &listener
                    {
                        l.arriving(&MessageArrival {
                            topic: req.topic,
                            queue_id: req.queue_id,
                            max_offset: req.consume_queue_offset + 1,
                            tags_code: req.tags_code,
                            store_timestamp_ms: req.store_timestamp_ms,
                            properties: req.properties,
                        });
                    }
                },
                |offset, reason| {
                    tracing::error!(
                        offset,
                        reason,
                        "undecodable record in the live commit log; skipping to the next segment"
                    );
                    Some(self.commit_log.roll_next_file(offset))
                },
            );
            self.reput_from_offset
                .fetch_max(outcome.next_offset, Ordering::AcqRel);
            self.commit_log
                .page_release()
                .note(u64::try_from(outcome.next_offset - from).unwrap_or(0));
            self.dispatched_records
                .fetch_add(outcome.records, Ordering::Relaxed);
            total += outcome.records;
            {
                let _g = self.progress_lock.lock();
                self.progress_cv.notify_all();
            }
            if outcome.next_offset <= from {
                break;
            }
        }
        total
    }

    /// Blocks until everything below `offset` is dispatched or `timeout` passes.
    pub fn wait_dispatched(&self, offset: i64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut guard = self.progress_lock.lock();
        while self.reput_from_offset() < offset {
            if self
                .progress_cv
                .wait_until(&mut guard, deadline)
                .timed_out()
            {
                return self.reput_from_offset() >= offset;
            }
        }
        true
    }

    /// Stops the thread after a final drain.
    pub fn shutdown(&self) {
        self.state.stop(&self.waker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commit_log::append_test_message;
    use crate::config::MessageStoreConfig;

    const THREADS: usize = 8;
    const PER_THREAD: usize = 2000;
    const QUEUES: i32 = 4;

    struct PanicOnce(std::sync::atomic::AtomicBool);

    impl MessageArrivingListener for PanicOnce {
        fn arriving(&self, _: &MessageArrival<'_>) {
            if !self.0.swap(true, Ordering::SeqCst) {
                panic!("listener fails once");
            }
        }
    }

    /// A CommitLog, its ConsumeQueues and an ASYNC_FLUSH reput service with no thread: records
    /// are dispatched only by `dispatch_now` calls.
    fn inline_store(
        root: &std::path::Path,
    ) -> (Arc<CommitLog>, Arc<ConsumeQueueTable>, Arc<ReputService>) {
        let mut config = MessageStoreConfig::with_root(root);
        config.mapped_file_size_commit_log = 4 * 1024 * 1024;
        let commit_log = Arc::new(CommitLog::new(&config));
        commit_log.load().expect("load");
        let queues = Arc::new(ConsumeQueueTable::new(root, 1024));
        let reput = ReputService::new(
            Arc::clone(&commit_log),
            Dispatcher::new(
                Arc::clone(&queues),
                None,
                LiveSettings::of(&config),
                Vec::new(),
            ),
            FlushDiskType::AsyncFlush,
            Arc::new(Waker::new()),
            0,
        );
        (commit_log, queues, reput)
    }

    /// A limit inside a record (a slave's flushed end can be one) ends the scan before that
    /// record; the next scan, with the limit past it, reads it. Nothing is skipped.
    #[test]
    fn a_limit_inside_a_record_waits_for_the_rest_of_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (commit_log, _queues, _reput) = inline_store(dir.path());
        append_test_message(&commit_log, "Cut", 0, 100);
        let first_end = commit_log.max_offset();
        append_test_message(&commit_log, "Cut", 0, 100);
        let end = commit_log.max_offset();
        for cut in [first_end + 1, first_end + 4, first_end + 40, end - 1] {
            let outcome = scan_records(&commit_log, 0, cut, |_| {}, |_, _| Some(i64::MAX));
            assert_eq!(
                (outcome.next_offset, outcome.records),
                (first_end, 1),
                "cut {cut}"
            );
        }
        let outcome = scan_records(&commit_log, first_end, end, |_| {}, |_, _| None);
        assert_eq!((outcome.next_offset, outcome.records), (end, 1));
    }

    /// A record that runs past the written end of the log is damage, not a record still being
    /// received: the scan hands it to `on_bad` rather than wait for bytes no writer will add.
    #[test]
    fn a_record_running_past_the_written_end_is_judged_damaged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (commit_log, _queues, _reput) = inline_store(dir.path());
        append_test_message(&commit_log, "Damaged", 0, 100);
        let first_end = commit_log.max_offset();
        let mut head = 1000_i32.to_be_bytes().to_vec();
        head.extend_from_slice(&comet_protocol::message::MESSAGE_MAGIC_V2.to_be_bytes());
        let last = commit_log
            .mapped_file_queue()
            .last_file()
            .expect("a segment");
        last.append(&head).expect("append");
        let end = commit_log.max_offset();
        assert_eq!(end, first_end + 8);
        let mut judged = Vec::new();
        let outcome = scan_records(
            &commit_log,
            0,
            end,
            |_| {},
            |offset, _| {
                judged.push(offset);
                None
            },
        );
        assert_eq!((outcome.next_offset, outcome.records), (first_end, 1));
        assert_eq!(judged, vec![first_end]);
    }

    /// A pass that unwinds must not leave the "a dispatcher is running" mark behind: the next
    /// caller dispatches instead of leaving its record to nobody.
    #[test]
    fn inline_dispatch_goes_on_after_a_pass_unwinds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (commit_log, queues, reput) = inline_store(dir.path());
        reput.set_listener(Some(Arc::new(PanicOnce(Default::default()))));
        append_test_message(&commit_log, "Unwind", 0, 16);
        let unwound =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| reput.dispatch_now()));
        assert!(unwound.is_err(), "the listener's panic reaches the caller");
        append_test_message(&commit_log, "Unwind", 0, 16);
        append_test_message(&commit_log, "Unwind", 0, 16);
        reput.dispatch_now();
        assert_eq!(reput.reput_from_offset(), commit_log.max_offset());
        let units = queues.find("Unwind", 0).map(|q| q.read().max_offset());
        assert_eq!(units, Some(3));
    }

    /// Appenders that dispatch inline, with no reput thread running: once every
    /// `dispatch_now` has returned, every record must be dispatched exactly once — a record whose
    /// appender found another dispatch running is left to that one, which must look again before
    /// stopping, and passes must never overlap (a unit written twice would show in the counts).
    #[test]
    fn inline_dispatch_leaves_nothing_behind_without_the_thread() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (commit_log, queues, reput) = inline_store(dir.path());
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let (commit_log, reput) = (Arc::clone(&commit_log), Arc::clone(&reput));
                std::thread::spawn(move || {
                    for _ in 0..PER_THREAD {
                        let queue_id = i32::try_from(t).expect("small") % QUEUES;
                        append_test_message(&commit_log, "InlineDispatch", queue_id, 16);
                        reput.dispatch_now();
                    }
                })
            })
            .collect();
        for t in threads {
            assert!(t.join().is_ok(), "appender panicked");
        }
        assert_eq!(reput.reput_from_offset(), commit_log.max_offset());
        let units: i64 = (0..QUEUES)
            .filter_map(|q| queues.find("InlineDispatch", q))
            .map(|q| q.read().max_offset())
            .sum();
        assert_eq!(units, i64::try_from(THREADS * PER_THREAD).expect("small"));
        assert_eq!(
            reput.dispatched_records(),
            u64::try_from(THREADS * PER_THREAD).expect("small")
        );
    }
}
