//! REGISTER_BROKER and UNREGISTER_BROKER: a broker joining (or refreshing) its set, with its
//! topics, and leaving it.

use std::collections::BTreeSet;

use comet_protocol::body::route::MASTER_ID;
use comet_protocol::body::{BrokerData, QueueData, TopicConfig, perm};
use comet_remoting::Channel;

use super::{
    BrokerAddrInfo, BrokerLiveInfo, BrokerRegistration, MAX_BROKER_NAMES, MAX_CLUSTERS,
    MAX_FILTER_SERVERS_PER_BROKER, MAX_LIVE_BROKERS, MAX_TOPICS, RegisterBrokerResult, RouteError,
    RouteInfoManager, Tables, clamp_timeout,
};

impl RouteInfoManager {
    /// Registers (or refreshes) a broker and, for a master — or, in acting-master mode, the
    /// lowest-id slave — its topics.
    pub fn register_broker(
        &self,
        reg: BrokerRegistration,
    ) -> Result<RegisterBrokerResult, RouteError> {
        let now = self.clock.now_millis();
        let mut guard = self.tables.write();
        let t = &mut *guard;
        let key = BrokerAddrInfo::new(&reg.cluster_name, &reg.broker_addr);
        if superseded(t, &reg) {
            t.broker_live_table.remove(&key);
            return Ok(RegisterBrokerResult::default());
        }
        let existing = t.broker_addr_table.get(&reg.broker_name);
        let id_known = existing.is_some_and(|bd| bd.broker_addrs.contains_key(&reg.broker_id));
        check_bounds(t, &reg, &key, id_known)?;
        let role = Role::of(&reg, existing, id_known);
        let updates = topic_updates(t, &reg, &key, role)?;

        // Every check passed: apply.
        let master_addr = record_broker_addr(t, &reg);
        apply_topic_updates(t, &reg.broker_name, updates);
        let timeout = reg
            .heartbeat_timeout_millis
            .map_or(self.default_heartbeat_timeout_millis, clamp_timeout);
        let live = BrokerLiveInfo {
            last_update_millis: now,
            heartbeat_timeout_millis: timeout,
            data_version: reg.topic_config_wrapper.data_version.clone(),
            channel: reg.channel,
            ha_server_addr: reg.ha_server_addr,
        };
        record_live(t, &key, live, &reg.broker_name, reg.broker_id);
        record_filter_servers(t, &key, reg.filter_server_list);

        if role.is_master {
            return Ok(RegisterBrokerResult::default());
        }
        Ok(replicate_from(t, &reg.cluster_name, master_addr))
    }

    /// Removes the broker at `broker_addr` of `cluster_name` (named `broker_name`). Returns
    /// whether it was registered.
    pub fn unregister_broker(
        &self,
        cluster_name: &str,
        broker_addr: &str,
        broker_name: &str,
    ) -> bool {
        let mut t = self.tables.write();
        let removed = unregister_locked(&mut t, cluster_name, broker_addr, broker_name);
        removed.is_some()
    }
}

/// A broker id whose address changed: the address registered with the newer state version wins.
/// True (and logged) when that is the old address, so this registration is ignored.
fn superseded(t: &Tables, reg: &BrokerRegistration) -> bool {
    let existing = t.broker_addr_table.get(&reg.broker_name);
    if let Some(old_addr) = existing.and_then(|bd| bd.broker_addrs.get(&reg.broker_id))
        && *old_addr != reg.broker_addr
        && let Some(old_live) = t
            .broker_live_table
            .get(&BrokerAddrInfo::new(&reg.cluster_name, old_addr))
        && old_live.data_version.state_version > reg.topic_config_wrapper.data_version.state_version
    {
        tracing::warn!(
            cluster = %reg.cluster_name, broker = %reg.broker_name, id = reg.broker_id,
            old_addr = %old_addr, new_addr = %reg.broker_addr,
            "registration conflicts with a broker of a newer state version; ignored"
        );
        return true;
    }
    false
}

/// Refuses a registration that would break a table's bound (topics aside, see
/// [`topic_updates`]) or that is a single-topic notification from a broker id not yet known.
fn check_bounds(
    t: &Tables,
    reg: &BrokerRegistration,
    key: &BrokerAddrInfo,
    id_known: bool,
) -> Result<(), RouteError> {
    if !id_known && reg.topic_config_wrapper.topic_config_table.len() == 1 {
        return Err(RouteError::UnregisteredBrokerSingleTopic {
            broker_name: reg.broker_name.clone(),
            broker_id: reg.broker_id,
            broker_addr: reg.broker_addr.clone(),
        });
    }
    if !t.broker_addr_table.contains_key(&reg.broker_name)
        && t.broker_addr_table.len() >= MAX_BROKER_NAMES
    {
        return Err(RouteError::TooManyBrokerNames {
            limit: MAX_BROKER_NAMES,
        });
    }
    if !t.cluster_addr_table.contains_key(&reg.cluster_name)
        && t.cluster_addr_table.len() >= MAX_CLUSTERS
    {
        return Err(RouteError::TooManyClusters {
            limit: MAX_CLUSTERS,
        });
    }
    if !t.broker_live_table.contains_key(key) && t.broker_live_table.len() >= MAX_LIVE_BROKERS {
        return Err(RouteError::TooManyBrokers {
            limit: MAX_LIVE_BROKERS,
        });
    }
    if reg.filter_server_list.len() > MAX_FILTER_SERVERS_PER_BROKER {
        return Err(RouteError::TooManyFilterServers {
            count: reg.filter_server_list.len(),
            limit: MAX_FILTER_SERVERS_PER_BROKER,
        });
    }
    Ok(())
}

/// The part a registering broker plays in its set.
#[derive(Clone, Copy)]
struct Role {
    /// Broker id 0.
    is_master: bool,
    /// The lowest id of the set once this registration is applied, on a broker that knows
    /// acting masters (5.x): it publishes its topics, read-only.
    is_prime_slave: bool,
    /// The broker id was not registered before: every topic is written.
    register_first: bool,
}

impl Role {
    fn of(reg: &BrokerRegistration, existing: Option<&BrokerData>, id_known: bool) -> Role {
        let old_version_broker = reg.enable_acting_master.is_none();
        let is_master = reg.broker_id == MASTER_ID;
        // The lowest id once this registration is applied (an address moving to a new id
        // leaves its old id).
        let min_id_after = existing
            .into_iter()
            .flat_map(|bd| bd.broker_addrs.iter())
            .filter(|(id, addr)| **addr != reg.broker_addr || **id == reg.broker_id)
            .map(|(id, _)| *id)
            .chain(std::iter::once(reg.broker_id))
            .min()
            .unwrap_or(reg.broker_id);
        Role {
            is_master,
            is_prime_slave: !old_version_broker && !is_master && reg.broker_id == min_id_after,
            register_first: !id_known,
        }
    }
}

/// Topics whose queue data this registration writes: all of a master's or prime slave's topics
/// on a first registration or a changed DataVersion, otherwise only those not yet routed to
/// this broker. Refused when the new topics would pass [`MAX_TOPICS`].
fn topic_updates(
    t: &Tables,
    reg: &BrokerRegistration,
    key: &BrokerAddrInfo,
    role: Role,
) -> Result<Vec<(String, QueueData)>, RouteError> {
    let wrapper = &reg.topic_config_wrapper;
    let version_changed = t
        .broker_live_table
        .get(key)
        .is_none_or(|live| live.data_version != wrapper.data_version);
    let mut updates: Vec<(String, QueueData)> = Vec::new();
    if role.is_master || role.is_prime_slave {
        for (name, config) in &wrapper.topic_config_table {
            let topic = topic_name(name, config);
            let known_here = t
                .topic_queue_table
                .get(topic)
                .is_some_and(|qds| qds.contains_key(&reg.broker_name));
            if role.register_first || version_changed || !known_here {
                let mut qd = queue_data(&reg.broker_name, config);
                if role.is_prime_slave {
                    qd.perm &= !perm::PERM_WRITE;
                }
                updates.push((topic.to_string(), qd));
            }
        }
    }
    let new_topics = updates
        .iter()
        .map(|(topic, _)| topic.as_str())
        .filter(|topic| !t.topic_queue_table.contains_key(*topic))
        .collect::<BTreeSet<_>>()
        .len();
    if t.topic_queue_table.len().saturating_add(new_topics) > MAX_TOPICS {
        return Err(RouteError::TooManyTopics { limit: MAX_TOPICS });
    }
    Ok(updates)
}

/// Enters the broker in its cluster and its set (an address moving to a new id leaves its old
/// id). Returns the set's master address.
fn record_broker_addr(t: &mut Tables, reg: &BrokerRegistration) -> Option<String> {
    t.cluster_addr_table
        .entry(reg.cluster_name.clone())
        .or_default()
        .insert(reg.broker_name.clone());
    let broker_data = t
        .broker_addr_table
        .entry(reg.broker_name.clone())
        .or_insert_with(|| BrokerData {
            cluster: reg.cluster_name.clone(),
            broker_name: reg.broker_name.clone(),
            ..BrokerData::default()
        });
    broker_data.enable_acting_master = reg.enable_acting_master.unwrap_or(false);
    broker_data.zone_name = reg.zone_name.clone();
    broker_data
        .broker_addrs
        .retain(|id, addr| *addr != reg.broker_addr || *id == reg.broker_id);
    broker_data
        .broker_addrs
        .insert(reg.broker_id, reg.broker_addr.clone());
    broker_data.master_addr().map(str::to_string)
}

/// Writes the queue data of [`topic_updates`], leaving equal entries untouched.
fn apply_topic_updates(t: &mut Tables, broker_name: &str, updates: Vec<(String, QueueData)>) {
    for (topic, qd) in updates {
        let queues = t.topic_queue_table.entry(topic).or_default();
        if queues.get(broker_name) != Some(&qd) {
            queues.insert(broker_name.to_string(), qd);
        }
    }
}

/// Records the registration's time, expiry, DataVersion, connection and HA address.
fn record_live(
    t: &mut Tables,
    key: &BrokerAddrInfo,
    live: BrokerLiveInfo,
    broker_name: &str,
    broker_id: i64,
) {
    let previous = t.broker_live_table.insert(key.clone(), live);
    if previous.is_none() {
        tracing::info!(cluster = %key.cluster_name, broker = %broker_name, id = broker_id, addr = %key.broker_addr, "new broker registered");
    }
}

/// Records the filter servers the broker announced (none: forgets earlier ones).
fn record_filter_servers(t: &mut Tables, key: &BrokerAddrInfo, filter_servers: Vec<String>) {
    if filter_servers.is_empty() {
        t.filter_server_table.remove(key);
    } else {
        t.filter_server_table.insert(key.clone(), filter_servers);
    }
}

/// The answer to a slave: its master's address and HA address, when the master is alive.
fn replicate_from(
    t: &Tables,
    cluster_name: &str,
    master_addr: Option<String>,
) -> RegisterBrokerResult {
    let mut result = RegisterBrokerResult::default();
    if let Some(master_addr) = master_addr
        && let Some(master) = t
            .broker_live_table
            .get(&BrokerAddrInfo::new(cluster_name, &master_addr))
    {
        result.ha_server_addr = Some(master.ha_server_addr.clone());
        result.master_addr = Some(master_addr);
    }
    result
}

/// The topic's name: the config's own, or the map key when a peer left it out.
fn topic_name<'a>(key: &'a str, config: &'a TopicConfig) -> &'a str {
    if config.topic_name.is_empty() {
        key
    } else {
        &config.topic_name
    }
}

fn queue_data(broker_name: &str, config: &TopicConfig) -> QueueData {
    QueueData {
        broker_name: broker_name.to_string(),
        read_queue_nums: config.read_queue_nums,
        write_queue_nums: config.write_queue_nums,
        perm: config.perm,
        topic_sys_flag: config.topic_sys_flag,
    }
}

/// Removes one broker process; drops its broker name (and the name's queues) when it was the
/// last of its set. `None` when nothing was registered; otherwise the live entry's connection.
pub(super) fn unregister_locked(
    t: &mut Tables,
    cluster_name: &str,
    broker_addr: &str,
    broker_name: &str,
) -> Option<Option<Channel>> {
    let key = BrokerAddrInfo::new(cluster_name, broker_addr);
    let live = t.broker_live_table.remove(&key);
    t.filter_server_table.remove(&key);
    let mut found = live.is_some();
    let mut name_removed = false;
    if let Some(bd) = t.broker_addr_table.get_mut(broker_name) {
        let before = bd.broker_addrs.len();
        bd.broker_addrs.retain(|_, addr| addr != broker_addr);
        found |= bd.broker_addrs.len() != before;
        if bd.broker_addrs.is_empty() {
            t.broker_addr_table.remove(broker_name);
            name_removed = true;
        }
    }
    if name_removed {
        if let Some(names) = t.cluster_addr_table.get_mut(cluster_name) {
            names.remove(broker_name);
            if names.is_empty() {
                t.cluster_addr_table.remove(cluster_name);
            }
        }
        t.topic_queue_table.retain(|_, queues| {
            queues.remove(broker_name);
            !queues.is_empty()
        });
        tracing::info!(
            cluster = cluster_name,
            broker = broker_name,
            "broker name removed with its routes"
        );
    } else if let Some(bd) = t.broker_addr_table.get(broker_name)
        && bd.enable_acting_master
        && bd
            .broker_addrs
            .keys()
            .next()
            .is_none_or(|min| *min > MASTER_ID)
    {
        // The master left a set in acting-master mode: nobody may write to it any more.
        for queues in t.topic_queue_table.values_mut() {
            if let Some(qd) = queues.get_mut(broker_name) {
                qd.perm &= !perm::PERM_WRITE;
            }
        }
    }
    found.then(|| live.and_then(|l| l.channel))
}
