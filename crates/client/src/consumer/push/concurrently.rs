//! `ConsumeMessageConcurrentlyService`: runs a [`MessageListenerConcurrently`] on batches of
//! `consume_message_batch_max_size` messages, any number of queues and batches at once up to
//! `consume_thread_min`.
//!
//! Like Java's consume thread pool, a set of `consume_thread_min` worker tasks takes consume
//! requests from one queue. Java's pool has `consumeThreadMin` core threads and an unbounded work
//! queue, and such a pool never starts a thread beyond its core size, so `consume_thread_max` only
//! bounds the core size; [`ConsumeMessageConcurrentlyService::update_core_pool_size`] changes it
//! while running. Spawning a task per request instead cost an allocation, a registration
//! in the consumer's task set and a scheduling round per message (the default batch is one
//! message) — about a sixth of the push consumer's CPU when catching up on a backlog. The request
//! queue needs no bound of its own: every queued message is also cached in its [`ProcessQueue`],
//! and pull flow control (`pull_threshold_for_queue`, `pull_threshold_size_for_queue`) stops pulling
//! while a queue caches too much, so the queue holds at most what the caches allow.
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

use std::collections::{HashSet, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use futures::FutureExt;
use parking_lot::Mutex;
use tokio::sync::Notify;
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

/// One batch waiting for a consume worker (Java's `ConsumeRequest`).
struct ConsumeRequest {
    msgs: Vec<MessageExt>,
    pq: Arc<ProcessQueue>,
    mq: MessageQueue,
}

/// The requests the consume workers take, first in first out.
///
/// Wake-ups are handed on one at a time, as Go's scheduler does with its spinning thread: a push
/// wakes a worker only when no woken worker is on its way to the queue yet (`searching`), and a
/// worker that takes a request while more are queued wakes the next one. A burst of 32 requests
/// then wakes as many workers as the queue keeps being non-empty for — one or two for a listener
/// that returns at once, all of them for a slow one — instead of one per request: each wake-up is a
/// task schedule and, often, a futex call to unpark another thread.
#[derive(Default)]
struct RequestQueue {
    requests: Mutex<VecDeque<ConsumeRequest>>,
    /// Where workers wait while the queue is empty.
    ready: Notify,
    /// A worker has been woken (or a wake-up permit stored) and has not looked at the queue yet.
    /// Every `true` set by a pusher or a worker goes with exactly one `notify_one`, and the worker
    /// that receives it sets it back to `false` when it looks.
    searching: AtomicBool,
    closed: AtomicBool,
}

impl RequestQueue {
    fn push_all(&self, batches: impl Iterator<Item = ConsumeRequest>) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        let added = {
            let mut requests = self.requests.lock();
            let before = requests.len();
            requests.extend(batches);
            requests.len() - before
        };
        if added > 0 {
            self.wake_one();
        }
    }

    /// Wakes a worker unless one is already on its way.
    fn wake_one(&self) {
        if !self.searching.swap(true, Ordering::AcqRel) {
            self.ready.notify_one();
        }
    }

    /// Takes the first request. `woken`: this worker holds the wake-up, which it gives up now
    /// that it looked; if requests remain, the next worker is woken.
    fn take(&self, woken: bool) -> Option<ConsumeRequest> {
        let (request, more) = {
            let mut requests = self.requests.lock();
            let request = requests.pop_front();
            // Given up under the lock: a push after this look then sees no one searching and
            // wakes a worker itself; a push before it is seen here as `more`.
            if woken {
                self.searching.store(false, Ordering::Release);
            }
            (request, !requests.is_empty())
        };
        if more {
            self.wake_one();
        }
        request
    }

    #[cfg(test)]
    fn pop(&self) -> Option<ConsumeRequest> {
        self.requests.lock().pop_front()
    }

    /// The next request; `None` once the queue is closed or `stop` is cancelled.
    async fn next(&self, stop: &CancellationToken) -> Option<ConsumeRequest> {
        let mut woken = false;
        loop {
            if self.closed.load(Ordering::Acquire) {
                return None;
            }
            if let Some(request) = self.take(woken) {
                return Some(request);
            }
            // Register as a waiter before looking again, so that a push or a close between the
            // look and the wait still wakes this worker.
            let notified = self.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.closed.load(Ordering::Acquire) {
                return None;
            }
            // Registering takes a wake-up permit stored while no worker was waiting; this worker
            // then holds that wake-up and must give it up when it looks, or pushes would wait
            // for a searcher that does not exist.
            woken = notified.as_mut().now_or_never().is_some();
            if let Some(request) = self.take(woken) {
                return Some(request);
            }
            if woken {
                woken = false;
                continue;
            }
            tokio::select! {
                () = stop.cancelled() => return None,
                () = notified => woken = true,
            }
        }
    }

    /// Refuses further requests, drops the queued ones and wakes every waiting worker to exit.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.requests.lock().clear();
        self.ready.notify_waiters();
    }
}

/// The number of consume workers: the wanted one (the pool's core size) and the running one.
/// Workers beyond the wanted number retire after their current batch.
struct WorkerPool {
    core: AtomicUsize,
    running: AtomicUsize,
    /// What new workers need, known from start on.
    spawn: Mutex<Option<(Weak<PushConsumerInner>, CancellationToken)>>,
}

impl WorkerPool {
    /// Claims a retirement when more workers run than wanted.
    fn retire_if_surplus(&self) -> bool {
        let core = self.core.load(Ordering::Acquire);
        self.running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |running| {
                (running > core).then(|| running - 1)
            })
            .is_ok()
    }
}

/// Counts a worker out of [`WorkerPool::running`] however it ends, unless it retired (which
/// already counted it out).
struct WorkerSlot {
    pool: Arc<WorkerPool>,
    retired: bool,
}

impl Drop for WorkerSlot {
    fn drop(&mut self) {
        if !self.retired {
            self.pool.running.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The concurrent consume service of one push consumer.
pub struct ConsumeMessageConcurrentlyService {
    listener: Arc<dyn MessageListenerConcurrently>,
    queue: Arc<RequestQueue>,
    pool: Arc<WorkerPool>,
    max_workers: usize,
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
            queue: Arc::new(RequestQueue::default()),
            pool: Arc::new(WorkerPool {
                core: AtomicUsize::new(config.consume_thread_min.max(1)),
                running: AtomicUsize::new(0),
                spawn: Mutex::new(None),
            }),
            max_workers: config.consume_thread_max.max(1),
            batch_max: config.consume_message_batch_max_size.max(1),
            consume_timeout: config.consume_timeout,
        }
    }

    /// Starts `consume_thread_min` consume workers and the expired-message sweep.
    pub(crate) fn start(&self, consumer: &Arc<PushConsumerInner>, stop: CancellationToken) {
        *self.pool.spawn.lock() = Some((Arc::downgrade(consumer), stop.clone()));
        self.spawn_missing_workers();
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
        self.queue.close();
    }

    /// The number of consume workers wanted now (the pool's core size).
    pub fn core_pool_size(&self) -> usize {
        self.pool.core.load(Ordering::Acquire)
    }

    /// Java's `updateCorePoolSize`: sets how many listener calls may run at once. Sizes from 1 to
    /// `consume_thread_max` are applied (more workers start at once; surplus ones retire as they
    /// finish their current batch) and `true` is returned; other sizes are ignored. Java also
    /// ignores a size equal to `consumeThreadMax`, which leaves no way to use the maximum it
    /// advertises; here the maximum itself is accepted.
    pub fn update_core_pool_size(&self, core_pool_size: usize) -> bool {
        if !(1..=self.max_workers).contains(&core_pool_size) {
            return false;
        }
        self.pool.core.store(core_pool_size, Ordering::Release);
        self.spawn_missing_workers();
        true
    }

    /// Starts workers until as many run as wanted (nothing before start).
    fn spawn_missing_workers(&self) {
        let Some((consumer, stop)) = self.pool.spawn.lock().clone() else {
            return;
        };
        let Some(strong) = consumer.upgrade() else {
            return;
        };
        loop {
            let core = self.pool.core.load(Ordering::Acquire);
            let claimed = self
                .pool
                .running
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |running| {
                    (running < core).then_some(running + 1)
                })
                .is_ok();
            if !claimed {
                break;
            }
            let slot = WorkerSlot {
                pool: Arc::clone(&self.pool),
                retired: false,
            };
            strong.tasks.spawn(consume_worker(
                consumer.clone(),
                Arc::clone(&self.queue),
                stop.clone(),
                slot,
            ));
        }
    }

    /// Refuses further work and drops queued batches (their messages stay uncommitted and are
    /// pulled again by whoever owns the queue next); running listener calls finish on their own
    /// (the consumer waits for them up to its await-termination time).
    pub(crate) async fn shutdown(&self, _wait: Duration) {
        self.queue.close();
    }

    /// Splits `msgs` into batches of at most `consume_message_batch_max_size` and queues them for
    /// the consume workers.
    pub(crate) fn submit_consume_request(
        &self,
        msgs: Vec<MessageExt>,
        pq: Arc<ProcessQueue>,
        mq: MessageQueue,
    ) {
        // Batches are moved out of `msgs`, not cloned: a message clone costs a topic and a
        // properties allocation, which dominated the push consumer's profile at high rates.
        let batch_max = self.batch_max;
        let mut rest = msgs.into_iter();
        let batches = std::iter::from_fn(|| {
            let batch: Vec<MessageExt> = rest.by_ref().take(batch_max).collect();
            (!batch.is_empty()).then(|| ConsumeRequest {
                msgs: batch,
                pq: Arc::clone(&pq),
                mq: mq.clone(),
            })
        });
        self.queue.push_all(batches);
    }

    /// Batches queued and not yet taken by a worker.
    #[cfg(test)]
    fn queued(&self) -> usize {
        self.queue.requests.lock().len()
    }
}

/// One consume worker: takes requests until the service closes or the consumer stops or is
/// dropped. A panic outside the listener call (whose panics are already caught) ends only the
/// batch it happened in, not the worker.
async fn consume_worker(
    consumer: Weak<PushConsumerInner>,
    queue: Arc<RequestQueue>,
    stop: CancellationToken,
    mut slot: WorkerSlot,
) {
    while let Some(request) = queue.next(&stop).await {
        let Some(consumer) = consumer.upgrade() else {
            break;
        };
        let run = consume_request(consumer, request.msgs, request.pq, request.mq);
        if AssertUnwindSafe(run).catch_unwind().await.is_err() {
            tracing::error!("a consume request panicked outside the listener; batch abandoned");
        }
        if slot.pool.retire_if_surplus() {
            slot.retired = true;
            break;
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
                    service.submit_consume_request(msgs, pq, mq);
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

    fn request(offset: i64) -> ConsumeRequest {
        let mut msg = MessageExt::new("T", bytes::Bytes::from_static(b"x"));
        msg.queue_offset = offset;
        ConsumeRequest {
            msgs: vec![msg],
            pq: Arc::new(ProcessQueue::new()),
            mq: MessageQueue::new("T", "b", 0),
        }
    }

    fn offsets(r: &ConsumeRequest) -> Vec<i64> {
        r.msgs.iter().map(|m| m.queue_offset).collect()
    }

    /// A failure guard only: the awaited event is immediate when the code is right.
    const GUARD: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn requests_come_out_in_the_order_they_went_in() {
        let queue = RequestQueue::default();
        let stop = CancellationToken::new();
        queue.push_all((0..3).map(request));
        for expected in 0..3 {
            let got = queue.next(&stop).await.expect("a queued request");
            assert_eq!(offsets(&got), vec![expected]);
        }
        assert!(queue.pop().is_none());
    }

    /// A worker waiting on `queue`: the offsets of what `next` returned, `None` if it returned none.
    fn spawn_next(
        queue: &Arc<RequestQueue>,
        stop: &CancellationToken,
    ) -> tokio::task::JoinHandle<Option<Vec<i64>>> {
        let (queue, stop) = (Arc::clone(queue), stop.clone());
        tokio::spawn(async move { queue.next(&stop).await.map(|r| offsets(&r)) })
    }

    async fn joined<T>(worker: tokio::task::JoinHandle<T>) -> T {
        tokio::time::timeout(GUARD, worker)
            .await
            .expect("woken")
            .expect("joined")
    }

    #[tokio::test]
    async fn a_waiting_worker_wakes_for_a_push() {
        let queue = Arc::new(RequestQueue::default());
        let stop = CancellationToken::new();
        let worker = spawn_next(&queue, &stop);
        // Let the worker reach its wait first (it finds the queue empty).
        tokio::task::yield_now().await;
        queue.push_all(std::iter::once(request(7)));
        assert_eq!(joined(worker).await, Some(vec![7]));
    }

    #[tokio::test]
    async fn close_drops_queued_requests_refuses_new_ones_and_releases_waiters() {
        let queue = Arc::new(RequestQueue::default());
        let stop = CancellationToken::new();
        let waiter = spawn_next(&queue, &stop);
        tokio::task::yield_now().await;
        queue.close();
        assert_eq!(joined(waiter).await, None);
        queue.push_all((0..2).map(request));
        assert!(queue.pop().is_none(), "a closed queue takes nothing");
        assert!(queue.next(&stop).await.is_none());

        let queue = RequestQueue::default();
        queue.push_all((0..2).map(request));
        queue.close();
        assert!(queue.pop().is_none(), "close drops what was queued");
    }

    #[tokio::test]
    async fn a_stopped_consumer_releases_its_waiting_workers() {
        let queue = Arc::new(RequestQueue::default());
        let stop = CancellationToken::new();
        let waiter = spawn_next(&queue, &stop);
        tokio::task::yield_now().await;
        stop.cancel();
        assert_eq!(joined(waiter).await, None);
    }

    /// Many workers on two threads, requests pushed in bursts, half of them onto a queue whose
    /// workers are all asleep: every request is taken exactly once and none is stranded while
    /// workers sleep (a lost wake-up makes the guard fire).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bursts_are_all_taken_by_sleeping_workers() {
        const WORKERS: usize = 16;
        const BURSTS: i64 = 501; // odd, so the last burst is one that is waited for
        const BURST: i64 = 7;
        let queue = Arc::new(RequestQueue::default());
        let stop = CancellationToken::new();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..WORKERS {
            let (queue, stop, tx) = (Arc::clone(&queue), stop.clone(), tx.clone());
            workers.spawn(async move {
                while let Some(r) = queue.next(&stop).await {
                    for offset in offsets(&r) {
                        let _ = tx.send(offset);
                    }
                    tokio::task::yield_now().await;
                }
            });
        }
        drop(tx);
        let mut seen = vec![false; usize::try_from(BURSTS * BURST).expect("small")];
        for b in 0..BURSTS {
            // Every other burst finds all workers asleep (the previous one was fully taken);
            // the others land while workers are still busy with the previous burst.
            queue.push_all((b * BURST..(b + 1) * BURST).map(request));
            if b % 2 == 1 {
                continue;
            }
            let pending = if b == 0 { BURST } else { 2 * BURST };
            for _ in 0..pending {
                let offset = tokio::time::timeout(GUARD, rx.recv())
                    .await
                    .expect("a request was stranded")
                    .expect("workers alive");
                let slot = &mut seen[usize::try_from(offset).expect("non-negative")];
                assert!(!*slot, "offset {offset} taken twice");
                *slot = true;
            }
        }
        assert!(seen.iter().all(|s| *s), "every request taken");
        assert!(queue.pop().is_none());
        stop.cancel();
        while workers.join_next().await.is_some() {}
    }

    #[tokio::test]
    async fn submit_splits_into_batches_of_the_configured_size() {
        let mut config = PushConsumerConfig::new("G");
        config.consume_message_batch_max_size = 2;
        let crate::consumer::MessageListener::Concurrently(listener) =
            crate::consumer::concurrently_fn(|_, _| ConsumeConcurrentlyStatus::ConsumeSuccess)
        else {
            unreachable!("concurrently_fn builds a concurrent listener")
        };
        let service = ConsumeMessageConcurrentlyService::new(listener, &config);
        let msgs: Vec<MessageExt> = (0..5).flat_map(|o| request(o).msgs).collect();
        service.submit_consume_request(
            msgs,
            Arc::new(ProcessQueue::new()),
            MessageQueue::new("T", "b", 0),
        );
        assert_eq!(service.queued(), 3);
        let stop = CancellationToken::new();
        let mut batches = Vec::new();
        while let Some(r) = service.queue.pop() {
            batches.push(offsets(&r));
        }
        assert_eq!(batches, vec![vec![0, 1], vec![2, 3], vec![4]]);
        service.close();
        assert!(service.queue.next(&stop).await.is_none());
    }
}
