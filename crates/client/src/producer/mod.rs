//! The producer: `DefaultMQProducer`.
//!
//! A send goes through the same steps as in the Java client, because brokers and consumers rely
//! on their results (message ids, compression flags, queue spreading):
//!
//! 1. validate the message (topic syntax, body size ≤ `max_message_size`);
//! 2. give it a client id (UNIQ_KEY, from [`UniqIdGenerator`] seeded with the client IP) and
//!    compress a body of at least `compress_msg_body_over_howmuch` bytes (zlib, level 5, sys
//!    flag COMPRESSED | ZLIB);
//! 3. find the topic's publish info: cached, else the name server's route, else the route of the
//!    template topic TBW102 with at most `default_topic_queue_nums` queues per broker, so that
//!    the broker can auto-create the topic;
//! 4. pick a queue round-robin — avoiding the broker of a failed attempt, and with
//!    `send_latency_fault_enable` also brokers in their isolation window ([`fault`]);
//! 5. send SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE), retrying on another broker when the broker
//!    could not be reached or answered a code that another broker may not (at most
//!    1 + `retry_times_when_send_failed` attempts, all within `send_msg_timeout`).
//!
//! Transactional sends live in [`transaction`] ([`TransactionProducer`]), built on this producer.
//!
//! Sends to a given queue and through a [`MessageQueueSelector`] make one attempt: the caller
//! chose the queue, so moving the message elsewhere would break the ordering it asked for.
//!
//! Files: this one holds the configuration and the public [`DefaultMQProducer`]; `prepare.rs`
//! turns messages and batches into their wire form (steps 1–2), `queue_selection.rs` finds the
//! publish info and picks queues (steps 3–4), `send.rs` sends with retries (step 5) and
//! `validate.rs` holds the topic and group name rules.

mod builder;
pub mod fault;
pub mod hook;
mod prepare;
mod queue_selection;
pub mod selector;
mod send;
pub mod transaction;
mod transaction_listener;
mod validate;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use comet_protocol::body::MessageQueue;
use comet_protocol::headers::{
    AUTO_CREATE_TOPIC_KEY_TOPIC, CheckTransactionStateRequestHeader, DEFAULT_TOPIC_QUEUE_NUMS,
};
use comet_protocol::limits::MAX_MESSAGE_SIZE;
use comet_protocol::message::compress::{DEFAULT_COMPRESS_LEVEL, DEFAULT_COMPRESS_THRESHOLD};
use comet_protocol::message::id::UniqIdGenerator;
use parking_lot::{Mutex, RwLock};

pub use crate::api::{CommunicationMode, SendResult, SendStatus};
use crate::config::ClientConfig;
use crate::error::{ClientError, Result};
use crate::instance::{MQClientInstance, MQClientManager, MQProducerInner, ServiceState};
use crate::message::Message;
use crate::route::TopicPublishInfo;
use crate::trace::{
    AsyncTraceDispatcher, EndTransactionTraceHook, SendMessageTraceHook, TraceDispatcherType,
};
pub use builder::{ProducerBuilder, TransactionProducerBuilder};
pub use fault::LatencyFaultTolerance;
pub use hook::{EndTransactionContext, EndTransactionHook, SendMessageContext, SendMessageHook};
use queue_selection::placeholder;
pub use selector::{
    JavaHash, MessageQueueSelector, SelectMessageQueueByHash, SelectMessageQueueByRandom,
};
use send::{expect_result, remaining};
pub use transaction::{TransactionProducer, TransactionSendResult};
pub use transaction_listener::{
    AsyncTransactionListener, LocalTransactionState, TransactionListener,
};
pub use validate::{check_group, check_topic};

/// `sendMsgTimeout`: the whole send, retries included.
pub const DEFAULT_SEND_MSG_TIMEOUT: Duration = Duration::from_secs(3);
/// `retryTimesWhenSendFailed`.
pub const DEFAULT_RETRY_TIMES_WHEN_SEND_FAILED: u32 = 2;
/// `retryTimesWhenSendAsyncFailed`.
pub const DEFAULT_RETRY_TIMES_WHEN_SEND_ASYNC_FAILED: u32 = 2;
/// The producer group name Java reserves; a real group must be named.
pub const DEFAULT_PRODUCER_GROUP: &str = "DEFAULT_PRODUCER";

/// Settings of a [`DefaultMQProducer`]; the defaults are those of the Java client's
/// `DefaultMQProducer`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProducerConfig {
    /// The producer group (Java `producerGroup`), used by transaction checks.
    pub producer_group: String,
    /// Name servers and client identity.
    pub client: ClientConfig,
    /// Deadline of one send, retries included.
    pub send_msg_timeout: Duration,
    /// Extra attempts of a failed synchronous send (Java `retryTimesWhenSendFailed`).
    pub retry_times_when_send_failed: u32,
    /// Extra attempts of a failed asynchronous send (Java `retryTimesWhenSendAsyncFailed`).
    pub retry_times_when_send_async_failed: u32,
    /// Retry on another broker when a sync send is stored but a flush/replication guarantee
    /// failed (status other than `SendOk`).
    pub retry_another_broker_when_not_store_ok: bool,
    /// Largest body (or encoded batch) accepted, checked before compression.
    pub max_message_size: usize,
    /// Bodies at least this long are compressed.
    pub compress_msg_body_over_howmuch: usize,
    /// zlib level of body compression.
    pub compress_level: i32,
    /// Queue count asked for when a send auto-creates a topic.
    pub default_topic_queue_nums: i32,
    /// Template topic of auto-creation.
    pub create_topic_key: String,
    /// Avoid brokers that were slow or failed recently: after each send the broker is avoided
    /// for a time that grows with the send's latency (a failure counts as 10 s latency), see
    /// [`fault`].
    pub send_latency_fault_enable: bool,
    /// Record a trace event of every send and transaction end in the trace topic (see
    /// [`crate::trace`]); Java's `enableMsgTrace`.
    pub enable_msg_trace: bool,
    /// The trace topic; `None` = `RMQ_SYS_TRACE_TOPIC`. Java's `customizedTraceTopic`.
    pub custom_trace_topic: Option<String>,
}

impl ProducerConfig {
    /// Defaults for `producer_group` talking to `namesrv_addr`.
    pub fn new(producer_group: impl Into<String>, namesrv_addr: impl Into<String>) -> Self {
        ProducerConfig {
            producer_group: producer_group.into(),
            client: ClientConfig::new(namesrv_addr),
            send_msg_timeout: DEFAULT_SEND_MSG_TIMEOUT,
            retry_times_when_send_failed: DEFAULT_RETRY_TIMES_WHEN_SEND_FAILED,
            retry_times_when_send_async_failed: DEFAULT_RETRY_TIMES_WHEN_SEND_ASYNC_FAILED,
            retry_another_broker_when_not_store_ok: false,
            max_message_size: MAX_MESSAGE_SIZE,
            compress_msg_body_over_howmuch: DEFAULT_COMPRESS_THRESHOLD,
            compress_level: DEFAULT_COMPRESS_LEVEL,
            default_topic_queue_nums: DEFAULT_TOPIC_QUEUE_NUMS,
            create_topic_key: AUTO_CREATE_TOPIC_KEY_TOPIC.to_string(),
            send_latency_fault_enable: false,
            enable_msg_trace: false,
            custom_trace_topic: None,
        }
    }
}

/// A producer. Cheap to clone; clones share the same producer.
#[derive(Clone)]
pub struct DefaultMQProducer {
    inner: Arc<ProducerInner>,
}

struct ProducerInner {
    config: ProducerConfig,
    state: Mutex<ServiceState>,
    instance: RwLock<Option<Arc<MQClientInstance>>>,
    publish_info: RwLock<HashMap<String, Arc<TopicPublishInfo>>>,
    fault: LatencyFaultTolerance,
    uniq: UniqIdGenerator,
    /// Set by a [`transaction::TransactionProducer`]: runs broker checks of this group.
    transaction_check: std::sync::OnceLock<TransactionCheck>,
    send_hooks: RwLock<Vec<Arc<dyn SendMessageHook>>>,
    end_transaction_hooks: RwLock<Vec<Arc<dyn EndTransactionHook>>>,
    /// The trace dispatcher, with `enable_msg_trace`.
    trace: Option<Arc<AsyncTraceDispatcher>>,
}

/// What a transaction producer does with a CHECK_TRANSACTION_STATE (broker address, half
/// message, header).
pub(crate) type TransactionCheck = Arc<
    dyn Fn(&str, comet_protocol::message::MessageExt, CheckTransactionStateRequestHeader)
        + Send
        + Sync,
>;

impl DefaultMQProducer {
    /// A producer (not started). Like the Java producer, a default instance name becomes the
    /// process id.
    pub fn new(mut config: ProducerConfig) -> Self {
        config.client.change_instance_name_to_pid();
        let uniq = UniqIdGenerator::with_ip(config.client.client_ip_addr());
        let trace = config.enable_msg_trace.then(|| {
            Arc::new(AsyncTraceDispatcher::new(
                &config.producer_group,
                TraceDispatcherType::Produce,
                config.custom_trace_topic.as_deref(),
                &config.client,
            ))
        });
        let producer = DefaultMQProducer {
            inner: Arc::new(ProducerInner {
                config,
                state: Mutex::new(ServiceState::CreateJust),
                instance: RwLock::new(None),
                publish_info: RwLock::new(HashMap::new()),
                fault: LatencyFaultTolerance::default(),
                uniq,
                transaction_check: std::sync::OnceLock::new(),
                send_hooks: RwLock::new(Vec::new()),
                end_transaction_hooks: RwLock::new(Vec::new()),
                trace: trace.clone(),
            }),
        };
        if let Some(dispatcher) = trace {
            producer.register_send_message_hook(Arc::new(SendMessageTraceHook::new(Arc::clone(
                &dispatcher,
            ))));
            producer
                .register_end_transaction_hook(Arc::new(EndTransactionTraceHook::new(dispatcher)));
        }
        producer
    }

    /// Adds a hook called around every send attempt.
    pub fn register_send_message_hook(&self, hook: Arc<dyn SendMessageHook>) {
        self.inner.send_hooks.write().push(hook);
    }

    /// Adds a hook called for every transaction outcome this producer reports.
    pub fn register_end_transaction_hook(&self, hook: Arc<dyn EndTransactionHook>) {
        self.inner.end_transaction_hooks.write().push(hook);
    }

    /// The message trace dispatcher, when `enable_msg_trace` is on.
    pub fn trace_dispatcher(&self) -> Option<&Arc<AsyncTraceDispatcher>> {
        self.inner.trace.as_ref()
    }

    /// The producer's settings.
    pub fn config(&self) -> &ProducerConfig {
        &self.inner.config
    }

    /// The producer's lifecycle state.
    pub fn service_state(&self) -> ServiceState {
        *self.inner.state.lock()
    }

    /// The client instance, once started.
    pub fn client_instance(&self) -> Option<Arc<MQClientInstance>> {
        self.inner.instance.read().clone()
    }

    /// Makes this producer answer transaction checks (once; used by the transaction producer).
    pub(crate) fn set_transaction_check(&self, check: TransactionCheck) {
        if self.inner.transaction_check.set(check).is_err() {
            tracing::warn!(group = %self.inner.config.producer_group, "transaction check handler already set");
        }
    }

    /// The latency fault tolerance table (consulted only with `send_latency_fault_enable`).
    pub fn latency_fault_tolerance(&self) -> &LatencyFaultTolerance {
        &self.inner.fault
    }

    /// Registers the group with its client instance and starts it. As in Java, only a new
    /// producer starts: starting one that runs, whose start failed, or that was shut down fails
    /// with [`ClientError::NotStartable`]. A refused configuration or a failed instance start
    /// leaves START_FAILED; a refused group registration (the group already runs in this client
    /// instance) returns to CREATE_JUST.
    pub async fn start(&self) -> Result<()> {
        let inner = &self.inner;
        {
            let mut state = inner.state.lock();
            if *state != ServiceState::CreateJust {
                return Err(ClientError::NotStartable {
                    service: "producer",
                    state: state.to_string(),
                });
            }
            *state = ServiceState::StartFailed;
        }
        check_group(&inner.config.producer_group)?;
        let instance = MQClientManager::get_or_create_instance(&inner.config.client);
        let as_producer: Arc<dyn MQProducerInner> = Arc::clone(inner) as Arc<dyn MQProducerInner>;
        if let Err(e) = instance.register_producer(&inner.config.producer_group, as_producer) {
            *inner.state.lock() = ServiceState::CreateJust;
            return Err(e);
        }
        inner.publish_info.write().insert(
            inner.config.create_topic_key.clone(),
            Arc::new(placeholder(&inner.config.create_topic_key)),
        );
        if let Err(e) = instance.start().await {
            instance.unregister_producer(&inner.config.producer_group);
            instance.shutdown().await;
            return Err(e);
        }
        *inner.instance.write() = Some(Arc::clone(&instance));
        *inner.state.lock() = ServiceState::Running;
        instance.send_heartbeat_to_all_brokers().await;
        if let Some(trace) = &inner.trace
            && let Err(e) = trace.start().await
        {
            tracing::warn!(group = %inner.config.producer_group, error = %e, "message trace not started");
        }
        tracing::info!(group = %inner.config.producer_group, client_id = instance.client_id(), "producer started");
        Ok(())
    }

    /// Unregisters the group (from the instance and every broker) and shuts the instance down
    /// if nothing else uses it.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        {
            let mut state = inner.state.lock();
            if *state != ServiceState::Running {
                return;
            }
            *state = ServiceState::ShutdownAlready;
        }
        let instance = inner.instance.write().take();
        if let Some(instance) = instance {
            let group = inner.config.producer_group.as_str();
            instance.unregister_producer(group);
            instance.unregister_client(Some(group), None).await;
            instance.shutdown().await;
        }
        if let Some(trace) = &inner.trace {
            trace.shutdown().await;
        }
    }

    /// Sends `msg` and waits for the broker (sync send, with retries).
    pub async fn send(&self, msg: Message) -> Result<SendResult> {
        self.send_with_timeout(msg, self.inner.config.send_msg_timeout)
            .await
    }

    /// [`Self::send`] with its own deadline.
    pub async fn send_with_timeout(&self, msg: Message, timeout: Duration) -> Result<SendResult> {
        let outgoing = self.inner.prepare(msg)?;
        let result = self
            .inner
            .send_default(&outgoing, CommunicationMode::Sync, timeout)
            .await?;
        expect_result(result)
    }

    /// Sends `msg` on a spawned task (with the async retry count). Must be called within a tokio
    /// runtime; the returned future resolves to the outcome, and the send proceeds even if it is
    /// dropped.
    pub fn send_async(
        &self,
        msg: Message,
    ) -> impl Future<Output = Result<SendResult>> + Send + 'static {
        let inner = Arc::clone(&self.inner);
        let task = tokio::spawn(async move {
            let outgoing = inner.prepare(msg)?;
            let timeout = inner.config.send_msg_timeout;
            let result = inner
                .send_default(&outgoing, CommunicationMode::Async, timeout)
                .await?;
            expect_result(result)
        });
        async move {
            task.await
                .map_err(|e| ClientError::Client(format!("async send task failed: {e}")))?
        }
    }

    /// Sends `msg` asynchronously and calls `callback` with the outcome. Must be called within a
    /// tokio runtime.
    pub fn send_with_callback<F>(&self, msg: Message, callback: F)
    where
        F: FnOnce(Result<SendResult>) + Send + 'static,
    {
        let outcome = self.send_async(msg);
        tokio::spawn(async move { callback(outcome.await) });
    }

    /// Sends `msg` without waiting for the broker; no retry.
    pub async fn send_oneway(&self, msg: Message) -> Result<()> {
        let outgoing = self.inner.prepare(msg)?;
        self.inner
            .send_default(
                &outgoing,
                CommunicationMode::Oneway,
                self.inner.config.send_msg_timeout,
            )
            .await?;
        Ok(())
    }

    /// Sends several messages of one topic in one request (SEND_BATCH_MESSAGE, whose body is the
    /// messages encoded one after the other). They must share the topic and the WAIT flag, and may
    /// not be delayed or go to a retry topic.
    pub async fn send_batch(&self, msgs: Vec<Message>) -> Result<SendResult> {
        let outgoing = self.inner.prepare_batch(msgs)?;
        let result = self
            .inner
            .send_default(
                &outgoing,
                CommunicationMode::Sync,
                self.inner.config.send_msg_timeout,
            )
            .await?;
        expect_result(result)
    }

    /// Sends `msg` to the queue `mq` (one attempt).
    pub async fn send_to_queue(&self, msg: Message, mq: &MessageQueue) -> Result<SendResult> {
        if msg.topic != mq.topic {
            return Err(ClientError::IllegalArgument(format!(
                "message topic {} does not match the queue's topic {}",
                msg.topic, mq.topic
            )));
        }
        let begin = Instant::now();
        let timeout = self.inner.config.send_msg_timeout;
        let outgoing = self.inner.prepare(msg)?;
        self.inner.find_publish_info(&outgoing.msg.topic).await?;
        let mut target = mq.clone();
        target.topic.clone_from(&outgoing.msg.topic);
        let remaining = remaining(begin, timeout, &outgoing.msg.topic)?;
        let result = self
            .inner
            .send_kernel(&outgoing, &target, CommunicationMode::Sync, remaining)
            .await?;
        expect_result(result)
    }

    /// Sends `msg` to the queue `selector` picks for `arg` among the topic's writable queues
    /// (one attempt). With [`SelectMessageQueueByHash`], equal args give equal queues.
    pub async fn send_with_selector<A: ?Sized>(
        &self,
        msg: Message,
        selector: &dyn MessageQueueSelector<A>,
        arg: &A,
    ) -> Result<SendResult> {
        let begin = Instant::now();
        let timeout = self.inner.config.send_msg_timeout;
        let outgoing = self.inner.prepare(msg)?;
        let info = self.inner.find_publish_info(&outgoing.msg.topic).await?;
        let mq = selector
            .select(&info.message_queues, &outgoing.msg, arg)
            .ok_or_else(|| {
                ClientError::IllegalArgument(
                    "the message queue selector returned no queue".to_string(),
                )
            })?;
        let remaining = remaining(begin, timeout, &outgoing.msg.topic)?;
        let result = self
            .inner
            .send_kernel(&outgoing, &mq, CommunicationMode::Sync, remaining)
            .await?;
        expect_result(result)
    }

    /// The writable queues of `topic` (auto-creation template included, as for a send).
    pub async fn fetch_publish_message_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        let info = self.inner.find_publish_info(topic).await?;
        Ok(info.message_queues.clone())
    }
}

impl ProducerInner {
    fn instance(&self) -> Result<Arc<MQClientInstance>> {
        self.instance
            .read()
            .clone()
            .ok_or_else(|| ClientError::ServiceState {
                state: self.state.lock().to_string(),
                needed: ServiceState::Running.to_string(),
            })
    }
}

impl MQProducerInner for ProducerInner {
    fn publish_topic_list(&self) -> Vec<String> {
        self.publish_info.read().keys().cloned().collect()
    }

    fn update_topic_publish_info(&self, topic: &str, info: Arc<TopicPublishInfo>) {
        let mut table = self.publish_info.write();
        if table.contains_key(topic) {
            table.insert(topic.to_string(), info);
        }
    }

    fn is_publish_topic_need_update(&self, topic: &str) -> bool {
        self.publish_info
            .read()
            .get(topic)
            .is_some_and(|info| !info.ok())
    }

    fn check_transaction_state(
        &self,
        broker_addr: &str,
        msg: comet_protocol::message::MessageExt,
        header: CheckTransactionStateRequestHeader,
    ) {
        match self.transaction_check.get() {
            Some(check) => check(broker_addr, msg, header),
            None => tracing::warn!(broker = broker_addr, msg_id = ?header.msg_id,
                group = %self.config.producer_group,
                "CHECK_TRANSACTION_STATE for a producer that is not a transaction producer; ignored"),
        }
    }
}
