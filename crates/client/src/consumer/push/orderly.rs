//! `ConsumeMessageOrderlyService`: runs a [`MessageListenerOrderly`] so that each queue's
//! messages are seen strictly in queue order.
//!
//! Order needs exclusivity at two levels. Across the group, a clustering member consumes a queue
//! only while it holds the queue's lock on the broker (LOCK_BATCH_MQ, renewed every
//! `lock_interval_ms`, trusted for `lock_max_live_ms` of [`PushConsumerConfig`]),
//! so a member that lost the queue in a rebalance stops before the new owner starts. Within the
//! process, one task at a time consumes a queue (a per-queue async mutex), taking batches from
//! the [`ProcessQueue`] in offset order. A failing batch is not skipped: the queue pauses for
//! `suspend_current_queue_time_millis` and the same messages are offered again, until
//! `max_reconsume_times` (unlimited by default) sends them to the DLQ via the retry topic.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::hook::ConsumeMessageContext;
use super::{ConsumeService, ProcessQueue, PushConsumerConfig, PushConsumerInner, Runtime};
use crate::consumer::{
    ConsumeOrderlyContext, ConsumeOrderlyStatus, MessageExt, MessageListenerOrderly, MessageModel,
    MessageQueue,
};

/// Default of `max_time_consume_continuously_ms`: one consume task yields the queue after this
/// long so other queues get their turn.
pub const MAX_TIME_CONSUME_CONTINUOUSLY: Duration = Duration::from_millis(60_000);
/// Delay before the first periodic lock.
pub const FIRST_LOCK_DELAY: Duration = Duration::from_millis(1000);
/// Bounds of a queue's suspension.
pub const MIN_SUSPEND_MILLIS: i64 = 10;
/// Longest suspension of a queue, in milliseconds.
pub const MAX_SUSPEND_MILLIS: i64 = 30_000;
/// Delay before retrying a queue whose lock could not be taken.
pub const RELOCK_FAILED_DELAY_MILLIS: i64 = 3000;
/// How long rebalance waits for a running batch before giving a queue up.
pub const UNLOCK_WAIT: Duration = Duration::from_millis(1000);
/// Default of `unlock_delay_ms`: delay of the broker unlock of a given-up queue that still caches
/// messages (so a late batch of the old owner cannot interleave with the new owner's first one).
pub const UNLOCK_DELAY: Duration = Duration::from_millis(20_000);

/// The orderly consume service of one push consumer. At most `consume_thread_min` listener calls
/// run at once (the core size of Java's consume thread pool, which its unbounded work queue never
/// lets grow), changed while running by [`Self::update_core_pool_size`].
pub struct ConsumeMessageOrderlyService {
    listener: Arc<dyn MessageListenerOrderly>,
    semaphore: Arc<Semaphore>,
    /// The wanted number of permits (the pool's core size).
    core: Mutex<usize>,
    /// Permits to drop as they come back, after a shrink found them in use.
    retiring: std::sync::atomic::AtomicUsize,
    max_permits: usize,
    batch_max: usize,
    /// One consume task per queue at a time (Java `MessageQueueLock`).
    mq_locks: Mutex<HashMap<MessageQueue, Arc<tokio::sync::Mutex<()>>>>,
}

impl ConsumeMessageOrderlyService {
    pub(crate) fn new(
        listener: Arc<dyn MessageListenerOrderly>,
        config: &PushConsumerConfig,
    ) -> Self {
        ConsumeMessageOrderlyService {
            listener,
            semaphore: Arc::new(Semaphore::new(config.consume_thread_min.max(1))),
            core: Mutex::new(config.consume_thread_min.max(1)),
            retiring: std::sync::atomic::AtomicUsize::new(0),
            max_permits: config.consume_thread_max.max(1),
            batch_max: config.consume_message_batch_max_size.max(1),
            mq_locks: Mutex::new(HashMap::new()),
        }
    }

    /// Clustering: re-locks every owned queue periodically.
    pub(crate) fn start(&self, consumer: &Arc<PushConsumerInner>, stop: CancellationToken) {
        if consumer.message_model() != MessageModel::Clustering {
            return;
        }
        let weak = Arc::downgrade(consumer);
        let lock_interval = consumer.config.read().lock_interval();
        consumer.tasks.spawn(async move {
            let mut interval = tokio::time::interval_at(
                tokio::time::Instant::now() + FIRST_LOCK_DELAY,
                lock_interval,
            );
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    _ = interval.tick() => {}
                }
                let Some(consumer) = weak.upgrade() else {
                    break;
                };
                if let Some(rt) = consumer.runtime() {
                    rt.rebalance.lock_all().await;
                }
            }
        });
    }

    pub(crate) fn close(&self) {
        self.semaphore.close();
    }

    /// Refuses further work and, in clustering, releases every broker lock at once so the new
    /// owners need not wait for the locks to expire.
    pub(crate) async fn shutdown(&self, rt: &Runtime, _wait: Duration) {
        self.semaphore.close();
        if rt.rebalance.message_model() == MessageModel::Clustering {
            rt.rebalance.unlock_all(false).await;
        }
    }

    /// The number of listener calls allowed at once now (the pool's core size).
    pub fn core_pool_size(&self) -> usize {
        *self.core.lock()
    }

    /// Java's `updateCorePoolSize` (see
    /// [`ConsumeMessageConcurrentlyService::update_core_pool_size`](super::ConsumeMessageConcurrentlyService::update_core_pool_size)):
    /// sizes from 1 to `consume_thread_max` are applied, a shrink taking effect as running calls
    /// finish.
    pub fn update_core_pool_size(&self, core_pool_size: usize) -> bool {
        use std::sync::atomic::Ordering;
        if !(1..=self.max_permits).contains(&core_pool_size) {
            return false;
        }
        let mut core = self.core.lock();
        if core_pool_size > *core {
            let mut grow = core_pool_size - *core;
            // Cancel pending retirements first, then add permits.
            while grow > 0 {
                let cancelled = self
                    .retiring
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                        (r > 0).then(|| r - 1)
                    })
                    .is_ok();
                if !cancelled {
                    break;
                }
                grow -= 1;
            }
            self.semaphore.add_permits(grow);
        } else {
            let shrink = *core - core_pool_size;
            let forgotten = self.semaphore.forget_permits(shrink);
            self.retiring
                .fetch_add(shrink - forgotten, Ordering::AcqRel);
        }
        *core = core_pool_size;
        true
    }

    /// A permit to run one listener call; `None` once the service is shut down. Permits owed to
    /// a shrink are dropped instead of being handed out.
    async fn acquire_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        use std::sync::atomic::Ordering;
        loop {
            let permit = Arc::clone(&self.semaphore).acquire_owned().await.ok()?;
            let retire = self
                .retiring
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                    (r > 0).then(|| r - 1)
                })
                .is_ok();
            if !retire {
                return Some(permit);
            }
            permit.forget();
        }
    }

    fn mq_lock(&self, mq: &MessageQueue) -> Arc<tokio::sync::Mutex<()>> {
        Arc::clone(self.mq_locks.lock().entry(mq.clone()).or_default())
    }

    /// Starts a consume task for the queue when the pull found it idle.
    pub(crate) fn submit_consume_request(
        &self,
        consumer: &Arc<PushConsumerInner>,
        pq: Arc<ProcessQueue>,
        mq: MessageQueue,
        dispatch_to_consume: bool,
    ) {
        if dispatch_to_consume {
            let consumer_task = Arc::clone(consumer);
            consumer
                .tasks
                .spawn(async move { consume_request(consumer_task, pq, mq).await });
        }
    }
}

fn run_later<F>(consumer: &Arc<PushConsumerInner>, delay: Duration, f: F)
where
    F: FnOnce(Arc<PushConsumerInner>) -> futures::future::BoxFuture<'static, ()> + Send + 'static,
{
    let stop = consumer.stop.clone();
    let consumer_task = Arc::clone(consumer);
    consumer.tasks.spawn(async move {
        tokio::select! {
            () = stop.cancelled() => {}
            () = tokio::time::sleep(delay) => f(consumer_task).await,
        }
    });
}

/// Offers the queue again after `suspend_millis` (clamped to [10 ms, 30 s]; ≤ 0 = the consumer's
/// `suspend_current_queue_time_millis`).
fn submit_consume_request_later(
    consumer: &Arc<PushConsumerInner>,
    pq: Arc<ProcessQueue>,
    mq: MessageQueue,
    suspend_millis: i64,
    default_millis: i64,
) {
    let millis = if suspend_millis <= 0 {
        default_millis
    } else {
        suspend_millis
    }
    .clamp(MIN_SUSPEND_MILLIS, MAX_SUSPEND_MILLIS);
    let delay = Duration::from_millis(u64::try_from(millis).unwrap_or(0));
    run_later(consumer, delay, move |consumer| {
        Box::pin(async move {
            if let Some(rt) = consumer.runtime()
                && let ConsumeService::Orderly(service) = &rt.consume_service
            {
                service.submit_consume_request(&consumer, pq, mq, true);
            }
        })
    });
}

/// Tries to lock the queue after `delay_millis`, then offers it again (soon if locked).
fn try_lock_later_and_reconsume(
    consumer: &Arc<PushConsumerInner>,
    mq: MessageQueue,
    pq: Arc<ProcessQueue>,
    delay_millis: i64,
) {
    let delay = Duration::from_millis(u64::try_from(delay_millis).unwrap_or(0));
    run_later(consumer, delay, move |consumer| {
        Box::pin(async move {
            let Some(rt) = consumer.runtime() else { return };
            let locked = rt.rebalance.lock(&mq).await;
            let next = if locked {
                MIN_SUSPEND_MILLIS
            } else {
                RELOCK_FAILED_DELAY_MILLIS
            };
            submit_consume_request_later(&consumer, pq, mq, next, next);
        })
    });
}

fn status_name(status: ConsumeOrderlyStatus) -> &'static str {
    match status {
        ConsumeOrderlyStatus::Success => "SUCCESS",
        ConsumeOrderlyStatus::SuspendCurrentQueueAMoment => "SUSPEND_CURRENT_QUEUE_A_MOMENT",
    }
}

/// One consume task of a queue (Java `ConsumeMessageOrderlyService.ConsumeRequest.run`).
async fn consume_request(
    consumer: Arc<PushConsumerInner>,
    pq: Arc<ProcessQueue>,
    mq: MessageQueue,
) {
    if pq.is_dropped() {
        return;
    }
    let Some(rt) = consumer.runtime() else { return };
    let ConsumeService::Orderly(service) = &rt.consume_service else {
        return;
    };
    let queue_lock = service.mq_lock(&mq);
    let _queue_guard = queue_lock.lock().await;
    let clustering = consumer.message_model() == MessageModel::Clustering;
    let lock_max_live = consumer.config.read().lock_max_live();
    if clustering && (!pq.is_locked() || pq.is_lock_expired_after(lock_max_live)) {
        if !pq.is_dropped() {
            try_lock_later_and_reconsume(&consumer, mq, pq, 100);
        }
        return;
    }
    let (group, default_suspend) = {
        let c = consumer.config.read();
        (
            c.consumer_group.clone(),
            c.suspend_current_queue_time_millis,
        )
    };
    let begin_time = Instant::now();
    loop {
        if !may_take_next_batch(&consumer, &pq, &mq, clustering, begin_time, default_suspend) {
            break;
        }
        let mut msgs = pq.take_messages(service.batch_max);
        if msgs.is_empty() {
            break;
        }
        let mut ctx = ConsumeOrderlyContext::new(mq.clone());
        let Some(status) =
            consume_batch(&consumer, service, &group, &pq, &mq, &msgs, &mut ctx).await
        else {
            break;
        };
        let keep_going = process_consume_result(
            &consumer,
            &rt,
            &mut msgs,
            status,
            &ctx,
            &pq,
            &mq,
            default_suspend,
        )
        .await;
        if !keep_going {
            break;
        }
    }
}

/// Whether the consume task may take another batch of the queue: the queue is not dropped, in
/// clustering its broker lock is held and not expired, and the task has not run for longer than
/// `max_time_consume_continuously_ms`. When it may not, the next step is arranged: a relock and a
/// new task soon, or a new task after a pause so other queues get their turn.
fn may_take_next_batch(
    consumer: &Arc<PushConsumerInner>,
    pq: &Arc<ProcessQueue>,
    mq: &MessageQueue,
    clustering: bool,
    begin_time: Instant,
    default_suspend: i64,
) -> bool {
    if pq.is_dropped() {
        tracing::warn!(%mq, "the message queue not be able to consume, because it's dropped");
        return false;
    }
    if clustering && !pq.is_locked() {
        tracing::warn!(%mq, "the message queue not locked, so consume later");
        try_lock_later_and_reconsume(consumer, mq.clone(), Arc::clone(pq), 10);
        return false;
    }
    let (lock_max_live, max_continuous) = {
        let c = consumer.config.read();
        (c.lock_max_live(), c.max_time_consume_continuously())
    };
    if clustering && pq.is_lock_expired_after(lock_max_live) {
        tracing::warn!(%mq, "the message queue lock expired, so consume later");
        try_lock_later_and_reconsume(consumer, mq.clone(), Arc::clone(pq), 10);
        return false;
    }
    if begin_time.elapsed() > max_continuous {
        submit_consume_request_later(consumer, Arc::clone(pq), mq.clone(), 10, default_suspend);
        return false;
    }
    true
}

/// Runs the listener on one batch: the consume hooks around it, a permit of the consume
/// concurrency, and the queue's consume lock (which rebalance takes before giving the queue up).
/// `None` when the batch must not run: the service is shut down (the batch is rolled back into
/// the queue) or the queue was dropped meanwhile.
async fn consume_batch(
    consumer: &Arc<PushConsumerInner>,
    service: &ConsumeMessageOrderlyService,
    group: &str,
    pq: &Arc<ProcessQueue>,
    mq: &MessageQueue,
    msgs: &[MessageExt],
    ctx: &mut ConsumeOrderlyContext,
) -> Option<ConsumeOrderlyStatus> {
    let hooks = consumer.consume_hooks();
    let mut hook_ctx = (!hooks.is_empty()).then(|| ConsumeMessageContext {
        consumer_group: group.to_owned(),
        message_queue: mq.clone(),
        msg_list: msgs.to_vec(),
        success: false,
        status: String::new(),
        props: Default::default(),
        namespace: None,
    });
    if let Some(h) = hook_ctx.as_mut() {
        for hook in &hooks {
            hook.consume_message_before(h);
        }
    }
    let Some(permit) = service.acquire_permit().await else {
        pq.rollback();
        return None;
    };
    let consume_guard = pq.consume_lock().lock().await;
    if pq.is_dropped() {
        tracing::warn!(%mq, "consumeMessage, the message queue not be able to consume, because it's dropped");
        return None;
    }
    let begin = Instant::now();
    let outcome = AssertUnwindSafe(service.listener.consume_message(msgs, ctx))
        .catch_unwind()
        .await;
    drop(consume_guard);
    drop(permit);
    let consume_rt = begin.elapsed();
    let (status, return_type) = match outcome {
        Ok(status) => {
            let return_type = if consume_rt >= consumer.config.read().consume_timeout {
                "TIME_OUT"
            } else if status == ConsumeOrderlyStatus::SuspendCurrentQueueAMoment {
                "FAILED"
            } else {
                "SUCCESS"
            };
            (status, return_type)
        }
        Err(_) => {
            tracing::warn!(group = %group, %mq, "consumeMessage panicked; suspending the queue");
            (
                ConsumeOrderlyStatus::SuspendCurrentQueueAMoment,
                "EXCEPTION",
            )
        }
    };
    if status != ConsumeOrderlyStatus::Success {
        tracing::warn!(group = %group, %mq, "consumeMessage Orderly return not OK");
    }
    if let Some(h) = hook_ctx.as_mut() {
        h.props
            .insert("ConsumeContextType".to_owned(), return_type.to_owned());
        h.status = status_name(status).to_owned();
        h.success = status == ConsumeOrderlyStatus::Success;
        for hook in &hooks {
            hook.consume_message_after(h);
        }
    }
    consumer.stats.inc_consume_rt(
        &mq.topic,
        u64::try_from(consume_rt.as_millis()).unwrap_or(u64::MAX),
    );
    Some(status)
}

#[allow(clippy::too_many_arguments)]
async fn process_consume_result(
    consumer: &Arc<PushConsumerInner>,
    rt: &Runtime,
    msgs: &mut [MessageExt],
    status: ConsumeOrderlyStatus,
    ctx: &ConsumeOrderlyContext,
    pq: &Arc<ProcessQueue>,
    mq: &MessageQueue,
    default_suspend: i64,
) -> bool {
    let mut keep_going = true;
    let mut commit_offset = -1;
    let count = u64::try_from(msgs.len()).unwrap_or(u64::MAX);
    match status {
        ConsumeOrderlyStatus::Success => {
            consumer.stats.inc_consume_ok_tps(&mq.topic, count);
            if ctx.auto_commit {
                commit_offset = pq.commit();
            }
        }
        ConsumeOrderlyStatus::SuspendCurrentQueueAMoment => {
            consumer.stats.inc_consume_failed_tps(&mq.topic, count);
            if check_reconsume_times(consumer, rt, msgs, mq).await {
                pq.make_message_to_consume_again(msgs);
                let suspend = ctx
                    .suspend_current_queue_time_millis
                    .unwrap_or(default_suspend);
                submit_consume_request_later(
                    consumer,
                    Arc::clone(pq),
                    mq.clone(),
                    suspend,
                    default_suspend,
                );
                keep_going = false;
            } else {
                commit_offset = pq.commit();
            }
        }
    }
    if commit_offset >= 0 && !pq.is_dropped() {
        rt.offset_store.update_offset(mq, commit_offset, false);
    }
    keep_going
}

/// Java `checkReconsumeTimes`: messages past `max_reconsume_times` are sent to the retry topic
/// with their reconsume count (which the broker routes to the DLQ); the others get their count
/// raised. Returns whether the queue must suspend (something is to be consumed again).
async fn check_reconsume_times(
    consumer: &Arc<PushConsumerInner>,
    rt: &Runtime,
    msgs: &mut [MessageExt],
    mq: &MessageQueue,
) -> bool {
    let max = consumer.config.read().max_reconsume_times_orderly();
    let mut suspend = false;
    for msg in msgs.iter_mut() {
        if msg.reconsume_times >= max {
            msg.properties.insert(
                comet_protocol::message::properties::keys::RECONSUME_TIME,
                msg.reconsume_times.to_string(),
            );
            if let Err(e) = consumer
                .send_to_retry_topic(rt, msg, &mq.broker_name, msg.reconsume_times, max)
                .await
            {
                tracing::error!(%mq, msg_id = %msg.msg_id(), error = %e, "sendMessageBack exception");
                suspend = true;
                msg.reconsume_times = msg.reconsume_times.saturating_add(1);
            }
        } else {
            suspend = true;
            msg.reconsume_times = msg.reconsume_times.saturating_add(1);
        }
    }
    suspend
}

/// RebalancePushImpl's orderly part of giving a queue up: wait up to [`UNLOCK_WAIT`] for a running
/// batch, then unlock on the broker (delayed by `unlock_delay` when messages are still cached).
/// Returns `false` (keep the queue for now) when the batch is still running.
pub(crate) async fn unlock_when_idle(
    rt: &Arc<Runtime>,
    mq: &MessageQueue,
    pq: &Arc<ProcessQueue>,
    unlock_delay: Duration,
) -> bool {
    let Ok(_guard) = tokio::time::timeout(UNLOCK_WAIT, pq.consume_lock().lock()).await else {
        let times = pq.inc_try_unlock_times();
        tracing::warn!(%mq, try_unlock_times = times,
            "the message queue is consumed now, will try to unlock it later");
        return false;
    };
    if pq.has_temp_message() {
        tracing::info!(%mq, "unlock the queue later: messages are still cached");
        let rt2 = Arc::clone(rt);
        let mq2 = mq.clone();
        // A consumer shutting down unlocks at once instead: otherwise the broker would keep
        // the lock until it expires (60 s) and the queue's new owner would wait for it.
        rt.pull_service.execute_task_later_or_at_stop(
            async move { rt2.rebalance.unlock(&mq2, true).await },
            unlock_delay,
        );
    } else {
        rt.rebalance.unlock(mq, true).await;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Noop;

    impl MessageListenerOrderly for Noop {
        fn consume_message<'a>(
            &'a self,
            _msgs: &'a [MessageExt],
            _ctx: &'a mut ConsumeOrderlyContext,
        ) -> futures::future::BoxFuture<'a, ConsumeOrderlyStatus> {
            Box::pin(async { ConsumeOrderlyStatus::Success })
        }
    }

    fn service(min: usize, max: usize) -> ConsumeMessageOrderlyService {
        let mut config = PushConsumerConfig::new("g");
        config.consume_thread_min = min;
        config.consume_thread_max = max;
        ConsumeMessageOrderlyService::new(Arc::new(Noop), &config)
    }

    /// Listener calls at once are bounded by `consume_thread_min`, like Java's pool core size.
    #[test]
    fn permits_are_consume_thread_min() {
        let s = service(3, 64);
        assert_eq!(s.semaphore.available_permits(), 3);
        assert_eq!(s.core_pool_size(), 3);
    }

    /// A resize within 1..=max applies: growth adds permits at once, a shrink takes free permits
    /// away and retires the ones in use as they come back.
    #[tokio::test]
    async fn core_pool_size_grows_and_shrinks() {
        let s = service(2, 4);
        assert!(!s.update_core_pool_size(0));
        assert!(!s.update_core_pool_size(5));
        assert!(s.update_core_pool_size(4));
        assert_eq!(s.semaphore.available_permits(), 4);

        let held: Vec<_> = [
            s.acquire_permit().await.expect("open"),
            s.acquire_permit().await.expect("open"),
            s.acquire_permit().await.expect("open"),
        ]
        .into();
        assert!(s.update_core_pool_size(1));
        // One free permit was taken away; two of the three in use retire when returned.
        assert_eq!(s.semaphore.available_permits(), 0);
        drop(held);
        let one = s.acquire_permit().await.expect("open");
        assert_eq!(s.semaphore.available_permits(), 0);
        drop(one);
        assert_eq!(s.semaphore.available_permits(), 1);
        assert_eq!(s.core_pool_size(), 1);
    }
}
