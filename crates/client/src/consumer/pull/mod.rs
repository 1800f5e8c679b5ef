//! `DefaultMQPullConsumer`: the consumer that leaves every decision to the application.
//!
//! A push consumer decides which queues to read, where to start, how fast to pull and when to
//! commit. The pull consumer decides none of it: the application lists a topic's queues
//! ([`DefaultMQPullConsumer::fetch_subscribe_message_queues`]), pulls from the queue and offset it
//! chooses ([`DefaultMQPullConsumer::pull`], or the long-polling
//! [`DefaultMQPullConsumer::pull_block_if_not_found`]) and records progress itself
//! ([`DefaultMQPullConsumer::update_consume_offset`]). It is the building block for batch jobs,
//! replays and stream processors that keep their own position.
//!
//! What it still shares with the other consumers is the group's identity on the brokers: it
//! registers with an [`MQClientInstance`] (heartbeats make the group known, which 5.x brokers
//! require before accepting offsets: they answer UPDATE_CONSUMER_OFFSET of an unknown group with
//! SUBSCRIPTION_GROUP_NOT_EXIST), and its offsets go through an [`OffsetStore`] — on the broker in
//! clustering, in a local file in broadcasting — that the instance persists every
//! `persist_consumer_offset_interval` (5 s) and that [`DefaultMQPullConsumer::shutdown`] flushes.
//!
//! The queue-level helpers here (`QueueAccess`) are shared with the lite pull consumer.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::{Mutex, RwLock};

use comet_protocol::body::heartbeat::EXPRESSION_TYPE_TAG;
use comet_protocol::headers::{PullMessageRequestHeader, pull_sys_flag};

use crate::api::{PullResultExt, PullStatus};
use crate::consumer::offset_store::{
    LocalFileOffsetStore, OffsetStore, ReadOffsetType, RemoteBrokerOffsetStore,
    default_local_offset_store_dir,
};
use crate::consumer::{
    ConsumeFromWhere, ConsumeType, MessageExt, MessageModel, MessageQueue, SubscriptionData,
    duration_millis, now_millis,
};
use crate::error::{ClientError, Result};
use crate::instance::{MQClientInstance, MQClientManager, MQConsumerInner, ServiceState};
use crate::route::subscribe_queues;

mod builder;
mod config;
pub use builder::PullConsumerBuilder;
pub use config::PullConsumerConfig;

/// How long the broker may hold a blocking pull when nothing is there (Java
/// `brokerSuspendMaxTimeMillis`).
pub const DEFAULT_BROKER_SUSPEND_MAX_TIME: Duration = Duration::from_secs(20);
/// Client-side timeout of a blocking pull; longer than the broker's hold so a held pull is
/// answered rather than abandoned (Java `consumerTimeoutMillisWhenSuspend`).
pub const DEFAULT_CONSUMER_TIMEOUT_WHEN_SUSPEND: Duration = Duration::from_secs(30);
/// Client-side timeout of a non-blocking pull (Java `consumerPullTimeoutMillis`).
pub const DEFAULT_CONSUMER_PULL_TIMEOUT: Duration = Duration::from_secs(10);
/// Retries of a message before the broker dead-letters it (Java's default when unset).
pub const DEFAULT_MAX_RECONSUME_TIMES: i32 = 16;
/// Largest batch one pull may ask for (the broker caps it too).
pub const MAX_PULL_BATCH: i32 = 1024;

/// What a pull returned: the status, where to pull next and the queue's bounds, and the
/// messages that matched the subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullResult {
    /// What the pull found.
    pub pull_status: PullStatus,
    /// Offset to pull next.
    pub next_begin_offset: i64,
    /// Smallest offset of the queue.
    pub min_offset: i64,
    /// Largest offset (next to be written) of the queue.
    pub max_offset: i64,
    /// The messages found that match the subscription.
    pub msg_found_list: Vec<MessageExt>,
}

/// Queue-level operations both pull consumers need: finding the broker of a queue (refreshing
/// the route when it is unknown), pulling, and the offset queries.
#[derive(Clone)]
pub(crate) struct QueueAccess {
    pub(crate) instance: Arc<MQClientInstance>,
    pub(crate) group: String,
    /// Broker id each queue should be pulled from next (the broker's `suggestWhichBrokerId`).
    pull_from_which_node: Arc<RwLock<HashMap<MessageQueue, i64>>>,
}

impl QueueAccess {
    pub(crate) fn new(instance: Arc<MQClientInstance>, group: String) -> Self {
        QueueAccess {
            instance,
            group,
            pull_from_which_node: Arc::default(),
        }
    }

    fn timeout(&self) -> Duration {
        self.instance.config().mq_client_api_timeout
    }

    /// The master address of `mq`'s broker.
    pub(crate) async fn master_addr(&self, mq: &MessageQueue) -> Result<String> {
        if let Some(addr) = self
            .instance
            .find_broker_address_in_publish(&mq.broker_name)
        {
            return Ok(addr);
        }
        self.instance
            .update_topic_route_info_from_name_server(&mq.topic)
            .await?;
        self.instance
            .find_broker_address_in_publish(&mq.broker_name)
            .ok_or_else(|| {
                ClientError::Client(format!("the broker [{}] does not exist", mq.broker_name))
            })
    }

    /// The address to pull `mq` from (the suggested node, else any node of the broker).
    async fn pull_addr(&self, mq: &MessageQueue) -> Result<String> {
        let broker_id = self
            .pull_from_which_node
            .read()
            .get(mq)
            .copied()
            .unwrap_or(0);
        if let Some(found) =
            self.instance
                .find_broker_address_in_subscribe(&mq.broker_name, broker_id, false)
        {
            return Ok(found.broker_addr);
        }
        self.instance
            .update_topic_route_info_from_name_server(&mq.topic)
            .await?;
        self.instance
            .find_broker_address_in_subscribe(&mq.broker_name, broker_id, false)
            .map(|f| f.broker_addr)
            .ok_or_else(|| {
                ClientError::Client(format!("the broker [{}] does not exist", mq.broker_name))
            })
    }

    /// One pull of `mq` from `offset`. With `block`, the broker may hold the request for
    /// `suspend` until a message arrives; `timeout` bounds the whole exchange. Messages are
    /// filtered again by tag here, because the broker filters by tag hash only.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn pull(
        &self,
        mq: &MessageQueue,
        subscription: &SubscriptionData,
        offset: i64,
        max_nums: i32,
        block: bool,
        suspend: Duration,
        timeout: Duration,
        lite: bool,
    ) -> Result<PullResult> {
        if offset < 0 {
            return Err(ClientError::IllegalArgument(format!("offset {offset} < 0")));
        }
        if max_nums <= 0 || max_nums > MAX_PULL_BATCH {
            return Err(ClientError::IllegalArgument(format!(
                "maxNums {max_nums} is not in 1..={MAX_PULL_BATCH}"
            )));
        }
        let addr = self.pull_addr(mq).await?;
        let sys_flag = if lite {
            pull_sys_flag::build_lite(false, block, true, false)
        } else {
            pull_sys_flag::build(false, block, true, false)
        };
        let mut header = PullMessageRequestHeader {
            consumer_group: self.group.clone(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            queue_offset: offset,
            max_msg_nums: max_nums,
            sys_flag,
            commit_offset: 0,
            suspend_timeout_millis: if block { duration_millis(suspend) } else { 0 },
            subscription: Some(subscription.sub_string.clone()),
            sub_version: subscription.sub_version,
            expression_type: Some(subscription.expression_type.clone()),
            ..Default::default()
        };
        header.rpc.broker_name = Some(mq.broker_name.clone());
        let result = self
            .instance
            .api()
            .pull_message(&addr, header, timeout)
            .await?;
        self.pull_from_which_node
            .write()
            .insert(mq.clone(), result.suggest_which_broker_id);
        Ok(filter_result(result, subscription))
    }

    pub(crate) async fn min_offset(&self, mq: &MessageQueue) -> Result<i64> {
        let addr = self.master_addr(mq).await?;
        self.instance
            .api()
            .get_min_offset(&addr, &mq.topic, mq.queue_id, self.timeout())
            .await
    }

    pub(crate) async fn max_offset(&self, mq: &MessageQueue) -> Result<i64> {
        let addr = self.master_addr(mq).await?;
        self.instance
            .api()
            .get_max_offset(&addr, &mq.topic, mq.queue_id, self.timeout())
            .await
    }

    /// The offset of the first message of `mq` stored at or after `timestamp` (ms).
    pub(crate) async fn search_offset(&self, mq: &MessageQueue, timestamp: i64) -> Result<i64> {
        let addr = self.master_addr(mq).await?;
        self.instance
            .api()
            .search_offset(&addr, &mq.topic, mq.queue_id, timestamp, self.timeout())
            .await
    }

    pub(crate) async fn earliest_msg_store_time(&self, mq: &MessageQueue) -> Result<i64> {
        let addr = self.master_addr(mq).await?;
        self.instance
            .api()
            .get_earliest_msg_storetime(&addr, &mq.topic, mq.queue_id, self.timeout())
            .await
    }

    /// The readable queues of `topic`, fetched from the name server.
    pub(crate) async fn fetch_subscribe_message_queues(
        &self,
        topic: &str,
    ) -> Result<Vec<MessageQueue>> {
        let route = self
            .instance
            .api()
            .get_topic_route_info_from_name_server(topic, self.timeout())
            .await?
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_owned(),
                namesrv: self.instance.config().namesrv_addr.clone(),
                reason: crate::error::NoRouteReason::TopicNotExist,
            })?;
        // Make the broker addresses of the route known to the instance (heartbeats, pulls).
        self.instance
            .update_topic_route_info_from_name_server(topic)
            .await?;
        let queues = subscribe_queues(topic, &route);
        if queues.is_empty() {
            return Err(ClientError::Client(format!(
                "the topic {topic} has no readable queue"
            )));
        }
        Ok(queues)
    }
}

/// Keeps only messages whose tag the subscription takes (the broker compares tag hashes, which
/// may collide), and maps the API result to a [`PullResult`].
fn filter_result(result: PullResultExt, subscription: &SubscriptionData) -> PullResult {
    let mut msgs = result.msg_found_list;
    // A subscription to every tag keeps every message: no tag is looked up (Java checks the
    // tag set the same way before filtering).
    if !subscription.class_filter_mode
        && subscription.expression_type == EXPRESSION_TYPE_TAG
        && !subscription.is_all()
    {
        msgs.retain(|m| subscription.matches_tag(m.tags()));
    }
    PullResult {
        pull_status: result.pull_status,
        next_begin_offset: result.next_begin_offset,
        min_offset: result.min_offset,
        max_offset: result.max_offset,
        msg_found_list: msgs,
    }
}

/// A consumer's offset store, with typed access to the broker store for synchronous commits.
///
/// The [`OffsetStore`] trait persists to the broker oneway (what the periodic persistence wants:
/// cheap, and the next period repairs a lost update). An explicit commit or a shutdown must
/// instead know the broker has the offset before it returns, so for clustering the broker store
/// is also kept as its concrete type, whose update can await the broker's answer.
#[derive(Clone)]
pub(crate) struct ConsumerOffsets {
    pub(crate) store: Arc<dyn OffsetStore>,
    remote: Option<Arc<RemoteBrokerOffsetStore>>,
}

impl ConsumerOffsets {
    /// The store a group of `model` uses: the broker for clustering, a local file for
    /// broadcasting (loaded before use).
    pub(crate) fn create(
        instance: &Arc<MQClientInstance>,
        group: &str,
        model: MessageModel,
    ) -> Result<Self> {
        let offsets = match model {
            MessageModel::Clustering => {
                let remote = Arc::new(RemoteBrokerOffsetStore::new(
                    Arc::clone(instance),
                    group.to_owned(),
                ));
                ConsumerOffsets {
                    store: Arc::clone(&remote) as Arc<dyn OffsetStore>,
                    remote: Some(remote),
                }
            }
            MessageModel::Broadcasting => ConsumerOffsets {
                store: Arc::new(LocalFileOffsetStore::new(
                    &default_local_offset_store_dir(),
                    instance.client_id(),
                    group,
                )),
                remote: None,
            },
        };
        offsets.store.load()?;
        Ok(offsets)
    }

    /// Persists the in-memory offsets of `mqs` and returns once they are stored: each broker
    /// update is awaited (clustering), or the file is written (broadcasting). Stops at the first
    /// failure.
    pub(crate) async fn persist_sync(&self, mqs: &HashSet<MessageQueue>) -> Result<()> {
        match &self.remote {
            Some(remote) => {
                for (mq, offset) in remote.clone_offset_table("") {
                    if mqs.contains(&mq) {
                        remote
                            .update_consume_offset_to_broker(&mq, offset, false)
                            .await?;
                    }
                }
                Ok(())
            }
            None => {
                self.store.persist_all(mqs).await;
                Ok(())
            }
        }
    }

    /// Every queue with an in-memory offset.
    pub(crate) fn queues(&self) -> HashSet<MessageQueue> {
        self.store.clone_offset_table("").into_keys().collect()
    }
}

/// State shared by the consumer handle and the instance's view of it.
struct PullConsumerInner {
    config: PullConsumerConfig,
    state: Mutex<ServiceState>,
    access: RwLock<Option<QueueAccess>>,
    offsets: RwLock<Option<ConsumerOffsets>>,
    /// Topic → subscription announced in heartbeats ("*" for each topic used).
    subscriptions: RwLock<HashMap<String, SubscriptionData>>,
    topic_subscribe_info: RwLock<HashMap<String, Vec<MessageQueue>>>,
}

/// A consumer that pulls the queues and offsets the application chooses. See the module docs.
#[derive(Clone)]
pub struct DefaultMQPullConsumer {
    inner: Arc<PullConsumerInner>,
}

impl DefaultMQPullConsumer {
    /// A consumer of `config.consumer_group`, not yet started.
    pub fn new(config: PullConsumerConfig) -> Self {
        let subscriptions = config
            .register_topics
            .iter()
            .map(|t| {
                (
                    t.clone(),
                    SubscriptionData::from_tag_expression(t.clone(), "*", now_millis()),
                )
            })
            .collect();
        DefaultMQPullConsumer {
            inner: Arc::new(PullConsumerInner {
                config,
                state: Mutex::new(ServiceState::CreateJust),
                access: RwLock::new(None),
                offsets: RwLock::new(None),
                subscriptions: RwLock::new(subscriptions),
                topic_subscribe_info: RwLock::new(HashMap::new()),
            }),
        }
    }

    /// The consumer's settings.
    pub fn config(&self) -> &PullConsumerConfig {
        &self.inner.config
    }

    /// The lifecycle state (CREATE_JUST, START_FAILED, RUNNING, SHUTDOWN_ALREADY).
    pub fn service_state(&self) -> ServiceState {
        *self.inner.state.lock()
    }

    /// Registers the group with the client instance and starts the instance (heartbeats, offset
    /// persistence). A consumer starts once: a second start, or one after a failed start (left
    /// START_FAILED) or after shutdown, fails with [`ClientError::NotStartable`]; a refused
    /// group registration alone returns to CREATE_JUST.
    pub async fn start(&self) -> Result<()> {
        {
            let mut state = self.inner.state.lock();
            if *state != ServiceState::CreateJust {
                return Err(ClientError::NotStartable {
                    service: "PullConsumer",
                    state: state.to_string(),
                });
            }
            *state = ServiceState::StartFailed;
        }
        let group = self.inner.config.consumer_group.clone();
        if group.is_empty() {
            return Err(ClientError::IllegalArgument(
                "consumer group is empty".to_owned(),
            ));
        }
        let mut client = self.inner.config.client.clone();
        if self.inner.config.message_model == MessageModel::Clustering {
            client.change_instance_name_to_pid();
        }
        let instance = MQClientManager::get_or_create_instance(&client);
        let offsets = ConsumerOffsets::create(&instance, &group, self.inner.config.message_model)?;
        *self.inner.offsets.write() = Some(offsets);
        *self.inner.access.write() = Some(QueueAccess::new(Arc::clone(&instance), group.clone()));
        let as_consumer: Arc<dyn MQConsumerInner> =
            Arc::clone(&self.inner) as Arc<dyn MQConsumerInner>;
        if let Err(e) = instance.register_consumer(&group, as_consumer) {
            // As in Java, only a refused registration makes the consumer startable again.
            *self.inner.state.lock() = ServiceState::CreateJust;
            return Err(e);
        }
        if let Err(e) = instance.start().await {
            instance.unregister_consumer(&group);
            return Err(e);
        }
        let topics: Vec<String> = self.inner.subscriptions.read().keys().cloned().collect();
        for topic in topics {
            if let Err(e) = instance
                .update_topic_route_info_from_name_server(&topic)
                .await
            {
                tracing::warn!(topic = %topic, error = %e, "route of a registered topic unavailable");
            }
        }
        instance.send_heartbeat_to_all_brokers().await;
        *self.inner.state.lock() = ServiceState::Running;
        tracing::info!(group = %group, client_id = %instance.client_id(), "pull consumer started");
        Ok(())
    }

    /// Persists every offset, unregisters the group and stops the instance if it was the last
    /// user.
    pub async fn shutdown(&self) {
        {
            let mut state = self.inner.state.lock();
            if *state != ServiceState::Running {
                return;
            }
            *state = ServiceState::ShutdownAlready;
        }
        self.inner.persist_all().await;
        let access = self.inner.access.read().clone();
        if let Some(access) = access {
            let group = &self.inner.config.consumer_group;
            access.instance.unregister_consumer(group);
            access.instance.unregister_client(None, Some(group)).await;
            access.instance.shutdown().await;
        }
    }

    fn access(&self) -> Result<QueueAccess> {
        let state = *self.inner.state.lock();
        if state != ServiceState::Running {
            return Err(ClientError::ServiceState {
                state: state.to_string(),
                needed: ServiceState::Running.to_string(),
            });
        }
        self.inner
            .access
            .read()
            .clone()
            .ok_or_else(|| ClientError::Client("pull consumer has no client instance".to_owned()))
    }

    fn offsets(&self) -> Result<ConsumerOffsets> {
        self.access()?;
        self.inner
            .offsets
            .read()
            .clone()
            .ok_or_else(|| ClientError::Client("pull consumer has no offset store".to_owned()))
    }

    fn offset_store(&self) -> Result<Arc<dyn OffsetStore>> {
        Ok(self.offsets()?.store)
    }

    /// The readable queues of `topic`, from the name server. The topic is announced in the
    /// group's heartbeats from now on.
    pub async fn fetch_subscribe_message_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        let access = self.access()?;
        let newly = {
            let mut subs = self.inner.subscriptions.write();
            if subs.contains_key(topic) {
                false
            } else {
                subs.insert(
                    topic.to_owned(),
                    SubscriptionData::from_tag_expression(topic, "*", now_millis()),
                );
                true
            }
        };
        let queues = access.fetch_subscribe_message_queues(topic).await?;
        self.inner
            .topic_subscribe_info
            .write()
            .insert(topic.to_owned(), queues.clone());
        if newly {
            access.instance.send_heartbeat_to_all_brokers().await;
        }
        Ok(queues)
    }

    /// Pulls up to `max_nums` messages of `mq` from `offset`, matching `sub_expression` (`*` or
    /// `TagA || TagB`). Answers at once, with NO_NEW_MSG when nothing is there.
    pub async fn pull(
        &self,
        mq: &MessageQueue,
        sub_expression: &str,
        offset: i64,
        max_nums: i32,
    ) -> Result<PullResult> {
        let access = self.access()?;
        let subscription = SubscriptionData::from_tag_expression(&mq.topic, sub_expression, 0);
        let config = &self.inner.config;
        access
            .pull(
                mq,
                &subscription,
                offset,
                max_nums,
                false,
                Duration::ZERO,
                config.consumer_pull_timeout,
                false,
            )
            .await
    }

    /// Like [`Self::pull`], but when nothing is there the broker holds the request (long
    /// polling, up to `broker_suspend_max_time`) and answers as soon as a message arrives.
    pub async fn pull_block_if_not_found(
        &self,
        mq: &MessageQueue,
        sub_expression: &str,
        offset: i64,
        max_nums: i32,
    ) -> Result<PullResult> {
        let access = self.access()?;
        let subscription = SubscriptionData::from_tag_expression(&mq.topic, sub_expression, 0);
        let config = &self.inner.config;
        access
            .pull(
                mq,
                &subscription,
                offset,
                max_nums,
                true,
                config.broker_suspend_max_time,
                config.consumer_timeout_when_suspend,
                false,
            )
            .await
    }

    /// Records `offset` as the next offset to consume of `mq` (in memory; persisted every 5 s
    /// and at shutdown, or now with [`Self::persist_consume_offset`]).
    pub fn update_consume_offset(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        self.offset_store()?.update_offset(mq, offset, false);
        Ok(())
    }

    /// The group's next offset of `mq`: from the broker (or file) when `from_store`, else from
    /// memory falling back to the store. −1 when none is stored.
    pub async fn fetch_consume_offset(&self, mq: &MessageQueue, from_store: bool) -> Result<i64> {
        let store = self.offset_store()?;
        let read_type = if from_store {
            ReadOffsetType::ReadFromStore
        } else {
            ReadOffsetType::MemoryFirstThenStore
        };
        Ok(store.read_offset(mq, read_type).await?.unwrap_or(-1))
    }

    /// Persists the offset of `mq` now, returning once the broker (or file) has it.
    pub async fn persist_consume_offset(&self, mq: &MessageQueue) -> Result<()> {
        self.offsets()?
            .persist_sync(&HashSet::from([mq.clone()]))
            .await
    }

    /// Hands a message the application failed to process back to the broker: it is redelivered
    /// through the group's retry topic after `delay_level`'s delay (0 lets the broker choose),
    /// or dead-lettered once retried `max_reconsume_times` times. `broker_name` names the broker
    /// the message came from; without it the message's store host is used.
    pub async fn send_message_back(
        &self,
        msg: &MessageExt,
        delay_level: i32,
        broker_name: Option<&str>,
    ) -> Result<()> {
        let access = self.access()?;
        let addr = match broker_name {
            Some(name) => access
                .instance
                .find_broker_address_in_publish(name)
                .ok_or_else(|| {
                    ClientError::Client(format!("the broker [{name}] does not exist"))
                })?,
            None => msg.store_host.to_string(),
        };
        access
            .instance
            .api()
            .consumer_send_message_back(
                &addr,
                broker_name.unwrap_or_default(),
                msg,
                &self.inner.config.consumer_group,
                delay_level,
                access.instance.config().mq_client_api_timeout,
                self.inner.config.max_reconsume_times,
            )
            .await
    }

    /// The smallest offset still stored in `mq`.
    pub async fn min_offset(&self, mq: &MessageQueue) -> Result<i64> {
        self.access()?.min_offset(mq).await
    }

    /// The next offset the broker will write in `mq`.
    pub async fn max_offset(&self, mq: &MessageQueue) -> Result<i64> {
        self.access()?.max_offset(mq).await
    }

    /// The offset of the first message of `mq` stored at or after `timestamp` (ms).
    pub async fn search_offset(&self, mq: &MessageQueue, timestamp: i64) -> Result<i64> {
        self.access()?.search_offset(mq, timestamp).await
    }

    /// The store time (ms) of the oldest message of `mq`.
    pub async fn earliest_msg_store_time(&self, mq: &MessageQueue) -> Result<i64> {
        self.access()?.earliest_msg_store_time(mq).await
    }
}

impl PullConsumerInner {
    /// Persists every recorded offset, waiting for the store.
    async fn persist_all(&self) {
        let offsets = self.offsets.read().clone();
        if let Some(offsets) = offsets
            && let Err(e) = offsets.persist_sync(&offsets.queues()).await
        {
            tracing::warn!(group = %self.config.consumer_group, error = %e,
                "persisting consumer offsets failed");
        }
    }
}

impl MQConsumerInner for PullConsumerInner {
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
        ConsumeFromWhere::ConsumeFromLastOffset
    }

    fn subscriptions(&self) -> Vec<SubscriptionData> {
        let mut subs: Vec<SubscriptionData> = self.subscriptions.read().values().cloned().collect();
        subs.sort_by(|a, b| a.topic.cmp(&b.topic));
        subs
    }

    /// The application chooses its queues; there is nothing to rebalance.
    fn do_rebalance(&self) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }

    fn persist_consumer_offset(&self) -> BoxFuture<'static, ()> {
        let store = self.offsets.read().as_ref().map(|o| Arc::clone(&o.store));
        Box::pin(async move {
            if let Some(store) = store {
                let queues: HashSet<MessageQueue> =
                    store.clone_offset_table("").into_keys().collect();
                store.persist_all(&queues).await;
            }
        })
    }

    fn update_topic_subscribe_info(&self, topic: &str, info: Vec<MessageQueue>) {
        if self.subscriptions.read().contains_key(topic) {
            self.topic_subscribe_info
                .write()
                .insert(topic.to_owned(), info);
        }
    }

    fn is_subscribe_topic_need_update(&self, topic: &str) -> bool {
        self.subscriptions.read().contains_key(topic)
            && !self.topic_subscribe_info.read().contains_key(topic)
    }

    fn running_info(&self) -> comet_protocol::body::ConsumerRunningInfo {
        let mut info = comet_protocol::body::ConsumerRunningInfo::default();
        info.properties
            .insert("consumerGroup".to_owned(), self.group_name());
        let mut subscriptions = self.subscriptions();
        subscriptions.sort_by(|a, b| (&a.topic, &a.sub_string).cmp(&(&b.topic, &b.sub_string)));
        info.subscription_set = subscriptions;
        if let Some(o) = self.offsets.read().as_ref() {
            for (mq, offset) in o.store.clone_offset_table("") {
                let pq_info = comet_protocol::body::ProcessQueueInfo {
                    commit_offset: offset,
                    ..Default::default()
                };
                info.mq_table.insert(mq, pq_info);
            }
        }
        info
    }

    /// The broker reset the group's offsets: the application reads them with
    /// `fetch_consume_offset`, so only the in-memory table changes.
    fn reset_offset(
        &self,
        _topic: &str,
        offsets: HashMap<MessageQueue, i64>,
    ) -> BoxFuture<'static, ()> {
        if let Some(o) = self.offsets.read().as_ref() {
            for (mq, offset) in &offsets {
                o.store.update_offset(mq, *offset, false);
            }
        }
        Box::pin(async {})
    }

    fn consumer_offsets(&self, topic: &str) -> HashMap<MessageQueue, i64> {
        self.offsets
            .read()
            .as_ref()
            .map(|o| o.store.clone_offset_table(topic))
            .unwrap_or_default()
    }
}
