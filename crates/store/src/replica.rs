//! The CommitLog as replication sees it: raw bytes read out of a master's log, and raw bytes
//! appended to a slave's at exactly the offsets its master names.
//!
//! A master hands its slaves the bytes of its CommitLog as they are, so a slave's log is a byte
//! copy of its master's: same segment files, same offsets, the same BLANK entries closing each
//! segment. A transfer never crosses a segment boundary (a segment is one mapped file), and may
//! cut a record anywhere: the next transfer continues it.
//!
//! On the slave the log therefore can end inside a record. Nothing may read such a record before
//! its last byte arrives, so the log keeps a *replica tail*: the end of the last complete record
//! (or BLANK entry) appended. Dispatch (ConsumeQueue, index, long-poll wake-ups) never goes past
//! it ([`CommitLog::dispatch_ceiling`]), and it gives the segment the store timestamp of the last
//! complete record, which the checkpoint records once that record is flushed. A log that was
//! never appended to by replication has no tail and no ceiling.
//!
//! Appended bytes must continue the log's records: every record from the replica tail on whose
//! header is at hand must carry a message (or BLANK) magic code, a size that fits its segment and,
//! in its PHYSICALOFFSET field, its own offset. A master whose log diverged from the slave's
//! (it lost its tail or its whole disk and has written other records since, past the slave's
//! end) sends bytes that start inside one of its own records at the slave's end: they are
//! refused ([`StoreError::Diverged`]) and the log stays as it was. Two histories that happen to
//! have a record boundary at exactly the slave's end are not told apart by this.

use bytes::Bytes;
use std::sync::atomic::Ordering;

use comet_protocol::message::record::{self, MIN_RECORD_SIZE, PHYSICAL_OFFSET_POS};
use comet_protocol::message::{BLANK_ENTRY_LEN, BLANK_MAGIC, MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2};

use crate::commit_log::{CommitLog, ReplicaTail};
use crate::error::StoreError;

impl CommitLog {
    /// Up to `max_len` bytes of the log from `offset`: the written bytes of the segment holding
    /// `offset`, never past its end. A zero-copy slice of the mapped segment; `None` when
    /// nothing at `offset` is written yet or the segment is gone (retention).
    pub fn read_raw(&self, offset: i64, max_len: usize) -> Option<Bytes> {
        let file = self.find_file(offset)?;
        let pos = usize::try_from(offset - file.file_from_offset()).ok()?;
        let readable = file.wrote_position().checked_sub(pos)?;
        let len = readable.min(max_len);
        if len == 0 {
            return None;
        }
        let bytes = file.slice(pos, len)?;
        self.note_read(len);
        Some(bytes)
    }

    /// Appends `data`, a master's log bytes starting at `offset`, and returns the new end of the
    /// log. `offset` must be where the log ends; an empty log starts at any segment boundary.
    /// `data` must fit in the segment holding `offset` (a master never sends across a
    /// segment's end). Refused bytes leave the log as it was.
    pub fn append_raw(&self, offset: i64, data: &[u8]) -> Result<i64, StoreError> {
        let mut tail = self.replica_tail.lock();
        let end = self.max_offset();
        let size = i64::try_from(self.mapped_file_size()).unwrap_or(i64::MAX);
        let empty = self.mapped_file_queue().last_file().is_none();
        if empty {
            if offset.rem_euclid(size) != 0 {
                return Err(StoreError::OffsetOutOfRange {
                    offset,
                    reason: format!(
                        "an empty commit log starts at a segment boundary (a multiple of {size})"
                    ),
                });
            }
        } else if offset != end {
            return Err(StoreError::OffsetOutOfRange {
                offset,
                reason: format!("the replicated commit log ends at {end}"),
            });
        }
        if data.is_empty() {
            return Ok(end);
        }
        let file = self.mapped_file_queue().last_file_or_create(offset)?;
        let pos = offset - file.file_from_offset();
        assert_eq!(
            usize::try_from(pos).ok(),
            Some(file.wrote_position()),
            "replicated bytes at {offset} must land at the end of segment {}",
            file.file_from_offset()
        );
        if data.len() > file.free_space() {
            return Err(StoreError::OffsetOutOfRange {
                offset,
                reason: format!(
                    "{} replicated bytes cross the end of the segment starting at {} ({} bytes free)",
                    data.len(),
                    file.file_from_offset(),
                    file.free_space()
                ),
            });
        }
        let mut state = tail.unwrap_or(ReplicaTail {
            complete_end: offset,
        });
        self.check_continuation(state.complete_end, offset, data)?;
        if tail.is_none() {
            // Until now the log had no ceiling (a master's has none). Dispatch reads the written
            // (or flushed) end first and the ceiling second, so publishing the ceiling before
            // the first replicated byte lands keeps it from reading a record cut by this
            // transfer.
            self.replica_ceiling
                .store(state.complete_end, Ordering::Release);
        }
        file.append(data)?;
        let new_end = offset + i64::try_from(data.len()).unwrap_or(i64::MAX);
        if let Some(ts) = self.advance_tail(&mut state, new_end) {
            file.set_store_timestamp(ts);
        }
        *tail = Some(state);
        self.replica_ceiling
            .store(state.complete_end, Ordering::Release);
        Ok(new_end)
    }

    /// Checks that `data`, to be appended at `offset` (the log's end), continues the records that
    /// start at `from` (the replica tail) or later; see the module docs.
    fn check_continuation(&self, from: i64, offset: i64, data: &[u8]) -> Result<(), StoreError> {
        let size = i64::try_from(self.mapped_file_size()).unwrap_or(i64::MAX);
        let end = offset + i64::try_from(data.len()).unwrap_or(i64::MAX);
        let header_len = PHYSICAL_OFFSET_POS + 8;
        let diverged = |at: i64, reason: String| StoreError::Diverged { offset: at, reason };
        let mut pos = from;
        while pos < end {
            let segment_end = pos - pos.rem_euclid(size) + size;
            if segment_end - pos < i64::try_from(BLANK_ENTRY_LEN).unwrap_or(i64::MAX) {
                pos = segment_end;
                continue;
            }
            let head = self.bytes_at(pos, header_len, offset, data);
            let Some(magic) = record::peek_magic(&head) else {
                break; // Too little of the record so far to judge it.
            };
            if magic == BLANK_MAGIC {
                pos = segment_end;
                continue;
            }
            if magic != MESSAGE_MAGIC_V1 && magic != MESSAGE_MAGIC_V2 {
                return Err(diverged(
                    pos,
                    format!("no record starts there (magic {magic:#010x})"),
                ));
            }
            let total = record::peek_total_size(&head).map_or(0, i64::from);
            if total < i64::try_from(MIN_RECORD_SIZE).unwrap_or(0) || pos + total > segment_end {
                return Err(diverged(
                    pos,
                    format!("a record of {total} bytes cannot start there"),
                ));
            }
            if let Some(field) = head.get(PHYSICAL_OFFSET_POS..header_len) {
                let mut raw = [0u8; 8];
                raw.copy_from_slice(field);
                let physical = i64::from_be_bytes(raw);
                if physical != pos {
                    return Err(diverged(
                        pos,
                        format!("the record there was written at offset {physical}"),
                    ));
                }
            }
            pos += total;
        }
        Ok(())
    }

    /// Up to `len` bytes from `pos` of the log as it will be once `data` is appended at `offset`:
    /// borrowed from `data` when they all lie in it (nearly every record of a transfer).
    fn bytes_at<'a>(
        &self,
        pos: i64,
        len: usize,
        offset: i64,
        data: &'a [u8],
    ) -> std::borrow::Cow<'a, [u8]> {
        if let Some(within) = usize::try_from(pos - offset)
            .ok()
            .and_then(|from| data.get(from..from.checked_add(len)?))
        {
            return std::borrow::Cow::Borrowed(within);
        }
        let mut out = Vec::with_capacity(len);
        if pos < offset
            && let Some(file) = self.find_file(pos)
        {
            let at = usize::try_from(pos - file.file_from_offset()).unwrap_or(usize::MAX);
            let n = usize::try_from(offset - pos).unwrap_or(0).min(len);
            out.extend_from_slice(file.read_at(at, n).unwrap_or_default());
        }
        let from = usize::try_from(pos.max(offset) - offset).unwrap_or(usize::MAX);
        let want = len.saturating_sub(out.len());
        if let Some(rest) = data.get(from..) {
            out.extend_from_slice(&rest[..want.min(rest.len())]);
        }
        std::borrow::Cow::Owned(out)
    }

    /// Moves `tail` over the records (and BLANK entries) complete below `end`; returns the
    /// store timestamp of the last record it passed (only that one is decoded; should it not
    /// decode, none, which leaves the segment's timestamp older: recovery then starts earlier).
    fn advance_tail(&self, tail: &mut ReplicaTail, end: i64) -> Option<i64> {
        let blank_len = i64::try_from(BLANK_ENTRY_LEN).unwrap_or(i64::MAX);
        let mut last_record = None;
        while tail.complete_end < end {
            let Some(file) = self.find_file(tail.complete_end) else {
                break;
            };
            let base = file.file_from_offset();
            let file_end = base + i64::try_from(file.file_size()).unwrap_or(0);
            if file_end - tail.complete_end < blank_len {
                // Too little room left for a record: the segment ends here.
                tail.complete_end = file_end;
                continue;
            }
            let pos = usize::try_from(tail.complete_end - base).unwrap_or(usize::MAX);
            let avail = usize::try_from(end.min(file_end) - tail.complete_end).unwrap_or(0);
            let Some(head) = file.read_at(pos, avail.min(BLANK_ENTRY_LEN)) else {
                break;
            };
            if record::peek_magic(head) == Some(BLANK_MAGIC) {
                tail.complete_end = file_end;
                continue;
            }
            let Some(total) = record::peek_total_size(head)
                .and_then(|t| usize::try_from(t).ok())
                .filter(|t| *t >= BLANK_ENTRY_LEN)
            else {
                // Fewer than 8 bytes of the next record so far, or a length no record has:
                // the bytes after it are not dispatched until recovery judges them.
                break;
            };
            if total > avail {
                break;
            }
            tail.complete_end += i64::try_from(total).unwrap_or(i64::MAX);
            last_record = Some((file, pos, total));
        }
        let (file, pos, total) = last_record?;
        file.read_at(pos, total)
            .and_then(|r| record::decode_record_view(r).ok())
            .map(|v| v.store_timestamp)
    }

    /// The end of the last complete replicated record: what dispatch may read up to. Without
    /// replication (a master's log) there is no ceiling.
    pub fn dispatch_ceiling(&self) -> i64 {
        self.replica_ceiling.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use comet_protocol::message::MessageExt;

    use super::*;
    use crate::config::MessageStoreConfig;

    const SEGMENT: usize = 64 * 1024;

    fn log_in(dir: &std::path::Path) -> CommitLog {
        let mut config = MessageStoreConfig::with_root(dir);
        config.mapped_file_size_commit_log = SEGMENT;
        let log = CommitLog::new(&config);
        log.load().expect("load");
        log
    }

    fn put(log: &CommitLog, body_len: usize) {
        let mut msg = MessageExt::new("Replicated", vec![7u8; body_len].into());
        msg.born_host = SocketAddr::from(([127, 0, 0, 1], 1));
        msg.store_host = msg.born_host;
        assert!(log.put_message(msg).is_ok(), "put");
    }

    /// Copies `master` into `slave` in transfers of at most `batch` bytes, as an HA connection
    /// would; returns the slave's end.
    fn replicate(master: &CommitLog, slave: &CommitLog, batch: usize) -> i64 {
        let mut offset = slave.max_offset().max(master.min_offset());
        while let Some(bytes) = master.read_raw(offset, batch) {
            offset = slave.append_raw(offset, &bytes).expect("append");
        }
        offset
    }

    fn log_bytes(log: &CommitLog) -> Vec<(i64, Vec<u8>)> {
        log.mapped_file_queue()
            .files()
            .iter()
            .map(|f| {
                let data = f
                    .read_at(0, f.wrote_position())
                    .unwrap_or_default()
                    .to_vec();
                (f.file_from_offset(), data)
            })
            .collect()
    }

    #[test]
    fn transfers_of_any_size_rebuild_the_log_byte_for_byte() {
        for batch in [1, 7, 100, 4096, SEGMENT] {
            let (m, s) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
            let (master, slave) = (log_in(m.path()), log_in(s.path()));
            // Enough records to roll over two segments, sizes that do not divide the segment.
            for i in 0..300 {
                put(&master, 300 + (i % 7) * 13);
            }
            assert!(master.mapped_file_queue().file_count() >= 3);
            let end = replicate(&master, &slave, batch);
            assert_eq!(end, master.max_offset(), "batch {batch}");
            assert_eq!(log_bytes(&slave), log_bytes(&master), "batch {batch}");
            assert_eq!(slave.dispatch_ceiling(), end, "batch {batch}");
            assert_eq!(master.dispatch_ceiling(), i64::MAX);
        }
    }

    #[test]
    fn the_ceiling_stops_before_a_record_cut_by_a_transfer() {
        let (m, s) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (master, slave) = (log_in(m.path()), log_in(s.path()));
        put(&master, 500);
        let first_end = master.max_offset();
        put(&master, 500);
        let cut = first_end + 10;
        let head = master.read_raw(0, usize::try_from(cut).unwrap()).unwrap();
        assert_eq!(slave.append_raw(0, &head).unwrap(), cut);
        assert_eq!(slave.dispatch_ceiling(), first_end);
        let ts = slave
            .mapped_file_queue()
            .last_file()
            .unwrap()
            .store_timestamp();
        assert!(ts > 0, "the complete record's store timestamp is kept");
        let rest = master.read_raw(cut, SEGMENT).unwrap();
        slave.append_raw(cut, &rest).unwrap();
        assert_eq!(slave.dispatch_ceiling(), master.max_offset());
    }

    #[test]
    fn bytes_at_the_wrong_offset_are_refused_and_change_nothing() {
        let (m, s) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (master, slave) = (log_in(m.path()), log_in(s.path()));
        put(&master, 100);
        let bytes = master.read_raw(0, SEGMENT).unwrap();
        // An empty log starts only at a segment boundary.
        assert!(slave.append_raw(10, &bytes).is_err());
        assert!(slave.mapped_file_queue().last_file().is_none());
        let end = slave.append_raw(0, &bytes).unwrap();
        // Not where the log ends: before it, after it.
        assert!(slave.append_raw(0, &bytes).is_err());
        assert!(slave.append_raw(end + 1, &bytes).is_err());
        // Across the end of the segment.
        let too_much = vec![0u8; SEGMENT];
        assert!(slave.append_raw(end, &too_much).is_err());
        assert_eq!(slave.max_offset(), end);
        assert_eq!(log_bytes(&slave), log_bytes(&master));
    }

    #[test]
    fn bytes_of_a_diverged_history_are_refused_and_change_nothing() {
        let (a, b, s) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let (older, newer, slave) = (log_in(a.path()), log_in(b.path()), log_in(s.path()));
        for _ in 0..3 {
            put(&older, 700);
        }
        let end = replicate(&older, &slave, 4096);
        // The newer history (a master that lost its disk) has written past the slave's end,
        // with no record starting there.
        while newer.max_offset() < end + 2000 {
            put(&newer, 333);
        }
        let at_end = newer.read_raw(end, SEGMENT).unwrap();
        let err = slave.append_raw(end, &at_end).expect_err("diverged");
        assert!(
            matches!(err, StoreError::Diverged { offset, .. } if offset == end),
            "{err}"
        );
        assert_eq!(log_bytes(&slave), log_bytes(&older));
        assert_eq!(slave.dispatch_ceiling(), end);
        // A slave that stopped inside a record: the newer bytes complete it, then fail at the
        // next record's start.
        let s2 = tempfile::tempdir().unwrap();
        let cut_slave = log_in(s2.path());
        let first = older.read_raw(0, 750).unwrap();
        assert_eq!(cut_slave.append_raw(0, &first).unwrap(), 750);
        let rest = newer.read_raw(750, 2000).unwrap();
        assert!(matches!(
            cut_slave.append_raw(750, &rest),
            Err(StoreError::Diverged { .. })
        ));
        assert_eq!(cut_slave.max_offset(), 750);
        // The same history continues fine.
        let more = older.read_raw(750, SEGMENT).unwrap();
        assert!(cut_slave.append_raw(750, &more).is_ok());
        assert_eq!(cut_slave.max_offset(), older.max_offset());
    }

    #[test]
    fn an_empty_slave_may_start_at_a_later_segment() {
        let (m, s) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (master, slave) = (log_in(m.path()), log_in(s.path()));
        for _ in 0..200 {
            put(&master, 700);
        }
        let newest = master
            .mapped_file_queue()
            .last_file()
            .unwrap()
            .file_from_offset();
        assert!(newest > 0);
        let mut offset = newest;
        while let Some(bytes) = master.read_raw(offset, 1000) {
            offset = slave.append_raw(offset, &bytes).unwrap();
        }
        assert_eq!(slave.min_offset(), newest);
        assert_eq!(slave.max_offset(), master.max_offset());
        assert_eq!(slave.dispatch_ceiling(), master.max_offset());
    }
}
