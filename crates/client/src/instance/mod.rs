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
//!
//! One file per concern: `routes.rs` (route table and broker lookup), `heartbeat.rs`,
//! `tables.rs` (registered producer and consumer groups, UNREGISTER_CLIENT), `scheduled.rs` (the
//! periodic tasks and the RebalanceService) and `processor.rs` (requests from brokers).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Weak};

use comet_acl::AclClientRpcHook;
use comet_protocol::body::{
    ConsumeFromWhere, ConsumeMessageDirectlyResult, ConsumeType, ConsumerRunningInfo, MessageModel,
    MessageQueue, SubscriptionData, TopicRouteData,
};
use comet_protocol::headers::CheckTransactionStateRequestHeader;
use comet_protocol::message::MessageExt;
use comet_remoting::RemotingClient;
use futures::future::BoxFuture;
use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::api::MQClientApi;
use crate::config::ClientConfig;
use crate::error::{ClientError, Result};
use crate::route::TopicPublishInfo;
use tables::PendingUnregister;

mod heartbeat;
mod processor;
mod routes;
mod scheduled;
mod tables;

/// Lifecycle of an instance, producer or consumer (Java `ServiceState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServiceState {
    /// Created, not started yet (`CREATE_JUST`).
    CreateJust,
    /// Started (`RUNNING`).
    Running,
    /// Shut down; cannot be started again (`SHUTDOWN_ALREADY`).
    ShutdownAlready,
    /// A start is in progress or failed (`START_FAILED`).
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
    /// The broker's address.
    pub broker_addr: String,
    /// The address is a slave's.
    pub slave: bool,
    /// Version the broker announced in its last heartbeat response (0 if unknown).
    pub broker_version: i32,
}

/// What the instance needs from a consumer (implemented by the push, pull and lite consumers).
pub trait MQConsumerInner: Send + Sync + 'static {
    /// The consumer group.
    fn group_name(&self) -> String;
    /// The group's message model.
    fn message_model(&self) -> MessageModel;
    /// Whether the consumer pulls actively (pull, lite) or passively (push).
    fn consume_type(&self) -> ConsumeType;
    /// Where a queue the group has no offset for starts.
    fn consume_from_where(&self) -> ConsumeFromWhere;
    /// Subscriptions sent in the heartbeat (the retry topic included for clustering push).
    fn subscriptions(&self) -> Vec<SubscriptionData>;
    /// Runs one rebalance of the group's queues.
    fn do_rebalance(&self) -> BoxFuture<'static, ()>;
    /// Persists the consume offsets of the owned queues.
    fn persist_consumer_offset(&self) -> BoxFuture<'static, ()>;
    /// The topic's subscribe set changed (sorted by topic, broker name, queue id).
    fn update_topic_subscribe_info(&self, topic: &str, info: Vec<MessageQueue>);
    /// Whether the route of `topic` should be refreshed for this consumer.
    fn is_subscribe_topic_need_update(&self, topic: &str) -> bool;
    /// The consumer's running info, answered to GET_CONSUMER_RUNNING_INFO (the instance adds
    /// the name server, consume type and client version properties).
    fn running_info(&self) -> ConsumerRunningInfo;
    /// CONSUME_MESSAGE_DIRECTLY: hands `msg` (stored on `broker_name`) to the listener once and
    /// reports the outcome. `None` for a consumer without a listener (pull and lite consumers).
    fn consume_message_directly(
        &self,
        _msg: MessageExt,
        _broker_name: &str,
    ) -> BoxFuture<'static, Option<ConsumeMessageDirectlyResult>> {
        Box::pin(async { None })
    }
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
    /// The `unitMode` the heartbeat announces for the group (Java's `isUnitMode`).
    fn unit_mode(&self) -> bool {
        false
    }
}

/// What the instance needs from a producer.
pub trait MQProducerInner: Send + Sync + 'static {
    /// Topics whose routes the instance must keep fresh.
    fn publish_topic_list(&self) -> Vec<String>;
    /// The route of `topic` changed.
    fn update_topic_publish_info(&self, topic: &str, info: Arc<TopicPublishInfo>);
    /// Whether the route of `topic` should be refreshed for this producer.
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
            processor::register(&api, weak.clone());
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

    /// The client id (`ip@instanceName[@unitName]`).
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The settings the instance was created with.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The RPCs of the instance.
    pub fn api(&self) -> &MQClientApi {
        &self.api
    }

    /// The instance's lifecycle state.
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
}

#[cfg(test)]
mod test_support;

#[cfg(test)]
mod tests {
    use super::test_support::config;
    use super::*;

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
}
