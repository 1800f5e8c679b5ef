//! Liveness: brokers that went silent past their expiry, brokers whose connection closed, and
//! QUERY_DATA_VERSION, which counts as a heartbeat.

use comet_protocol::body::DataVersion;
use comet_remoting::Channel;

use super::registration::unregister_locked;
use super::{BrokerAddrInfo, RouteInfoManager, Tables};

impl RouteInfoManager {
    /// Removes every broker not heard from within its expiry and closes its connection.
    /// Returns the removed brokers.
    pub fn scan_not_active_brokers(&self) -> Vec<BrokerAddrInfo> {
        let now = self.clock.now_millis();
        let mut removed = Vec::new();
        let mut to_close = Vec::new();
        {
            let mut t = self.tables.write();
            let expired: Vec<BrokerAddrInfo> = t
                .broker_live_table
                .iter()
                .filter(|(_, live)| live.is_expired(now))
                .map(|(key, _)| key.clone())
                .collect();
            for key in expired {
                tracing::warn!(cluster = %key.cluster_name, addr = %key.broker_addr, "broker expired");
                if let Some(channel) = remove_by_addr_locked(&mut t, &key) {
                    to_close.push(channel);
                }
                removed.push(key);
            }
        }
        for channel in to_close {
            channel.close();
        }
        removed
    }

    /// A connection closed: removes the broker that registered through it, if any.
    pub fn on_channel_destroy(&self, channel_id: u64) -> Option<BrokerAddrInfo> {
        let registered_through = |t: &Tables| {
            t.broker_live_table
                .iter()
                .find(|(_, live)| live.channel.as_ref().is_some_and(|c| c.id() == channel_id))
                .map(|(key, _)| key.clone())
        };
        // Most closing connections are clients', not brokers': look under the read lock first.
        registered_through(&self.tables.read())?;
        let mut t = self.tables.write();
        let key = registered_through(&t)?;
        tracing::info!(cluster = %key.cluster_name, addr = %key.broker_addr, "broker connection closed; removing the broker");
        remove_by_addr_locked(&mut t, &key);
        Some(key)
    }

    /// QUERY_DATA_VERSION: whether `version` differs from the one last registered by the broker,
    /// and the registered one. An unchanged version counts as a heartbeat.
    pub fn query_data_version(
        &self,
        cluster_name: &str,
        broker_addr: &str,
        version: &DataVersion,
    ) -> (bool, Option<DataVersion>) {
        let now = self.clock.now_millis();
        let mut t = self.tables.write();
        let key = BrokerAddrInfo::new(cluster_name, broker_addr);
        match t.broker_live_table.get_mut(&key) {
            Some(live) => {
                let changed = live.data_version != *version;
                if !changed {
                    live.last_update_millis = now;
                }
                (changed, Some(live.data_version.clone()))
            }
            None => (true, None),
        }
    }
}

/// Removes the broker at `key`, finding its name in the broker table. Returns its connection.
fn remove_by_addr_locked(t: &mut Tables, key: &BrokerAddrInfo) -> Option<Channel> {
    let broker_name = t
        .broker_addr_table
        .values()
        .find(|bd| {
            bd.cluster == key.cluster_name
                && bd.broker_addrs.values().any(|a| *a == key.broker_addr)
        })
        .map(|bd| bd.broker_name.clone());
    match broker_name {
        Some(name) => unregister_locked(t, &key.cluster_name, &key.broker_addr, &name).flatten(),
        None => {
            t.filter_server_table.remove(key);
            t.broker_live_table
                .remove(key)
                .and_then(|live| live.channel)
        }
    }
}
