//! Committing the lite pull consumer's progress: consume offsets go to the offset store (the
//! broker for clustering, a local file for broadcasting), every `auto_commit_interval` with
//! auto-commit or when the application commits.

use std::collections::{HashMap, HashSet};

use tokio::time::Instant;

use super::{DefaultLitePullConsumer, LiteInner, Runtime};
use crate::consumer::MessageQueue;
use crate::consumer::offset_store::ReadOffsetType;
use crate::error::Result;

impl DefaultLitePullConsumer {
    /// The group's committed offset of `mq` as the store (broker or file) has it; −1 if none.
    pub async fn committed(&self, mq: &MessageQueue) -> Result<i64> {
        let runtime = self.inner.running_runtime()?;
        Ok(runtime
            .store
            .read_offset(mq, ReadOffsetType::ReadFromStore)
            .await?
            .unwrap_or(-1))
    }

    /// Commits the consume offsets of every owned queue and returns once they are stored.
    pub async fn commit_sync(&self) -> Result<()> {
        let runtime = self.inner.running_runtime()?;
        let owned = self.inner.commit_consumed(&runtime);
        runtime.offsets.persist_sync(&owned).await
    }

    /// Commits the given offsets (e.g. to roll a queue back) and, with `persist`, persists them
    /// now.
    pub async fn commit_offsets(
        &self,
        offsets: &HashMap<MessageQueue, i64>,
        persist: bool,
    ) -> Result<()> {
        let runtime = self.inner.running_runtime()?;
        for (mq, offset) in offsets {
            runtime.store.update_offset(mq, *offset, false);
        }
        if persist {
            let queues: HashSet<MessageQueue> = offsets.keys().cloned().collect();
            runtime.offsets.persist_sync(&queues).await?;
        }
        Ok(())
    }
}

impl LiteInner {
    /// Writes every owned queue's consume offset to the store (memory); returns the owned set.
    pub(super) fn commit_consumed(&self, rt: &Runtime) -> HashSet<MessageQueue> {
        let queues = self.queues.lock();
        for (mq, q) in queues.iter() {
            if q.consume_offset >= 0 {
                rt.store.update_offset(mq, q.consume_offset, false);
            }
        }
        *self.last_commit.lock() = Instant::now();
        queues.keys().cloned().collect()
    }

    pub(super) fn maybe_auto_commit(&self, rt: &Runtime) {
        if !self.config.auto_commit {
            return;
        }
        let due = self.last_commit.lock().elapsed() >= self.config.auto_commit_interval;
        if due {
            self.commit_consumed(rt);
        }
    }
}
