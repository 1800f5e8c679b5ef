//! An ordered run of equally sized [`MappedFile`]s forming one logical byte stream: the CommitLog.
//!
//! File `k + 1` starts exactly `mapped_file_size` bytes after file `k` and is named by that start
//! offset, so a global offset maps to its file by one division. Only the newest file is written;
//! older files are full (a BLANK entry pads each one, see `commit_log.rs`). Retention removes
//! files from the front; recovery truncates at the back.
//!
//! The file list is behind a `RwLock` held only long enough to clone an `Arc<MappedFile>`, so the
//! appender, the flusher, the reput thread and readers never wait on each other's I/O.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime};

use parking_lot::RwLock;

use crate::error::StoreError;
use crate::mapped_file::{AppendMode, MappedFile, file_name, parse_file_name};

/// The files of one stream, oldest first.
pub struct MappedFileQueue {
    dir: PathBuf,
    mapped_file_size: usize,
    files: RwLock<Vec<Arc<MappedFile>>>,
    /// Global offset up to which data is known durable.
    flushed_where: AtomicI64,
    /// How the segments take appends: `pwrite` (see the `mapped_file` module docs).
    append_mode: AppendMode,
}

impl std::fmt::Debug for MappedFileQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFileQueue")
            .field("dir", &self.dir)
            .field("files", &self.files.read().len())
            .field("flushed_where", &self.flushed_where())
            .finish()
    }
}

impl MappedFileQueue {
    /// An empty queue over `dir` (nothing is read until [`MappedFileQueue::load`]).
    pub fn new(dir: &Path, mapped_file_size: usize) -> Self {
        Self {
            dir: dir.to_path_buf(),
            mapped_file_size,
            files: RwLock::new(Vec::new()),
            flushed_where: AtomicI64::new(0),
            append_mode: AppendMode::FileWrite,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn mapped_file_size(&self) -> usize {
        self.mapped_file_size
    }

    fn size_i64(&self) -> i64 {
        // The config validation guarantees the size fits an i32.
        i64::try_from(self.mapped_file_size).unwrap_or(i64::MAX)
    }

    /// Maps every 20-digit-named file of the directory. Files must all have the configured size
    /// (only the newest may be short: it is extended with zeros), start at multiples of it and be
    /// contiguous; anything else is reported as corruption rather than guessed around.
    pub fn load(&self) -> Result<(), StoreError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| StoreError::io(&self.dir, e))?;
        let mut listed = Vec::new();
        let entries = std::fs::read_dir(&self.dir).map_err(|e| StoreError::io(&self.dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io(&self.dir, e))?;
            let path = entry.path();
            match parse_file_name(&path) {
                Some(offset) if path.is_file() => listed.push((offset, path)),
                _ => {
                    tracing::warn!(path = %path.display(), "ignoring unexpected file in commit log directory")
                }
            }
        }
        listed.sort_by_key(|(offset, _)| *offset);
        let size = self.size_i64();
        let listed_count = listed.len();
        let mut files = Vec::with_capacity(listed_count);
        let mut expected: Option<i64> = None;
        for (offset, path) in listed {
            if offset % size != 0 {
                return Err(StoreError::corrupt(
                    &path,
                    offset,
                    format!("file start is not a multiple of the segment size {size}"),
                ));
            }
            if let Some(expected) = expected
                && expected != offset
            {
                return Err(StoreError::corrupt(
                    &path,
                    offset,
                    format!(
                        "segments are not contiguous: expected {}",
                        file_name(expected)
                    ),
                ));
            }
            let is_last = listed_count == files.len() + 1;
            let len = std::fs::metadata(&path)
                .map_err(|e| StoreError::io(&path, e))?
                .len();
            if len < self.mapped_file_size as u64 && is_last {
                // The newest segment was cut short (crash while extending it, a partial copy):
                // its missing tail reads as zeros, which recovery treats as the end of the data.
                tracing::warn!(path = %path.display(), len, "newest commit log segment is short; extending it");
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(|e| StoreError::io(&path, e))?;
                file.set_len(self.mapped_file_size as u64)
                    .map_err(|e| StoreError::io(&path, e))?;
            }
            files.push(Arc::new(
                MappedFile::open(&path, self.mapped_file_size)?.with_append_mode(self.append_mode),
            ));
            expected = offset.checked_add(size);
        }
        *self.files.write() = files;
        Ok(())
    }

    /// Snapshot of the current files.
    pub fn files(&self) -> Vec<Arc<MappedFile>> {
        self.files.read().clone()
    }

    pub fn file_count(&self) -> usize {
        self.files.read().len()
    }

    pub fn first_file(&self) -> Option<Arc<MappedFile>> {
        self.files.read().first().cloned()
    }

    pub fn last_file(&self) -> Option<Arc<MappedFile>> {
        self.files.read().last().cloned()
    }

    /// The file to append to: the last one if it has room, else a new one after it (or at
    /// `start_offset` rounded down to a segment boundary when there is none yet).
    pub fn last_file_or_create(&self, start_offset: i64) -> Result<Arc<MappedFile>, StoreError> {
        if let Some(last) = self.last_file()
            && !last.is_full()
        {
            return Ok(last);
        }
        let mut files = self.files.write();
        let next_from = match files.last() {
            Some(last) if !last.is_full() => return Ok(Arc::clone(last)),
            Some(last) => last.file_from_offset() + self.size_i64(),
            None => start_offset - start_offset.rem_euclid(self.size_i64()),
        };
        let path = self.dir.join(file_name(next_from));
        let file = Arc::new(
            MappedFile::create(&path, self.mapped_file_size)?.with_append_mode(self.append_mode),
        );
        tracing::debug!(path = %path.display(), "created commit log segment");
        files.push(Arc::clone(&file));
        Ok(file)
    }

    /// The file holding global `offset`, if it is still present.
    pub fn find_by_offset(&self, offset: i64) -> Option<Arc<MappedFile>> {
        let files = self.files.read();
        let first = files.first()?.file_from_offset();
        if offset < first {
            return None;
        }
        let index = usize::try_from((offset - first) / self.size_i64()).ok()?;
        files.get(index).cloned()
    }

    /// Start of the first file (0 if there is none).
    pub fn min_offset(&self) -> i64 {
        self.first_file().map_or(0, |f| f.file_from_offset())
    }

    /// End of the written data (0 if there is no file).
    pub fn max_offset(&self) -> i64 {
        self.last_file().map_or(0, |f| {
            f.file_from_offset() + i64::try_from(f.wrote_position()).unwrap_or(0)
        })
    }

    /// Global offset up to which everything is durable.
    pub fn flushed_where(&self) -> i64 {
        self.flushed_where.load(Ordering::Acquire)
    }

    /// Sets the durable end (recovery, truncation, or the start of the first file). Never past
    /// the written end: the next flush would start there and skip the bytes in between.
    pub fn set_flushed_where(&self, offset: i64) {
        let max = self.max_offset();
        assert!(
            offset <= max,
            "{}: flushed offset {offset} would pass the written end {max}",
            self.dir.display()
        );
        self.flushed_where.store(offset, Ordering::Release);
    }

    /// Start of the segment after the one holding `offset`.
    pub fn roll_next_file(&self, offset: i64) -> i64 {
        let size = self.size_i64();
        offset - offset.rem_euclid(size) + size
    }

    /// msyncs the dirty files from `flushed_where` on. With `least_pages > 0` a file is only
    /// flushed if that many pages are dirty (or it is full). Returns the new `flushed_where`.
    ///
    /// Files are flushed in order and the loop stops at the first that is not entirely durable,
    /// so `flushed_where` never jumps over unflushed bytes.
    pub fn flush(&self, least_pages: usize) -> Result<i64, StoreError> {
        loop {
            let at = self.flushed_where();
            let file = match self.find_by_offset(at) {
                Some(f) => f,
                None => {
                    // Before the first file (fresh store or retention removed it): start there.
                    match self.first_file() {
                        Some(first) if at < first.file_from_offset() => {
                            self.set_flushed_where(first.file_from_offset());
                            continue;
                        }
                        _ => return Ok(at),
                    }
                }
            };
            let flushed = file.flush_least(least_pages)?;
            let reached = file.file_from_offset() + i64::try_from(flushed).unwrap_or(0);
            if reached > at {
                self.flushed_where.fetch_max(reached, Ordering::AcqRel);
            }
            if flushed < file.file_size() || reached <= at {
                return Ok(self.flushed_where());
            }
        }
    }

    /// Drops everything at or after global `offset`: the file holding it is truncated (its tail
    /// zeroed), later files are deleted.
    pub fn truncate_dirty(&self, offset: i64) -> Result<(), StoreError> {
        let size = self.size_i64();
        let mut files = self.files.write();
        let mut keep = Vec::with_capacity(files.len());
        for file in files.drain(..) {
            let from = file.file_from_offset();
            if from + size <= offset {
                keep.push(file);
            } else if offset >= from {
                let pos = usize::try_from(offset - from).unwrap_or(0);
                file.truncate_to(pos)?;
                keep.push(file);
            } else {
                tracing::warn!(path = %file.path().display(), "deleting commit log segment past the recovered end");
                file.unlink()?;
            }
        }
        *files = keep;
        drop(files);
        if self.flushed_where() > offset {
            self.set_flushed_where(offset);
        }
        Ok(())
    }

    /// Deletes up to `batch_max` files from the front whose last modification is older than
    /// `expired` (or any file when `clean_immediately`), never the newest one. Sleeps `interval`
    /// between deletions to spread the I/O. Returns how many were deleted.
    pub fn delete_expired_by_time(
        &self,
        expired: Duration,
        interval: Duration,
        clean_immediately: bool,
        batch_max: usize,
    ) -> Result<usize, StoreError> {
        let candidates: Vec<Arc<MappedFile>> = {
            let files = self.files.read();
            let n = files.len().saturating_sub(1);
            files.iter().take(n).cloned().collect()
        };
        let now = SystemTime::now();
        let mut deleted = 0;
        for file in candidates {
            if deleted >= batch_max {
                break;
            }
            let modified = std::fs::metadata(file.path())
                .and_then(|m| m.modified())
                .map_err(|e| StoreError::io(file.path(), e))?;
            let age = now.duration_since(modified).unwrap_or(Duration::ZERO);
            if !(clean_immediately || age >= expired) {
                // Files are in write order: a younger file means every later one is younger too.
                break;
            }
            {
                let mut files = self.files.write();
                match files.first() {
                    Some(first) if Arc::ptr_eq(first, &file) && files.len() > 1 => {
                        files.remove(0);
                    }
                    _ => break,
                }
            }
            tracing::info!(path = %file.path().display(), clean_immediately, "deleting expired commit log segment");
            file.unlink()?;
            deleted += 1;
            if !interval.is_zero() {
                std::thread::sleep(interval);
            }
        }
        Ok(deleted)
    }

    /// Deletes every file (used by tests and `destroy`).
    pub fn destroy(&self) -> Result<(), StoreError> {
        let files = std::mem::take(&mut *self.files.write());
        for file in files {
            file.unlink()?;
        }
        self.set_flushed_where(0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_find_flush_truncate() -> Result<(), StoreError> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::io("tmp", e))?;
        let q = MappedFileQueue::new(dir.path(), 4096);
        q.load()?;
        assert!(q.last_file().is_none());
        let f0 = q.last_file_or_create(0)?;
        f0.append(&[1u8; 4096])?;
        let f1 = q.last_file_or_create(0)?;
        assert_eq!(f1.file_from_offset(), 4096);
        f1.append(&[2u8; 100])?;
        assert_eq!(q.max_offset(), 4196);
        assert_eq!(
            q.find_by_offset(4095).map(|f| f.file_from_offset()),
            Some(0)
        );
        assert_eq!(
            q.find_by_offset(4096).map(|f| f.file_from_offset()),
            Some(4096)
        );
        assert!(q.find_by_offset(8192).is_none());
        assert_eq!(q.flush(0)?, 4196);
        assert_eq!(q.roll_next_file(4100), 8192);
        q.truncate_dirty(4000)?;
        assert_eq!(q.file_count(), 1);
        assert_eq!(q.max_offset(), 4000);
        assert_eq!(q.flushed_where(), 4000);
        drop((f0, f1));

        let q2 = MappedFileQueue::new(dir.path(), 4096);
        q2.load()?;
        assert_eq!(q2.file_count(), 1);
        let q3 = MappedFileQueue::new(dir.path(), 2048);
        assert!(
            q3.load().is_err(),
            "a segment larger than configured is corruption"
        );
        drop(q2);

        // A short newest segment (crash while it was being created) is extended with zeros.
        let q4 = MappedFileQueue::new(dir.path(), 8192);
        q4.load()?;
        assert_eq!(q4.file_count(), 1);
        assert_eq!(q4.first_file().map(|f| f.file_size()), Some(8192));
        assert_eq!(
            q4.first_file()
                .and_then(|f| f.read_at(4096, 4).map(<[u8]>::to_vec)),
            Some(vec![0u8; 4])
        );
        Ok(())
    }

    /// The flushed offset follows the flushes forward and the truncations back, never past the
    /// written end.
    #[test]
    fn flushed_where_never_passes_the_written_end() -> Result<(), StoreError> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::io("tmp", e))?;
        let q = MappedFileQueue::new(dir.path(), 4096);
        q.load()?;
        let within = |q: &MappedFileQueue| q.flushed_where() <= q.max_offset();
        q.last_file_or_create(0)?.append(&[1u8; 4096])?;
        assert!(within(&q));
        assert_eq!(q.flush(0)?, 4096);
        q.last_file_or_create(0)?.append(&[2u8; 300])?;
        assert!(within(&q));
        assert_eq!(q.flush(0)?, 4396);
        q.truncate_dirty(4200)?;
        assert_eq!((q.flushed_where(), q.max_offset()), (4200, 4200));
        q.set_flushed_where(4100);
        assert!(within(&q));
        Ok(())
    }

    #[test]
    #[should_panic(expected = "flushed offset 500 would pass the written end 100")]
    fn a_flushed_offset_past_the_written_end_is_caught() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let q = MappedFileQueue::new(dir.path(), 4096);
        let _ = q.load();
        let _ = q.last_file_or_create(0).and_then(|f| f.append(&[1u8; 100]));
        q.set_flushed_where(500);
    }
}
