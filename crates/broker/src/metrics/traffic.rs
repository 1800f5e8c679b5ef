//! Message traffic recorded on the send and pull paths: messages and bytes in per topic and
//! message type (with the message-size histogram), messages and bytes out per topic and consumer
//! group, messages sent to a DLQ, and transaction outcomes.
//!
//! Recording costs a send one look-up and a few relaxed atomic adds. The look-up goes through a
//! per-thread cache of the shared table, so a send touches no lock once its topic has been seen
//! on that thread; the shared table is locked only the first time a thread meets a topic. The
//! broker records whether or not its metrics endpoint is on: the admin statistics
//! (VIEW_BROKER_STATS_DATA, see [`super::windows`]) are sampled from these counters.
//!
//! The tables are bounded ([`MAX_SERIES`] label sets each): traffic of label sets beyond the
//! bound is counted in [`TrafficMetrics::dropped`] instead, so a client inventing topic names
//! cannot grow the broker's memory without limit.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use comet_protocol::message::Properties;
use comet_protocol::message::properties::keys;
use comet_protocol::naming::is_retry_or_dlq;

use super::table::BoundedTable;

/// Most label sets each table keeps.
pub const MAX_SERIES: usize = 50_000;
/// Upper bounds of the message-size histogram's buckets, in bytes (Apache's: 1 KiB, 4 KiB,
/// 512 KiB, 1 MiB, 2 MiB, 4 MiB; the last bucket is +Inf).
pub const MESSAGE_SIZE_BUCKETS_BYTES: [u64; 6] = [
    1024,
    4 * 1024,
    512 * 1024,
    1024 * 1024,
    2 * 1024 * 1024,
    4 * 1024 * 1024,
];

/// Upper bounds of the transaction finish-latency buckets, in milliseconds (Apache's: 5 s,
/// 1 min, 10 min, 1 h, 12 h, 24 h; the last bucket is +Inf).
pub const FINISH_LATENCY_BUCKETS_MS: [u64; 6] =
    [5_000, 60_000, 600_000, 3_600_000, 43_200_000, 86_400_000];

/// Time from a half message's birth to its transaction's end: counts per bucket of
/// [`FINISH_LATENCY_BUCKETS_MS`] (not cumulative; the last is +Inf), count and sum.
#[derive(Debug, Default)]
pub struct FinishLatency {
    pub buckets: [AtomicU64; 7],
    pub count: AtomicU64,
    pub sum_ms: AtomicU64,
}

/// The 4.x timed-delivery property (`__STARTDELIVERTIME`), which Apache counts as a delay.
const START_DELIVER_TIME: &str = "__STARTDELIVERTIME";

/// The `message_type` label: how a producer asked for the message to be delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MessageType {
    Normal,
    Fifo,
    Delay,
    Transaction,
}

impl MessageType {
    pub const ALL: [MessageType; 4] = [
        MessageType::Normal,
        MessageType::Fifo,
        MessageType::Delay,
        MessageType::Transaction,
    ];

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            MessageType::Normal => "normal",
            MessageType::Fifo => "fifo",
            MessageType::Delay => "delay",
            MessageType::Transaction => "transaction",
        }
    }

    /// The type of a sent message from its properties, as Apache classifies it: a prepared
    /// transaction half, else a message with a sharding key (FIFO), else one with a delay level or
    /// a timer property, else normal.
    pub fn of(properties: &Properties) -> MessageType {
        if properties
            .get(keys::TRANSACTION_PREPARED)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            MessageType::Transaction
        } else if properties.get(keys::SHARDING_KEY).is_some() {
            MessageType::Fifo
        } else if [
            START_DELIVER_TIME,
            keys::DELAY_TIME_LEVEL,
            keys::TIMER_DELIVER_MS,
            keys::TIMER_DELAY_SEC,
            keys::TIMER_DELAY_MS,
        ]
        .iter()
        .any(|k| properties.get(k).is_some())
        {
            MessageType::Delay
        } else {
            MessageType::Normal
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Messages and bytes, with the size histogram, of one label set.
#[derive(Debug, Default)]
pub struct Flow {
    pub messages: AtomicU64,
    pub bytes: AtomicU64,
    /// Per bucket of [`MESSAGE_SIZE_BUCKETS_BYTES`], plus +Inf; not cumulative.
    pub size_buckets: [AtomicU64; 7],
    pub size_count: AtomicU64,
    pub size_sum: AtomicU64,
}

/// One topic's inbound flows, by message type.
#[derive(Debug, Default)]
pub struct TopicIn {
    pub by_type: [Flow; 4],
}

/// Per-thread caches of [`TopicIn`] counters by topic, one per recorder (several brokers in one
/// process, as in tests, keep separate caches).
type InCache = HashMap<u64, HashMap<String, Arc<TopicIn>>>;

thread_local! {
    static IN_CACHE: RefCell<InCache> = RefCell::new(HashMap::new());
}

/// Most entries a thread's cache keeps before it is emptied.
const MAX_CACHED: usize = 4096;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The broker's traffic counters.
pub struct TrafficMetrics {
    enabled: bool,
    id: u64,
    inbound: BoundedTable<String, TopicIn>,
    outbound: BoundedTable<(String, String), Flow>,
    dlq: BoundedTable<(String, String), AtomicU64>,
    commits: BoundedTable<String, AtomicU64>,
    rollbacks: BoundedTable<String, AtomicU64>,
    /// Timer messages parked, and delivered to their real topic, by real topic.
    timer_enqueued: BoundedTable<String, AtomicU64>,
    timer_dequeued: BoundedTable<String, AtomicU64>,
    /// Half messages stored and not yet committed or rolled back, by real topic, since start.
    half: BoundedTable<String, AtomicI64>,
    finish: BoundedTable<String, FinishLatency>,
    /// Traffic not recorded because a table was full.
    pub dropped: AtomicU64,
}

impl std::fmt::Debug for TrafficMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrafficMetrics")
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

fn add(flow: &Flow, messages: u64, bytes: u64, size_each: u64) {
    flow.messages.fetch_add(messages, Ordering::Relaxed);
    flow.bytes.fetch_add(bytes, Ordering::Relaxed);
    let bucket = MESSAGE_SIZE_BUCKETS_BYTES
        .iter()
        .position(|b| size_each <= *b)
        .unwrap_or(MESSAGE_SIZE_BUCKETS_BYTES.len());
    flow.size_buckets[bucket].fetch_add(1, Ordering::Relaxed);
    flow.size_count.fetch_add(1, Ordering::Relaxed);
    flow.size_sum.fetch_add(size_each, Ordering::Relaxed);
}

impl TrafficMetrics {
    /// Counters that record when `enabled` (the metrics endpoint is on) and ignore every call
    /// otherwise.
    pub fn new(enabled: bool) -> Self {
        TrafficMetrics {
            enabled,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            inbound: BoundedTable::new(MAX_SERIES),
            outbound: BoundedTable::new(MAX_SERIES),
            dlq: BoundedTable::new(MAX_SERIES),
            commits: BoundedTable::new(MAX_SERIES),
            rollbacks: BoundedTable::new(MAX_SERIES),
            half: BoundedTable::new(MAX_SERIES),
            finish: BoundedTable::new(MAX_SERIES),
            timer_enqueued: BoundedTable::new(MAX_SERIES),
            timer_dequeued: BoundedTable::new(MAX_SERIES),
            dropped: AtomicU64::new(0),
        }
    }

    fn drop_one(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Calls `f` with `topic`'s inbound counters, found through this thread's cache (no lock and
    /// no reference-count traffic once the thread has seen the topic); `None` when the table is
    /// full.
    fn with_topic_in<R>(&self, topic: &str, f: impl FnOnce(&TopicIn) -> R) -> Option<R> {
        IN_CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            let mine = cache.entry(self.id).or_default();
            if let Some(v) = mine.get(topic) {
                return Some(f(v));
            }
            let v = self.inbound.get_or_insert(&topic.to_owned())?;
            if mine.len() >= MAX_CACHED {
                mine.clear();
            }
            let result = f(&v);
            mine.insert(topic.to_owned(), v);
            Some(result)
        })
    }

    /// A stored send: `messages` records of `bytes` in all. Retry and DLQ topics are not
    /// counted (their messages were counted when first sent).
    pub fn record_in(&self, topic: &str, kind: MessageType, messages: usize, bytes: usize) {
        if !self.enabled || messages == 0 || is_retry_or_dlq(topic) {
            return;
        }
        let (messages, bytes) = (messages as u64, bytes as u64);
        let recorded = self.with_topic_in(topic, |counters| {
            add(
                &counters.by_type[kind.index()],
                messages,
                bytes,
                bytes / messages,
            );
        });
        if recorded.is_none() {
            self.drop_one();
        }
    }

    /// A put answered by the store: counted when it stored something.
    pub fn record_put(
        &self,
        topic: &str,
        kind: MessageType,
        result: &comet_store::PutMessageResult,
    ) {
        if let Some(append) = result
            .append
            .as_ref()
            .filter(|_| result.status.is_written())
        {
            self.record_in(topic, kind, append.msg_num, append.wrote_bytes);
            if kind == MessageType::Transaction && self.enabled {
                match self.half.get_or_insert(&topic.to_owned()) {
                    Some(n) => {
                        n.fetch_add(append.msg_num as i64, Ordering::Relaxed);
                    }
                    None => self.drop_one(),
                }
            }
        }
    }

    /// A pull that returned `messages` records of `bytes` in all to `group`.
    pub fn record_out(&self, topic: &str, group: &str, messages: usize, bytes: usize) {
        if !self.enabled || messages == 0 || is_retry_or_dlq(topic) {
            return;
        }
        let Some(flow) = self
            .outbound
            .get_or_insert(&(topic.to_owned(), group.to_owned()))
        else {
            return self.drop_one();
        };
        flow.messages.fetch_add(messages as u64, Ordering::Relaxed);
        flow.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        // Pulls that returned messages, for the per-pull average of the stats windows.
        flow.size_count.fetch_add(1, Ordering::Relaxed);
    }

    /// A message of `group`, first sent to `topic`, moved to the group's DLQ.
    pub fn record_dlq(&self, group: &str, topic: &str) {
        if !self.enabled {
            return;
        }
        match self
            .dlq
            .get_or_insert(&(group.to_owned(), topic.to_owned()))
        {
            Some(n) => {
                n.fetch_add(1, Ordering::Relaxed);
            }
            None => self.drop_one(),
        }
    }

    /// A transaction of `topic` ended: committed or rolled back, `took_ms` after its half
    /// message was born.
    pub fn record_end_transaction(&self, topic: &str, committed: bool, took_ms: u64) {
        if !self.enabled {
            return;
        }
        if let Some(n) = self.half.get_or_insert(&topic.to_owned()) {
            n.fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(h) = self.finish.get_or_insert(&topic.to_owned()) {
            let bucket = FINISH_LATENCY_BUCKETS_MS
                .iter()
                .position(|b| took_ms <= *b)
                .unwrap_or(FINISH_LATENCY_BUCKETS_MS.len());
            h.buckets[bucket].fetch_add(1, Ordering::Relaxed);
            h.count.fetch_add(1, Ordering::Relaxed);
            h.sum_ms.fetch_add(took_ms, Ordering::Relaxed);
        }
        let table = if committed {
            &self.commits
        } else {
            &self.rollbacks
        };
        match table.get_or_insert(&topic.to_owned()) {
            Some(n) => {
                n.fetch_add(1, Ordering::Relaxed);
            }
            None => self.drop_one(),
        }
    }

    pub fn inbound(&self) -> Vec<(String, Arc<TopicIn>)> {
        self.inbound.snapshot()
    }

    pub fn outbound(&self) -> Vec<((String, String), Arc<Flow>)> {
        self.outbound.snapshot()
    }

    pub fn dlq(&self) -> Vec<((String, String), Arc<AtomicU64>)> {
        self.dlq.snapshot()
    }

    pub fn commits(&self) -> Vec<(String, Arc<AtomicU64>)> {
        self.commits.snapshot()
    }

    /// A timer message of `topic` was parked (`delivered` false) or delivered to it.
    pub fn record_timer(&self, topic: &str, delivered: bool) {
        if !self.enabled {
            return;
        }
        let table = if delivered {
            &self.timer_dequeued
        } else {
            &self.timer_enqueued
        };
        match table.get_or_insert(&topic.to_owned()) {
            Some(n) => {
                n.fetch_add(1, Ordering::Relaxed);
            }
            None => self.drop_one(),
        }
    }

    /// Timer messages parked and delivered, by real topic: `(topic, parked, delivered)`.
    pub fn timer_counts(&self) -> Vec<(String, u64, u64)> {
        let delivered: HashMap<String, u64> = self
            .timer_dequeued
            .snapshot()
            .into_iter()
            .map(|(t, n)| (t, n.load(Ordering::Relaxed)))
            .collect();
        let mut rows: Vec<(String, u64, u64)> = self
            .timer_enqueued
            .snapshot()
            .into_iter()
            .map(|(t, n)| {
                let out = delivered.get(&t).copied().unwrap_or(0);
                (t, n.load(Ordering::Relaxed), out)
            })
            .collect();
        for (t, out) in &delivered {
            if !rows.iter().any(|(topic, _, _)| topic == t) {
                rows.push((t.clone(), 0, *out));
            }
        }
        rows
    }

    /// Half messages not yet ended, by real topic (negative counts, from transactions begun
    /// before the broker started, read as 0).
    pub fn half_messages(&self) -> Vec<(String, i64)> {
        self.half
            .snapshot()
            .into_iter()
            .map(|(t, n)| (t, n.load(Ordering::Relaxed).max(0)))
            .collect()
    }

    pub fn finish_latencies(&self) -> Vec<(String, Arc<FinishLatency>)> {
        self.finish.snapshot()
    }

    pub fn rollbacks(&self) -> Vec<(String, Arc<AtomicU64>)> {
        self.rollbacks.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Properties {
        let mut p = Properties::default();
        for (k, v) in pairs {
            p.insert(k, v);
        }
        p
    }

    #[test]
    fn message_types_follow_apache_s_order() {
        assert_eq!(MessageType::of(&props(&[])), MessageType::Normal);
        assert_eq!(
            MessageType::of(&props(&[(keys::DELAY_TIME_LEVEL, "3")])),
            MessageType::Delay
        );
        assert_eq!(
            MessageType::of(&props(&[
                (keys::SHARDING_KEY, "k"),
                (keys::DELAY_TIME_LEVEL, "3")
            ])),
            MessageType::Fifo
        );
        assert_eq!(
            MessageType::of(&props(&[
                (keys::TRANSACTION_PREPARED, "true"),
                (keys::SHARDING_KEY, "k")
            ])),
            MessageType::Transaction
        );
    }

    #[test]
    fn sends_are_counted_by_topic_and_type_with_their_size_bucket() {
        let m = TrafficMetrics::new(true);
        m.record_in("T", MessageType::Normal, 1, 100);
        m.record_in("T", MessageType::Normal, 4, 8 * 1024);
        m.record_in("T", MessageType::Delay, 1, 10);
        m.record_in("%RETRY%g", MessageType::Normal, 1, 10);
        m.record_in("%DLQ%g", MessageType::Normal, 1, 10);
        let inbound = m.inbound();
        assert_eq!(inbound.len(), 1);
        let normal = &inbound[0].1.by_type[MessageType::Normal.index()];
        assert_eq!(normal.messages.load(Ordering::Relaxed), 5);
        assert_eq!(normal.bytes.load(Ordering::Relaxed), 100 + 8 * 1024);
        // 100 B in the 1 KiB bucket; a batch of 4 averaging 2 KiB in the 4 KiB bucket.
        assert_eq!(normal.size_buckets[0].load(Ordering::Relaxed), 1);
        assert_eq!(normal.size_buckets[1].load(Ordering::Relaxed), 1);
        assert_eq!(normal.size_count.load(Ordering::Relaxed), 2);
        let delay = &inbound[0].1.by_type[MessageType::Delay.index()];
        assert_eq!(delay.messages.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_disabled_recorder_records_nothing() {
        let m = TrafficMetrics::new(false);
        m.record_in("T", MessageType::Normal, 1, 100);
        m.record_out("T", "g", 1, 100);
        m.record_dlq("g", "T");
        assert!(m.inbound().is_empty() && m.outbound().is_empty() && m.dlq().is_empty());
    }

    #[test]
    fn tables_are_bounded() {
        let m = TrafficMetrics::new(true);
        for i in 0..MAX_SERIES + 10 {
            m.record_out(&format!("T{i}"), "g", 1, 1);
        }
        assert_eq!(m.outbound().len(), MAX_SERIES);
        assert_eq!(m.dropped.load(Ordering::Relaxed), 10);
    }
}
