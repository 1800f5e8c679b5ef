//! `ConsumeMessageConcurrentlyService`: runs a [`MessageListenerConcurrently`] on batches of
//! `consume_message_batch_max_size` messages, any number of queues and batches at once up to
//! `consume_thread_max` (a semaphore stands in for Java's thread pool).
//!
//! Progress is committed as the [`ProcessQueue`]'s lowest unfinished offset, so batches may finish
//! in any order without a crash skipping anything. Failed messages are handed back to the broker
//! (CONSUMER_SEND_MSG_BACK → `%RETRY%<group>` with a growing delay, eventually the DLQ); only if
//! that fails too are they retried locally after [`CONSUME_LATER_DELAY`]. Broadcasting consumers
//! have no retry topic and drop failed messages with a warning, as Java does.
//!
//! A message whose listener call has been running for longer than `consume_timeout` blocks the
//! queue's committed offset; a sweep every `consume_timeout` sends such messages back and removes
//! them from the cache.

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::hook::ConsumeMessageContext;
use super::{ConsumeService, ProcessQueue, PushConsumerConfig, PushConsumerInner};
use crate::consumer::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, MessageExt, MessageListenerConcurrently,
    MessageModel, MessageQueue, now_millis,
};

/// Delay of a local retry when a failed message could not be sent back.
pub const CONSUME_LATER_DELAY: Duration = Duration::from_millis(5000);
/// Delay level of a message sent back because its consumption timed out.
pub const EXPIRED_MESSAGE_DELAY_LEVEL: i32 = 3;

/// The concurrent consume service of one push consumer.
pub struct ConsumeMessageConcurrentlyService {
    listener: Arc<dyn MessageListenerConcurrently>,
    semaphore: Arc<Semaphore>,
    batch_max: usize,
    consume_timeout: Duration,
}

impl ConsumeMessageConcurrentlyService {
    pub(crate) fn new(
        listener: Arc<dyn MessageListenerConcurrently>,
        config: &PushConsumerConfig,
    ) -> Self {
        ConsumeMessageConcurrentlyService {
            listener,
            semaphore: Arc::new(Semaphore::new(config.consume_thread_max.max(1))),
            batch_max: config.consume_message_batch_max_size.max(1),
            consume_timeout: config.consume_timeout,
        }
    }

    /// Starts the expired-message sweep.
    pub(crate) fn start(&self, consumer: &Arc<PushConsumerInner>, stop: CancellationToken) {
        let period = self.consume_timeout.max(Duration::from_millis(1));
        let weak = Arc::downgrade(consumer);
        consumer.tasks.spawn(async move {
            let mut interval =
                tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    _ = interval.tick() => {}
                }
                let Some(consumer) = weak.upgrade() else {
                    break;
                };
                clean_expire_msg(&consumer).await;
            }
        });
    }

    /// Refuses further work (a start that failed).
    pub(crate) fn close(&self) {
        self.semaphore.close();
    }

    /// Refuses further work; running listener calls finish on their own (the consumer waits for
    /// them up to its await-termination time).
    pub(crate) async fn shutdown(&self, _wait: Duration) {
        self.semaphore.close();
    }

    /// Splits `msgs` into batches and starts a consume task for each.
    pub(crate) fn submit_consume_request(
        &self,
        consumer: &Arc<PushConsumerInner>,
        msgs: Vec<MessageExt>,
        pq: Arc<ProcessQueue>,
        mq: MessageQueue,
    ) {
        // Batches are moved out of `msgs`, not cloned: a message clone costs a topic and a
        // properties allocation, which dominated the push consumer's profile at high rates.
        let batch_max = self.batch_max;
        let mut rest = msgs.into_iter();
        loop {
            let batch: Vec<MessageExt> = rest.by_ref().take(batch_max).collect();
            if batch.is_empty() {
                break;
            }
            let consumer_task = Arc::clone(consumer);
            let pq = Arc::clone(&pq);
            let mq = mq.clone();
            // Boxed: the task then holds a pointer, not the whole consume future (listener call,
            // hooks, send-back), which would otherwise be moved by value through the spawn path
            // once per batch — per message with the default batch size of 1.
            consumer
                .tasks
                .spawn(Box::pin(consume_request(consumer_task, batch, pq, mq)));
        }
    }
}

/// Re-submits `msgs` after [`CONSUME_LATER_DELAY`].
fn submit_consume_request_later(
    consumer: &Arc<PushConsumerInner>,
    msgs: Vec<MessageExt>,
    pq: Arc<ProcessQueue>,
    mq: MessageQueue,
) {
    let stop = consumer.stop.clone();
    let consumer_task = Arc::clone(consumer);
    consumer.tasks.spawn(async move {
        tokio::select! {
            () = stop.cancelled() => {}
            () = tokio::time::sleep(CONSUME_LATER_DELAY) => {
                if let Some(rt) = consumer_task.runtime()
                    && let ConsumeService::Concurrently(service) = &rt.consume_service
                {
                    service.submit_consume_request(&consumer_task, msgs, pq, mq);
                }
            }
        }
    });
}

fn status_name(status: ConsumeConcurrentlyStatus) -> &'static str {
    match status {
        ConsumeConcurrentlyStatus::ConsumeSuccess => "CONSUME_SUCCESS",
        ConsumeConcurrentlyStatus::ReconsumeLater => "RECONSUME_LATER",
    }
}

/// One batch: listener call, hooks, stats, result processing (Java `ConsumeRequest.run`).
async fn consume_request(
    consumer: Arc<PushConsumerInner>,
    mut msgs: Vec<MessageExt>,
    pq: Arc<ProcessQueue>,
    mq: MessageQueue,
) {
    if pq.is_dropped() {
        return;
    }
    let Some(rt) = consumer.runtime() else { return };
    let ConsumeService::Concurrently(service) = &rt.consume_service else {
        return;
    };
    let Ok(_permit) = Arc::clone(&service.semaphore).acquire_owned().await else {
        return;
    };
    if pq.is_dropped() {
        return;
    }
    let hooks = consumer.consume_hooks();
    let mut hook_ctx = (!hooks.is_empty()).then(|| ConsumeMessageContext {
        consumer_group: consumer.config.read().consumer_group.clone(),
        message_queue: mq.clone(),
        msg_list: msgs.clone(),
        success: false,
        status: String::new(),
        props: Default::default(),
        namespace: None,
    });
    if let Some(ctx) = hook_ctx.as_mut() {
        for hook in &hooks {
            hook.consume_message_before(ctx);
        }
    }

    let start = now_millis();
    let stamp = start.to_string();
    for msg in &mut msgs {
        msg.properties.insert(
            comet_protocol::message::properties::keys::CONSUME_START_TIMESTAMP,
            stamp.as_str(),
        );
    }
    // From here on the batch is shared with the process queue (the expiry sweep may need a stuck
    // message back) instead of being copied into it.
    let msgs = Arc::new(msgs);
    pq.mark_consume_start(&msgs, start, &stamp);

    let mut ctx = ConsumeConcurrentlyContext::new(mq.clone());
    let begin = Instant::now();
    let outcome = AssertUnwindSafe(service.listener.consume_message(msgs.as_slice(), &mut ctx))
        .catch_unwind()
        .await;
    let consume_rt = begin.elapsed();
    let (status, return_type) = match outcome {
        Ok(status) => {
            let return_type = if consume_rt >= consumer.config.read().consume_timeout {
                "TIME_OUT"
            } else if status == ConsumeConcurrentlyStatus::ReconsumeLater {
                "FAILED"
            } else {
                "SUCCESS"
            };
            (status, return_type)
        }
        Err(_) => {
            let group = consumer.config.read().consumer_group.clone();
            tracing::warn!(group = %group, %mq, "consumeMessage panicked; the batch will be reconsumed later");
            (ConsumeConcurrentlyStatus::ReconsumeLater, "EXCEPTION")
        }
    };
    if let Some(ctx) = hook_ctx.as_mut() {
        ctx.props
            .insert("ConsumeContextType".to_owned(), return_type.to_owned());
        ctx.status = status_name(status).to_owned();
        ctx.success = status == ConsumeConcurrentlyStatus::ConsumeSuccess;
        for hook in &hooks {
            hook.consume_message_after(ctx);
        }
    }
    let rt_millis = u64::try_from(consume_rt.as_millis()).unwrap_or(u64::MAX);
    if pq.is_dropped() {
        consumer.stats.inc_consume_rt(&mq.topic, rt_millis);
        let group = consumer.config.read().consumer_group.clone();
        tracing::warn!(group = %group, %mq,
            "processQueue is dropped without process consume result");
        return;
    }
    process_consume_result(&consumer, status, rt_millis, &ctx, msgs, &pq, &mq).await;
}

/// `rt_millis` is the listener call's duration, recorded with the outcome.
async fn process_consume_result(
    consumer: &Arc<PushConsumerInner>,
    status: ConsumeConcurrentlyStatus,
    rt_millis: u64,
    ctx: &ConsumeConcurrentlyContext,
    msgs: Arc<Vec<MessageExt>>,
    pq: &Arc<ProcessQueue>,
    mq: &MessageQueue,
) {
    if msgs.is_empty() {
        consumer.stats.inc_consume_rt(&mq.topic, rt_millis);
        return;
    }
    let Some(rt) = consumer.runtime() else { return };
    let len = msgs.len();
    // Index of the first failed message.
    let first_failed = match status {
        ConsumeConcurrentlyStatus::ConsumeSuccess => {
            let ack = usize::try_from(ctx.ack_index).map_or(0, |a| a.saturating_add(1));
            ack.min(len)
        }
        ConsumeConcurrentlyStatus::ReconsumeLater => 0,
    };
    let ok = u64::try_from(first_failed).unwrap_or(u64::MAX);
    let failed = u64::try_from(len - first_failed).unwrap_or(u64::MAX);
    consumer.stats.inc_consume(&mq.topic, rt_millis, ok, failed);

    match consumer.message_model() {
        MessageModel::Broadcasting => {
            for msg in msgs.iter().skip(first_failed) {
                tracing::warn!(%mq, msg_id = %msg.msg_id(),
                    "BROADCASTING, the message consume failed, drop it");
            }
        }
        MessageModel::Clustering => {
            let mut back_failed = Vec::new();
            for msg in msgs.iter().skip(first_failed) {
                // Boxed: the send-back future is large and only failed messages need it; inline,
                // it would be part of (and copied with) every consume request's future.
                let send_back = Box::pin(consumer.send_message_back(
                    msg,
                    ctx.delay_level_when_next_consume,
                    &mq.broker_name,
                ));
                if let Err(e) = send_back.await {
                    tracing::warn!(%mq, msg_id = %msg.msg_id(), error = %e,
                        "sending the failed message back failed; consuming it again locally later");
                    let mut again = msg.clone();
                    again.reconsume_times = again.reconsume_times.saturating_add(1);
                    back_failed.push(again);
                }
            }
            if !back_failed.is_empty() {
                let retry_offsets: HashSet<i64> =
                    back_failed.iter().map(|m| m.queue_offset).collect();
                let done: Vec<MessageExt> = msgs
                    .iter()
                    .filter(|m| !retry_offsets.contains(&m.queue_offset))
                    .cloned()
                    .collect();
                submit_consume_request_later(consumer, back_failed, Arc::clone(pq), mq.clone());
                let offset = pq.remove_message(&done);
                if offset >= 0 && !pq.is_dropped() {
                    rt.offset_store.update_offset(mq, offset, true);
                }
                return;
            }
        }
    }

    let offset = pq.remove_message(&msgs);
    if offset >= 0 && !pq.is_dropped() {
        rt.offset_store.update_offset(mq, offset, true);
    }
}

/// Sends back messages stuck in consumption for longer than `consume_timeout`.
async fn clean_expire_msg(consumer: &Arc<PushConsumerInner>) {
    let Some(rt) = consumer.runtime() else { return };
    let timeout = consumer.config.read().consume_timeout;
    for (mq, pq) in rt.rebalance.process_queue_table() {
        if pq.is_dropped() {
            continue;
        }
        for msg in pq.expired_head_messages(timeout) {
            tracing::info!(%mq, msg_id = %msg.msg_id(), offset = msg.queue_offset,
                "send expired msg back");
            match consumer
                .send_message_back(&msg, EXPIRED_MESSAGE_DELAY_LEVEL, &mq.broker_name)
                .await
            {
                Ok(()) => {
                    if pq.is_head(msg.queue_offset) {
                        pq.remove_message(std::slice::from_ref(&msg));
                    }
                }
                Err(e) => {
                    tracing::error!(%mq, error = %e, "send expired msg back failed");
                    break;
                }
            }
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    /// Size of the future an `async fn` of four arguments returns.
    fn future_size<A, B, C, D, F: std::future::Future>(_: fn(A, B, C, D) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// One consume request is built and moved into its task per batch — per message with the
    /// default batch size — so its future must not embed rarely used large states (the send-back
    /// RPC made it 3.6 KiB, copied for every message).
    #[test]
    fn consume_request_future_stays_small() {
        const BUDGET: usize = 1024;
        let size = future_size(consume_request);
        assert!(size <= BUDGET, "consume_request future is {size} bytes");
    }
}
