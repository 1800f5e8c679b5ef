//! ConsumeQueue: the per-(topic, queue id) index into the CommitLog.
//!
//! Every message is written once to the CommitLog, where messages of all topics are interleaved.
//! Consumers read one queue at a time, so the dispatcher appends a fixed 20-byte unit per message
//! to the queue's ConsumeQueue: `commitLogOffset i64, size i32, tagsCode i64`, big-endian. Logical
//! (queue) offset `N` lives at byte `N * 20`, which makes lookup by queue offset a multiplication,
//! and files of 300,000 units (6,000,000 bytes) named by the 20-digit byte offset of their first
//! unit keep the on-disk layout identical to Apache RocketMQ's
//! (`<root>/consumequeue/<topic>/<queueId>/00000000000006000000`).
//!
//! Invariants (asserted where they are ours to keep, checked with real errors where they come
//! from disk; a unit's CommitLog offset comes from the record it indexes, which recovery reads
//! back from disk):
//! - files are contiguous: file `k + 1` starts exactly `file_size` bytes after file `k` (an
//!   error when loaded, asserted when created);
//! - only the newest file is partly written, every older file is full;
//! - the unit of queue offset `N` is written at byte `N * 20` of the queue, on the 20-byte grid
//!   of its file (asserted before every unit is written);
//! - `min_offset() <= max_offset()`; units in `[min_offset, max_offset)` are valid
//!   (`commitLogOffset >= 0 && size > 0`) and their commit-log offsets never decrease (a unit
//!   that would break that is refused with an error);
//! - a queue whose first message does not have queue offset 0 (its older files were deleted on
//!   another broker, or the topic was re-created) starts with blank units `(0, 0x7FFFFFFF, 0)`
//!   from the start of its first file, exactly like RocketMQ, and `min_offset` skips them.
//!
//! The ConsumeQueue is derived data: after a crash it is recovered by scanning its last files
//! and stopping at the first invalid unit, then truncated to the CommitLog and re-filled by
//! re-dispatching the CommitLog (see `recovery.rs`). Re-dispatching a unit that is already present
//! is therefore a no-op rather than an error.
//!
//! Layout: this module holds one queue (its units, appends and reads, retention); `recover.rs`
//! loading a queue's files from disk, its recovery and truncation; `table.rs` the table of all
//! queues of a store.

mod recover;
mod table;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::StoreError;
use crate::mapped_file::{MappedFile, file_name, parse_file_name};

pub use table::{ConsumeQueueTable, SharedConsumeQueue};

/// Size in bytes of one ConsumeQueue unit.
pub const CQ_STORE_UNIT_SIZE: usize = 20;
/// Same as [`CQ_STORE_UNIT_SIZE`], for arithmetic on i64 byte offsets.
const UNIT_SIZE_I64: i64 = CQ_STORE_UNIT_SIZE as i64;
/// RocketMQ's default `mappedFileSizeConsumeQueue / 20`: 300,000 units per file.
pub const DEFAULT_CQ_ENTRIES_PER_FILE: usize = 300_000;
/// Directory under the store root holding all ConsumeQueues.
pub const CONSUME_QUEUE_DIR: &str = "consumequeue";
/// `size` of a blank (padding) unit.
pub const BLANK_UNIT_SIZE: i32 = 0x7FFF_FFFF;
/// Recovery rescans this many of the newest files; older files are trusted to be complete.
pub const RECOVER_LAST_FILES: usize = 3;

/// One ConsumeQueue unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CqUnit {
    /// Byte offset of the message in the CommitLog.
    pub commit_log_offset: i64,
    /// Total length of the stored record.
    pub size: i32,
    /// `String.hashCode` of the TAGS (0 without tags); the delivery time for SCHEDULE_TOPIC_XXXX.
    pub tags_code: i64,
}

impl CqUnit {
    /// The padding unit written before the first message of a queue that starts mid-way.
    pub const BLANK: CqUnit = CqUnit {
        commit_log_offset: 0,
        size: BLANK_UNIT_SIZE,
        tags_code: 0,
    };

    /// The 20 big-endian bytes of this unit.
    pub fn encode(&self) -> [u8; CQ_STORE_UNIT_SIZE] {
        let mut out = [0u8; CQ_STORE_UNIT_SIZE];
        let (offset, rest) = out.split_at_mut(8);
        offset.copy_from_slice(&self.commit_log_offset.to_be_bytes());
        let (size, tags) = rest.split_at_mut(4);
        size.copy_from_slice(&self.size.to_be_bytes());
        tags.copy_from_slice(&self.tags_code.to_be_bytes());
        out
    }

    /// Decodes the first 20 bytes of `bytes`; `None` if fewer are given.
    pub fn decode(bytes: &[u8]) -> Option<CqUnit> {
        let (offset, rest) = bytes.split_first_chunk::<8>()?;
        let (size, rest) = rest.split_first_chunk::<4>()?;
        let (tags, _) = rest.split_first_chunk::<8>()?;
        Some(CqUnit {
            commit_log_offset: i64::from_be_bytes(*offset),
            size: i32::from_be_bytes(*size),
            tags_code: i64::from_be_bytes(*tags),
        })
    }

    /// RocketMQ's recovery test: a unit is valid when `offset >= 0 && size > 0`.
    pub fn is_valid(&self) -> bool {
        self.commit_log_offset >= 0 && self.size > 0
    }

    /// True for a padding unit.
    pub fn is_blank(&self) -> bool {
        *self == CqUnit::BLANK
    }
}

/// The ConsumeQueue of one (topic, queue id).
pub struct ConsumeQueue {
    topic: String,
    queue_id: i32,
    dir: PathBuf,
    file_size: usize,
    /// Files oldest first; see the module docs for their invariants.
    files: Vec<Arc<MappedFile>>,
    /// Length of each file on disk when it was opened (parallel to `files` until recovery ran);
    /// recovery never trusts bytes beyond it, so a file cut short cannot yield half units.
    disk_lens: Vec<u64>,
    /// First queue offset that points at a (still) valid CommitLog record.
    min_logic_offset: i64,
    /// `commit_log_offset + size` of the last real unit, 0 if there is none.
    max_physical_offset: i64,
}

impl std::fmt::Debug for ConsumeQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumeQueue")
            .field("topic", &self.topic)
            .field("queue_id", &self.queue_id)
            .field("files", &self.files.len())
            .field("min_offset", &self.min_offset())
            .field("max_offset", &self.max_offset())
            .finish()
    }
}

/// Checks that a topic can be used as a directory name (no separators, not `.`/`..`).
fn check_topic_dir_name(topic: &str) -> Result<(), StoreError> {
    if topic.is_empty() || topic == "." || topic == ".." || topic.contains(['/', '\\', '\0']) {
        return Err(StoreError::Config(format!(
            "topic {topic:?} cannot name a consume queue directory"
        )));
    }
    Ok(())
}

/// Lists the `(start offset, path)` of the 20-digit-named files in `dir`, sorted by offset.
/// Other entries (temporary files, directories) are ignored with a warning.
pub(crate) fn list_offset_files(dir: &Path) -> Result<Vec<(i64, PathBuf)>, StoreError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io(dir, e)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io(dir, e))?;
        let path = entry.path();
        match parse_file_name(&path) {
            Some(offset) if path.is_file() => files.push((offset, path)),
            _ => {
                tracing::warn!(path = %path.display(), "ignoring unexpected file in queue directory")
            }
        }
    }
    files.sort_by_key(|(offset, _)| *offset);
    Ok(files)
}

impl ConsumeQueue {
    /// Opens the queue `<root>/consumequeue/<topic>/<queue_id>`, mapping every existing file.
    ///
    /// All files are first taken as full (as RocketMQ's load does); call [`ConsumeQueue::recover`]
    /// before writing to find the real end. The directory is created on the first `put`.
    pub fn open(
        root: &Path,
        topic: &str,
        queue_id: i32,
        entries_per_file: usize,
    ) -> Result<Self, StoreError> {
        check_topic_dir_name(topic)?;
        if queue_id < 0 {
            return Err(StoreError::Config(format!("negative queue id {queue_id}")));
        }
        let file_size = entries_per_file
            .checked_mul(CQ_STORE_UNIT_SIZE)
            .filter(|size| *size > 0 && i64::try_from(*size).is_ok())
            .ok_or_else(|| {
                StoreError::Config(format!(
                    "invalid consume queue entries per file {entries_per_file}"
                ))
            })?;
        let dir = root
            .join(CONSUME_QUEUE_DIR)
            .join(topic)
            .join(queue_id.to_string());
        let mut queue = ConsumeQueue {
            topic: topic.to_owned(),
            queue_id,
            dir,
            file_size,
            files: Vec::new(),
            disk_lens: Vec::new(),
            min_logic_offset: 0,
            max_physical_offset: 0,
        };
        queue.load_files()?;
        queue.refresh_min_offset();
        queue.refresh_max_physical_offset();
        Ok(queue)
    }

    fn file_size_i64(&self) -> i64 {
        // Checked in `open`.
        i64::try_from(self.file_size).unwrap_or(i64::MAX)
    }

    /// Topic of this queue.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Queue id of this queue.
    pub fn queue_id(&self) -> i32 {
        self.queue_id
    }

    /// Directory holding this queue's files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Number of mapped files.
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// Size of each file in bytes.
    pub fn file_size(&self) -> usize {
        self.file_size
    }

    /// Byte offset just past the last written unit (or the logical start when there is no file).
    fn max_byte_offset(&self) -> i64 {
        match self.files.last() {
            Some(last) => last.file_from_offset() + last.wrote_position() as i64,
            None => self.min_logic_offset.saturating_mul(UNIT_SIZE_I64),
        }
    }

    /// Finds the file and in-file position of the unit at logical `queue_offset`, if written.
    fn locate(&self, queue_offset: i64) -> Option<(&MappedFile, usize)> {
        let pos = queue_offset.checked_mul(UNIT_SIZE_I64)?;
        let first = self.files.first()?.file_from_offset();
        let idx = usize::try_from(pos.checked_sub(first)? / self.file_size_i64()).ok()?;
        let file = self.files.get(idx)?;
        let rel = usize::try_from(pos - file.file_from_offset()).ok()?;
        (rel + CQ_STORE_UNIT_SIZE <= file.wrote_position()).then_some((file, rel))
    }

    /// Reads the unit at `queue_offset` without checking it against the min offset.
    fn unit_at(&self, queue_offset: i64) -> Option<CqUnit> {
        let (file, rel) = self.locate(queue_offset)?;
        CqUnit::decode(file.read_at(rel, CQ_STORE_UNIT_SIZE)?)
    }

    /// Sets the min offset to the first non-blank unit of the first file.
    fn refresh_min_offset(&mut self) {
        let Some(first) = self.files.first() else {
            return;
        };
        let start = first.file_from_offset() / UNIT_SIZE_I64;
        let written = (first.wrote_position() / CQ_STORE_UNIT_SIZE) as i64;
        // Blank units form a prefix of the first file, so binary search for its end.
        let (mut lo, mut hi) = (start, start + written);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.unit_at(mid).is_some_and(|u| u.is_blank()) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        self.min_logic_offset = self.min_logic_offset.max(lo);
        self.min_logic_offset = self.min_logic_offset.min(self.max_offset());
    }

    fn refresh_max_physical_offset(&mut self) {
        let max = self.max_offset();
        self.max_physical_offset = if max > self.min_logic_offset {
            self.unit_at(max - 1)
                .filter(|u| !u.is_blank())
                .map_or(0, |u| u.commit_log_offset + i64::from(u.size))
        } else {
            0
        };
    }

    fn create_file(&mut self, from: i64) -> Result<(), StoreError> {
        fs::create_dir_all(&self.dir).map_err(|e| StoreError::io(&self.dir, e))?;
        // Lookup by queue offset divides by the file size from the first file's start: a file
        // off the grid or after a gap would make every unit in it answer for another offset.
        let file_size = self.file_size_i64();
        let expected = self
            .files
            .last()
            .map(|last| last.file_from_offset() + file_size);
        assert!(
            from % file_size == 0 && expected.is_none_or(|expected| from == expected),
            "{}-{}: new consume queue file at {from}, expected {expected:?} ({file_size} bytes each)",
            self.topic,
            self.queue_id
        );
        let path = self.dir.join(file_name(from));
        let file = MappedFile::create(&path, self.file_size)?;
        assert_eq!(
            file.file_from_offset(),
            from,
            "{}: file name and start disagree",
            path.display()
        );
        self.files.push(Arc::new(file));
        Ok(())
    }

    /// Appends `unit` as the unit at byte `at` of the queue (queue offset × 20), creating the
    /// next file when the last one is full.
    fn append_unit(&mut self, unit: &CqUnit, at: i64) -> Result<(), StoreError> {
        let needs_file = self.files.last().is_none_or(|f| f.is_full());
        if needs_file {
            let next = self
                .files
                .last()
                .map_or(0, |f| f.file_from_offset() + self.file_size_i64());
            self.create_file(next)?;
        }
        let file = self
            .files
            .last()
            .ok_or_else(|| StoreError::OffsetOutOfRange {
                offset: self.max_offset(),
                reason: "no consume queue file to append to".into(),
            })?;
        // The unit of queue offset N must land at byte N × 20, on its file's 20-byte grid:
        // anywhere else every later lookup by queue offset reads the wrong message, or half of
        // two. The file's appended position is where `append` writes.
        let pos = file.appended_position();
        let from = file.file_from_offset();
        assert!(
            pos.is_multiple_of(CQ_STORE_UNIT_SIZE)
                && from + i64::try_from(pos).unwrap_or(i64::MAX) == at,
            "{}-{}: unit for byte {at} would be written at position {pos} of the file at {from}",
            self.topic,
            self.queue_id
        );
        file.append(&unit.encode())?;
        Ok(())
    }

    /// Appends `unit` at logical `queue_offset`.
    ///
    /// - `queue_offset == max_offset()`: the normal append.
    /// - An empty queue (no file) may start at any offset: the first file is created at the file
    ///   boundary below it and filled with blank units up to it (RocketMQ's `fillPreBlank`).
    /// - `queue_offset < max_offset()` with the same unit already stored: a no-op, which makes
    ///   re-dispatch during recovery idempotent; below `min_offset()` nothing can be compared and
    ///   the call is a no-op too.
    /// - Anything else (a different unit at a used offset, a gap, or a unit pointing before the
    ///   end of the previous one in the CommitLog) is an error.
    pub fn put(&mut self, queue_offset: i64, unit: CqUnit) -> Result<(), StoreError> {
        if queue_offset < 0 || !unit.is_valid() || unit.is_blank() {
            return Err(StoreError::OffsetOutOfRange {
                offset: queue_offset,
                reason: format!("invalid consume queue unit {unit:?}"),
            });
        }
        let byte_pos = queue_offset.checked_mul(UNIT_SIZE_I64).ok_or_else(|| {
            StoreError::OffsetOutOfRange {
                offset: queue_offset,
                reason: "queue offset overflows the byte offset".into(),
            }
        })?;
        if self.files.is_empty() {
            let file_start = byte_pos - byte_pos % self.file_size_i64();
            self.create_file(file_start)?;
            let pad_units = (byte_pos - file_start) / UNIT_SIZE_I64;
            for k in 0..pad_units {
                self.append_unit(&CqUnit::BLANK, file_start + k * UNIT_SIZE_I64)?;
            }
            self.min_logic_offset = queue_offset;
            self.append_unit(&unit, byte_pos)?;
            self.max_physical_offset = unit.commit_log_offset + i64::from(unit.size);
            return Ok(());
        }
        let max = self.max_offset();
        if queue_offset < max {
            if queue_offset < self.min_logic_offset {
                return Ok(());
            }
            return match self.unit_at(queue_offset) {
                Some(existing) if existing == unit => Ok(()),
                existing => Err(StoreError::OffsetOutOfRange {
                    offset: queue_offset,
                    reason: format!(
                        "{}-{}: offset already holds {existing:?}, refusing {unit:?}",
                        self.topic, self.queue_id
                    ),
                }),
            };
        }
        if queue_offset > max {
            return Err(StoreError::OffsetOutOfRange {
                offset: queue_offset,
                reason: format!(
                    "{}-{}: gap in consume queue, next offset is {max}",
                    self.topic, self.queue_id
                ),
            });
        }
        // Units follow CommitLog order (truncation and retention binary-search on it). The
        // unit comes from a record's header, which recovery reads back from disk: a unit that
        // would go back is refused, not asserted.
        if unit.commit_log_offset < self.max_physical_offset {
            return Err(StoreError::OffsetOutOfRange {
                offset: queue_offset,
                reason: format!(
                    "{}-{}: unit {unit:?} goes before the end of the previous unit ({})",
                    self.topic, self.queue_id, self.max_physical_offset
                ),
            });
        }
        self.append_unit(&unit, byte_pos)?;
        self.max_physical_offset = unit.commit_log_offset + i64::from(unit.size);
        Ok(())
    }

    /// The unit at `queue_offset`, if it is within `[min_offset, max_offset)`.
    pub fn get(&self, queue_offset: i64) -> Option<CqUnit> {
        if queue_offset < self.min_logic_offset || queue_offset >= self.max_offset() {
            return None;
        }
        self.unit_at(queue_offset)
    }

    /// Appends to `out` up to `max_units` units starting at `from`. Nothing is read when `from`
    /// is outside `[min_offset, max_offset)`; the caller decides what an out-of-range offset means.
    pub fn read(&self, from: i64, max_units: usize, out: &mut Vec<CqUnit>) {
        if from < self.min_logic_offset {
            return;
        }
        let end = self.max_offset();
        let mut next = from;
        let mut left = max_units;
        while left > 0 && next < end {
            let Some((file, rel)) = self.locate(next) else {
                return;
            };
            let in_file = (file.wrote_position() - rel) / CQ_STORE_UNIT_SIZE;
            let n = in_file.min(left);
            if n == 0 {
                return;
            }
            let Some(bytes) = file.read_at(rel, n * CQ_STORE_UNIT_SIZE) else {
                return;
            };
            out.extend(
                bytes
                    .chunks_exact(CQ_STORE_UNIT_SIZE)
                    .filter_map(CqUnit::decode),
            );
            left -= n;
            next += n as i64;
        }
    }

    /// First queue offset still pointing at a CommitLog record.
    pub fn min_offset(&self) -> i64 {
        self.min_logic_offset
    }

    /// Next queue offset to be written.
    pub fn max_offset(&self) -> i64 {
        self.max_byte_offset() / UNIT_SIZE_I64
    }

    /// `commit_log_offset + size` of the last unit, 0 if the queue holds none.
    pub fn max_physical_offset(&self) -> i64 {
        self.max_physical_offset
    }

    /// Deletes whole files, oldest first, whose last unit points before `min_commit_log_offset`
    /// (the CommitLog no longer holds them). The newest file is never deleted. Returns how many
    /// files were deleted; the min offset moves to the first remaining file.
    pub fn delete_expired(&mut self, min_commit_log_offset: i64) -> Result<usize, StoreError> {
        let mut deleted = 0;
        while self.files.len() > 1 {
            let expired = match self.files.first() {
                Some(first) => first
                    .read_at(self.file_size - CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE)
                    .and_then(CqUnit::decode)
                    .is_none_or(|u| u.commit_log_offset < min_commit_log_offset),
                None => false,
            };
            if !expired {
                break;
            }
            let file = self.files.remove(0);
            tracing::info!(topic = %self.topic, queue_id = self.queue_id,
                file = file.file_from_offset(), "deleting expired consume queue file");
            file.unlink()?;
            deleted += 1;
        }
        if let Some(first) = self.files.first() {
            self.min_logic_offset = self
                .min_logic_offset
                .max(first.file_from_offset() / UNIT_SIZE_I64);
        }
        Ok(deleted)
    }

    /// Raises the min offset to the first unit whose commit-log offset is
    /// `>= min_commit_log_offset` (or to `max_offset()` if none is), after CommitLog retention.
    pub fn correct_min_offset(&mut self, min_commit_log_offset: i64) {
        let (mut lo, mut hi) = (self.min_logic_offset, self.max_offset());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let gone = self
                .unit_at(mid)
                .is_none_or(|u| u.is_blank() || u.commit_log_offset < min_commit_log_offset);
            if gone {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        self.min_logic_offset = self.min_logic_offset.max(lo);
    }

    /// The first queue offset whose message was stored at or after `timestamp_ms` (RocketMQ's
    /// `BoundaryType.LOWER`), `max_offset()` if every message is older, `min_offset()` if all are
    /// newer. `store_time(commit_log_offset, size)` reads a record's store timestamp; a record it
    /// cannot read (already deleted) counts as older than any timestamp.
    pub fn offset_by_time(
        &self,
        timestamp_ms: i64,
        store_time: &dyn Fn(i64, i32) -> Option<i64>,
    ) -> i64 {
        let (mut lo, mut hi) = (self.min_logic_offset, self.max_offset());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let older = self.unit_at(mid).is_none_or(|u| {
                store_time(u.commit_log_offset, u.size).is_none_or(|t| t < timestamp_ms)
            });
            if older {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Flushes every file to disk.
    pub fn flush(&self) -> Result<(), StoreError> {
        for file in &self.files {
            file.flush()?;
        }
        Ok(())
    }

    /// The queue's files, for work done after its lock is released (releasing mapped pages).
    pub fn files(&self) -> Vec<Arc<MappedFile>> {
        self.files.clone()
    }

    /// The files holding unflushed units, to be flushed after the queue's lock is released (an
    /// msync waits for the disk, and dispatch needs the write lock to append the next unit).
    /// A file deleted meanwhile stays mapped until its handle here is dropped.
    pub fn dirty_files(&self) -> Vec<Arc<MappedFile>> {
        self.files
            .iter()
            .filter(|f| f.is_able_to_flush(0))
            .cloned()
            .collect()
    }

    /// Deletes every file and the queue's directory (and the topic directory once empty).
    pub fn destroy(self) -> Result<(), StoreError> {
        for file in self.files {
            file.unlink()?;
        }
        remove_dir_if_empty(&self.dir)?;
        if let Some(topic_dir) = self.dir.parent() {
            remove_dir_if_empty(topic_dir)?;
        }
        Ok(())
    }
}

/// Removes `dir` if it exists and is empty; other states are left alone.
fn remove_dir_if_empty(dir: &Path) -> Result<(), StoreError> {
    match fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.kind() == std::io::ErrorKind::DirectoryNotEmpty =>
        {
            Ok(())
        }
        Err(e) => Err(StoreError::io(dir, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
    }

    /// Unit number `i`: records of 100 bytes back to back.
    fn unit(i: i64) -> CqUnit {
        CqUnit {
            commit_log_offset: i * 100,
            size: 100,
            tags_code: i,
        }
    }

    /// The unit stored in the queue's files at byte `queue_offset × 20`, read from the raw file.
    fn raw_unit(cq: &ConsumeQueue, queue_offset: i64) -> Option<CqUnit> {
        let at = queue_offset * UNIT_SIZE_I64;
        let file = cq.files.iter().find(|f| {
            (f.file_from_offset()..f.file_from_offset() + cq.file_size_i64()).contains(&at)
        })?;
        let raw = std::fs::read(file.path()).ok()?;
        let pos = usize::try_from(at - file.file_from_offset()).ok()?;
        CqUnit::decode(raw.get(pos..)?)
    }

    /// Every unit lands at byte `queue offset × 20`, across file boundaries and after the
    /// padding of a queue that starts mid-way; appended CommitLog offsets only grow.
    #[test]
    fn units_land_at_their_queue_offset() -> Result<(), StoreError> {
        let dir = tmp();
        let mut cq = ConsumeQueue::open(dir.path(), "T", 0, 4)?;
        for i in 6..15 {
            cq.put(i, unit(i))?;
        }
        assert_eq!(cq.file_count(), 3, "files at units 4, 8 and 12");
        for i in 6..15 {
            assert_eq!(raw_unit(&cq, i), Some(unit(i)), "unit {i}");
        }
        assert_eq!(raw_unit(&cq, 4), Some(CqUnit::BLANK));
        assert_eq!(raw_unit(&cq, 5), Some(CqUnit::BLANK));
        let offsets: Vec<i64> = (6..15)
            .filter_map(|i| cq.get(i))
            .map(|u| u.commit_log_offset)
            .collect();
        assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{offsets:?}");
        Ok(())
    }

    /// A unit pointing before the end of the previous one (a record read back from a damaged
    /// log, or one of a re-created topic) is refused with an error, and the queue is unchanged.
    #[test]
    fn a_unit_out_of_commit_log_order_is_refused() -> Result<(), StoreError> {
        let dir = tmp();
        let mut cq = ConsumeQueue::open(dir.path(), "T", 0, 4)?;
        for i in 0..3 {
            cq.put(i, unit(i))?;
        }
        let behind = CqUnit {
            commit_log_offset: 150,
            ..unit(3)
        };
        assert!(cq.put(3, behind).is_err());
        assert_eq!(cq.max_offset(), 3);
        cq.put(3, unit(3))?;
        Ok(())
    }

    /// A unit about to be written off the 20-byte grid (a file position that no longer matches
    /// the queue offsets) stops before the write.
    #[test]
    #[should_panic(expected = "unit for byte 20 would be written at position 30")]
    fn a_unit_off_the_grid_is_caught() {
        let dir = tmp();
        let mut cq =
            ConsumeQueue::open(dir.path(), "T", 0, 4).unwrap_or_else(|e| panic!("open: {e}"));
        let _ = cq.put(0, unit(0));
        if let Some(file) = cq.files.last() {
            file.set_wrote_position(30);
        }
        let _ = cq.put(cq.max_offset(), unit(1));
    }

    /// The lowest-level append refuses a unit whose queue offset is not where the file is.
    #[test]
    #[should_panic(expected = "unit for byte 60 would be written at position 20")]
    fn a_unit_at_the_wrong_queue_offset_is_caught() {
        let dir = tmp();
        let mut cq =
            ConsumeQueue::open(dir.path(), "T", 0, 4).unwrap_or_else(|e| panic!("open: {e}"));
        let _ = cq.put(0, unit(0));
        let _ = cq.append_unit(&unit(3), 60);
    }

    /// A new file must follow the last one exactly.
    #[test]
    #[should_panic(expected = "new consume queue file at 240, expected Some(80)")]
    fn a_file_after_a_gap_is_caught() {
        let dir = tmp();
        let mut cq =
            ConsumeQueue::open(dir.path(), "T", 0, 4).unwrap_or_else(|e| panic!("open: {e}"));
        let _ = cq.put(0, unit(0));
        let _ = cq.create_file(240);
    }
}
