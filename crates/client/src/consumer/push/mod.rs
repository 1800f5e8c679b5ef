//! `DefaultMQPushConsumer`: the consumer that looks like the broker pushes to it.
//!
//! It is really a pull loop per owned queue, made to feel like push by long polling (the broker
//! holds a pull for up to 15 s until a message arrives, fact sheet §7). The pieces, as in the Java
//! client:
//!
//! - **lifecycle** ([`ServiceState`]): CREATE_JUST → (START_FAILED while starting) → RUNNING →
//!   SHUTDOWN_ALREADY. A failed start returns to CREATE_JUST so it can be retried.
//! - **rebalance** ([`RebalanceImpl`]) decides the owned queues and creates one [`ProcessQueue`]
//!   and one [`PullRequest`] per queue.
//! - **[`PullMessageService`]** circulates the PullRequests; [`PushConsumerInner::pull_message`]
//!   is one turn: state and flow-control checks, the pull, and what each pull status means.
//! - **consume services** run the listener with bounded concurrency: [`concurrently`] (any order,
//!   failed messages go to the retry topic) or [`orderly`] (per-queue order under a broker lock).
//! - **offset store** records progress (broker for clustering, local file for broadcasting).
//!
//! Timing constants keep Java's names and values, because brokers and operators are tuned for
//! them (e.g. a pull's 30 s timeout must exceed the broker's 15 s hold).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use comet_protocol::body::route::MASTER_ID;
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{PullMessageRequestHeader, SendMessageRequestHeader, pull_sys_flag};
use comet_protocol::message::properties::keys;
use futures::future::BoxFuture;
use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::api::{CommunicationMode, PullResultExt, PullStatus};
use crate::config::ClientConfig;
use crate::consumer::flow_control::{FlowControl, FlowControlLimits, MIB};
use crate::consumer::offset_store::{
    LocalFileOffsetStore, OffsetStore, ReadOffsetType, RemoteBrokerOffsetStore,
    default_local_offset_store_dir,
};
use crate::consumer::pull_request::PullRequest;
use crate::consumer::rebalance::{
    AllocateMessageQueueAveragely, AllocateMessageQueueStrategy, RebalanceDelegate, RebalanceImpl,
};
use crate::consumer::{
    ConsumeFromWhere, ConsumeType, MessageExt, MessageListener, MessageModel, MessageQueue,
    SubscriptionData, duration_millis, is_retry_topic, now_millis, retry_topic,
};
use crate::error::ClientError;
use crate::instance::{MQClientInstance, MQClientManager, MQConsumerInner, ServiceState};
use crate::message::Message;

pub mod concurrently;
pub mod hook;
pub mod orderly;
pub mod pull_service;
pub mod stats;

/// Kept at their former paths; the process queue lives in [`crate::consumer::process_queue`].
pub use crate::consumer::process_queue::{self, ProcessQueue};
pub use concurrently::ConsumeMessageConcurrentlyService;
pub use hook::{
    ConsumeMessageContext, ConsumeMessageHook, FilterMessageContext, FilterMessageHook,
};
pub use orderly::ConsumeMessageOrderlyService;
pub use pull_service::PullMessageService;
pub use stats::{ConsumeStatus, ConsumerStatsManager};

/// Kept at their former paths; flow control lives in [`crate::consumer::flow_control`].
pub use crate::consumer::flow_control::{
    FLOW_CONTROL_WARN_EVERY, FlowControlTimes, PULL_TIME_DELAY_WHEN_FLOW_CONTROL,
};

/// Delay of a pull after an error (`pullTimeDelayMillsWhenException`; configurable).
pub const PULL_TIME_DELAY_WHEN_EXCEPTION: Duration = Duration::from_millis(3000);
/// Delay of a pull while the consumer is suspended.
pub const PULL_TIME_DELAY_WHEN_SUSPEND: Duration = Duration::from_millis(1000);
/// How long the broker may hold a pull (long polling).
pub const BROKER_SUSPEND_MAX_TIME: Duration = Duration::from_millis(15_000);
/// Timeout of a pull request; must exceed [`BROKER_SUSPEND_MAX_TIME`].
pub const CONSUMER_TIMEOUT_WHEN_SUSPEND: Duration = Duration::from_millis(30_000);
/// After OFFSET_ILLEGAL, how long the dropped queue waits before its offset is fixed and its
/// state removed. Zero, as in the 5.x Java client: a broker-side offset reset (Apache 5.x answers
/// the next pull with PULL_OFFSET_MOVED) must take effect at once, and the dropped process queue
/// already keeps in-flight consumption from committing. The 4.9 client waited 10 s.
pub const OFFSET_ILLEGAL_FIX_DELAY: Duration = Duration::ZERO;
/// Default start of CONSUME_FROM_TIMESTAMP: this long before the consumer starts.
pub const DEFAULT_CONSUME_TIMESTAMP_AGO: Duration = Duration::from_secs(30 * 60);
/// `maxMsgBytes` of a pull (5.x `pullBatchSizeInBytes`).
pub const PULL_BATCH_SIZE_IN_BYTES: i32 = 256 * 1024;
/// Timeout of CONSUMER_SEND_MSG_BACK (Java uses 5 s).
pub const SEND_MESSAGE_BACK_TIMEOUT: Duration = Duration::from_millis(5000);
/// `maxReconsumeTimes` when the user leaves it at -1.
pub const DEFAULT_MAX_RECONSUME_TIMES: i32 = 16;
/// Producer group announced for the consumer's own sends to a retry topic.
pub const CLIENT_INNER_PRODUCER_GROUP: &str = "CLIENT_INNER_PRODUCER";
/// The template topic of auto-created topics.
pub const AUTO_CREATE_TOPIC_KEY: &str = "TBW102";
/// Queue count asked for when a send auto-creates a topic.
pub const DEFAULT_TOPIC_QUEUE_NUMS: i32 = 4;
/// Upper bound of `consume_thread_max` (Java's check).
pub const MAX_CONSUME_THREADS: usize = 1000;
/// Upper bound of the per-queue count thresholds and the max span (Java's check).
pub const MAX_QUEUE_THRESHOLD: i64 = 65_535;
/// Upper bound of `pull_threshold_size_for_queue`, in MiB (Java's check).
pub const MAX_QUEUE_THRESHOLD_SIZE_MIB: i64 = 1024;
/// Upper bound of `consume_message_batch_max_size` (Java's check).
pub const MAX_BATCH_SIZE: usize = 1024;
/// Upper bound of `pull_batch_size` (Java's check).
pub const MAX_PULL_BATCH_SIZE: i32 = 1024;
/// Upper bound of `pull_interval` (Java's check: 65535 ms).
pub const MAX_PULL_INTERVAL: Duration = Duration::from_millis(65_535);

/// Settings of a push consumer; defaults are Java's (fact sheet §10.6 and the seeds).
#[derive(Clone)]
pub struct PushConsumerConfig {
    pub client: ClientConfig,
    pub consumer_group: String,
    pub message_model: MessageModel,
    pub consume_from_where: ConsumeFromWhere,
    /// Start point of CONSUME_FROM_TIMESTAMP, epoch ms; `None` = 30 minutes before start.
    pub consume_timestamp: Option<i64>,
    pub allocate_message_queue_strategy: Arc<dyn AllocateMessageQueueStrategy>,
    /// A user-provided offset store replacing the default one of the message model.
    pub offset_store: Option<Arc<dyn OffsetStore>>,
    /// Java's thread pool floor; kept for configuration parity (concurrent consumption runs
    /// `consume_thread_max` workers, orderly consumption up to that many listener calls).
    pub consume_thread_min: usize,
    /// Most listener invocations running at once.
    pub consume_thread_max: usize,
    /// Concurrent only: pause pulling a queue whose cached offsets span more than this.
    pub consume_concurrently_max_span: i64,
    /// Pause pulling a queue caching more than this many messages.
    pub pull_threshold_for_queue: i64,
    /// Pause pulling a queue caching more than this many MiB of bodies.
    pub pull_threshold_size_for_queue: i64,
    /// Per-topic message limit, split evenly over the owned queues; -1 disables.
    pub pull_threshold_for_topic: i64,
    /// Per-topic MiB limit, split evenly over the owned queues; -1 disables.
    pub pull_threshold_size_for_topic: i64,
    /// Pause between pulls of a queue that found messages (0 = pull again at once).
    pub pull_interval: Duration,
    /// Messages per listener call (concurrent) or per orderly batch.
    pub consume_message_batch_max_size: usize,
    /// Messages per pull.
    pub pull_batch_size: i32,
    /// Send the subscription with every pull instead of relying on the heartbeat's.
    pub post_subscription_when_pull: bool,
    pub unit_mode: bool,
    /// -1 = 16 for concurrent consumption, unlimited for orderly consumption.
    pub max_reconsume_times: i32,
    /// Orderly: how long a queue pauses after SUSPEND_CURRENT_QUEUE_A_MOMENT.
    pub suspend_current_queue_time_millis: i64,
    /// A message whose consumption started longer ago is sent back (concurrent only).
    pub consume_timeout: Duration,
    /// Delay of a pull after an error.
    pub pull_time_delay_when_exception: Duration,
    /// Base directory of the broadcasting offset files; `None` = `~/.rocketmq_offsets` (or the
    /// `ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR` environment variable).
    pub local_offset_store_dir: Option<PathBuf>,
    /// On shutdown, how long to wait for running listener calls.
    pub await_termination_when_shutdown: Duration,
}

impl std::fmt::Debug for PushConsumerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConsumerConfig")
            .field("consumer_group", &self.consumer_group)
            .field("message_model", &self.message_model)
            .field("consume_from_where", &self.consume_from_where)
            .field(
                "allocate_message_queue_strategy",
                &self.allocate_message_queue_strategy.name(),
            )
            .field("pull_batch_size", &self.pull_batch_size)
            .finish_non_exhaustive()
    }
}

impl PushConsumerConfig {
    /// Java's defaults for `consumer_group`.
    pub fn new(consumer_group: impl Into<String>) -> Self {
        PushConsumerConfig {
            client: ClientConfig::default(),
            consumer_group: consumer_group.into(),
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            consume_timestamp: None,
            allocate_message_queue_strategy: Arc::new(AllocateMessageQueueAveragely),
            offset_store: None,
            consume_thread_min: 20,
            consume_thread_max: 64,
            consume_concurrently_max_span: 2000,
            pull_threshold_for_queue: 1000,
            pull_threshold_size_for_queue: 100,
            pull_threshold_for_topic: -1,
            pull_threshold_size_for_topic: -1,
            pull_interval: Duration::ZERO,
            consume_message_batch_max_size: 1,
            pull_batch_size: 32,
            post_subscription_when_pull: false,
            unit_mode: false,
            max_reconsume_times: -1,
            suspend_current_queue_time_millis: 1000,
            consume_timeout: Duration::from_secs(15 * 60),
            pull_time_delay_when_exception: PULL_TIME_DELAY_WHEN_EXCEPTION,
            local_offset_store_dir: None,
            await_termination_when_shutdown: Duration::ZERO,
        }
    }

    fn check(&self) -> Result<(), ClientError> {
        let bad = |what: String| Err(ClientError::IllegalArgument(what));
        if self.consumer_group.is_empty() {
            return bad("consumerGroup is empty".into());
        }
        if self.consumer_group == "DEFAULT_CONSUMER" {
            return bad(
                "consumerGroup can not equal DEFAULT_CONSUMER, please specify another one".into(),
            );
        }
        if !(1..=MAX_CONSUME_THREADS).contains(&self.consume_thread_max) {
            return bad(format!(
                "consumeThreadMax {} out of range [1, {MAX_CONSUME_THREADS}]",
                self.consume_thread_max
            ));
        }
        if self.consume_thread_min > self.consume_thread_max {
            return bad("consumeThreadMin can't be larger than consumeThreadMax".into());
        }
        if !(1..=MAX_QUEUE_THRESHOLD).contains(&self.consume_concurrently_max_span) {
            return bad(format!(
                "consumeConcurrentlyMaxSpan out of range [1, {MAX_QUEUE_THRESHOLD}]"
            ));
        }
        if !(1..=MAX_QUEUE_THRESHOLD).contains(&self.pull_threshold_for_queue) {
            return bad(format!(
                "pullThresholdForQueue out of range [1, {MAX_QUEUE_THRESHOLD}]"
            ));
        }
        if !(0..=MAX_QUEUE_THRESHOLD_SIZE_MIB).contains(&self.pull_threshold_size_for_queue) {
            return bad(format!(
                "pullThresholdSizeForQueue out of range [0, {MAX_QUEUE_THRESHOLD_SIZE_MIB}] MiB"
            ));
        }
        if !(1..=MAX_BATCH_SIZE).contains(&self.consume_message_batch_max_size) {
            return bad(format!(
                "consumeMessageBatchMaxSize out of range [1, {MAX_BATCH_SIZE}]"
            ));
        }
        if !(1..=MAX_PULL_BATCH_SIZE).contains(&self.pull_batch_size) {
            return bad(format!(
                "pullBatchSize out of range [1, {MAX_PULL_BATCH_SIZE}]"
            ));
        }
        if self.pull_interval > MAX_PULL_INTERVAL {
            return bad(format!("pullInterval above {MAX_PULL_INTERVAL:?}"));
        }
        Ok(())
    }

    /// The effective max reconsume times for concurrent consumption.
    pub fn max_reconsume_times_concurrently(&self) -> i32 {
        if self.max_reconsume_times == -1 {
            DEFAULT_MAX_RECONSUME_TIMES
        } else {
            self.max_reconsume_times
        }
    }

    /// The effective max reconsume times for orderly consumption (Java: unlimited at -1).
    pub fn max_reconsume_times_orderly(&self) -> i32 {
        if self.max_reconsume_times == -1 {
            i32::MAX
        } else {
            self.max_reconsume_times
        }
    }
}

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

    pub fn register_consume_message_hook(&self, hook: Arc<dyn ConsumeMessageHook>) {
        self.inner.consume_hooks.write().push(hook);
    }

    pub fn register_filter_message_hook(&self, hook: Arc<dyn FilterMessageHook>) {
        self.inner.filter_hooks.write().push(hook);
    }

    /// Starts the consumer (seed 000). Starting a running consumer does nothing; starting a shut
    /// down one is an error; a failed start leaves it startable again.
    pub async fn start(&self) -> Result<(), ClientError> {
        self.inner.start().await
    }

    /// Persists offsets, leaves the group and stops every task.
    pub async fn shutdown(&self) {
        self.inner.shutdown().await;
    }

    /// Stops pulling (pulls are retried every second until [`Self::resume`]).
    pub fn suspend(&self) {
        self.inner.pause.store(true, Ordering::Release);
        tracing::info!(group = %self.inner.group(), "consumer suspended");
    }

    pub fn resume(&self) {
        self.inner.pause.store(false, Ordering::Release);
        tracing::info!(group = %self.inner.group(), "consumer resumed");
    }

    pub fn is_paused(&self) -> bool {
        self.inner.pause.load(Ordering::Acquire)
    }

    pub fn service_state(&self) -> ServiceState {
        *self.inner.state.lock()
    }

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

    /// Persists the offsets of every owned queue now.
    pub async fn persist_consumer_offset(&self) {
        self.inner.persist_offsets().await;
    }

    /// ConsumerRunningInfo-like JSON.
    pub fn running_info(&self) -> serde_json::Value {
        self.inner.running_info_json()
    }
}

/// Body of CHECK_CLIENT_CONFIG.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CheckClientRequestBody<'a> {
    client_id: &'a str,
    group: &'a str,
    subscription_data: &'a SubscriptionData,
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

    async fn start(&self) -> Result<(), ClientError> {
        {
            let mut state = self.state.lock();
            match *state {
                ServiceState::Running | ServiceState::StartFailed => return Ok(()),
                ServiceState::ShutdownAlready => {
                    return Err(ClientError::ServiceState {
                        state: state.to_string(),
                        needed: "CREATE_JUST (a shut down consumer cannot be restarted)".into(),
                    });
                }
                ServiceState::CreateJust => *state = ServiceState::StartFailed,
            }
        }
        match self.start_inner().await {
            Ok(()) => Ok(()),
            Err(e) => {
                let rt = self.runtime.write().take();
                if let Some(rt) = rt {
                    rt.stop.cancel();
                    rt.consume_service_shutdown_now();
                    // Stops the instance only if nobody else uses it.
                    rt.instance.shutdown().await;
                }
                *self.state.lock() = ServiceState::CreateJust;
                Err(e)
            }
        }
    }

    async fn start_inner(&self) -> Result<(), ClientError> {
        let Some(me) = self.arc() else {
            return Err(ClientError::Client("consumer dropped".into()));
        };
        let config = self.config.read().clone();
        config.check()?;
        let Some(listener) = self.listener.read().clone() else {
            return Err(ClientError::IllegalArgument(
                "messageListener is null: register a listener before start".into(),
            ));
        };

        // Subscriptions (+ the retry topic in clustering).
        let sub_version = now_millis();
        let mut subscriptions: Vec<SubscriptionData> = self
            .subscription
            .lock()
            .iter()
            .map(|(topic, expr)| SubscriptionData::from_tag_expression(topic, expr, sub_version))
            .collect();
        if config.message_model == MessageModel::Clustering {
            subscriptions.push(SubscriptionData::from_tag_expression(
                retry_topic(&config.consumer_group),
                crate::consumer::SUB_ALL,
                sub_version,
            ));
        }

        let mut client_config = config.client.clone();
        if config.message_model == MessageModel::Clustering {
            client_config.change_instance_name_to_pid();
        }
        let instance = MQClientManager::get_or_create_instance(&client_config);

        let rebalance = RebalanceImpl::new(
            config.consumer_group.clone(),
            config.message_model,
            Arc::clone(&config.allocate_message_queue_strategy),
            Arc::clone(&instance),
        );
        for sub in subscriptions {
            rebalance.put_subscription(sub);
        }

        let offset_store: Arc<dyn OffsetStore> = match &config.offset_store {
            Some(store) => Arc::clone(store),
            None => match config.message_model {
                MessageModel::Broadcasting => {
                    let dir = config
                        .local_offset_store_dir
                        .clone()
                        .unwrap_or_else(default_local_offset_store_dir);
                    Arc::new(LocalFileOffsetStore::new(
                        &dir,
                        instance.client_id(),
                        &config.consumer_group,
                    ))
                }
                MessageModel::Clustering => Arc::new(RemoteBrokerOffsetStore::new(
                    Arc::clone(&instance),
                    config.consumer_group.clone(),
                )),
            },
        };
        offset_store.load()?;

        let consume_service = match listener {
            MessageListener::Orderly(l) => {
                ConsumeService::Orderly(ConsumeMessageOrderlyService::new(l, &config))
            }
            MessageListener::Concurrently(l) => {
                ConsumeService::Concurrently(ConsumeMessageConcurrentlyService::new(l, &config))
            }
        };
        let run_stop = self.stop.child_token();
        let runtime = Arc::new(Runtime {
            stop: run_stop.clone(),
            instance: Arc::clone(&instance),
            rebalance,
            offset_store,
            consume_service,
            pull_service: PullMessageService::new(run_stop, self.tasks.clone()),
            pull_from_which_node: Mutex::new(HashMap::new()),
        });
        *self.runtime.write() = Some(Arc::clone(&runtime));

        let registered: Arc<dyn MQConsumerInner> = Arc::clone(&me) as Arc<dyn MQConsumerInner>;
        instance.register_consumer(&config.consumer_group, registered)?;
        runtime.consume_service_start(&me);

        let pull_target = Arc::clone(&me);
        runtime.pull_service.start(move |request| {
            let consumer = Arc::clone(&pull_target);
            async move { consumer.pull_message(request).await }
        });
        if let Err(e) = instance.start().await {
            instance.unregister_consumer(&config.consumer_group);
            return Err(e);
        }

        // updateTopicSubscribeInfoWhenSubscriptionChanged
        for sub in runtime.rebalance.subscriptions() {
            if let Err(e) = instance
                .update_topic_route_info_from_name_server(&sub.topic)
                .await
            {
                tracing::warn!(topic = %sub.topic, error = %e, "fetching the route of a subscribed topic failed");
            }
        }
        if let Err(e) = self.check_client_in_broker(&runtime).await {
            instance.unregister_consumer(&config.consumer_group);
            return Err(e);
        }
        *self.state.lock() = ServiceState::Running;
        instance.send_heartbeat_to_all_brokers().await;
        instance.rebalance_immediately();
        tracing::info!(group = %config.consumer_group, client_id = %instance.client_id(),
            model = ?config.message_model, "push consumer started");
        Ok(())
    }

    /// CHECK_CLIENT_CONFIG for every non-TAG subscription: fails the start when a broker cannot
    /// filter the way the consumer asks.
    async fn check_client_in_broker(&self, rt: &Runtime) -> Result<(), ClientError> {
        let group = self.group();
        for sub in rt.rebalance.subscriptions() {
            if sub.expression_type.is_empty()
                || sub.expression_type == comet_protocol::body::heartbeat::EXPRESSION_TYPE_TAG
            {
                continue;
            }
            let Some(addr) = rt.instance.any_broker_addr_of_topic(&sub.topic) else {
                continue;
            };
            let body = comet_protocol::body::to_fastjson_bytes(&CheckClientRequestBody {
                client_id: rt.instance.client_id(),
                group: &group,
                subscription_data: &sub,
            })?;
            let request = rt
                .instance
                .api()
                .request(RequestCode::CheckClientConfig)
                .with_body(body);
            rt.instance
                .api()
                .invoke_success(&addr, request, rt.instance.config().mq_client_api_timeout)
                .await?;
        }
        Ok(())
    }

    async fn shutdown(&self) {
        {
            // Like Java: only a running consumer shuts down; CREATE_JUST stays startable.
            let mut state = self.state.lock();
            if *state != ServiceState::Running {
                return;
            }
            *state = ServiceState::ShutdownAlready;
        }
        let Some(rt) = self.runtime() else { return };
        let group = self.group();
        // Stop pulling and refuse new consume work, let running listener calls finish
        // (bounded), persist what they committed, and only then drop the queues.
        self.stop.cancel();
        let wait = self.config.read().await_termination_when_shutdown;
        rt.consume_service_shutdown(wait).await;
        self.tasks.close();
        if tokio::time::timeout(wait.max(Duration::from_millis(1)), self.tasks.wait())
            .await
            .is_err()
        {
            tracing::debug!(group = %group, "consume tasks still running at shutdown");
        }
        self.persist_offsets_of(&rt).await;
        rt.rebalance.drop_all();
        rt.instance.unregister_consumer(&group);
        rt.instance.unregister_client(None, Some(&group)).await;
        rt.instance.shutdown().await;
        tracing::info!(group = %group, "push consumer shut down");
    }

    async fn rebalance(&self) {
        let Some(rt) = self.runtime() else { return };
        let is_order = matches!(rt.consume_service, ConsumeService::Orderly(_));
        rt.rebalance.do_rebalance(self, is_order).await;
    }

    async fn persist_offsets(&self) {
        if let Some(rt) = self.runtime() {
            self.persist_offsets_of(&rt).await;
        }
    }

    async fn persist_offsets_of(&self, rt: &Runtime) {
        let owned = rt.rebalance.owned_queues();
        rt.offset_store.persist_all(&owned).await;
    }

    fn running_info_json(&self) -> serde_json::Value {
        let config = self.config.read().clone();
        let Some(rt) = self.runtime() else {
            return serde_json::json!({ "properties": { "consumerGroup": config.consumer_group } });
        };
        let mq_table: serde_json::Map<String, serde_json::Value> = rt
            .rebalance
            .process_queue_table()
            .into_iter()
            .map(|(mq, pq)| (mq.to_string(), pq.info()))
            .collect();
        let status_table: serde_json::Map<String, serde_json::Value> = self
            .stats
            .topics()
            .into_iter()
            .map(|topic| {
                let s = self.stats.consume_status(&topic);
                (
                    topic,
                    serde_json::json!({
                        "pullRT": s.pull_rt, "pullTPS": s.pull_tps, "consumeRT": s.consume_rt,
                        "consumeOKTPS": s.consume_ok_tps, "consumeFailedTPS": s.consume_failed_tps,
                        "consumeFailedMsgs": s.consume_failed_msgs,
                    }),
                )
            })
            .collect();
        serde_json::json!({
            "properties": {
                "consumerGroup": config.consumer_group,
                "messageModel": format!("{:?}", config.message_model),
                "consumeFromWhere": format!("{:?}", config.consume_from_where),
                "allocateMessageQueueStrategy": config.allocate_message_queue_strategy.name(),
                "consumeThreadMax": config.consume_thread_max,
                "pullBatchSize": config.pull_batch_size,
                "PROP_CONSUMEORDERLY": self.is_orderly(),
                "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
                "PROP_CLIENT_VERSION": comet_protocol::command::COMET_VERSION,
                "PROP_CONSUMER_START_TIMESTAMP": self.consumer_start_timestamp,
            },
            "subscriptionSet": rt.rebalance.subscriptions(),
            "mqTable": mq_table,
            "statusTable": status_table,
        })
    }

    // ---- pull -----------------------------------------------------------------------------

    fn execute_pull_request_later(rt: &Runtime, request: PullRequest, delay: Duration) {
        rt.pull_service.execute_pull_request_later(request, delay);
    }

    /// One turn of a queue's pull loop (seed 002, steps 1–12).
    pub(crate) async fn pull_message(self: Arc<Self>, mut request: PullRequest) {
        let Some(rt) = self.runtime() else { return };
        let pq = Arc::clone(&request.process_queue);
        if pq.is_dropped() {
            tracing::info!(mq = %request.message_queue, "the pull request is dropped");
            return;
        }
        pq.set_last_pull_timestamp(now_millis());
        let config = self.config.read().clone();

        if *self.state.lock() != ServiceState::Running {
            Self::execute_pull_request_later(&rt, request, config.pull_time_delay_when_exception);
            return;
        }
        if self.pause.load(Ordering::Acquire) {
            tracing::debug!(group = %config.consumer_group, "consumer paused, pull later");
            Self::execute_pull_request_later(&rt, request, PULL_TIME_DELAY_WHEN_SUSPEND);
            return;
        }

        let orderly = matches!(rt.consume_service, ConsumeService::Orderly(_));
        let limits = FlowControlLimits {
            count_for_consumer: None,
            count_for_queue: config.pull_threshold_for_queue,
            size_for_queue: config.pull_threshold_size_for_queue,
            size_unit: MIB,
            // The span only matters to concurrent consumption, whose commits wait for the oldest
            // unfinished message.
            max_span: (!orderly).then_some(config.consume_concurrently_max_span),
        };
        if !self
            .flow_control
            .admit(&request.message_queue, &limits, pq.as_ref())
        {
            Self::execute_pull_request_later(&rt, request, PULL_TIME_DELAY_WHEN_FLOW_CONTROL);
            return;
        }

        if orderly {
            if pq.is_locked() {
                if !request.previously_locked {
                    let offset = match self
                        .compute_pull_from_where_inner(&rt, &request.message_queue)
                        .await
                    {
                        Ok(offset) => offset,
                        Err(e) => {
                            tracing::error!(mq = %request.message_queue, error = %e,
                                "failed to compute the pull offset");
                            Self::execute_pull_request_later(
                                &rt,
                                request,
                                config.pull_time_delay_when_exception,
                            );
                            return;
                        }
                    };
                    let broker_busy = offset < request.next_offset;
                    tracing::info!(mq = %request.message_queue, new_offset = offset, broker_busy,
                        "the first time to pull message, so fix offset from broker");
                    request.previously_locked = true;
                    request.next_offset = offset;
                }
            } else {
                tracing::info!(mq = %request.message_queue, "pull message later because not locked in broker");
                Self::execute_pull_request_later(
                    &rt,
                    request,
                    config.pull_time_delay_when_exception,
                );
                return;
            }
        }

        let Some(subscription) = rt.rebalance.subscription(&request.message_queue.topic) else {
            tracing::warn!(mq = %request.message_queue, "find the consumer's subscription failed");
            Self::execute_pull_request_later(&rt, request, config.pull_time_delay_when_exception);
            return;
        };

        // Sys flags.
        let mut commit_offset_value = 0;
        let mut commit_offset_enable = false;
        if config.message_model == MessageModel::Clustering {
            match rt
                .offset_store
                .read_offset(&request.message_queue, ReadOffsetType::ReadFromMemory)
                .await
            {
                Ok(Some(offset)) if offset > 0 => {
                    commit_offset_value = offset;
                    commit_offset_enable = true;
                }
                _ => {}
            }
        }
        let class_filter = subscription.class_filter_mode;
        let sub_expression = (config.post_subscription_when_pull && !class_filter)
            .then(|| subscription.sub_string.clone());

        let begin = Instant::now();
        let result = self
            .pull_kernel(
                &rt,
                &config,
                &request,
                &subscription,
                sub_expression,
                commit_offset_enable,
                commit_offset_value,
                class_filter,
            )
            .await;
        match result {
            Ok(result) => {
                self.on_pull_result(&rt, &config, request, &subscription, result, begin)
                    .await
            }
            Err(e) => {
                if self.stop.is_cancelled() {
                    // Shutting down: held pulls fail as the connections close; not worth a warning each.
                    tracing::debug!(mq = %request.message_queue, error = %e,
                        "pull ended by the consumer's shutdown");
                    return;
                }
                if !is_retry_topic(&request.message_queue.topic) {
                    tracing::warn!(mq = %request.message_queue, error = %e,
                        "execute the pull request exception");
                }
                Self::execute_pull_request_later(
                    &rt,
                    request,
                    config.pull_time_delay_when_exception,
                );
            }
        }
    }

    /// `PullAPIWrapper.pullKernelImpl`: finds the broker and sends the pull.
    #[allow(clippy::too_many_arguments)]
    async fn pull_kernel(
        &self,
        rt: &Runtime,
        config: &PushConsumerConfig,
        request: &PullRequest,
        subscription: &SubscriptionData,
        sub_expression: Option<String>,
        commit_offset_enable: bool,
        commit_offset_value: i64,
        class_filter: bool,
    ) -> Result<PullResultExt, ClientError> {
        let mq = &request.message_queue;
        let broker_id = rt
            .pull_from_which_node
            .lock()
            .get(mq)
            .copied()
            .unwrap_or(MASTER_ID);
        let mut found =
            rt.instance
                .find_broker_address_in_subscribe(&mq.broker_name, broker_id, false);
        if found.is_none() {
            rt.instance
                .update_topic_route_info_from_name_server(&mq.topic)
                .await?;
            found = rt
                .instance
                .find_broker_address_in_subscribe(&mq.broker_name, broker_id, false);
        }
        let Some(found) = found else {
            return Err(ClientError::Client(format!(
                "The broker[{}] not exist",
                mq.broker_name
            )));
        };
        let mut sys_flag = pull_sys_flag::build(
            commit_offset_enable,
            true,
            sub_expression.is_some(),
            class_filter,
        );
        if found.slave {
            sys_flag = pull_sys_flag::clear_commit_offset(sys_flag);
        }
        let header = PullMessageRequestHeader {
            consumer_group: config.consumer_group.clone(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            queue_offset: request.next_offset,
            max_msg_nums: config.pull_batch_size,
            sys_flag,
            commit_offset: commit_offset_value,
            suspend_timeout_millis: duration_millis(BROKER_SUSPEND_MAX_TIME),
            subscription: sub_expression,
            sub_version: subscription.sub_version,
            expression_type: Some(subscription.expression_type.clone()),
            max_msg_bytes: Some(PULL_BATCH_SIZE_IN_BYTES),
            ..Default::default()
        };
        let mut result = rt
            .instance
            .api()
            .pull_message(&found.broker_addr, header, CONSUMER_TIMEOUT_WHEN_SUSPEND)
            .await?;
        rt.pull_from_which_node
            .lock()
            .insert(mq.clone(), result.suggest_which_broker_id);
        self.process_pull_result(
            &config.consumer_group,
            mq,
            &mut result,
            subscription,
            config.unit_mode,
        );
        Ok(result)
    }

    /// `PullAPIWrapper.processPullResult`: the client-side tag filter (the broker only compares
    /// tag hash codes, which may collide) and the filter hooks.
    fn process_pull_result(
        &self,
        group: &str,
        mq: &MessageQueue,
        result: &mut PullResultExt,
        subscription: &SubscriptionData,
        unit_mode: bool,
    ) {
        if result.pull_status != PullStatus::Found {
            return;
        }
        if !subscription.tags_set.is_empty() && !subscription.class_filter_mode {
            result.msg_found_list.retain(|msg| {
                msg.tags()
                    .is_some_and(|t| subscription.tags_set.iter().any(|s| s == t))
            });
        }
        let hooks = self.filter_hooks.read().clone();
        for hook in hooks {
            let mut ctx = FilterMessageContext {
                consumer_group: group,
                message_queue: mq,
                msg_list: &mut result.msg_found_list,
                unit_mode,
            };
            hook.filter_message(&mut ctx);
        }
    }

    /// The pull callback (seed 002 step 10).
    async fn on_pull_result(
        &self,
        rt: &Arc<Runtime>,
        config: &PushConsumerConfig,
        mut request: PullRequest,
        _subscription: &SubscriptionData,
        result: PullResultExt,
        begin: Instant,
    ) {
        let mq = request.message_queue.clone();
        let pq = Arc::clone(&request.process_queue);
        match result.pull_status {
            PullStatus::Found => {
                let prev_request_offset = request.next_offset;
                request.next_offset = result.next_begin_offset;
                let pull_rt = u64::try_from(begin.elapsed().as_millis()).unwrap_or(u64::MAX);
                self.stats.inc_pull_rt(&mq.topic, pull_rt);
                let msgs = result.msg_found_list;
                let first_msg_offset = msgs.first().map_or(i64::MAX, |m| m.queue_offset);
                if msgs.is_empty() {
                    rt.pull_service
                        .execute_pull_request_immediately(request)
                        .await;
                } else {
                    self.stats
                        .inc_pull_tps(&mq.topic, u64::try_from(msgs.len()).unwrap_or(u64::MAX));
                    // Concurrent batches carry the messages themselves; only orderly
                    // consumption takes them from the process queue, so only it needs copies.
                    let dispatch = match &rt.consume_service {
                        ConsumeService::Concurrently(_) => pq.track_messages(&msgs),
                        ConsumeService::Orderly(_) => pq.put_message(&msgs),
                    };
                    if let Some(me) = self.arc() {
                        rt.submit_consume_request(&me, msgs, Arc::clone(&pq), mq.clone(), dispatch);
                    }
                    if config.pull_interval > Duration::ZERO {
                        rt.pull_service
                            .execute_pull_request_later(request, config.pull_interval);
                    } else {
                        rt.pull_service
                            .execute_pull_request_immediately(request)
                            .await;
                    }
                }
                if result.next_begin_offset < prev_request_offset
                    || first_msg_offset < prev_request_offset
                {
                    tracing::warn!(
                        next_begin_offset = result.next_begin_offset,
                        first_msg_offset,
                        prev_request_offset,
                        "[BUG] pull message result maybe data wrong"
                    );
                }
            }
            PullStatus::NoNewMsg | PullStatus::NoMatchedMsg => {
                request.next_offset = result.next_begin_offset;
                // correctTagsOffset: nothing cached means everything up to here is consumed.
                if pq.msg_count() == 0 {
                    rt.offset_store
                        .update_offset(&mq, request.next_offset, true);
                }
                rt.pull_service
                    .execute_pull_request_immediately(request)
                    .await;
            }
            PullStatus::OffsetIllegal => {
                tracing::warn!(%mq, next_offset = request.next_offset,
                    next_begin_offset = result.next_begin_offset,
                    min_offset = result.min_offset, max_offset = result.max_offset,
                    "the pull request offset illegal");
                request.next_offset = result.next_begin_offset;
                pq.set_dropped(true);
                let Some(me) = self.arc() else { return };
                let rt2 = Arc::clone(rt);
                rt.pull_service.execute_task_later(
                    async move {
                        rt2.offset_store
                            .update_offset(&request.message_queue, request.next_offset, false);
                        rt2.offset_store.persist(&request.message_queue).await;
                        rt2.rebalance
                            .remove_process_queue(me.as_ref(), &request.message_queue)
                            .await;
                        // Re-create the queue now, from the fixed offset, instead of at the
                        // next periodic rebalance (up to 20 s later), as the 5.x Java client does.
                        rt2.instance.rebalance_immediately();
                        tracing::warn!(mq = %request.message_queue, next_offset = request.next_offset,
                            "fix the pull request offset");
                    },
                    OFFSET_ILLEGAL_FIX_DELAY,
                );
            }
        }
    }

    // ---- offsets and send-back ------------------------------------------------------------

    /// RebalancePushImpl.computePullFromWhere (fact sheet §10.3).
    async fn compute_pull_from_where_inner(
        &self,
        rt: &Runtime,
        mq: &MessageQueue,
    ) -> Result<i64, ClientError> {
        let (from_where, consume_timestamp) = {
            let config = self.config.read();
            (config.consume_from_where, config.consume_timestamp)
        };
        let last_offset = rt
            .offset_store
            .read_offset(mq, ReadOffsetType::ReadFromStore)
            .await?;
        if let Some(offset) = last_offset
            && offset >= 0
        {
            return Ok(offset);
        }
        let timeout = rt.instance.config().mq_client_api_timeout;
        let addr = || async {
            if rt
                .instance
                .find_broker_address_in_publish(&mq.broker_name)
                .is_none()
            {
                rt.instance
                    .update_topic_route_info_from_name_server(&mq.topic)
                    .await?;
            }
            rt.instance
                .find_broker_address_in_publish(&mq.broker_name)
                .ok_or_else(|| {
                    ClientError::Client(format!("The broker[{}] not exist", mq.broker_name))
                })
        };
        match from_where {
            ConsumeFromWhere::ConsumeFromFirstOffset | ConsumeFromWhere::ConsumeFromMinOffset => {
                Ok(0)
            }
            ConsumeFromWhere::ConsumeFromTimestamp => {
                let addr = addr().await?;
                if is_retry_topic(&mq.topic) {
                    return rt
                        .instance
                        .api()
                        .get_max_offset(&addr, &mq.topic, mq.queue_id, timeout)
                        .await;
                }
                let timestamp = consume_timestamp.unwrap_or_else(|| {
                    self.consumer_start_timestamp - duration_millis(DEFAULT_CONSUME_TIMESTAMP_AGO)
                });
                rt.instance
                    .api()
                    .search_offset(&addr, &mq.topic, mq.queue_id, timestamp, timeout)
                    .await
            }
            ConsumeFromWhere::ConsumeFromLastOffset
            | ConsumeFromWhere::ConsumeFromLastOffsetAndFromMinWhenBootFirst
            | ConsumeFromWhere::ConsumeFromMaxOffset => {
                if is_retry_topic(&mq.topic) {
                    return Ok(0);
                }
                let addr = addr().await?;
                rt.instance
                    .api()
                    .get_max_offset(&addr, &mq.topic, mq.queue_id, timeout)
                    .await
            }
        }
    }

    /// Hands a failed message back: CONSUMER_SEND_MSG_BACK to the broker the message came from,
    /// falling back to a plain send to the retry topic when that fails.
    pub(crate) async fn send_message_back(
        &self,
        msg: &MessageExt,
        delay_level: i32,
        broker_name: &str,
    ) -> Result<(), ClientError> {
        let Some(rt) = self.runtime() else {
            return Err(ClientError::Client("consumer not started".into()));
        };
        let (group, max_reconsume) = {
            let c = self.config.read();
            (
                c.consumer_group.clone(),
                c.max_reconsume_times_concurrently(),
            )
        };
        let addr = rt
            .instance
            .find_broker_address_in_publish(broker_name)
            .unwrap_or_else(|| msg.store_host.to_string());
        let back = rt
            .instance
            .api()
            .consumer_send_message_back(
                &addr,
                broker_name,
                msg,
                &group,
                delay_level,
                SEND_MESSAGE_BACK_TIMEOUT,
                max_reconsume,
            )
            .await;
        match back {
            Ok(()) => Ok(()),
            Err(e) => {
                tracing::warn!(group = %group, msg_id = %msg.msg_id(), error = %e,
                    "sendMessageBack failed, sending to the retry topic directly");
                self.send_to_retry_topic(
                    &rt,
                    msg,
                    broker_name,
                    msg.reconsume_times.saturating_add(1),
                    max_reconsume,
                )
                .await
            }
        }
    }

    /// Sends a copy of `msg` to `%RETRY%<group>` as a new message (Java's fallback via the
    /// instance's inner producer). The broker applies the delay and moves it to the DLQ once
    /// `reconsume_times` exceeds `max_reconsume`.
    pub(crate) async fn send_to_retry_topic(
        &self,
        rt: &Runtime,
        msg: &MessageExt,
        broker_name: &str,
        reconsume_times: i32,
        max_reconsume: i32,
    ) -> Result<(), ClientError> {
        let group = self.group();
        let retry = retry_topic(&group);
        let mut properties = msg.properties.clone();
        if properties
            .get(keys::ORIGIN_MESSAGE_ID)
            .is_none_or(|id| id.trim().is_empty())
        {
            properties.insert(keys::ORIGIN_MESSAGE_ID, msg.msg_id());
        }
        properties.insert(keys::RETRY_TOPIC, msg.topic.clone());
        properties.insert(keys::RECONSUME_TIME, reconsume_times.to_string());
        properties.insert(keys::MAX_RECONSUME_TIMES, max_reconsume.to_string());
        properties.remove(keys::TRANSACTION_PREPARED);
        properties.remove(keys::MIN_OFFSET);
        properties.remove(keys::MAX_OFFSET);
        properties.remove(keys::CONSUME_START_TIMESTAMP);
        let delay = 3_i32.saturating_add(msg.reconsume_times);
        properties.insert(keys::DELAY_TIME_LEVEL, delay.to_string());

        let addr = match rt.instance.find_broker_address_in_publish(broker_name) {
            Some(addr) => addr,
            None => {
                rt.instance
                    .update_topic_route_info_from_name_server(&retry)
                    .await?;
                rt.instance
                    .find_broker_address_in_publish(broker_name)
                    .ok_or_else(|| {
                        ClientError::Client(format!("The broker[{broker_name}] not exist"))
                    })?
            }
        };
        let mut message = Message::new(retry.clone(), msg.body.clone());
        message.flag = msg.flag;
        *message.properties_mut() = properties.clone();
        let header = SendMessageRequestHeader {
            producer_group: CLIENT_INNER_PRODUCER_GROUP.to_owned(),
            topic: retry,
            default_topic: AUTO_CREATE_TOPIC_KEY.to_owned(),
            default_topic_queue_nums: DEFAULT_TOPIC_QUEUE_NUMS,
            queue_id: 0,
            sys_flag: 0,
            born_timestamp: now_millis(),
            flag: msg.flag,
            properties: Some(properties.encode()),
            reconsume_times: Some(reconsume_times),
            unit_mode: Some(false),
            batch: None,
            max_reconsume_times: Some(max_reconsume),
            rpc: Default::default(),
        };
        rt.instance
            .api()
            .send_message(
                &addr,
                broker_name,
                &message,
                header,
                SEND_MESSAGE_BACK_TIMEOUT,
                CommunicationMode::Sync,
            )
            .await
            .map(|_| ())
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

impl RebalanceDelegate for PushConsumerInner {
    fn consume_type(&self) -> ConsumeType {
        ConsumeType::ConsumePassively
    }

    fn message_queue_changed<'a>(
        &'a self,
        topic: &'a str,
        _mq_all: &'a HashSet<MessageQueue>,
        mq_divided: &'a HashSet<MessageQueue>,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(rt) = self.runtime() else { return };
            // Split the per-topic thresholds over the owned queues.
            let owned = i64::try_from(mq_divided.len()).unwrap_or(i64::MAX);
            if owned > 0 {
                let mut config = self.config.write();
                if config.pull_threshold_for_topic != -1 {
                    let new = (config.pull_threshold_for_topic / owned).max(1);
                    tracing::info!(topic, new, "pullThresholdForQueue adjusted");
                    config.pull_threshold_for_queue = new;
                }
                if config.pull_threshold_size_for_topic != -1 {
                    let new = (config.pull_threshold_size_for_topic / owned).max(1);
                    tracing::info!(topic, new, "pullThresholdSizeForQueue adjusted");
                    config.pull_threshold_size_for_queue = new;
                }
            }
            rt.instance.send_heartbeat_to_all_brokers().await;
        })
    }

    fn remove_unnecessary_message_queue<'a>(
        &'a self,
        mq: &'a MessageQueue,
        pq: &'a Arc<ProcessQueue>,
    ) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let Some(rt) = self.runtime() else {
                return true;
            };
            rt.offset_store.persist(mq).await;
            rt.offset_store.remove_offset(mq);
            if matches!(rt.consume_service, ConsumeService::Orderly(_))
                && self.message_model() == MessageModel::Clustering
            {
                return orderly::unlock_when_idle(&rt, mq, pq).await;
            }
            true
        })
    }

    fn remove_dirty_offset(&self, mq: &MessageQueue) {
        if let Some(rt) = self.runtime() {
            rt.offset_store.remove_offset(mq);
        }
    }

    fn compute_pull_from_where<'a>(
        &'a self,
        mq: &'a MessageQueue,
    ) -> BoxFuture<'a, Result<i64, ClientError>> {
        Box::pin(async move {
            let Some(rt) = self.runtime() else {
                return Err(ClientError::Client("consumer not started".into()));
            };
            self.compute_pull_from_where_inner(&rt, mq).await
        })
    }

    fn dispatch_pull_request(&self, requests: Vec<PullRequest>) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let Some(rt) = self.runtime() else { return };
            for request in requests {
                rt.pull_service
                    .execute_pull_request_immediately(request)
                    .await;
            }
        })
    }
}

impl MQConsumerInner for PushConsumerInner {
    fn group_name(&self) -> String {
        self.group()
    }

    fn message_model(&self) -> MessageModel {
        self.config.read().message_model
    }

    fn consume_type(&self) -> ConsumeType {
        ConsumeType::ConsumePassively
    }

    fn consume_from_where(&self) -> ConsumeFromWhere {
        self.config.read().consume_from_where
    }

    fn subscriptions(&self) -> Vec<SubscriptionData> {
        self.runtime()
            .map(|rt| rt.rebalance.subscriptions())
            .unwrap_or_default()
    }

    fn do_rebalance(&self) -> BoxFuture<'static, ()> {
        let me = self.arc();
        Box::pin(async move {
            if let Some(me) = me
                && !me.pause.load(Ordering::Acquire)
            {
                me.rebalance().await;
            }
        })
    }

    fn persist_consumer_offset(&self) -> BoxFuture<'static, ()> {
        let me = self.arc();
        Box::pin(async move {
            if let Some(me) = me
                && *me.state.lock() == ServiceState::Running
            {
                me.persist_offsets().await;
            }
        })
    }

    fn update_topic_subscribe_info(&self, topic: &str, info: Vec<MessageQueue>) {
        if let Some(rt) = self.runtime() {
            rt.rebalance.set_topic_subscribe_info(topic, info);
        }
    }

    fn is_subscribe_topic_need_update(&self, topic: &str) -> bool {
        self.runtime()
            .is_some_and(|rt| rt.rebalance.is_subscribe_topic_need_update(topic))
    }

    fn running_info(&self) -> serde_json::Value {
        self.running_info_json()
    }

    fn reset_offset(
        &self,
        topic: &str,
        offsets: HashMap<MessageQueue, i64>,
    ) -> BoxFuture<'static, ()> {
        let me = self.arc();
        let topic = topic.to_owned();
        Box::pin(async move {
            let Some(me) = me else { return };
            let Some(rt) = me.runtime() else { return };
            me.pause.store(true, Ordering::Release);
            let targets: Vec<(MessageQueue, i64)> = rt
                .rebalance
                .process_queue_table()
                .into_iter()
                .filter(|(mq, _)| mq.topic == topic)
                .filter_map(|(mq, pq)| {
                    let offset = *offsets.get(&mq)?;
                    // Stop the queue first so no in-flight consumption commits over the reset.
                    pq.set_dropped(true);
                    pq.clear();
                    Some((mq, offset))
                })
                .collect();
            // Removing a queue persists its in-memory offset (now the reset one) and forgets it;
            // the rebalance below re-creates the queue from the stored offset.
            for (mq, offset) in &targets {
                if let Err(e) = rt.offset_store.update_and_persist_offset(mq, *offset).await {
                    tracing::warn!(%mq, offset, error = %e, "persisting a reset offset failed");
                }
                rt.rebalance.remove_process_queue(me.as_ref(), mq).await;
            }
            me.pause.store(false, Ordering::Release);
            me.rebalance().await;
        })
    }

    fn consumer_offsets(&self, topic: &str) -> HashMap<MessageQueue, i64> {
        self.runtime()
            .map(|rt| rt.offset_store.clone_offset_table(topic))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_javas_and_pass_the_check() {
        let config = PushConsumerConfig::new("g");
        config.check().expect("defaults are valid");
        assert_eq!(config.pull_batch_size, 32);
        assert_eq!(config.pull_threshold_for_queue, 1000);
        assert_eq!(config.pull_threshold_size_for_queue, 100);
        assert_eq!(config.consume_concurrently_max_span, 2000);
        assert_eq!(config.consume_thread_min, 20);
        assert_eq!(config.consume_thread_max, 64);
        assert_eq!(config.consume_message_batch_max_size, 1);
        assert_eq!(config.consume_timeout, Duration::from_secs(900));
        assert_eq!(config.allocate_message_queue_strategy.name(), "AVG");
        assert_eq!(config.max_reconsume_times_concurrently(), 16);
        assert_eq!(config.max_reconsume_times_orderly(), i32::MAX);
    }

    #[test]
    fn out_of_range_settings_are_refused() {
        let cases: [fn(&mut PushConsumerConfig); 8] = [
            |c| c.consumer_group.clear(),
            |c| c.consumer_group = "DEFAULT_CONSUMER".into(),
            |c| c.consume_thread_max = 0,
            |c| c.consume_thread_min = c.consume_thread_max + 1,
            |c| c.pull_threshold_for_queue = MAX_QUEUE_THRESHOLD + 1,
            |c| c.pull_batch_size = 0,
            |c| c.consume_message_batch_max_size = MAX_BATCH_SIZE + 1,
            |c| c.pull_interval = MAX_PULL_INTERVAL + Duration::from_millis(1),
        ];
        for (i, tweak) in cases.iter().enumerate() {
            let mut config = PushConsumerConfig::new("g");
            tweak(&mut config);
            assert!(
                matches!(config.check(), Err(ClientError::IllegalArgument(_))),
                "case {i}"
            );
        }
        let mut explicit = PushConsumerConfig::new("g");
        explicit.max_reconsume_times = 3;
        assert_eq!(explicit.max_reconsume_times_concurrently(), 3);
        assert_eq!(explicit.max_reconsume_times_orderly(), 3);
    }
}
