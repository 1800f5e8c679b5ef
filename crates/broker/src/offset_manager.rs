//! `ConsumerOffsetManager`: the committed consume progress of every group
//! (`config/consumerOffset.json`).
//!
//! Clients commit offsets often (every pull with the COMMIT bit, every 5 s per queue), so commits
//! only touch memory; the table is written to disk by the controller every
//! `flushConsumerOffsetInterval` (5 s) and once more at shutdown. The write is atomic (temp file,
//! fsync, rename, `.bak` kept), so a crash mid-write loses at most the last period and never the
//! whole file. A dirty flag skips the periodic write when nothing was committed.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Display;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::config_tables::{CONSUMER_OFFSET_FILE, ConsumerOffsetTable, OffsetTable, config_path};
use comet_config_file::ConfigFileError;
use comet_config_file::DirtyFlag;

/// `query_offset`'s answer when the group has no offset for the queue.
pub const NO_OFFSET: i64 = -1;

/// Committed offsets of all consumer groups.
#[derive(Debug)]
pub struct ConsumerOffsetManager {
    table: ConsumerOffsetTable,
    dirty: DirtyFlag,
    /// On a slave: the (group, topic, queue) offsets committed to it directly since its last
    /// copy of the master's table (see [`ConsumerOffsetManager::merge_from_master`]).
    local_commits: Mutex<HashSet<(String, String, i32)>>,
    tracking: AtomicBool,
}

impl ConsumerOffsetManager {
    /// Loads `<store_root>/config/consumerOffset.json` (empty on first start).
    pub fn open(store_root: &Path) -> Result<Self, ConfigFileError> {
        Ok(ConsumerOffsetManager {
            table: ConsumerOffsetTable::open(&config_path(store_root, CONSUMER_OFFSET_FILE))?,
            dirty: DirtyFlag::default(),
            local_commits: Mutex::new(HashSet::new()),
            tracking: AtomicBool::new(false),
        })
    }

    /// Stores `offset` (the next offset to consume) for (group, topic, queue). A lower value
    /// replaces a higher one: consumers that seek backwards rely on it.
    pub fn commit_offset(
        &self,
        client_host: impl Display,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
    ) {
        tracing::trace!(client = %client_host, group, topic, queue_id, offset, "commit offset");
        self.table.commit(group, topic, queue_id, offset);
        self.dirty.mark();
        if self.tracking.load(Ordering::Relaxed) {
            self.local_commits
                .lock()
                .insert((group.to_owned(), topic.to_owned(), queue_id));
        }
    }

    /// Makes this table follow a master's (a slave's): from now on direct commits are
    /// remembered until the next [`ConsumerOffsetManager::merge_from_master`].
    pub fn follow_master(&self) {
        self.tracking.store(true, Ordering::Relaxed);
    }

    /// A slave's copy of its master's offsets: the master's value wins, except for a queue
    /// committed to the slave directly since the last copy (consumers that read from the slave
    /// while the master was away), where the higher of the two stays. So offsets a master kept
    /// from before a long outage never move the slave's back (Apache's issue #1094), and a
    /// reset made on the master still reaches the slave. Returns how many offsets changed.
    pub fn merge_from_master(&self, master: &OffsetTable) -> usize {
        let local = std::mem::take(&mut *self.local_commits.lock());
        let mut changed = 0;
        for (key, queues) in master {
            let Some((topic, group)) = crate::config_tables::split_offset_key(key) else {
                continue;
            };
            for (&queue_id, &offset) in queues {
                let mine = self.table.query(group, topic, queue_id);
                let kept_local = local.contains(&(group.to_owned(), topic.to_owned(), queue_id));
                let value = match mine {
                    Some(mine) if kept_local => mine.max(offset),
                    _ => offset,
                };
                if mine != Some(value) {
                    self.table.commit(group, topic, queue_id, value);
                    changed += 1;
                }
            }
        }
        if changed > 0 {
            self.dirty.mark();
        }
        changed
    }

    /// The committed offset, or [`NO_OFFSET`] (−1).
    pub fn query_offset(&self, group: &str, topic: &str, queue_id: i32) -> i64 {
        self.table
            .query(group, topic, queue_id)
            .unwrap_or(NO_OFFSET)
    }

    /// Every queue offset of (group, topic).
    pub fn query_offsets(&self, group: &str, topic: &str) -> BTreeMap<i32, i64> {
        self.table.offsets(group, topic).unwrap_or_default()
    }

    /// Topics the group has committed on.
    pub fn topics_of_group(&self, group: &str) -> Vec<String> {
        self.table.topics_of_group(group)
    }

    /// Groups with offsets on the topic.
    pub fn groups_of_topic(&self, topic: &str) -> Vec<String> {
        self.table.groups_of_topic(topic)
    }

    /// Every group with offsets.
    pub fn groups(&self) -> Vec<String> {
        self.table.groups()
    }

    /// Forgets a group's offsets on every topic; returns the number of topics removed.
    pub fn remove_group(&self, group: &str) -> usize {
        let n = self.table.remove_group(group);
        if n > 0 {
            self.dirty.mark();
        }
        n
    }

    /// Forgets every group's offsets on a topic.
    pub fn remove_topic(&self, topic: &str) -> usize {
        let n = self.table.remove_topic(topic);
        if n > 0 {
            self.dirty.mark();
        }
        n
    }

    /// A copy of the whole table (`topic@group` → queue → offset).
    pub fn snapshot(&self) -> OffsetTable {
        self.table.snapshot()
    }

    /// The table as consumerOffset.json holds it (GET_ALL_CONSUMER_OFFSET body).
    pub fn encode(&self) -> Result<String, ConfigFileError> {
        self.table.encode()
    }

    /// Writes the file if something changed since the last write.
    pub fn persist_if_dirty(&self) -> Result<bool, ConfigFileError> {
        self.dirty.write_if_marked(|| self.table.persist())
    }

    /// Writes the file unconditionally (shutdown).
    pub fn persist(&self) -> Result<(), ConfigFileError> {
        self.dirty.write(|| self.table.persist())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_query_persist_reload() {
        let dir = tempfile::tempdir().unwrap();
        let m = ConsumerOffsetManager::open(dir.path()).unwrap();
        assert_eq!(m.query_offset("g", "T", 0), NO_OFFSET);
        assert!(!m.persist_if_dirty().unwrap());
        m.commit_offset("127.0.0.1:5555", "g", "T", 0, 10);
        m.commit_offset("127.0.0.1:5555", "g", "T", 1, 7);
        m.commit_offset("127.0.0.1:5555", "g", "T", 0, 5);
        assert_eq!(m.query_offset("g", "T", 0), 5);
        assert!(m.persist_if_dirty().unwrap());
        assert!(!m.persist_if_dirty().unwrap());
        drop(m);
        let m = ConsumerOffsetManager::open(dir.path()).unwrap();
        assert_eq!(m.query_offsets("g", "T"), BTreeMap::from([(0, 5), (1, 7)]));
        assert_eq!(m.topics_of_group("g"), vec!["T".to_owned()]);
        assert_eq!(m.remove_group("g"), 1);
        assert_eq!(m.query_offset("g", "T", 1), NO_OFFSET);
    }
}
