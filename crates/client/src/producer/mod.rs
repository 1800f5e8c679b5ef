//! The producer: `DefaultMQProducer`.
//!
//! A send goes through the same steps as in the Java client, because brokers and consumers rely
//! on their results (message ids, compression flags, queue spreading):
//!
//! 1. validate the message (topic syntax, body size ≤ `max_message_size`);
//! 2. give it a client id (UNIQ_KEY, from [`UniqIdGenerator`] seeded with the client IP) and
//!    compress a body of at least `compress_msg_body_over_howmuch` bytes (zlib, level 5, sys
//!    flag COMPRESSED | ZLIB);
//! 3. find the topic's publish info: cached, else the name server's route, else the TBW102
//!    template route (§8.4) so that the broker can auto-create the topic;
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

pub mod fault;
pub mod selector;
pub mod transaction;

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use comet_protocol::body::{MessageQueue, TopicRouteData};
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::{
    AUTO_CREATE_TOPIC_KEY_TOPIC, CheckTransactionStateRequestHeader, DEFAULT_TOPIC_QUEUE_NUMS,
    SendMessageRequestHeader,
};
use comet_protocol::limits::{MAX_GROUP_LEN, MAX_MESSAGE_SIZE, MAX_TOPIC_LEN};
use comet_protocol::message::batch::{BatchEntry, encode_batch};
use comet_protocol::message::compress::{
    self, CompressionType, DEFAULT_COMPRESS_LEVEL, DEFAULT_COMPRESS_THRESHOLD,
};
use comet_protocol::message::id::UniqIdGenerator;
use comet_protocol::message::properties::keys;
use comet_protocol::message::sysflag;
use parking_lot::{Mutex, RwLock};

use crate::api::RETRY_GROUP_TOPIC_PREFIX;
pub use crate::api::{CommunicationMode, SendResult, SendStatus};
use crate::config::ClientConfig;
use crate::error::{ClientError, Result};
use crate::instance::{MQClientInstance, MQClientManager, MQProducerInner, ServiceState};
use crate::message::Message;
use crate::route::TopicPublishInfo;
pub use fault::LatencyFaultTolerance;
pub use selector::{
    JavaHash, MessageQueueSelector, SelectMessageQueueByHash, SelectMessageQueueByRandom,
};
pub use transaction::{
    LocalTransactionState, TransactionListener, TransactionProducer, TransactionSendResult,
};

/// `sendMsgTimeout`: the whole send, retries included.
pub const DEFAULT_SEND_MSG_TIMEOUT: Duration = Duration::from_secs(3);
/// `retryTimesWhenSendFailed`.
pub const DEFAULT_RETRY_TIMES_WHEN_SEND_FAILED: u32 = 2;
/// `retryTimesWhenSendAsyncFailed`.
pub const DEFAULT_RETRY_TIMES_WHEN_SEND_ASYNC_FAILED: u32 = 2;
/// The producer group name Java reserves; a real group must be named.
pub const DEFAULT_PRODUCER_GROUP: &str = "DEFAULT_PRODUCER";
/// The delay-queue topic, which producers may not send to directly.
const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// Separator of message ids of a batch.
const BATCH_ID_SEPARATOR: &str = ",";

/// Broker answers after which another attempt may succeed: the 5.x Java producer's default
/// `retryResponseCodes`. SYSTEM_BUSY is what an Apache broker answers when its send queue is
/// flow-controlled (`[TIMEOUT_CLEAN_QUEUE]broker busy`, `[PCBUSY_CLEAN_QUEUE]`), GO_AWAY what a
/// 5.x broker or proxy answers while shutting down; 4.9 retried on neither.
const RETRIABLE_RESPONSE_CODES: [ResponseCode; 8] = [
    ResponseCode::TopicNotExist,
    ResponseCode::ServiceNotAvailable,
    ResponseCode::SystemError,
    ResponseCode::SystemBusy,
    ResponseCode::NoPermission,
    ResponseCode::NoBuyerId,
    ResponseCode::NotInCurrentUnit,
    ResponseCode::GoAway,
];

/// Settings of a [`DefaultMQProducer`] (defaults: fact sheet §10.6).
#[derive(Debug, Clone, PartialEq)]
pub struct ProducerConfig {
    pub producer_group: String,
    pub client: ClientConfig,
    /// Deadline of one send, retries included.
    pub send_msg_timeout: Duration,
    pub retry_times_when_send_failed: u32,
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
    /// Avoid brokers that were slow or failed recently (§10.1).
    pub send_latency_fault_enable: bool,
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
        }
    }
}

/// A message ready for the wire: id assigned, body compressed, flags computed.
struct Outgoing {
    msg: Message,
    sys_flag: i32,
    batch: bool,
    /// What `SendResult::msg_id` reports (comma-joined ids for a batch).
    msg_id: String,
    reconsume_times: Option<i32>,
    max_reconsume_times: Option<i32>,
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
        DefaultMQProducer {
            inner: Arc::new(ProducerInner {
                config,
                state: Mutex::new(ServiceState::CreateJust),
                instance: RwLock::new(None),
                publish_info: RwLock::new(HashMap::new()),
                fault: LatencyFaultTolerance::default(),
                uniq,
                transaction_check: std::sync::OnceLock::new(),
            }),
        }
    }

    pub fn config(&self) -> &ProducerConfig {
        &self.inner.config
    }

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

    /// Registers the group with the (shared) client instance and starts it. A producer starts
    /// once; a group may be registered once per client instance.
    pub async fn start(&self) -> Result<()> {
        let inner = &self.inner;
        {
            let state = inner.state.lock();
            if *state != ServiceState::CreateJust {
                return Err(ClientError::ServiceState {
                    state: state.to_string(),
                    needed: ServiceState::CreateJust.to_string(),
                });
            }
        }
        check_group(&inner.config.producer_group)?;
        let instance = MQClientManager::get_or_create_instance(&inner.config.client);
        let as_producer: Arc<dyn MQProducerInner> = Arc::clone(inner) as Arc<dyn MQProducerInner>;
        instance.register_producer(&inner.config.producer_group, as_producer)?;
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

    /// Sends several messages of one topic in one request (SEND_BATCH_MESSAGE, §5.6). They
    /// must share the topic and the WAIT flag, and may not be delayed or go to a retry topic.
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

    /// Validates `msg` and turns it into its wire form.
    fn prepare(&self, mut msg: Message) -> Result<Outgoing> {
        self.instance()?;
        check_topic(&msg.topic)?;
        self.check_body(&msg)?;
        if let Cow::Owned(topic) = self.config.client.namespaced(&msg.topic) {
            msg.topic = topic;
        }
        let msg_id = match msg.uniq_key() {
            Some(id) => id.to_string(),
            None => {
                let id = self.uniq.next_id();
                msg.put_property(keys::UNIQ_KEY, id.clone());
                id
            }
        };
        let mut sys_flag = 0;
        if msg.body.len() >= self.config.compress_msg_body_over_howmuch {
            let packed =
                compress::compress(CompressionType::Zlib, self.config.compress_level, &msg.body)?;
            msg.body = Bytes::from(packed);
            sys_flag = CompressionType::Zlib.mark(sys_flag);
        }
        if msg.property(keys::TRANSACTION_PREPARED) == Some("true") {
            sys_flag = sysflag::with_transaction_type(sys_flag, sysflag::TRANSACTION_PREPARED_TYPE);
        }
        let (mut reconsume_times, mut max_reconsume_times) = (None, None);
        if msg.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            reconsume_times = msg
                .remove_property(keys::RECONSUME_TIME)
                .and_then(|v| v.parse().ok());
            max_reconsume_times = msg
                .remove_property(keys::MAX_RECONSUME_TIMES)
                .and_then(|v| v.parse().ok());
        }
        Ok(Outgoing {
            msg,
            sys_flag,
            batch: false,
            msg_id,
            reconsume_times,
            max_reconsume_times,
        })
    }

    /// Validates a batch and encodes it into one wire message.
    fn prepare_batch(&self, msgs: Vec<Message>) -> Result<Outgoing> {
        self.instance()?;
        let Some(first) = msgs.first() else {
            return Err(ClientError::IllegalArgument(
                "the batch is empty".to_string(),
            ));
        };
        let topic = first.topic.clone();
        let wait = first.wait_store_msg_ok();
        check_topic(&topic)?;
        let mut entries = Vec::with_capacity(msgs.len());
        let mut ids = Vec::with_capacity(msgs.len());
        for mut msg in msgs {
            if msg.topic != topic {
                return Err(ClientError::IllegalArgument(format!(
                    "all messages of a batch must have the same topic ({topic} and {})",
                    msg.topic
                )));
            }
            if msg.delay_level() > 0 {
                return Err(ClientError::IllegalArgument(
                    "delayed messages are not supported in a batch".to_string(),
                ));
            }
            if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
                return Err(ClientError::IllegalArgument(
                    "retry topics are not supported in a batch".to_string(),
                ));
            }
            if msg.wait_store_msg_ok() != wait {
                return Err(ClientError::IllegalArgument(
                    "all messages of a batch must have the same WAIT flag".to_string(),
                ));
            }
            self.check_body(&msg)?;
            let id = match msg.uniq_key() {
                Some(id) => id.to_string(),
                None => {
                    let id = self.uniq.next_id();
                    msg.put_property(keys::UNIQ_KEY, id.clone());
                    id
                }
            };
            ids.push(id);
            entries.push(BatchEntry {
                flag: msg.flag,
                body: msg.body.clone(),
                properties: msg.properties().clone(),
            });
        }
        let mut encoded = BytesMut::new();
        encode_batch(&entries, &mut encoded)?;
        if encoded.len() > self.config.max_message_size {
            return Err(ClientError::IllegalArgument(format!(
                "the encoded batch is {} bytes, over the maximum message size {}",
                encoded.len(),
                self.config.max_message_size
            )));
        }
        let mut batch = Message::new(self.config.client.with_namespace(&topic), encoded.freeze());
        batch.set_wait_store_msg_ok(wait);
        batch.put_property(keys::UNIQ_KEY, self.uniq.next_id());
        Ok(Outgoing {
            msg: batch,
            sys_flag: 0,
            batch: true,
            msg_id: ids.join(BATCH_ID_SEPARATOR),
            reconsume_times: None,
            max_reconsume_times: None,
        })
    }

    fn check_body(&self, msg: &Message) -> Result<()> {
        if msg.body.is_empty() {
            return Err(ClientError::IllegalArgument(
                "the message body is empty".to_string(),
            ));
        }
        if msg.body.len() > self.config.max_message_size {
            return Err(ClientError::IllegalArgument(format!(
                "the message body is {} bytes, over the maximum message size {}",
                msg.body.len(),
                self.config.max_message_size
            )));
        }
        Ok(())
    }

    /// The publish info of `topic`: cached, else from the name server, else from the
    /// auto-creation template route (§8.4).
    async fn find_publish_info(&self, topic: &str) -> Result<Arc<TopicPublishInfo>> {
        if let Some(info) = self.cached_publish_info(topic) {
            return Ok(info);
        }
        let instance = self.instance()?;
        self.publish_info
            .write()
            .entry(topic.to_string())
            .or_insert_with(|| Arc::new(placeholder(topic)));
        if let Err(e) = instance
            .update_topic_route_info_from_name_server(topic)
            .await
        {
            tracing::warn!(topic, error = %e, "route lookup failed");
        }
        if let Some(info) = self.cached_publish_info(topic) {
            return Ok(info);
        }
        if let Err(e) = instance
            .update_topic_route_info_from_default(
                topic,
                &self.config.create_topic_key,
                self.config.default_topic_queue_nums,
            )
            .await
        {
            tracing::warn!(topic, error = %e, "auto-create template route lookup failed");
        }
        self.cached_publish_info(topic)
            .ok_or_else(|| self.no_route(topic))
    }

    fn cached_publish_info(&self, topic: &str) -> Option<Arc<TopicPublishInfo>> {
        self.publish_info
            .read()
            .get(topic)
            .filter(|info| info.ok())
            .cloned()
    }

    fn no_route(&self, topic: &str) -> ClientError {
        ClientError::NoRoute {
            topic: topic.to_string(),
            namesrv: self.config.client.namesrv_addr.clone(),
        }
    }

    fn select_queue(
        &self,
        info: &TopicPublishInfo,
        last_broker: Option<&str>,
    ) -> Option<MessageQueue> {
        if self.config.send_latency_fault_enable {
            self.fault.select_one_message_queue(info, last_broker)
        } else {
            info.select_one_avoiding(last_broker)
        }
    }

    /// Records an attempt that started at `started` (the clock is read only when the latency
    /// fault tolerance is on: the default send path reads it enough already).
    fn update_fault(&self, broker: &str, started: Instant, failed: bool) {
        if self.config.send_latency_fault_enable {
            let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.fault.update_fault_item(broker, ms, failed);
        }
    }

    /// The send with queue selection and retries.
    async fn send_default(
        &self,
        outgoing: &Outgoing,
        mode: CommunicationMode,
        timeout: Duration,
    ) -> Result<Option<SendResult>> {
        let begin = Instant::now();
        let topic = outgoing.msg.topic.as_str();
        let info = self.find_publish_info(topic).await?;
        let attempts = match mode {
            CommunicationMode::Sync => 1 + self.config.retry_times_when_send_failed,
            CommunicationMode::Async => 1 + self.config.retry_times_when_send_async_failed,
            CommunicationMode::Oneway => 1,
        };
        let mut last_broker: Option<String> = None;
        let mut last_error: Option<ClientError> = None;
        let mut not_stored: Option<SendResult> = None;
        let mut made = 0_u32;
        let mut all_topic_not_exist = true;
        for _ in 0..attempts {
            let Some(mq) = self.select_queue(&info, last_broker.as_deref()) else {
                break;
            };
            // One clock read per attempt: the time spent so far and the attempt's start.
            let started = Instant::now();
            let elapsed = started.saturating_duration_since(begin);
            if elapsed >= timeout {
                last_error = Some(send_timeout(topic, timeout));
                all_topic_not_exist = false;
                break;
            }
            made += 1;
            let outcome = self
                .send_kernel(outgoing, &mq, mode, timeout - elapsed)
                .await;
            self.update_fault(&mq.broker_name, started, outcome.is_err());
            last_broker = Some(mq.broker_name.clone());
            match outcome {
                Ok(Some(result))
                    if mode == CommunicationMode::Sync
                        && result.send_status != SendStatus::SendOk
                        && self.config.retry_another_broker_when_not_store_ok =>
                {
                    not_stored = Some(result);
                }
                Ok(result) => return Ok(result),
                Err(e) if is_retriable(&e) => {
                    tracing::debug!(topic, broker = %mq.broker_name, error = %e, "send attempt failed, retrying");
                    all_topic_not_exist &=
                        e.response_code() == Some(ResponseCode::TopicNotExist.into());
                    last_error = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(result) = not_stored {
            return Ok(Some(result));
        }
        Err(match last_error {
            // Every broker said the topic does not exist: auto-creation is off.
            Some(_) if all_topic_not_exist => self.no_route(topic),
            Some(e @ ClientError::Timeout { .. }) if made == 0 => e,
            Some(e) => ClientError::SendFailed {
                topic: topic.to_string(),
                attempts: made,
                last: Box::new(e),
            },
            None => self.no_route(topic),
        })
    }

    /// One attempt: the request to the master of `mq`'s broker.
    async fn send_kernel(
        &self,
        outgoing: &Outgoing,
        mq: &MessageQueue,
        mode: CommunicationMode,
        timeout: Duration,
    ) -> Result<Option<SendResult>> {
        let instance = self.instance()?;
        let addr = match instance.find_broker_address_in_publish(&mq.broker_name) {
            Some(addr) => addr,
            None => {
                instance
                    .update_topic_route_info_from_name_server(&mq.topic)
                    .await?;
                instance
                    .find_broker_address_in_publish(&mq.broker_name)
                    .ok_or_else(|| {
                        ClientError::Client(format!(
                            "the broker {} of topic {} has no known master address",
                            mq.broker_name, mq.topic
                        ))
                    })?
            }
        };
        let header = SendMessageRequestHeader {
            producer_group: self
                .config
                .client
                .with_namespace(&self.config.producer_group),
            topic: mq.topic.clone(),
            default_topic: self.config.create_topic_key.clone(),
            default_topic_queue_nums: self.config.default_topic_queue_nums,
            queue_id: mq.queue_id,
            sys_flag: outgoing.sys_flag,
            born_timestamp: now_ms(),
            flag: outgoing.msg.flag,
            properties: Some(outgoing.msg.properties().encode()),
            reconsume_times: Some(outgoing.reconsume_times.unwrap_or(0)),
            unit_mode: Some(false),
            batch: outgoing.batch.then_some(true),
            max_reconsume_times: outgoing.max_reconsume_times,
            ..Default::default()
        };
        let result = instance
            .api()
            .send_message(&addr, &mq.broker_name, &outgoing.msg, header, timeout, mode)
            .await?;
        Ok(result.map(|mut r| {
            r.msg_id.clone_from(&outgoing.msg_id);
            let user_topic = self.config.client.without_namespace(&r.message_queue.topic);
            if user_topic.len() != r.message_queue.topic.len() {
                r.message_queue.topic = user_topic.to_string();
            }
            r
        }))
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

/// Publish info for a topic whose route is not known yet.
fn placeholder(topic: &str) -> TopicPublishInfo {
    let mut info = TopicPublishInfo::from_route(topic, &TopicRouteData::default());
    info.have_topic_router_info = false;
    info
}

fn expect_result(result: Option<SendResult>) -> Result<SendResult> {
    result.ok_or_else(|| ClientError::Client("a sync send returned no result".to_string()))
}

fn send_timeout(topic: &str, timeout: Duration) -> ClientError {
    ClientError::Timeout {
        operation: format!("send to topic {topic}"),
        timeout,
    }
}

fn remaining(begin: Instant, timeout: Duration, topic: &str) -> Result<Duration> {
    timeout
        .checked_sub(begin.elapsed())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| send_timeout(topic, timeout))
}

/// Whether another attempt (on another broker) may succeed after `error`.
fn is_retriable(error: &ClientError) -> bool {
    match error {
        ClientError::Remoting(_) | ClientError::Client(_) => true,
        ClientError::Broker { code, .. } => RETRIABLE_RESPONSE_CODES
            .iter()
            .any(|c| i32::from(*c) == *code),
        _ => false,
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Topic rules of the Java `Validators.checkTopic` and of the broker (§8.4).
pub fn check_topic(topic: &str) -> Result<()> {
    if topic.trim().is_empty() {
        return Err(ClientError::IllegalArgument(
            "the topic is blank".to_string(),
        ));
    }
    if topic.len() > MAX_TOPIC_LEN {
        return Err(ClientError::IllegalArgument(format!(
            "the topic {topic} is longer than {MAX_TOPIC_LEN} characters"
        )));
    }
    if !topic.bytes().all(is_legal_name_byte) {
        return Err(ClientError::IllegalArgument(format!(
            "the topic {topic} contains characters other than %|a-zA-Z0-9_-"
        )));
    }
    if topic == AUTO_CREATE_TOPIC_KEY_TOPIC || topic == SCHEDULE_TOPIC {
        return Err(ClientError::IllegalArgument(format!(
            "sending to the system topic {topic} is not allowed"
        )));
    }
    Ok(())
}

/// Group rules of the Java `Validators.checkGroup`.
pub fn check_group(group: &str) -> Result<()> {
    if group.trim().is_empty() {
        return Err(ClientError::IllegalArgument(
            "the producer group is blank".to_string(),
        ));
    }
    if group.len() > MAX_GROUP_LEN {
        return Err(ClientError::IllegalArgument(format!(
            "the group {group} is longer than {MAX_GROUP_LEN} characters"
        )));
    }
    if !group.bytes().all(is_legal_name_byte) {
        return Err(ClientError::IllegalArgument(format!(
            "the group {group} contains characters other than %|a-zA-Z0-9_-"
        )));
    }
    if group == DEFAULT_PRODUCER_GROUP {
        return Err(ClientError::IllegalArgument(format!(
            "the producer group may not be {DEFAULT_PRODUCER_GROUP}; name your group"
        )));
    }
    Ok(())
}

fn is_legal_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_and_group_validation() {
        assert!(check_topic("TopicTest").is_ok());
        assert!(check_topic("%RETRY%group-1").is_ok());
        assert!(check_topic("").is_err());
        assert!(check_topic("bad topic").is_err());
        assert!(check_topic(&"t".repeat(MAX_TOPIC_LEN + 1)).is_err());
        assert!(check_topic("TBW102").is_err());
        assert!(check_group("pg").is_ok());
        assert!(check_group("DEFAULT_PRODUCER").is_err());
        assert!(check_group("a/b").is_err());
    }

    #[test]
    fn retriable_errors() {
        let broker = |code: ResponseCode| ClientError::Broker {
            addr: "a".into(),
            code: code.into(),
            remark: String::new(),
        };
        assert!(is_retriable(&broker(ResponseCode::SystemError)));
        assert!(is_retriable(&broker(ResponseCode::TopicNotExist)));
        assert!(!is_retriable(&broker(ResponseCode::MessageIllegal)));
        assert!(is_retriable(&broker(ResponseCode::GoAway)));
        assert!(is_retriable(&ClientError::Remoting(
            comet_remoting::RemotingError::Shutdown
        )));
        assert!(!is_retriable(&ClientError::IllegalArgument("x".into())));
    }

    #[test]
    fn unstarted_producer_refuses_to_send() {
        let producer = DefaultMQProducer::new(ProducerConfig::new("pg", "127.0.0.1:1"));
        let err = producer
            .inner
            .prepare(Message::new("T", "x"))
            .err()
            .expect("refused");
        assert!(matches!(err, ClientError::ServiceState { .. }));
    }

    /// What Apache RocketMQ 5.3.3 answered a sync send while its send queue was flow-controlled
    /// (seen by interop/comet-client on a loaded machine): SYSTEM_BUSY (2) with this remark. The
    /// 5.x Java producer retries it, so the send must be retried, not failed.
    #[test]
    fn apache_broker_busy_answer_is_retried() {
        let busy = comet_protocol::RemotingCommand::response(
            ResponseCode::SystemBusy,
            Some(
                "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, \
                 period in queue: 770ms, size of queue: 1"
                    .to_string(),
            ),
        );
        assert_eq!(busy.code, 2);
        let error = crate::api::broker_error("127.0.0.1:10911", &busy);
        assert!(matches!(error, ClientError::Broker { code: 2, .. }));
        assert!(is_retriable(&error));
    }
}
