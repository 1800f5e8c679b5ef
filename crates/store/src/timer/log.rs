//! The timer log: an append-only file of fixed-size records, one per parked message (or per
//! roll of a message parked too far ahead), each pointing back to the previous record of the
//! same wheel slot. A slot of the wheel only keeps the position of its newest record, so the
//! wheel's memory does not grow with the number of parked messages: walking a slot reads its
//! chain back from disk.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};
use crate::os;

/// Bytes of one record: deliver time, CommitLog offset, size, magic, previous position.
pub const UNIT_SIZE: u64 = 32;
/// Magic bit of every record.
pub const MAGIC_DEFAULT: i32 = 1;
/// Magic bit of a record that rolls its message further instead of delivering it.
pub const MAGIC_ROLL: i32 = 1 << 1;
/// No previous record in the slot's chain.
pub const NO_PREV: i64 = -1;
/// Bytes of one release chunk: once every record of a chunk (and of all chunks before it) was
/// delivered, its disk blocks are given back (the file keeps its length, the range reads as
/// zeros), so a log under steady traffic does not grow on disk without bound.
pub const CHUNK_BYTES: u64 = UNIT_SIZE * 32 * 1024;

/// One record of the timer log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerRecord {
    /// Slot time (ms since the epoch, a multiple of the precision) the record fires at.
    pub slot_ms: i64,
    /// CommitLog offset of the message in the timer topic.
    pub commit_log_offset: i64,
    /// Size of that CommitLog record.
    pub size: i32,
    /// [`MAGIC_DEFAULT`], with [`MAGIC_ROLL`] when the message is to be parked again.
    pub magic: i32,
    /// Position of the previous record of the same slot, or [`NO_PREV`].
    pub prev_pos: i64,
}

impl TimerRecord {
    /// Whether firing this record parks its message again rather than delivering it.
    pub fn is_roll(&self) -> bool {
        self.magic & MAGIC_ROLL != 0
    }

    fn encode(&self) -> [u8; UNIT_SIZE as usize] {
        let mut buf = [0u8; UNIT_SIZE as usize];
        buf[0..8].copy_from_slice(&self.slot_ms.to_be_bytes());
        buf[8..16].copy_from_slice(&self.commit_log_offset.to_be_bytes());
        buf[16..20].copy_from_slice(&self.size.to_be_bytes());
        buf[20..24].copy_from_slice(&self.magic.to_be_bytes());
        buf[24..32].copy_from_slice(&self.prev_pos.to_be_bytes());
        buf
    }

    fn decode(buf: &[u8; UNIT_SIZE as usize]) -> Self {
        let i64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[at..at + 8]);
            i64::from_be_bytes(b)
        };
        let i32_at = |at: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&buf[at..at + 4]);
            i32::from_be_bytes(b)
        };
        TimerRecord {
            slot_ms: i64_at(0),
            commit_log_offset: i64_at(8),
            size: i32_at(16),
            magic: i32_at(20),
            prev_pos: i64_at(24),
        }
    }
}

/// The timer log file.
#[derive(Debug)]
pub struct TimerLog {
    path: PathBuf,
    file: File,
    end: u64,
    /// Bytes before this position were released (their blocks given back).
    released: u64,
}

impl TimerLog {
    /// Opens (or creates) the log at `path`, keeping only its first `keep` bytes (rounded down
    /// to whole records): what lies beyond was written after the last checkpoint and is
    /// re-derived from the timer topic. `released` is where the records still needed start.
    pub fn open(path: &Path, keep: u64, released: u64) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| StoreError::io(path, e))?;
        let len = file.metadata().map_err(|e| StoreError::io(path, e))?.len();
        let end = len.min(keep) / UNIT_SIZE * UNIT_SIZE;
        if end != len {
            file.set_len(end).map_err(|e| StoreError::io(path, e))?;
        }
        Ok(TimerLog {
            path: path.to_owned(),
            file,
            end,
            released: released.min(end) / CHUNK_BYTES * CHUNK_BYTES,
        })
    }

    /// Where the records still needed start (a multiple of [`CHUNK_BYTES`]).
    pub fn released(&self) -> u64 {
        self.released
    }

    /// Gives back the disk blocks of every record before `pos` (rounded down to a chunk). A
    /// filesystem that cannot punch holes keeps them; the records are then only skipped.
    pub fn release_before(&mut self, pos: u64) {
        let pos = pos.min(self.end) / CHUNK_BYTES * CHUNK_BYTES;
        if pos <= self.released {
            return;
        }
        if let Err(e) = os::punch_hole(&self.file, self.released, pos - self.released) {
            tracing::debug!(path = %self.path.display(), error = %e, "timer log blocks not released");
        }
        self.released = pos;
    }

    /// Bytes written.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Appends a record; returns its position.
    pub fn append(&mut self, record: &TimerRecord) -> Result<i64> {
        let pos = self.end;
        self.file
            .write_all_at(&record.encode(), pos)
            .map_err(|e| StoreError::io(&self.path, e))?;
        self.end += UNIT_SIZE;
        i64::try_from(pos).map_err(|_| StoreError::corrupt(&self.path, -1, "timer log too large"))
    }

    /// Reads the record at `pos`.
    pub fn read(&self, pos: i64) -> Result<TimerRecord> {
        let at = u64::try_from(pos).map_err(|_| self.out_of_range(pos))?;
        if at % UNIT_SIZE != 0 || at + UNIT_SIZE > self.end {
            return Err(self.out_of_range(pos));
        }
        let mut buf = [0u8; UNIT_SIZE as usize];
        self.file
            .read_exact_at(&mut buf, at)
            .map_err(|e| StoreError::io(&self.path, e))?;
        Ok(TimerRecord::decode(&buf))
    }

    fn out_of_range(&self, pos: i64) -> StoreError {
        StoreError::corrupt(&self.path, pos, "timer log position out of range")
    }

    /// Calls `f` with every record not released and its position, oldest first.
    pub fn scan(&self, mut f: impl FnMut(i64, TimerRecord)) -> Result<()> {
        const BATCH: u64 = 4096;
        let mut buf = vec![0u8; (UNIT_SIZE * BATCH) as usize];
        let mut at = self.released;
        while at < self.end {
            let len = (self.end - at).min(UNIT_SIZE * BATCH);
            let chunk = &mut buf[..len as usize];
            self.file
                .read_exact_at(chunk, at)
                .map_err(|e| StoreError::io(&self.path, e))?;
            for (i, unit) in chunk.chunks_exact(UNIT_SIZE as usize).enumerate() {
                let mut one = [0u8; UNIT_SIZE as usize];
                one.copy_from_slice(unit);
                let pos = at + i as u64 * UNIT_SIZE;
                f(
                    i64::try_from(pos).unwrap_or(i64::MAX),
                    TimerRecord::decode(&one),
                );
            }
            at += len;
        }
        Ok(())
    }

    /// Drops every record (the caller knows none is needed any more).
    pub fn clear(&mut self) -> Result<()> {
        self.file
            .set_len(0)
            .map_err(|e| StoreError::io(&self.path, e))?;
        self.end = 0;
        self.released = 0;
        self.sync()
    }

    /// Makes what was written durable.
    pub fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| StoreError::io(&self.path, e))
    }
}
