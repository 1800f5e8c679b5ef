//! Replication through the store facade: what a master's HA service reads and a slave's
//! appends (the byte-level rules are in `crate::replica`).

use bytes::Bytes;

use super::MessageStore;
use crate::config::FlushDiskType;
use crate::error::StoreError;

impl MessageStore {
    /// Up to `max_len` written bytes of the CommitLog from `offset`, within one segment (see
    /// [`crate::commit_log::CommitLog::read_raw`]).
    pub fn read_replicated(&self, offset: i64, max_len: usize) -> Option<Bytes> {
        self.commit_log.read_raw(offset, max_len)
    }

    /// Appends a master's CommitLog bytes at `offset` and returns the new end of the log; the
    /// complete records among them are then flushed per `flushDiskType` and dispatched like
    /// local appends (see [`crate::commit_log::CommitLog::append_raw`] for what is refused).
    ///
    /// Dispatch runs on the reput thread, not on the caller's: the caller is a slave's HA
    /// connection, whose next report to the master (what a SYNC_MASTER's answers wait for)
    /// should not wait for ConsumeQueue and index writes.
    pub fn append_replicated(&self, offset: i64, data: &[u8]) -> Result<i64, StoreError> {
        if !self.is_running() {
            return Err(StoreError::NotRunning);
        }
        let end = self.commit_log.append_raw(offset, data)?;
        match self.flusher.mode() {
            FlushDiskType::AsyncFlush => {
                self.reput.wake();
                self.flusher.wake_if_needed();
            }
            FlushDiskType::SyncFlush => self.flush_pending(),
        }
        Ok(end)
    }

    /// The store's `flushDiskType`.
    pub fn flush_disk_type(&self) -> FlushDiskType {
        self.flusher.mode()
    }

    /// Bytes per CommitLog segment: a slave's must equal its master's, since both hold the same
    /// bytes at the same offsets.
    pub fn commit_log_segment_size(&self) -> usize {
        self.commit_log.mapped_file_size()
    }
}
