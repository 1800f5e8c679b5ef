//! `MQClientInstance`: the engine shared by every producer and consumer with one client id, and
//! `MQClientManager`, the process-wide table that hands out one instance per client id.
//!
//! Brokers see a *client* (one id, one set of connections, one heartbeat), not individual
//! producers and consumers, so RocketMQ bundles everything per-client into this type:
//!
//! - the connections ([`MQClientApi`] over one `RemotingClient`), announcing language RUST and
//!   version [`comet_protocol::command::COMET_VERSION`];
//! - the route table, refreshed every `poll_name_server_interval` for every topic a registered
//!   producer or consumer uses, feeding producers their publish info and consumers their
//!   subscribe sets;
//! - the broker address table derived from the routes, with each broker's version as learned
//!   from heartbeat responses;
//! - the heartbeat to every broker (producer groups, consumer groups and subscriptions), which
//!   is how a broker learns group membership;
//! - offset persistence and the RebalanceService loop, which call back into consumers through
//!   [`MQConsumerInner`];
//! - processors for the requests a broker sends to a client (NOTIFY_CONSUMER_IDS_CHANGED,
//!   RESET_CONSUMER_CLIENT_OFFSET, GET_CONSUMER_STATUS_FROM_CLIENT, GET_CONSUMER_RUNNING_INFO,
//!   CHECK_TRANSACTION_STATE, CONSUME_MESSAGE_DIRECTLY).
//!
//! Start-up follows the Java service-state machine (CREATE_JUST → RUNNING → SHUTDOWN_ALREADY):
//! `start` is idempotent, so every producer and consumer calls it, and `shutdown` only takes
//! effect once the last producer and consumer have unregistered.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, LazyLock, Weak};
use std::time::Duration;

use comet_acl::AclClientRpcHook;
use comet_protocol::RemotingCommand;
use comet_protocol::body::route::MASTER_ID;
use comet_protocol::body::{
    ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, MessageModel, MessageQueue,
    ProducerData, ResetOffsetBody, SubscriptionData, TopicRouteData, from_fastjson,
    to_fastjson_bytes,
};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CheckTransactionStateRequestHeader, CommandHeaderExt, GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader, NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
};
use comet_protocol::message::MessageExt;
use comet_protocol::message::properties::keys;
use comet_remoting::{Channel, RemotingClient, RequestProcessor};
use futures::future::BoxFuture;
use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use tokio::sync::Notify;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::api::{MQClientApi, decode_messages};
use crate::config::ClientConfig;
use crate::error::{ClientError, Result};
use crate::route::{
    TopicPublishInfo, auto_create_route, random_start, route_changed, subscribe_queues,
};

/// Delay before the first route refresh after start (Java: 10 ms).
const FIRST_ROUTE_REFRESH_DELAY: Duration = Duration::from_millis(10);
/// Delay before the first periodic heartbeat after start (Java: 1 s).
const FIRST_HEARTBEAT_DELAY: Duration = Duration::from_secs(1);
/// Delay before the first periodic offset persistence after start (Java: 10 s).
const FIRST_PERSIST_DELAY: Duration = Duration::from_secs(10);

/// Lifecycle of an instance, producer or consumer (Java `ServiceState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServiceState {
    CreateJust,
    Running,
    ShutdownAlready,
    StartFailed,
}

impl std::fmt::Display for ServiceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ServiceState::CreateJust => "CREATE_JUST",
            ServiceState::Running => "RUNNING",
            ServiceState::ShutdownAlready => "SHUTDOWN_ALREADY",
            ServiceState::StartFailed => "START_FAILED",
        })
    }
}

/// A broker address found for a broker name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindBrokerResult {
    pub broker_addr: String,
    /// The address is a slave's.
    pub slave: bool,
    /// Version the broker announced in its last heartbeat response (0 if unknown).
    pub broker_version: i32,
}

/// What the instance needs from a consumer (implemented by the push, pull and lite consumers).
pub trait MQConsumerInner: Send + Sync + 'static {
    fn group_name(&self) -> String;
    fn message_model(&self) -> MessageModel;
    fn consume_type(&self) -> ConsumeType;
    fn consume_from_where(&self) -> ConsumeFromWhere;
    /// Subscriptions sent in the heartbeat (the retry topic included for clustering push).
    fn subscriptions(&self) -> Vec<SubscriptionData>;
    fn do_rebalance(&self) -> BoxFuture<'static, ()>;
    fn persist_consumer_offset(&self) -> BoxFuture<'static, ()>;
    /// The topic's subscribe set changed (sorted by topic, broker name, queue id).
    fn update_topic_subscribe_info(&self, topic: &str, info: Vec<MessageQueue>);
    fn is_subscribe_topic_need_update(&self, topic: &str) -> bool;
    /// ConsumerRunningInfo-like JSON, answered to GET_CONSUMER_RUNNING_INFO.
    fn running_info(&self) -> serde_json::Value;
    /// RESET_CONSUMER_CLIENT_OFFSET from the broker: restart the queues at these offsets.
    fn reset_offset(
        &self,
        topic: &str,
        offsets: HashMap<MessageQueue, i64>,
    ) -> BoxFuture<'static, ()>;
    /// Current consume offsets of the topic's queues, answered to
    /// GET_CONSUMER_STATUS_FROM_CLIENT. Consumers without local offsets keep the default.
    fn consumer_offsets(&self, _topic: &str) -> HashMap<MessageQueue, i64> {
        HashMap::new()
    }
}

/// What the instance needs from a producer.
pub trait MQProducerInner: Send + Sync + 'static {
    /// Topics whose routes the instance must keep fresh.
    fn publish_topic_list(&self) -> Vec<String>;
    fn update_topic_publish_info(&self, topic: &str, info: Arc<TopicPublishInfo>);
    fn is_publish_topic_need_update(&self, topic: &str) -> bool;
    /// CHECK_TRANSACTION_STATE for a half message of this producer group. Only a transaction
    /// producer answers it (with END_TRANSACTION); others log and ignore it.
    fn check_transaction_state(
        &self,
        broker_addr: &str,
        msg: MessageExt,
        header: CheckTransactionStateRequestHeader,
    ) {
        tracing::warn!(
            broker = broker_addr,
            msg_id = ?header.msg_id,
            topic = %msg.topic,
            "CHECK_TRANSACTION_STATE for a producer that is not a transaction producer; ignored"
        );
    }
}

/// The process-wide table of client instances, keyed by client id.
pub struct MQClientManager;

static INSTANCES: LazyLock<Mutex<HashMap<String, Arc<MQClientInstance>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

impl MQClientManager {
    /// The instance for `config`'s client id, created (not started) if there is none. When it
    /// exists, its own config (the first one given) stays in effect.
    pub fn get_or_create_instance(config: &ClientConfig) -> Arc<MQClientInstance> {
        let client_id = config.build_client_id();
        let mut table = INSTANCES.lock();
        if let Some(instance) = table.get(&client_id)
            && instance.service_state() != ServiceState::ShutdownAlready
        {
            return Arc::clone(instance);
        }
        let instance = MQClientInstance::new(config.clone(), client_id.clone());
        table.insert(client_id, Arc::clone(&instance));
        instance
    }

    /// Forgets the instance with `client_id` (called by its shutdown).
    pub fn remove_instance(client_id: &str) {
        INSTANCES.lock().remove(client_id);
    }

    /// Forgets `instance` if it is still the one registered under its client id (a newer
    /// instance with the same id is kept).
    fn remove_exact(instance: &Arc<MQClientInstance>) {
        let mut table = INSTANCES.lock();
        if table
            .get(instance.client_id())
            .is_some_and(|current| Arc::ptr_eq(current, instance))
        {
            table.remove(instance.client_id());
        }
    }
}

/// Producer/consumer groups that left without their UNREGISTER_CLIENT being sent yet.
#[derive(Default)]
struct PendingUnregister {
    producers: HashSet<String>,
    consumers: HashSet<String>,
}

/// The shared client engine. See the module docs.
pub struct MQClientInstance {
    client_id: String,
    config: ClientConfig,
    api: MQClientApi,
    state: Mutex<ServiceState>,
    producers: RwLock<HashMap<String, Arc<dyn MQProducerInner>>>,
    consumers: RwLock<HashMap<String, Arc<dyn MQConsumerInner>>>,
    topic_routes: RwLock<HashMap<String, TopicRouteData>>,
    /// Broker name → broker id → address.
    broker_addrs: RwLock<HashMap<String, BTreeMap<i64, String>>>,
    /// Broker address → version from its last heartbeat response.
    broker_versions: RwLock<HashMap<String, i32>>,
    pending_unregister: Mutex<PendingUnregister>,
    /// Serializes route updates, as Java's `lockNamesrv`.
    route_lock: tokio::sync::Mutex<()>,
    /// Serializes heartbeats, as Java's `lockHeartbeat`.
    heartbeat_lock: tokio::sync::Mutex<()>,
    rebalance_wakeup: Notify,
    stop: CancellationToken,
    tasks: TaskTracker,
}

impl MQClientInstance {
    fn new(config: ClientConfig, client_id: String) -> Arc<Self> {
        let remoting = RemotingClient::new(config.remoting_config());
        if let Some(credentials) = &config.credentials {
            remoting.add_rpc_hook(Arc::new(AclClientRpcHook::new(credentials.clone())));
        }
        let api = MQClientApi::new(remoting, config.language, config.namesrv_addrs());
        Arc::new_cyclic(|weak: &Weak<MQClientInstance>| {
            let processor: Arc<dyn RequestProcessor> = Arc::new(ClientRemotingProcessor {
                instance: weak.clone(),
            });
            for code in [
                RequestCode::NotifyConsumerIdsChanged,
                RequestCode::ResetConsumerClientOffset,
                RequestCode::GetConsumerStatusFromClient,
                RequestCode::GetConsumerRunningInfo,
                RequestCode::CheckTransactionState,
                RequestCode::ConsumeMessageDirectly,
            ] {
                api.remoting().register(code.into(), Arc::clone(&processor));
            }
            MQClientInstance {
                client_id,
                config,
                api,
                state: Mutex::new(ServiceState::CreateJust),
                producers: RwLock::new(HashMap::new()),
                consumers: RwLock::new(HashMap::new()),
                topic_routes: RwLock::new(HashMap::new()),
                broker_addrs: RwLock::new(HashMap::new()),
                broker_versions: RwLock::new(HashMap::new()),
                pending_unregister: Mutex::new(PendingUnregister::default()),
                route_lock: tokio::sync::Mutex::new(()),
                heartbeat_lock: tokio::sync::Mutex::new(()),
                rebalance_wakeup: Notify::new(),
                stop: CancellationToken::new(),
                tasks: TaskTracker::new(),
            }
        })
    }

    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    pub fn api(&self) -> &MQClientApi {
        &self.api
    }

    pub fn service_state(&self) -> ServiceState {
        *self.state.lock()
    }

    /// Starts the scheduled tasks. Idempotent: only the first call of a fresh instance does
    /// anything. Fails when no name server is configured or the instance was shut down.
    pub async fn start(self: &Arc<Self>) -> Result<()> {
        {
            let mut state = self.state.lock();
            match *state {
                ServiceState::Running => return Ok(()),
                ServiceState::ShutdownAlready => {
                    return Err(ClientError::ServiceState {
                        state: state.to_string(),
                        needed: "CREATE_JUST or RUNNING (create a new instance)".to_string(),
                    });
                }
                ServiceState::CreateJust | ServiceState::StartFailed => {}
            }
            if self.api.name_server_address_list().is_empty() {
                *state = ServiceState::StartFailed;
                return Err(ClientError::NoNameServer);
            }
            *state = ServiceState::Running;
        }
        self.spawn_route_refresh();
        self.spawn_heartbeat();
        self.spawn_offset_persistence();
        self.spawn_rebalance_service();
        tracing::info!(client_id = %self.client_id, "client instance started");
        Ok(())
    }

    /// Stops the instance once no producer or consumer is registered any more: cancels the
    /// scheduled tasks, sends the outstanding UNREGISTER_CLIENTs, closes every connection and
    /// removes the instance from [`MQClientManager`]. Does nothing while groups remain.
    pub async fn shutdown(self: &Arc<Self>) {
        if !self.producers.read().is_empty() || !self.consumers.read().is_empty() {
            return;
        }
        {
            let mut state = self.state.lock();
            if *state == ServiceState::ShutdownAlready {
                return;
            }
            *state = ServiceState::ShutdownAlready;
        }
        self.stop.cancel();
        self.tasks.close();
        self.tasks.wait().await;
        self.flush_pending_unregister().await;
        self.api.remoting().shutdown().await;
        MQClientManager::remove_exact(self);
        tracing::info!(client_id = %self.client_id, "client instance shut down");
    }

    /// Registers a consumer group. A group may be registered once per instance.
    pub fn register_consumer(&self, group: &str, consumer: Arc<dyn MQConsumerInner>) -> Result<()> {
        if group.is_empty() {
            return Err(ClientError::IllegalArgument(
                "consumer group is empty".to_string(),
            ));
        }
        let mut consumers = self.consumers.write();
        if consumers.contains_key(group) {
            return Err(ClientError::DuplicateGroup(group.to_string()));
        }
        consumers.insert(group.to_string(), consumer);
        self.pending_unregister.lock().consumers.remove(group);
        Ok(())
    }

    /// Forgets a consumer group. Its UNREGISTER_CLIENT is sent by [`Self::unregister_client`]
    /// (or at the latest by [`Self::shutdown`]).
    pub fn unregister_consumer(&self, group: &str) {
        if self.consumers.write().remove(group).is_some() {
            self.pending_unregister
                .lock()
                .consumers
                .insert(group.to_string());
        }
    }

    /// Registers a producer group. A group may be registered once per instance.
    pub fn register_producer(&self, group: &str, producer: Arc<dyn MQProducerInner>) -> Result<()> {
        if group.is_empty() {
            return Err(ClientError::IllegalArgument(
                "producer group is empty".to_string(),
            ));
        }
        let mut producers = self.producers.write();
        if producers.contains_key(group) {
            return Err(ClientError::DuplicateGroup(group.to_string()));
        }
        producers.insert(group.to_string(), producer);
        self.pending_unregister.lock().producers.remove(group);
        Ok(())
    }

    /// Forgets a producer group (see [`Self::unregister_consumer`]).
    pub fn unregister_producer(&self, group: &str) {
        if self.producers.write().remove(group).is_some() {
            self.pending_unregister
                .lock()
                .producers
                .insert(group.to_string());
        }
    }

    pub fn consumer(&self, group: &str) -> Option<Arc<dyn MQConsumerInner>> {
        self.consumers.read().get(group).cloned()
    }

    pub fn producer(&self, group: &str) -> Option<Arc<dyn MQProducerInner>> {
        self.producers.read().get(group).cloned()
    }

    /// Sends UNREGISTER_CLIENT for the given groups to every known broker. Failures are logged:
    /// a broker also drops the client when its channel closes or expires.
    pub async fn unregister_client(
        &self,
        producer_group: Option<&str>,
        consumer_group: Option<&str>,
    ) {
        {
            let mut pending = self.pending_unregister.lock();
            if let Some(g) = producer_group {
                pending.producers.remove(g);
            }
            if let Some(g) = consumer_group {
                pending.consumers.remove(g);
            }
        }
        let timeout = self.config.mq_client_api_timeout;
        for addr in self.all_broker_addrs() {
            if let Err(e) = self
                .api
                .unregister_client(
                    &addr,
                    &self.client_id,
                    producer_group,
                    consumer_group,
                    timeout,
                )
                .await
            {
                tracing::warn!(broker = %addr, error = %e, ?producer_group, ?consumer_group, "unregister client failed");
            }
        }
    }

    async fn flush_pending_unregister(&self) {
        let pending = std::mem::take(&mut *self.pending_unregister.lock());
        for group in &pending.producers {
            self.unregister_client(Some(group), None).await;
        }
        for group in &pending.consumers {
            self.unregister_client(None, Some(group)).await;
        }
    }

    /// Fetches the route of `topic` and, if it changed (or a producer/consumer lacks it), hands
    /// the new publish info and subscribe set to every producer and consumer. `Ok(false)` when
    /// the name server does not know the topic or nothing changed.
    pub async fn update_topic_route_info_from_name_server(&self, topic: &str) -> Result<bool> {
        let _guard = self.route_lock.lock().await;
        let route = self
            .api
            .get_topic_route_info_from_name_server(topic, self.config.mq_client_api_timeout)
            .await?;
        match route {
            Some(route) => Ok(self.apply_route(topic, route)),
            None => Ok(false),
        }
    }

    /// The TBW102 path of §8.4: installs as the route of `topic` the route of `default_topic`
    /// with queue counts capped at `default_queue_nums`. `Ok(false)` when the template topic
    /// itself has no route (auto-creation is off everywhere).
    pub async fn update_topic_route_info_from_default(
        &self,
        topic: &str,
        default_topic: &str,
        default_queue_nums: i32,
    ) -> Result<bool> {
        let _guard = self.route_lock.lock().await;
        let template = self
            .api
            .get_topic_route_info_from_name_server(default_topic, self.config.mq_client_api_timeout)
            .await?;
        match template {
            Some(template) => {
                let route = auto_create_route(template, default_queue_nums);
                Ok(self.apply_route(topic, route))
            }
            None => Ok(false),
        }
    }

    /// Installs `route` for `topic`; returns whether anything was updated.
    fn apply_route(&self, topic: &str, route: TopicRouteData) -> bool {
        let changed = route_changed(self.topic_routes.read().get(topic), &route);
        let producers: Vec<_> = self.producers.read().values().cloned().collect();
        let consumers: Vec<_> = self.consumers.read().values().cloned().collect();
        let needed = producers
            .iter()
            .any(|p| p.is_publish_topic_need_update(topic))
            || consumers
                .iter()
                .any(|c| c.is_subscribe_topic_need_update(topic));
        if !changed && !needed {
            return false;
        }
        {
            let mut addrs = self.broker_addrs.write();
            for bd in &route.broker_datas {
                addrs.insert(bd.broker_name.clone(), bd.broker_addrs.clone());
            }
        }
        if !producers.is_empty() {
            let info = Arc::new(TopicPublishInfo::from_route(topic, &route));
            for producer in &producers {
                producer.update_topic_publish_info(topic, Arc::clone(&info));
            }
        }
        if !consumers.is_empty() {
            let queues = subscribe_queues(topic, &route);
            for consumer in &consumers {
                consumer.update_topic_subscribe_info(topic, queues.clone());
            }
        }
        tracing::debug!(topic, "topic route updated");
        self.topic_routes.write().insert(topic.to_string(), route);
        true
    }

    /// Refreshes the route of every topic a registered producer or consumer uses, then drops
    /// brokers no route mentions any more.
    pub async fn update_topic_route_info_for_all(&self) {
        let mut topics: HashSet<String> = HashSet::new();
        for producer in self.producers.read().values() {
            topics.extend(producer.publish_topic_list());
        }
        for consumer in self.consumers.read().values() {
            topics.extend(consumer.subscriptions().into_iter().map(|s| s.topic));
        }
        for topic in topics {
            if let Err(e) = self.update_topic_route_info_from_name_server(&topic).await {
                tracing::debug!(topic = %topic, error = %e, "route refresh failed");
            }
        }
        self.clean_offline_brokers();
    }

    fn clean_offline_brokers(&self) {
        let live: HashSet<String> = self
            .topic_routes
            .read()
            .values()
            .flat_map(|r| r.broker_datas.iter().map(|bd| bd.broker_name.clone()))
            .collect();
        self.broker_addrs
            .write()
            .retain(|name, _| live.contains(name));
    }

    /// The last route fetched for `topic`.
    pub fn topic_route(&self, topic: &str) -> Option<TopicRouteData> {
        self.topic_routes.read().get(topic).cloned()
    }

    /// The master address of `broker_name`.
    pub fn find_broker_address_in_publish(&self, broker_name: &str) -> Option<String> {
        self.broker_addrs
            .read()
            .get(broker_name)
            .and_then(|ids| ids.get(&MASTER_ID).cloned())
    }

    /// The address of broker `broker_id` of `broker_name`; unless `only_this`, any broker of
    /// that name when that id is not known.
    pub fn find_broker_address_in_subscribe(
        &self,
        broker_name: &str,
        broker_id: i64,
        only_this: bool,
    ) -> Option<FindBrokerResult> {
        let addrs = self.broker_addrs.read();
        let ids = addrs.get(broker_name)?;
        let (id, addr) = match ids.get(&broker_id) {
            Some(addr) => (broker_id, addr.clone()),
            None if !only_this => {
                let (id, addr) = ids.iter().next()?;
                (*id, addr.clone())
            }
            None => return None,
        };
        let broker_version = self.broker_versions.read().get(&addr).copied().unwrap_or(0);
        Some(FindBrokerResult {
            broker_addr: addr,
            slave: id != MASTER_ID,
            broker_version,
        })
    }

    /// The address of some broker serving `topic` (a master when there is one).
    pub fn any_broker_addr_of_topic(&self, topic: &str) -> Option<String> {
        let routes = self.topic_routes.read();
        let route = routes.get(topic)?;
        let count = route.broker_datas.len();
        if count == 0 {
            return None;
        }
        let start = random_start() as usize;
        (0..count).find_map(|step| {
            let bd = route.broker_datas.get((start + step) % count)?;
            bd.master_addr()
                .map(str::to_string)
                .or_else(|| bd.broker_addrs.values().next().cloned())
        })
    }

    /// The client ids of `group`'s consumers, asked of a broker serving `topic`.
    pub async fn find_consumer_id_list(&self, topic: &str, group: &str) -> Result<Vec<String>> {
        if self.any_broker_addr_of_topic(topic).is_none() {
            self.update_topic_route_info_from_name_server(topic).await?;
        }
        let addr = self
            .any_broker_addr_of_topic(topic)
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_string(),
                namesrv: self.config.namesrv_addr.clone(),
            })?;
        self.api
            .get_consumer_id_list_by_group(&addr, group, self.config.mq_client_api_timeout)
            .await
    }

    /// The version a broker announced in its last heartbeat response.
    pub fn broker_version(&self, addr: &str) -> Option<i32> {
        self.broker_versions.read().get(addr).copied()
    }

    /// The HEART_BEAT body describing every registered group.
    pub fn heartbeat_data(&self) -> HeartbeatData {
        let mut producer_data_set: Vec<ProducerData> = self
            .producers
            .read()
            .keys()
            .map(|g| ProducerData {
                group_name: g.clone(),
            })
            .collect();
        producer_data_set.sort_by(|a, b| a.group_name.cmp(&b.group_name));
        let mut consumer_data_set: Vec<ConsumerData> = self
            .consumers
            .read()
            .iter()
            .map(|(group, c)| ConsumerData {
                group_name: group.clone(),
                consume_type: c.consume_type(),
                message_model: c.message_model(),
                consume_from_where: c.consume_from_where(),
                subscription_data_set: c.subscriptions(),
                unit_mode: false,
            })
            .collect();
        consumer_data_set.sort_by(|a, b| a.group_name.cmp(&b.group_name));
        HeartbeatData {
            client_id: self.client_id.clone(),
            producer_data_set,
            consumer_data_set,
            ..Default::default()
        }
    }

    /// Sends the heartbeat to every master broker (and, when consumers are registered, to the
    /// slaves too, which consumers may pull from). Records each broker's version.
    pub async fn send_heartbeat_to_all_brokers(&self) {
        let _guard = self.heartbeat_lock.lock().await;
        let heartbeat = self.heartbeat_data();
        if heartbeat.producer_data_set.is_empty() && heartbeat.consumer_data_set.is_empty() {
            return;
        }
        let with_slaves = !heartbeat.consumer_data_set.is_empty();
        let targets: Vec<String> = self
            .broker_addrs
            .read()
            .values()
            .flat_map(|ids| {
                ids.iter()
                    .filter(|(id, _)| with_slaves || **id == MASTER_ID)
                    .map(|(_, addr)| addr.clone())
                    .collect::<Vec<_>>()
            })
            .collect();
        let timeout = self.config.mq_client_api_timeout;
        for addr in targets {
            match self.api.send_heartbeat(&addr, &heartbeat, timeout).await {
                Ok(version) => {
                    self.broker_versions.write().insert(addr, version);
                }
                Err(e) => tracing::warn!(broker = %addr, error = %e, "heartbeat failed"),
            }
        }
    }

    /// Wakes the RebalanceService now (e.g. on NOTIFY_CONSUMER_IDS_CHANGED).
    pub fn rebalance_immediately(&self) {
        self.rebalance_wakeup.notify_one();
    }

    /// Runs `do_rebalance` on every registered consumer.
    pub async fn do_rebalance(&self) {
        let consumers: Vec<_> = self.consumers.read().values().cloned().collect();
        for consumer in consumers {
            consumer.do_rebalance().await;
        }
    }

    /// Runs `persist_consumer_offset` on every registered consumer.
    pub async fn persist_all_consumer_offset(&self) {
        let consumers: Vec<_> = self.consumers.read().values().cloned().collect();
        for consumer in consumers {
            consumer.persist_consumer_offset().await;
        }
    }

    fn all_broker_addrs(&self) -> Vec<String> {
        let mut addrs: Vec<String> = self
            .broker_addrs
            .read()
            .values()
            .flat_map(|ids| ids.values().cloned())
            .collect();
        addrs.sort();
        addrs.dedup();
        addrs
    }

    /// Runs `tick` at `first_delay` and every `period` after, until shutdown.
    fn spawn_periodic<F>(
        self: &Arc<Self>,
        name: &'static str,
        first_delay: Duration,
        period: Duration,
        tick: F,
    ) where
        F: Fn(Arc<MQClientInstance>) -> BoxFuture<'static, ()> + Send + 'static,
    {
        let instance = Arc::clone(self);
        let stop = self.stop.clone();
        self.tasks.spawn(async move {
            let mut interval = tokio::time::interval_at(Instant::now() + first_delay, period);
            interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    _ = interval.tick() => {}
                }
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tick(Arc::clone(&instance)) => {}
                }
            }
            tracing::debug!(task = name, "scheduled task stopped");
        });
    }

    fn spawn_route_refresh(self: &Arc<Self>) {
        let period = self.config.poll_name_server_interval;
        self.spawn_periodic("route refresh", FIRST_ROUTE_REFRESH_DELAY, period, |i| {
            Box::pin(async move { i.update_topic_route_info_for_all().await })
        });
    }

    fn spawn_heartbeat(self: &Arc<Self>) {
        let period = self.config.heartbeat_broker_interval;
        self.spawn_periodic("heartbeat", FIRST_HEARTBEAT_DELAY, period, |i| {
            Box::pin(async move { i.send_heartbeat_to_all_brokers().await })
        });
    }

    fn spawn_offset_persistence(self: &Arc<Self>) {
        let period = self.config.persist_consumer_offset_interval;
        self.spawn_periodic("offset persistence", FIRST_PERSIST_DELAY, period, |i| {
            Box::pin(async move { i.persist_all_consumer_offset().await })
        });
    }

    /// The RebalanceService: every `rebalance_interval`, or as soon as it is woken.
    fn spawn_rebalance_service(self: &Arc<Self>) {
        let instance = Arc::clone(self);
        let stop = self.stop.clone();
        let period = self.config.rebalance_interval;
        self.tasks.spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(period) => {}
                    () = instance.rebalance_wakeup.notified() => {}
                }
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = instance.do_rebalance() => {}
                }
            }
        });
    }
}

/// Handles the requests a broker sends to this client.
struct ClientRemotingProcessor {
    instance: Weak<MQClientInstance>,
}

impl RequestProcessor for ClientRemotingProcessor {
    fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let instance = self.instance.upgrade();
        let peer = channel.remote_addr().to_string();
        Box::pin(async move {
            let Some(instance) = instance else {
                return Some(RemotingCommand::response(
                    ResponseCode::SystemError,
                    Some("client instance is shut down".to_string()),
                ));
            };
            match RequestCode::from(request.code) {
                RequestCode::NotifyConsumerIdsChanged => {
                    notify_consumer_ids_changed(&instance, &peer, &request);
                    None
                }
                RequestCode::ResetConsumerClientOffset => {
                    reset_offset(&instance, &request).await;
                    None
                }
                RequestCode::GetConsumerStatusFromClient => {
                    Some(consumer_status(&instance, &request))
                }
                RequestCode::GetConsumerRunningInfo => {
                    Some(consumer_running_info(&instance, &request))
                }
                RequestCode::CheckTransactionState => {
                    check_transaction_state(&instance, &peer, &request);
                    None
                }
                _ => Some(RemotingCommand::response(
                    ResponseCode::RequestCodeNotSupported,
                    Some(format!(
                        "request code {} is not supported by the Comet client",
                        request.code
                    )),
                )),
            }
        })
    }
}

fn notify_consumer_ids_changed(instance: &MQClientInstance, peer: &str, request: &RemotingCommand) {
    match request.decode_header::<NotifyConsumerIdsChangedRequestHeader>() {
        Ok(header) => tracing::info!(
            broker = peer,
            group = %header.consumer_group,
            "consumer ids changed; rebalancing now"
        ),
        Err(e) => {
            tracing::debug!(broker = peer, error = %e, "NOTIFY_CONSUMER_IDS_CHANGED without a group")
        }
    }
    instance.rebalance_immediately();
}

async fn reset_offset(instance: &MQClientInstance, request: &RemotingCommand) {
    let header = match request.decode_header::<ResetOffsetRequestHeader>() {
        Ok(header) => header,
        Err(e) => {
            tracing::warn!(error = %e, "malformed RESET_CONSUMER_CLIENT_OFFSET");
            return;
        }
    };
    let offsets = match request.body.as_deref() {
        Some(body) if !body.is_empty() => match from_fastjson::<ResetOffsetBody>(body) {
            Ok(body) => body.offset_table,
            Err(e) => {
                tracing::warn!(error = %e, "malformed RESET_CONSUMER_CLIENT_OFFSET body");
                return;
            }
        },
        _ => HashMap::new(),
    };
    let Some(consumer) = instance.consumer(&header.group) else {
        tracing::debug!(group = %header.group, "reset offset for a group this client does not run");
        return;
    };
    tracing::info!(group = %header.group, topic = %header.topic, queues = offsets.len(), "resetting consumer offsets");
    consumer.reset_offset(&header.topic, offsets).await;
}

/// GET_CONSUMER_STATUS_FROM_CLIENT answer body (Java `GetConsumerStatusBody`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConsumerStatusBody {
    message_queue_table: HashMap<MessageQueue, i64>,
    consumer_table: HashMap<String, HashMap<MessageQueue, i64>>,
}

fn consumer_status(instance: &MQClientInstance, request: &RemotingCommand) -> RemotingCommand {
    let header = match request.decode_header::<GetConsumerStatusRequestHeader>() {
        Ok(header) => header,
        Err(e) => return RemotingCommand::response(ResponseCode::SystemError, Some(e.to_string())),
    };
    let offsets = instance
        .consumer(&header.group)
        .map(|c| c.consumer_offsets(&header.topic))
        .unwrap_or_default();
    let body = ConsumerStatusBody {
        message_queue_table: offsets,
        consumer_table: HashMap::new(),
    };
    json_response(&body)
}

fn consumer_running_info(
    instance: &MQClientInstance,
    request: &RemotingCommand,
) -> RemotingCommand {
    let header = match request.decode_header::<GetConsumerRunningInfoRequestHeader>() {
        Ok(header) => header,
        Err(e) => return RemotingCommand::response(ResponseCode::SystemError, Some(e.to_string())),
    };
    match instance.consumer(&header.consumer_group) {
        Some(consumer) => json_response(&consumer.running_info()),
        None => RemotingCommand::response(
            ResponseCode::SystemError,
            Some(format!(
                "The Consumer Group <{}> not exist in this consumer",
                header.consumer_group
            )),
        ),
    }
}

fn json_response<T: Serialize>(body: &T) -> RemotingCommand {
    match to_fastjson_bytes(body) {
        Ok(bytes) => RemotingCommand::response(ResponseCode::Success, None).with_body(bytes),
        Err(e) => RemotingCommand::response(ResponseCode::SystemError, Some(e.to_string())),
    }
}

fn check_transaction_state(instance: &MQClientInstance, peer: &str, request: &RemotingCommand) {
    let header = match request.decode_header::<CheckTransactionStateRequestHeader>() {
        Ok(header) => header,
        Err(e) => {
            tracing::warn!(broker = peer, error = %e, "malformed CHECK_TRANSACTION_STATE");
            return;
        }
    };
    let msg = match request.body.as_ref().map(decode_messages) {
        Some(Ok(mut messages)) if !messages.is_empty() => messages.swap_remove(0),
        Some(Err(e)) => {
            tracing::warn!(broker = peer, error = %e, "undecodable half message in CHECK_TRANSACTION_STATE");
            return;
        }
        _ => {
            tracing::warn!(
                broker = peer,
                "CHECK_TRANSACTION_STATE without a half message"
            );
            return;
        }
    };
    let Some(group) = msg.properties.get(keys::PRODUCER_GROUP).map(str::to_string) else {
        tracing::warn!(
            broker = peer,
            "half message without a producer group (PGROUP)"
        );
        return;
    };
    match instance.producer(&group) {
        Some(producer) => producer.check_transaction_state(peer, msg, header),
        None => {
            tracing::debug!(broker = peer, group = %group, "transaction check for a group this client does not run")
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use comet_protocol::body::{BrokerData, QueueData, perm};

    use super::*;

    struct CountingProducer {
        updates: AtomicUsize,
    }

    impl MQProducerInner for CountingProducer {
        fn publish_topic_list(&self) -> Vec<String> {
            vec!["T".to_string()]
        }
        fn update_topic_publish_info(&self, _topic: &str, _info: Arc<TopicPublishInfo>) {
            self.updates.fetch_add(1, Ordering::SeqCst);
        }
        fn is_publish_topic_need_update(&self, _topic: &str) -> bool {
            false
        }
    }

    fn config(instance_name: &str) -> ClientConfig {
        let mut config = ClientConfig::new("127.0.0.1:1");
        config.client_ip = "10.9.8.7".to_string();
        config.instance_name = instance_name.to_string();
        config
    }

    fn route() -> TopicRouteData {
        TopicRouteData {
            queue_datas: vec![QueueData {
                broker_name: "b".into(),
                read_queue_nums: 2,
                write_queue_nums: 2,
                perm: perm::PERM_READ_WRITE,
                topic_sys_flag: 0,
            }],
            broker_datas: vec![BrokerData {
                cluster: "c".into(),
                broker_name: "b".into(),
                broker_addrs: BTreeMap::from([(0, "m:1".to_string()), (1, "s:1".to_string())]),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// A consumer that records what the instance asks of it.
    #[derive(Default)]
    struct RecordingConsumer {
        rebalances: AtomicUsize,
        resets: Mutex<Vec<(String, HashMap<MessageQueue, i64>)>>,
    }

    impl MQConsumerInner for RecordingConsumer {
        fn group_name(&self) -> String {
            "cg".to_string()
        }
        fn message_model(&self) -> MessageModel {
            MessageModel::Clustering
        }
        fn consume_type(&self) -> ConsumeType {
            ConsumeType::ConsumePassively
        }
        fn consume_from_where(&self) -> ConsumeFromWhere {
            ConsumeFromWhere::ConsumeFromFirstOffset
        }
        fn subscriptions(&self) -> Vec<SubscriptionData> {
            vec![SubscriptionData::from_tag_expression("T", "TagA", 1)]
        }
        fn do_rebalance(&self) -> BoxFuture<'static, ()> {
            self.rebalances.fetch_add(1, Ordering::SeqCst);
            Box::pin(async {})
        }
        fn persist_consumer_offset(&self) -> BoxFuture<'static, ()> {
            Box::pin(async {})
        }
        fn update_topic_subscribe_info(&self, _topic: &str, _info: Vec<MessageQueue>) {}
        fn is_subscribe_topic_need_update(&self, _topic: &str) -> bool {
            false
        }
        fn running_info(&self) -> serde_json::Value {
            serde_json::json!({"properties": {"consumeType": "CONSUME_PASSIVELY"}})
        }
        fn reset_offset(
            &self,
            topic: &str,
            offsets: HashMap<MessageQueue, i64>,
        ) -> BoxFuture<'static, ()> {
            self.resets.lock().push((topic.to_string(), offsets));
            Box::pin(async {})
        }
        fn consumer_offsets(&self, topic: &str) -> HashMap<MessageQueue, i64> {
            HashMap::from([(MessageQueue::new(topic, "b", 0), 5)])
        }
    }

    #[test]
    fn heartbeat_lists_consumers_with_subscriptions() {
        let instance = MQClientInstance::new(config("hb"), "x@hb".to_string());
        let consumer = Arc::new(RecordingConsumer::default());
        instance
            .register_consumer("cg", consumer)
            .expect("registers");
        let hb = instance.heartbeat_data();
        let [data] = hb.consumer_data_set.as_slice() else {
            panic!("one consumer group expected");
        };
        assert_eq!(data.group_name, "cg");
        assert_eq!(
            data.consume_from_where,
            ConsumeFromWhere::ConsumeFromFirstOffset
        );
        assert_eq!(data.subscription_data_set[0].tags_set, vec!["TagA"]);
        assert!(hb.producer_data_set.is_empty());
    }

    #[tokio::test]
    async fn broker_requests_reach_the_consumer() {
        let instance = MQClientInstance::new(config("proc"), "x@proc".to_string());
        let consumer = Arc::new(RecordingConsumer::default());
        instance
            .register_consumer("cg", consumer.clone())
            .expect("registers");

        // GET_CONSUMER_RUNNING_INFO answers the consumer's JSON.
        let header = GetConsumerRunningInfoRequestHeader {
            consumer_group: "cg".into(),
            client_id: "x@proc".into(),
            ..Default::default()
        };
        let request = comet_protocol::headers::request_with_header(
            RequestCode::GetConsumerRunningInfo,
            &header,
        );
        let response = consumer_running_info(&instance, &request);
        assert_eq!(response.code, i32::from(ResponseCode::Success));
        let body: serde_json::Value =
            serde_json::from_slice(response.body.as_deref().unwrap_or_default()).expect("json");
        assert_eq!(body["properties"]["consumeType"], "CONSUME_PASSIVELY");
        let unknown = comet_protocol::headers::request_with_header(
            RequestCode::GetConsumerRunningInfo,
            &GetConsumerRunningInfoRequestHeader {
                consumer_group: "nope".into(),
                ..header.clone()
            },
        );
        let response = consumer_running_info(&instance, &unknown);
        assert_eq!(response.code, i32::from(ResponseCode::SystemError));

        // GET_CONSUMER_STATUS_FROM_CLIENT answers the offsets.
        let status = comet_protocol::headers::request_with_header(
            RequestCode::GetConsumerStatusFromClient,
            &GetConsumerStatusRequestHeader {
                topic: "T".into(),
                group: "cg".into(),
                ..Default::default()
            },
        );
        let response = consumer_status(&instance, &status);
        let text =
            String::from_utf8_lossy(response.body.as_deref().unwrap_or_default()).into_owned();
        assert!(
            text.contains("messageQueueTable") && text.contains(":5"),
            "{text}"
        );

        // RESET_CONSUMER_CLIENT_OFFSET hands the decoded table to the consumer.
        let offsets = HashMap::from([(MessageQueue::new("T", "b", 1), 42_i64)]);
        let body = to_fastjson_bytes(&ResetOffsetBody {
            offset_table: offsets.clone(),
        })
        .expect("body");
        let reset = comet_protocol::headers::request_with_header(
            RequestCode::ResetConsumerClientOffset,
            &ResetOffsetRequestHeader {
                group: "cg".into(),
                topic: "T".into(),
                timestamp: 0,
                is_force: true,
                ..Default::default()
            },
        )
        .with_body(body);
        reset_offset(&instance, &reset).await;
        assert_eq!(
            consumer.resets.lock().as_slice(),
            &[("T".to_string(), offsets)]
        );
    }

    #[tokio::test]
    async fn rebalance_service_runs_when_woken_and_stops_at_shutdown() {
        let mut cfg = config("rebalance");
        // Long enough that only a wake-up can explain a prompt rebalance.
        cfg.rebalance_interval = Duration::from_secs(3600);
        let instance = MQClientInstance::new(cfg, "x@rebalance".to_string());
        let consumer = Arc::new(RecordingConsumer::default());
        instance
            .register_consumer("cg", consumer.clone())
            .expect("registers");
        instance.start().await.expect("starts");
        instance.start().await.expect("start is idempotent");
        instance.rebalance_immediately();
        let deadline = Instant::now() + Duration::from_secs(10);
        while consumer.rebalances.load(Ordering::SeqCst) == 0 {
            assert!(
                Instant::now() < deadline,
                "rebalance did not run after wake-up"
            );
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Shutdown waits for the last group to leave.
        instance.shutdown().await;
        assert_eq!(instance.service_state(), ServiceState::Running);
        instance.unregister_consumer("cg");
        instance.shutdown().await;
        assert_eq!(instance.service_state(), ServiceState::ShutdownAlready);
        assert!(
            instance.start().await.is_err(),
            "a shut-down instance cannot restart"
        );
    }

    #[test]
    fn manager_returns_one_instance_per_client_id() {
        let a = MQClientManager::get_or_create_instance(&config("mgr-test"));
        let b = MQClientManager::get_or_create_instance(&config("mgr-test"));
        let c = MQClientManager::get_or_create_instance(&config("mgr-test-other"));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(a.client_id(), "10.9.8.7@mgr-test");
        MQClientManager::remove_instance(a.client_id());
        MQClientManager::remove_instance(c.client_id());
    }

    #[test]
    fn duplicate_group_is_refused() {
        let instance = MQClientInstance::new(config("dup"), "x@dup".to_string());
        let producer = Arc::new(CountingProducer {
            updates: AtomicUsize::new(0),
        });
        instance
            .register_producer("g", producer.clone())
            .expect("first registration");
        let err = instance
            .register_producer("g", producer.clone())
            .expect_err("second registration");
        assert!(matches!(&err, ClientError::DuplicateGroup(g) if g == "g"));
        assert!(err.to_string().contains("already registered"));
        instance.unregister_producer("g");
        instance
            .register_producer("g", producer)
            .expect("registration after unregister");
    }

    #[test]
    fn routes_feed_producers_and_broker_lookup() {
        let instance = MQClientInstance::new(config("routes"), "x@routes".to_string());
        let producer = Arc::new(CountingProducer {
            updates: AtomicUsize::new(0),
        });
        instance
            .register_producer("g", producer.clone())
            .expect("registers");
        assert!(instance.apply_route("T", route()));
        assert!(
            !instance.apply_route("T", route()),
            "unchanged route is not re-applied"
        );
        assert_eq!(producer.updates.load(Ordering::SeqCst), 1);
        assert_eq!(
            instance.find_broker_address_in_publish("b").as_deref(),
            Some("m:1")
        );
        let slave = instance
            .find_broker_address_in_subscribe("b", 1, true)
            .expect("slave known");
        assert_eq!(slave.broker_addr, "s:1");
        assert!(slave.slave);
        assert!(
            instance
                .find_broker_address_in_subscribe("b", 2, true)
                .is_none()
        );
        let any = instance
            .find_broker_address_in_subscribe("b", 2, false)
            .expect("falls back");
        assert_eq!(any.broker_addr, "m:1");
        assert!(!any.slave);
        assert_eq!(
            instance.any_broker_addr_of_topic("T").as_deref(),
            Some("m:1")
        );
        assert_eq!(instance.any_broker_addr_of_topic("U"), None);
        let hb = instance.heartbeat_data();
        assert_eq!(hb.client_id, "x@routes");
        assert_eq!(hb.producer_data_set.len(), 1);
    }
}
