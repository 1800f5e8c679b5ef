//! FIFO POP (`order=true`): a queue hands out one batch at a time.
//!
//! No checkpoint is written and the retry topic is not read. The group's offset stays at the
//! batch's start; the queue is blocked while any message of its last batch is un-acked and still
//! invisible, except to a request repeating the batch's `attemptId`, which gets the same batch
//! again. Once the un-acked messages' invisible time has ended, the next pop hands them out again
//! (with their delivery counts in orderCountInfo, which the client turns into reconsumeTimes).
//! An ack (a handle with revive queue 999) moves the group's offset past the acked prefix of the
//! batch and wakes held pops; a batch acked in full is forgotten.
//!
//! The batches are kept in `config/popOrderInfo.json`, written with the consumer offsets
//! (`flushConsumerOffsetInterval`) and at shutdown, so a restart keeps un-acked messages
//! invisible until their time and keeps their delivery counts. After a crash the state is at most
//! one interval old: a batch handed out since is handed out again from the committed offset
//! (at-least-once).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use comet_config_file::{ConfigFileError, DirtyFlag, load_with_backup, persist_atomically};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::config_tables::config_path;

/// The file, under the store root's `config` directory.
pub const FIFO_BOOK_FILE: &str = "popOrderInfo.json";

/// The last batch handed out from one queue to one group.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OrderBatch {
    attempt_id: Option<String>,
    pop_time: i64,
    invisible_time: i64,
    offsets: Vec<i64>,
    /// Deliveries before the last one, per offset.
    counts: HashMap<i64, i32>,
    acked: BTreeSet<i64>,
    /// Per-offset invisible-time changes: when it becomes visible again.
    visible_at: HashMap<i64, i64>,
}

impl OrderBatch {
    fn unacked(&self) -> impl Iterator<Item = &i64> {
        self.offsets.iter().filter(|o| !self.acked.contains(o))
    }
}

/// The FIFO batches of every (topic, group, queue).
#[derive(Debug, Default)]
pub struct FifoBook {
    batches: Mutex<HashMap<String, OrderBatch>>,
    /// Where the batches are kept; `None`: in memory only.
    path: Option<PathBuf>,
    dirty: DirtyFlag,
}

/// The key of a queue's batch.
pub fn key(topic: &str, group: &str, queue_id: i32) -> String {
    format!("{topic}@{group}@{queue_id}")
}

impl FifoBook {
    /// Loads `<store_root>/config/popOrderInfo.json` (empty when absent).
    pub fn open(store_root: &Path) -> Result<Self, ConfigFileError> {
        let path = config_path(store_root, FIFO_BOOK_FILE);
        let batches = match load_with_backup(&path)? {
            Some(text) if !text.trim().is_empty() => {
                serde_json::from_str(&text).map_err(ConfigFileError::json)?
            }
            _ => HashMap::new(),
        };
        Ok(FifoBook {
            batches: Mutex::new(batches),
            path: Some(path),
            dirty: DirtyFlag::default(),
        })
    }

    /// Writes the batches if they changed since the last write; true if it wrote.
    pub fn persist_if_dirty(&self) -> Result<bool, ConfigFileError> {
        self.dirty.write_if_marked(|| self.write())
    }

    /// Writes the batches unconditionally (shutdown).
    pub fn persist(&self) -> Result<(), ConfigFileError> {
        self.dirty.write(|| self.write())
    }

    fn write(&self) -> Result<(), ConfigFileError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let text = serde_json::to_string(&*self.batches.lock()).map_err(ConfigFileError::json)?;
        persist_atomically(path, &text)
    }

    /// Whether the queue's last batch still holds it for a request with `attempt_id` at `now`.
    pub fn blocked(&self, key: &str, attempt_id: Option<&str>, now: i64) -> bool {
        let batches = self.batches.lock();
        let Some(batch) = batches.get(key) else {
            return false;
        };
        let invisible = batch.unacked().any(|o| {
            let until = batch
                .visible_at
                .get(o)
                .copied()
                .unwrap_or(batch.pop_time.saturating_add(batch.invisible_time));
            now < until
        });
        invisible && (attempt_id.is_none() || batch.attempt_id.as_deref() != attempt_id)
    }

    /// Records a batch handed out; returns each offset's delivery count before this one (a
    /// repeated attempt keeps the counts it had).
    pub fn hand_out(
        &self,
        key: &str,
        attempt_id: Option<&str>,
        pop_time: i64,
        invisible_time: i64,
        offsets: &[i64],
    ) -> Vec<i32> {
        let mut batches = self.batches.lock();
        self.dirty.mark();
        let previous = batches.remove(key).unwrap_or_default();
        let same_attempt = attempt_id.is_some() && previous.attempt_id.as_deref() == attempt_id;
        let counts: Vec<i32> = offsets
            .iter()
            .map(|o| {
                if same_attempt {
                    previous.counts.get(o).copied().unwrap_or(0)
                } else if previous.offsets.contains(o) {
                    previous.counts.get(o).copied().unwrap_or(0) + 1
                } else {
                    0
                }
            })
            .collect();
        batches.insert(
            key.to_owned(),
            OrderBatch {
                attempt_id: attempt_id.map(str::to_owned),
                pop_time,
                invisible_time,
                offsets: offsets.to_vec(),
                counts: offsets
                    .iter()
                    .copied()
                    .zip(counts.iter().copied())
                    .collect(),
                acked: BTreeSet::new(),
                visible_at: HashMap::new(),
            },
        );
        counts
    }

    /// Acks `offset` of the batch popped at `pop_time`; returns the offset the group may commit
    /// (past the acked prefix), if it moved.
    pub fn ack(&self, key: &str, pop_time: i64, offset: i64) -> Option<i64> {
        let mut batches = self.batches.lock();
        let batch = batches.get_mut(key)?;
        if batch.pop_time != pop_time || !batch.offsets.contains(&offset) {
            return None;
        }
        batch.acked.insert(offset);
        self.dirty.mark();
        let first_unacked = batch.unacked().next().copied();
        match first_unacked {
            Some(first) if first == batch.offsets[0] => None,
            Some(first) => Some(first),
            None => {
                let next = batch.offsets.last().map(|last| last + 1);
                batches.remove(key);
                next
            }
        }
    }

    /// Makes `offset` of the batch popped at `pop_time` visible again `invisible_time` from `now`.
    pub fn change_invisible(
        &self,
        key: &str,
        pop_time: i64,
        offset: i64,
        now: i64,
        invisible_time: i64,
    ) {
        if let Some(batch) = self.batches.lock().get_mut(key)
            && batch.pop_time == pop_time
        {
            batch
                .visible_at
                .insert(offset, now.saturating_add(invisible_time));
            self.dirty.mark();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_blocks_its_queue_until_acked_or_expired() {
        let book = FifoBook::default();
        let k = key("T", "g", 0);
        assert!(!book.blocked(&k, None, 0));
        assert_eq!(
            book.hand_out(&k, Some("a1"), 1000, 500, &[4, 5, 6]),
            vec![0, 0, 0]
        );
        assert!(book.blocked(&k, None, 1200));
        assert!(book.blocked(&k, Some("other"), 1200));
        assert!(
            !book.blocked(&k, Some("a1"), 1200),
            "the same attempt gets its batch again"
        );
        assert!(!book.blocked(&k, None, 1500), "expired");
        // Acks commit past the acked prefix only.
        assert_eq!(book.ack(&k, 1000, 5), None);
        assert_eq!(book.ack(&k, 1000, 4), Some(6));
        assert_eq!(book.ack(&k, 999, 6), None, "another pop's handle");
        assert!(book.blocked(&k, None, 1200));
        assert_eq!(book.ack(&k, 1000, 6), Some(7));
        assert!(!book.blocked(&k, None, 1200));
    }

    #[test]
    fn batches_survive_a_reopen_and_acked_ones_are_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let book = FifoBook::open(dir.path()).unwrap();
        let (open, done) = (key("T", "g", 0), key("T", "g", 1));
        book.hand_out(&open, Some("a1"), 1000, 500, &[4, 5]);
        book.hand_out(&done, None, 1000, 500, &[7]);
        assert_eq!(book.ack(&done, 1000, 7), Some(8));
        book.ack(&open, 1000, 4);
        assert!(book.persist_if_dirty().unwrap());
        assert!(!book.persist_if_dirty().unwrap(), "nothing changed since");

        let reopened = FifoBook::open(dir.path()).unwrap();
        assert!(
            reopened.blocked(&open, None, 1200),
            "offset 5 is still invisible"
        );
        assert!(!reopened.blocked(&open, Some("a1"), 1200));
        assert_eq!(reopened.ack(&open, 1000, 5), Some(6));
        assert!(!reopened.blocked(&done, None, 1200));
        assert!(
            reopened.batches.lock().is_empty(),
            "acked batches are dropped"
        );
        // A redelivery after the reopen still counts the earlier deliveries.
        reopened.hand_out(&open, None, 2000, 500, &[4, 5]);
        reopened.persist().unwrap();
        let again = FifoBook::open(dir.path()).unwrap();
        assert_eq!(again.hand_out(&open, None, 3000, 500, &[5]), vec![1]);
    }

    #[test]
    fn redeliveries_count_up_and_invisible_changes_apply_per_offset() {
        let book = FifoBook::default();
        let k = key("T", "g", 1);
        book.hand_out(&k, None, 1000, 500, &[0, 1]);
        book.ack(&k, 1000, 0);
        assert_eq!(book.hand_out(&k, None, 2000, 500, &[1, 2]), vec![1, 0]);
        assert_eq!(book.hand_out(&k, Some("x"), 2000, 500, &[1, 2]), vec![2, 1]);
        assert_eq!(
            book.hand_out(&k, Some("x"), 2000, 500, &[1, 2]),
            vec![2, 1],
            "a repeated attempt is not a redelivery"
        );
        book.change_invisible(&k, 2000, 1, 2100, 5000);
        assert!(
            book.blocked(&k, None, 3000),
            "offset 1 is invisible until 7100"
        );
        assert!(!book.blocked(&k, None, 7100));
    }
}
