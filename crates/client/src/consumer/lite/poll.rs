//! The lite pull consumer's buffer, as the application sees it: `poll` takes the next batch a
//! pull task buffered, skipping batches of queues that were repositioned or given up since, and
//! advances the batch's queue's consume offset to just past its last message.

use std::time::Duration;

use tokio::time::Instant;

use super::{DEFAULT_POLL_TIMEOUT, DefaultLitePullConsumer, LiteInner, LitePullBatch};
use crate::consumer::push::hook::ConsumeMessageContext;
use crate::consumer::{MessageExt, MessageQueue};
use crate::error::Result;

impl DefaultLitePullConsumer {
    /// The next batch, waiting up to `timeout` for one; empty when nothing arrived in time.
    /// Advances the consume offset of the returned messages' queue.
    pub async fn poll(&self, timeout: Duration) -> Result<Vec<MessageExt>> {
        Ok(self
            .poll_batch(timeout)
            .await?
            .map(|b| b.messages)
            .unwrap_or_default())
    }

    /// Like [`Self::poll`], but also says which queue the batch came from (every batch comes
    /// from one queue), for applications that commit per queue.
    pub async fn poll_batch(&self, timeout: Duration) -> Result<Option<LitePullBatch>> {
        let runtime = self.inner.running_runtime()?;
        let deadline = Instant::now() + timeout;
        loop {
            self.inner.maybe_auto_commit(&runtime);
            if let Some(batch) = self.inner.take_batch() {
                return Ok(Some(self.inner.run_hooks(batch)));
            }
            let ready = self.inner.buffer_ready.notified();
            tokio::pin!(ready);
            ready.as_mut().enable();
            if let Some(batch) = self.inner.take_batch() {
                return Ok(Some(self.inner.run_hooks(batch)));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::select! {
                () = ready => {}
                () = tokio::time::sleep_until(deadline) => return Ok(None),
                () = self.inner.stop.cancelled() => return Ok(None),
            }
        }
    }

    /// [`Self::poll`] with the default 5 s timeout.
    pub async fn poll_default(&self) -> Result<Vec<MessageExt>> {
        self.poll(DEFAULT_POLL_TIMEOUT).await
    }
}

impl LiteInner {
    /// Runs the consume hooks on a polled batch, as the Java lite consumer does: before, then
    /// after with success.
    fn run_hooks(&self, batch: LitePullBatch) -> LitePullBatch {
        let hooks = self.consume_hooks.read().clone();
        if hooks.is_empty() {
            return batch;
        }
        let mut ctx = ConsumeMessageContext {
            consumer_group: self.config.consumer_group.clone(),
            message_queue: batch.queue.clone(),
            msg_list: batch.messages,
            success: false,
            status: String::new(),
            props: Default::default(),
            namespace: self.config.client.namespace.clone(),
        };
        for hook in &hooks {
            hook.consume_message_before(&mut ctx);
        }
        ctx.status = "CONSUME_SUCCESS".to_owned();
        ctx.success = true;
        for hook in &hooks {
            hook.consume_message_after(&mut ctx);
        }
        LitePullBatch {
            queue: batch.queue,
            messages: ctx.msg_list,
        }
    }

    pub(super) fn drop_buffered(&self, mq: &MessageQueue) {
        let mut buffer = self.buffer.lock();
        let mut dropped = 0;
        buffer.retain(|r| {
            let keep = r.mq != *mq;
            if !keep {
                dropped += r.msgs.len();
            }
            keep
        });
        let mut count = self.buffered_msgs.lock();
        *count = count.saturating_sub(dropped);
    }

    /// Pops the next deliverable batch, advancing its queue's consume offset.
    fn take_batch(&self) -> Option<LitePullBatch> {
        loop {
            let request = self.buffer.lock().pop_front()?;
            {
                let mut count = self.buffered_msgs.lock();
                *count = count.saturating_sub(request.msgs.len());
            }
            let mut queues = self.queues.lock();
            let Some(q) = queues.get_mut(&request.mq) else {
                continue;
            };
            if q.epoch != request.epoch {
                continue;
            }
            q.cached_msgs = q.cached_msgs.saturating_sub(request.msgs.len());
            q.cached_bytes = q.cached_bytes.saturating_sub(request.bytes);
            if let Some(last) = request.msgs.last() {
                q.consume_offset = last.queue_offset.saturating_add(1);
            }
            return Some(LitePullBatch {
                queue: request.mq,
                messages: request.msgs,
            });
        }
    }
}
