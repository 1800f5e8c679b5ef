//! `ProcessQueue`: the consumer-side snapshot of one MessageQueue.
//!
//! Pulled messages wait here, keyed by queue offset, until the listener has handled them. The map
//! is what makes offset commits safe with concurrent consumption: the committed offset is always
//! the smallest offset still cached (or one past the largest ever cached once empty), so a crash
//! never skips an unfinished message. It also carries the numbers flow control looks at (count,
//! bytes, offset span) and the flags rebalance and orderly consumption coordinate through
//! (dropped, locked, consuming).
//!
//! Orderly consumption moves a batch into a second map (`consuming_msg_orderly_tree_map`) while
//! the listener runs, so the batch can be committed (removed for good) or rolled back (returned)
//! as a unit.
//!
//! What the map holds per offset depends on who needs the message (`Cached`). Orderly
//! consumption takes its batches out of the map, so the map holds the messages themselves. With
//! concurrent consumption the pulled messages go straight into consume batches; Java's tree and
//! its batches share one object, and here the map shares the batch (an `Arc`) once its listener
//! call starts — the only time the expiry sweep may need a message back — instead of holding a
//! second copy of every message (that copy and its drop were a fifth of a push consumer's CPU).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use comet_protocol::body::ProcessQueueInfo;
use comet_protocol::message::properties::keys;
use parking_lot::Mutex;

use crate::consumer::{MessageExt, duration_millis, now_millis};

/// Validity of a broker lock as seen by the client (`rocketmq.client.rebalance.lockMaxLiveTime`).
pub const REBALANCE_LOCK_MAX_LIVE_TIME: Duration = Duration::from_millis(30_000);
/// Period of LOCK_BATCH_MQ for orderly consumers (`rocketmq.client.rebalance.lockInterval`).
pub const REBALANCE_LOCK_INTERVAL: Duration = Duration::from_millis(20_000);
/// A queue not pulled for this long is considered abandoned and dropped by rebalance
/// (`rocketmq.client.pull.pullMaxIdleTime`).
pub const PULL_MAX_IDLE_TIME: Duration = Duration::from_millis(120_000);
/// Most stuck messages cleaned per queue per sweep (Java's loop bound in `cleanExpiredMsg`).
pub const CLEAN_EXPIRED_MAX_PER_SWEEP: usize = 16;

/// One cached offset.
#[derive(Debug)]
enum Cached {
    /// The message itself ([`ProcessQueue::put_message`]; orderly consumption takes it from here).
    Held(Box<MessageExt>),
    /// Concurrent consumption ([`ProcessQueue::track_messages`]): the message travels in its
    /// consume batch; the cache keeps its body size and, once the batch's listener call started,
    /// the batch and the start time for the expiry sweep.
    Tracked {
        body_len: i64,
        started: Option<Started>,
    },
}

/// A concurrent batch whose listener call is running.
#[derive(Debug)]
struct Started {
    /// Epoch milliseconds the listener call started.
    at: i64,
    batch: Arc<Vec<MessageExt>>,
    /// Index of this offset's message in `batch`.
    index: usize,
}

impl Cached {
    fn body_len(&self) -> i64 {
        match self {
            Cached::Held(msg) => body_len(msg),
            Cached::Tracked { body_len, .. } => *body_len,
        }
    }

    /// When consumption started (the `CONSUME_START_TIME` stamp of a held message).
    fn consume_start(&self) -> Option<i64> {
        match self {
            Cached::Held(msg) => msg
                .properties
                .get(keys::CONSUME_START_TIMESTAMP)
                .and_then(|v| v.parse::<i64>().ok()),
            Cached::Tracked { started, .. } => started.as_ref().map(|s| s.at),
        }
    }

    /// The message, if the cache can produce it (a tracked one only while its batch runs).
    fn message(&self) -> Option<&MessageExt> {
        match self {
            Cached::Held(msg) => Some(msg),
            Cached::Tracked { started, .. } => started.as_ref().and_then(|s| s.batch.get(s.index)),
        }
    }
}

#[derive(Debug, Default)]
struct Cache {
    /// offset → message not yet consumed (and, for orderly, not taken).
    msg_tree_map: BTreeMap<i64, Cached>,
    /// Orderly only: the batch the listener is working on.
    consuming_msg_orderly_tree_map: BTreeMap<i64, MessageExt>,
    /// Messages cached in both maps.
    msg_count: i64,
    /// Body bytes cached in both maps.
    msg_size: i64,
    /// Largest offset ever put.
    queue_offset_max: i64,
    /// Whether a consume task is currently assigned to this queue (orderly / dispatch gate).
    consuming: bool,
    /// Messages the broker has beyond the last pulled one (for running info).
    msg_acc_cnt: i64,
}

/// Consumer-side state of one MessageQueue.
#[derive(Debug)]
pub struct ProcessQueue {
    cache: Mutex<Cache>,
    /// Held by the orderly consume task while the listener runs; rebalance takes it before
    /// giving the queue up so that a batch is never half consumed by two members.
    consume_lock: tokio::sync::Mutex<()>,
    dropped: AtomicBool,
    locked: AtomicBool,
    last_pull_timestamp: AtomicI64,
    last_consume_timestamp: AtomicI64,
    last_lock_timestamp: AtomicI64,
    try_unlock_times: AtomicI64,
}

impl Default for ProcessQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcessQueue {
    /// An empty process queue, its timestamps set to now.
    pub fn new() -> Self {
        let now = now_millis();
        ProcessQueue {
            cache: Mutex::new(Cache::default()),
            consume_lock: tokio::sync::Mutex::new(()),
            dropped: AtomicBool::new(false),
            locked: AtomicBool::new(false),
            last_pull_timestamp: AtomicI64::new(now),
            last_consume_timestamp: AtomicI64::new(now),
            last_lock_timestamp: AtomicI64::new(now),
            try_unlock_times: AtomicI64::new(0),
        }
    }

    /// Caches pulled messages (copies: orderly consumption takes them from here). Returns
    /// whether the caller should dispatch a consume task (i.e. there is something to consume and
    /// no task is assigned yet — orderly relies on this).
    pub fn put_message(&self, msgs: &[MessageExt]) -> bool {
        self.put(msgs, |msg| Cached::Held(Box::new(msg.clone())))
    }

    /// Concurrent consumption: records pulled messages by offset and size without copying them
    /// (they travel in their consume batches; see [`ProcessQueue::mark_consume_start`]). Returns
    /// what [`ProcessQueue::put_message`] returns.
    pub fn track_messages(&self, msgs: &[MessageExt]) -> bool {
        self.put(msgs, |msg| Cached::Tracked {
            body_len: body_len(msg),
            started: None,
        })
    }

    fn put(&self, msgs: &[MessageExt], cached: impl Fn(&MessageExt) -> Cached) -> bool {
        let mut cache = self.cache.lock();
        let mut valid = 0;
        for msg in msgs {
            if cache.msg_tree_map.contains_key(&msg.queue_offset) {
                continue;
            }
            valid += 1;
            cache.queue_offset_max = msg.queue_offset;
            cache.msg_size += body_len(msg);
            cache.msg_tree_map.insert(msg.queue_offset, cached(msg));
        }
        cache.msg_count += valid;
        let mut dispatch = false;
        if !cache.msg_tree_map.is_empty() && !cache.consuming {
            dispatch = true;
            cache.consuming = true;
        }
        if let Some(last) = msgs.last() {
            let max = last
                .properties
                .get(keys::MAX_OFFSET)
                .and_then(|v| v.parse::<i64>().ok());
            if let Some(max) = max {
                let acc = max - last.queue_offset;
                if acc > 0 {
                    cache.msg_acc_cnt = acc;
                }
            }
        }
        dispatch
    }

    /// Removes consumed messages and returns the offset to commit: the smallest offset still
    /// cached, or one past the largest ever cached when nothing is left; -1 when the queue held
    /// nothing to begin with.
    pub fn remove_message(&self, msgs: &[MessageExt]) -> i64 {
        let mut cache = self.cache.lock();
        self.last_consume_timestamp
            .store(now_millis(), Ordering::Relaxed);
        if cache.msg_tree_map.is_empty() {
            return -1;
        }
        let mut result = cache.queue_offset_max + 1;
        let mut removed = 0;
        for msg in msgs {
            if let Some(prev) = cache.msg_tree_map.remove(&msg.queue_offset) {
                removed += 1;
                cache.msg_size -= prev.body_len();
            }
        }
        cache.msg_count -= removed;
        if let Some((first, _)) = cache.msg_tree_map.first_key_value() {
            result = *first;
        }
        result
    }

    /// Highest minus lowest cached offset (0 when empty): how far concurrent consumption has
    /// let the head fall behind the tail.
    pub fn max_span(&self) -> i64 {
        let cache = self.cache.lock();
        match (
            cache.msg_tree_map.first_key_value(),
            cache.msg_tree_map.last_key_value(),
        ) {
            (Some((first, _)), Some((last, _))) => last - first,
            _ => 0,
        }
    }

    /// Messages cached (including an orderly batch in progress).
    pub fn msg_count(&self) -> i64 {
        self.cache.lock().msg_count
    }

    /// Body bytes cached.
    pub fn msg_size(&self) -> i64 {
        self.cache.lock().msg_size
    }

    /// Smallest and largest cached offsets.
    pub fn offset_range(&self) -> Option<(i64, i64)> {
        let cache = self.cache.lock();
        Some((
            *cache.msg_tree_map.first_key_value()?.0,
            *cache.msg_tree_map.last_key_value()?.0,
        ))
    }

    /// Messages the broker holds beyond what was pulled (as of the last pull).
    pub fn msg_acc_cnt(&self) -> i64 {
        self.cache.lock().msg_acc_cnt
    }

    /// Orderly: moves up to `batch_size` messages, lowest offsets first, into the consuming map.
    /// An empty result clears the `consuming` flag so the next pull dispatches a new task.
    pub fn take_messages(&self, batch_size: usize) -> Vec<MessageExt> {
        let mut cache = self.cache.lock();
        self.last_consume_timestamp
            .store(now_millis(), Ordering::Relaxed);
        let mut result = Vec::with_capacity(batch_size.min(cache.msg_tree_map.len()));
        while result.len() < batch_size {
            let Some((offset, cached)) = cache.msg_tree_map.pop_first() else {
                break;
            };
            let Cached::Held(msg) = cached else {
                // Orderly consumers only ever hold messages; a tracked entry has nothing to hand
                // out, so it is put back and the batch ends before it.
                cache.msg_tree_map.insert(offset, cached);
                break;
            };
            cache
                .consuming_msg_orderly_tree_map
                .insert(offset, (*msg).clone());
            result.push(*msg);
        }
        if result.is_empty() {
            cache.consuming = false;
        }
        result
    }

    /// Orderly: the taken batch is done. Returns the offset to commit (one past the batch's
    /// last offset), or -1 when nothing was taken.
    pub fn commit(&self) -> i64 {
        let mut cache = self.cache.lock();
        let consuming = std::mem::take(&mut cache.consuming_msg_orderly_tree_map);
        let Some((last, _)) = consuming.last_key_value() else {
            return -1;
        };
        let last = *last;
        cache.msg_count -= i64::try_from(consuming.len()).unwrap_or(i64::MAX);
        cache.msg_size -= consuming.values().map(body_len).sum::<i64>();
        last + 1
    }

    /// Orderly: returns the whole taken batch to the cache, to be taken again.
    pub fn rollback(&self) {
        let mut cache = self.cache.lock();
        let consuming = std::mem::take(&mut cache.consuming_msg_orderly_tree_map);
        cache.msg_tree_map.extend(
            consuming
                .into_iter()
                .map(|(offset, msg)| (offset, Cached::Held(Box::new(msg)))),
        );
    }

    /// Orderly: returns `msgs` (with their updated reconsume times) from the taken batch to the
    /// cache so they are consumed again.
    pub fn make_message_to_consume_again(&self, msgs: &[MessageExt]) {
        let mut cache = self.cache.lock();
        for msg in msgs {
            cache
                .consuming_msg_orderly_tree_map
                .remove(&msg.queue_offset);
            cache
                .msg_tree_map
                .insert(msg.queue_offset, Cached::Held(Box::new(msg.clone())));
        }
    }

    /// Whether messages are cached (waiting or in an orderly batch).
    pub fn has_temp_message(&self) -> bool {
        let cache = self.cache.lock();
        !cache.msg_tree_map.is_empty() || !cache.consuming_msg_orderly_tree_map.is_empty()
    }

    /// Drops every cached message (used when the queue is given up).
    pub fn clear(&self) {
        let mut cache = self.cache.lock();
        cache.msg_tree_map.clear();
        cache.consuming_msg_orderly_tree_map.clear();
        cache.msg_count = 0;
        cache.msg_size = 0;
        cache.queue_offset_max = 0;
    }

    /// Concurrent consumption: the cached messages whose consumption started more than
    /// `consume_timeout` ago, lowest offset first, at most [`CLEAN_EXPIRED_MAX_PER_SWEEP`]. Only
    /// the head of the queue is examined, as in Java: a stuck head is what blocks the commit.
    pub fn expired_head_messages(&self, consume_timeout: Duration) -> Vec<MessageExt> {
        let now = now_millis();
        let limit = duration_millis(consume_timeout);
        let cache = self.cache.lock();
        cache
            .msg_tree_map
            .values()
            .take(CLEAN_EXPIRED_MAX_PER_SWEEP)
            .take_while(|cached| {
                cached
                    .consume_start()
                    .is_some_and(|start| now - start > limit)
            })
            .map_while(Cached::message)
            .cloned()
            .collect()
    }

    /// The listener call of `batch` starts at `millis` (`stamp` is the same time as text, the
    /// batch's `CONSUME_START_TIME`): held copies get the stamp, tracked entries the batch
    /// itself, so that the expiry sweep sees when their consumption started and can send a stuck
    /// message back.
    pub fn mark_consume_start(&self, batch: &Arc<Vec<MessageExt>>, millis: i64, stamp: &str) {
        let mut cache = self.cache.lock();
        for (index, msg) in batch.iter().enumerate() {
            match cache.msg_tree_map.get_mut(&msg.queue_offset) {
                Some(Cached::Held(cached)) => {
                    cached
                        .properties
                        .insert(keys::CONSUME_START_TIMESTAMP, stamp);
                }
                Some(Cached::Tracked { started, .. }) => {
                    *started = Some(Started {
                        at: millis,
                        batch: Arc::clone(batch),
                        index,
                    });
                }
                None => {}
            }
        }
    }

    /// Whether `offset` is still the lowest cached offset.
    pub fn is_head(&self, offset: i64) -> bool {
        self.cache
            .lock()
            .msg_tree_map
            .first_key_value()
            .is_some_and(|(first, _)| *first == offset)
    }

    /// Whether the queue was taken from this consumer (its cached messages are to be dropped).
    pub fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }

    /// Marks the queue dropped (or not).
    pub fn set_dropped(&self, dropped: bool) {
        self.dropped.store(dropped, Ordering::Release);
    }

    /// Whether this consumer holds the queue's broker lock (orderly consumption).
    pub fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Acquire)
    }

    /// Records whether the broker lock is held.
    pub fn set_locked(&self, locked: bool) {
        self.locked.store(locked, Ordering::Release);
    }

    /// Whether the client-side view of the broker lock is too old to trust.
    pub fn is_lock_expired(&self) -> bool {
        self.is_lock_expired_after(REBALANCE_LOCK_MAX_LIVE_TIME)
    }

    /// Whether the broker lock was last taken or renewed longer than `max_live` ago.
    pub fn is_lock_expired_after(&self, max_live: Duration) -> bool {
        now_millis() - self.last_lock_timestamp.load(Ordering::Relaxed) > duration_millis(max_live)
    }

    /// Whether nobody pulled this queue for [`PULL_MAX_IDLE_TIME`].
    pub fn is_pull_expired(&self) -> bool {
        self.is_pull_expired_after(PULL_MAX_IDLE_TIME)
    }

    /// Whether nobody pulled this queue for longer than `max_idle`.
    pub fn is_pull_expired_after(&self, max_idle: Duration) -> bool {
        now_millis() - self.last_pull_timestamp.load(Ordering::Relaxed) > duration_millis(max_idle)
    }

    /// When the queue was last pulled (epoch ms).
    pub fn last_pull_timestamp(&self) -> i64 {
        self.last_pull_timestamp.load(Ordering::Relaxed)
    }

    /// Records when the queue was last pulled (epoch ms).
    pub fn set_last_pull_timestamp(&self, millis: i64) {
        self.last_pull_timestamp.store(millis, Ordering::Relaxed);
    }

    /// When a batch of the queue was last consumed (epoch ms).
    pub fn last_consume_timestamp(&self) -> i64 {
        self.last_consume_timestamp.load(Ordering::Relaxed)
    }

    /// When the broker lock was last taken or renewed (epoch ms).
    pub fn last_lock_timestamp(&self) -> i64 {
        self.last_lock_timestamp.load(Ordering::Relaxed)
    }

    /// Records when the broker lock was last taken or renewed (epoch ms).
    pub fn set_last_lock_timestamp(&self, millis: i64) {
        self.last_lock_timestamp.store(millis, Ordering::Relaxed);
    }

    /// Counts one more attempt to unlock the queue, returning the new count.
    pub fn inc_try_unlock_times(&self) -> i64 {
        self.try_unlock_times.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Attempts made to unlock the queue.
    pub fn try_unlock_times(&self) -> i64 {
        self.try_unlock_times.load(Ordering::Relaxed)
    }

    /// Whether a consume task is assigned (orderly).
    pub fn is_consuming(&self) -> bool {
        self.cache.lock().consuming
    }

    /// The lock an orderly consume task holds while its listener runs.
    pub fn consume_lock(&self) -> &tokio::sync::Mutex<()> {
        &self.consume_lock
    }

    /// The queue's state for running info (Java `fillProcessQueueInfo`); the caller sets
    /// `commit_offset` from the offset store.
    pub fn info(&self) -> ProcessQueueInfo {
        let cache = self.cache.lock();
        let mut info = ProcessQueueInfo::default();
        if let (Some((min, _)), Some((max, _))) = (
            cache.msg_tree_map.first_key_value(),
            cache.msg_tree_map.last_key_value(),
        ) {
            info.cached_msg_min_offset = *min;
            info.cached_msg_max_offset = *max;
            info.cached_msg_count = i32::try_from(cache.msg_tree_map.len()).unwrap_or(i32::MAX);
        }
        info.cached_msg_size_in_mib =
            i32::try_from(cache.msg_size / (1024 * 1024)).unwrap_or(i32::MAX);
        let consuming = &cache.consuming_msg_orderly_tree_map;
        if let (Some((min, _)), Some((max, _))) =
            (consuming.first_key_value(), consuming.last_key_value())
        {
            info.transaction_msg_min_offset = *min;
            info.transaction_msg_max_offset = *max;
            info.transaction_msg_count = i32::try_from(consuming.len()).unwrap_or(i32::MAX);
        }
        drop(cache);
        info.locked = self.is_locked();
        info.try_unlock_times = self.try_unlock_times();
        info.last_lock_timestamp = self.last_lock_timestamp();
        info.droped = self.is_dropped();
        info.last_pull_timestamp = self.last_pull_timestamp();
        info.last_consume_timestamp = self.last_consume_timestamp();
        info
    }
}

fn body_len(msg: &MessageExt) -> i64 {
    i64::try_from(msg.body.len()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn msg(offset: i64, body: &str) -> MessageExt {
        let mut m = MessageExt::new("T", Bytes::copy_from_slice(body.as_bytes()));
        m.queue_offset = offset;
        m
    }

    #[test]
    fn remove_returns_the_lowest_unfinished_offset() {
        let pq = ProcessQueue::new();
        let msgs: Vec<_> = (10..15).map(|o| msg(o, "ab")).collect();
        assert!(pq.put_message(&msgs));
        assert_eq!(pq.msg_count(), 5);
        assert_eq!(pq.msg_size(), 10);
        assert_eq!(pq.max_span(), 4);
        // Finishing 11 and 12 out of order leaves 10 as the commit point.
        assert_eq!(pq.remove_message(&msgs[1..3]), 10);
        assert_eq!(pq.remove_message(&msgs[0..1]), 13);
        assert_eq!(pq.remove_message(&msgs[3..5]), 15);
        assert_eq!(pq.msg_count(), 0);
        assert_eq!(pq.msg_size(), 0);
        assert_eq!(pq.remove_message(&msgs), -1);
    }

    #[test]
    fn duplicates_are_cached_once_and_dispatch_only_when_idle() {
        let pq = ProcessQueue::new();
        assert!(pq.put_message(&[msg(1, "a")]));
        // Already consuming: no second dispatch.
        assert!(!pq.put_message(&[msg(1, "a"), msg(2, "b")]));
        assert_eq!(pq.msg_count(), 2);
    }

    #[test]
    fn orderly_take_commit_and_rollback() {
        let pq = ProcessQueue::new();
        pq.put_message(&(0..5).map(|o| msg(o, "x")).collect::<Vec<_>>());
        let batch = pq.take_messages(2);
        assert_eq!(
            batch.iter().map(|m| m.queue_offset).collect::<Vec<_>>(),
            vec![0, 1]
        );
        pq.rollback();
        let batch = pq.take_messages(3);
        assert_eq!(
            batch.iter().map(|m| m.queue_offset).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert_eq!(pq.commit(), 3);
        assert_eq!(pq.msg_count(), 2);
        let batch = pq.take_messages(1);
        pq.make_message_to_consume_again(&batch);
        assert_eq!(pq.take_messages(10).len(), 2);
        assert_eq!(pq.commit(), 5);
        assert_eq!(pq.commit(), -1);
        assert!(pq.take_messages(1).is_empty());
        assert!(!pq.is_consuming());
        assert!(pq.put_message(&[msg(5, "y")]));
    }

    #[test]
    fn tracked_messages_are_counted_and_shared_with_their_running_batch() {
        let pq = ProcessQueue::new();
        let msgs: Vec<_> = (20..24).map(|o| msg(o, "abc")).collect();
        assert!(pq.track_messages(&msgs));
        assert_eq!(pq.msg_count(), 4);
        assert_eq!(pq.msg_size(), 12);
        // Nothing started yet: nothing can be expired.
        assert!(pq.expired_head_messages(Duration::ZERO).is_empty());

        let old = now_millis() - 60_000;
        let head = Arc::new(msgs.get(..2).unwrap_or_default().to_vec());
        pq.mark_consume_start(&head, old, &old.to_string());
        let expired = pq.expired_head_messages(Duration::from_secs(30));
        assert_eq!(
            expired.iter().map(|m| m.queue_offset).collect::<Vec<_>>(),
            vec![20, 21],
            "the running head batch is handed back from the batch itself"
        );
        let fresh = Arc::new(msgs.get(2..).unwrap_or_default().to_vec());
        pq.mark_consume_start(&fresh, now_millis(), "0");
        assert_eq!(pq.expired_head_messages(Duration::from_secs(30)).len(), 2);

        // Commits follow the lowest unfinished offset, as for held messages.
        assert_eq!(pq.remove_message(&fresh), 20);
        assert_eq!(pq.remove_message(&head), 24);
        assert_eq!(pq.msg_count(), 0);
        assert_eq!(pq.msg_size(), 0);
    }

    #[test]
    fn expired_head_messages_only_takes_the_stuck_head() {
        let pq = ProcessQueue::new();
        let mut old = msg(0, "a");
        old.properties.insert(
            keys::CONSUME_START_TIMESTAMP,
            (now_millis() - 60_000).to_string(),
        );
        let mut fresh = msg(1, "b");
        fresh
            .properties
            .insert(keys::CONSUME_START_TIMESTAMP, now_millis().to_string());
        let mut old_behind = msg(2, "c");
        old_behind.properties.insert(
            keys::CONSUME_START_TIMESTAMP,
            (now_millis() - 60_000).to_string(),
        );
        pq.put_message(&[old, fresh, old_behind]);
        let expired = pq.expired_head_messages(Duration::from_secs(30));
        assert_eq!(
            expired.iter().map(|m| m.queue_offset).collect::<Vec<_>>(),
            vec![0]
        );
        assert!(pq.is_head(0));
        assert!(!pq.is_head(1));
    }
}
