//! The controller's Raft log, vote and applied snapshot on disk, in one redb database
//! (`<controllerStorePath>/raft.redb`).
//!
//! Every write is a redb transaction committed with immediate durability (an fsync), so a vote
//! or an entry openraft was told is saved survives `kill -9` and power loss: the log's
//! promise to openraft holds before [`LogFlushed`] is signalled. Entries are JSON, keyed by
//! their index; the vote, the committed id, the last purged id and the latest snapshot live in
//! a small key/value table beside them.
//!
//! redb's calls block on the disk, so each runs on tokio's blocking pool.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{AnyError, LogId, OptionalSend, RaftLogReader, StorageError, StorageIOError, Vote};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Entry, NodeId, TypeConfig};

const LOGS: TableDefinition<u64, &[u8]> = TableDefinition::new("logs");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

const KEY_VOTE: &str = "vote";
const KEY_COMMITTED: &str = "committed";
const KEY_LAST_PURGED: &str = "last_purged";
/// The latest snapshot the state machine built or installed (see `state_machine`).
pub(crate) const KEY_SNAPSHOT: &str = "snapshot";

/// Most entries one read hands openraft: replication batches are bounded by this.
const MAX_ENTRIES_PER_READ: usize = 4096;

type StorageResult<T> = Result<T, StorageError<NodeId>>;

/// Opens (or creates) the controller's database under `dir`.
pub(crate) fn open_database(dir: &Path) -> std::io::Result<Arc<Database>> {
    std::fs::create_dir_all(dir)?;
    let db = Database::create(dir.join("raft.redb")).map_err(std::io::Error::other)?;
    let txn = db.begin_write().map_err(std::io::Error::other)?;
    txn.open_table(LOGS).map_err(std::io::Error::other)?;
    txn.open_table(META).map_err(std::io::Error::other)?;
    txn.commit().map_err(std::io::Error::other)?;
    Ok(Arc::new(db))
}

/// Runs `f` on the blocking pool; a failure (or a panic there) becomes a storage error of the
/// kind `wrap` names.
async fn blocking<T, F>(wrap: fn(AnyError) -> StorageIOError<NodeId>, f: F) -> StorageResult<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, AnyError> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result.map_err(|e| wrap(e).into()),
        Err(join) => Err(wrap(AnyError::error(format!("storage task failed: {join}"))).into()),
    }
}

fn any(e: impl std::fmt::Display) -> AnyError {
    AnyError::error(e.to_string())
}

/// Reads one JSON value of the meta table.
pub(crate) fn read_meta<T: DeserializeOwned>(
    db: &Database,
    key: &str,
) -> Result<Option<T>, AnyError> {
    let txn = db.begin_read().map_err(any)?;
    let table = txn.open_table(META).map_err(any)?;
    let Some(raw) = table.get(key).map_err(any)? else {
        return Ok(None);
    };
    serde_json::from_slice(raw.value()).map(Some).map_err(any)
}

/// Writes one JSON value of the meta table, durably.
pub(crate) fn write_meta<T: Serialize>(
    db: &Database,
    key: &str,
    value: &T,
) -> Result<(), AnyError> {
    let bytes = serde_json::to_vec(value).map_err(any)?;
    let txn = db.begin_write().map_err(any)?;
    {
        let mut table = txn.open_table(META).map_err(any)?;
        table.insert(key, bytes.as_slice()).map_err(any)?;
    }
    txn.commit().map_err(any)
}

fn read_range(db: &Database, start: u64, end: Bound<u64>) -> Result<Vec<Entry>, AnyError> {
    let txn = db.begin_read().map_err(any)?;
    let table = txn.open_table(LOGS).map_err(any)?;
    let range = match end {
        Bound::Included(e) => table.range(start..=e),
        Bound::Excluded(e) => table.range(start..e),
        Bound::Unbounded => table.range(start..),
    }
    .map_err(any)?;
    let mut out = Vec::new();
    for item in range.take(MAX_ENTRIES_PER_READ) {
        let (_, value) = item.map_err(any)?;
        out.push(serde_json::from_slice(value.value()).map_err(any)?);
    }
    Ok(out)
}

/// The Raft log of one controller.
#[derive(Clone)]
pub(crate) struct LogStore {
    db: Arc<Database>,
}

impl LogStore {
    pub(crate) fn new(db: Arc<Database>) -> Self {
        LogStore { db }
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<Entry>> {
        let start = match range.start_bound() {
            Bound::Included(s) => *s,
            Bound::Excluded(s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = range.end_bound().cloned();
        let db = Arc::clone(&self.db);
        blocking(StorageIOError::read_logs, move || {
            read_range(&db, start, end)
        })
        .await
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> StorageResult<LogState<TypeConfig>> {
        let db = Arc::clone(&self.db);
        blocking(StorageIOError::read_logs, move || {
            let last_purged: Option<LogId<NodeId>> = read_meta(&db, KEY_LAST_PURGED)?;
            let txn = db.begin_read().map_err(any)?;
            let table = txn.open_table(LOGS).map_err(any)?;
            let last = match table.last().map_err(any)? {
                Some((_, value)) => {
                    let entry: Entry = serde_json::from_slice(value.value()).map_err(any)?;
                    Some(entry.log_id)
                }
                None => last_purged,
            };
            Ok(LogState {
                last_purged_log_id: last_purged,
                last_log_id: last,
            })
        })
        .await
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> StorageResult<()> {
        let db = Arc::clone(&self.db);
        let vote = *vote;
        blocking(StorageIOError::write_vote, move || {
            write_meta(&db, KEY_VOTE, &vote)
        })
        .await
    }

    async fn read_vote(&mut self) -> StorageResult<Option<Vote<NodeId>>> {
        let db = Arc::clone(&self.db);
        blocking(StorageIOError::read_vote, move || read_meta(&db, KEY_VOTE)).await
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> StorageResult<()> {
        let db = Arc::clone(&self.db);
        blocking(StorageIOError::write_logs, move || {
            write_meta(&db, KEY_COMMITTED, &committed)
        })
        .await
    }

    async fn read_committed(&mut self) -> StorageResult<Option<LogId<NodeId>>> {
        let db = Arc::clone(&self.db);
        blocking(StorageIOError::read_logs, move || {
            Ok(read_meta::<Option<LogId<NodeId>>>(&db, KEY_COMMITTED)?.flatten())
        })
        .await
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StorageResult<()>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut encoded = Vec::new();
        for entry in entries {
            let bytes = serde_json::to_vec(&entry)
                .map_err(|e| StorageError::from(StorageIOError::write_logs(any(e))))?;
            encoded.push((entry.log_id.index, bytes));
        }
        let db = Arc::clone(&self.db);
        let result = blocking(StorageIOError::write_logs, move || {
            let txn = db.begin_write().map_err(any)?;
            {
                let mut table = txn.open_table(LOGS).map_err(any)?;
                for (index, bytes) in &encoded {
                    table.insert(*index, bytes.as_slice()).map_err(any)?;
                }
            }
            txn.commit().map_err(any)
        })
        .await;
        match &result {
            Ok(()) => callback.log_io_completed(Ok(())),
            Err(e) => callback.log_io_completed(Err(std::io::Error::other(e.to_string()))),
        }
        result
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        let db = Arc::clone(&self.db);
        blocking(StorageIOError::write_logs, move || {
            let txn = db.begin_write().map_err(any)?;
            {
                let mut table = txn.open_table(LOGS).map_err(any)?;
                table.retain_in(log_id.index.., |_, _| false).map_err(any)?;
            }
            txn.commit().map_err(any)
        })
        .await
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        let db = Arc::clone(&self.db);
        blocking(StorageIOError::write_logs, move || {
            let bytes = serde_json::to_vec(&Some(log_id)).map_err(any)?;
            let txn = db.begin_write().map_err(any)?;
            {
                let mut meta = txn.open_table(META).map_err(any)?;
                meta.insert(KEY_LAST_PURGED, bytes.as_slice())
                    .map_err(any)?;
                let mut table = txn.open_table(LOGS).map_err(any)?;
                table
                    .retain_in(..=log_id.index, |_, _| false)
                    .map_err(any)?;
            }
            txn.commit().map_err(any)
        })
        .await
    }
}
