//! The `checkpoint` file: how far each derived structure was durable at the last flush.
//!
//! Abnormal recovery uses it to pick the CommitLog segment to start verifying from: everything
//! stored before `min(physicMsgTimestamp, logicsMsgTimestamp) - 3 s` is known to be both in the
//! CommitLog and in the ConsumeQueues on disk. The file is 4096 bytes (one page, so it is written
//! atomically by the disk) of big-endian i64 fields, exactly like RocketMQ's `StoreCheckpoint`.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};

use crate::error::StoreError;

/// Size of the checkpoint file.
pub const CHECKPOINT_FILE_SIZE: usize = 4096;
/// Safety margin subtracted from the checkpoint timestamps when choosing the recovery start
/// (RocketMQ subtracts 3 s to cover clock granularity between the flush threads).
pub const CHECKPOINT_SAFETY_MARGIN_MS: i64 = 3000;
/// Number of i64 fields written.
const FIELD_COUNT: usize = 5;

/// In-memory checkpoint values plus the file they are persisted to.
#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    file: File,
    physic_msg_timestamp_ms: AtomicI64,
    logics_msg_timestamp_ms: AtomicI64,
    index_msg_timestamp_ms: AtomicI64,
    master_flushed_offset: AtomicI64,
    confirm_phy_offset: AtomicI64,
    /// [`Checkpoint::min_timestamp`] of what the file holds now (read at open, set after each
    /// successful flush).
    persisted_min_timestamp_ms: AtomicI64,
    /// The index timestamp the file holds now.
    persisted_index_timestamp_ms: AtomicI64,
}

/// `min(physic, logics) − margin`, never below 0 (see [`Checkpoint::min_timestamp`]).
fn min_timestamp_of(physic: i64, logics: i64) -> i64 {
    (physic.min(logics) - CHECKPOINT_SAFETY_MARGIN_MS).max(0)
}

impl Checkpoint {
    /// Opens (or creates, zero-filled) the checkpoint at `path` and reads its fields. A file
    /// shorter than the fields reads the missing ones as 0.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| StoreError::io(parent, e))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| StoreError::io(path, e))?;
        let len = file.metadata().map_err(|e| StoreError::io(path, e))?.len();
        let mut raw = [0u8; FIELD_COUNT * 8];
        let readable = usize::try_from(len).unwrap_or(usize::MAX).min(raw.len());
        if let Some(dst) = raw.get_mut(..readable) {
            file.read_exact_at(dst, 0)
                .map_err(|e| StoreError::io(path, e))?;
        }
        if len < CHECKPOINT_FILE_SIZE as u64 {
            file.set_len(CHECKPOINT_FILE_SIZE as u64)
                .map_err(|e| StoreError::io(path, e))?;
        }
        let field = |i: usize| -> i64 {
            raw.get(i * 8..i * 8 + 8)
                .and_then(|b| b.try_into().ok())
                .map_or(0, i64::from_be_bytes)
        };
        Ok(Self {
            path: path.to_path_buf(),
            file,
            physic_msg_timestamp_ms: AtomicI64::new(field(0)),
            logics_msg_timestamp_ms: AtomicI64::new(field(1)),
            index_msg_timestamp_ms: AtomicI64::new(field(2)),
            master_flushed_offset: AtomicI64::new(field(3)),
            confirm_phy_offset: AtomicI64::new(field(4)),
            persisted_min_timestamp_ms: AtomicI64::new(min_timestamp_of(field(0), field(1))),
            persisted_index_timestamp_ms: AtomicI64::new(field(2)),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Store timestamp of the newest CommitLog record known durable.
    pub fn physic_msg_timestamp(&self) -> i64 {
        self.physic_msg_timestamp_ms.load(Ordering::Acquire)
    }

    pub fn set_physic_msg_timestamp(&self, ts: i64) {
        self.physic_msg_timestamp_ms.fetch_max(ts, Ordering::AcqRel);
    }

    /// Store timestamp of the newest record whose ConsumeQueue unit is known durable.
    pub fn logics_msg_timestamp(&self) -> i64 {
        self.logics_msg_timestamp_ms.load(Ordering::Acquire)
    }

    pub fn set_logics_msg_timestamp(&self, ts: i64) {
        self.logics_msg_timestamp_ms.fetch_max(ts, Ordering::AcqRel);
    }

    /// Store timestamp of the newest record whose index entries are known durable.
    pub fn index_msg_timestamp(&self) -> i64 {
        self.index_msg_timestamp_ms.load(Ordering::Acquire)
    }

    pub fn set_index_msg_timestamp(&self, ts: i64) {
        self.index_msg_timestamp_ms.fetch_max(ts, Ordering::AcqRel);
    }

    pub fn master_flushed_offset(&self) -> i64 {
        self.master_flushed_offset.load(Ordering::Acquire)
    }

    pub fn set_master_flushed_offset(&self, offset: i64) {
        self.master_flushed_offset.store(offset, Ordering::Release);
    }

    pub fn confirm_phy_offset(&self) -> i64 {
        self.confirm_phy_offset.load(Ordering::Acquire)
    }

    pub fn set_confirm_phy_offset(&self, offset: i64) {
        self.confirm_phy_offset.store(offset, Ordering::Release);
    }

    /// `min(physic, logics) - 3 s` (never negative): records stored at or before this are
    /// durable in both the CommitLog and the ConsumeQueues.
    pub fn min_timestamp(&self) -> i64 {
        min_timestamp_of(self.physic_msg_timestamp(), self.logics_msg_timestamp())
    }

    /// Like [`Checkpoint::min_timestamp`] but also bounded by the index timestamp
    /// (`messageIndexSafe`).
    pub fn min_timestamp_index(&self) -> i64 {
        self.min_timestamp().min(self.index_msg_timestamp())
    }

    /// Writes the fields and fsyncs the file.
    pub fn flush(&self) -> Result<(), StoreError> {
        let mut raw = [0u8; FIELD_COUNT * 8];
        let values = [
            self.physic_msg_timestamp(),
            self.logics_msg_timestamp(),
            self.index_msg_timestamp(),
            self.master_flushed_offset(),
            self.confirm_phy_offset(),
        ];
        for (chunk, value) in raw.chunks_exact_mut(8).zip(values) {
            chunk.copy_from_slice(&value.to_be_bytes());
        }
        self.file
            .write_all_at(&raw, 0)
            .map_err(|e| StoreError::io(&self.path, e))?;
        self.file
            .sync_data()
            .map_err(|e| StoreError::io(&self.path, e))?;
        let [physic, logics, index, ..] = values;
        self.persisted_min_timestamp_ms
            .store(min_timestamp_of(physic, logics), Ordering::Release);
        self.persisted_index_timestamp_ms
            .store(index, Ordering::Release);
        Ok(())
    }

    /// The timestamp an abnormal recovery after a crash now would verify the CommitLog from
    /// (the newest segment stored at or before it): [`Checkpoint::min_timestamp`] as the file
    /// holds it, and with `messageIndexSafe` also bounded by the index timestamp
    /// ([`Checkpoint::min_timestamp_index`]), as recovery chooses.
    pub fn persisted_min_timestamp(&self, message_index_safe: bool) -> i64 {
        let min = self.persisted_min_timestamp_ms.load(Ordering::Acquire);
        if message_index_safe {
            min.min(self.persisted_index_timestamp_ms.load(Ordering::Acquire))
        } else {
            min
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_layout() -> Result<(), StoreError> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::io("tmp", e))?;
        let path = dir.path().join("checkpoint");
        let cp = Checkpoint::open(&path)?;
        assert_eq!(cp.physic_msg_timestamp(), 0);
        cp.set_physic_msg_timestamp(10_000);
        cp.set_logics_msg_timestamp(9_000);
        cp.set_logics_msg_timestamp(8_000); // never moves back
        cp.set_index_msg_timestamp(5_000);
        cp.set_confirm_phy_offset(77);
        assert_eq!(cp.persisted_min_timestamp(true), 0, "nothing flushed yet");
        cp.flush()?;
        assert_eq!(cp.min_timestamp(), 6_000);
        assert_eq!(cp.min_timestamp_index(), 5_000);
        assert_eq!(cp.persisted_min_timestamp(true), 5_000);
        assert_eq!(
            cp.persisted_min_timestamp(false),
            6_000,
            "without messageIndexSafe the index does not bound recovery"
        );
        cp.set_index_msg_timestamp(7_000);
        assert_eq!(
            cp.persisted_min_timestamp(true),
            5_000,
            "only a flush persists"
        );
        drop(cp);
        let raw = std::fs::read(&path).map_err(|e| StoreError::io(&path, e))?;
        assert_eq!(raw.len(), CHECKPOINT_FILE_SIZE);
        assert_eq!(raw.get(0..8), Some(&10_000i64.to_be_bytes()[..]));
        assert_eq!(raw.get(8..16), Some(&9_000i64.to_be_bytes()[..]));
        let cp = Checkpoint::open(&path)?;
        assert_eq!(cp.logics_msg_timestamp(), 9_000);
        assert_eq!(cp.index_msg_timestamp(), 5_000);
        assert_eq!(cp.confirm_phy_offset(), 77);
        assert_eq!(cp.persisted_min_timestamp(true), 5_000, "read back at open");
        assert_eq!(cp.persisted_min_timestamp(false), 6_000);
        Ok(())
    }
}
