//! Loading a ConsumeQueue's files from disk, its recovery after a restart, and truncation to
//! the CommitLog.

use std::fs;
use std::sync::Arc;

use super::{
    CQ_STORE_UNIT_SIZE, ConsumeQueue, CqUnit, RECOVER_LAST_FILES, UNIT_SIZE_I64, list_offset_files,
};
use crate::error::StoreError;
use crate::mapped_file::MappedFile;

impl ConsumeQueue {
    /// Maps every file of the queue's directory as full. Files must start at multiples of the
    /// file size, be contiguous and be no longer than the file size; only those recovery
    /// rescans may be short (they are extended sparsely, and recovery ignores the extension).
    pub(super) fn load_files(&mut self) -> Result<(), StoreError> {
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
        assert!(
            self.min_offset() <= self.max_offset(),
            "{}-{}: min offset {} past max offset {} after recovery",
            self.topic,
            self.queue_id,
            self.min_offset(),
            self.max_offset()
        );
        if lost_units {
            tracing::warn!(topic = %self.topic, queue_id = self.queue_id,
                max_offset = self.max_offset(),
                "consume queue lost units (torn or short file); refilling it from the commit log");
        }
        Ok(lost_units)
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
}
