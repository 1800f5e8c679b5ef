//! One memory-mapped store file: a CommitLog segment, a ConsumeQueue file or an IndexFile.
//!
//! RocketMQ writes every store file through a shared memory map: appends are plain memory
//! copies into the page cache, reads hand out slices of the same pages, and durability is an
//! explicit `msync` (the "flush"). We do the same with [`memmap2::MmapRaw`] behind an `Arc`, so a
//! read can return a zero-copy [`Bytes`] that keeps the mapping alive even after the file was
//! deleted by retention (the kernel keeps an unlinked, still-mapped file around).
//!
//! Concurrency contract:
//! - `[0, wrote_position)` is published data: it is never written again except by
//!   [`MappedFile::truncate_to`], which only recovery and dirty-tail truncation call.
//! - `[wrote_position, file_size)` belongs to the single appender; appends are serialised by an
//!   internal mutex, and the new `wrote_position` is published with `Release` ordering after the
//!   bytes are in place, so a reader that loads it with `Acquire` sees complete records.
//! - Flushes are serialised by a second mutex and never move `flushed_position` backwards.
//!
//! CommitLog segments take their appends with `pwrite` instead of stores into the map
//! ([`AppendMode::FileWrite`]): the bytes land in the same page cache pages the map shows, but the
//! map's pages are never made writable. Each msync otherwise write-protects the pages it cleans
//! (with a TLB shootdown on every CPU), and the next append into a cleaned page takes a
//! write-protect fault and block reservation again: under SYNC_FLUSH, one msync per group commit,
//! that cycle cost more than the appends themselves. ConsumeQueue files (20-byte units, one fault
//! per 204 of them) keep storing into the map.
//!
//! In that mode an append may also be *deferred* ([`MappedFile::append_deferred_with`]): the
//! record is encoded into the file's pending buffer and gets its position at once, but it is
//! written (one `pwrite` for everything pending) and published only by the next
//! [`MappedFile::commit`]. The broker defers the appends of the sends it answers and commits
//! before it writes their responses, so the messages of one read from a connection cost one
//! `pwrite`, not one each (a 1 KiB `pwrite` costs this kernel about 1.6 µs, a 12 KiB one 0.6 µs
//! per KiB). Positions therefore come in two: the *appended* position (where the next append
//! goes; the appender's view) and the *wrote* position (committed, readable; everyone else's).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use bytes::Bytes;
use memmap2::{MmapOptions, MmapRaw, UncheckedAdvice};
use parking_lot::Mutex;

use crate::error::StoreError;

/// Page size used for "least pages" flush decisions (RocketMQ `OS_PAGE_SIZE`).
pub const OS_PAGE_SIZE: usize = 4096;
/// Number of decimal digits in a store file name (`UtilAll.offset2FileName`).
pub const FILE_NAME_DIGITS: usize = 20;
/// Most zeros [`MappedFile::zero_ahead`] writes under the write lock at once (appends wait
/// that long at most: about 20 µs here).
pub const ZERO_AHEAD_CHUNK: usize = 128 * 1024;
static ZEROS: [u8; ZERO_AHEAD_CHUNK] = [0; ZERO_AHEAD_CHUNK];
/// Most bytes [`MappedFile::allocate_ahead`] allocates with one `fallocate` (the filesystem
/// holds the file's block-map lock for the call; an append that outran the allocations would
/// wait behind it).
pub const ALLOCATE_AHEAD_CHUNK: usize = 1024 * 1024;

/// Chunk size used when zeroing a truncated tail without hole punching.
const ZERO_SCAN_CHUNK: usize = 64 * 1024;

/// Pending-buffer capacity a file keeps after a commit in [`AppendMode::FileWrite`]; a larger
/// commit (a big batch) gets its buffer freed afterwards.
const APPEND_SCRATCH_KEEP: usize = 256 * 1024;

/// Most bytes deferred appends may leave pending: an append that would go past it commits what
/// is pending first, so the buffer stays bounded even if nobody commits.
pub const MAX_PENDING_APPEND_BYTES: usize = 1024 * 1024;

/// When an append's bytes count in the appended position (see [`MappedFile::append_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Publish {
    /// At once: a deferred append (its bytes are pending until a commit).
    Now,
    /// Once the caller's commit wrote them (FileWrite mode; Mapped writes in place at once).
    AfterWrite,
}

/// How appends reach the file (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AppendMode {
    /// Stores into the shared map.
    #[default]
    Mapped,
    /// Encode into a reused buffer, then `pwrite` it at the wrote position.
    FileWrite,
}

/// The 20-digit zero-padded decimal name of a file starting at `offset`.
pub fn file_name(offset: i64) -> String {
    format!("{offset:020}")
}

/// Parses a store file name back into its start offset; `None` for anything that is not exactly
/// 20 decimal digits (temporary files, `.bak`, editor leftovers).
pub fn parse_file_name(path: &Path) -> Option<i64> {
    let name = path.file_name()?.to_str()?;
    if name.len() != FILE_NAME_DIGITS || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

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

/// Starts writing `[start, start + len)` back without waiting (`sync_file_range(WRITE)`).
#[cfg(target_os = "linux")]
fn start_writeback(file: &File, start: usize, len: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(start), Ok(len)) = (libc::off64_t::try_from(start), libc::off64_t::try_from(len))
    else {
        return Ok(());
    };
    // SAFETY: a plain syscall on an open descriptor; no memory is passed.
    let rc =
        unsafe { libc::sync_file_range(file.as_raw_fd(), start, len, libc::SYNC_FILE_RANGE_WRITE) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &File, _start: usize, _len: usize) -> std::io::Result<()> {
    Ok(())
}

/// Allocates the blocks of `[start, start + len)` without writing them (`fallocate`, mode 0:
/// the file's size and contents stay as they are; unwritten blocks read as zeros).
#[cfg(target_os = "linux")]
fn allocate_blocks(file: &File, start: usize, len: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(start), Ok(len)) = (libc::off64_t::try_from(start), libc::off64_t::try_from(len))
    else {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    };
    // SAFETY: a plain syscall on an open descriptor; no memory is passed.
    let rc = unsafe { libc::fallocate64(file.as_raw_fd(), 0, start, len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn allocate_blocks(_file: &File, _start: usize, _len: usize) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

/// Whether `e` says the filesystem cannot allocate blocks ahead (no `fallocate`).
fn allocation_unsupported(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::Unsupported
        || e.raw_os_error() == Some(libc::EOPNOTSUPP)
        || e.raw_os_error() == Some(libc::ENOSYS)
}

/// `posix_fadvise(POSIX_FADV_DONTNEED)` on `[start, start + len)` of `file`.
#[cfg(target_os = "linux")]
fn advise_dont_need(file: &File, start: usize, len: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(off), Ok(len)) = (libc::off_t::try_from(start), libc::off_t::try_from(len)) else {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    };
    // SAFETY: plain syscall on a descriptor we own; no memory is passed.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), off, len, libc::POSIX_FADV_DONTNEED) };
    // posix_fadvise returns the error number instead of setting errno.
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(rc))
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_dont_need(_file: &File, _start: usize, _len: usize) -> std::io::Result<()> {
    Ok(())
}

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

/// A memory-mapped store file of fixed size.
pub struct MappedFile {
    path: PathBuf,
    file: File,
    file_from_offset: i64,
    file_size: usize,
    map: Arc<MmapRaw>,
    /// End of the committed, readable bytes.
    wrote_position: AtomicUsize,
    /// End of the appended bytes: `wrote_position` plus what is pending (FileWrite only).
    appended_position: AtomicUsize,
    flushed_position: AtomicUsize,
    /// The wrote position at the last [`MappedFile::release_written_pages`] (`usize::MAX`: none).
    released_at: AtomicUsize,
    /// Store timestamp of the last record appended (CommitLog only; 0 otherwise).
    store_timestamp: AtomicI64,
    /// End of the range prepared ahead of the appends: zeroed ([`MappedFile::zero_ahead`]) or
    /// allocated ([`MappedFile::allocate_ahead`]); 0: none.
    prepared_to: AtomicUsize,
    append_mode: AppendMode,
    /// Serialises appends and commits; holds the pending bytes of [`AppendMode::FileWrite`]:
    /// `[wrote_position, appended_position)`, not yet in the file.
    write_lock: Mutex<Vec<u8>>,
    flush_lock: Mutex<()>,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile")
            .field("path", &self.path)
            .field("file_from_offset", &self.file_from_offset)
            .field("file_size", &self.file_size)
            .field("wrote_position", &self.wrote_position())
            .field("flushed_position", &self.flushed_position())
            .finish()
    }
}

impl MappedFile {
    /// Creates a new sparse file of `file_size` bytes at `path` (whose name must be the 20-digit
    /// start offset) and maps it. Fails if the file already exists.
    pub fn create(path: &Path, file_size: usize) -> Result<Self, StoreError> {
        let from = Self::offset_from_path(path)?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| StoreError::io(parent, e))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| StoreError::io(path, e))?;
        // set_len makes a sparse file: no zeros are written, blocks are allocated on first touch.
        file.set_len(file_size as u64)
            .map_err(|e| StoreError::io(path, e))?;
        let mf = Self::map(path, file, from, file_size)?;
        mf.wrote_position.store(0, Ordering::Release);
        mf.appended_position.store(0, Ordering::Release);
        mf.flushed_position.store(0, Ordering::Release);
        Ok(mf)
    }

    /// Maps an existing file. Its length must equal `file_size`.
    ///
    /// Like RocketMQ's load, `wrote_position` and `flushed_position` start at `file_size` (the
    /// whole file is readable) until recovery sets the real end with
    /// [`MappedFile::set_wrote_position`] / [`MappedFile::truncate_to`].
    pub fn open(path: &Path, file_size: usize) -> Result<Self, StoreError> {
        let from = Self::offset_from_path(path)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| StoreError::io(path, e))?;
        let len = file.metadata().map_err(|e| StoreError::io(path, e))?.len();
        if len != file_size as u64 {
            return Err(StoreError::corrupt(
                path,
                0,
                format!("file length {len} differs from the configured size {file_size}"),
            ));
        }
        let mf = Self::map(path, file, from, file_size)?;
        mf.wrote_position.store(file_size, Ordering::Release);
        mf.appended_position.store(file_size, Ordering::Release);
        mf.flushed_position.store(file_size, Ordering::Release);
        Ok(mf)
    }

    fn offset_from_path(path: &Path) -> Result<i64, StoreError> {
        parse_file_name(path).ok_or_else(|| {
            StoreError::Config(format!(
                "store file name {} is not a {FILE_NAME_DIGITS}-digit offset",
                path.display()
            ))
        })
    }

    fn map(path: &Path, file: File, from: i64, file_size: usize) -> Result<Self, StoreError> {
        if file_size == 0 {
            return Err(StoreError::Config(format!(
                "mapped file {} has size 0",
                path.display()
            )));
        }
        // MmapRaw hands out raw pointers only; every dereference below is bounds-checked against
        // `file_size` and follows the publication protocol described in the module docs. As with
        // any shared file mapping, another process truncating the file would fault us: the store
        // directory is protected by the `lock` file for that reason.
        let map = MmapOptions::new()
            .len(file_size)
            .map_raw(&file)
            .map_err(|e| StoreError::io(path, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            file_from_offset: from,
            file_size,
            map: Arc::new(map),
            wrote_position: AtomicUsize::new(0),
            appended_position: AtomicUsize::new(0),
            flushed_position: AtomicUsize::new(0),
            released_at: AtomicUsize::new(usize::MAX),
            prepared_to: AtomicUsize::new(0),
            store_timestamp: AtomicI64::new(0),
            append_mode: AppendMode::Mapped,
            write_lock: Mutex::new(Vec::new()),
            flush_lock: Mutex::new(()),
        })
    }

    /// Sets how appends reach the file (before the file is shared).
    #[must_use]
    pub fn with_append_mode(mut self, mode: AppendMode) -> Self {
        self.append_mode = mode;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Global offset of this file's first byte (its name).
    pub fn file_from_offset(&self) -> i64 {
        self.file_from_offset
    }

    pub fn file_size(&self) -> usize {
        self.file_size
    }

    /// Bytes written (and readable) so far.
    pub fn wrote_position(&self) -> usize {
        self.wrote_position.load(Ordering::Acquire)
    }

    /// Where the next append goes: the wrote position plus the bytes of deferred appends not yet
    /// committed.
    pub fn appended_position(&self) -> usize {
        self.appended_position.load(Ordering::Acquire)
    }

    /// Sets the end of the valid data (recovery). Clamped to the file size; drops anything
    /// pending.
    pub fn set_wrote_position(&self, pos: usize) {
        let mut pending = self.write_lock.lock();
        pending.clear();
        let pos = pos.min(self.file_size);
        self.wrote_position.store(pos, Ordering::Release);
        self.appended_position.store(pos, Ordering::Release);
    }

    /// Bytes known to be durable.
    pub fn flushed_position(&self) -> usize {
        self.flushed_position.load(Ordering::Acquire)
    }

    /// Sets the flushed position (recovery). Clamped to the file size.
    pub fn set_flushed_position(&self, pos: usize) {
        let _f = self.flush_lock.lock();
        self.flushed_position
            .store(pos.min(self.file_size), Ordering::Release);
    }

    /// Store timestamp of the last CommitLog record written into this file (0 if unknown).
    pub fn store_timestamp(&self) -> i64 {
        self.store_timestamp.load(Ordering::Acquire)
    }

    pub fn set_store_timestamp(&self, ts: i64) {
        self.store_timestamp.store(ts, Ordering::Release);
    }

    /// Free bytes after the appended position.
    pub fn free_space(&self) -> usize {
        self.file_size.saturating_sub(self.appended_position())
    }

    pub fn is_full(&self) -> bool {
        self.appended_position() >= self.file_size
    }

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
        // for the length of our `pwrite` (W2 profile: about one lock wait per group commit).
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
        advise_dont_need(&self.file, start, end - start)
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
            start_writeback(&self.file, start, zeroed)
                .map_err(|e| StoreError::io(&self.path, e))?;
        }
        Ok(zeroed)
    }

    /// Allocates the file's blocks from the first page boundary at or after the appended
    /// position (or the end of what was prepared before, if further) up to `to`, writing
    /// nothing; returns how many bytes it allocated, or `None` when the filesystem cannot
    /// (`fallocate` unsupported: nothing was changed).
    ///
    /// Why: in a sparse file the block of a page is allocated when the page is first written
    /// back, and on ext4 that writeback holds the file's block-map lock (`i_data_sem`) while it
    /// allocates; a `pwrite` into a page the file never had takes the same lock for its delayed
    /// allocation, so under ASYNC_FLUSH an append waited for the timed flush's allocation: 9
    /// stalls of 1–22 ms (76–127 ms in all) per 6 s of W1 on this box, with the appending
    /// thread off CPU in `ext4_da_get_block_prep → down_write`. Into allocated (unwritten)
    /// blocks the append finds its mapping without that lock. Unlike [`MappedFile::zero_ahead`]
    /// nothing is written twice, which is why ASYNC_FLUSH uses this; SYNC_FLUSH uses zeros
    /// because its msync into unwritten blocks also converts them (measured slower).
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
            match allocate_blocks(&self.file, start, end - start) {
                Ok(()) => {}
                Err(e) if allocated == 0 && allocation_unsupported(&e) => return Ok(None),
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
    #[cfg(target_os = "linux")]
    fn punch_hole(&self, start: usize, len: usize) -> bool {
        use std::os::fd::AsRawFd;
        let (Ok(off), Ok(l)) = (libc::off_t::try_from(start), libc::off_t::try_from(len)) else {
            return false;
        };
        // SAFETY: plain syscall on a descriptor we own; no memory is passed.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                off,
                l,
            )
        };
        rc == 0
    }

    #[cfg(not(target_os = "linux"))]
    fn punch_hole(&self, _start: usize, _len: usize) -> bool {
        false
    }

    /// Deletes the file from disk; outstanding [`Bytes`] slices stay readable.
    pub fn unlink(&self) -> Result<(), StoreError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io(&self.path, e)),
        }
    }

    /// Unmaps and deletes the file.
    pub fn destroy(self) -> Result<(), StoreError> {
        self.unlink()
    }
}

/// Bytes of the file at `path` mapped into this process now (the `Rss:` of its mappings in
/// `/proc/self/smaps`); tests use it to see what releasing pages did.
#[cfg(test)]
pub(crate) fn resident_bytes_of(path: &Path) -> u64 {
    let want = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut inside = false;
    let mut total = 0;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or("");
        if first.contains('-') && first.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
            // "start-end perms offset dev inode path": the path is the sixth field onwards.
            let name: Vec<&str> = fields.skip(4).collect();
            inside = Path::new(&name.join(" ")) == want;
        } else if inside && first == "Rss:" {
            total += fields
                .next()
                .and_then(|kib| kib.parse::<u64>().ok())
                .unwrap_or(0)
                * 1024;
        }
    }
    total
}

/// Bytes of the file at `path` in the page cache now (`mincore` over a fresh read-only
/// mapping, which faults nothing in), and whether the filesystem can drop them at all (tmpfs
/// pages are the file itself and ignore `POSIX_FADV_DONTNEED`).
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn cached_bytes_of(path: &Path) -> (u64, bool) {
    let file = File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut fs = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: fstatfs fills the struct it is given; the descriptor is open.
    let rc = unsafe { libc::fstatfs(std::os::fd::AsRawFd::as_raw_fd(&file), fs.as_mut_ptr()) };
    assert_eq!(rc, 0, "fstatfs {}", path.display());
    // SAFETY: initialised by the successful call above.
    let droppable = unsafe { fs.assume_init() }.f_type != libc::TMPFS_MAGIC;
    // SAFETY: a read-only shared mapping of a file nobody truncates during the test.
    let map = unsafe { MmapOptions::new().map(&file) }
        .unwrap_or_else(|e| panic!("map {}: {e}", path.display()));
    let mut pages = vec![0u8; map.len().div_ceil(OS_PAGE_SIZE)];
    // SAFETY: the address is the page-aligned start of a live mapping of `map.len()` bytes and
    // the vector holds one byte per page of it.
    let rc = unsafe {
        libc::mincore(
            map.as_ptr() as *mut libc::c_void,
            map.len(),
            pages.as_mut_ptr(),
        )
    };
    assert_eq!(rc, 0, "mincore {}", path.display());
    let cached = pages.iter().filter(|p| *p & 1 == 1).count() as u64;
    (cached * OS_PAGE_SIZE as u64, droppable)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
    }

    #[test]
    fn names_round_trip() {
        assert_eq!(file_name(1_073_741_824), "00000000001073741824");
        assert_eq!(
            parse_file_name(Path::new("/x/00000000001073741824")),
            Some(1_073_741_824)
        );
        assert_eq!(parse_file_name(Path::new("/x/0000000000107374182")), None);
        assert_eq!(parse_file_name(Path::new("/x/0000000000107374182a")), None);
    }

    const MODES: [AppendMode; 2] = [AppendMode::Mapped, AppendMode::FileWrite];

    #[test]
    fn append_read_flush_reopen() -> Result<(), StoreError> {
        for mode in MODES {
            append_read_flush_reopen_in(mode)?;
        }
        Ok(())
    }

    fn append_read_flush_reopen_in(mode: AppendMode) -> Result<(), StoreError> {
        let dir = tmp();
        let path = dir.path().join(file_name(8192));
        let mf = MappedFile::create(&path, 8192)?.with_append_mode(mode);
        assert_eq!(mf.file_from_offset(), 8192);
        assert_eq!(mf.append(b"hello")?, 0);
        assert_eq!(mf.append(b"world")?, 5);
        assert_eq!(mf.read_at(0, 10), Some(&b"helloworld"[..]));
        assert_eq!(mf.read_at(5, 6), None);
        let s = mf
            .slice(5, 5)
            .ok_or_else(|| StoreError::Config("slice".into()))?;
        assert!(mf.is_able_to_flush(0));
        assert!(!mf.is_able_to_flush(1));
        assert_eq!(mf.flush()?, 10);
        mf.destroy()?;
        assert_eq!(&s[..], b"world", "a slice outlives the deleted file");
        assert!(!path.exists());

        let mf = MappedFile::create(&path, 8192)?.with_append_mode(mode);
        let big = vec![7u8; 8192];
        assert!(mf.append(&big[..8193.min(big.len())]).is_ok());
        assert!(mf.is_full());
        assert!(matches!(mf.append(b"x"), Err(StoreError::FileFull { .. })));
        drop(mf);
        let mf = MappedFile::open(&path, 8192)?.with_append_mode(mode);
        assert_eq!(mf.wrote_position(), 8192);
        assert_eq!(mf.read_at(8191, 1), Some(&[7u8][..]));
        assert!(MappedFile::open(&path, 4096).is_err());
        Ok(())
    }

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
}
