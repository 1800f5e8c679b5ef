//! The replicated state machine: [`Replicas`] as of the last applied entry, and its snapshots.
//!
//! The state lives in memory and is shared with the request processors, which read it directly
//! (a leader answers reads from what it applied). Durability comes from the log: on start the
//! latest snapshot is loaded from the database and openraft re-applies the committed entries
//! after it. A snapshot is the JSON of the whole state; it is written to the database before
//! openraft is told it exists, so a purged log is always covered by a saved snapshot.

use std::io::Cursor;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use openraft::storage::{RaftStateMachine, Snapshot, SnapshotMeta};
use openraft::{
    AnyError, BasicNode, EntryPayload, LogId, RaftSnapshotBuilder, StorageError, StorageIOError,
    StoredMembership,
};
use parking_lot::RwLock;
use redb::Database;
use serde::{Deserialize, Serialize};

use super::log_store::{KEY_SNAPSHOT, read_meta, write_meta};
use super::{Entry, NodeId, TypeConfig};
use crate::replicas::{CommandResult, Replicas};

type StorageResult<T> = Result<T, StorageError<NodeId>>;

/// What the state machine holds: the registry and the Raft bookkeeping a snapshot must carry.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct AppliedState {
    pub(crate) last_applied: Option<LogId<NodeId>>,
    pub(crate) membership: StoredMembership<NodeId, BasicNode>,
    pub(crate) replicas: Replicas,
}

/// A snapshot as saved in the database.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, BasicNode>,
    data: Vec<u8>,
}

/// The state machine openraft drives; clones share the state.
#[derive(Clone)]
pub(crate) struct StateMachineStore {
    db: Arc<Database>,
    state: Arc<RwLock<AppliedState>>,
    snapshots_built: Arc<AtomicU64>,
}

fn any(e: impl std::fmt::Display) -> AnyError {
    AnyError::error(e.to_string())
}

impl StateMachineStore {
    /// Opens the state machine over `db`, restored from its saved snapshot if there is one.
    pub(crate) fn open(db: Arc<Database>) -> std::io::Result<Self> {
        let saved: Option<StoredSnapshot> =
            read_meta(&db, KEY_SNAPSHOT).map_err(std::io::Error::other)?;
        let state = match saved {
            Some(snapshot) => {
                serde_json::from_slice(&snapshot.data).map_err(std::io::Error::other)?
            }
            None => AppliedState::default(),
        };
        Ok(StateMachineStore {
            db,
            state: Arc::new(RwLock::new(state)),
            snapshots_built: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The shared state, for readers.
    pub(crate) fn state(&self) -> Arc<RwLock<AppliedState>> {
        Arc::clone(&self.state)
    }

    async fn save_snapshot(&self, snapshot: StoredSnapshot) -> StorageResult<()> {
        let db = Arc::clone(&self.db);
        let signature = snapshot.meta.signature();
        match tokio::task::spawn_blocking(move || write_meta(&db, KEY_SNAPSHOT, &snapshot)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(StorageIOError::write_snapshot(Some(signature), e).into()),
            Err(join) => Err(StorageIOError::write_snapshot(Some(signature), any(join)).into()),
        }
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        let (data, last_applied, membership) = {
            let state = self.state.read();
            let data = serde_json::to_vec(&*state)
                .map_err(|e| StorageError::from(StorageIOError::read_state_machine(any(e))))?;
            (data, state.last_applied, state.membership.clone())
        };
        let built = self.snapshots_built.fetch_add(1, Ordering::Relaxed) + 1;
        let snapshot_id = match last_applied {
            Some(id) => format!("{}-{}-{built}", id.leader_id, id.index),
            None => format!("empty-{built}"),
        };
        let meta = SnapshotMeta {
            last_log_id: last_applied,
            last_membership: membership,
            snapshot_id,
        };
        self.save_snapshot(StoredSnapshot {
            meta: meta.clone(),
            data: data.clone(),
        })
        .await?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> StorageResult<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>)> {
        let state = self.state.read();
        Ok((state.last_applied, state.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> StorageResult<Vec<CommandResult>>
    where
        I: IntoIterator<Item = Entry> + openraft::OptionalSend,
        I::IntoIter: openraft::OptionalSend,
    {
        let mut state = self.state.write();
        let mut results = Vec::new();
        for entry in entries {
            state.last_applied = Some(entry.log_id);
            let result = match entry.payload {
                EntryPayload::Blank => Ok(crate::replicas::Reply::Done),
                EntryPayload::Normal(command) => state.replicas.apply(command),
                EntryPayload::Membership(membership) => {
                    state.membership = StoredMembership::new(Some(entry.log_id), membership);
                    Ok(crate::replicas::Reply::Done)
                }
            };
            results.push(result);
        }
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> StorageResult<()> {
        let data = snapshot.into_inner();
        let installed: AppliedState = serde_json::from_slice(&data).map_err(|e| {
            StorageError::from(StorageIOError::read_snapshot(
                Some(meta.signature()),
                any(e),
            ))
        })?;
        self.save_snapshot(StoredSnapshot {
            meta: meta.clone(),
            data,
        })
        .await?;
        let mut state = self.state.write();
        *state = AppliedState {
            last_applied: meta.last_log_id,
            membership: meta.last_membership.clone(),
            replicas: installed.replicas,
        };
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        let db = Arc::clone(&self.db);
        let saved = match tokio::task::spawn_blocking(move || {
            read_meta::<StoredSnapshot>(&db, KEY_SNAPSHOT)
        })
        .await
        {
            Ok(Ok(saved)) => saved,
            Ok(Err(e)) => return Err(StorageIOError::read_snapshot(None, e).into()),
            Err(join) => return Err(StorageIOError::read_snapshot(None, any(join)).into()),
        };
        Ok(saved.map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}
