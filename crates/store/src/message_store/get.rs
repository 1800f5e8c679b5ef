//! The pull path: [`MessageStore::get_message`] reads a run of ConsumeQueue units and hands out
//! the records they point at as zero-copy slices of the mapped CommitLog.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::MessageStore;
use crate::consume_queue::{CQ_STORE_UNIT_SIZE, CqUnit, SharedConsumeQueue};
use crate::mapped_file::MappedFile;

/// Minimum ConsumeQueue span (bytes) a filtered pull scans (RocketMQ `maxFilterMessageSize`).
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
    /// Decides from the whole stored record (header, body and properties, as in the
    /// CommitLog), for property-based filters.
    fn is_matched_by_commit_log(&self, record: &[u8]) -> bool;
}

impl MessageStore {
    fn is_in_memory(&self, offset_py: i64, max_offset_py: i64) -> bool {
        let memory = self.total_physical_memory as f64
            * (f64::from(self.live.get().access_message_in_memory_max_ratio) / 100.0);
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
        let live = self.live.get();
        let (max_bytes, max_count) = if in_memory {
            (
                live.max_transfer_bytes_on_message_in_memory,
                live.max_transfer_count_on_message_in_memory,
            )
        } else {
            (
                live.max_transfer_bytes_on_message_in_disk,
                live.max_transfer_count_on_message_in_disk,
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
        let began = std::time::Instant::now();
        let result = self.get_message_inner(
            topic,
            queue_id,
            offset,
            max_msg_nums,
            max_total_bytes,
            filter,
        );
        self.stats.record_get_time(began.elapsed());
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
            return no_such_queue(topic, queue_id);
        };
        let max_offset_py = self.commit_log.max_offset();
        let cq = queue.read();
        let min = cq.min_offset();
        let max = cq.max_offset();
        if let Some(result) = offset_outside_queue(offset, min, max) {
            return result;
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
        let scan = PullScan {
            queue: &queue,
            filter,
            offset,
            max,
            max_offset_py,
            max_msg_nums,
            max_filter_size,
            max_pull_size,
            scan_units,
            chunk,
        };
        let max_phy_pulling = self.scan(&scan, units, &mut result);
        self.commit_log.note_read(result.buffer_total_size);
        let diff = max_offset_py - max_phy_pulling;
        let memory = self.total_physical_memory as f64
            * (f64::from(self.live.get().access_message_in_memory_max_ratio) / 100.0);
        result.suggest_pulling_from_slave = diff as f64 > memory;
        result
    }

    /// Examines the units of `scan` from its first chunk (`units`) on, reading further chunks
    /// while filtered-out units leave room, and fills `result` with the records taken. Returns
    /// the CommitLog offset of the last unit examined.
    fn scan(
        &self,
        scan: &PullScan<'_>,
        mut units: Vec<CqUnit>,
        result: &mut GetMessageResult,
    ) -> i64 {
        let offset = scan.offset;
        let mut next_phy_file_start: Option<i64> = None;
        let mut runs = RecordRuns::with_capacity(scan.max_msg_nums.min(MAX_READ_CHUNK_UNITS));
        let mut max_phy_pulling = 0i64;
        let mut examined = 0usize;
        'scan: loop {
            for unit in &units {
                let queue_offset = offset + i64::try_from(examined).unwrap_or(i64::MAX);
                if queue_offset >= scan.max || examined * CQ_STORE_UNIT_SIZE > scan.max_filter_size
                {
                    break 'scan;
                }
                let size = usize::try_from(unit.size).unwrap_or(0);
                let in_memory = self.is_in_memory(unit.commit_log_offset, scan.max_offset_py);
                if self.is_the_batch_full(
                    size,
                    scan.max_msg_nums,
                    scan.max_pull_size,
                    result.buffer_total_size,
                    result.msg_count,
                    in_memory,
                ) || result.buffer_total_size >= scan.max_pull_size
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
                if let Some(f) = scan.filter
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
                if let Some(f) = scan.filter
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
            if examined >= scan.scan_units {
                break;
            }
            units.clear();
            let from = offset + i64::try_from(examined).unwrap_or(i64::MAX);
            scan.queue
                .read()
                .read(from, scan.chunk.min(scan.scan_units - examined), &mut units);
            if units.is_empty() {
                break;
            }
        }
        runs.finish(result);
        max_phy_pulling
    }
}

/// The answer for a queue that does not exist: `NoMatchedLogicQueue` when it cannot (invalid
/// topic directory name or queue id), `NoMessageInQueue` otherwise.
fn no_such_queue(topic: &str, queue_id: i32) -> GetMessageResult {
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
    GetMessageResult::new(status, 0, 0, 0)
}

/// The answer for an `offset` with nothing to read in a queue of `[min, max)` (see
/// [`MessageStore::get_message`]), `None` when there are units from it.
fn offset_outside_queue(offset: i64, min: i64, max: i64) -> Option<GetMessageResult> {
    if max == 0 {
        return Some(GetMessageResult::new(
            GetMessageStatus::NoMessageInQueue,
            0,
            min,
            max,
        ));
    }
    if offset < min {
        return Some(GetMessageResult::new(
            GetMessageStatus::OffsetTooSmall,
            min,
            min,
            max,
        ));
    }
    if offset == max {
        return Some(GetMessageResult::new(
            GetMessageStatus::OffsetOverflowOne,
            offset,
            min,
            max,
        ));
    }
    if offset > max {
        return Some(GetMessageResult::new(
            GetMessageStatus::OffsetOverflowBadly,
            max,
            min,
            max,
        ));
    }
    None
}

/// One pull's scan of a ConsumeQueue: where it starts and stops, its limits and its filter.
struct PullScan<'a> {
    queue: &'a SharedConsumeQueue,
    filter: Option<&'a dyn MessageFilter>,
    /// Queue offset of the first unit examined.
    offset: i64,
    /// The queue's max offset when the pull began: no unit at or past it is examined.
    max: i64,
    /// The CommitLog's end when the pull began (how far behind a unit's record is).
    max_offset_py: i64,
    max_msg_nums: usize,
    /// ConsumeQueue bytes examined at most.
    max_filter_size: usize,
    /// Record bytes returned at most.
    max_pull_size: usize,
    /// Units examined at most.
    scan_units: usize,
    /// Units read per chunk.
    chunk: usize,
}
