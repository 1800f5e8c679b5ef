//! Appends, commits, reads and truncation of a [`MappedFile`] (see the parent module for the
//! concurrency contract they keep).

use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use memmap2::MmapRaw;

use super::{
    APPEND_SCRATCH_KEEP, AppendMode, MAX_PENDING_APPEND_BYTES, MappedFile, OS_PAGE_SIZE, Publish,
    ZERO_SCAN_CHUNK,
};
use crate::error::StoreError;
use crate::os;

/// Keeps a mapping alive for a zero-copy [`Bytes`] slice.
struct MapSlice {
    map: Arc<MmapRaw>,
    start: usize,
    len: usize,
}

impl AsRef<[u8]> for MapSlice {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `start + len <= map.len()` was checked when the slice was created, and the
        // region was below `wrote_position` (published, immutable data) at that time.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(self.start), self.len) }
    }
}

impl MappedFile {
    /// Appends `data` at the appended position and commits; returns the position it was written at.
    pub fn append(&self, data: &[u8]) -> Result<usize, StoreError> {
        self.append_with(data.len(), |dst| {
            dst.copy_from_slice(data);
            Ok(())
        })
    }

    /// Reserves `len` bytes at the appended position and lets `fill` write them (in place in
    /// Mapped mode), then writes and publishes them together with anything still pending. The
    /// bytes are published only if `fill` and the write succeed (a failed write drops this
    /// append and leaves earlier pending bytes for the next commit); returns their position.
    pub fn append_with<F>(&self, len: usize, fill: F) -> Result<usize, StoreError>
    where
        F: FnOnce(&mut [u8]) -> Result<(), StoreError>,
    {
        let mut pending = self.write_lock.lock();
        // The appended position moves only once the bytes are written: until then a concurrent
        // `commit` (the flush thread's) sees nothing pending and does not queue on this lock
        // for the length of our `pwrite` (a profile under SYNC_FLUSH load showed about one lock
        // wait per group commit).
        let pos = self.append_locked(&mut pending, len, fill, Publish::AfterWrite)?;
        if let Err(e) = self.commit_locked(&mut pending, len) {
            // Only this append is withdrawn: the bytes before it belong to deferred appends
            // whose callers were told their position, and the next commit retries them.
            let kept = pending.len() - len;
            pending.truncate(kept);
            return Err(e);
        }
        Ok(pos)
    }

    /// Like [`MappedFile::append_with`], but in FileWrite mode the bytes stay pending until the
    /// next [`MappedFile::commit`] (or a non-deferred append) writes them: they have their
    /// position, but readers do not see them yet. In Mapped mode this is `append_with`.
    pub fn append_deferred_with<F>(&self, len: usize, fill: F) -> Result<usize, StoreError>
    where
        F: FnOnce(&mut [u8]) -> Result<(), StoreError>,
    {
        let mut pending = self.write_lock.lock();
        if self.append_mode == AppendMode::FileWrite
            && !pending.is_empty()
            && pending.len() + len > MAX_PENDING_APPEND_BYTES
        {
            self.commit_locked(&mut pending, 0)?;
        }
        self.append_locked(&mut pending, len, fill, Publish::Now)
    }

    /// Writes the pending bytes of deferred appends with one `pwrite` and publishes them;
    /// returns whether there were any. On failure they stay pending.
    pub fn commit(&self) -> Result<bool, StoreError> {
        if !self.has_pending() {
            return Ok(false);
        }
        let mut pending = self.write_lock.lock();
        self.commit_locked(&mut pending, 0)
    }

    /// Whether appends made before this call may still wait to be written, checked without the
    /// lock: the appended position is read first, so a wrote position at or past it covers every
    /// append made before the call.
    fn has_pending(&self) -> bool {
        let appended = self.appended_position();
        self.wrote_position() < appended
    }

    /// [`MappedFile::commit`] unless another thread holds the write lock (it is appending or
    /// committing, and whoever deferred bytes commits them before relying on them); returns
    /// whether it wrote anything.
    pub fn try_commit(&self) -> Result<bool, StoreError> {
        if !self.has_pending() {
            return Ok(false);
        }
        match self.write_lock.try_lock() {
            Some(mut pending) => self.commit_locked(&mut pending, 0),
            None => Ok(false),
        }
    }

    /// Places `len` bytes filled by `fill` at the appended position (caller holds the write
    /// lock): into the map and published (Mapped), or onto the pending bytes (FileWrite), where
    /// `publish` says whether the appended position covers them now or only once the caller's
    /// commit wrote them.
    fn append_locked<F>(
        &self,
        pending: &mut Vec<u8>,
        len: usize,
        fill: F,
        publish: Publish,
    ) -> Result<usize, StoreError>
    where
        F: FnOnce(&mut [u8]) -> Result<(), StoreError>,
    {
        let pos = self.appended_position.load(Ordering::Acquire);
        // An append goes right after what is written and pending, nowhere else: the pending
        // bytes fill exactly `[wrote, appended)` (none in Mapped mode, where the two positions
        // are one). Otherwise it would overwrite published bytes readers may hold (the safety
        // argument below) or leave a hole a later commit writes over. The write lock is held, so
        // neither position moves meanwhile.
        let wrote = self.wrote_position.load(Ordering::Acquire);
        assert!(
            wrote + pending.len() == pos,
            "{}: append at {pos} but {wrote} bytes are written and {} pending",
            self.path.display(),
            pending.len()
        );
        let free = self.file_size.saturating_sub(pos);
        if len > free {
            return Err(StoreError::FileFull {
                path: self.path.clone(),
                needed: len,
                free,
            });
        }
        match self.append_mode {
            AppendMode::Mapped => {
                // SAFETY: `pos + len <= file_size`, and `[pos, file_size)` is not yet published:
                // no reader can hold a slice of it (reads are bounded by wrote_position), and
                // other writers are excluded by `write_lock`. So this is the only reference to
                // these bytes.
                let dst =
                    unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().add(pos), len) };
                fill(dst)?;
                self.wrote_position.store(pos + len, Ordering::Release);
            }
            AppendMode::FileWrite => {
                // Zeroed like the unwritten tail of a fresh map, so `fill` sees the same bytes.
                let start = pending.len();
                pending.resize(start + len, 0);
                if let Err(e) = fill(&mut pending[start..]) {
                    pending.truncate(start);
                    return Err(e);
                }
                if publish == Publish::AfterWrite {
                    return Ok(pos);
                }
            }
        }
        self.appended_position.store(pos + len, Ordering::Release);
        Ok(pos)
    }

    /// [`MappedFile::commit`] with the write lock held. The last `unpublished` pending bytes
    /// belong to the caller's own append, not yet covered by the appended position.
    fn commit_locked(&self, pending: &mut Vec<u8>, unpublished: usize) -> Result<bool, StoreError> {
        if pending.is_empty() {
            return Ok(false);
        }
        let wrote = self.wrote_position.load(Ordering::Acquire);
        let appended = self.appended_position.load(Ordering::Acquire);
        let end = wrote + pending.len();
        assert_eq!(
            end,
            appended + unpublished,
            "pending bytes must fill exactly [wrote, appended) of {} plus the caller's own",
            self.path.display()
        );
        assert!(
            end <= self.file_size,
            "pending bytes past the end of {}",
            self.path.display()
        );
        self.file
            .write_all_at(pending, wrote as u64)
            .map_err(|e| StoreError::io(&self.path, e))?;
        // Wrote first: `commit`'s lock-free check reads appended, then wrote, so it never
        // mistakes this append's bytes for pending ones.
        self.wrote_position.store(end, Ordering::Release);
        self.appended_position.store(end, Ordering::Release);
        pending.clear();
        if pending.capacity() > APPEND_SCRATCH_KEEP {
            *pending = Vec::new();
        }
        Ok(true)
    }

    /// Borrowed view of published bytes `[pos, pos + len)`; `None` if any of it is past the
    /// wrote position.
    pub fn read_at(&self, pos: usize, len: usize) -> Option<&[u8]> {
        let end = pos.checked_add(len)?;
        if end > self.wrote_position() {
            return None;
        }
        // SAFETY: bounds checked above (wrote_position <= file_size); published bytes are not
        // mutated while readers exist (see module docs).
        Some(unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(pos), len) })
    }

    /// Zero-copy [`Bytes`] of published bytes `[pos, pos + len)`; it keeps the mapping alive.
    pub fn slice(&self, pos: usize, len: usize) -> Option<Bytes> {
        let end = pos.checked_add(len)?;
        if end > self.wrote_position() {
            return None;
        }
        Some(Bytes::from_owner(MapSlice {
            map: Arc::clone(&self.map),
            start: pos,
            len,
        }))
    }

    /// Truncates the valid data to `pos`: everything from `pos` to the end of the file reads
    /// as zeros afterwards (so a later scan cannot resurrect a torn or dirty record), and both
    /// positions are set to `pos`.
    ///
    /// Only recovery and dirty-tail truncation call this: readers must not hold slices past
    /// `pos` (they would observe the zeros).
    pub fn truncate_to(&self, pos: usize) -> Result<(), StoreError> {
        let pos = pos.min(self.file_size);
        let mut pending = self.write_lock.lock();
        pending.clear();
        let _f = self.flush_lock.lock();
        let page_end = pos
            .div_ceil(OS_PAGE_SIZE)
            .saturating_mul(OS_PAGE_SIZE)
            .min(self.file_size);
        self.zero_range(pos, page_end);
        if page_end < self.file_size && !self.punch_hole(page_end, self.file_size - page_end) {
            let mut at = page_end;
            while at < self.file_size {
                let end = (at + ZERO_SCAN_CHUNK).min(self.file_size);
                self.zero_range(at, end);
                at = end;
            }
        }
        self.map
            .flush_range(0, self.file_size)
            .map_err(|e| StoreError::io(&self.path, e))?;
        self.wrote_position.store(pos, Ordering::Release);
        self.appended_position.store(pos, Ordering::Release);
        self.flushed_position.store(pos, Ordering::Release);
        Ok(())
    }

    /// Zeroes `[start, end)` (caller holds the write lock), skipping bytes already zero so that
    /// sparse holes stay unallocated.
    fn zero_range(&self, start: usize, end: usize) {
        if start >= end || end > self.file_size {
            return;
        }
        // SAFETY: `start < end <= file_size`; the caller holds write_lock and the region is
        // being withdrawn from readers (see `truncate_to`).
        let region = unsafe {
            std::slice::from_raw_parts_mut(self.map.as_mut_ptr().add(start), end - start)
        };
        if region.iter().any(|b| *b != 0) {
            region.fill(0);
        }
    }

    /// Deallocates `[start, start + len)` with `fallocate(PUNCH_HOLE)`; the range then reads as
    /// zeros through the mapping. Returns false if the filesystem does not support it.
    fn punch_hole(&self, start: usize, len: usize) -> bool {
        os::punch_hole(&self.file, start as u64, len as u64).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::super::file_name;
    use super::*;

    use super::super::test_support::{MODES, tmp};

    /// A `fill` that fails publishes nothing, in either mode (the next append takes the same
    /// position and overwrites what it left); a record larger than the kept scratch is written
    /// whole.
    #[test]
    fn failed_fill_publishes_nothing() -> Result<(), StoreError> {
        for mode in MODES {
            let dir = tmp();
            let path = dir.path().join(file_name(0));
            let size = 4 * APPEND_SCRATCH_KEEP;
            let mf = MappedFile::create(&path, size)?.with_append_mode(mode);
            let failed = mf.append_with(8, |dst| {
                dst.copy_from_slice(b"torn rec");
                Err(StoreError::Config("encode failed".into()))
            });
            assert!(failed.is_err());
            assert_eq!(mf.wrote_position(), 0);
            assert_eq!(
                mf.append_with(4, |dst| {
                    if mode == AppendMode::FileWrite {
                        assert_eq!(dst, [0u8; 4], "the scratch starts from zeros");
                    }
                    dst.copy_from_slice(b"next");
                    Ok(())
                })?,
                0
            );
            let big = vec![9u8; 2 * APPEND_SCRATCH_KEEP];
            assert_eq!(mf.append(&big)?, 4);
            assert_eq!(mf.read_at(0, 4), Some(&b"next"[..]));
            assert_eq!(mf.read_at(4, big.len()), Some(&big[..]));
            drop(mf);
            let raw = std::fs::read(&path).map_err(|e| StoreError::io(&path, e))?;
            assert_eq!(&raw[..4], b"next");
            assert!(raw[4..4 + big.len()].iter().all(|b| *b == 9));
        }
        Ok(())
    }

    /// Deferred appends get consecutive positions at once but are readable only after a commit
    /// (FileWrite), and a committing append takes them along; in Mapped mode there is nothing to
    /// defer. Recovery's position reset drops what is pending.
    #[test]
    fn deferred_appends_are_published_by_the_commit() -> Result<(), StoreError> {
        let fill = |bytes: &'static [u8]| {
            move |dst: &mut [u8]| {
                dst.copy_from_slice(bytes);
                Ok(())
            }
        };
        for mode in MODES {
            let dir = tmp();
            let path = dir.path().join(file_name(0));
            let mf = MappedFile::create(&path, 4 * OS_PAGE_SIZE)?.with_append_mode(mode);
            assert_eq!(mf.append_deferred_with(5, fill(b"hello"))?, 0);
            assert_eq!(mf.append_deferred_with(5, fill(b"world"))?, 5);
            assert_eq!(mf.appended_position(), 10, "{mode:?}");
            assert_eq!(mf.free_space(), 4 * OS_PAGE_SIZE - 10);
            if mode == AppendMode::Mapped {
                assert_eq!(mf.wrote_position(), 10);
                assert!(!mf.commit()?);
                continue;
            }
            assert_eq!(mf.wrote_position(), 0);
            assert_eq!(mf.read_at(0, 5), None);
            assert!(mf.commit()?);
            assert!(!mf.commit()?, "nothing left");
            assert_eq!(mf.wrote_position(), 10);
            assert_eq!(mf.read_at(0, 10), Some(&b"helloworld"[..]));

            assert_eq!(mf.append_deferred_with(3, fill(b"abc"))?, 10);
            assert_eq!(mf.append(b"def")?, 13);
            assert_eq!(mf.wrote_position(), 16);
            assert_eq!(mf.read_at(10, 6), Some(&b"abcdef"[..]));

            assert_eq!(mf.append_deferred_with(3, fill(b"ghi"))?, 16);
            mf.set_wrote_position(16);
            assert_eq!(mf.appended_position(), 16);
            assert!(!mf.commit()?, "the reset dropped the pending bytes");
            drop(mf);
            let raw = std::fs::read(&path).map_err(|e| StoreError::io(&path, e))?;
            assert_eq!(&raw[..19], b"helloworldabcdef\0\0\0");
        }
        Ok(())
    }

    /// `try_commit` skips while a writer holds the lock (here: the append filling its bytes)
    /// and writes what is pending otherwise; a failed committing append moves no position.
    #[test]
    fn try_commit_skips_a_held_lock_and_writes_what_is_pending() -> Result<(), StoreError> {
        let dir = tmp();
        let path = dir.path().join(file_name(0));
        let mf =
            MappedFile::create(&path, 4 * OS_PAGE_SIZE)?.with_append_mode(AppendMode::FileWrite);
        mf.append_deferred_with(3, |dst| {
            dst.copy_from_slice(b"abc");
            Ok(())
        })?;
        let pos = mf.append_with(3, |dst| {
            assert_eq!(
                mf.appended_position(),
                3,
                "not yet covered while being filled"
            );
            assert!(!mf.try_commit()?, "the lock is held: skipped");
            dst.copy_from_slice(b"def");
            Ok(())
        })?;
        assert_eq!(pos, 3);
        assert_eq!((mf.appended_position(), mf.wrote_position()), (6, 6));
        assert_eq!(mf.read_at(0, 6), Some(&b"abcdef"[..]));

        // A failed committing append leaves the appended position where it was.
        let failed = mf.append_with(2, |_| Err(StoreError::Config("refused".into())));
        assert!(failed.is_err());
        assert_eq!((mf.appended_position(), mf.wrote_position()), (6, 6));

        mf.append_deferred_with(3, |dst| {
            dst.copy_from_slice(b"ghi");
            Ok(())
        })?;
        assert_eq!(mf.wrote_position(), 6);
        assert!(mf.try_commit()?);
        assert!(!mf.try_commit()?, "nothing left");
        assert_eq!(mf.read_at(6, 3), Some(&b"ghi"[..]));
        Ok(())
    }

    /// Deferred appends nobody commits stay within MAX_PENDING_APPEND_BYTES: the append that
    /// would pass it writes what is pending first.
    #[test]
    fn pending_bytes_are_bounded() -> Result<(), StoreError> {
        let dir = tmp();
        let path = dir.path().join(file_name(0));
        let size = 4 * MAX_PENDING_APPEND_BYTES;
        let mf = MappedFile::create(&path, size)?.with_append_mode(AppendMode::FileWrite);
        let record = 64 * 1024;
        let mut appended = 0;
        while appended + record <= 3 * MAX_PENDING_APPEND_BYTES {
            mf.append_deferred_with(record, |dst| {
                dst.fill(1);
                Ok(())
            })?;
            appended += record;
            let pending = mf.appended_position() - mf.wrote_position();
            assert!(
                pending <= MAX_PENDING_APPEND_BYTES,
                "{pending} bytes pending"
            );
            assert!(pending > 0);
        }
        assert!(mf.wrote_position() >= 2 * MAX_PENDING_APPEND_BYTES);
        assert!(mf.commit()?);
        assert_eq!(
            mf.read_at(0, appended).map(|b| b.iter().all(|x| *x == 1)),
            Some(true)
        );
        Ok(())
    }

    #[test]
    fn truncate_zeroes_tail() -> Result<(), StoreError> {
        let dir = tmp();
        let path = dir.path().join(file_name(0));
        let size = 3 * OS_PAGE_SIZE;
        let mf = MappedFile::create(&path, size)?.with_append_mode(AppendMode::FileWrite);
        mf.append(&vec![0xAB; size])?;
        mf.truncate_to(100)?;
        assert_eq!(mf.wrote_position(), 100);
        mf.set_wrote_position(size);
        let all = mf
            .read_at(0, size)
            .ok_or_else(|| StoreError::Config("read".into()))?;
        assert!(all[..100].iter().all(|b| *b == 0xAB));
        assert!(all[100..].iter().all(|b| *b == 0));
        drop(mf);
        let raw = std::fs::read(&path).map_err(|e| StoreError::io(&path, e))?;
        assert!(raw[100..].iter().all(|b| *b == 0));
        Ok(())
    }

    /// Appends land exactly where the written and pending bytes end, in both modes: the
    /// appended position is the wrote position plus what is pending, and a commit closes the gap.
    #[test]
    fn appends_land_at_the_end_of_the_written_and_pending_bytes() -> Result<(), StoreError> {
        for mode in MODES {
            let dir = tmp();
            let path = dir.path().join(file_name(0));
            let mf = MappedFile::create(&path, 4 * OS_PAGE_SIZE)?.with_append_mode(mode);
            let mut end = 0;
            for len in [5usize, 1, 300, 20] {
                let at = mf.append_deferred_with(len, |dst| {
                    dst.fill(1);
                    Ok(())
                })?;
                assert_eq!(at, end, "{mode:?}");
                end += len;
                assert_eq!(mf.appended_position(), end, "{mode:?}");
                assert!(mf.wrote_position() <= end, "{mode:?}");
            }
            assert_eq!(mf.append(b"tail")?, end, "{mode:?}");
            end += 4;
            assert_eq!(
                (mf.wrote_position(), mf.appended_position()),
                (end, end),
                "{mode:?}"
            );
        }
        Ok(())
    }

    /// An append whose position disagrees with the written and pending bytes (a bookkeeping
    /// bug) stops before it writes anything.
    #[test]
    #[should_panic(expected = "append at 8 but 0 bytes are written and 0 pending")]
    fn an_append_away_from_the_end_of_the_data_is_caught() {
        let dir = tmp();
        let path = dir.path().join(file_name(0));
        let mf = MappedFile::create(&path, OS_PAGE_SIZE).unwrap_or_else(|e| panic!("create: {e}"));
        mf.appended_position.store(8, Ordering::Release);
        let _ = mf.append(b"record");
    }
}
