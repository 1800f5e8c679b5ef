//! Queue allocation strategies: which of a topic's queues this member of a clustering group reads.
//!
//! Every member computes its share independently from the same two sorted lists (all queues, all
//! consumer ids), with no coordination. The strategies must therefore be deterministic and agree
//! bit for bit with the Java and Go clients: a mixed group where two implementations disagree
//! would leave queues unread or read twice. That is why the consistent-hash ring uses exactly
//! Java's key strings and MD5 truncation.

use std::collections::BTreeMap;

use md5::{Digest, Md5};

use super::super::MessageQueue;

/// Virtual nodes per consumer on the consistent-hash ring (Java's default).
pub const CONSISTENT_HASH_VIRTUAL_NODES: u32 = 10;

/// Decides which queues `current_cid` gets out of `mq_all`, given every member `cid_all`.
///
/// Both lists arrive sorted (queues by topic, broker name, queue id; ids lexicographically).
/// A member that is not in `cid_all` gets nothing.
pub trait AllocateMessageQueueStrategy: Send + Sync + 'static {
    /// The queues of `mq_all` that `current_cid` gets in `consumer_group`.
    fn allocate(
        &self,
        consumer_group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue>;

    /// Like [`allocate`](AllocateMessageQueueStrategy::allocate), but may refuse when the inputs
    /// cannot be allocated (e.g. a machine room that cannot be resolved). The rebalance then keeps
    /// the topic's current queues, as the Java client does when a strategy throws.
    fn try_allocate(
        &self,
        consumer_group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Result<Vec<MessageQueue>, AllocateError> {
        Ok(self.allocate(consumer_group, current_cid, mq_all, cid_all))
    }

    /// The strategy's name as the Java client reports it (`AVG`, `AVG_BY_CIRCLE`, ...).
    fn name(&self) -> &'static str;
}

/// Why a strategy refused to allocate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocateError {
    /// The machine room of a queue or a consumer is unknown (the resolver answered empty).
    #[error("machine room is unknown for {0}")]
    UnknownMachineRoom(String),
}

/// Position of `current_cid` in `cid_all`, or `None` when the arguments cannot yield anything.
pub(super) fn member_index(
    current_cid: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
) -> Option<usize> {
    if current_cid.is_empty() || mq_all.is_empty() || cid_all.is_empty() {
        return None;
    }
    cid_all.iter().position(|c| c == current_cid)
}

/// Contiguous blocks: the first `n % c` members get one queue more (`AVG`, the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllocateMessageQueueAveragely;

impl AllocateMessageQueueStrategy for AllocateMessageQueueAveragely {
    fn allocate(
        &self,
        _consumer_group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue> {
        let Some(index) = member_index(current_cid, mq_all, cid_all) else {
            return Vec::new();
        };
        let (n, c) = (mq_all.len(), cid_all.len());
        let rem = n % c;
        let avg = if n <= c {
            1
        } else if rem > 0 && index < rem {
            n / c + 1
        } else {
            n / c
        };
        let start = if rem > 0 && index < rem {
            index * avg
        } else {
            index * avg + rem
        };
        let range = avg.min(n.saturating_sub(start));
        mq_all.iter().skip(start).take(range).cloned().collect()
    }

    fn name(&self) -> &'static str {
        "AVG"
    }
}

/// Round robin: queue `k` goes to member `k % c` (`AVG_BY_CIRCLE`).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllocateMessageQueueAveragelyByCircle;

impl AllocateMessageQueueStrategy for AllocateMessageQueueAveragelyByCircle {
    fn allocate(
        &self,
        _consumer_group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue> {
        let Some(index) = member_index(current_cid, mq_all, cid_all) else {
            return Vec::new();
        };
        mq_all
            .iter()
            .skip(index)
            .step_by(cid_all.len())
            .cloned()
            .collect()
    }

    fn name(&self) -> &'static str {
        "AVG_BY_CIRCLE"
    }
}

/// Java's `md5Hash`: the first four bytes of MD5(UTF-8 `key`), big-endian, unsigned.
pub fn md5_hash(key: &str) -> i64 {
    let digest: [u8; 16] = Md5::digest(key.as_bytes()).into();
    let [a, b, c, d, ..] = digest;
    i64::from(u32::from_be_bytes([a, b, c, d]))
}

/// A consistent-hash ring of consumer ids, each with `virtual_nodes` points
/// `md5_hash("<cid>-<i>")` (`CONSISTENT_HASH`). Queues are routed by
/// `md5_hash(<MessageQueue display string>)` to the first point at or after their hash, wrapping.
#[derive(Debug, Clone, Copy)]
pub struct AllocateMessageQueueConsistentHash {
    virtual_nodes: u32,
}

impl Default for AllocateMessageQueueConsistentHash {
    fn default() -> Self {
        AllocateMessageQueueConsistentHash {
            virtual_nodes: CONSISTENT_HASH_VIRTUAL_NODES,
        }
    }
}

impl AllocateMessageQueueConsistentHash {
    /// A ring with `virtual_nodes` points per member (at least one).
    pub fn new(virtual_nodes: u32) -> Self {
        AllocateMessageQueueConsistentHash {
            virtual_nodes: virtual_nodes.max(1),
        }
    }

    /// Which member owns `mq` on the ring built from `cid_all`.
    pub fn route<'a>(&self, mq: &MessageQueue, cid_all: &'a [String]) -> Option<&'a str> {
        let mut ring: BTreeMap<i64, &str> = BTreeMap::new();
        for cid in cid_all {
            for i in 0..self.virtual_nodes {
                ring.insert(md5_hash(&format!("{cid}-{i}")), cid.as_str());
            }
        }
        let hash = md5_hash(&mq.to_string());
        ring.range(hash..)
            .next()
            .or_else(|| ring.iter().next())
            .map(|(_, cid)| *cid)
    }
}

impl AllocateMessageQueueStrategy for AllocateMessageQueueConsistentHash {
    fn allocate(
        &self,
        _consumer_group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue> {
        if member_index(current_cid, mq_all, cid_all).is_none() {
            return Vec::new();
        }
        mq_all
            .iter()
            .filter(|mq| self.route(mq, cid_all) == Some(current_cid))
            .cloned()
            .collect()
    }

    fn name(&self) -> &'static str {
        "CONSISTENT_HASH"
    }
}

/// A fixed list of queues chosen by the application, whatever the group looks like (`CONFIG`).
#[derive(Debug, Clone, Default)]
pub struct AllocateMessageQueueByConfig {
    /// The queues every member gets.
    pub message_queue_list: Vec<MessageQueue>,
}

impl AllocateMessageQueueByConfig {
    /// A strategy giving every member `message_queue_list`.
    pub fn new(message_queue_list: Vec<MessageQueue>) -> Self {
        AllocateMessageQueueByConfig { message_queue_list }
    }
}

impl AllocateMessageQueueStrategy for AllocateMessageQueueByConfig {
    fn allocate(
        &self,
        _consumer_group: &str,
        _current_cid: &str,
        _mq_all: &[MessageQueue],
        _cid_all: &[String],
    ) -> Vec<MessageQueue> {
        self.message_queue_list.clone()
    }

    fn name(&self) -> &'static str {
        "CONFIG"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(n: i32) -> Vec<MessageQueue> {
        (0..n).map(|q| MessageQueue::new("T", "b", q)).collect()
    }

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i}")).collect()
    }

    fn qids(mqs: &[MessageQueue]) -> Vec<i32> {
        mqs.iter().map(|m| m.queue_id).collect()
    }

    /// Every queue is allocated exactly once across the group.
    fn assert_partition(strategy: &dyn AllocateMessageQueueStrategy, n: i32, c: usize) {
        let mq_all = queues(n);
        let cid_all = ids(c);
        let mut seen: Vec<i32> = cid_all
            .iter()
            .flat_map(|cid| qids(&strategy.allocate("g", cid, &mq_all, &cid_all)))
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n={n} c={c}");
    }

    #[test]
    fn averagely_gives_contiguous_blocks_with_the_remainder_first() {
        let s = AllocateMessageQueueAveragely;
        let mq_all = queues(8);
        let cid_all = ids(3);
        // n=8, c=3: mod=2 -> sizes 3,3,2 -> [0..3), [3..6), [6..8).
        assert_eq!(
            qids(&s.allocate("g", "c0", &mq_all, &cid_all)),
            vec![0, 1, 2]
        );
        assert_eq!(
            qids(&s.allocate("g", "c1", &mq_all, &cid_all)),
            vec![3, 4, 5]
        );
        assert_eq!(qids(&s.allocate("g", "c2", &mq_all, &cid_all)), vec![6, 7]);
        // More consumers than queues: the tail gets nothing.
        let cid_all = ids(5);
        let mq_all = queues(3);
        assert_eq!(qids(&s.allocate("g", "c2", &mq_all, &cid_all)), vec![2]);
        assert!(s.allocate("g", "c3", &mq_all, &cid_all).is_empty());
        assert!(s.allocate("g", "c4", &mq_all, &cid_all).is_empty());
        assert!(s.allocate("g", "stranger", &mq_all, &cid_all).is_empty());
        for (n, c) in [(1, 1), (4, 2), (5, 2), (16, 3), (3, 7), (0, 2)] {
            assert_partition(&s, n, c);
        }
    }

    #[test]
    fn by_circle_deals_queues_round_robin() {
        let s = AllocateMessageQueueAveragelyByCircle;
        let mq_all = queues(8);
        let cid_all = ids(3);
        assert_eq!(
            qids(&s.allocate("g", "c0", &mq_all, &cid_all)),
            vec![0, 3, 6]
        );
        assert_eq!(
            qids(&s.allocate("g", "c1", &mq_all, &cid_all)),
            vec![1, 4, 7]
        );
        assert_eq!(qids(&s.allocate("g", "c2", &mq_all, &cid_all)), vec![2, 5]);
        assert!(s.allocate("g", "x", &mq_all, &cid_all).is_empty());
        for (n, c) in [(1, 1), (4, 2), (5, 2), (16, 3), (3, 7)] {
            assert_partition(&s, n, c);
        }
    }

    #[test]
    fn md5_hash_is_the_big_endian_prefix_of_the_digest() {
        // MD5("") = d41d8cd98f00b204e9800998ecf8427e, MD5("abc") = 900150983cd24fb0d6963f7d28e17f72,
        // MD5("The quick brown fox jumps over the lazy dog") = 9e107d9d372bb6826bd81d3542a419d6.
        assert_eq!(md5_hash(""), 0xd41d_8cd9);
        assert_eq!(md5_hash("abc"), 0x9001_5098);
        assert_eq!(
            md5_hash("The quick brown fox jumps over the lazy dog"),
            0x9e10_7d9d
        );
        // Unsigned: a digest starting with a byte >= 0x80 stays positive.
        assert!(md5_hash("") > i64::from(i32::MAX));
    }

    #[test]
    fn consistent_hash_routes_to_the_next_ring_point() {
        let s = AllocateMessageQueueConsistentHash::default();
        let cid_all = ids(3);
        let mq_all = queues(12);
        // Recompute the expected owner by brute force over the ring points: the owner is the
        // member with the smallest point >= hash, or with the smallest point overall.
        for mq in &mq_all {
            let hash = md5_hash(&format!(
                "MessageQueue [topic={}, brokerName={}, queueId={}]",
                mq.topic, mq.broker_name, mq.queue_id
            ));
            let points: Vec<(i64, &str)> = cid_all
                .iter()
                .flat_map(|cid| {
                    (0..10).map(move |i| (md5_hash(&format!("{cid}-{i}")), cid.as_str()))
                })
                .collect();
            let expected = points
                .iter()
                .filter(|(p, _)| *p >= hash)
                .min_by_key(|(p, _)| *p)
                .or_else(|| points.iter().min_by_key(|(p, _)| *p))
                .map(|(_, cid)| *cid);
            assert_eq!(s.route(mq, &cid_all), expected, "{mq}");
        }
        assert_partition(&s, 12, 3);
        assert!(s.allocate("g", "x", &mq_all, &cid_all).is_empty());
    }

    #[test]
    fn consistent_hash_matches_precomputed_md5_owners() {
        // Computed independently (Python hashlib) for members c0..c2, 10 points each, and queues
        // "MessageQueue [topic=T, brokerName=b, queueId=q]": e.g. md5_hash("c0-0") = 0x8a18b93e,
        // md5_hash of queue 0's string = 0x218a9c35.
        assert_eq!(md5_hash("c0-0"), 0x8a18_b93e);
        assert_eq!(
            md5_hash("MessageQueue [topic=T, brokerName=b, queueId=0]"),
            0x218a_9c35
        );
        let s = AllocateMessageQueueConsistentHash::default();
        let mq_all = queues(12);
        let cid_all = ids(3);
        assert_eq!(
            qids(&s.allocate("g", "c0", &mq_all, &cid_all)),
            vec![3, 4, 6, 10]
        );
        assert_eq!(
            qids(&s.allocate("g", "c1", &mq_all, &cid_all)),
            vec![1, 2, 5, 9, 11]
        );
        assert_eq!(
            qids(&s.allocate("g", "c2", &mq_all, &cid_all)),
            vec![0, 7, 8]
        );
    }

    #[test]
    fn consistent_hash_single_member_takes_everything() {
        let s = AllocateMessageQueueConsistentHash::new(1);
        let mq_all = queues(5);
        let cid_all = ids(1);
        assert_eq!(
            qids(&s.allocate("g", "c0", &mq_all, &cid_all)),
            vec![0, 1, 2, 3, 4]
        );
    }

    #[test]
    fn by_config_ignores_the_group() {
        let chosen = vec![MessageQueue::new("T", "b", 3)];
        let s = AllocateMessageQueueByConfig::new(chosen.clone());
        assert_eq!(s.allocate("g", "anyone", &queues(8), &ids(2)), chosen);
        assert_eq!(s.name(), "CONFIG");
    }
}
