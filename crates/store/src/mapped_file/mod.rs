//! One memory-mapped store file: a CommitLog segment, a ConsumeQueue file or an IndexFile.
//!
//! RocketMQ writes every store file through a shared memory map: appends are plain memory copies
//! into the page cache, reads hand out slices of the same pages, and durability is an explicit
//! `msync` (the "flush"). We do the same with [`memmap2::MmapRaw`] behind an `Arc`, so a read can
//! return a zero-copy [`Bytes`](bytes::Bytes) that keeps the mapping alive even after the file was
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
//!
//! Layout: this module holds the mapping itself (creating and opening a file, its positions);
//! `io.rs` the appends, commits, reads and truncation; `flush.rs` the msync, the release of
//! mapped and cached pages, and the preparation of blocks ahead of the appends.

mod flush;
mod io;

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use memmap2::{MmapOptions, MmapRaw};
use parking_lot::Mutex;

use crate::error::StoreError;

pub(crate) use flush::release_mapped_pages;

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
    store_timestamp_ms: AtomicI64,
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
            store_timestamp_ms: AtomicI64::new(0),
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
    /// pending. It may not go below the flushed position: cutting durable bytes is
    /// [`MappedFile::truncate_to`]'s job, which moves both.
    pub fn set_wrote_position(&self, pos: usize) {
        let mut pending = self.write_lock.lock();
        pending.clear();
        let pos = pos.min(self.file_size);
        // A flush starts at the flushed position: with the wrote position below it, bytes
        // appended into the gap would never be flushed.
        let flushed = self.flushed_position();
        assert!(
            pos >= flushed,
            "{}: wrote position {pos} would fall below the flushed position {flushed}",
            self.path.display()
        );
        self.wrote_position.store(pos, Ordering::Release);
        self.appended_position.store(pos, Ordering::Release);
    }

    /// Bytes known to be durable.
    pub fn flushed_position(&self) -> usize {
        self.flushed_position.load(Ordering::Acquire)
    }

    /// Sets the flushed position (recovery). Clamped to the file size; never past the wrote
    /// position.
    pub fn set_flushed_position(&self, pos: usize) {
        let _f = self.flush_lock.lock();
        let pos = pos.min(self.file_size);
        // Claiming bytes durable that are not even written would let the next flush skip them.
        let wrote = self.wrote_position();
        assert!(
            pos <= wrote,
            "{}: flushed position {pos} would pass the wrote position {wrote}",
            self.path.display()
        );
        self.flushed_position.store(pos, Ordering::Release);
    }

    /// Store timestamp of the last CommitLog record written into this file (0 if unknown).
    pub fn store_timestamp(&self) -> i64 {
        self.store_timestamp_ms.load(Ordering::Acquire)
    }

    pub fn set_store_timestamp(&self, ts: i64) {
        self.store_timestamp_ms.store(ts, Ordering::Release);
    }

    /// Free bytes after the appended position.
    pub fn free_space(&self) -> usize {
        self.file_size.saturating_sub(self.appended_position())
    }

    pub fn is_full(&self) -> bool {
        self.appended_position() >= self.file_size
    }

    /// Deletes the file from disk; outstanding [`Bytes`](bytes::Bytes) slices stay readable.
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
    let droppable = !crate::os::is_on_tmpfs(&file)
        .unwrap_or_else(|e| panic!("fstatfs {}: {e}", path.display()));
    // SAFETY: a read-only shared mapping of a file nobody truncates during the test.
    let map = unsafe { MmapOptions::new().map(&file) }
        .unwrap_or_else(|e| panic!("map {}: {e}", path.display()));
    let pages = crate::os::resident_pages(&map)
        .unwrap_or_else(|e| panic!("mincore {}: {e}", path.display()));
    let cached = pages.iter().filter(|cached| **cached).count() as u64;
    (cached * OS_PAGE_SIZE as u64, droppable)
}

/// What the tests of the mapped file's modules share.
#[cfg(test)]
pub(crate) mod test_support {
    use super::AppendMode;

    pub(crate) fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
    }

    /// Every way a file takes appends: each test runs in both.
    pub(crate) const MODES: [AppendMode; 2] = [AppendMode::Mapped, AppendMode::FileWrite];
}

#[cfg(test)]
mod tests {
    use super::test_support::{MODES, tmp};
    use super::*;

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

    /// The flushed position stays between 0 and the wrote position through appends, flushes,
    /// recovery's position resets and truncation.
    #[test]
    fn flushed_position_never_passes_the_wrote_position() -> Result<(), StoreError> {
        for mode in MODES {
            let dir = tmp();
            let path = dir.path().join(file_name(0));
            let mf = MappedFile::create(&path, 4 * OS_PAGE_SIZE)?.with_append_mode(mode);
            let within = |mf: &MappedFile| mf.flushed_position() <= mf.wrote_position();
            mf.append(&[1u8; 100])?;
            assert!(within(&mf), "{mode:?}");
            assert_eq!(mf.flush()?, 100);
            mf.append(&[2u8; 50])?;
            assert!(within(&mf), "{mode:?}");
            mf.set_wrote_position(120);
            mf.set_flushed_position(110);
            assert!(within(&mf), "{mode:?}");
            mf.truncate_to(30)?;
            assert_eq!((mf.flushed_position(), mf.wrote_position()), (30, 30));
        }
        Ok(())
    }

    /// Recovery's position reset may not cut below what is flushed (that is `truncate_to`).
    #[test]
    #[should_panic(expected = "wrote position 50 would fall below the flushed position 100")]
    fn a_wrote_position_below_the_flushed_one_is_caught() {
        let dir = tmp();
        let path = dir.path().join(file_name(0));
        let mf = MappedFile::create(&path, OS_PAGE_SIZE).unwrap_or_else(|e| panic!("create: {e}"));
        let _ = mf.append(&[1u8; 100]);
        let _ = mf.flush();
        mf.set_wrote_position(50);
    }

    /// Nothing may be declared durable beyond what is written.
    #[test]
    #[should_panic(expected = "flushed position 20 would pass the wrote position 10")]
    fn a_flushed_position_past_the_wrote_one_is_caught() {
        let dir = tmp();
        let path = dir.path().join(file_name(0));
        let mf = MappedFile::create(&path, OS_PAGE_SIZE).unwrap_or_else(|e| panic!("create: {e}"));
        let _ = mf.append(&[1u8; 10]);
        mf.set_flushed_position(20);
    }
}
