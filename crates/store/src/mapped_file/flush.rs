//! Durability and memory of a [`MappedFile`]: the msync ("flush"), releasing its mapped pages
//! from the process and its flushed pages from the page cache, and preparing its blocks ahead of
//! the appends (zeros or `fallocate`).

use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;

use memmap2::{MmapRaw, UncheckedAdvice};

use super::{ALLOCATE_AHEAD_CHUNK, MappedFile, OS_PAGE_SIZE, ZERO_AHEAD_CHUNK, ZEROS};
use crate::error::StoreError;
use crate::os;

/// Unmaps the whole pages inside `[start, end)` of `map` from this process (`MADV_DONTNEED`;
/// an `end` at or past the map's end includes its last page) and returns how many bytes that
/// covered; `page_release.rs` says why.
///
/// Only for the store's shared file mappings: there the bytes stay in the page cache (a dirty
/// page stays dirty and is written back as before) and the next access maps the same bytes again
/// with a minor fault. Nothing is lost and no reader sees a change.
pub(crate) fn release_mapped_pages(
    map: &MmapRaw,
    start: usize,
    end: usize,
) -> std::io::Result<usize> {
    let start = start.div_ceil(OS_PAGE_SIZE).saturating_mul(OS_PAGE_SIZE);
    // Up to the end of the map includes its last, partial page (the kernel rounds the length).
    let end = if end >= map.len() {
        map.len()
    } else {
        end / OS_PAGE_SIZE * OS_PAGE_SIZE
    };
    if start >= end {
        return Ok(0);
    }
    // SAFETY: `[start, end)` lies inside the mapping. Every `MmapRaw` of the store is a
    // `MAP_SHARED` mapping of a regular file (`MmapOptions::map_raw`), for which MADV_DONTNEED
    // only drops this process's page-table entries: the contents stay those of the file, so
    // borrowed slices and `Bytes` into the range go on reading the same bytes (refaulted from
    // the page cache), and stores made before the call are kept (the dirty bit moves to the
    // page cache page). The zeroing that makes the advice unsafe applies to private and
    // anonymous mappings only.
    unsafe { map.unchecked_advise_range(UncheckedAdvice::DontNeed, start, end - start)? };
    Ok(end - start)
}

impl MappedFile {
    /// Unmaps this file's pages below `pos` from the process (see [`release_mapped_pages`]);
    /// returns the bytes that covered.
    pub fn release_pages_below(&self, pos: usize) -> Result<usize, StoreError> {
        release_mapped_pages(&self.map, 0, pos).map_err(|e| StoreError::io(&self.path, e))
    }

    /// Drops the file's pages in `[start, end)` from the page cache (`POSIX_FADV_DONTNEED`),
    /// whole pages below the flushed position only, and returns how many bytes that covered
    /// (`page_release.rs` says why). Pages mapped by a process, or dirty, are left by the kernel;
    /// a later read fetches the bytes from disk again. Nothing is lost: only flushed pages are
    /// asked for.
    pub fn evict_page_cache(&self, start: usize, end: usize) -> Result<usize, StoreError> {
        let start = start.div_ceil(OS_PAGE_SIZE) * OS_PAGE_SIZE;
        let end = end.min(self.flushed_position()) / OS_PAGE_SIZE * OS_PAGE_SIZE;
        if start >= end {
            return Ok(0);
        }
        os::advise_dont_need(&self.file, start as u64, (end - start) as u64)
            .map_err(|e| StoreError::io(&self.path, e))?;
        Ok(end - start)
    }

    /// Writes zeros from the first page boundary at or after the appended position (or the end
    /// of earlier zeros, if further) up to `to`, and starts their writeback; returns how many
    /// bytes it zeroed.
    ///
    /// Why: the file is sparse, so the flush after an append into a page the file never had
    /// allocates its block, and with that every msync also writes and waits for the allocation's
    /// metadata (this box's ext4: an msync of a group commit's 8.5 KiB took 88 µs into fresh
    /// pages and 52 µs into pages written before). Zeros written ahead make the blocks exist
    /// before the records arrive; the record's own bytes then overwrite them in place.
    ///
    /// Never touches appended bytes: each chunk is written under the write lock, from at or
    /// after the appended position it reads there. Bytes past the appended position read as
    /// zeros either way, so recovery sees the same file.
    pub fn zero_ahead(&self, to: usize) -> Result<usize, StoreError> {
        let to = to.min(self.file_size);
        let mut zeroed = 0;
        let mut first = None;
        loop {
            let (start, end) = {
                let _pending = self.write_lock.lock();
                let appended = self.appended_position.load(Ordering::Acquire);
                let start = appended
                    .next_multiple_of(OS_PAGE_SIZE)
                    .max(self.prepared_to.load(Ordering::Relaxed));
                if start >= to {
                    break;
                }
                let end = (start + ZERO_AHEAD_CHUNK).min(to);
                self.file
                    .write_all_at(&ZEROS[..end - start], start as u64)
                    .map_err(|e| StoreError::io(&self.path, e))?;
                (start, end)
            };
            self.prepared_to.store(end, Ordering::Relaxed);
            first.get_or_insert(start);
            zeroed += end - start;
        }
        if let Some(start) = first {
            os::start_writeback(&self.file, start as u64, zeroed as u64)
                .map_err(|e| StoreError::io(&self.path, e))?;
        }
        Ok(zeroed)
    }

    /// Allocates the file's blocks from the first page boundary at or after the appended
    /// position (or the end of what was prepared before, if further) up to `to`, writing
    /// nothing; returns how many bytes it allocated, or `None` when the filesystem cannot
    /// (`fallocate` unsupported: nothing was changed).
    ///
    /// Why: in a sparse file the block of a page is allocated when the page is first written back,
    /// and on ext4 that writeback holds the file's block-map lock (`i_data_sem`) while it
    /// allocates; a `pwrite` into a page the file never had takes the same lock for its delayed
    /// allocation, so under ASYNC_FLUSH an append waited for the timed flush's allocation: 9 stalls
    /// of 1–22 ms (76–127 ms in all) per 6 s of 32 synchronous senders on this box, with the
    /// appending thread off CPU in `ext4_da_get_block_prep → down_write`. Into allocated
    /// (unwritten) blocks the append finds its mapping without that lock. Unlike
    /// [`MappedFile::zero_ahead`] nothing is written twice, which is why ASYNC_FLUSH uses this;
    /// SYNC_FLUSH uses zeros because its msync into unwritten blocks also converts them (measured
    /// slower).
    ///
    /// No lock is needed: allocating a range leaves its bytes as they are, so a range that an
    /// append reached meanwhile is not harmed.
    pub fn allocate_ahead(&self, to: usize) -> Result<Option<usize>, StoreError> {
        let to = to.min(self.file_size);
        let mut allocated = 0;
        loop {
            let start = self
                .appended_position
                .load(Ordering::Acquire)
                .next_multiple_of(OS_PAGE_SIZE)
                .max(self.prepared_to.load(Ordering::Relaxed));
            if start >= to {
                return Ok(Some(allocated));
            }
            let end = (start + ALLOCATE_AHEAD_CHUNK).min(to);
            match os::allocate(&self.file, start as u64, (end - start) as u64) {
                Ok(()) => {}
                Err(e) if allocated == 0 && os::is_unsupported(&e) => return Ok(None),
                Err(e) => return Err(StoreError::io(&self.path, e)),
            }
            self.prepared_to.store(end, Ordering::Relaxed);
            allocated += end - start;
        }
    }

    /// Where the range prepared ahead of the appends (zeroed or allocated) ends (0: none).
    pub fn prepared_to(&self) -> usize {
        self.prepared_to.load(Ordering::Relaxed)
    }

    /// Unmaps the pages below the wrote position (the last, partial page stays), unless nothing
    /// was written since the last such call and `every_time` is false: a file nobody writes is
    /// then skipped, which keeps a round over many idle ConsumeQueue files free of syscalls.
    pub fn release_written_pages(&self, every_time: bool) -> Result<usize, StoreError> {
        let wrote = self.wrote_position();
        if !every_time && self.released_at.load(Ordering::Relaxed) == wrote {
            return Ok(0);
        }
        let released = self.release_pages_below(wrote)?;
        self.released_at.store(wrote, Ordering::Relaxed);
        Ok(released)
    }

    /// Whether `least_pages` dirty pages have accumulated (always true when full and dirty;
    /// `least_pages == 0` means any dirty byte).
    pub fn is_able_to_flush(&self, least_pages: usize) -> bool {
        let flushed = self.flushed_position();
        let wrote = self.wrote_position();
        if wrote <= flushed {
            return false;
        }
        if self.is_full() || least_pages == 0 {
            return true;
        }
        wrote / OS_PAGE_SIZE - flushed / OS_PAGE_SIZE >= least_pages
    }

    /// msyncs everything written so far; returns the new flushed position.
    pub fn flush(&self) -> Result<usize, StoreError> {
        self.flush_least(0)
    }

    /// msyncs if at least `least_pages` pages are dirty; returns the flushed position.
    pub fn flush_least(&self, least_pages: usize) -> Result<usize, StoreError> {
        let _f = self.flush_lock.lock();
        if !self.is_able_to_flush(least_pages) {
            return Ok(self.flushed_position());
        }
        let flushed = self.flushed_position();
        let wrote = self.wrote_position();
        if wrote > flushed {
            self.map
                .flush_range(flushed, wrote - flushed)
                .map_err(|e| StoreError::io(&self.path, e))?;
            self.flushed_position.store(wrote, Ordering::Release);
        }
        Ok(self.flushed_position())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{AppendMode, file_name, resident_bytes_of};
    use super::*;

    use super::super::test_support::{MODES, tmp};

    #[test]
    fn released_pages_leave_the_resident_set_and_keep_their_bytes() -> Result<(), StoreError> {
        for mode in MODES {
            let dir = tmp();
            let path = dir.path().join(file_name(0));
            let size = 64 * OS_PAGE_SIZE;
            let data: Vec<u8> = (0..40 * OS_PAGE_SIZE).map(|i| (i % 251) as u8).collect();
            let mf = MappedFile::create(&path, size)?.with_append_mode(mode);
            mf.append(&data)?;
            // A reader that holds its zero-copy bytes across the release.
            let held = mf.slice(0, data.len()).unwrap_or_default();
            assert_eq!(&held[..], &data[..], "{mode:?}");
            let before = resident_bytes_of(&path);
            assert!(
                before >= data.len() as u64,
                "{mode:?}: {before} bytes mapped after reading"
            );

            // Rounded down to whole pages: the page holding `pos` stays.
            let released = mf.release_pages_below(20 * OS_PAGE_SIZE + 100)?;
            assert_eq!(released, 20 * OS_PAGE_SIZE, "{mode:?}");
            let after = resident_bytes_of(&path);
            assert!(
                after + 20 * OS_PAGE_SIZE as u64 <= before,
                "{mode:?}: {before} -> {after} bytes mapped"
            );
            assert_eq!(mf.release_pages_below(0)?, 0);

            // The bytes are the same through the held slice and a new read, and they reach the
            // file (Mapped mode stored them through the map and never flushed before the release).
            assert_eq!(&held[..], &data[..], "{mode:?}");
            assert_eq!(mf.read_at(0, data.len()), Some(&data[..]), "{mode:?}");
            mf.flush()?;
            drop(held);
            drop(mf);
            let on_disk = std::fs::read(&path).map_err(|e| StoreError::io(&path, e))?;
            assert_eq!(&on_disk[..data.len()], &data[..], "{mode:?}");
        }
        Ok(())
    }

    #[test]
    fn released_written_pages_skip_a_file_nobody_wrote_unless_asked() -> Result<(), StoreError> {
        let dir = tmp();
        let path = dir.path().join(file_name(0));
        let mf = MappedFile::create(&path, 16 * OS_PAGE_SIZE)?;
        let unit = [7u8; 1000];
        for _ in 0..10 {
            mf.append(&unit)?;
        }
        let read = |mf: &MappedFile| mf.read_at(0, mf.wrote_position()).map(<[u8]>::to_vec);
        // Written since the last call (never called): released up to the tail page.
        assert_eq!(mf.release_written_pages(false)?, 2 * OS_PAGE_SIZE);
        assert!(resident_bytes_of(&path) <= OS_PAGE_SIZE as u64);
        // Read again, nothing written: skipped, the pages stay mapped.
        assert!(read(&mf).is_some());
        let mapped = resident_bytes_of(&path);
        assert!(mapped >= 3 * OS_PAGE_SIZE as u64, "{mapped}");
        assert_eq!(mf.release_written_pages(false)?, 0);
        assert_eq!(resident_bytes_of(&path), mapped);
        // Asked for every file: released. (A read fault may also have mapped pages past the
        // wrote position, read ahead into the page cache: those are not the written pages.)
        let two_pages = 2 * OS_PAGE_SIZE as u64;
        assert_eq!(mf.release_written_pages(true)?, 2 * OS_PAGE_SIZE);
        assert!(resident_bytes_of(&path) + two_pages <= mapped);
        // Written again: released without asking.
        assert!(read(&mf).is_some());
        mf.append(&unit)?;
        let mapped = resident_bytes_of(&path);
        assert_eq!(mf.release_written_pages(false)?, 2 * OS_PAGE_SIZE);
        assert!(resident_bytes_of(&path) + two_pages <= mapped);
        Ok(())
    }

    /// Zeros ahead start at the page after the appended position (pending bytes included), never
    /// touch appended bytes, allocate the blocks they cover, and records written over them read
    /// back as written.
    #[test]
    fn zero_ahead_allocates_after_the_appends_and_leaves_them_alone() -> Result<(), StoreError> {
        use std::os::unix::fs::MetadataExt;
        let dir = tmp();
        let path = dir.path().join(file_name(0));
        let size = 64 * OS_PAGE_SIZE;
        let mf = MappedFile::create(&path, size)?.with_append_mode(AppendMode::FileWrite);
        let blocks = || std::fs::metadata(&path).map(|m| m.blocks()).unwrap_or(0);
        assert_eq!(blocks(), 0, "a new segment is sparse");
        mf.append(&[7u8; 100])?;
        mf.append_deferred_with(50, |dst| {
            dst.fill(8);
            Ok(())
        })?;
        let zeroed = mf.zero_ahead(10 * OS_PAGE_SIZE)?;
        assert_eq!(
            zeroed,
            9 * OS_PAGE_SIZE,
            "from the page after the pending bytes"
        );
        assert_eq!(mf.prepared_to(), 10 * OS_PAGE_SIZE);
        assert_eq!(mf.zero_ahead(10 * OS_PAGE_SIZE)?, 0, "already zeroed");
        assert_eq!(mf.zero_ahead(4 * OS_PAGE_SIZE)?, 0, "behind the zeros");
        assert!(mf.commit()?);
        assert_eq!(mf.read_at(0, 100), Some(&[7u8; 100][..]));
        assert_eq!(mf.read_at(100, 50), Some(&[8u8; 50][..]));
        mf.append(&[9u8; OS_PAGE_SIZE])?;
        assert_eq!(
            mf.zero_ahead(usize::MAX)?,
            size - 10 * OS_PAGE_SIZE,
            "clamped to the file"
        );
        mf.flush()?;
        // Written zeros are allocated blocks (a hole would not be): 512-byte units.
        assert!(blocks() * 512 >= size as u64, "{} blocks", blocks());
        drop(mf);
        let raw = std::fs::read(&path).map_err(|e| StoreError::io(&path, e))?;
        assert!(raw[..100].iter().all(|b| *b == 7));
        assert!(raw[100..150].iter().all(|b| *b == 8));
        assert!(raw[150..150 + OS_PAGE_SIZE].iter().all(|b| *b == 9));
        assert!(raw[150 + OS_PAGE_SIZE..].iter().all(|b| *b == 0));
        Ok(())
    }

    /// Allocation ahead starts at the page after the appended position (pending bytes
    /// included), allocates blocks without changing the file's size or bytes, goes no further
    /// than asked or than the file, and records appended over it read back as written.
    #[test]
    fn allocate_ahead_reserves_blocks_after_the_appends_and_writes_nothing()
    -> Result<(), StoreError> {
        use std::os::unix::fs::MetadataExt;
        let dir = tmp();
        let path = dir.path().join(file_name(0));
        let size = 4 * ALLOCATE_AHEAD_CHUNK;
        let mf = MappedFile::create(&path, size)?.with_append_mode(AppendMode::FileWrite);
        let blocks = || std::fs::metadata(&path).map(|m| m.blocks()).unwrap_or(0);
        mf.append(&[7u8; 100])?;
        mf.append_deferred_with(50, |dst| {
            dst.fill(8);
            Ok(())
        })?;
        let before = blocks();
        let Some(allocated) = mf.allocate_ahead(OS_PAGE_SIZE + ALLOCATE_AHEAD_CHUNK + 3)? else {
            // A filesystem without fallocate: nothing was prepared.
            assert_eq!(mf.prepared_to(), 0);
            return Ok(());
        };
        assert_eq!(
            allocated,
            ALLOCATE_AHEAD_CHUNK + 3,
            "from the page after the pending bytes, in two calls"
        );
        assert_eq!(mf.prepared_to(), OS_PAGE_SIZE + ALLOCATE_AHEAD_CHUNK + 3);
        assert!(
            (blocks() - before) * 512 >= ALLOCATE_AHEAD_CHUNK as u64,
            "{before} -> {} blocks",
            blocks()
        );
        assert_eq!(
            mf.allocate_ahead(2 * OS_PAGE_SIZE)?,
            Some(0),
            "behind what is prepared"
        );
        assert!(mf.commit()?);
        mf.append(&[9u8; OS_PAGE_SIZE])?;
        assert_eq!(
            mf.allocate_ahead(usize::MAX)?,
            Some(size - (OS_PAGE_SIZE + ALLOCATE_AHEAD_CHUNK + 3)),
            "clamped to the file"
        );
        mf.flush()?;
        drop(mf);
        let raw = std::fs::read(&path).map_err(|e| StoreError::io(&path, e))?;
        assert_eq!(raw.len(), size, "the size is the segment's");
        assert!(raw[..100].iter().all(|b| *b == 7));
        assert!(raw[100..150].iter().all(|b| *b == 8));
        assert!(raw[150..150 + OS_PAGE_SIZE].iter().all(|b| *b == 9));
        assert!(
            raw[150 + OS_PAGE_SIZE..].iter().all(|b| *b == 0),
            "allocated blocks read as zeros"
        );
        Ok(())
    }
}
