//! The records of the POP revive log and the revive service's bookkeeping.
//!
//! A pop writes one checkpoint per queue batch ([`PopCheckPoint`], tag `ck`) to the revive
//! log, as a timer message due when the batch's invisible time ends; an ack writes an
//! [`AckMsg`] (tag `ack`, or `bAck` with several offsets) at once. Both are JSON with
//! RocketMQ's short field names. The revive service reads the log in order, so every ack
//! written before a checkpoint fell due is read before that checkpoint; [`AckBook`] keeps the
//! acks until their checkpoint arrives and tells which of its messages nobody acked.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

/// Tag of a checkpoint record.
pub const CK_TAG: &str = "ck";
/// Tag of a single ack record.
pub const ACK_TAG: &str = "ack";
/// Tag of a batch ack record.
pub const BATCH_ACK_TAG: &str = "bAck";

/// A popped batch of one queue (RocketMQ's `PopCheckPoint`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PopCheckPoint {
    /// Queue offset the batch starts at.
    #[serde(rename = "so")]
    pub start_offset: i64,
    /// When it was popped (ms).
    #[serde(rename = "pt")]
    pub pop_time: i64,
    /// Invisible time (ms).
    #[serde(rename = "it")]
    pub invisible_time: i64,
    /// Ack bitmap (always 0 in the log: acks are separate records).
    #[serde(rename = "bm", default)]
    pub bit_map: i32,
    /// Messages in the batch.
    #[serde(rename = "n")]
    pub num: i32,
    /// Queue read.
    #[serde(rename = "q")]
    pub queue_id: i32,
    /// Topic read (a retry topic for redeliveries).
    #[serde(rename = "t")]
    pub topic: String,
    /// Consumer group.
    #[serde(rename = "c")]
    pub group: String,
    /// Revive-log offset (unused, kept for the format).
    #[serde(rename = "ro", default)]
    pub revive_offset: i64,
    /// Each message's queue offset minus `start_offset`.
    #[serde(rename = "d", default)]
    pub queue_offset_diff: Vec<i32>,
    /// Broker that popped it.
    #[serde(rename = "bn", default)]
    pub broker_name: String,
    /// Times it was written again (unused).
    #[serde(rename = "rp", default)]
    pub re_put_times: String,
}

impl PopCheckPoint {
    /// When its un-acked messages come back (ms).
    pub fn revive_time(&self) -> i64 {
        self.pop_time.saturating_add(self.invisible_time)
    }

    /// The queue offsets of its messages.
    pub fn offsets(&self) -> Vec<i64> {
        self.queue_offset_diff
            .iter()
            .map(|d| self.start_offset + i64::from(*d))
            .collect()
    }

    /// What acks of this batch are filed under.
    pub fn key(&self) -> CkKey {
        CkKey {
            topic: self.topic.clone(),
            group: self.group.clone(),
            queue_id: self.queue_id,
            start_offset: self.start_offset,
            pop_time: self.pop_time,
        }
    }
}

/// An ack of one or more messages of a popped batch (RocketMQ's `AckMsg` / `BatchAckMsg`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AckMsg {
    /// The acked queue offset (-1 in a batch ack).
    #[serde(rename = "ao", default)]
    pub ack_offset: i64,
    /// The batch's start offset.
    #[serde(rename = "so")]
    pub start_offset: i64,
    /// Consumer group.
    #[serde(rename = "c")]
    pub group: String,
    /// Topic read.
    #[serde(rename = "t")]
    pub topic: String,
    /// Queue read.
    #[serde(rename = "q")]
    pub queue_id: i32,
    /// The batch's pop time.
    #[serde(rename = "pt")]
    pub pop_time: i64,
    /// Broker that popped it.
    #[serde(rename = "bn", default)]
    pub broker_name: String,
    /// The acked offsets of a batch ack.
    #[serde(rename = "aol", default, skip_serializing_if = "Vec::is_empty")]
    pub ack_offsets: Vec<i64>,
    /// The batch's invisible time (Comet's addition, absent from RocketMQ's record): tells the
    /// revive service when an ack whose checkpoint never shows up may be forgotten.
    #[serde(rename = "it", default)]
    pub invisible_time: i64,
}

impl AckMsg {
    /// The offsets it acks.
    pub fn acked(&self) -> Vec<i64> {
        if self.ack_offsets.is_empty() {
            vec![self.ack_offset]
        } else {
            self.ack_offsets.clone()
        }
    }

    /// The batch it belongs to.
    pub fn key(&self) -> CkKey {
        CkKey {
            topic: self.topic.clone(),
            group: self.group.clone(),
            queue_id: self.queue_id,
            start_offset: self.start_offset,
            pop_time: self.pop_time,
        }
    }
}

/// What matches acks to a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CkKey {
    /// Topic read.
    pub topic: String,
    /// Consumer group.
    pub group: String,
    /// Queue read.
    pub queue_id: i32,
    /// The batch's start offset.
    pub start_offset: i64,
    /// The batch's pop time.
    pub pop_time: i64,
}

#[derive(Debug)]
struct Acked {
    offsets: BTreeSet<i64>,
    /// Revive-log offset of the first ack read for the batch.
    first_log_offset: i64,
    /// When the acks may be dropped even if the checkpoint never arrives (ms).
    forget_at: i64,
}

/// The acks read from one revive queue whose checkpoint has not arrived yet.
#[derive(Debug, Default)]
pub struct AckBook {
    acks: HashMap<CkKey, Acked>,
}

impl AckBook {
    /// Files an ack read at revive-log offset `log_offset`; kept until its checkpoint arrives or
    /// until `grace_ms` after the batch's invisible time ended.
    pub fn record(&mut self, ack: &AckMsg, log_offset: i64, grace_ms: i64) {
        let forget_at = ack
            .pop_time
            .saturating_add(ack.invisible_time.max(0))
            .saturating_add(grace_ms);
        let entry = self.acks.entry(ack.key()).or_insert_with(|| Acked {
            offsets: BTreeSet::new(),
            first_log_offset: log_offset,
            forget_at,
        });
        entry.offsets.extend(ack.acked());
        entry.forget_at = entry.forget_at.max(forget_at);
    }

    /// The checkpoint's messages nobody acked, in queue order.
    pub fn unacked(&self, ck: &PopCheckPoint) -> Vec<i64> {
        let acked = self.acks.get(&ck.key()).map(|a| &a.offsets);
        ck.offsets()
            .into_iter()
            .filter(|o| !acked.is_some_and(|a| a.contains(o)))
            .collect()
    }

    /// Forgets the acks of a settled checkpoint.
    pub fn forget(&mut self, ck: &PopCheckPoint) {
        self.acks.remove(&ck.key());
    }

    /// [`AckBook::unacked`], then [`AckBook::forget`].
    pub fn settle(&mut self, ck: &PopCheckPoint) -> Vec<i64> {
        let unacked = self.unacked(ck);
        self.forget(ck);
        unacked
    }

    /// Drops the acks whose checkpoint is long overdue (see [`AckBook::record`]).
    pub fn forget_overdue(&mut self, now_ms: i64) {
        self.acks.retain(|_, a| a.forget_at > now_ms);
    }

    /// The revive-log offset the service may resume from after a restart without losing an
    /// ack it still needs: the first ack still kept, else `read_to`.
    pub fn safe_offset(&self, read_to: i64) -> i64 {
        self.acks
            .values()
            .map(|a| a.first_log_offset)
            .min()
            .map_or(read_to, |first| first.min(read_to))
    }

    /// Batches with acks kept.
    pub fn len(&self) -> usize {
        self.acks.len()
    }

    /// Whether no ack is kept.
    pub fn is_empty(&self) -> bool {
        self.acks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ck(start: i64, diffs: &[i32]) -> PopCheckPoint {
        PopCheckPoint {
            start_offset: start,
            pop_time: 1000,
            invisible_time: 500,
            bit_map: 0,
            num: diffs.len() as i32,
            queue_id: 2,
            topic: "T".into(),
            group: "g".into(),
            revive_offset: 0,
            queue_offset_diff: diffs.to_vec(),
            broker_name: "b".into(),
            re_put_times: String::new(),
        }
    }

    fn ack(start: i64, offsets: &[i64]) -> AckMsg {
        AckMsg {
            ack_offset: if offsets.len() == 1 { offsets[0] } else { -1 },
            start_offset: start,
            group: "g".into(),
            topic: "T".into(),
            queue_id: 2,
            pop_time: 1000,
            broker_name: "b".into(),
            ack_offsets: if offsets.len() == 1 {
                Vec::new()
            } else {
                offsets.to_vec()
            },
            invisible_time: 500,
        }
    }

    #[test]
    fn records_use_apaches_json_names() {
        let json = serde_json::to_value(ck(5, &[0, 2])).unwrap();
        for key in [
            "so", "pt", "it", "bm", "n", "q", "t", "c", "ro", "d", "bn", "rp",
        ] {
            assert!(json.get(key).is_some(), "{key} missing from {json}");
        }
        let a: AckMsg =
            serde_json::from_str(r#"{"ao":7,"so":5,"c":"g","t":"T","q":2,"pt":1000,"bn":"b"}"#)
                .unwrap();
        assert_eq!((a.acked(), a.invisible_time), (vec![7], 0));
    }

    #[test]
    fn a_checkpoint_revives_exactly_the_unacked_offsets() {
        let mut book = AckBook::default();
        book.record(&ack(10, &[10]), 100, 0);
        book.record(&ack(10, &[13, 14]), 101, 0);
        // An ack of another batch (other pop time) does not count.
        let mut other = ack(10, &[11]);
        other.pop_time = 2000;
        book.record(&other, 102, 0);
        assert_eq!(book.settle(&ck(10, &[0, 1, 3, 4, 5])), vec![11, 15]);
        // The settled batch's acks are gone; the other batch's remain.
        assert_eq!(book.len(), 1);
        assert_eq!(book.settle(&ck(10, &[0, 1])), vec![10, 11]);
    }

    #[test]
    fn the_safe_offset_never_passes_a_kept_ack() {
        let mut book = AckBook::default();
        assert_eq!(book.safe_offset(50), 50);
        book.record(&ack(0, &[0]), 40, 100);
        book.record(&ack(0, &[1]), 45, 100);
        assert_eq!(book.safe_offset(50), 40);
        // Overdue acks (pop 1000 + invisible 500 + grace 100) are forgotten.
        book.forget_overdue(1599);
        assert_eq!(book.len(), 1);
        book.forget_overdue(1600);
        assert!(book.is_empty());
        assert_eq!(book.safe_offset(50), 50);
    }
}
