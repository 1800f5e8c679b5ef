//! `ConsumerOffsetManager`: the committed consume progress of every group
//! (`config/consumerOffset.json`).
//!
//! Clients commit offsets often (every pull with the COMMIT bit, every 5 s per queue), so commits
//! only touch memory; the table is written to disk by the controller every
//! `flushConsumerOffsetInterval` (5 s) and once more at shutdown. The write is atomic (temp file,
//! fsync, rename, `.bak` kept), so a crash mid-write loses at most the last period and never the
//! whole file. A dirty flag skips the periodic write when nothing was committed.

use std::collections::{BTreeMap, HashMap, HashSet};
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
    /// On a slave: the master's offsets as its last copy had them.
    last_master: Mutex<HashMap<(String, String, i32), i64>>,
    tracking: AtomicBool,
    /// Where each group's last pull on each queue ended (`topic@group` → queue → next offset):
    /// what it has fetched, committed or not. Kept in memory only, for the in-flight and ready
    /// figures of the metrics endpoint.
    pull_offsets: Mutex<HashMap<String, HashMap<i32, i64>>>,
}

impl ConsumerOffsetManager {
    /// Loads `<store_root>/config/consumerOffset.json` (empty on first start).
    pub fn open(store_root: &Path) -> Result<Self, ConfigFileError> {
        Ok(ConsumerOffsetManager {
            table: ConsumerOffsetTable::open(&config_path(store_root, CONSUMER_OFFSET_FILE))?,
            dirty: DirtyFlag::default(),
            local_commits: Mutex::new(HashSet::new()),
            last_master: Mutex::new(HashMap::new()),
            tracking: AtomicBool::new(false),
            pull_offsets: Mutex::new(HashMap::new()),
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

    /// A slave's copy of its master's offsets. The master's value wins when it changed since the
    /// previous copy (consumers committed to the master, or an operator reset it there). When it
    /// did not, the slave keeps its own value: consumers that read from the slave while the
    /// master was away committed there, and an unchanged older value on the master must not move
    /// them back (Apache's issue #1094). A queue committed to the slave since the last copy keeps
    /// the higher of the two. Returns how many offsets changed.
    pub fn merge_from_master(&self, master: &OffsetTable) -> usize {
        let local = std::mem::take(&mut *self.local_commits.lock());
        let mut last_master = self.last_master.lock();
        let mut seen = HashMap::with_capacity(last_master.len());
        let mut changed = 0;
        for (key, queues) in master {
            let Some((topic, group)) = crate::config_tables::split_offset_key(key) else {
                continue;
            };
            for (&queue_id, &offset) in queues {
                let id = (group.to_owned(), topic.to_owned(), queue_id);
                let mine = self.table.query(group, topic, queue_id);
                let master_moved = last_master.get(&id) != Some(&offset);
                let value = match mine {
                    Some(mine) if local.contains(&id) => mine.max(offset),
                    Some(mine) if !master_moved => mine,
                    _ => offset,
                };
                if mine != Some(value) {
                    self.table.commit(group, topic, queue_id, value);
                    changed += 1;
                }
                seen.insert(id, offset);
            }
        }
        *last_master = seen;
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

    /// Records that a pull of (group, topic, queue) ended at `next_offset`, the offset its next
    /// pull starts from.
    pub fn commit_pull_offset(&self, group: &str, topic: &str, queue_id: i32, next_offset: i64) {
        let key = offset_key(topic, group);
        let mut table = self.pull_offsets.lock();
        match table.get_mut(&key) {
            Some(queues) => {
                queues.insert(queue_id, next_offset);
            }
            None => {
                table.insert(key, HashMap::from([(queue_id, next_offset)]));
            }
        }
    }

    /// Where the group's last pull of the queue ended; the committed offset when it has not
    /// pulled the queue since the broker started, or [`NO_OFFSET`].
    pub fn query_pull_offset(&self, group: &str, topic: &str, queue_id: i32) -> i64 {
        let pulled = self
            .pull_offsets
            .lock()
            .get(&offset_key(topic, group))
            .and_then(|queues| queues.get(&queue_id).copied());
        pulled.unwrap_or_else(|| self.query_offset(group, topic, queue_id))
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
        let suffix = format!("@{group}");
        self.pull_offsets
            .lock()
            .retain(|k, _| !k.ends_with(&suffix));
        let n = self.table.remove_group(group);
        if n > 0 {
            self.dirty.mark();
        }
        n
    }

    /// Forgets every group's offsets on a topic.
    pub fn remove_topic(&self, topic: &str) -> usize {
        let prefix = format!("{topic}@");
        self.pull_offsets
            .lock()
            .retain(|k, _| !k.starts_with(&prefix));
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

/// The offset tables' key of (topic, group).
fn offset_key(topic: &str, group: &str) -> String {
    let mut key = String::with_capacity(topic.len() + 1 + group.len());
    key.push_str(topic);
    key.push(crate::config_tables::TOPIC_GROUP_SEPARATOR);
    key.push_str(group);
    key
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

    #[test]
    fn a_slave_keeps_its_own_offsets_until_the_master_moves() {
        let dir = tempfile::tempdir().unwrap();
        let m = ConsumerOffsetManager::open(dir.path()).unwrap();
        m.follow_master();
        let master = |offset: i64| -> OffsetTable {
            let mut table = OffsetTable::new();
            table.insert("T@g".to_owned(), [(1, offset)].into_iter().collect());
            table
        };
        assert_eq!(m.merge_from_master(&master(0)), 1);
        m.commit_offset("slave-reader", "g", "T", 1, 15);
        // Two copies of an unchanged master, one right after the commit and one later.
        m.merge_from_master(&master(0));
        assert_eq!(m.query_offset("g", "T", 1), 15);
        m.merge_from_master(&master(0));
        assert_eq!(
            m.query_offset("g", "T", 1),
            15,
            "an unchanged master moved it back"
        );
        // The master moves (a reset there, even a lower one): it wins.
        m.merge_from_master(&master(3));
        assert_eq!(m.query_offset("g", "T", 1), 3);
    }

    #[test]
    fn pull_offsets_fall_back_to_the_committed_offset() {
        let dir = tempfile::tempdir().unwrap();
        let m = ConsumerOffsetManager::open(dir.path()).unwrap();
        assert_eq!(m.query_pull_offset("g", "T", 0), NO_OFFSET);
        m.commit_offset("127.0.0.1:5555", "g", "T", 0, 4);
        assert_eq!(m.query_pull_offset("g", "T", 0), 4);
        m.commit_pull_offset("g", "T", 0, 9);
        assert_eq!(m.query_pull_offset("g", "T", 0), 9);
        assert_eq!(m.query_pull_offset("g", "T", 1), NO_OFFSET);
        assert_eq!(m.query_pull_offset("g2", "T", 0), NO_OFFSET);
        m.remove_group("g");
        assert_eq!(m.query_pull_offset("g", "T", 0), NO_OFFSET);
        m.commit_pull_offset("g", "T", 0, 9);
        m.remove_topic("T");
        assert_eq!(m.query_pull_offset("g", "T", 0), NO_OFFSET);
    }
}
