//! IndexFile: an on-disk hash index from message key to CommitLog offset.
//!
//! `QUERY_MESSAGE` (the admin "query by key") and lookups by client message id (`UNIQ_KEY`) need to
//! find messages without scanning the CommitLog. RocketMQ keeps a chained hash table in a fixed
//! size file; we reproduce its byte layout exactly so existing tooling can read our store:
//!
//! ```text
//! header   40 bytes  beginTimestamp i64 | endTimestamp i64 | beginPhyOffset i64 |
//!                    endPhyOffset i64 | hashSlotCount i32 | indexCount i32
//! slots    hashSlotNum × 4 bytes: number of the newest entry with that slot, 0 = empty
//! entries  indexNum × 20 bytes: keyHash i32 | phyOffset i64 | timeDiff i32 | prevIndex i32
//! ```
//!
//! All integers are big-endian. Entry 0 is never used (`indexCount` starts at 1), so 0 can mean
//! "no entry" in slots and in `prevIndex`. The key is `topic#key`, hashed with Java's
//! `String.hashCode` (over UTF-16 code units), made non-negative. Only the hash is stored, not the
//! key, so a lookup can return offsets of other keys that collide: the caller must check the key
//! of each message it loads (RocketMQ's query path does the same).
//!
//! `timeDiff` is whole seconds since `beginTimestamp`. Unlike RocketMQ (which computes the first
//! entry's `timeDiff` against the previous file's end before overwriting `beginTimestamp`), we set
//! `beginTimestamp` first, so every entry's time is `beginTimestamp + timeDiff * 1000` exactly
//! (to the second).
//!
//! The file is created sparse (`set_len`): the default 420 MB file costs disk blocks only for the
//! pages actually touched. The header is updated in the mapping on every put, so after a process
//! crash the page cache still holds a consistent header.

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use memmap2::{MmapOptions, MmapRaw};

use crate::error::StoreError;

/// Size of the file header in bytes.
pub const INDEX_HEADER_SIZE: usize = 40;
/// Size of one hash slot in bytes.
pub const HASH_SLOT_SIZE: usize = 4;
/// Size of one index entry in bytes.
pub const INDEX_ENTRY_SIZE: usize = 20;
/// Slot / `prevIndex` value meaning "no entry".
pub const INVALID_INDEX: i32 = 0;
/// RocketMQ's default `maxHashSlotNum`.
pub const DEFAULT_MAX_HASH_SLOT_NUM: usize = 5_000_000;
/// RocketMQ's default `maxIndexNum`.
pub const DEFAULT_MAX_INDEX_NUM: usize = 20_000_000;
/// Separator between topic and key in an indexed key.
pub const INDEX_KEY_SEPARATOR: char = '#';
/// Milliseconds per second (`timeDiff` is in seconds).
const MILLIS_PER_SECOND: i64 = 1000;

// Header field offsets.
const BEGIN_TIMESTAMP_POS: usize = 0;
const END_TIMESTAMP_POS: usize = 8;
const BEGIN_PHY_OFFSET_POS: usize = 16;
const END_PHY_OFFSET_POS: usize = 24;
const HASH_SLOT_COUNT_POS: usize = 32;
const INDEX_COUNT_POS: usize = 36;
// Entry field offsets.
const ENTRY_PHY_OFFSET_POS: usize = 4;
const ENTRY_TIME_DIFF_POS: usize = 12;
const ENTRY_PREV_INDEX_POS: usize = 16;

/// Java's `String.hashCode`: `h = 31 * h + c` over UTF-16 code units, in wrapping i32 arithmetic.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// RocketMQ's `indexKeyHashMethod`: `abs(hashCode)`, with `Integer.MIN_VALUE` mapped to 0.
pub fn index_key_hash(key: &str) -> i32 {
    java_string_hash(key).checked_abs().unwrap_or(0)
}

/// The indexed form of a key: `topic#key`.
pub fn build_key(topic: &str, key: &str) -> String {
    let mut out = String::with_capacity(topic.len() + 1 + key.len());
    out.push_str(topic);
    out.push(INDEX_KEY_SEPARATOR);
    out.push_str(key);
    out
}

/// The header of an IndexFile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexHeader {
    /// Store timestamp of the first entry (ms).
    pub begin_timestamp: i64,
    /// Store timestamp of the last entry (ms).
    pub end_timestamp: i64,
    /// CommitLog offset of the first entry.
    pub begin_phy_offset: i64,
    /// CommitLog offset of the last entry.
    pub end_phy_offset: i64,
    /// Number of slots in use.
    pub hash_slot_count: i32,
    /// Next entry number; starts at 1 (entry 0 is unused).
    pub index_count: i32,
}

/// One decoded index entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    pub key_hash: i32,
    pub phy_offset: i64,
    pub time_diff_secs: i32,
    pub prev_index: i32,
}

/// Size in bytes of an IndexFile with the given geometry, `None` on overflow.
pub fn index_file_size(hash_slot_num: usize, index_num: usize) -> Option<usize> {
    hash_slot_num
        .checked_mul(HASH_SLOT_SIZE)?
        .checked_add(index_num.checked_mul(INDEX_ENTRY_SIZE)?)?
        .checked_add(INDEX_HEADER_SIZE)
}

/// Checks the geometry fits RocketMQ's i32 fields.
fn check_geometry(hash_slot_num: usize, index_num: usize) -> Result<usize, StoreError> {
    let max = i32::MAX as usize;
    if hash_slot_num == 0 || hash_slot_num > max || index_num < 2 || index_num > max {
        return Err(StoreError::Config(format!(
            "index geometry out of range: {hash_slot_num} slots, {index_num} entries"
        )));
    }
    index_file_size(hash_slot_num, index_num)
        .ok_or_else(|| StoreError::Config("index file size overflows".into()))
}

/// One IndexFile, mapped read-write.
///
/// The map is a raw mapping behind an `Arc` so that an msync can run without the index's lock
/// ([`IndexFile::flush_handle`]): dispatch needs that lock for writing to add the next key, and
/// an msync of scattered hash-slot pages waits for the disk for milliseconds. All reads and
/// writes go through the bounds-checked helpers below, under the owner's lock.
pub struct IndexFile {
    path: PathBuf,
    map: Arc<MmapRaw>,
    hash_slot_num: usize,
    index_num: usize,
    header: IndexHeader,
    dirty: Arc<AtomicBool>,
}

/// An msync of one IndexFile taken out of the index's lock; keeps the mapping alive (also when
/// the file is deleted meanwhile).
pub struct IndexFlush {
    path: PathBuf,
    map: Arc<MmapRaw>,
    dirty: Arc<AtomicBool>,
}

/// The entries an IndexFile holds so far, as a range of its mapping whose pages can be released
/// without the index's lock (see `page_release.rs`); keeps the mapping alive.
pub struct IndexPages {
    path: PathBuf,
    map: Arc<MmapRaw>,
    start: usize,
    end: usize,
}

impl IndexPages {
    /// Unmaps the whole pages of the entries from the process; returns the bytes that covered.
    /// The hash slots stay mapped: every new key reads and writes a random one of them.
    pub fn release(&self) -> Result<usize, StoreError> {
        crate::mapped_file::release_mapped_pages(&self.map, self.start, self.end)
            .map_err(|e| StoreError::io(&self.path, e))
    }
}

impl IndexFlush {
    /// msyncs the mapping if anything changed since the last flush.
    pub fn flush(&self) -> Result<(), StoreError> {
        msync_if_dirty(&self.map, &self.dirty, &self.path)
    }
}

fn msync_if_dirty(map: &MmapRaw, dirty: &AtomicBool, path: &Path) -> Result<(), StoreError> {
    if dirty.swap(false, Ordering::AcqRel)
        && let Err(e) = map.flush()
    {
        dirty.store(true, Ordering::Release);
        return Err(StoreError::io(path, e));
    }
    Ok(())
}

impl std::fmt::Debug for IndexFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexFile")
            .field("path", &self.path)
            .field("header", &self.header)
            .finish()
    }
}

impl IndexFile {
    /// Creates a new sparse IndexFile. As in RocketMQ, a new file starts with its begin/end
    /// offsets and timestamps set to where the previous file ended.
    pub fn create(
        path: &Path,
        hash_slot_num: usize,
        index_num: usize,
        end_phy_offset: i64,
        end_timestamp: i64,
    ) -> Result<Self, StoreError> {
        let size = check_geometry(hash_slot_num, index_num)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| StoreError::io(path, e))?;
        // Sparse: no zeros are written, blocks are allocated when a page is first touched.
        file.set_len(size as u64)
            .map_err(|e| StoreError::io(path, e))?;
        let map = Self::map(path, &file, size)?;
        let mut index = IndexFile {
            path: path.to_path_buf(),
            map,
            hash_slot_num,
            index_num,
            header: IndexHeader {
                begin_timestamp: end_timestamp,
                end_timestamp,
                begin_phy_offset: end_phy_offset,
                end_phy_offset,
                hash_slot_count: 0,
                index_count: 1,
            },
            dirty: Arc::new(AtomicBool::new(true)),
        };
        index.write_header();
        Ok(index)
    }

    /// Opens an existing IndexFile; its length must match the geometry.
    pub fn open(path: &Path, hash_slot_num: usize, index_num: usize) -> Result<Self, StoreError> {
        let size = check_geometry(hash_slot_num, index_num)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| StoreError::io(path, e))?;
        let len = file.metadata().map_err(|e| StoreError::io(path, e))?.len();
        if len != size as u64 {
            return Err(StoreError::corrupt(
                path,
                0,
                format!(
                    "index file is {len} bytes, expected {size} for {hash_slot_num} slots and \
                     {index_num} entries"
                ),
            ));
        }
        let map = Self::map(path, &file, size)?;
        let mut index = IndexFile {
            path: path.to_path_buf(),
            map,
            hash_slot_num,
            index_num,
            header: IndexHeader::default(),
            dirty: Arc::new(AtomicBool::new(false)),
        };
        let corrupt = |reason: &str| StoreError::corrupt(path, 0, reason.to_owned());
        let header = IndexHeader {
            begin_timestamp: index
                .read_i64(BEGIN_TIMESTAMP_POS)
                .ok_or_else(|| corrupt("header"))?,
            end_timestamp: index
                .read_i64(END_TIMESTAMP_POS)
                .ok_or_else(|| corrupt("header"))?,
            begin_phy_offset: index
                .read_i64(BEGIN_PHY_OFFSET_POS)
                .ok_or_else(|| corrupt("header"))?,
            end_phy_offset: index
                .read_i64(END_PHY_OFFSET_POS)
                .ok_or_else(|| corrupt("header"))?,
            hash_slot_count: index
                .read_i32(HASH_SLOT_COUNT_POS)
                .ok_or_else(|| corrupt("header"))?,
            // RocketMQ treats a non-positive count as a fresh file.
            index_count: index
                .read_i32(INDEX_COUNT_POS)
                .ok_or_else(|| corrupt("header"))?
                .max(1),
        };
        if header.index_count as usize > index_num {
            return Err(corrupt(&format!(
                "indexCount {} exceeds the {index_num} entries of the file",
                header.index_count
            )));
        }
        index.header = header;
        Ok(index)
    }

    fn map(path: &Path, file: &fs::File, size: usize) -> Result<Arc<MmapRaw>, StoreError> {
        // The mapping is shared with the file only; the store directory is protected by its
        // `lock` file, so no other process resizes the file under us.
        MmapOptions::new()
            .len(size)
            .map_raw(file)
            .map(Arc::new)
            .map_err(|e| StoreError::io(path, e))
    }

    /// Sets an empty file's span to start (and end) where the previous file ended, as
    /// [`IndexFile::create`] does; used when a file made ahead becomes the newest.
    pub fn start_at(&mut self, end_phy_offset: i64, end_timestamp: i64) {
        debug_assert_eq!(self.entry_count(), 0, "only an empty file can be restarted");
        if self.entry_count() != 0 {
            return;
        }
        self.header.begin_timestamp = end_timestamp;
        self.header.end_timestamp = end_timestamp;
        self.header.begin_phy_offset = end_phy_offset;
        self.header.end_phy_offset = end_phy_offset;
        self.write_header();
    }

    /// Path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file name (a `yyyyMMddHHmmssSSS` timestamp for files made by the IndexService).
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The header as last written.
    pub fn header(&self) -> &IndexHeader {
        &self.header
    }

    /// Number of entries in the file (`indexCount - 1`).
    pub fn entry_count(&self) -> usize {
        usize::try_from(self.header.index_count.saturating_sub(1)).unwrap_or(0)
    }

    /// True when no further entry fits.
    pub fn is_write_full(&self) -> bool {
        usize::try_from(self.header.index_count).unwrap_or(usize::MAX) >= self.index_num
    }

    /// Copies `N` bytes at `pos` out of the map; `None` past its end.
    fn read_array<const N: usize>(&self, pos: usize) -> Option<[u8; N]> {
        if pos.checked_add(N)? > self.map.len() {
            return None;
        }
        let mut out = [0u8; N];
        // SAFETY: `[pos, pos + N)` lies inside the mapping, which lives as long
        // as `self.map`. Writes only happen through `&mut self` (the owner's write lock), so none
        // runs while `&self` is borrowed; an msync does not write our memory.
        unsafe { std::ptr::copy_nonoverlapping(self.map.as_ptr().add(pos), out.as_mut_ptr(), N) };
        Some(out)
    }

    fn read_i32(&self, pos: usize) -> Option<i32> {
        self.read_array(pos).map(i32::from_be_bytes)
    }

    fn read_i64(&self, pos: usize) -> Option<i64> {
        self.read_array(pos).map(i64::from_be_bytes)
    }

    fn write_bytes(&mut self, pos: usize, bytes: &[u8]) {
        if pos.saturating_add(bytes.len()) > self.map.len() {
            debug_assert!(false, "index write out of bounds at {pos}");
            return;
        }
        // SAFETY: in bounds (checked above); `&mut self` excludes every other reader and writer
        // of this file's memory.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.map.as_mut_ptr().add(pos),
                bytes.len(),
            );
        }
    }

    fn write_header(&mut self) {
        let h = self.header;
        self.write_bytes(BEGIN_TIMESTAMP_POS, &h.begin_timestamp.to_be_bytes());
        self.write_bytes(END_TIMESTAMP_POS, &h.end_timestamp.to_be_bytes());
        self.write_bytes(BEGIN_PHY_OFFSET_POS, &h.begin_phy_offset.to_be_bytes());
        self.write_bytes(END_PHY_OFFSET_POS, &h.end_phy_offset.to_be_bytes());
        self.write_bytes(HASH_SLOT_COUNT_POS, &h.hash_slot_count.to_be_bytes());
        self.write_bytes(INDEX_COUNT_POS, &h.index_count.to_be_bytes());
        self.dirty.store(true, Ordering::Release);
    }

    fn slot_pos(&self, key_hash: i32) -> usize {
        let slot = usize::try_from(key_hash).unwrap_or(0) % self.hash_slot_num;
        INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE
    }

    fn entry_pos(&self, number: usize) -> usize {
        INDEX_HEADER_SIZE + self.hash_slot_num * HASH_SLOT_SIZE + number * INDEX_ENTRY_SIZE
    }

    /// Reads a slot, mapping anything that is not a current entry number to [`INVALID_INDEX`].
    fn read_slot(&self, key_hash: i32) -> i32 {
        match self.read_i32(self.slot_pos(key_hash)) {
            Some(v) if v > INVALID_INDEX && v < self.header.index_count => v,
            _ => INVALID_INDEX,
        }
    }

    /// Decodes entry `number` (no range check against `indexCount`).
    pub fn entry(&self, number: i32) -> Option<IndexEntry> {
        let pos = self.entry_pos(usize::try_from(number).ok()?);
        Some(IndexEntry {
            key_hash: self.read_i32(pos)?,
            phy_offset: self.read_i64(pos + ENTRY_PHY_OFFSET_POS)?,
            time_diff_secs: self.read_i32(pos + ENTRY_TIME_DIFF_POS)?,
            prev_index: self.read_i32(pos + ENTRY_PREV_INDEX_POS)?,
        })
    }

    /// Adds `key` (already in `topic#key` form) → `phy_offset`. Returns `false` when the file is
    /// full (the caller rolls to a new file).
    pub fn put_key(&mut self, key: &str, phy_offset: i64, store_timestamp: i64) -> bool {
        if self.is_write_full() {
            return false;
        }
        let key_hash = index_key_hash(key);
        let slot_pos = self.slot_pos(key_hash);
        let slot_value = self.read_slot(key_hash);
        let number = self.header.index_count;
        if number <= 1 {
            self.header.begin_phy_offset = phy_offset;
            self.header.begin_timestamp = store_timestamp;
        }
        let time_diff = if self.header.begin_timestamp <= 0 {
            0
        } else {
            let secs =
                store_timestamp.saturating_sub(self.header.begin_timestamp) / MILLIS_PER_SECOND;
            i32::try_from(secs.max(0)).unwrap_or(i32::MAX)
        };
        let pos = self.entry_pos(usize::try_from(number).unwrap_or(0));
        let mut entry = [0u8; INDEX_ENTRY_SIZE];
        let (hash, rest) = entry.split_at_mut(4);
        hash.copy_from_slice(&key_hash.to_be_bytes());
        let (offset, rest) = rest.split_at_mut(8);
        offset.copy_from_slice(&phy_offset.to_be_bytes());
        let (diff, prev) = rest.split_at_mut(4);
        diff.copy_from_slice(&time_diff.to_be_bytes());
        prev.copy_from_slice(&slot_value.to_be_bytes());
        self.write_bytes(pos, &entry);
        self.write_bytes(slot_pos, &number.to_be_bytes());
        if slot_value == INVALID_INDEX {
            self.header.hash_slot_count = self.header.hash_slot_count.saturating_add(1);
        }
        self.header.index_count = number + 1;
        self.header.end_phy_offset = phy_offset;
        self.header.end_timestamp = store_timestamp;
        self.write_header();
        true
    }

    /// RocketMQ's `isTimeMatched`: does `[begin, end]` overlap the file's time span?
    pub fn is_time_matched(&self, begin: i64, end: i64) -> bool {
        let (b, e) = (self.header.begin_timestamp, self.header.end_timestamp);
        (begin < b && end > e) || (begin >= b && begin <= e) || (end >= b && end <= e)
    }

    /// Appends to `out` the CommitLog offsets stored for `key` (in `topic#key` form) whose time is
    /// within `[begin, end]`, newest first, until `out` holds `max_num` offsets.
    pub fn select_phy_offsets(
        &self,
        out: &mut Vec<i64>,
        key: &str,
        max_num: usize,
        begin: i64,
        end: i64,
    ) {
        if self.header.index_count <= 1 {
            return;
        }
        let key_hash = index_key_hash(key);
        let mut next = self.read_slot(key_hash);
        // The chain strictly goes back to older entries (prev < current), which bounds the walk
        // even if the file is damaged.
        while next > INVALID_INDEX && out.len() < max_num {
            let Some(entry) = self.entry(next) else {
                break;
            };
            if entry.time_diff_secs < 0 {
                break;
            }
            let time = self
                .header
                .begin_timestamp
                .saturating_add(i64::from(entry.time_diff_secs) * MILLIS_PER_SECOND);
            if entry.key_hash == key_hash && time >= begin && time <= end {
                out.push(entry.phy_offset);
            }
            if entry.prev_index <= INVALID_INDEX || entry.prev_index >= next || time < begin {
                break;
            }
            next = entry.prev_index;
        }
    }

    /// Removes every entry whose CommitLog offset is `>= max_phy_offset` (entries are in
    /// CommitLog order, so they are a suffix), restoring the slots they replaced. Returns how many
    /// entries were removed.
    pub fn truncate_from(&mut self, max_phy_offset: i64) -> usize {
        let mut removed = 0;
        while self.header.index_count > 1 {
            let number = self.header.index_count - 1;
            let Some(entry) = self.entry(number) else {
                break;
            };
            if entry.phy_offset < max_phy_offset {
                break;
            }
            let slot_pos = self.slot_pos(entry.key_hash);
            if self.read_i32(slot_pos) == Some(number) {
                let prev = if entry.prev_index > INVALID_INDEX && entry.prev_index < number {
                    entry.prev_index
                } else {
                    INVALID_INDEX
                };
                self.write_bytes(slot_pos, &prev.to_be_bytes());
                if prev == INVALID_INDEX {
                    self.header.hash_slot_count =
                        self.header.hash_slot_count.saturating_sub(1).max(0);
                }
            }
            let pos = self.entry_pos(usize::try_from(number).unwrap_or(0));
            self.write_bytes(pos, &[0u8; INDEX_ENTRY_SIZE]);
            self.header.index_count = number;
            removed += 1;
        }
        if removed > 0 {
            match self.entry(self.header.index_count - 1) {
                Some(last) if self.header.index_count > 1 => {
                    self.header.end_phy_offset = last.phy_offset;
                    self.header.end_timestamp = self
                        .header
                        .begin_timestamp
                        .saturating_add(i64::from(last.time_diff_secs.max(0)) * MILLIS_PER_SECOND);
                }
                _ => {
                    self.header.end_phy_offset = self.header.begin_phy_offset;
                    self.header.end_timestamp = self.header.begin_timestamp;
                }
            }
            self.write_header();
        }
        removed
    }

    /// msyncs the mapping if anything changed since the last flush.
    pub fn flush(&self) -> Result<(), StoreError> {
        msync_if_dirty(&self.map, &self.dirty, &self.path)
    }

    /// The entries written so far (numbers `1..indexCount`), to release after the owner's lock
    /// is released.
    pub fn written_entries(&self) -> IndexPages {
        let written = usize::try_from(self.header.index_count)
            .unwrap_or(0)
            .min(self.index_num);
        IndexPages {
            path: self.path.clone(),
            map: Arc::clone(&self.map),
            start: self.entry_pos(0),
            end: self.entry_pos(written),
        }
    }

    /// The flush of this file, to run after the owner's lock is released; `None` if nothing
    /// changed since the last flush.
    pub fn flush_handle(&self) -> Option<IndexFlush> {
        self.dirty.load(Ordering::Acquire).then(|| IndexFlush {
            path: self.path.clone(),
            map: Arc::clone(&self.map),
            dirty: Arc::clone(&self.dirty),
        })
    }

    /// Unmaps and deletes the file.
    pub fn destroy(self) -> Result<(), StoreError> {
        let path = self.path.clone();
        drop(self);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io(&path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
    }

    #[test]
    fn java_hash_matches_known_values() {
        // Values computed by Java's String.hashCode.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("TagA"), 2_598_919);
        assert_eq!(java_string_hash("hello world"), 1_794_106_052);
        // Supplementary characters hash as two UTF-16 surrogates.
        assert_eq!(java_string_hash("😀"), 31 * 0xD83D + 0xDE00);
        // "polygenelubricants" hashes to Integer.MIN_VALUE, which RocketMQ maps to 0.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(index_key_hash("polygenelubricants"), 0);
        assert_eq!(index_key_hash("hello world"), 1_794_106_052);
        assert!(index_key_hash("TopicTest#key-1") >= 0);
        assert_eq!(build_key("T", "k"), "T#k");
    }

    #[test]
    fn layout_is_byte_exact() -> Result<(), StoreError> {
        let dir = tmp();
        let path = dir.path().join("20240101000000000");
        let (slots, entries) = (7usize, 5usize);
        let mut f = IndexFile::create(&path, slots, entries, 0, 0)?;
        let key = build_key("T", "k1");
        assert!(f.put_key(&key, 1000, 5_000_000));
        assert!(f.put_key(&key, 2000, 5_003_500));
        f.flush()?;
        let raw = fs::read(&path).map_err(|e| StoreError::io(&path, e))?;
        assert_eq!(raw.len(), 40 + 7 * 4 + 5 * 20);
        let be64 = |p: usize| i64::from_be_bytes(raw[p..p + 8].try_into().unwrap_or([0; 8]));
        let be32 = |p: usize| i32::from_be_bytes(raw[p..p + 4].try_into().unwrap_or([0; 4]));
        assert_eq!(be64(0), 5_000_000);
        assert_eq!(be64(8), 5_003_500);
        assert_eq!(be64(16), 1000);
        assert_eq!(be64(24), 2000);
        assert_eq!(be32(32), 1, "one slot in use");
        assert_eq!(be32(36), 3, "indexCount starts at 1");
        let hash = index_key_hash(&key);
        let slot = 40 + (hash as usize % slots) * 4;
        assert_eq!(be32(slot), 2, "slot points at the newest entry");
        let e1 = 40 + slots * 4 + 20;
        assert_eq!(
            (be32(e1), be64(e1 + 4), be32(e1 + 12), be32(e1 + 16)),
            (hash, 1000, 0, 0)
        );
        let e2 = e1 + 20;
        assert_eq!(
            (be32(e2), be64(e2 + 4), be32(e2 + 12), be32(e2 + 16)),
            (hash, 2000, 3, 1)
        );
        assert!(
            raw[40 + slots * 4..e1].iter().all(|b| *b == 0),
            "entry 0 unused"
        );
        Ok(())
    }

    /// A flush handle is taken while the file is borrowed and runs after: it clears the dirty
    /// mark the next write sets again, and still works once the file was deleted.
    #[test]
    fn flush_handle_outlives_the_borrow_and_the_file() -> Result<(), StoreError> {
        let dir = tmp();
        let path = dir.path().join("20240101000000002");
        let mut f = IndexFile::create(&path, 8, 16, 0, 0)?;
        let handle = f
            .flush_handle()
            .ok_or_else(|| StoreError::Config("dirty".into()))?;
        handle.flush()?;
        assert!(f.flush_handle().is_none(), "clean after the handle's flush");
        assert!(f.put_key("T#k", 100, 1_000));
        let handle = f
            .flush_handle()
            .ok_or_else(|| StoreError::Config("dirty".into()))?;
        let mut out = Vec::new();
        f.select_phy_offsets(&mut out, "T#k", 10, 0, i64::MAX);
        assert_eq!(out, vec![100]);
        f.destroy()?;
        assert!(!path.exists());
        handle.flush()?;
        Ok(())
    }

    #[test]
    fn fills_up_and_truncates() -> Result<(), StoreError> {
        let dir = tmp();
        let path = dir.path().join("20240101000000001");
        let mut f = IndexFile::create(&path, 2, 6, 0, 0)?;
        for i in 0..5 {
            assert!(
                f.put_key(&format!("T#k{i}"), 100 * i, 1_000 + i),
                "entry {i}"
            );
        }
        assert!(f.is_write_full());
        assert!(!f.put_key("T#k9", 900, 2_000));
        let all_keys = |f: &IndexFile| {
            let mut out = Vec::new();
            for i in 0..5 {
                f.select_phy_offsets(&mut out, &format!("T#k{i}"), 10, 0, i64::MAX);
            }
            out.sort_unstable();
            out.dedup();
            out
        };
        assert_eq!(all_keys(&f), vec![0, 100, 200, 300, 400]);
        assert_eq!(f.truncate_from(250), 2);
        assert_eq!(f.header().end_phy_offset, 200);
        assert_eq!(all_keys(&f), vec![0, 100, 200]);
        assert!(f.put_key("T#k3", 300, 1_003));
        assert_eq!(all_keys(&f), vec![0, 100, 200, 300]);
        assert_eq!(f.truncate_from(0), 4);
        assert_eq!(f.header().index_count, 1);
        assert_eq!(f.header().hash_slot_count, 0);
        assert!(all_keys(&f).is_empty());
        Ok(())
    }

    #[test]
    fn open_rejects_wrong_geometry_and_bad_header() -> Result<(), StoreError> {
        let dir = tmp();
        let path = dir.path().join("20240101000000002");
        let mut f = IndexFile::create(&path, 4, 4, 0, 0)?;
        assert!(f.put_key("T#a", 1, 1));
        f.flush()?;
        drop(f);
        assert!(IndexFile::open(&path, 5, 4).is_err());
        let f = IndexFile::open(&path, 4, 4)?;
        assert_eq!(f.header().index_count, 2);
        drop(f);
        // indexCount beyond the file: corrupt, not a panic.
        let mut raw = fs::read(&path).map_err(|e| StoreError::io(&path, e))?;
        raw[36..40].copy_from_slice(&1000i32.to_be_bytes());
        fs::write(&path, &raw).map_err(|e| StoreError::io(&path, e))?;
        assert!(matches!(
            IndexFile::open(&path, 4, 4),
            Err(StoreError::Corrupt { .. })
        ));
        assert!(IndexFile::create(&path, 0, 4, 0, 0).is_err());
        Ok(())
    }

    #[test]
    fn cyclic_chain_on_disk_terminates() -> Result<(), StoreError> {
        let dir = tmp();
        let path = dir.path().join("20240101000000003");
        let mut f = IndexFile::create(&path, 1, 8, 0, 0)?;
        for i in 0..4 {
            assert!(f.put_key("T#x", i, 1_000));
        }
        f.flush()?;
        drop(f);
        // Point entry 2's prevIndex at entry 4 (a cycle).
        let mut raw = fs::read(&path).map_err(|e| StoreError::io(&path, e))?;
        let e2 = 40 + 4 + 2 * 20;
        raw[e2 + 16..e2 + 20].copy_from_slice(&4i32.to_be_bytes());
        fs::write(&path, &raw).map_err(|e| StoreError::io(&path, e))?;
        let f = IndexFile::open(&path, 1, 8)?;
        let mut out = Vec::new();
        f.select_phy_offsets(&mut out, "T#x", 100, 0, i64::MAX);
        assert_eq!(out, vec![3, 2, 1]);
        Ok(())
    }
}
