//! The CommitLog: every message of every topic, appended back to back in segment files.
//!
//! An append assigns the message its physical offset (where it lands), its queue offset (the
//! next slot of its topic/queue, from the `topic-queueId → next offset` table that recovery
//! rebuilds from the ConsumeQueues), its store timestamp and body CRC, and encodes the record
//! into the segment's pending buffer, from which one `pwrite` puts it in the page cache (see
//! `mapped_file.rs`). Records never span segments: when `record + 8 > free`, the rest of the
//! segment is claimed by a BLANK entry and the record goes to the start of the next segment.
//!
//! An append is committed (written and made readable) before the put returns, or, with
//! [`Commit::Deferred`], by the next [`CommitLog::commit`]: the broker defers the sends it answers
//! and commits once before writing the answers of everything one connection read in one go.
//! Only the last segment ever holds pending bytes: the BLANK that closes a segment is written
//! with a committing append, which takes that segment's pending records along.
//!
//! Appends are serialised by one short mutex (the encode is a few `memcpy`s; CRCs and size checks
//! are computed before taking it). Durability is not handled here: the caller asks `flush.rs`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use bytes::Bytes;
use comet_protocol::message::batch::BatchEntry;
use comet_protocol::message::record::{
    self, MAX_RECORD_PROPERTIES_LEN, MAX_RECORD_TOPIC_LEN, MAX_V1_TOPIC_LEN,
};
use comet_protocol::message::{BLANK_ENTRY_LEN, MessageExt, Properties, id, sysflag};
use comet_protocol::naming;
use comet_protocol::time::now_millis;
use parking_lot::Mutex;

use crate::config::MessageStoreConfig;
use crate::error::StoreError;
use crate::mapped_file::MappedFile;
use crate::mapped_file_queue::MappedFileQueue;
use crate::page_release_trigger::PageReleaseTrigger;

/// Most messages accepted in one batch.
pub const MAX_BATCH_MESSAGES: usize = comet_protocol::limits::MAX_BATCH_MESSAGES;

/// Outcome of a put (RocketMQ `PutMessageStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PutMessageStatus {
    PutOk,
    FlushDiskTimeout,
    FlushSlaveTimeout,
    SlaveNotAvailable,
    ServiceNotAvailable,
    CreateMappedFileFailed,
    MessageIllegal,
    PropertiesSizeExceeded,
    OsPageCacheBusy,
    UnknownError,
    LmqConsumeQueueNumExceeded,
    /// A timer message with an unreadable or too distant delivery time.
    WheelTimerMsgIllegal,
    /// A timer message while timer messages are off (`timerWheelEnable=false`).
    WheelTimerNotEnable,
}

impl PutMessageStatus {
    /// Whether the message was written (it may still lack the requested durability).
    pub fn is_written(self) -> bool {
        matches!(
            self,
            PutMessageStatus::PutOk
                | PutMessageStatus::FlushDiskTimeout
                | PutMessageStatus::FlushSlaveTimeout
                | PutMessageStatus::SlaveNotAvailable
        )
    }
}

/// Where and how a message (or a batch) was appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendMessageResult {
    /// Physical offset of the first record.
    pub wrote_offset: i64,
    /// Bytes of all records written (BLANK padding excluded).
    pub wrote_bytes: usize,
    /// Offset message id (uppercase hex of the store host and the record's CommitLog offset);
    /// comma-joined for a batch.
    pub msg_id: String,
    pub store_timestamp: i64,
    /// Queue offset of the first record (0 for prepared/rollback transaction records).
    pub logics_offset: i64,
    /// Number of records written.
    pub msg_num: usize,
}

/// When an append reaches the file (see `mapped_file.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Written and readable before the put returns.
    Now,
    /// Left pending until the next [`CommitLog::commit`]: the caller commits before it tells
    /// anyone the message is stored. Under SYNC_FLUSH the put does not wait for the flush
    /// either: its result names the offset the flush must reach
    /// ([`PutMessageResult::flush_until`]), and the caller holds its answer until then.
    Deferred,
}

/// Result of `put_message` / `put_messages`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutMessageResult {
    pub status: PutMessageStatus,
    pub append: Option<AppendMessageResult>,
    /// A deferred put under SYNC_FLUSH that asked to wait ([`Commit::Deferred`]): the message is
    /// durable once the CommitLog is flushed to this offset
    /// (`MessageStore::flushed_watch`), and not before; `status` says what to answer then.
    pub flush_until: Option<i64>,
}

impl PutMessageResult {
    pub fn failed(status: PutMessageStatus) -> Self {
        Self {
            status,
            append: None,
            flush_until: None,
        }
    }

    pub fn is_ok(&self) -> bool {
        self.status == PutMessageStatus::PutOk
    }
}

/// A batch to store as consecutive records of one queue (SEND_BATCH_MESSAGE): the header's
/// topic, queue, sys flag, born/store info, and each inner message's flag, body and properties.
#[derive(Debug, Clone)]
pub struct MessageExtBatch {
    pub topic: String,
    pub queue_id: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub messages: Vec<BatchEntry>,
}

impl MessageExtBatch {
    /// Decodes a SEND_BATCH_MESSAGE body into a batch for `topic`/`queue_id`.
    pub fn from_body(
        topic: impl Into<String>,
        queue_id: i32,
        body: &Bytes,
        born_host: SocketAddr,
        store_host: SocketAddr,
    ) -> Result<Self, StoreError> {
        let messages = comet_protocol::message::batch::decode_batch(body)?;
        Ok(Self {
            topic: topic.into(),
            queue_id,
            sys_flag: 0,
            born_timestamp: 0,
            born_host,
            store_host,
            reconsume_times: 0,
            messages,
        })
    }
}

/// Next queue offset per (topic, queue id).
#[derive(Debug, Default)]
struct TopicQueueTable {
    table: HashMap<String, HashMap<i32, i64>>,
}

impl TopicQueueTable {
    fn get(&self, topic: &str, queue_id: i32) -> i64 {
        self.table
            .get(topic)
            .and_then(|q| q.get(&queue_id))
            .copied()
            .unwrap_or(0)
    }

    fn advance(&mut self, topic: &str, queue_id: i32, by: i64) {
        if let Some(per_topic) = self.table.get_mut(topic) {
            *per_topic.entry(queue_id).or_insert(0) += by;
            return;
        }
        self.table
            .entry(topic.to_owned())
            .or_default()
            .insert(queue_id, by);
    }
}

/// Where the complete records of a replicated log end (appends from a master: see `replica.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplicaTail {
    /// Start of the first record (or BLANK entry) not yet complete.
    pub(crate) complete_end: i64,
}

/// The CommitLog of a store.
pub struct CommitLog {
    queue: MappedFileQueue,
    /// `maxMessageSize`: changes while the log runs ([`CommitLog::set_max_message_size`]).
    max_message_size: AtomicUsize,
    auto_message_version_on_topic_len: bool,
    writer: Mutex<TopicQueueTable>,
    /// Counts the bytes read through the segments' mappings (see `page_release.rs`).
    page_release: PageReleaseTrigger,
    /// Serializes replicated appends and tracks their last complete record (see `replica.rs`).
    pub(crate) replica_tail: Mutex<Option<ReplicaTail>>,
    /// [`ReplicaTail::complete_end`] for lock-free readers; `i64::MAX` without replication.
    pub(crate) replica_ceiling: AtomicI64,
}

impl std::fmt::Debug for CommitLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitLog")
            .field("queue", &self.queue)
            .finish()
    }
}

impl CommitLog {
    /// The largest body (or batch body) a put accepts.
    pub fn max_message_size(&self) -> usize {
        self.max_message_size.load(Ordering::Relaxed)
    }

    /// Changes the largest body (or batch body) later puts accept.
    pub fn set_max_message_size(&self, bytes: usize) {
        self.max_message_size.store(bytes, Ordering::Relaxed);
    }

    /// A CommitLog over `config`'s commit-log directory; call [`CommitLog::load`] next.
    pub fn new(config: &MessageStoreConfig) -> Self {
        Self {
            queue: MappedFileQueue::new(
                &config.commit_log_dir(),
                config.mapped_file_size_commit_log,
            ),
            max_message_size: AtomicUsize::new(config.max_message_size),
            auto_message_version_on_topic_len: config.auto_message_version_on_topic_len,
            writer: Mutex::new(TopicQueueTable::default()),
            page_release: PageReleaseTrigger::new(config.mapped_pages_release_bytes),
            replica_tail: Mutex::new(None),
            replica_ceiling: AtomicI64::new(i64::MAX),
        }
    }

    /// The count of bytes read through the mappings that paces `page_release.rs`.
    pub fn page_release(&self) -> &PageReleaseTrigger {
        &self.page_release
    }

    /// Maps the existing segments (positions are set by recovery).
    pub fn load(&self) -> Result<(), StoreError> {
        self.queue.load()
    }

    pub fn dir(&self) -> &Path {
        self.queue.dir()
    }

    /// The underlying segment queue (recovery, flush and retention work on it directly).
    pub fn mapped_file_queue(&self) -> &MappedFileQueue {
        &self.queue
    }

    pub fn mapped_file_size(&self) -> usize {
        self.queue.mapped_file_size()
    }

    /// First physical offset still stored.
    pub fn min_offset(&self) -> i64 {
        self.queue.min_offset()
    }

    /// End of the written (committed, readable) data.
    pub fn max_offset(&self) -> i64 {
        self.queue.max_offset()
    }

    /// Writes what deferred appends left pending ([`Commit::Deferred`]); returns whether there
    /// was anything. On return, every append made before the call is readable (or the error
    /// says why not: the bytes then stay pending for the next call).
    pub fn commit(&self) -> Result<bool, StoreError> {
        // Only the last segment can hold pending bytes: rolling to a new segment pads the old
        // one with a BLANK entry through a committing append, before the new one exists.
        self.queue
            .last_file()
            .map_or(Ok(false), |file| file.commit())
    }

    /// [`CommitLog::commit`], skipped while a writer holds the segment's write lock (see
    /// [`MappedFile::try_commit`]).
    pub fn try_commit(&self) -> Result<bool, StoreError> {
        self.queue
            .last_file()
            .map_or(Ok(false), |file| file.try_commit())
    }

    /// Appends `len` bytes filled by `fill` to `file`, committed now or left pending; `what`
    /// names it in the log should that fail.
    fn append<F>(
        file: &MappedFile,
        len: usize,
        commit: Commit,
        what: &str,
        fill: F,
    ) -> Result<(), PutMessageStatus>
    where
        F: FnOnce(&mut [u8]) -> Result<(), StoreError>,
    {
        let written = match commit {
            Commit::Now => file.append_with(len, fill),
            Commit::Deferred => file.append_deferred_with(len, fill),
        };
        written.map(|_| ()).map_err(|e| {
            tracing::error!(error = %e, "cannot write {what} into commit log");
            PutMessageStatus::UnknownError
        })
    }

    /// End of the durable data.
    pub fn flushed_where(&self) -> i64 {
        self.queue.flushed_where()
    }

    /// Start of the segment after the one holding `offset`.
    pub fn roll_next_file(&self, offset: i64) -> i64 {
        self.queue.roll_next_file(offset)
    }

    /// The segment holding `offset`.
    pub fn find_file(&self, offset: i64) -> Option<Arc<MappedFile>> {
        self.queue.find_by_offset(offset)
    }

    /// Replaces the next-queue-offset table (recovery: from the ConsumeQueues' max offsets).
    pub fn set_topic_queue_table(&self, entries: impl IntoIterator<Item = (String, i32, i64)>) {
        let mut table = TopicQueueTable::default();
        for (topic, queue_id, next) in entries {
            table.table.entry(topic).or_default().insert(queue_id, next);
        }
        *self.writer.lock() = table;
    }

    /// Next queue offset the CommitLog will assign to (topic, queue id).
    pub fn next_queue_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.writer.lock().get(topic, queue_id)
    }

    /// Forgets a topic's queue offsets (`delete_topics`).
    pub fn remove_topic(&self, topic: &str) {
        self.writer.lock().table.remove(topic);
    }

    /// Zero-copy bytes `[offset, offset + size)`, if they are within one stored segment.
    pub fn get_message(&self, offset: i64, size: i32) -> Option<Bytes> {
        let file = self.queue.find_by_offset(offset)?;
        let pos = usize::try_from(offset - file.file_from_offset()).ok()?;
        let bytes = file.slice(pos, usize::try_from(size).ok()?)?;
        self.page_release.note(bytes.len() as u64);
        Some(bytes)
    }

    /// The mapped file holding the published record of `size` bytes at `offset`, and the
    /// record's position in it: a reader of many records borrows them from the file
    /// ([`MappedFile::read_at`]) and slices adjacent ones together ([`MappedFile::slice`]).
    /// The caller reports what it hands out with [`CommitLog::note_read`].
    pub fn locate(&self, offset: i64, size: i32) -> Option<(Arc<MappedFile>, usize)> {
        let file = self.queue.find_by_offset(offset)?;
        let pos = usize::try_from(offset - file.file_from_offset()).ok()?;
        file.read_at(pos, usize::try_from(size).ok()?)?;
        Some((file, pos))
    }

    /// Counts `bytes` read through [`CommitLog::locate`] towards page release.
    pub fn note_read(&self, bytes: usize) {
        self.page_release.note(bytes as u64);
    }

    /// The whole record at `offset` (its size read from TOTALSIZE).
    pub fn get_record(&self, offset: i64) -> Option<Bytes> {
        let file = self.queue.find_by_offset(offset)?;
        let pos = usize::try_from(offset - file.file_from_offset()).ok()?;
        let size = record::peek_total_size(file.read_at(pos, 4)?)?;
        if size <= 0 {
            return None;
        }
        let bytes = file.slice(pos, usize::try_from(size).ok()?)?;
        self.page_release.note(bytes.len() as u64);
        Some(bytes)
    }

    /// Store timestamp of the record at `offset` of `size` bytes, if it is a valid record.
    pub fn pickup_store_timestamp(&self, offset: i64, size: i32) -> Option<i64> {
        let file = self.queue.find_by_offset(offset)?;
        let pos = usize::try_from(offset - file.file_from_offset()).ok()?;
        let buf = file.read_at(pos, usize::try_from(size).ok()?)?;
        record::decode_record_view(buf)
            .ok()
            .map(|v| v.store_timestamp)
    }

    fn check_topic(&self, topic: &str) -> Result<(), PutMessageStatus> {
        let len = topic.len();
        if len == 0 || len > MAX_RECORD_TOPIC_LEN {
            return Err(PutMessageStatus::MessageIllegal);
        }
        if len > MAX_V1_TOPIC_LEN {
            // Only retry/DLQ topics, named after groups, may use the long topic length.
            if !naming::is_retry_or_dlq(topic) || !self.auto_message_version_on_topic_len {
                return Err(PutMessageStatus::MessageIllegal);
            }
        }
        Ok(())
    }

    fn check_properties(props: &Properties) -> Result<(), PutMessageStatus> {
        if props.encoded_len() > MAX_RECORD_PROPERTIES_LEN {
            return Err(PutMessageStatus::PropertiesSizeExceeded);
        }
        Ok(())
    }

    /// Size of the record `msg` encodes to, checked against the segment size.
    fn record_len(&self, msg: &MessageExt) -> Result<usize, PutMessageStatus> {
        let len = record::encoded_record_size(msg).map_err(|e| {
            tracing::warn!(topic = %msg.topic, error = %e, "message cannot be encoded");
            PutMessageStatus::MessageIllegal
        })?;
        if len + BLANK_ENTRY_LEN > self.queue.mapped_file_size() {
            tracing::warn!(topic = %msg.topic, len, "record larger than a commit log segment");
            return Err(PutMessageStatus::MessageIllegal);
        }
        Ok(len)
    }

    /// Returns a segment with room for `len` bytes (plus the BLANK reserve), padding the current
    /// one with a BLANK entry if it has not.
    fn reserve(&self, len: usize) -> Result<Arc<MappedFile>, PutMessageStatus> {
        let mut rolled = false;
        loop {
            let file = self.queue.last_file_or_create(0).map_err(|e| {
                tracing::error!(error = %e, "cannot create commit log segment");
                PutMessageStatus::CreateMappedFileFailed
            })?;
            let free = file.free_space();
            if len + BLANK_ENTRY_LEN <= free {
                return Ok(file);
            }
            if rolled {
                // A fresh segment cannot hold it: `record_len` rules this out.
                return Err(PutMessageStatus::MessageIllegal);
            }
            let padded = file.append_with(free, |dst| {
                if let Some(head) = dst.get_mut(..BLANK_ENTRY_LEN) {
                    record::encode_blank_into(free, head)?;
                }
                Ok(())
            });
            if let Err(e) = padded {
                tracing::error!(error = %e, "cannot write BLANK entry");
                return Err(PutMessageStatus::UnknownError);
            }
            rolled = true;
        }
    }

    /// Appends one message and commits it. The caller fills topic, queue id, flag, body,
    /// properties, sys flag, born timestamp/host, store host, reconsume times and prepared
    /// transaction offset; this assigns the rest.
    pub fn put_message(&self, msg: MessageExt) -> Result<AppendMessageResult, PutMessageStatus> {
        self.put_message_with(msg, Commit::Now)
    }

    /// [`CommitLog::put_message`], committed now or left pending.
    pub fn put_message_with(
        &self,
        mut msg: MessageExt,
        commit: Commit,
    ) -> Result<AppendMessageResult, PutMessageStatus> {
        self.check_topic(&msg.topic)?;
        if msg.body.len() > self.max_message_size() {
            return Err(PutMessageStatus::MessageIllegal);
        }
        Self::check_properties(&msg.properties)?;
        msg.body_crc = record::body_crc(&msg.body);
        let len = self.record_len(&msg)?;
        msg.store_size = i32::try_from(len).map_err(|_| PutMessageStatus::MessageIllegal)?;
        let counted = sysflag::gets_queue_unit(msg.sys_flag);

        let mut table = self.writer.lock();
        let file = self.reserve(len)?;
        let store_timestamp = now_millis();
        msg.store_timestamp = store_timestamp;
        msg.queue_offset = if counted {
            table.get(&msg.topic, msg.queue_id)
        } else {
            0
        };
        let pos = file.appended_position();
        assert_fits_segment(&file, pos, len);
        msg.commit_log_offset = file.file_from_offset() + i64::try_from(pos).unwrap_or(0);
        Self::append(&file, len, commit, "record", |dst| {
            assert_appending_at(&file, pos);
            let wrote = record::encode_record_into(&msg, dst)?;
            assert_fills_reservation(&file, wrote, len);
            Ok(())
        })?;
        file.set_store_timestamp(store_timestamp);
        if counted {
            table.advance(&msg.topic, msg.queue_id, 1);
        }
        drop(table);

        Ok(AppendMessageResult {
            wrote_offset: msg.commit_log_offset,
            wrote_bytes: len,
            msg_id: id::offset_msg_id(msg.store_host, msg.commit_log_offset),
            store_timestamp,
            logics_offset: msg.queue_offset,
            msg_num: 1,
        })
    }

    /// Appends a batch as consecutive records with consecutive queue offsets, all in one
    /// segment, and commits it.
    pub fn put_messages(
        &self,
        batch: MessageExtBatch,
    ) -> Result<AppendMessageResult, PutMessageStatus> {
        self.put_messages_with(batch, Commit::Now)
    }

    /// [`CommitLog::put_messages`], committed now or left pending.
    pub fn put_messages_with(
        &self,
        batch: MessageExtBatch,
        commit: Commit,
    ) -> Result<AppendMessageResult, PutMessageStatus> {
        self.check_topic(&batch.topic)?;
        let n = batch.messages.len();
        if n == 0 || n > MAX_BATCH_MESSAGES {
            return Err(PutMessageStatus::MessageIllegal);
        }
        if !sysflag::gets_queue_unit(batch.sys_flag) {
            return Err(PutMessageStatus::MessageIllegal);
        }
        let body_total: usize = batch.messages.iter().map(|m| m.body.len()).sum();
        if body_total > self.max_message_size() {
            return Err(PutMessageStatus::MessageIllegal);
        }
        let mut msgs = Vec::with_capacity(n);
        let mut total = 0usize;
        for entry in batch.messages {
            Self::check_properties(&entry.properties)?;
            let mut msg = MessageExt::new(batch.topic.clone(), entry.body);
            msg.flag = entry.flag;
            msg.properties = entry.properties;
            msg.queue_id = batch.queue_id;
            msg.sys_flag = batch.sys_flag;
            msg.born_timestamp = batch.born_timestamp;
            msg.born_host = batch.born_host;
            msg.store_host = batch.store_host;
            msg.reconsume_times = batch.reconsume_times;
            msg.body_crc = record::body_crc(&msg.body);
            let len = self.record_len(&msg)?;
            msg.store_size = i32::try_from(len).map_err(|_| PutMessageStatus::MessageIllegal)?;
            total += len;
            msgs.push(msg);
        }
        if total + BLANK_ENTRY_LEN > self.queue.mapped_file_size() {
            return Err(PutMessageStatus::MessageIllegal);
        }

        let mut table = self.writer.lock();
        let file = self.reserve(total)?;
        let store_timestamp = now_millis();
        let first_queue_offset = table.get(&batch.topic, batch.queue_id);
        let first_pos = file.appended_position();
        assert_fits_segment(&file, first_pos, total);
        let first_phys = file.file_from_offset() + i64::try_from(first_pos).unwrap_or(0);
        Self::append(&file, total, commit, "batch", |dst| {
            assert_appending_at(&file, first_pos);
            let mut at = 0usize;
            let mut phys = first_phys;
            for (i, msg) in msgs.iter_mut().enumerate() {
                msg.store_timestamp = store_timestamp;
                msg.queue_offset = first_queue_offset + i64::try_from(i).unwrap_or(0);
                msg.commit_log_offset = phys;
                let window = dst.get_mut(at..).ok_or_else(|| {
                    StoreError::Config("batch layout exceeds its reservation".to_owned())
                })?;
                let wrote = record::encode_record_into(msg, window)?;
                at += wrote;
                phys += i64::try_from(wrote).unwrap_or(0);
            }
            assert_fills_reservation(&file, at, total);
            Ok(())
        })?;
        file.set_store_timestamp(store_timestamp);
        table.advance(&batch.topic, batch.queue_id, i64::try_from(n).unwrap_or(0));
        drop(table);

        let msg_id = msgs
            .iter()
            .map(|m| id::offset_msg_id(m.store_host, m.commit_log_offset))
            .collect::<Vec<_>>()
            .join(",");
        Ok(AppendMessageResult {
            wrote_offset: first_phys,
            wrote_bytes: total,
            msg_id,
            store_timestamp,
            logics_offset: first_queue_offset,
            msg_num: n,
        })
    }
}

/// Asserts that `len` bytes of records at `pos` of `file` leave room for the BLANK entry that
/// closes the segment: a record never crosses a segment boundary (`reserve` found the room, and
/// the writer lock keeps it).
fn assert_fits_segment(file: &MappedFile, pos: usize, len: usize) {
    assert!(
        pos + len + BLANK_ENTRY_LEN <= file.file_size(),
        "{}: {len} bytes of records at {pos} leave no room for a BLANK entry in {} bytes",
        file.path().display(),
        file.file_size()
    );
}

/// Asserts, from inside an append's fill and before any record is encoded, that the append
/// goes to `pos`: the records' PHYSICALOFFSET fields were computed from it, and recovery takes
/// a record whose field disagrees with its place for the end of the valid log. Appends are
/// serialised by the writer lock, so nothing can have appended since `pos` was read.
fn assert_appending_at(file: &MappedFile, pos: usize) {
    let appended = file.appended_position();
    assert!(
        appended == pos,
        "{}: appending at {appended}, but the records were placed at {pos}",
        file.path().display()
    );
}

/// Asserts that the encoded records filled their `reserved` bytes exactly: zeros left after a
/// short record read as the end of the log, and recovery would cut every record after them.
fn assert_fills_reservation(file: &MappedFile, wrote: usize, reserved: usize) {
    assert!(
        wrote == reserved,
        "{}: records encoded to {wrote} bytes into a reservation of {reserved}",
        file.path().display()
    );
}

/// Appends a message with a `body_len`-byte body to `queue_id` of `topic`, born at and stored by
/// a loopback host: the record the unit tests of the services built on the CommitLog need.
#[cfg(test)]
pub(crate) fn append_test_message(
    commit_log: &CommitLog,
    topic: &str,
    queue_id: i32,
    body_len: usize,
) {
    let mut msg = MessageExt::new(topic, vec![7u8; body_len].into());
    msg.queue_id = queue_id;
    msg.born_host = SocketAddr::from(([127, 0, 0, 1], 1));
    msg.store_host = msg.born_host;
    assert!(commit_log.put_message(msg).is_ok(), "append");
}

#[cfg(test)]
mod tests {
    use comet_protocol::message::BLANK_MAGIC;

    use super::*;

    fn log_in(dir: &Path, segment: usize) -> Result<CommitLog, StoreError> {
        let mut config = MessageStoreConfig::with_root(dir);
        config.mapped_file_size_commit_log = segment;
        let log = CommitLog::new(&config);
        log.load()?;
        Ok(log)
    }

    fn batch(n: usize, body_len: usize) -> MessageExtBatch {
        let host = SocketAddr::from(([127, 0, 0, 1], 1));
        MessageExtBatch {
            topic: "T".to_owned(),
            queue_id: 1,
            sys_flag: 0,
            born_timestamp: 0,
            born_host: host,
            store_host: host,
            reconsume_times: 0,
            messages: (0..n)
                .map(|_| BatchEntry {
                    flag: 0,
                    body: vec![3u8; body_len].into(),
                    properties: Properties::default(),
                })
                .collect(),
        }
    }

    /// Single and batch appends over small segments: every record's PHYSICALOFFSET is where it
    /// sits, offsets only grow, no record crosses a segment boundary, and a segment left for the
    /// next one ends with a BLANK entry reaching exactly its end.
    #[test]
    fn records_sit_at_their_offsets_and_never_cross_a_segment() -> Result<(), StoreError> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::io("tmp", e))?;
        let segment = 8 * 1024;
        let log = log_in(dir.path(), segment)?;
        for i in 0..60 {
            if i % 5 == 0 {
                log.put_messages(batch(3, 150))
                    .map_err(|s| StoreError::Config(format!("{s:?}")))?;
            } else {
                append_test_message(&log, "T", 0, 100 + i * 13);
            }
        }
        let files = log.mapped_file_queue().files();
        assert!(files.len() > 2, "{} segments", files.len());
        let mut last_offset = -1;
        for (k, file) in files.iter().enumerate() {
            let mut pos = 0;
            while pos < file.wrote_position() {
                let rest = file
                    .read_at(pos, file.wrote_position() - pos)
                    .unwrap_or_default();
                if record::peek_magic(rest) == Some(BLANK_MAGIC) {
                    assert_eq!(
                        record::peek_total_size(rest).and_then(|n| usize::try_from(n).ok()),
                        Some(segment - pos),
                        "segment {k}: the BLANK entry reaches the end"
                    );
                    assert!(k + 1 < files.len(), "only a left segment is padded");
                    break;
                }
                let view = record::decode_record_view(rest)
                    .map_err(|e| StoreError::Config(e.to_string()))?;
                let offset = file.file_from_offset() + i64::try_from(pos).unwrap_or(0);
                assert_eq!(view.commit_log_offset, offset);
                assert!(offset > last_offset);
                last_offset = offset;
                pos += view.size();
                assert!(
                    pos + BLANK_ENTRY_LEN <= segment,
                    "segment {k}: room for a BLANK"
                );
            }
        }
        Ok(())
    }

    /// Records placed at a position the segment has moved past are caught before encoding.
    #[test]
    #[should_panic(expected = "appending at 100, but the records were placed at 60")]
    fn an_append_away_from_the_placed_position_is_caught() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let file = MappedFile::create(&dir.path().join("00000000000000000000"), 4096)
            .unwrap_or_else(|e| panic!("create: {e}"));
        let _ = file.append(&[1u8; 100]);
        assert_appending_at(&file, 60);
    }

    /// Records that would leave no room for the closing BLANK entry are caught.
    #[test]
    #[should_panic(expected = "200 bytes of records at 3900 leave no room for a BLANK entry")]
    fn a_record_crossing_the_segment_end_is_caught() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let file = MappedFile::create(&dir.path().join("00000000000000000000"), 4096)
            .unwrap_or_else(|e| panic!("create: {e}"));
        assert_fits_segment(&file, 3900, 200);
    }

    /// Records that encode shorter than their reservation are caught.
    #[test]
    #[should_panic(expected = "records encoded to 90 bytes into a reservation of 100")]
    fn a_record_short_of_its_reservation_is_caught() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let file = MappedFile::create(&dir.path().join("00000000000000000000"), 4096)
            .unwrap_or_else(|e| panic!("create: {e}"));
        assert_fills_reservation(&file, 90, 100);
    }
}
