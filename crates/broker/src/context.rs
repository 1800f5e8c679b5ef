//! `BrokerContext`: the shared state every request processor and background service works on.
//!
//! The broker is one store plus a handful of tables and services that processors of both the
//! produce and the consume side need together (a pull reads the store, the subscription group,
//! the consumer offsets and the hold service). Rather than threading each piece through every
//! constructor, the controller builds them once and hands out one `Arc<BrokerContext>`; services
//! that must not keep the broker alive (background tasks) hold a `Weak` to it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use comet_remoting::CancellationToken;
use comet_store::MessageStore;

use crate::client::{ConsumerManager, ProducerManager};
use crate::config::BrokerConfig;
use crate::ha::Replication;
use crate::long_polling::PullRequestHoldService;
use crate::offset_manager::ConsumerOffsetManager;
use crate::outer_api::BrokerOuterApi;
use crate::rebalance_lock::RebalanceLockManager;
use crate::schedule::ScheduleMessageService;
use crate::subscription_group::SubscriptionGroupManager;
use crate::timer::TimerMessageService;
use crate::topic_config::TopicConfigManager;

/// Everything a processor may need (see the module docs).
pub struct BrokerContext {
    pub config: Arc<BrokerConfig>,
    pub store: Arc<MessageStore>,
    pub topic_config: Arc<TopicConfigManager>,
    pub subscription_groups: Arc<SubscriptionGroupManager>,
    pub consumer_offsets: Arc<ConsumerOffsetManager>,
    pub consumers: Arc<ConsumerManager>,
    pub producers: Arc<ProducerManager>,
    pub rebalance_locks: Arc<RebalanceLockManager>,
    pub pull_hold: Arc<PullRequestHoldService>,
    pub schedule: Arc<ScheduleMessageService>,
    /// POP consumption: queue claims, held pops, revive counters.
    pub pop: Arc<crate::pop::PopService>,
    /// Timer messages (`rmq_sys_wheel_timer` and its wheel).
    pub timer: Arc<TimerMessageService>,
    pub outer_api: Arc<BrokerOuterApi>,
    /// The permission bits in force (`brokerPermission`): starts as the configured value and
    /// changes at runtime through UPDATE_BROKER_CONFIG. Read it with
    /// [`BrokerContext::broker_permission`].
    pub broker_permission: AtomicI32,
    /// The HA listener, the slave client of a slave, and what a `SYNC_MASTER`'s answers wait
    /// for.
    pub replication: Arc<Replication>,
    /// `brokerIP1:listenPort`: the store host of every message (and so of every offset msgId).
    pub store_host: SocketAddr,
    /// Cancelled when the broker shuts down; background tasks stop on it.
    pub shutdown: CancellationToken,
    /// Message traffic, for the metrics endpoint and the admin statistics.
    pub traffic: Arc<crate::metrics::traffic::TrafficMetrics>,
    /// How long topic and group creations took (metrics endpoint).
    pub create_times: crate::metrics::create_times::CreateTimes,
    /// The store's counters sampled once a second (runtime info rates and daily totals).
    pub runtime_sampler: crate::runtime_info::RuntimeSampler,
    /// The traffic sampled over the last minute, hour and day (VIEW_BROKER_STATS_DATA).
    pub stats_windows: crate::metrics::windows::StatsWindows,
    /// Request latencies for the metrics endpoint (records nothing when it is off).
    pub rpc: Arc<crate::metrics::rpc::RpcLatency>,
}

impl std::fmt::Debug for BrokerContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerContext")
            .field("broker_name", &self.config.broker_name)
            .field("store_host", &self.store_host)
            .finish()
    }
}

impl BrokerContext {
    /// `brokerIP1:listenPort` as text, the address routes announce.
    pub fn broker_addr(&self) -> String {
        self.store_host.to_string()
    }

    /// The permission bits in force (READ 4, WRITE 2, INHERIT 1): checked by every send, pull
    /// and send-back, and ANDed into every topic's at registration.
    pub fn broker_permission(&self) -> i32 {
        self.broker_permission.load(Ordering::Relaxed)
    }

    /// Changes the permission bits in force; the caller re-registers with the name servers.
    pub fn set_broker_permission(&self, value: i32) {
        self.broker_permission.store(value, Ordering::Relaxed);
    }

    /// Whether the broker is shutting down.
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.is_cancelled()
    }
}
