//! `RouteInfoManager`: the name server's whole routing state, as RocketMQ's `RouteInfoManager`
//! keeps it.
//!
//! Five tables, as in RocketMQ, kept behind **one** `RwLock` so every command sees (and leaves)
//! them mutually consistent — a route never names a broker that the broker table has already
//! dropped:
//!
//! - `topic_queue_table`: topic → broker name → [`QueueData`];
//! - `broker_addr_table`: broker name → [`BrokerData`] (the master and slaves by broker id);
//! - `cluster_addr_table`: cluster name → broker names;
//! - `broker_live_table`: (cluster, broker address) → last registration time, expiry,
//!   DataVersion, connection, HA address;
//! - `filter_server_table`: (cluster, broker address) → filter server addresses.
//!
//! Brokers re-register every 30 s; a registration carries the broker's whole topic table and its
//! DataVersion, and queue data is rewritten only when that version changed (or on the first
//! registration), so the steady state costs one map lookup per broker. A broker leaves when it
//! unregisters, when its connection closes, or when it has not registered for its expiry time
//! ([`RouteInfoManager::scan_not_active_brokers`]). Time comes from an injected [`Clock`] so
//! expiry is testable without sleeping.
//!
//! Every table is bounded by a named constant; a registration that would exceed a bound is
//! refused as a whole, before anything is changed.
//!
//! The commands live by concept: `registration` (REGISTER_BROKER, UNREGISTER_BROKER),
//! `liveness` (expiry scan, closed connections, QUERY_DATA_VERSION) and `topics` (routes, topic
//! lists, topic and permission commands); cluster and broker lookups are here.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use comet_protocol::body::{
    BrokerData, ClusterInfo, DataVersion, QueueData, TopicConfigSerializeWrapper,
};
use comet_remoting::Channel;
use parking_lot::RwLock;
use thiserror::Error;

mod liveness;
mod registration;
mod topics;

/// Most broker names (master/slave sets) the name server tracks.
pub const MAX_BROKER_NAMES: usize = 4096;
/// Most broker processes (addresses: masters and slaves) the name server tracks.
pub const MAX_LIVE_BROKERS: usize = 2 * MAX_BROKER_NAMES;
/// Most clusters.
pub const MAX_CLUSTERS: usize = 1024;
/// Most topics with a route.
pub const MAX_TOPICS: usize = 500_000;
/// Most filter servers one broker may announce.
pub const MAX_FILTER_SERVERS_PER_BROKER: usize = 256;
/// Longest broker expiry a broker may ask for with `heartbeatTimeoutMillis` (one day).
pub const MAX_HEARTBEAT_TIMEOUT_MILLIS: i64 = 24 * 60 * 60 * 1000;
/// `TopicSysFlag` bit of a unit topic.
pub const TOPIC_SYS_FLAG_UNIT: i32 = 0x1;
/// `TopicSysFlag` bit of a topic with unit subscriptions.
pub const TOPIC_SYS_FLAG_UNIT_SUB: i32 = 0x2;

pub use comet_remoting::clock::{Clock, SystemClock};

/// Key of the live and filter-server tables: the same address may serve two clusters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BrokerAddrInfo {
    pub cluster_name: String,
    pub broker_addr: String,
}

impl BrokerAddrInfo {
    pub fn new(cluster_name: impl Into<String>, broker_addr: impl Into<String>) -> Self {
        Self {
            cluster_name: cluster_name.into(),
            broker_addr: broker_addr.into(),
        }
    }
}

/// What the name server knows about one running broker process.
#[derive(Debug, Clone)]
struct BrokerLiveInfo {
    last_update_millis: i64,
    heartbeat_timeout_millis: i64,
    data_version: DataVersion,
    /// The connection of the latest registration; `None` when registered without one (tests,
    /// embedding).
    channel: Option<Channel>,
    ha_server_addr: String,
}

impl BrokerLiveInfo {
    fn is_expired(&self, now: i64) -> bool {
        self.last_update_millis
            .saturating_add(self.heartbeat_timeout_millis)
            < now
    }
}

/// One REGISTER_BROKER, decoded.
#[derive(Debug, Clone, Default)]
pub struct BrokerRegistration {
    pub cluster_name: String,
    pub broker_addr: String,
    pub broker_name: String,
    /// 0 = master.
    pub broker_id: i64,
    pub ha_server_addr: String,
    /// From the `__ZONE_NAME` ext field.
    pub zone_name: Option<String>,
    /// The broker's own expiry; `None` takes the name server's default.
    pub heartbeat_timeout_millis: Option<i64>,
    /// `None` means a pre-5.x broker (no acting-master support).
    pub enable_acting_master: Option<bool>,
    pub topic_config_wrapper: TopicConfigSerializeWrapper,
    pub filter_server_list: Vec<String>,
    pub channel: Option<Channel>,
}

/// The answer to a registration: for a slave whose master is alive, where to replicate from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegisterBrokerResult {
    pub ha_server_addr: Option<String>,
    pub master_addr: Option<String>,
}

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RouteError {
    /// RocketMQ refuses a registration that carries exactly one topic from a broker id it does
    /// not know: such a request is a topic-change notification racing ahead of the broker's
    /// first full registration, and accepting it would publish a route with one topic only.
    #[error(
        "broker {broker_name}[{broker_id}] at {broker_addr} is not registered yet and sent a single topic"
    )]
    UnregisteredBrokerSingleTopic {
        broker_name: String,
        broker_id: i64,
        broker_addr: String,
    },
    #[error("too many broker names (limit {limit})")]
    TooManyBrokerNames { limit: usize },
    #[error("too many brokers (limit {limit})")]
    TooManyBrokers { limit: usize },
    #[error("too many clusters (limit {limit})")]
    TooManyClusters { limit: usize },
    #[error("too many topics (limit {limit})")]
    TooManyTopics { limit: usize },
    #[error("{count} filter servers announced (limit {limit})")]
    TooManyFilterServers { count: usize, limit: usize },
}

#[derive(Default)]
struct Tables {
    topic_queue_table: HashMap<String, BTreeMap<String, QueueData>>,
    broker_addr_table: BTreeMap<String, BrokerData>,
    cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
    broker_live_table: HashMap<BrokerAddrInfo, BrokerLiveInfo>,
    filter_server_table: HashMap<BrokerAddrInfo, Vec<String>>,
}

/// The routing state of one name server. Cheap to share behind an `Arc`.
pub struct RouteInfoManager {
    tables: RwLock<Tables>,
    clock: Arc<dyn Clock>,
    default_heartbeat_timeout_millis: i64,
}

impl std::fmt::Debug for RouteInfoManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = self.tables.read();
        f.debug_struct("RouteInfoManager")
            .field("topics", &t.topic_queue_table.len())
            .field("broker_names", &t.broker_addr_table.len())
            .field("live_brokers", &t.broker_live_table.len())
            .finish()
    }
}

impl RouteInfoManager {
    /// An empty manager on the wall clock; brokers without their own expiry expire after
    /// `default_heartbeat_timeout_millis`.
    pub fn new(default_heartbeat_timeout_millis: i64) -> Self {
        Self::with_clock(default_heartbeat_timeout_millis, Arc::new(SystemClock))
    }

    /// An empty manager reading time from `clock`.
    pub fn with_clock(default_heartbeat_timeout_millis: i64, clock: Arc<dyn Clock>) -> Self {
        Self {
            tables: RwLock::new(Tables::default()),
            clock,
            default_heartbeat_timeout_millis: clamp_timeout(default_heartbeat_timeout_millis),
        }
    }

    /// GET_BROKER_CLUSTER_INFO.
    pub fn cluster_info(&self) -> ClusterInfo {
        let t = self.tables.read();
        ClusterInfo {
            broker_addr_table: t
                .broker_addr_table
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            cluster_addr_table: t
                .cluster_addr_table
                .iter()
                .map(|(k, v)| (k.clone(), v.iter().cloned().collect()))
                .collect(),
        }
    }

    /// The broker set registered under `broker_name`.
    pub fn broker_data(&self, broker_name: &str) -> Option<BrokerData> {
        self.tables
            .read()
            .broker_addr_table
            .get(broker_name)
            .cloned()
    }

    /// Number of broker processes currently registered.
    pub fn live_broker_count(&self) -> usize {
        self.tables.read().broker_live_table.len()
    }

    /// Whether the broker at `broker_addr` of `cluster_name` is registered.
    pub fn is_broker_live(&self, cluster_name: &str, broker_addr: &str) -> bool {
        self.tables
            .read()
            .broker_live_table
            .contains_key(&BrokerAddrInfo::new(cluster_name, broker_addr))
    }
}

fn clamp_timeout(millis: i64) -> i64 {
    millis.clamp(1, MAX_HEARTBEAT_TIMEOUT_MILLIS)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use comet_protocol::body::{TopicConfig, perm};

    use super::*;

    use comet_remoting::ManualClock;

    const CLUSTER: &str = "DefaultCluster";
    const EXPIRY: i64 = 120_000;

    fn manager() -> (RouteInfoManager, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        (RouteInfoManager::with_clock(EXPIRY, clock.clone()), clock)
    }

    fn version(counter: i64) -> DataVersion {
        DataVersion {
            timestamp: 1_000,
            counter,
            state_version: 0,
        }
    }

    fn registration(
        name: &str,
        id: i64,
        addr: &str,
        topics: &[(&str, i32)],
        counter: i64,
    ) -> BrokerRegistration {
        let table: HashMap<String, TopicConfig> = topics
            .iter()
            .map(|(t, q)| ((*t).to_string(), TopicConfig::with_queues(*t, *q, *q, 6)))
            .collect();
        BrokerRegistration {
            cluster_name: CLUSTER.into(),
            broker_addr: addr.into(),
            broker_name: name.into(),
            broker_id: id,
            ha_server_addr: format!("{addr}-ha"),
            topic_config_wrapper: TopicConfigSerializeWrapper {
                topic_config_table: table,
                data_version: version(counter),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn queue_nums(m: &RouteInfoManager, topic: &str) -> Vec<(String, i32, i32)> {
        m.pickup_topic_route(topic)
            .map(|r| {
                r.queue_datas
                    .iter()
                    .map(|q| (q.broker_name.clone(), q.write_queue_nums, q.perm))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn register_master_publishes_routes() {
        let (m, _) = manager();
        let r = m
            .register_broker(registration(
                "broker-a",
                0,
                "10.0.0.1:10911",
                &[("T1", 4), ("T2", 8)],
                1,
            ))
            .unwrap();
        assert_eq!(r, RegisterBrokerResult::default());
        let route = m.pickup_topic_route("T1").unwrap();
        assert_eq!(route.queue_datas.len(), 1);
        assert_eq!(route.queue_datas[0].write_queue_nums, 4);
        assert_eq!(route.broker_datas[0].master_addr(), Some("10.0.0.1:10911"));
        assert_eq!(route.broker_datas[0].cluster, CLUSTER);
        assert_eq!(queue_nums(&m, "T2"), vec![("broker-a".into(), 8, 6)]);
        assert!(m.pickup_topic_route("T3").is_none());
        let topics: Vec<_> = m.all_topics().topic_list.into_iter().collect();
        assert_eq!(topics, vec!["T1", "T2"]);
        let info = m.cluster_info();
        assert_eq!(
            info.cluster_addr_table[CLUSTER],
            vec!["broker-a".to_string()]
        );
    }

    #[test]
    fn topics_are_rewritten_only_when_the_data_version_changes() {
        let (m, _) = manager();
        m.register_broker(registration(
            "broker-a",
            0,
            "a:1",
            &[("T1", 4), ("T2", 4)],
            1,
        ))
        .unwrap();
        // Same version, different content: ignored (the broker promised nothing changed).
        m.register_broker(registration(
            "broker-a",
            0,
            "a:1",
            &[("T1", 16), ("T2", 4)],
            1,
        ))
        .unwrap();
        assert_eq!(queue_nums(&m, "T1"), vec![("broker-a".into(), 4, 6)]);
        // New version: applied.
        m.register_broker(registration(
            "broker-a",
            0,
            "a:1",
            &[("T1", 16), ("T2", 4)],
            2,
        ))
        .unwrap();
        assert_eq!(queue_nums(&m, "T1"), vec![("broker-a".into(), 16, 6)]);
        // A topic unknown on this broker is added even under an unchanged version.
        m.register_broker(registration(
            "broker-a",
            0,
            "a:1",
            &[("T1", 16), ("T9", 2)],
            2,
        ))
        .unwrap();
        assert_eq!(queue_nums(&m, "T9"), vec![("broker-a".into(), 2, 6)]);
        let (changed, current) = m.query_data_version(CLUSTER, "a:1", &version(2));
        assert!(!changed);
        assert_eq!(current, Some(version(2)));
        assert!(m.query_data_version(CLUSTER, "a:1", &version(3)).0);
        assert_eq!(
            m.query_data_version(CLUSTER, "nobody:1", &version(2)),
            (true, None)
        );
    }

    #[test]
    fn slaves_do_not_write_routes_and_learn_their_master() {
        let (m, _) = manager();
        // A slave before its master (old broker: no acting master): no routes, no master.
        let r = m
            .register_broker(registration(
                "broker-a",
                1,
                "a:2",
                &[("T1", 4), ("T2", 4)],
                1,
            ))
            .unwrap();
        assert_eq!(r, RegisterBrokerResult::default());
        assert!(m.pickup_topic_route("T1").is_none());
        m.register_broker(registration(
            "broker-a",
            0,
            "a:1",
            &[("T1", 4), ("T2", 4)],
            1,
        ))
        .unwrap();
        let r = m
            .register_broker(registration(
                "broker-a",
                1,
                "a:2",
                &[("T1", 99), ("T2", 4)],
                2,
            ))
            .unwrap();
        assert_eq!(r.master_addr.as_deref(), Some("a:1"));
        assert_eq!(r.ha_server_addr.as_deref(), Some("a:1-ha"));
        assert_eq!(queue_nums(&m, "T1"), vec![("broker-a".into(), 4, 6)]);
        let bd = m.broker_data("broker-a").unwrap();
        assert_eq!(bd.broker_addrs.len(), 2);
        assert_eq!(m.live_broker_count(), 2);
    }

    #[test]
    fn acting_master_prime_slave_publishes_read_only_routes() {
        let (m, _) = manager();
        let mut reg = registration("broker-a", 1, "a:2", &[("T1", 4), ("T2", 4)], 1);
        reg.enable_acting_master = Some(true);
        m.register_broker(reg).unwrap();
        assert_eq!(
            queue_nums(&m, "T1"),
            vec![("broker-a".into(), 4, perm::PERM_READ)]
        );
        assert!(m.broker_data("broker-a").unwrap().enable_acting_master);
    }

    #[test]
    fn single_topic_from_unknown_broker_id_is_refused() {
        let (m, _) = manager();
        let err = m
            .register_broker(registration("broker-a", 0, "a:1", &[("T1", 4)], 1))
            .unwrap_err();
        assert!(matches!(
            err,
            RouteError::UnregisteredBrokerSingleTopic { broker_id: 0, .. }
        ));
        assert!(m.broker_data("broker-a").is_none());
        assert!(m.cluster_info().cluster_addr_table.is_empty());
        // Once registered, a single-topic update is fine.
        m.register_broker(registration(
            "broker-a",
            0,
            "a:1",
            &[("T1", 4), ("T2", 4)],
            1,
        ))
        .unwrap();
        m.register_broker(registration("broker-a", 0, "a:1", &[("T3", 4)], 2))
            .unwrap();
        assert_eq!(queue_nums(&m, "T3"), vec![("broker-a".into(), 4, 6)]);
    }

    #[test]
    fn unregister_removes_addresses_then_names_and_routes() {
        let (m, _) = manager();
        m.register_broker(registration(
            "broker-a",
            0,
            "a:1",
            &[("T1", 4), ("T2", 4)],
            1,
        ))
        .unwrap();
        m.register_broker(registration(
            "broker-a",
            1,
            "a:2",
            &[("T1", 4), ("T2", 4)],
            1,
        ))
        .unwrap();
        m.register_broker(registration(
            "broker-b",
            0,
            "b:1",
            &[("T1", 2), ("TB", 2)],
            1,
        ))
        .unwrap();
        assert_eq!(queue_nums(&m, "T1").len(), 2);

        assert!(m.unregister_broker(CLUSTER, "a:1", "broker-a"));
        // The slave keeps broker-a (and its queues) alive, without a master.
        let bd = m.broker_data("broker-a").unwrap();
        assert_eq!(bd.master_addr(), None);
        assert_eq!(queue_nums(&m, "T1").len(), 2);
        assert!(m.unregister_broker(CLUSTER, "a:2", "broker-a"));
        assert!(m.broker_data("broker-a").is_none());
        assert_eq!(queue_nums(&m, "T1"), vec![("broker-b".into(), 2, 6)]);
        assert!(m.pickup_topic_route("T2").is_none());
        assert!(!m.unregister_broker(CLUSTER, "a:2", "broker-a"));
        assert!(m.unregister_broker(CLUSTER, "b:1", "broker-b"));
        assert!(m.all_topics().topic_list.is_empty());
        assert!(m.cluster_info().cluster_addr_table.is_empty());
        assert_eq!(m.live_broker_count(), 0);
    }

    #[test]
    fn expiry_uses_the_clock_and_the_broker_timeout() {
        let (m, clock) = manager();
        m.register_broker(registration(
            "broker-a",
            0,
            "a:1",
            &[("T1", 4), ("T2", 4)],
            1,
        ))
        .unwrap();
        let mut short = registration("broker-b", 0, "b:1", &[("TB", 4), ("T2", 4)], 1);
        short.heartbeat_timeout_millis = Some(10_000);
        m.register_broker(short).unwrap();

        clock.advance(10_000);
        assert!(
            m.scan_not_active_brokers().is_empty(),
            "exactly at the limit is still alive"
        );
        clock.advance(1);
        assert_eq!(
            m.scan_not_active_brokers(),
            vec![BrokerAddrInfo::new(CLUSTER, "b:1")]
        );
        assert!(m.pickup_topic_route("TB").is_none());
        assert_eq!(queue_nums(&m, "T2"), vec![("broker-a".into(), 4, 6)]);

        // A re-registration (or an unchanged QUERY_DATA_VERSION) restarts the countdown.
        clock.advance(EXPIRY - 20_000);
        assert!(!m.query_data_version(CLUSTER, "a:1", &version(1)).0);
        clock.advance(EXPIRY);
        assert!(m.scan_not_active_brokers().is_empty());
        clock.advance(1);
        assert_eq!(m.scan_not_active_brokers().len(), 1);
        assert_eq!(m.live_broker_count(), 0);
        assert!(m.all_topics().topic_list.is_empty());
    }

    #[test]
    fn delete_topic_whole_or_per_cluster() {
        let (m, _) = manager();
        m.register_broker(registration(
            "broker-a",
            0,
            "a:1",
            &[("T1", 4), ("T2", 4)],
            1,
        ))
        .unwrap();
        let mut other = registration("broker-x", 0, "x:1", &[("T1", 4), ("T2", 4)], 1);
        other.cluster_name = "Other".into();
        m.register_broker(other).unwrap();
        assert_eq!(m.topics_by_cluster("Other").topic_list.len(), 2);
        assert!(m.topics_by_cluster("Nope").topic_list.is_empty());
        assert!(m.delete_topic("T1", Some("Other")));
        assert_eq!(queue_nums(&m, "T1"), vec![("broker-a".into(), 4, 6)]);
        assert!(!m.delete_topic("T1", Some("Nope")));
        assert!(m.delete_topic("T1", None));
        assert!(m.pickup_topic_route("T1").is_none());
        assert!(!m.delete_topic("T1", None));
        let sys: Vec<_> = m.system_topics().topic_list.into_iter().collect();
        assert_eq!(sys, vec!["DefaultCluster", "Other", "broker-a", "broker-x"]);
        assert_eq!(m.system_topics().broker_addr.as_deref(), Some("a:1"));
    }

    #[test]
    fn write_perm_and_unit_flags() {
        let (m, _) = manager();
        let mut reg = registration("broker-a", 0, "a:1", &[("T1", 4), ("U", 4)], 1);
        if let Some(u) = reg.topic_config_wrapper.topic_config_table.get_mut("U") {
            u.topic_sys_flag = TOPIC_SYS_FLAG_UNIT_SUB;
        }
        m.register_broker(reg).unwrap();
        assert_eq!(m.wipe_write_perm("broker-a"), 2);
        assert_eq!(
            queue_nums(&m, "T1"),
            vec![("broker-a".into(), 4, perm::PERM_READ)]
        );
        assert_eq!(m.add_write_perm("broker-a"), 2);
        assert_eq!(queue_nums(&m, "T1"), vec![("broker-a".into(), 4, 6)]);
        assert_eq!(m.wipe_write_perm("nobody"), 0);
        assert!(m.unit_topics().topic_list.is_empty());
        assert_eq!(m.has_unit_sub_topics().topic_list.len(), 1);
        assert_eq!(m.has_unit_sub_non_unit_topics().topic_list.len(), 1);
    }

    #[test]
    fn register_topic_needs_known_brokers() {
        let (m, _) = manager();
        let qd = QueueData {
            broker_name: "broker-a".into(),
            read_queue_nums: 2,
            write_queue_nums: 2,
            perm: 6,
            topic_sys_flag: 0,
        };
        assert!(!m.register_topic("R", vec![qd.clone()]));
        m.register_broker(registration(
            "broker-a",
            0,
            "a:1",
            &[("T1", 4), ("T2", 4)],
            1,
        ))
        .unwrap();
        assert!(m.register_topic("R", vec![qd.clone()]));
        assert!(!m.register_topic("R", vec![qd]));
        assert_eq!(queue_nums(&m, "R"), vec![("broker-a".into(), 2, 6)]);
    }

    #[test]
    fn address_moving_to_a_new_id_leaves_its_old_id() {
        let (m, _) = manager();
        m.register_broker(registration(
            "broker-a",
            1,
            "a:2",
            &[("T1", 4), ("T2", 4)],
            1,
        ))
        .unwrap();
        // The slave is promoted: same address, id 0.
        m.register_broker(registration(
            "broker-a",
            0,
            "a:2",
            &[("T1", 4), ("T2", 4)],
            2,
        ))
        .unwrap();
        let bd = m.broker_data("broker-a").unwrap();
        assert_eq!(bd.broker_addrs.len(), 1);
        assert_eq!(bd.master_addr(), Some("a:2"));
    }

    #[test]
    fn filter_server_bound_is_enforced() {
        let (m, _) = manager();
        let mut reg = registration("broker-a", 0, "a:1", &[("T1", 4), ("T2", 4)], 1);
        reg.filter_server_list = vec!["f:1".into(); MAX_FILTER_SERVERS_PER_BROKER + 1];
        assert!(matches!(
            m.register_broker(reg),
            Err(RouteError::TooManyFilterServers { .. })
        ));
        assert_eq!(m.live_broker_count(), 0);
        let mut reg = registration("broker-a", 0, "a:1", &[("T1", 4), ("T2", 4)], 1);
        reg.filter_server_list = vec!["f:1".into()];
        m.register_broker(reg).unwrap();
        let route = m.pickup_topic_route("T1").unwrap();
        assert_eq!(route.filter_server_table["a:1"], vec!["f:1".to_string()]);
    }
}
