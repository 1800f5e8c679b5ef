//! `DefaultLitePullConsumer`: a poll-style consumer (RocketMQ 4.6+'s lite pull consumer, the
//! shape of Kafka's consumer).
//!
//! The application calls [`DefaultLitePullConsumer::poll`] in its own loop and gets the next
//! batch; everything between the broker and that call runs in the background. Queues come either
//! from the group's rebalance ([`DefaultLitePullConsumer::subscribe`], reusing the push consumer's
//! [`RebalanceImpl`] and allocation strategies, so lite and push members of one group share queues
//! correctly) or from the application ([`DefaultLitePullConsumer::assign`]). Each owned queue has
//! one pull task that long-polls the broker (LITE_PULL_MESSAGE, held up to 20 s) and appends what
//! it gets to one local buffer that `poll` drains.
//!
//! The buffer is bounded the way RocketMQ bounds it — by message count for the whole consumer
//! (`pull_threshold_for_all`, 10 000) and per queue (`pull_threshold_for_queue`, 1 000, and
//! `pull_threshold_size_for_queue`, 100 MiB) — by making pull tasks wait (the admission check of
//! [`crate::consumer::flow_control`], shared with the push consumer) rather than by dropping
//! anything, so a slow application slows the pulls instead of growing memory.
//!
//! Progress: `poll` advances each queue's *consume offset* to just past the last message it
//! returned. With auto-commit (the default) those offsets go to the offset store every
//! `auto_commit_interval` (5 s) and the client instance persists them to the broker; with manual
//! commit the application calls [`DefaultLitePullConsumer::commit_sync`]. Either way it is
//! at-least-once: what was polled but not committed is delivered again after a restart.
//!
//! Repositioning ([`DefaultLitePullConsumer::seek`] and friends) and pausing bump a per-queue
//! *epoch*: buffered batches and in-flight pulls of an older epoch are discarded, so after `seek`
//! returns, `poll` never yields a message from before the new position.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::api::PullStatus;
use crate::config::ClientConfig;
use crate::consumer::flow_control::{
    CachedCounts, FlowControl, FlowControlLimits, PULL_TIME_DELAY_WHEN_FLOW_CONTROL, saturating_i64,
};
use crate::consumer::offset_store::{OffsetStore, ReadOffsetType};
use crate::consumer::process_queue::ProcessQueue;
use crate::consumer::pull::{
    ConsumerOffsets, DEFAULT_BROKER_SUSPEND_MAX_TIME, DEFAULT_CONSUMER_PULL_TIMEOUT,
    DEFAULT_CONSUMER_TIMEOUT_WHEN_SUSPEND, QueueAccess,
};
use crate::consumer::pull_request::PullRequest;
use crate::consumer::rebalance::{
    AllocateMessageQueueAveragely, AllocateMessageQueueStrategy, RebalanceDelegate, RebalanceImpl,
};
use crate::consumer::{
    ConsumeFromWhere, ConsumeType, MessageExt, MessageModel, MessageQueue, SUB_ALL,
    SubscriptionData, is_retry_topic, now_millis,
};
use crate::error::{ClientError, Result};
use crate::instance::{MQClientManager, MQConsumerInner, ServiceState};

/// Messages asked for per pull (Java `pullBatchSize`).
pub const DEFAULT_PULL_BATCH_SIZE: i32 = 10;
/// Most buffered messages over all queues before pulls wait (Java `pullThresholdForAll`).
pub const DEFAULT_PULL_THRESHOLD_FOR_ALL: usize = 10_000;
/// Most buffered messages of one queue before its pulls wait (Java `pullThresholdForQueue`).
pub const DEFAULT_PULL_THRESHOLD_FOR_QUEUE: usize = 1_000;
/// Most buffered body bytes of one queue before its pulls wait (100 MiB).
pub const DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE: usize = 100 * 1024 * 1024;
/// Period of auto-commit.
pub const DEFAULT_AUTO_COMMIT_INTERVAL: Duration = Duration::from_secs(5);
/// Default wait of [`DefaultLitePullConsumer::poll_default`].
pub const DEFAULT_POLL_TIMEOUT: Duration = Duration::from_secs(5);
/// How far back `ConsumeFromTimestamp` starts when no timestamp is set (30 minutes, as Java).
pub const DEFAULT_CONSUME_TIMESTAMP_LOOKBACK: Duration = Duration::from_secs(30 * 60);
/// Pause of a pull task after a failed pull.
const PULL_DELAY_ON_EXCEPTION: Duration = Duration::from_secs(3);
/// Pause of a pull task whose queue is paused (a resume wakes it earlier).
const PULL_DELAY_WHEN_PAUSED: Duration = Duration::from_secs(1);

/// Settings of a [`DefaultLitePullConsumer`].
#[derive(Clone)]
pub struct LitePullConsumerConfig {
    pub consumer_group: String,
    pub message_model: MessageModel,
    /// Where a queue without a committed offset starts.
    pub consume_from_where: ConsumeFromWhere,
    /// Start time (ms) for `ConsumeFromTimestamp`; `None` means 30 minutes ago.
    pub consume_timestamp: Option<i64>,
    pub pull_batch_size: i32,
    pub auto_commit: bool,
    pub auto_commit_interval: Duration,
    pub pull_threshold_for_all: usize,
    pub pull_threshold_for_queue: usize,
    pub pull_threshold_size_for_queue: usize,
    pub broker_suspend_max_time: Duration,
    pub consumer_timeout_when_suspend: Duration,
    pub consumer_pull_timeout: Duration,
    pub allocate_strategy: Arc<dyn AllocateMessageQueueStrategy>,
    pub client: ClientConfig,
}

impl std::fmt::Debug for LitePullConsumerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LitePullConsumerConfig")
            .field("consumer_group", &self.consumer_group)
            .field("message_model", &self.message_model)
            .field("consume_from_where", &self.consume_from_where)
            .field("pull_batch_size", &self.pull_batch_size)
            .field("auto_commit", &self.auto_commit)
            .field("allocate_strategy", &self.allocate_strategy.name())
            .finish_non_exhaustive()
    }
}

impl LitePullConsumerConfig {
    /// RocketMQ's defaults for `group` with the name servers of `client`.
    pub fn new(consumer_group: impl Into<String>, client: ClientConfig) -> Self {
        LitePullConsumerConfig {
            consumer_group: consumer_group.into(),
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            consume_timestamp: None,
            pull_batch_size: DEFAULT_PULL_BATCH_SIZE,
            auto_commit: true,
            auto_commit_interval: DEFAULT_AUTO_COMMIT_INTERVAL,
            pull_threshold_for_all: DEFAULT_PULL_THRESHOLD_FOR_ALL,
            pull_threshold_for_queue: DEFAULT_PULL_THRESHOLD_FOR_QUEUE,
            pull_threshold_size_for_queue: DEFAULT_PULL_THRESHOLD_SIZE_FOR_QUEUE,
            broker_suspend_max_time: DEFAULT_BROKER_SUSPEND_MAX_TIME,
            consumer_timeout_when_suspend: DEFAULT_CONSUMER_TIMEOUT_WHEN_SUSPEND,
            consumer_pull_timeout: DEFAULT_CONSUMER_PULL_TIMEOUT,
            allocate_strategy: Arc::new(AllocateMessageQueueAveragely),
            client,
        }
    }
}

/// How the consumer got its queues; the two modes exclude each other, as in RocketMQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SubscriptionType {
    None,
    Subscribe,
    Assign,
}

/// One owned queue.
struct QueueState {
    /// Bumped by seek/pause/reset; results of older epochs are discarded.
    epoch: u64,
    /// Next offset to pull; `None` until computed (assign mode computes it in the task).
    pull_offset: Option<i64>,
    /// Offset just past the last message `poll` returned; −1 before the first.
    consume_offset: i64,
    cached_msgs: usize,
    cached_bytes: usize,
    /// Interrupts the task's wait or in-flight pull (seek, resume).
    wake: Arc<Notify>,
    cancel: CancellationToken,
}

/// A batch a pull task buffered for `poll`.
struct ConsumeRequest {
    mq: MessageQueue,
    epoch: u64,
    msgs: Vec<MessageExt>,
    bytes: usize,
}

/// One polled batch and the queue it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LitePullBatch {
    pub queue: MessageQueue,
    pub messages: Vec<MessageExt>,
}

/// What exists only while started.
#[derive(Clone)]
struct Runtime {
    access: QueueAccess,
    store: Arc<dyn OffsetStore>,
    offsets: ConsumerOffsets,
    rebalance: Arc<RebalanceImpl>,
}

struct LiteInner {
    config: LitePullConsumerConfig,
    me: Weak<LiteInner>,
    state: Mutex<ServiceState>,
    sub_type: Mutex<SubscriptionType>,
    /// Subscribe mode: topic → subscription.
    subscriptions: RwLock<HashMap<String, SubscriptionData>>,
    /// Assign mode: the queues the application asked for.
    assigned_by_app: RwLock<HashSet<MessageQueue>>,
    queues: Mutex<HashMap<MessageQueue, QueueState>>,
    paused: Mutex<HashSet<MessageQueue>>,
    buffer: Mutex<VecDeque<ConsumeRequest>>,
    buffered_msgs: Mutex<usize>,
    buffer_ready: Notify,
    /// Holds pull tasks while too much is buffered (silently: a waiting pull task is the
    /// normal state of a consumer whose application polls slowly).
    flow_control: FlowControl,
    last_commit: Mutex<Instant>,
    runtime: RwLock<Option<Runtime>>,
    stop: CancellationToken,
    tasks: TaskTracker,
}

/// A poll-style consumer. See the module docs.
#[derive(Clone)]
pub struct DefaultLitePullConsumer {
    inner: Arc<LiteInner>,
}

impl DefaultLitePullConsumer {
    /// A consumer of `config.consumer_group`, not yet started.
    pub fn new(config: LitePullConsumerConfig) -> Self {
        let inner = Arc::new_cyclic(|me| LiteInner {
            config,
            me: me.clone(),
            state: Mutex::new(ServiceState::CreateJust),
            sub_type: Mutex::new(SubscriptionType::None),
            subscriptions: RwLock::new(HashMap::new()),
            assigned_by_app: RwLock::new(HashSet::new()),
            queues: Mutex::new(HashMap::new()),
            paused: Mutex::new(HashSet::new()),
            buffer: Mutex::new(VecDeque::new()),
            buffered_msgs: Mutex::new(0),
            buffer_ready: Notify::new(),
            flow_control: FlowControl::silent(),
            last_commit: Mutex::new(Instant::now()),
            runtime: RwLock::new(None),
            stop: CancellationToken::new(),
            tasks: TaskTracker::new(),
        });
        DefaultLitePullConsumer { inner }
    }

    /// The consumer's settings.
    pub fn config(&self) -> &LitePullConsumerConfig {
        &self.inner.config
    }

    /// Subscribes to `topic` with a tag expression (`*`, `TagA || TagB`); queues come from the
    /// group's rebalance. Excludes [`Self::assign`]. May be called before or after start.
    pub async fn subscribe(&self, topic: &str, sub_expression: &str) -> Result<()> {
        if topic.is_empty() {
            return Err(ClientError::IllegalArgument("topic is empty".to_owned()));
        }
        self.inner.set_sub_type(SubscriptionType::Subscribe)?;
        let data = SubscriptionData::from_tag_expression(topic, sub_expression, now_millis());
        self.inner
            .subscriptions
            .write()
            .insert(topic.to_owned(), data.clone());
        let runtime = self.inner.runtime.read().clone();
        if let Some(rt) = runtime {
            rt.rebalance.put_subscription(data);
            self.inner
                .refresh_and_rebalance(&rt, &[topic.to_owned()])
                .await;
        }
        Ok(())
    }

    /// Stops reading `topic` (subscribe mode).
    pub async fn unsubscribe(&self, topic: &str) {
        self.inner.subscriptions.write().remove(topic);
        let runtime = self.inner.runtime.read().clone();
        if let Some(rt) = runtime {
            rt.rebalance.remove_subscription(topic);
            rt.rebalance.do_rebalance(&*self.inner, false).await;
        }
        let gone: Vec<MessageQueue> = self
            .inner
            .queues
            .lock()
            .keys()
            .filter(|mq| mq.topic == topic)
            .cloned()
            .collect();
        for mq in gone {
            self.inner.remove_queue(&mq).await;
        }
    }

    /// Reads exactly `queues` (no rebalance). Excludes [`Self::subscribe`]. Replaces the previous
    /// assignment; queues no longer assigned stop and their offsets are persisted.
    pub async fn assign(&self, queues: Vec<MessageQueue>) -> Result<()> {
        if queues.is_empty() {
            return Err(ClientError::IllegalArgument(
                "the message queue list to assign is empty".to_owned(),
            ));
        }
        self.inner.set_sub_type(SubscriptionType::Assign)?;
        let wanted: HashSet<MessageQueue> = queues.into_iter().collect();
        *self.inner.assigned_by_app.write() = wanted.clone();
        if self.inner.runtime.read().is_some() {
            self.inner.apply_assignment(&wanted).await;
        }
        Ok(())
    }

    /// Starts the client instance, the rebalance (subscribe mode) or the assigned queues' pull
    /// tasks (assign mode). A consumer starts once.
    pub async fn start(&self) -> Result<()> {
        {
            let mut state = self.inner.state.lock();
            if *state != ServiceState::CreateJust {
                return Err(ClientError::ServiceState {
                    state: state.to_string(),
                    needed: ServiceState::CreateJust.to_string(),
                });
            }
            *state = ServiceState::StartFailed;
        }
        let config = &self.inner.config;
        let group = config.consumer_group.clone();
        if group.is_empty() {
            return Err(ClientError::IllegalArgument(
                "consumer group is empty".to_owned(),
            ));
        }
        if config.pull_batch_size <= 0 {
            return Err(ClientError::IllegalArgument(format!(
                "pull_batch_size {} must be positive",
                config.pull_batch_size
            )));
        }
        let mut client = config.client.clone();
        if config.message_model == MessageModel::Clustering {
            client.change_instance_name_to_pid();
        }
        let instance = MQClientManager::get_or_create_instance(&client);
        let offsets = ConsumerOffsets::create(&instance, &group, config.message_model)?;
        let rebalance = Arc::new(RebalanceImpl::new(
            group.clone(),
            config.message_model,
            Arc::clone(&config.allocate_strategy),
            Arc::clone(&instance),
        ));
        for data in self.inner.subscriptions.read().values() {
            rebalance.put_subscription(data.clone());
        }
        let runtime = Runtime {
            access: QueueAccess::new(Arc::clone(&instance), group.clone()),
            store: Arc::clone(&offsets.store),
            offsets,
            rebalance,
        };
        *self.inner.runtime.write() = Some(runtime.clone());
        let me: Arc<dyn MQConsumerInner> = Arc::clone(&self.inner) as Arc<dyn MQConsumerInner>;
        if let Err(e) = instance.register_consumer(&group, me) {
            *self.inner.runtime.write() = None;
            return Err(e);
        }
        if let Err(e) = instance.start().await {
            instance.unregister_consumer(&group);
            *self.inner.runtime.write() = None;
            return Err(e);
        }
        *self.inner.state.lock() = ServiceState::Running;
        *self.inner.last_commit.lock() = Instant::now();
        let sub_type = *self.inner.sub_type.lock();
        match sub_type {
            SubscriptionType::Subscribe => {
                let topics: Vec<String> = self.inner.subscriptions.read().keys().cloned().collect();
                self.inner.refresh_and_rebalance(&runtime, &topics).await;
            }
            SubscriptionType::Assign => {
                let wanted = self.inner.assigned_by_app.read().clone();
                let topics: HashSet<String> = wanted.iter().map(|mq| mq.topic.clone()).collect();
                for topic in topics {
                    if let Err(e) = instance
                        .update_topic_route_info_from_name_server(&topic)
                        .await
                    {
                        tracing::warn!(topic = %topic, error = %e, "route of an assigned topic unavailable");
                    }
                }
                instance.send_heartbeat_to_all_brokers().await;
                self.inner.apply_assignment(&wanted).await;
            }
            SubscriptionType::None => instance.send_heartbeat_to_all_brokers().await,
        }
        tracing::info!(group = %group, client_id = %instance.client_id(), "lite pull consumer started");
        Ok(())
    }

    /// Stops the pull tasks, commits (with auto-commit) and persists the offsets, unregisters
    /// the group and stops the instance if it was the last user.
    pub async fn shutdown(&self) {
        {
            let mut state = self.inner.state.lock();
            if *state != ServiceState::Running {
                return;
            }
            *state = ServiceState::ShutdownAlready;
        }
        self.inner.stop.cancel();
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
        let runtime = self.inner.runtime.read().clone();
        let Some(rt) = runtime else { return };
        if self.inner.config.auto_commit {
            self.inner.commit_consumed(&rt);
        }
        rt.rebalance.drop_all();
        let owned: HashSet<MessageQueue> = self.inner.queues.lock().keys().cloned().collect();
        if let Err(e) = rt.offsets.persist_sync(&owned).await {
            tracing::warn!(group = %self.inner.config.consumer_group, error = %e,
                "persisting offsets at shutdown failed");
        }
        let instance = Arc::clone(&rt.access.instance);
        let group = &self.inner.config.consumer_group;
        instance.unregister_consumer(group);
        instance.unregister_client(None, Some(group)).await;
        instance.shutdown().await;
        self.inner.queues.lock().clear();
        self.inner.buffer.lock().clear();
    }

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
                return Ok(Some(batch));
            }
            let ready = self.inner.buffer_ready.notified();
            tokio::pin!(ready);
            ready.as_mut().enable();
            if let Some(batch) = self.inner.take_batch() {
                return Ok(Some(batch));
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

    /// The queues currently owned (assigned or allocated), sorted.
    pub fn assignment(&self) -> Vec<MessageQueue> {
        let mut owned: Vec<MessageQueue> = self.inner.queues.lock().keys().cloned().collect();
        owned.sort();
        owned
    }

    /// The readable queues of `topic`, from the name server.
    pub async fn fetch_message_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        self.inner
            .running_runtime()?
            .access
            .fetch_subscribe_message_queues(topic)
            .await
    }
}

impl LiteInner {
    fn set_sub_type(&self, wanted: SubscriptionType) -> Result<()> {
        let mut current = self.sub_type.lock();
        match *current {
            SubscriptionType::None => {
                *current = wanted;
                Ok(())
            }
            t if t == wanted => Ok(()),
            _ => Err(ClientError::IllegalArgument(
                "subscribe and assign are mutually exclusive".to_owned(),
            )),
        }
    }

    fn running_runtime(&self) -> Result<Runtime> {
        let state = *self.state.lock();
        if state != ServiceState::Running {
            return Err(ClientError::ServiceState {
                state: state.to_string(),
                needed: ServiceState::Running.to_string(),
            });
        }
        self.runtime
            .read()
            .clone()
            .ok_or_else(|| ClientError::Client("lite pull consumer is not started".to_owned()))
    }

    /// Fetches the routes of `topics`, announces the subscriptions and rebalances once now.
    async fn refresh_and_rebalance(&self, rt: &Runtime, topics: &[String]) {
        let instance = &rt.access.instance;
        for topic in topics {
            match instance
                .update_topic_route_info_from_name_server(topic)
                .await
            {
                Ok(_) => {
                    if let Some(route) = instance.topic_route(topic) {
                        rt.rebalance.set_topic_subscribe_info(
                            topic,
                            crate::route::subscribe_queues(topic, &route),
                        );
                    }
                }
                Err(e) => {
                    tracing::warn!(topic = %topic, error = %e, "route of a subscribed topic unavailable")
                }
            }
        }
        instance.send_heartbeat_to_all_brokers().await;
        rt.rebalance.do_rebalance(self, false).await;
        instance.rebalance_immediately();
    }

    /// Assign mode: starts the queues in `wanted` that are not owned, stops the others.
    async fn apply_assignment(&self, wanted: &HashSet<MessageQueue>) {
        let owned: Vec<MessageQueue> = self.queues.lock().keys().cloned().collect();
        for mq in owned.iter().filter(|mq| !wanted.contains(*mq)) {
            self.remove_queue(mq).await;
        }
        for mq in wanted {
            self.add_queue(mq.clone(), None);
        }
    }

    /// Starts owning `mq` (no-op when owned): registers its state and spawns its pull task.
    fn add_queue(&self, mq: MessageQueue, start_offset: Option<i64>) {
        let Some(me) = self.me.upgrade() else { return };
        let wake = Arc::new(Notify::new());
        let cancel = self.stop.child_token();
        {
            let mut queues = self.queues.lock();
            if queues.contains_key(&mq) {
                return;
            }
            queues.insert(
                mq.clone(),
                QueueState {
                    epoch: 0,
                    pull_offset: start_offset,
                    consume_offset: start_offset.unwrap_or(-1),
                    cached_msgs: 0,
                    cached_bytes: 0,
                    wake: Arc::clone(&wake),
                    cancel: cancel.clone(),
                },
            );
        }
        tracing::info!(group = %self.config.consumer_group, %mq, ?start_offset, "lite pull: queue started");
        self.tasks
            .spawn(async move { me.pull_loop(mq, wake, cancel).await });
    }

    /// Stops owning `mq`: stops its task, drops its buffered messages, commits (with
    /// auto-commit) and persists its offset.
    async fn remove_queue(&self, mq: &MessageQueue) {
        let removed = self.queues.lock().remove(mq);
        let Some(state) = removed else { return };
        state.cancel.cancel();
        self.drop_buffered(mq);
        let runtime = self.runtime.read().clone();
        if let Some(rt) = runtime {
            if self.config.auto_commit && state.consume_offset >= 0 {
                rt.store.update_offset(mq, state.consume_offset, false);
            }
            if let Err(e) = rt.offsets.persist_sync(&HashSet::from([mq.clone()])).await {
                tracing::warn!(%mq, error = %e, "persisting the offset of a released queue failed");
            }
            rt.store.remove_offset(mq);
        }
        tracing::info!(group = %self.config.consumer_group, %mq, "lite pull: queue stopped");
    }

    /// Sets the next pull and consume offset of `mq` and discards everything older.
    fn reposition(&self, mq: &MessageQueue, offset: i64) {
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

    fn drop_buffered(&self, mq: &MessageQueue) {
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

    /// Writes every owned queue's consume offset to the store (memory); returns the owned set.
    fn commit_consumed(&self, rt: &Runtime) -> HashSet<MessageQueue> {
        let queues = self.queues.lock();
        for (mq, q) in queues.iter() {
            if q.consume_offset >= 0 {
                rt.store.update_offset(mq, q.consume_offset, false);
            }
        }
        *self.last_commit.lock() = Instant::now();
        queues.keys().cloned().collect()
    }

    fn maybe_auto_commit(&self, rt: &Runtime) {
        if !self.config.auto_commit {
            return;
        }
        let due = self.last_commit.lock().elapsed() >= self.config.auto_commit_interval;
        if due {
            self.commit_consumed(rt);
        }
    }

    /// Where a queue without a position starts: the committed offset, else per
    /// `consume_from_where` (§10.3).
    async fn compute_start_offset(&self, rt: &Runtime, mq: &MessageQueue) -> Result<i64> {
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

    fn subscription_for(&self, topic: &str) -> SubscriptionData {
        self.subscriptions
            .read()
            .get(topic)
            .cloned()
            .unwrap_or_else(|| SubscriptionData::from_tag_expression(topic, SUB_ALL, 0))
    }

    /// The buffer bounds as flow-control thresholds (message counts, and bytes compared as bytes).
    fn flow_control_limits(&self) -> FlowControlLimits {
        FlowControlLimits {
            count_for_consumer: Some(saturating_i64(self.config.pull_threshold_for_all)),
            count_for_queue: saturating_i64(self.config.pull_threshold_for_queue),
            size_for_queue: saturating_i64(self.config.pull_threshold_size_for_queue),
            size_unit: 1,
            max_span: None,
        }
    }

    /// Waits `delay`, returning early on a wake-up; `false` when the task must stop.
    async fn pause_task(delay: Duration, wake: &Notify, cancel: &CancellationToken) -> bool {
        tokio::select! {
            () = cancel.cancelled() => false,
            () = wake.notified() => true,
            () = tokio::time::sleep(delay) => true,
        }
    }

    /// One queue's pull loop: flow control, position, long-polling pull, buffering.
    async fn pull_loop(
        self: Arc<Self>,
        mq: MessageQueue,
        wake: Arc<Notify>,
        cancel: CancellationToken,
    ) {
        let Some(rt) = self.runtime.read().clone() else {
            return;
        };
        let batch = self.config.pull_batch_size;
        while !cancel.is_cancelled() {
            if self.paused.lock().contains(&mq) {
                if !Self::pause_task(PULL_DELAY_WHEN_PAUSED, &wake, &cancel).await {
                    break;
                }
                continue;
            }
            let buffered = *self.buffered_msgs.lock();
            let snapshot = {
                let queues = self.queues.lock();
                queues
                    .get(&mq)
                    .map(|q| (q.epoch, q.pull_offset, q.cached_msgs, q.cached_bytes))
            };
            let Some((epoch, pull_offset, cached_msgs, cached_bytes)) = snapshot else {
                break;
            };
            let cached = CachedCounts::of(buffered, cached_msgs, cached_bytes);
            if !self
                .flow_control
                .admit(&mq, &self.flow_control_limits(), &cached)
            {
                if !Self::pause_task(PULL_TIME_DELAY_WHEN_FLOW_CONTROL, &wake, &cancel).await {
                    break;
                }
                continue;
            }
            let offset = match pull_offset {
                Some(o) => o,
                None => match self.compute_start_offset(&rt, &mq).await {
                    Ok(o) => {
                        let mut queues = self.queues.lock();
                        match queues.get_mut(&mq) {
                            Some(q) if q.epoch == epoch && q.pull_offset.is_none() => {
                                q.pull_offset = Some(o);
                                if q.consume_offset < 0 {
                                    q.consume_offset = o;
                                }
                            }
                            _ => {}
                        }
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(%mq, error = %e, "lite pull: cannot compute the start offset");
                        if !Self::pause_task(PULL_DELAY_ON_EXCEPTION, &wake, &cancel).await {
                            break;
                        }
                        continue;
                    }
                },
            };
            let subscription = self.subscription_for(&mq.topic);
            let pulled = tokio::select! {
                () = cancel.cancelled() => break,
                () = wake.notified() => continue,
                r = rt.access.pull(
                    &mq,
                    &subscription,
                    offset,
                    batch,
                    true,
                    self.config.broker_suspend_max_time,
                    self.config.consumer_timeout_when_suspend,
                    true,
                ) => r,
            };
            match pulled {
                Ok(result) => self.accept_pull(&mq, epoch, result),
                Err(e) => {
                    tracing::warn!(%mq, offset, error = %e, "lite pull failed");
                    if !Self::pause_task(PULL_DELAY_ON_EXCEPTION, &wake, &cancel).await {
                        break;
                    }
                }
            }
        }
    }

    /// Buffers a pull's messages and advances the pull offset, unless the queue moved on.
    fn accept_pull(
        &self,
        mq: &MessageQueue,
        epoch: u64,
        result: crate::consumer::pull::PullResult,
    ) {
        let mut queues = self.queues.lock();
        let Some(q) = queues.get_mut(mq) else { return };
        if q.epoch != epoch {
            return;
        }
        if result.pull_status == PullStatus::OffsetIllegal {
            tracing::warn!(%mq, next = result.next_begin_offset, "lite pull: offset illegal, moving on");
        }
        q.pull_offset = Some(result.next_begin_offset);
        if result.pull_status == PullStatus::Found && !result.msg_found_list.is_empty() {
            let n = result.msg_found_list.len();
            let bytes: usize = result.msg_found_list.iter().map(|m| m.body.len()).sum();
            q.cached_msgs += n;
            q.cached_bytes += bytes;
            let request = ConsumeRequest {
                mq: mq.clone(),
                epoch,
                msgs: result.msg_found_list,
                bytes,
            };
            drop(queues);
            self.buffer.lock().push_back(request);
            *self.buffered_msgs.lock() += n;
            self.buffer_ready.notify_one();
        }
    }
}

impl RebalanceDelegate for LiteInner {
    fn consume_type(&self) -> ConsumeType {
        ConsumeType::ConsumeActively
    }

    fn message_queue_changed<'a>(
        &'a self,
        _topic: &'a str,
        _mq_all: &'a HashSet<MessageQueue>,
        _mq_divided: &'a HashSet<MessageQueue>,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    fn remove_unnecessary_message_queue<'a>(
        &'a self,
        mq: &'a MessageQueue,
        _pq: &'a Arc<ProcessQueue>,
    ) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            self.remove_queue(mq).await;
            true
        })
    }

    fn remove_dirty_offset(&self, mq: &MessageQueue) {
        if let Some(rt) = self.runtime.read().as_ref() {
            rt.store.remove_offset(mq);
        }
    }

    fn compute_pull_from_where<'a>(
        &'a self,
        mq: &'a MessageQueue,
    ) -> BoxFuture<'a, Result<i64, ClientError>> {
        Box::pin(async move {
            let rt = self.runtime.read().clone().ok_or_else(|| {
                ClientError::Client("lite pull consumer is not started".to_owned())
            })?;
            self.compute_start_offset(&rt, mq).await
        })
    }

    fn dispatch_pull_request(&self, requests: Vec<PullRequest>) -> BoxFuture<'_, ()> {
        for request in requests {
            self.add_queue(request.message_queue, Some(request.next_offset));
        }
        Box::pin(async {})
    }
}

impl MQConsumerInner for LiteInner {
    fn group_name(&self) -> String {
        self.config.consumer_group.clone()
    }

    fn message_model(&self) -> MessageModel {
        self.config.message_model
    }

    fn consume_type(&self) -> ConsumeType {
        ConsumeType::ConsumeActively
    }

    fn consume_from_where(&self) -> ConsumeFromWhere {
        self.config.consume_from_where
    }

    fn subscriptions(&self) -> Vec<SubscriptionData> {
        let mut subs: Vec<SubscriptionData> = match *self.sub_type.lock() {
            SubscriptionType::Assign => {
                let topics: HashSet<String> = self
                    .assigned_by_app
                    .read()
                    .iter()
                    .map(|mq| mq.topic.clone())
                    .collect();
                topics
                    .into_iter()
                    .map(|t| SubscriptionData::from_tag_expression(t, SUB_ALL, 0))
                    .collect()
            }
            _ => self.subscriptions.read().values().cloned().collect(),
        };
        subs.sort_by(|a, b| a.topic.cmp(&b.topic));
        subs
    }

    fn do_rebalance(&self) -> BoxFuture<'static, ()> {
        let me = self.me.upgrade();
        Box::pin(async move {
            let Some(me) = me else { return };
            if *me.sub_type.lock() != SubscriptionType::Subscribe
                || *me.state.lock() != ServiceState::Running
            {
                return;
            }
            let runtime = me.runtime.read().clone();
            if let Some(rt) = runtime {
                rt.rebalance.do_rebalance(&*me, false).await;
            }
        })
    }

    fn persist_consumer_offset(&self) -> BoxFuture<'static, ()> {
        let me = self.me.upgrade();
        Box::pin(async move {
            let Some(me) = me else { return };
            let runtime = me.runtime.read().clone();
            if let Some(rt) = runtime {
                let owned: HashSet<MessageQueue> = me.queues.lock().keys().cloned().collect();
                rt.store.persist_all(&owned).await;
            }
        })
    }

    fn update_topic_subscribe_info(&self, topic: &str, info: Vec<MessageQueue>) {
        if let Some(rt) = self.runtime.read().as_ref() {
            rt.rebalance.set_topic_subscribe_info(topic, info);
        }
    }

    fn is_subscribe_topic_need_update(&self, topic: &str) -> bool {
        self.runtime
            .read()
            .as_ref()
            .is_some_and(|rt| rt.rebalance.is_subscribe_topic_need_update(topic))
    }

    fn running_info(&self) -> serde_json::Value {
        let queues: HashMap<String, serde_json::Value> = self
            .queues
            .lock()
            .iter()
            .map(|(mq, q)| {
                (
                    mq.to_string(),
                    serde_json::json!({
                        "pullOffset": q.pull_offset,
                        "consumeOffset": q.consume_offset,
                        "cachedMsgCount": q.cached_msgs,
                        "cachedMsgSizeInBytes": q.cached_bytes,
                    }),
                )
            })
            .collect();
        serde_json::json!({
            "properties": {
                "PROP_CONSUME_TYPE": "CONSUME_ACTIVELY",
                "PROP_CLIENT_VERSION": env!("CARGO_PKG_VERSION"),
            },
            "subscriptionSet": self.subscriptions(),
            "mqTable": queues,
        })
    }

    /// The broker reset the group's offsets (admin reset by time): owned queues jump there.
    fn reset_offset(
        &self,
        topic: &str,
        offsets: HashMap<MessageQueue, i64>,
    ) -> BoxFuture<'static, ()> {
        if let Some(rt) = self.runtime.read().as_ref() {
            for (mq, offset) in &offsets {
                if mq.topic == topic {
                    rt.store.update_offset(mq, *offset, false);
                    self.reposition(mq, *offset);
                }
            }
        }
        Box::pin(async {})
    }

    fn consumer_offsets(&self, topic: &str) -> HashMap<MessageQueue, i64> {
        self.queues
            .lock()
            .iter()
            .filter(|(mq, q)| mq.topic == topic && q.consume_offset >= 0)
            .map(|(mq, q)| (mq.clone(), q.consume_offset))
            .collect()
    }
}
