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
//!
//! The code is split by concept: `assignment.rs` (subscribe or assign, the queues owned and their
//! pull tasks, the rebalance delegate), `pull_loop.rs` (one queue's pull task and flow control),
//! `poll.rs` (the buffer the application drains), `seek.rs` (positions: seek, pause, resume and
//! where a queue starts), `commit.rs` (consume offsets to the offset store), `lifecycle.rs` (start
//! and shutdown) and `consumer_inner.rs` (what the client instance asks of the consumer).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::ClientConfig;
use crate::consumer::flow_control::FlowControl;
use crate::consumer::offset_store::OffsetStore;
use crate::consumer::pull::{
    ConsumerOffsets, DEFAULT_BROKER_SUSPEND_MAX_TIME, DEFAULT_CONSUMER_PULL_TIMEOUT,
    DEFAULT_CONSUMER_TIMEOUT_WHEN_SUSPEND, QueueAccess,
};
use crate::consumer::push::hook::ConsumeMessageHook;
use crate::consumer::rebalance::{
    AllocateMessageQueueAveragely, AllocateMessageQueueStrategy, RebalanceImpl,
};
use crate::consumer::{ConsumeFromWhere, MessageExt, MessageModel, MessageQueue, SubscriptionData};
use crate::instance::ServiceState;
use crate::trace::{AsyncTraceDispatcher, ConsumeMessageTraceHook, TraceDispatcherType};

mod assignment;
mod builder;
mod commit;
mod consumer_inner;
mod lifecycle;
mod poll;
mod pull_loop;
mod seek;

pub use builder::LitePullConsumerBuilder;

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

/// Settings of a [`DefaultLitePullConsumer`].
#[derive(Clone)]
pub struct LitePullConsumerConfig {
    /// The consumer group (Java `consumerGroup`).
    pub consumer_group: String,
    /// Clustering (queues shared out among the group) or broadcasting (every member reads all).
    pub message_model: MessageModel,
    /// Where a queue without a committed offset starts.
    pub consume_from_where: ConsumeFromWhere,
    /// Start time (ms) for `ConsumeFromTimestamp`; `None` means 30 minutes ago.
    pub consume_timestamp: Option<i64>,
    /// Messages asked for per pull (Java `pullBatchSize`).
    pub pull_batch_size: i32,
    /// Commit polled offsets every `auto_commit_interval` (Java `autoCommit`); otherwise only on
    /// `commit_sync`.
    pub auto_commit: bool,
    /// Period of auto-commit (Java `autoCommitIntervalMillis`).
    pub auto_commit_interval: Duration,
    /// Most buffered messages over all queues before pulls wait (Java `pullThresholdForAll`).
    pub pull_threshold_for_all: usize,
    /// Most buffered messages of one queue before its pulls wait (Java `pullThresholdForQueue`).
    pub pull_threshold_for_queue: usize,
    /// Most buffered body bytes of one queue before its pulls wait.
    pub pull_threshold_size_for_queue: usize,
    /// How long the broker holds a long-polling pull that finds nothing (Java
    /// `brokerSuspendMaxTimeMillis`).
    pub broker_suspend_max_time: Duration,
    /// Client-side timeout of a long-polling pull (Java `consumerTimeoutMillisWhenSuspend`).
    pub consumer_timeout_when_suspend: Duration,
    /// Timeout of a pull that does not wait for messages (Java `consumerPullTimeoutMillis`).
    pub consumer_pull_timeout: Duration,
    /// How the group's queues are shared out in subscribe mode (Java
    /// `allocateMessageQueueStrategy`).
    pub allocate_strategy: Arc<dyn AllocateMessageQueueStrategy>,
    /// Name servers and client identity.
    pub client: ClientConfig,
    /// Record SubBefore/SubAfter trace events of every polled message in the trace topic (see
    /// [`crate::trace`]); Java's `enableMsgTrace`.
    pub enable_msg_trace: bool,
    /// The trace topic; `None` = `RMQ_SYS_TRACE_TOPIC`. Java's `customizedTraceTopic`.
    pub custom_trace_topic: Option<String>,
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
            enable_msg_trace: false,
            custom_trace_topic: None,
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
    /// The queue the messages came from.
    pub queue: MessageQueue,
    /// The messages, in queue order.
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
    /// Called around every polled batch.
    consume_hooks: RwLock<Vec<Arc<dyn ConsumeMessageHook>>>,
    /// The trace dispatcher, with `enable_msg_trace`.
    trace: Option<Arc<AsyncTraceDispatcher>>,
}

/// A poll-style consumer. See the module docs.
#[derive(Clone)]
pub struct DefaultLitePullConsumer {
    inner: Arc<LiteInner>,
}

impl DefaultLitePullConsumer {
    /// A consumer of `config.consumer_group`, not yet started.
    pub fn new(config: LitePullConsumerConfig) -> Self {
        let trace = config.enable_msg_trace.then(|| {
            Arc::new(AsyncTraceDispatcher::new(
                &config.consumer_group,
                TraceDispatcherType::Consume,
                config.custom_trace_topic.as_deref(),
                &config.client,
            ))
        });
        let mut hooks: Vec<Arc<dyn ConsumeMessageHook>> = Vec::new();
        if let Some(dispatcher) = &trace {
            hooks.push(Arc::new(ConsumeMessageTraceHook::new(
                Arc::clone(dispatcher),
                config.client.client_ip_addr(),
            )));
        }
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
            consume_hooks: RwLock::new(hooks),
            trace,
        });
        DefaultLitePullConsumer { inner }
    }

    /// Adds a hook called around every polled batch: `consume_message_before` when `poll` hands
    /// the batch out and `consume_message_after` right after it, with success (the lite consumer
    /// cannot know what the application does with the messages).
    pub fn register_consume_message_hook(&self, hook: Arc<dyn ConsumeMessageHook>) {
        self.inner.consume_hooks.write().push(hook);
    }

    /// The message trace dispatcher, when `enable_msg_trace` is on.
    pub fn trace_dispatcher(&self) -> Option<&Arc<AsyncTraceDispatcher>> {
        self.inner.trace.as_ref()
    }

    /// The consumer's settings.
    pub fn config(&self) -> &LitePullConsumerConfig {
        &self.inner.config
    }
}
