//! The table of all ConsumeQueues of a store: topic → queue id → queue, created on demand.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

use super::{CONSUME_QUEUE_DIR, ConsumeQueue};
use crate::error::StoreError;

/// A ConsumeQueue shared between the dispatcher (writer) and the read path.
pub type SharedConsumeQueue = Arc<RwLock<ConsumeQueue>>;

/// All ConsumeQueues of a store: topic → queue id → queue, created on demand.
pub struct ConsumeQueueTable {
    root: PathBuf,
    entries_per_file: usize,
    queues: RwLock<HashMap<String, HashMap<i32, SharedConsumeQueue>>>,
}

impl std::fmt::Debug for ConsumeQueueTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumeQueueTable")
            .field("root", &self.root)
            .field("topics", &self.queues.read().len())
            .finish()
    }
}

impl ConsumeQueueTable {
    /// An empty table for the store at `root`; queues are created by [`Self::find_or_create`].
    pub fn new(root: &Path, entries_per_file: usize) -> Self {
        ConsumeQueueTable {
            root: root.to_path_buf(),
            entries_per_file,
            queues: RwLock::new(HashMap::new()),
        }
    }

    /// Opens every queue found under `<root>/consumequeue/<topic>/<queueId>` (not yet recovered).
    pub fn load(root: &Path, entries_per_file: usize) -> Result<Self, StoreError> {
        let table = ConsumeQueueTable::new(root, entries_per_file);
        let base = root.join(CONSUME_QUEUE_DIR);
        let topics = match fs::read_dir(&base) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(table),
            Err(e) => return Err(StoreError::io(&base, e)),
        };
        let mut map: HashMap<String, HashMap<i32, SharedConsumeQueue>> = HashMap::new();
        for topic_entry in topics {
            let topic_entry = topic_entry.map_err(|e| StoreError::io(&base, e))?;
            let topic_path = topic_entry.path();
            let Some(topic) = topic_entry.file_name().to_str().map(str::to_owned) else {
                tracing::warn!(path = %topic_path.display(), "ignoring non-UTF-8 topic directory");
                continue;
            };
            if !topic_path.is_dir() {
                continue;
            }
            let queue_dirs =
                fs::read_dir(&topic_path).map_err(|e| StoreError::io(&topic_path, e))?;
            for queue_entry in queue_dirs {
                let queue_entry = queue_entry.map_err(|e| StoreError::io(&topic_path, e))?;
                let queue_id = queue_entry
                    .file_name()
                    .to_str()
                    .and_then(|s| s.parse::<i32>().ok())
                    .filter(|id| *id >= 0);
                let Some(queue_id) = queue_id else {
                    tracing::warn!(path = %queue_entry.path().display(),
                        "ignoring unexpected entry in consume queue topic directory");
                    continue;
                };
                let queue = ConsumeQueue::open(root, &topic, queue_id, entries_per_file)?;
                map.entry(topic.clone())
                    .or_default()
                    .insert(queue_id, Arc::new(RwLock::new(queue)));
            }
        }
        *table.queues.write() = map;
        Ok(table)
    }

    /// Recovers every queue (see [`ConsumeQueue::recover`]); returns the queues that lost units
    /// and must be refilled from the CommitLog.
    pub fn recover_all(&self) -> Result<Vec<SharedConsumeQueue>, StoreError> {
        let mut damaged = Vec::new();
        for queue in self.all() {
            if queue.write().recover()? {
                damaged.push(queue);
            }
        }
        Ok(damaged)
    }

    /// The queue of (topic, queue id) if it exists.
    pub fn find(&self, topic: &str, queue_id: i32) -> Option<SharedConsumeQueue> {
        self.queues.read().get(topic)?.get(&queue_id).cloned()
    }

    /// The queue of (topic, queue id), created (empty, no file yet) if needed.
    pub fn find_or_create(
        &self,
        topic: &str,
        queue_id: i32,
    ) -> Result<SharedConsumeQueue, StoreError> {
        if let Some(queue) = self.find(topic, queue_id) {
            return Ok(queue);
        }
        let mut queues = self.queues.write();
        let per_topic = queues.entry(topic.to_owned()).or_default();
        if let Some(queue) = per_topic.get(&queue_id) {
            return Ok(queue.clone());
        }
        let queue = ConsumeQueue::open(&self.root, topic, queue_id, self.entries_per_file)?;
        let shared = Arc::new(RwLock::new(queue));
        per_topic.insert(queue_id, shared.clone());
        Ok(shared)
    }

    /// Every queue, for whole-store operations.
    pub fn all(&self) -> Vec<SharedConsumeQueue> {
        self.queues
            .read()
            .values()
            .flat_map(|per_topic| per_topic.values().cloned())
            .collect()
    }

    /// `(topic, queue id, queue)` for every queue, sorted by topic then queue id.
    pub fn entries(&self) -> Vec<(String, i32, SharedConsumeQueue)> {
        let mut out: Vec<_> = self
            .queues
            .read()
            .iter()
            .flat_map(|(topic, per_topic)| {
                per_topic
                    .iter()
                    .map(|(id, q)| (topic.clone(), *id, q.clone()))
            })
            .collect();
        out.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        out
    }

    /// Queue ids of a topic.
    pub fn queue_ids(&self, topic: &str) -> Vec<i32> {
        let mut ids: Vec<i32> = self
            .queues
            .read()
            .get(topic)
            .map(|q| q.keys().copied().collect())
            .unwrap_or_default();
        ids.sort_unstable();
        ids
    }

    /// `topic-queueId → max offset` of every queue, from which the CommitLog rebuilds its
    /// next-queue-offset table at start-up.
    pub fn max_offsets(&self) -> HashMap<String, i64> {
        self.entries()
            .into_iter()
            .map(|(topic, id, q)| (format!("{topic}-{id}"), q.read().max_offset()))
            .collect()
    }

    /// The largest `max_physical_offset` over all queues.
    pub fn max_physical_offset(&self) -> i64 {
        self.all()
            .iter()
            .map(|q| q.read().max_physical_offset())
            .max()
            .unwrap_or(0)
    }

    /// Truncates every queue to the CommitLog end (see [`ConsumeQueue::truncate_dirty`]).
    pub fn truncate_dirty(&self, max_commit_log_offset: i64) -> Result<(), StoreError> {
        for queue in self.all() {
            queue.write().truncate_dirty(max_commit_log_offset)?;
        }
        Ok(())
    }

    /// Deletes expired files of every queue and corrects their min offsets; returns the number
    /// of files deleted.
    pub fn delete_expired(&self, min_commit_log_offset: i64) -> Result<usize, StoreError> {
        let mut deleted = 0;
        for queue in self.all() {
            let mut queue = queue.write();
            deleted += queue.delete_expired(min_commit_log_offset)?;
            queue.correct_min_offset(min_commit_log_offset);
        }
        Ok(deleted)
    }

    /// Flushes every queue.
    pub fn flush(&self) -> Result<(), StoreError> {
        for queue in self.all() {
            let dirty = queue.read().dirty_files();
            for file in dirty {
                file.flush()?;
            }
        }
        Ok(())
    }

    /// Removes a topic's queues from the table and deletes their files; returns how many queues.
    pub fn remove_topic(&self, topic: &str) -> Result<usize, StoreError> {
        let removed = self.queues.write().remove(topic).unwrap_or_default();
        let count = removed.len();
        for (_, shared) in removed {
            match Arc::try_unwrap(shared) {
                Ok(lock) => lock.into_inner().destroy()?,
                Err(shared) => {
                    // Someone still reads it: empty it in place, the files go with the last user.
                    let mut queue = shared.write();
                    queue.truncate_dirty(0)?;
                }
            }
        }
        let topic_dir = self.root.join(CONSUME_QUEUE_DIR).join(topic);
        if topic_dir.is_dir() {
            fs::remove_dir_all(&topic_dir).map_err(|e| StoreError::io(&topic_dir, e))?;
        }
        Ok(count)
    }
}
