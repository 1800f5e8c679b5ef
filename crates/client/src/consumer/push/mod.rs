//! `DefaultMQPushConsumer`: the consumer that looks like the broker pushes to it.
//!
//! It is really a pull loop per owned queue, made to feel like push by long polling: the broker
//! holds a pull that finds nothing for up to 15 s and answers as soon as a message arrives. The
//! pieces, as in the Java client, one file each:
//!
//! - **configuration** (`config.rs`): [`PushConsumerConfig`], its defaults and range check.
//! - **lifecycle** (`lifecycle.rs`, [`ServiceState`]): CREATE_JUST → START_FAILED (while
//!   starting, and after a failed start) → RUNNING → SHUTDOWN_ALREADY; only CREATE_JUST starts.
//! - **rebalance** ([`RebalanceImpl`], with the push consumer's part in `rebalance_push.rs`)
//!   decides the owned queues and creates one [`ProcessQueue`] and one
//!   [`PullRequest`](crate::consumer::pull_request::PullRequest) per queue.
//! - **pull** ([`PullMessageService`] circulates the PullRequests; `pull.rs` is one turn: state
//!   and flow-control checks ([`crate::consumer::flow_control`]) and the long-polling pull;
//!   `pull_result.rs` is what each pull status means).
//! - **consume services** run the listener with bounded concurrency: [`concurrently`] (any order,
//!   failed messages go to the retry topic, `send_back.rs`) or [`orderly`] (per-queue order under a
//!   broker lock).
//! - **offset store** records progress (broker for clustering, local file for broadcasting).
//! - **the client instance's calls** (heartbeat data, periodic rebalance and persistence, broker
//!   requests) are answered in `consumer_inner.rs`.
//!
//! Timing constants keep Java's names and values, because brokers and operators are tuned for
//! them (e.g. a pull's 30 s timeout must exceed the broker's 15 s hold).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::consumer::flow_control::FlowControl;
use crate::consumer::offset_store::OffsetStore;
use crate::consumer::rebalance::RebalanceImpl;
use crate::consumer::{
    MessageExt, MessageListener, MessageModel, MessageQueue, SubscriptionData, now_millis,
};
use crate::error::ClientError;
use crate::instance::{MQClientInstance, ServiceState};
use crate::trace::{AsyncTraceDispatcher, ConsumeMessageTraceHook, TraceDispatcherType};

mod builder;
pub mod concurrently;
mod config;
mod consumer_inner;
pub mod hook;
mod lifecycle;
pub mod orderly;
mod pull;
mod pull_result;
pub mod pull_service;
mod rebalance_push;
mod running;
mod send_back;
pub mod stats;

pub use builder::PushConsumerBuilder;
pub use concurrently::ConsumeMessageConcurrentlyService;
pub use config::{
    DEFAULT_CONSUMER_GROUP, DEFAULT_MAX_RECONSUME_TIMES, LOCK_INTERVAL_PROPERTY,
    LOCK_MAX_LIVE_TIME_PROPERTY, MAX_BATCH_SIZE, MAX_CONSUME_THREADS, MAX_PULL_BATCH_SIZE,
    MAX_PULL_INTERVAL, MAX_QUEUE_THRESHOLD, MAX_QUEUE_THRESHOLD_SIZE_MIB,
    MAX_TIME_CONSUME_CONTINUOUSLY_PROPERTY, MAX_TOPIC_THRESHOLD, MAX_TOPIC_THRESHOLD_SIZE_MIB,
    PULL_MAX_IDLE_TIME_PROPERTY, PushConsumerConfig, UNLOCK_DELAY_TIME_PROPERTY,
};
pub use hook::{
    ConsumeMessageContext, ConsumeMessageHook, FilterMessageContext, FilterMessageHook,
};
pub use orderly::ConsumeMessageOrderlyService;
pub use pull::{
    BROKER_SUSPEND_MAX_TIME, CONSUMER_TIMEOUT_WHEN_SUSPEND, DEFAULT_CONSUME_TIMESTAMP_AGO,
    PULL_BATCH_SIZE_IN_BYTES, PULL_TIME_DELAY_WHEN_EXCEPTION, PULL_TIME_DELAY_WHEN_SUSPEND,
};
pub use pull_result::OFFSET_ILLEGAL_FIX_DELAY;
pub use pull_service::PullMessageService;
pub use send_back::{
    AUTO_CREATE_TOPIC_KEY, CLIENT_INNER_PRODUCER_GROUP, DEFAULT_TOPIC_QUEUE_NUMS,
    SEND_MESSAGE_BACK_TIMEOUT,
};
pub use stats::{ConsumeStatus, ConsumerStatsManager};

/// Kept at their former paths; flow control lives in [`crate::consumer::flow_control`].
pub use crate::consumer::flow_control::{
    FLOW_CONTROL_WARN_EVERY, FlowControlTimes, PULL_TIME_DELAY_WHEN_FLOW_CONTROL,
};
/// Kept at their former paths; the process queue lives in [`crate::consumer::process_queue`].
pub use crate::consumer::process_queue::{self, ProcessQueue};

/// Which consume service runs the listener.
pub(crate) enum ConsumeService {
    Concurrently(ConsumeMessageConcurrentlyService),
    Orderly(ConsumeMessageOrderlyService),
}

/// What exists only between start and shutdown.
pub(crate) struct Runtime {
    /// Cancels this run's tasks (a child of the consumer's token, so a failed start can stop
    /// what it spawned without touching a later attempt).
    pub(crate) stop: CancellationToken,
    pub(crate) instance: Arc<MQClientInstance>,
    pub(crate) rebalance: RebalanceImpl,
    pub(crate) offset_store: Arc<dyn OffsetStore>,
    pub(crate) consume_service: ConsumeService,
    pub(crate) pull_service: PullMessageService,
    /// Broker id to pull each queue from next (the broker's `suggestWhichBrokerId`).
    pull_from_which_node: Mutex<HashMap<MessageQueue, i64>>,
}

/// The push consumer's shared state (Java `DefaultMQPushConsumerImpl`).
pub struct PushConsumerInner {
    me: Weak<PushConsumerInner>,
    pub(crate) config: RwLock<PushConsumerConfig>,
    state: Mutex<ServiceState>,
    /// topic → subscription expression, as given to `subscribe`.
    subscription: Mutex<BTreeMap<String, String>>,
    listener: RwLock<Option<MessageListener>>,
    runtime: RwLock<Option<Arc<Runtime>>>,
    pause: AtomicBool,
    flow_control: FlowControl,
    pub(crate) stats: ConsumerStatsManager,
    consume_hooks: RwLock<Vec<Arc<dyn ConsumeMessageHook>>>,
    filter_hooks: RwLock<Vec<Arc<dyn FilterMessageHook>>>,
    /// The trace dispatcher, created by the first start with `enable_msg_trace`.
    trace: Mutex<Option<Arc<AsyncTraceDispatcher>>>,
    consumer_start_timestamp: i64,
    pub(crate) stop: CancellationToken,
    pub(crate) tasks: TaskTracker,
}

/// A push consumer. Cheap to clone; clones share the consumer.
#[derive(Clone)]
pub struct DefaultMQPushConsumer {
    inner: Arc<PushConsumerInner>,
}

impl std::fmt::Debug for DefaultMQPushConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefaultMQPushConsumer")
            .field("config", &*self.inner.config.read())
            .field("state", &*self.inner.state.lock())
            .finish_non_exhaustive()
    }
}

impl DefaultMQPushConsumer {
    /// A push consumer (not started) with these settings.
    pub fn new(config: PushConsumerConfig) -> Self {
        let inner = Arc::new_cyclic(|me| PushConsumerInner {
            me: me.clone(),
            config: RwLock::new(config),
            state: Mutex::new(ServiceState::CreateJust),
            subscription: Mutex::new(BTreeMap::new()),
            listener: RwLock::new(None),
            runtime: RwLock::new(None),
            pause: AtomicBool::new(false),
            flow_control: FlowControl::warning(),
            stats: ConsumerStatsManager::new(),
            consume_hooks: RwLock::new(Vec::new()),
            filter_hooks: RwLock::new(Vec::new()),
            trace: Mutex::new(None),
            consumer_start_timestamp: now_millis(),
            stop: CancellationToken::new(),
            tasks: TaskTracker::new(),
        });
        DefaultMQPushConsumer { inner }
    }

    /// Subscribes to `topic` with a tag expression (`*`, `TagA || TagB`). Before start it is
    /// recorded; while running it takes effect at once and is announced by a heartbeat.
    pub async fn subscribe(&self, topic: &str, sub_expression: &str) -> Result<(), ClientError> {
        if topic.is_empty() {
            return Err(ClientError::IllegalArgument("topic is empty".into()));
        }
        self.inner
            .subscription
            .lock()
            .insert(topic.to_owned(), sub_expression.to_owned());
        if let Some(rt) = self.inner.runtime() {
            rt.rebalance
                .put_subscription(SubscriptionData::from_tag_expression(
                    topic,
                    sub_expression,
                    now_millis(),
                ));
            if rt.rebalance.topic_subscribe_info(topic).is_none() {
                rt.instance
                    .update_topic_route_info_from_name_server(topic)
                    .await?;
            }
            rt.instance.send_heartbeat_to_all_brokers().await;
        }
        Ok(())
    }

    /// Stops consuming `topic` (its queues are dropped by the next rebalance).
    pub fn unsubscribe(&self, topic: &str) {
        self.inner.subscription.lock().remove(topic);
        if let Some(rt) = self.inner.runtime() {
            rt.rebalance.remove_subscription(topic);
        }
    }

    /// Sets the listener; its kind (concurrently / orderly) picks the consume service at start.
    pub fn register_message_listener(&self, listener: MessageListener) {
        *self.inner.listener.write() = Some(listener);
    }

    /// Adds a hook run around every listener call.
    pub fn register_consume_message_hook(&self, hook: Arc<dyn ConsumeMessageHook>) {
        self.inner.consume_hooks.write().push(hook);
    }

    /// Adds a hook run on every pull result.
    pub fn register_filter_message_hook(&self, hook: Arc<dyn FilterMessageHook>) {
        self.inner.filter_hooks.write().push(hook);
    }

    /// Starts the consumer (see `lifecycle.rs` for the steps). As in Java, only a new consumer
    /// starts: starting one that runs, whose start failed, or that was shut down fails with
    /// [`ClientError::NotStartable`]. A failed start leaves START_FAILED, except a refused group
    /// registration, which leaves CREATE_JUST.
    pub async fn start(&self) -> Result<(), ClientError> {
        let trace = self.trace_dispatcher_for_start();
        self.inner.start().await?;
        if let Some(trace) = trace
            && let Err(e) = trace.start().await
        {
            tracing::warn!(group = %self.inner.group(), error = %e, "message trace not started");
        }
        Ok(())
    }

    /// With `enable_msg_trace`, the trace dispatcher, created (and its hook registered) on the
    /// first call so that the first consumed batch is traced.
    fn trace_dispatcher_for_start(&self) -> Option<Arc<AsyncTraceDispatcher>> {
        let config = self.inner.config.read().clone();
        if !config.enable_msg_trace {
            return None;
        }
        let mut slot = self.inner.trace.lock();
        if let Some(existing) = slot.as_ref() {
            return Some(Arc::clone(existing));
        }
        let dispatcher = Arc::new(AsyncTraceDispatcher::new(
            &config.consumer_group,
            TraceDispatcherType::Consume,
            config.custom_trace_topic.as_deref(),
            &config.client,
        ));
        self.register_consume_message_hook(Arc::new(ConsumeMessageTraceHook::new(
            Arc::clone(&dispatcher),
            config.client.client_ip_addr(),
        )));
        *slot = Some(Arc::clone(&dispatcher));
        Some(dispatcher)
    }

    /// The message trace dispatcher, once a start with `enable_msg_trace` created it.
    pub fn trace_dispatcher(&self) -> Option<Arc<AsyncTraceDispatcher>> {
        self.inner.trace.lock().clone()
    }

    /// Persists offsets, leaves the group and stops every task.
    pub async fn shutdown(&self) {
        self.inner.shutdown().await;
        let trace = self.inner.trace.lock().clone();
        if let Some(trace) = trace {
            trace.shutdown().await;
        }
    }

    /// Stops pulling (pulls are retried every second until [`Self::resume`]).
    pub fn suspend(&self) {
        self.inner.pause.store(true, Ordering::Release);
        tracing::info!(group = %self.inner.group(), "consumer suspended");
    }

    /// Resumes pulling after [`Self::suspend`].
    pub fn resume(&self) {
        self.inner.pause.store(false, Ordering::Release);
        tracing::info!(group = %self.inner.group(), "consumer resumed");
    }

    /// Whether pulling is suspended.
    pub fn is_paused(&self) -> bool {
        self.inner.pause.load(Ordering::Acquire)
    }

    /// The consumer's lifecycle state.
    pub fn service_state(&self) -> ServiceState {
        *self.inner.state.lock()
    }

    /// A copy of the consumer's settings.
    pub fn config(&self) -> PushConsumerConfig {
        self.inner.config.read().clone()
    }

    /// Changes the configuration before start (after start most settings are fixed).
    pub fn update_config(&self, f: impl FnOnce(&mut PushConsumerConfig)) {
        f(&mut self.inner.config.write());
    }

    /// The client id this consumer runs under (after start).
    pub fn client_id(&self) -> Option<String> {
        self.inner
            .runtime()
            .map(|rt| rt.instance.client_id().to_owned())
    }

    /// How often flow control refused a pull, per rule.
    pub fn flow_control_times(&self) -> FlowControlTimes {
        self.inner.flow_control.times()
    }

    /// Consumption statistics per topic (Java `ConsumerStatsManager`).
    pub fn stats(&self) -> &ConsumerStatsManager {
        &self.inner.stats
    }

    /// The offset store in use (after start).
    pub fn offset_store(&self) -> Option<Arc<dyn OffsetStore>> {
        self.inner.runtime().map(|rt| Arc::clone(&rt.offset_store))
    }

    /// The queues this member currently owns.
    pub fn owned_queues(&self) -> HashSet<MessageQueue> {
        self.inner
            .runtime()
            .map(|rt| rt.rebalance.owned_queues())
            .unwrap_or_default()
    }

    /// The process queue of an owned queue.
    pub fn process_queue(&self, mq: &MessageQueue) -> Option<Arc<ProcessQueue>> {
        self.inner
            .runtime()
            .and_then(|rt| rt.rebalance.process_queue(mq))
    }

    /// Runs one rebalance now (the instance's RebalanceService does this periodically).
    pub async fn do_rebalance(&self) {
        self.inner.rebalance().await;
    }

    /// Java's `updateCorePoolSize`: how many listener calls may run at once from now on (the
    /// consume service's core size, initially `consume_thread_min`). Applied, returning `true`,
    /// for sizes from 1 to `consume_thread_max` on a started consumer; otherwise ignored.
    pub fn update_core_pool_size(&self, core_pool_size: usize) -> bool {
        let Some(rt) = self.inner.runtime() else {
            return false;
        };
        match &rt.consume_service {
            ConsumeService::Concurrently(s) => s.update_core_pool_size(core_pool_size),
            ConsumeService::Orderly(s) => s.update_core_pool_size(core_pool_size),
        }
    }

    /// The consume service's core size (see [`Self::update_core_pool_size`]); `None` before start.
    pub fn core_pool_size(&self) -> Option<usize> {
        self.inner.runtime().map(|rt| match &rt.consume_service {
            ConsumeService::Concurrently(s) => s.core_pool_size(),
            ConsumeService::Orderly(s) => s.core_pool_size(),
        })
    }

    /// Java's `DefaultMQPushConsumerImpl.resetOffsetByTimeStamp`: for every subscribed topic
    /// (the group's retry topic included), looks up on the brokers the offset of the first
    /// message stored at or after `timestamp_ms` in each of the topic's queues, then resets the
    /// consumer to those offsets exactly as a broker-initiated RESET_CONSUMER_CLIENT_OFFSET does:
    /// consumption pauses, the owned queues of the topic are dropped, the new offsets are stored
    /// and persisted, and the next rebalance re-creates the queues from them. Fails when an
    /// offset cannot be looked up (nothing is reset for that topic then).
    pub async fn reset_offset_by_timestamp(&self, timestamp_ms: i64) -> Result<(), ClientError> {
        self.inner.reset_offset_by_timestamp(timestamp_ms).await
    }

    /// Persists the offsets of every owned queue now.
    pub async fn persist_consumer_offset(&self) {
        self.inner.persist_offsets().await;
    }

    /// The consumer's running info (Java `ConsumerRunningInfo`), as answered to
    /// GET_CONSUMER_RUNNING_INFO without the properties the client instance adds.
    pub fn running_info(&self) -> comet_protocol::body::ConsumerRunningInfo {
        self.inner.consumer_running_info()
    }
}

impl PushConsumerInner {
    fn group(&self) -> String {
        self.config.read().consumer_group.clone()
    }

    pub(crate) fn runtime(&self) -> Option<Arc<Runtime>> {
        self.runtime.read().clone()
    }

    fn arc(&self) -> Option<Arc<PushConsumerInner>> {
        self.me.upgrade()
    }

    pub(crate) fn consume_hooks(&self) -> Vec<Arc<dyn ConsumeMessageHook>> {
        self.consume_hooks.read().clone()
    }

    pub(crate) fn message_model(&self) -> MessageModel {
        self.config.read().message_model
    }

    fn is_orderly(&self) -> bool {
        self.runtime()
            .is_some_and(|rt| matches!(rt.consume_service, ConsumeService::Orderly(_)))
    }
}

impl Runtime {
    fn consume_service_start(self: &Arc<Self>, consumer: &Arc<PushConsumerInner>) {
        match &self.consume_service {
            ConsumeService::Concurrently(s) => s.start(consumer, self.stop.clone()),
            ConsumeService::Orderly(s) => s.start(consumer, self.stop.clone()),
        }
    }

    /// Stops the consume service after a failed start (no task ran yet).
    fn consume_service_shutdown_now(&self) {
        match &self.consume_service {
            ConsumeService::Concurrently(s) => s.close(),
            ConsumeService::Orderly(s) => s.close(),
        }
    }

    async fn consume_service_shutdown(&self, wait: Duration) {
        match &self.consume_service {
            ConsumeService::Concurrently(s) => s.shutdown(wait).await,
            ConsumeService::Orderly(s) => s.shutdown(self, wait).await,
        }
    }

    pub(crate) fn submit_consume_request(
        &self,
        consumer: &Arc<PushConsumerInner>,
        msgs: Vec<MessageExt>,
        pq: Arc<ProcessQueue>,
        mq: MessageQueue,
        dispatch_to_consume: bool,
    ) {
        match &self.consume_service {
            ConsumeService::Concurrently(s) => s.submit_consume_request(msgs, pq, mq),
            ConsumeService::Orderly(s) => {
                s.submit_consume_request(consumer, pq, mq, dispatch_to_consume)
            }
        }
    }
}
