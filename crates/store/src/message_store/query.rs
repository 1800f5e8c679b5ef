//! Lookups by CommitLog offset, key and time, queue bounds, and the store's statistics.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use comet_protocol::message::properties::keys;
use comet_protocol::message::{MessageExt, record};

use super::MessageStore;

/// Result of [`MessageStore::query_message`].
#[derive(Debug, Clone, Default)]
pub struct QueryMessageResult {
    /// Whole records, newest first.
    pub messages: Vec<Bytes>,
    /// CommitLog offset of each record.
    pub commit_log_offsets: Vec<i64>,
    /// `endPhyOffset` of the index when queried.
    pub index_last_update_phy_offset: i64,
    /// Latest index timestamp known durable.
    pub index_last_update_timestamp: i64,
    pub buffer_total_size: usize,
}

/// A point-in-time copy of [`StoreStats`](super::StoreStats) plus store positions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStatsSnapshot {
    pub put_message_times_total: u64,
    pub put_message_size_total: u64,
    pub put_message_failed_times: u64,
    pub put_message_flush_timeouts: u64,
    pub get_message_times_found: u64,
    pub get_message_times_miss: u64,
    pub get_message_transferred_msg_count: u64,
    pub dispatched_records: u64,
    pub commit_log_min_offset: i64,
    pub commit_log_max_offset: i64,
    pub commit_log_flushed_offset: i64,
    pub dispatch_behind_bytes: i64,
    /// The CommitLog flushes: count, bytes, latency.
    pub flush: crate::flush::FlushStatsSnapshot,
    /// Puts per bucket of [`super::PUT_TIME_BUCKETS_MS`] (not cumulative; the last is unbounded).
    pub put_time_buckets: [u64; super::PUT_TIME_BUCKETS_MS.len() + 1],
    /// The longest put and read so far, in milliseconds.
    pub put_time_max_ms: u64,
    pub get_time_max_ms: u64,
}

impl MessageStore {
    /// The message stored at `commit_log_offset`, decoded (body shares the mapped memory).
    pub fn lookup_message_by_offset(&self, commit_log_offset: i64) -> Option<MessageExt> {
        let bytes = self.commit_log.get_record(commit_log_offset)?;
        record::decode_record(&bytes, false).ok()
    }

    /// The raw `size` bytes at `commit_log_offset` (one record).
    pub fn select_one_message_by_offset(&self, commit_log_offset: i64, size: i32) -> Option<Bytes> {
        self.commit_log.get_message(commit_log_offset, size)
    }

    /// Messages of `topic` indexed under `key` (UNIQ_KEY or a KEYS entry) stored within
    /// `[begin_ts, end_ts]`, newest first, at most `max_num`. Hash collisions are filtered out
    /// by checking each record's topic and keys.
    pub fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin_ts: i64,
        end_ts: i64,
    ) -> QueryMessageResult {
        let mut result = QueryMessageResult {
            index_last_update_timestamp: self.checkpoint.index_msg_timestamp(),
            ..QueryMessageResult::default()
        };
        let Some(index) = &self.index else {
            return result;
        };
        let (offsets, end_phy) = {
            let index = index.read();
            (
                index.query(topic, key, max_num, begin_ts, end_ts),
                index.max_physical_offset(),
            )
        };
        result.index_last_update_phy_offset = end_phy;
        let mut seen = std::collections::HashSet::new();
        for offset in offsets {
            if result.messages.len() >= max_num || !seen.insert(offset) {
                continue;
            }
            let Some(bytes) = self.commit_log.get_record(offset) else {
                continue;
            };
            let Ok(view) = record::decode_record_view(&bytes) else {
                continue;
            };
            let matches_key = view.property(keys::UNIQ_KEY) == Some(key)
                || view
                    .property(keys::KEYS)
                    .is_some_and(|ks| ks.split(' ').any(|k| k == key));
            if view.topic != topic || !matches_key {
                continue;
            }
            result.buffer_total_size += bytes.len();
            result.commit_log_offsets.push(offset);
            result.messages.push(bytes);
        }
        result
    }

    /// First queue offset stored at or after `timestamp_ms` (0 for an unknown queue).
    pub fn get_offset_in_queue_by_time(
        &self,
        topic: &str,
        queue_id: i32,
        timestamp_ms: i64,
    ) -> i64 {
        let Some(queue) = self.queues.find(topic, queue_id) else {
            return 0;
        };
        let cl = &self.commit_log;
        let lookup = |offset: i64, size: i32| cl.pickup_store_timestamp(offset, size);
        queue.read().offset_by_time(timestamp_ms, &lookup)
    }

    /// Min offset of the queue (0 for an unknown queue).
    pub fn get_min_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.queues
            .find(topic, queue_id)
            .map_or(0, |q| q.read().min_offset())
    }

    /// Max offset (next to be written) of the queue (0 for an unknown queue).
    pub fn get_max_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.queues
            .find(topic, queue_id)
            .map_or(0, |q| q.read().max_offset())
    }

    /// CommitLog offset of the message at `queue_offset` (0 if there is none).
    pub fn get_commit_log_offset_in_queue(
        &self,
        topic: &str,
        queue_id: i32,
        queue_offset: i64,
    ) -> i64 {
        self.queues
            .find(topic, queue_id)
            .and_then(|q| q.read().get(queue_offset))
            .map_or(0, |u| u.commit_log_offset)
    }

    /// Store timestamp of the message at `queue_offset` (-1 if there is none).
    pub fn get_message_store_timestamp(
        &self,
        topic: &str,
        queue_id: i32,
        queue_offset: i64,
    ) -> i64 {
        self.queues
            .find(topic, queue_id)
            .and_then(|q| q.read().get(queue_offset))
            .and_then(|u| {
                self.commit_log
                    .pickup_store_timestamp(u.commit_log_offset, u.size)
            })
            .unwrap_or(-1)
    }

    /// Store timestamp of the oldest message of the queue (-1 if there is none).
    pub fn get_earliest_message_time(&self, topic: &str, queue_id: i32) -> i64 {
        let Some(queue) = self.queues.find(topic, queue_id) else {
            return -1;
        };
        let min = queue.read().min_offset();
        self.get_message_store_timestamp(topic, queue_id, min)
    }

    /// Store time of the oldest message kept (the first record of the CommitLog), or -1 when
    /// the CommitLog is empty or its first record cannot be read.
    pub fn earliest_message_time(&self) -> i64 {
        self.lookup_message_by_offset(self.commit_log.min_offset())
            .map_or(-1, |m| m.store_timestamp)
    }

    /// Counters and positions.
    pub fn stats(&self) -> StoreStatsSnapshot {
        let s = &self.stats;
        StoreStatsSnapshot {
            put_message_times_total: s.put_message_times_total.load(Ordering::Relaxed),
            put_message_size_total: s.put_message_size_total.load(Ordering::Relaxed),
            put_message_failed_times: s.put_message_failed_times.load(Ordering::Relaxed),
            put_message_flush_timeouts: s.put_message_flush_timeouts.load(Ordering::Relaxed),
            get_message_times_found: s.get_message_times_found.load(Ordering::Relaxed),
            get_message_times_miss: s.get_message_times_miss.load(Ordering::Relaxed),
            get_message_transferred_msg_count: s
                .get_message_transferred_msg_count
                .load(Ordering::Relaxed),
            dispatched_records: self.reput.dispatched_records(),
            commit_log_min_offset: self.commit_log.min_offset(),
            commit_log_max_offset: self.commit_log.max_offset(),
            commit_log_flushed_offset: self.commit_log.flushed_where(),
            dispatch_behind_bytes: self.reput.behind(),
            flush: self.flusher.stats(),
            put_time_buckets: std::array::from_fn(|i| {
                s.put_time_buckets[i].load(Ordering::Relaxed)
            }),
            put_time_max_ms: s.put_time_max_ms.load(Ordering::Relaxed),
            get_time_max_ms: s.get_time_max_ms.load(Ordering::Relaxed),
        }
    }
}
