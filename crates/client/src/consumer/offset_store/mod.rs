//! Offset stores: where a consumer group's progress lives.
//!
//! Clustering groups share queues, so their progress must live where every member can read it:
//! on the broker ([`RemoteBrokerOffsetStore`]). Broadcasting members each read every queue, so
//! each keeps its own progress in a local file ([`LocalFileOffsetStore`]). Both keep a table in
//! memory that consumption updates on every batch and that is persisted periodically (every
//! `persist_consumer_offset_interval`, 5 s) and on shutdown, because writing on every message
//! would cost a round trip or an fsync per message. The price is that a crash may redeliver up to
//! one interval of messages: RocketMQ is at-least-once.

use std::collections::{HashMap, HashSet};

use futures::future::BoxFuture;

use crate::consumer::MessageQueue;
use crate::error::ClientError;

pub mod local;
pub mod remote;

pub use local::{LOCAL_OFFSET_STORE_DIR_ENV, LocalFileOffsetStore, default_local_offset_store_dir};
pub use remote::RemoteBrokerOffsetStore;

/// Where [`OffsetStore::read_offset`] looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadOffsetType {
    /// Only the in-memory table.
    ReadFromMemory,
    /// Only the persistent store (broker or file); refreshes the in-memory table.
    ReadFromStore,
    /// The in-memory table, falling back to the persistent store.
    MemoryFirstThenStore,
}

/// A consumer group's offset table.
///
/// `read_offset` answers `Ok(None)` when no offset is stored for the queue (the broker's
/// QUERY_NOT_FOUND, an absent file entry) and `Err` when the store could not be asked; rebalance
/// treats the two differently (start per ConsumeFromWhere vs. skip the queue for now).
pub trait OffsetStore: Send + Sync + 'static {
    /// Loads the persistent table into memory (a no-op for the broker store).
    fn load(&self) -> Result<(), ClientError>;

    /// Records `offset` as the next offset to consume of `mq`. With `increase_only`, a lower
    /// value than the one in memory is ignored (concurrent consumers finish out of order).
    fn update_offset(&self, mq: &MessageQueue, offset: i64, increase_only: bool);

    /// The stored next offset of `mq`, from memory or from the store as `read_type` says; `None`
    /// when there is none.
    fn read_offset<'a>(
        &'a self,
        mq: &'a MessageQueue,
        read_type: ReadOffsetType,
    ) -> BoxFuture<'a, Result<Option<i64>, ClientError>>;

    /// Persists the offsets of `mqs`. The broker store also forgets the in-memory entries of
    /// every other queue (queues the consumer no longer owns).
    fn persist_all<'a>(&'a self, mqs: &'a HashSet<MessageQueue>) -> BoxFuture<'a, ()>;

    /// Persists the offset of one queue.
    fn persist<'a>(&'a self, mq: &'a MessageQueue) -> BoxFuture<'a, ()>;

    /// Records `offset` and persists it, reporting failure (the periodic persistence is
    /// fire-and-forget; an offset reset must know it took effect before the queue restarts).
    fn update_and_persist_offset<'a>(
        &'a self,
        mq: &'a MessageQueue,
        offset: i64,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        self.update_offset(mq, offset, false);
        Box::pin(async move {
            self.persist(mq).await;
            Ok(())
        })
    }

    /// Forgets the in-memory offset of `mq`.
    fn remove_offset(&self, mq: &MessageQueue);

    /// The in-memory offsets of `topic` (every topic when `topic` is empty).
    fn clone_offset_table(&self, topic: &str) -> HashMap<MessageQueue, i64>;
}

/// The in-memory table both stores share.
#[derive(Debug, Default)]
pub(crate) struct OffsetTable {
    table: parking_lot::RwLock<HashMap<MessageQueue, i64>>,
}

impl OffsetTable {
    pub(crate) fn update(&self, mq: &MessageQueue, offset: i64, increase_only: bool) {
        let mut table = self.table.write();
        match table.get_mut(mq) {
            Some(current) => {
                if !increase_only || offset > *current {
                    *current = offset;
                }
            }
            None => {
                table.insert(mq.clone(), offset);
            }
        }
    }

    pub(crate) fn get(&self, mq: &MessageQueue) -> Option<i64> {
        self.table.read().get(mq).copied()
    }

    pub(crate) fn remove(&self, mq: &MessageQueue) {
        self.table.write().remove(mq);
    }

    pub(crate) fn snapshot(&self) -> HashMap<MessageQueue, i64> {
        self.table.read().clone()
    }

    /// Drops entries not in `keep`.
    pub(crate) fn retain(&self, keep: &HashSet<MessageQueue>) {
        self.table.write().retain(|mq, _| keep.contains(mq));
    }

    pub(crate) fn clone_topic(&self, topic: &str) -> HashMap<MessageQueue, i64> {
        self.table
            .read()
            .iter()
            .filter(|(mq, _)| topic.is_empty() || mq.topic == topic)
            .map(|(mq, o)| (mq.clone(), *o))
            .collect()
    }

    pub(crate) fn replace_all(&self, entries: HashMap<MessageQueue, i64>) {
        let mut table = self.table.write();
        for (mq, offset) in entries {
            table.insert(mq, offset);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increase_only_ignores_lower_offsets() {
        let table = OffsetTable::default();
        let mq = MessageQueue::new("T", "b", 0);
        table.update(&mq, 10, true);
        table.update(&mq, 5, true);
        assert_eq!(table.get(&mq), Some(10));
        table.update(&mq, 5, false);
        assert_eq!(table.get(&mq), Some(5));
        table.retain(&HashSet::new());
        assert_eq!(table.get(&mq), None);
    }
}
