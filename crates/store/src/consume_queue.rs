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
//! Invariants (checked with `debug_assert!` where they are ours to keep, and with real errors where
//! they come from disk):
//! - files are contiguous: file `k + 1` starts exactly `file_size` bytes after file `k`;
//! - only the newest file is partly written, every older file is full;
//! - `min_offset() <= max_offset()`; units in `[min_offset, max_offset)` are valid
//!   (`commitLogOffset >= 0 && size > 0`) and their commit-log offsets never decrease;
//! - a queue whose first message does not have queue offset 0 (its older files were deleted on
//!   another broker, or the topic was re-created) starts with blank units `(0, 0x7FFFFFFF, 0)`
//!   from the start of its first file, exactly like RocketMQ, and `min_offset` skips them.
//!
//! The ConsumeQueue is derived data: after a crash it is recovered by scanning its last files
//! and stopping at the first invalid unit, then truncated to the CommitLog and re-filled by
//! re-dispatching the CommitLog (see `recovery.rs`). Re-dispatching a unit that is already present
//! is therefore a no-op rather than an error.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::error::StoreError;
use crate::mapped_file::{MappedFile, file_name, parse_file_name};

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

    fn load_files(&mut self) -> Result<(), StoreError> {
        let listed = list_offset_files(&self.dir)?;
        let file_size = self.file_size_i64();
        let mut expected: Option<i64> = None;
        let first_rescanned = listed.len().saturating_sub(RECOVER_LAST_FILES);
        for (idx, (offset, path)) in listed.into_iter().enumerate() {
            if offset % file_size != 0 {
                return Err(StoreError::corrupt(
                    &path,
                    offset,
                    format!("file start is not a multiple of the file size {file_size}"),
                ));
            }
            if let Some(expected) = expected
                && offset != expected
            {
                return Err(StoreError::corrupt(
                    &path,
                    offset,
                    format!("consume queue files are not contiguous: expected {expected:020}"),
                ));
            }
            let disk_len = fs::metadata(&path)
                .map_err(|e| StoreError::io(&path, e))?
                .len();
            if disk_len > self.file_size as u64 {
                return Err(StoreError::corrupt(
                    &path,
                    offset,
                    format!("file is {disk_len} bytes, larger than {file_size}"),
                ));
            }
            if disk_len < self.file_size as u64 && idx < first_rescanned {
                // Recovery would not look at it, so its missing units would be served as zeros.
                return Err(StoreError::corrupt(
                    &path,
                    offset,
                    format!("file is {disk_len} bytes, expected {file_size}"),
                ));
            }
            if disk_len < self.file_size as u64 {
                // A file cut short (disk full, copied by hand): extend it sparsely so it can be
                // mapped; recovery ignores everything past `disk_len`.
                tracing::warn!(path = %path.display(), disk_len, "consume queue file is short");
                let file = fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(|e| StoreError::io(&path, e))?;
                file.set_len(self.file_size as u64)
                    .map_err(|e| StoreError::io(&path, e))?;
            }
            let mapped = MappedFile::open(&path, self.file_size)?;
            mapped.set_wrote_position(self.file_size);
            self.files.push(Arc::new(mapped));
            self.disk_lens.push(disk_len);
            expected = offset.checked_add(file_size);
        }
        Ok(())
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

    /// Recovers after a restart: scans from the 3rd-last file, stops at the first invalid unit
    /// (`offset < 0 || size <= 0`, or the end of what is on disk), drops the files after it and
    /// zeroes the rest of the file it stopped in.
    ///
    /// Returns whether units were lost on the way (the file it stopped in was short on disk, or
    /// held non-zero bytes after the last valid unit, or later files had to be dropped): such a
    /// queue no longer covers every record of its queue up to the log's end, and only the
    /// caller, which knows the CommitLog, can refill it (from the end of its last valid unit).
    /// A queue whose valid units are simply followed by zeros lost nothing.
    pub fn recover(&mut self) -> Result<bool, StoreError> {
        if self.files.is_empty() {
            return Ok(false);
        }
        let units_per_file = self.file_size / CQ_STORE_UNIT_SIZE;
        let mut idx = self.files.len().saturating_sub(RECOVER_LAST_FILES);
        let mut valid_units;
        let mut lost_units;
        loop {
            let disk_len = self
                .disk_lens
                .get(idx)
                .copied()
                .unwrap_or(self.file_size as u64);
            valid_units = 0;
            // A file cut short on disk may have lost units, whatever its surviving bytes say.
            lost_units = disk_len < self.file_size as u64;
            if let Some(file) = self.files.get(idx) {
                // Never trust bytes past the end on disk (a short file) nor, when recovery runs
                // again on a live queue, past what was written.
                let scan_units = usize::try_from(disk_len)
                    .unwrap_or(usize::MAX)
                    .min(file.wrote_position())
                    / CQ_STORE_UNIT_SIZE;
                let bytes = file
                    .read_at(0, scan_units * CQ_STORE_UNIT_SIZE)
                    .unwrap_or_default();
                valid_units = bytes
                    .chunks_exact(CQ_STORE_UNIT_SIZE)
                    .take_while(|chunk| CqUnit::decode(chunk).is_some_and(|u| u.is_valid()))
                    .count();
                // Data after the first invalid unit: that unit was damaged, not the clean end.
                lost_units |= bytes
                    .get(valid_units * CQ_STORE_UNIT_SIZE..)
                    .is_some_and(|rest| rest.iter().any(|b| *b != 0));
            }
            if valid_units == units_per_file && idx + 1 < self.files.len() {
                idx += 1;
                continue;
            }
            break;
        }
        // Files after the one we stopped in are dirty; they only exist because units were
        // appended to them, so dropping them loses units.
        lost_units |= self.files.len() > idx + 1;
        while self.files.len() > idx + 1 {
            if let Some(file) = self.files.pop() {
                tracing::info!(topic = %self.topic, queue_id = self.queue_id,
                    file = file.file_from_offset(), "dropping dirty consume queue file");
                file.unlink()?;
            }
        }
        if let Some(file) = self.files.get(idx) {
            // Zero what follows so units past a damaged one cannot come back in a later scan.
            file.truncate_to(valid_units * CQ_STORE_UNIT_SIZE)?;
        }
        // Every file now holds what recovery verified; lengths on disk no longer matter.
        self.disk_lens.clear();
        self.refresh_min_offset();
        self.refresh_max_physical_offset();
        debug_assert!(self.min_offset() <= self.max_offset());
        if lost_units {
            tracing::warn!(topic = %self.topic, queue_id = self.queue_id,
                max_offset = self.max_offset(),
                "consume queue lost units (torn or short file); refilling it from the commit log");
        }
        Ok(lost_units)
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
        debug_assert!(
            self.files
                .last()
                .is_none_or(|last| last.file_from_offset() + self.file_size_i64() == from),
            "consume queue files must be contiguous"
        );
        let path = self.dir.join(file_name(from));
        let file = MappedFile::create(&path, self.file_size)?;
        debug_assert_eq!(file.file_from_offset(), from);
        self.files.push(Arc::new(file));
        Ok(())
    }

    fn append_unit(&mut self, unit: &CqUnit) -> Result<(), StoreError> {
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
    /// - Anything else (a different unit at a used offset, or a gap) is an error.
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
            for _ in 0..pad_units {
                self.append_unit(&CqUnit::BLANK)?;
            }
            self.min_logic_offset = queue_offset;
            self.append_unit(&unit)?;
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
        debug_assert!(
            unit.commit_log_offset >= self.max_physical_offset,
            "consume queue units must follow CommitLog order"
        );
        self.append_unit(&unit)?;
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

    /// Drops every unit whose commit-log offset is `>= max_commit_log_offset` (the CommitLog was
    /// truncated there), deleting files that become empty and zeroing the dropped bytes.
    pub fn truncate_dirty(&mut self, max_commit_log_offset: i64) -> Result<(), StoreError> {
        while let Some(last) = self.files.last() {
            let written = last.wrote_position() / CQ_STORE_UNIT_SIZE;
            // Commit-log offsets never decrease, so binary search for the first dirty unit.
            let (mut lo, mut hi) = (0usize, written);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                let clean = last
                    .read_at(mid * CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE)
                    .and_then(CqUnit::decode)
                    .is_some_and(|u| u.commit_log_offset < max_commit_log_offset);
                if clean {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            if lo == 0 {
                if let Some(file) = self.files.pop() {
                    file.unlink()?;
                }
                continue;
            }
            if lo < written {
                last.truncate_to(lo * CQ_STORE_UNIT_SIZE)?;
            }
            break;
        }
        if !self.files.is_empty() {
            self.min_logic_offset = self.min_logic_offset.min(self.max_offset());
        }
        self.refresh_max_physical_offset();
        Ok(())
    }

    /// Drops the unit at `queue_offset` and every unit after it (recovery found that unit
    /// pointing at no record), deleting files that become empty and zeroing the dropped bytes.
    ///
    /// Cutting by queue offset rather than by CommitLog offset matters here: the damaged unit's
    /// CommitLog offset is garbage, so it cannot be trusted to sort between its neighbours.
    pub fn truncate_from_queue_offset(&mut self, queue_offset: i64) -> Result<(), StoreError> {
        let cut = queue_offset.max(0).saturating_mul(UNIT_SIZE_I64);
        while let Some(last) = self.files.last() {
            let from = last.file_from_offset();
            if cut <= from {
                if let Some(file) = self.files.pop() {
                    file.unlink()?;
                }
                continue;
            }
            let rel = usize::try_from(cut - from).unwrap_or(usize::MAX);
            if rel < last.wrote_position() {
                last.truncate_to(rel)?;
            }
            break;
        }
        if self.files.is_empty() {
            // An empty queue restarts at the cut (the next put pads up to it if needed).
            self.min_logic_offset = self.min_logic_offset.min(queue_offset.max(0));
        } else {
            self.min_logic_offset = self.min_logic_offset.min(self.max_offset());
        }
        self.refresh_max_physical_offset();
        Ok(())
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

/// A ConsumeQueue shared between the dispatcher (writer) and the read path.
pub type SharedConsumeQueue = Arc<RwLock<ConsumeQueue>>;

/// All ConsumeQueues of a store: topic → queue id → queue, created on demand.
pub struct ConsumeQueueTable {
    root: PathBuf,
    entries_per_file: usize,
    queues: RwLock<HashMap<String, HashMap<i32, SharedConsumeQueue>>>,
}

impl std::fmt::Debug for ConsumeQueueTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumeQueueTable")
            .field("root", &self.root)
            .field("topics", &self.queues.read().len())
            .finish()
    }
}

impl ConsumeQueueTable {
    /// An empty table for the store at `root`; queues are created by [`Self::find_or_create`].
    pub fn new(root: &Path, entries_per_file: usize) -> Self {
        ConsumeQueueTable {
            root: root.to_path_buf(),
            entries_per_file,
            queues: RwLock::new(HashMap::new()),
        }
    }

    /// Opens every queue found under `<root>/consumequeue/<topic>/<queueId>` (not yet recovered).
    pub fn load(root: &Path, entries_per_file: usize) -> Result<Self, StoreError> {
        let table = ConsumeQueueTable::new(root, entries_per_file);
        let base = root.join(CONSUME_QUEUE_DIR);
        let topics = match fs::read_dir(&base) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(table),
            Err(e) => return Err(StoreError::io(&base, e)),
        };
        let mut map: HashMap<String, HashMap<i32, SharedConsumeQueue>> = HashMap::new();
        for topic_entry in topics {
            let topic_entry = topic_entry.map_err(|e| StoreError::io(&base, e))?;
            let topic_path = topic_entry.path();
            let Some(topic) = topic_entry.file_name().to_str().map(str::to_owned) else {
                tracing::warn!(path = %topic_path.display(), "ignoring non-UTF-8 topic directory");
                continue;
            };
            if !topic_path.is_dir() {
                continue;
            }
            let queue_dirs =
                fs::read_dir(&topic_path).map_err(|e| StoreError::io(&topic_path, e))?;
            for queue_entry in queue_dirs {
                let queue_entry = queue_entry.map_err(|e| StoreError::io(&topic_path, e))?;
                let queue_id = queue_entry
                    .file_name()
                    .to_str()
                    .and_then(|s| s.parse::<i32>().ok())
                    .filter(|id| *id >= 0);
                let Some(queue_id) = queue_id else {
                    tracing::warn!(path = %queue_entry.path().display(),
                        "ignoring unexpected entry in consume queue topic directory");
                    continue;
                };
                let queue = ConsumeQueue::open(root, &topic, queue_id, entries_per_file)?;
                map.entry(topic.clone())
                    .or_default()
                    .insert(queue_id, Arc::new(RwLock::new(queue)));
            }
        }
        *table.queues.write() = map;
        Ok(table)
    }

    /// Recovers every queue (see [`ConsumeQueue::recover`]); returns the queues that lost units
    /// and must be refilled from the CommitLog.
    pub fn recover_all(&self) -> Result<Vec<SharedConsumeQueue>, StoreError> {
        let mut damaged = Vec::new();
        for queue in self.all() {
            if queue.write().recover()? {
                damaged.push(queue);
            }
        }
        Ok(damaged)
    }

    /// The queue of (topic, queue id) if it exists.
    pub fn find(&self, topic: &str, queue_id: i32) -> Option<SharedConsumeQueue> {
        self.queues.read().get(topic)?.get(&queue_id).cloned()
    }

    /// The queue of (topic, queue id), created (empty, no file yet) if needed.
    pub fn find_or_create(
        &self,
        topic: &str,
        queue_id: i32,
    ) -> Result<SharedConsumeQueue, StoreError> {
        if let Some(queue) = self.find(topic, queue_id) {
            return Ok(queue);
        }
        let mut queues = self.queues.write();
        let per_topic = queues.entry(topic.to_owned()).or_default();
        if let Some(queue) = per_topic.get(&queue_id) {
            return Ok(queue.clone());
        }
        let queue = ConsumeQueue::open(&self.root, topic, queue_id, self.entries_per_file)?;
        let shared = Arc::new(RwLock::new(queue));
        per_topic.insert(queue_id, shared.clone());
        Ok(shared)
    }

    /// Every queue, for whole-store operations.
    pub fn all(&self) -> Vec<SharedConsumeQueue> {
        self.queues
            .read()
            .values()
            .flat_map(|per_topic| per_topic.values().cloned())
            .collect()
    }

    /// `(topic, queue id, queue)` for every queue, sorted by topic then queue id.
    pub fn entries(&self) -> Vec<(String, i32, SharedConsumeQueue)> {
        let mut out: Vec<_> = self
            .queues
            .read()
            .iter()
            .flat_map(|(topic, per_topic)| {
                per_topic
                    .iter()
                    .map(|(id, q)| (topic.clone(), *id, q.clone()))
            })
            .collect();
        out.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        out
    }

    /// Queue ids of a topic.
    pub fn queue_ids(&self, topic: &str) -> Vec<i32> {
        let mut ids: Vec<i32> = self
            .queues
            .read()
            .get(topic)
            .map(|q| q.keys().copied().collect())
            .unwrap_or_default();
        ids.sort_unstable();
        ids
    }

    /// `topic-queueId → max offset` of every queue, from which the CommitLog rebuilds its
    /// next-queue-offset table at start-up.
    pub fn max_offsets(&self) -> HashMap<String, i64> {
        self.entries()
            .into_iter()
            .map(|(topic, id, q)| (format!("{topic}-{id}"), q.read().max_offset()))
            .collect()
    }

    /// The largest `max_physical_offset` over all queues.
    pub fn max_physical_offset(&self) -> i64 {
        self.all()
            .iter()
            .map(|q| q.read().max_physical_offset())
            .max()
            .unwrap_or(0)
    }

    /// Truncates every queue to the CommitLog end (see [`ConsumeQueue::truncate_dirty`]).
    pub fn truncate_dirty(&self, max_commit_log_offset: i64) -> Result<(), StoreError> {
        for queue in self.all() {
            queue.write().truncate_dirty(max_commit_log_offset)?;
        }
        Ok(())
    }

    /// Deletes expired files of every queue and corrects their min offsets; returns the number
    /// of files deleted.
    pub fn delete_expired(&self, min_commit_log_offset: i64) -> Result<usize, StoreError> {
        let mut deleted = 0;
        for queue in self.all() {
            let mut queue = queue.write();
            deleted += queue.delete_expired(min_commit_log_offset)?;
            queue.correct_min_offset(min_commit_log_offset);
        }
        Ok(deleted)
    }

    /// Flushes every queue.
    pub fn flush(&self) -> Result<(), StoreError> {
        for queue in self.all() {
            let dirty = queue.read().dirty_files();
            for file in dirty {
                file.flush()?;
            }
        }
        Ok(())
    }

    /// Removes a topic's queues from the table and deletes their files; returns how many queues.
    pub fn remove_topic(&self, topic: &str) -> Result<usize, StoreError> {
        let removed = self.queues.write().remove(topic).unwrap_or_default();
        let count = removed.len();
        for (_, shared) in removed {
            match Arc::try_unwrap(shared) {
                Ok(lock) => lock.into_inner().destroy()?,
                Err(shared) => {
                    // Someone still reads it: empty it in place, the files go with the last user.
                    let mut queue = shared.write();
                    queue.truncate_dirty(0)?;
                }
            }
        }
        let topic_dir = self.root.join(CONSUME_QUEUE_DIR).join(topic);
        if topic_dir.is_dir() {
            fs::remove_dir_all(&topic_dir).map_err(|e| StoreError::io(&topic_dir, e))?;
        }
        Ok(count)
    }
}
