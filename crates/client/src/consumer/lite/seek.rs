//! Positions of the lite pull consumer's queues: seek, pause and resume, and where a queue
//! without a position starts.
//!
//! Repositioning and pausing bump the queue's *epoch*: buffered batches and in-flight pulls of an
//! older epoch are discarded, so after `seek` returns, `poll` never yields a message from before
//! the new position, and a resumed queue is read again from its consume offset.

use std::sync::Arc;

use super::{DEFAULT_CONSUME_TIMESTAMP_LOOKBACK, DefaultLitePullConsumer, LiteInner, Runtime};
use crate::consumer::offset_store::ReadOffsetType;
use crate::consumer::{ConsumeFromWhere, MessageQueue, is_retry_topic, now_millis};
use crate::error::{ClientError, Result};

impl DefaultLitePullConsumer {
    /// Moves `mq` to `offset`, which must lie within the queue's `[min, max]`. Buffered and
    /// in-flight messages of the queue are discarded; the next batch of it starts at `offset`.
    pub async fn seek(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        let runtime = self.inner.running_runtime()?;
        if !self.inner.queues.lock().contains_key(mq) {
            return Err(ClientError::IllegalArgument(format!(
                "the message queue is not in the assigned list: {mq}"
            )));
        }
        let min = runtime.access.min_offset(mq).await?;
        let max = runtime.access.max_offset(mq).await?;
        if offset < min || offset > max {
            return Err(ClientError::IllegalArgument(format!(
                "seek offset {offset} is out of [{min}, {max}] of {mq}"
            )));
        }
        self.inner.reposition(mq, offset);
        Ok(())
    }

    /// Moves `mq` to its first stored message.
    pub async fn seek_to_begin(&self, mq: &MessageQueue) -> Result<()> {
        let min = self.inner.running_runtime()?.access.min_offset(mq).await?;
        self.seek(mq, min).await
    }

    /// Moves `mq` past its last message (only new messages will be read).
    pub async fn seek_to_end(&self, mq: &MessageQueue) -> Result<()> {
        let max = self.inner.running_runtime()?.access.max_offset(mq).await?;
        self.seek(mq, max).await
    }

    /// The offset of the first message of `mq` stored at or after `timestamp` (ms), for
    /// [`Self::seek`].
    pub async fn offset_for_timestamp(&self, mq: &MessageQueue, timestamp: i64) -> Result<i64> {
        self.inner
            .running_runtime()?
            .access
            .search_offset(mq, timestamp)
            .await
    }

    /// Stops pulling and delivering `queues` until [`Self::resume`]. Buffered messages of them
    /// are discarded and read again after the resume.
    pub fn pause(&self, queues: &[MessageQueue]) {
        self.inner.paused.lock().extend(queues.iter().cloned());
        for mq in queues {
            let consume_offset = self.inner.queues.lock().get(mq).map(|q| q.consume_offset);
            if let Some(offset) = consume_offset.filter(|o| *o >= 0) {
                self.inner.reposition(mq, offset);
            } else {
                self.inner.invalidate(mq);
            }
        }
    }

    /// Resumes paused `queues`.
    pub fn resume(&self, queues: &[MessageQueue]) {
        let mut paused = self.inner.paused.lock();
        for mq in queues {
            paused.remove(mq);
        }
        drop(paused);
        let queues_table = self.inner.queues.lock();
        for mq in queues {
            if let Some(q) = queues_table.get(mq) {
                q.wake.notify_one();
            }
        }
    }

    /// Whether `mq` is paused.
    pub fn is_paused(&self, mq: &MessageQueue) -> bool {
        self.inner.paused.lock().contains(mq)
    }
}

impl LiteInner {
    /// Sets the next pull and consume offset of `mq` and discards everything older.
    pub(super) fn reposition(&self, mq: &MessageQueue, offset: i64) {
        let wake = {
            let mut queues = self.queues.lock();
            let Some(q) = queues.get_mut(mq) else { return };
            q.epoch += 1;
            q.pull_offset = Some(offset);
            q.consume_offset = offset;
            q.cached_msgs = 0;
            q.cached_bytes = 0;
            Arc::clone(&q.wake)
        };
        self.drop_buffered(mq);
        wake.notify_one();
    }

    /// Discards everything buffered or in flight for `mq` without choosing a new position.
    fn invalidate(&self, mq: &MessageQueue) {
        let wake = {
            let mut queues = self.queues.lock();
            let Some(q) = queues.get_mut(mq) else { return };
            q.epoch += 1;
            if q.consume_offset >= 0 {
                q.pull_offset = Some(q.consume_offset);
            }
            q.cached_msgs = 0;
            q.cached_bytes = 0;
            Arc::clone(&q.wake)
        };
        self.drop_buffered(mq);
        wake.notify_one();
    }

    /// Where a queue without a position starts: the committed offset, else per
    /// `consume_from_where` — the queue's min offset for the first offset, its max offset for the
    /// last (0 for the retry topic), and for a timestamp the offset found by searching the queue
    /// for `consume_timestamp`, by default 30 minutes ago (the max offset for the retry topic).
    pub(super) async fn compute_start_offset(
        &self,
        rt: &Runtime,
        mq: &MessageQueue,
    ) -> Result<i64> {
        if let Some(offset) = rt
            .store
            .read_offset(mq, ReadOffsetType::ReadFromStore)
            .await?
            .filter(|o| *o >= 0)
        {
            return Ok(offset);
        }
        match self.config.consume_from_where {
            ConsumeFromWhere::ConsumeFromFirstOffset | ConsumeFromWhere::ConsumeFromMinOffset => {
                rt.access.min_offset(mq).await
            }
            ConsumeFromWhere::ConsumeFromTimestamp => {
                if is_retry_topic(&mq.topic) {
                    return rt.access.max_offset(mq).await;
                }
                let lookback = i64::try_from(DEFAULT_CONSUME_TIMESTAMP_LOOKBACK.as_millis())
                    .unwrap_or(i64::MAX);
                let ts = self
                    .config
                    .consume_timestamp
                    .unwrap_or_else(|| now_millis().saturating_sub(lookback));
                rt.access.search_offset(mq, ts).await
            }
            ConsumeFromWhere::ConsumeFromLastOffset
            | ConsumeFromWhere::ConsumeFromLastOffsetAndFromMinWhenBootFirst
            | ConsumeFromWhere::ConsumeFromMaxOffset => {
                if is_retry_topic(&mq.topic) {
                    Ok(0)
                } else {
                    rt.access.max_offset(mq).await
                }
            }
        }
    }
}
