//! `BrokerContext`: the shared state every request processor and background service works on.
//!
//! The broker is one store plus a handful of tables and services that processors of both the
//! produce and the consume side need together (a pull reads the store, the subscription group,
//! the consumer offsets and the hold service). Rather than threading each piece through every
//! constructor, the controller builds them once and hands out one `Arc<BrokerContext>`; services
//! that must not keep the broker alive (background tasks) hold a `Weak` to it.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use comet_remoting::CancellationToken;
use comet_store::MessageStore;

use crate::client::{ConsumerManager, ProducerManager};
use crate::config::{BrokerConfig, RuntimeConfig};
use crate::ha::Replication;
use crate::long_polling::PullRequestHoldService;
use crate::offset_manager::ConsumerOffsetManager;
use crate::outer_api::{BrokerIdentity, BrokerOuterApi};
use crate::rebalance_lock::RebalanceLockManager;
use crate::schedule::ScheduleMessageService;
use crate::subscription_group::SubscriptionGroupManager;
use crate::timer::TimerMessageService;
use crate::topic_config::TopicConfigManager;

/// Everything a processor may need (see the module docs).
pub struct BrokerContext {
    /// The configuration the broker started with: for the keys read only at start. The keys
    /// that change while the broker runs are read from [`BrokerContext::live_config`].
    pub config: Arc<BrokerConfig>,
    /// The configuration in force, changed by UPDATE_BROKER_CONFIG (shared with the services
    /// that read it on each use).
    pub runtime: Arc<RuntimeConfig>,
    pub store: Arc<MessageStore>,
    pub topic_config: Arc<TopicConfigManager>,
    pub subscription_groups: Arc<SubscriptionGroupManager>,
    pub consumer_offsets: Arc<ConsumerOffsetManager>,
    pub consumers: Arc<ConsumerManager>,
    pub producers: Arc<ProducerManager>,
    /// The clients without a remoting connection of their own (gRPC clients), by channel.
    pub local_clients: crate::client::LocalClients,
    pub rebalance_locks: Arc<RebalanceLockManager>,
    pub pull_hold: Arc<PullRequestHoldService>,
    pub schedule: Arc<ScheduleMessageService>,
    /// POP consumption: queue claims, held pops, revive counters.
    pub pop: Arc<crate::pop::PopService>,
    /// Timer messages (`rmq_sys_wheel_timer` and its wheel).
    pub timer: Arc<TimerMessageService>,
    pub outer_api: Arc<BrokerOuterApi>,
    /// The HA listener, the slave client of a slave, and what a `SYNC_MASTER`'s answers wait
    /// for.
    pub replication: Arc<Replication>,
    /// `brokerIP1:listenPort` as the broker started: the store host of every message (and so of
    /// every offset msgId), as in Apache, whose `storeHost` is fixed at start. The address
    /// registered with the name servers follows `brokerIP1` while running
    /// ([`BrokerContext::broker_addr`]).
    pub store_host: SocketAddr,
    /// The idle timeout the listeners give the connections they accept
    /// (`serverChannelMaxIdleTimeSeconds`, changed while running for the connections accepted
    /// from then on).
    pub listener_idle_timeout: comet_remoting::IdleTimeout,
    /// Cancelled when the broker shuts down; background tasks stop on it.
    pub shutdown: CancellationToken,
    /// Message traffic, for the metrics endpoint and the admin statistics.
    pub traffic: Arc<crate::metrics::traffic::TrafficMetrics>,
    /// How long topic and group creations took (metrics endpoint).
    pub create_times: crate::metrics::create_times::CreateTimes,
    /// The store's counters sampled once a second (runtime info rates and daily totals).
    pub runtime_sampler: crate::runtime_info::sampler::RuntimeSampler,
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
    /// `brokerIP1:listenPort` as text, the address routes announce: `brokerIP1` in force (it
    /// may have changed since the start), else the address the broker started with.
    pub fn broker_addr(&self) -> String {
        let ip = self.advertised_ip(&self.live_config());
        SocketAddr::new(ip, self.store_host.port()).to_string()
    }

    /// How the broker names itself to the name servers now: its cluster, name and id as it
    /// started, and the addresses in force (`brokerIP1`, `brokerIP2`), which Apache reads at each
    /// registration.
    pub fn identity(&self) -> BrokerIdentity {
        let live = self.live_config();
        let ip = self.advertised_ip(&live);
        let ha_port = self.replication.master.local_addr().map_or(0, |a| a.port());
        BrokerIdentity {
            cluster_name: self.config.broker_cluster_name.clone(),
            broker_name: self.config.broker_name.clone(),
            broker_addr: SocketAddr::new(ip, self.store_host.port()).to_string(),
            ha_server_addr: SocketAddr::new(live.broker_ip2.unwrap_or(ip), ha_port).to_string(),
            broker_id: self.config.effective_broker_id(),
        }
    }

    /// The IP clients reach the broker at under `live`: its `brokerIP1`; without one, the IP
    /// the broker started with, unless that was an explicit `brokerIP1` since cleared (then the
    /// bind IP or the host's, as at a start without it).
    fn advertised_ip(&self, live: &BrokerConfig) -> IpAddr {
        match live.broker_ip1 {
            Some(ip) => ip,
            None if self.config.broker_ip1.is_none() => self.store_host.ip(),
            None => live.resolve_broker_ip(),
        }
    }

    /// The configuration in force: the one to read a key marked live in the configuration
    /// table from, on each use (it may have changed since the broker started).
    pub fn live_config(&self) -> arc_swap::Guard<Arc<BrokerConfig>> {
        self.runtime.read()
    }

    /// The permission bits in force (READ 4, WRITE 2, INHERIT 1): checked by every send, pull
    /// and send-back, and ANDed into every topic's at registration.
    pub fn broker_permission(&self) -> i32 {
        self.runtime.current().broker_permission
    }

    /// Whether the broker is shutting down.
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.is_cancelled()
    }
}
