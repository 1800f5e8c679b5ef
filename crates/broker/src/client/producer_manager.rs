//! `ProducerManager`: producer groups and their connections.
//!
//! Producers matter to the broker for two things only: transaction checks
//! (CHECK_TRANSACTION_STATE is sent to *some* live producer of the half message's group, or to the
//! exact client by id) and admin visibility (GET_PRODUCER_CONNECTION_LIST). Entries are refreshed
//! by heartbeats and removed by UNREGISTER_CLIENT, channel close and expiry, like consumers.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use comet_remoting::Channel;
use parking_lot::RwLock;

use super::{ClientChannelInfo, Clock, millis_of, system_clock};

/// Most producer groups one broker tracks.
pub const MAX_PRODUCER_GROUPS: usize = 100_000;
/// Most connections one producer group may have.
pub const MAX_CHANNELS_PER_PRODUCER_GROUP: usize = 10_000;

#[derive(Debug, Default)]
struct Tables {
    /// group → channel id → connection.
    groups: HashMap<String, HashMap<u64, ClientChannelInfo>>,
    /// client id → its latest channel (transaction checks address a client by id).
    clients: HashMap<String, Channel>,
}

/// The producer group table.
#[derive(Debug)]
pub struct ProducerManager {
    tables: RwLock<Tables>,
    /// `channelExpiredTimeout` in ms; changes while the broker runs.
    channel_expired_timeout_ms: AtomicU64,
    clock: Arc<dyn Clock>,
}

impl ProducerManager {
    pub fn new(channel_expired_timeout: Duration) -> Self {
        Self::with_clock(channel_expired_timeout, system_clock())
    }

    pub fn with_clock(channel_expired_timeout: Duration, clock: Arc<dyn Clock>) -> Self {
        Self {
            tables: RwLock::new(Tables::default()),
            channel_expired_timeout_ms: AtomicU64::new(millis_of(channel_expired_timeout)),
            clock,
        }
    }

    /// Changes how long a channel may stay silent; the next scan uses it.
    pub fn set_channel_expired_timeout(&self, timeout: Duration) {
        self.channel_expired_timeout_ms
            .store(millis_of(timeout), Ordering::Relaxed);
    }

    /// Registers (or refreshes) a producer of `group`. `false` when a table bound refused it.
    pub fn register_producer(&self, group: &str, mut info: ClientChannelInfo) -> bool {
        info.last_update_millis = self.clock.now_millis();
        let mut tables = self.tables.write();
        if !tables.groups.contains_key(group) && tables.groups.len() >= MAX_PRODUCER_GROUPS {
            tracing::warn!(
                group,
                limit = MAX_PRODUCER_GROUPS,
                "producer group table full"
            );
            return false;
        }
        let channels = tables.groups.entry(group.to_owned()).or_default();
        let id = info.channel.id();
        if !channels.contains_key(&id) && channels.len() >= MAX_CHANNELS_PER_PRODUCER_GROUP {
            tracing::warn!(group, "producer group has too many channels");
            return false;
        }
        let client_id = info.client_id.clone();
        let channel = info.channel.clone();
        channels.insert(id, info);
        tables.clients.insert(client_id, channel);
        true
    }

    /// Removes `channel` from `group`; `true` when it was there.
    pub fn unregister_producer(&self, group: &str, channel: &Channel) -> bool {
        let mut tables = self.tables.write();
        let Some(channels) = tables.groups.get_mut(group) else {
            return false;
        };
        let Some(removed) = channels.remove(&channel.id()) else {
            return false;
        };
        if channels.is_empty() {
            tables.groups.remove(group);
        }
        Self::forget_client(&mut tables, &removed);
        true
    }

    fn forget_client(tables: &mut Tables, removed: &ClientChannelInfo) {
        if tables
            .clients
            .get(&removed.client_id)
            .is_some_and(|c| c.id() == removed.channel.id())
        {
            tables.clients.remove(&removed.client_id);
        }
    }

    /// Removes a closed channel everywhere; returns how many groups it left.
    pub fn channel_closed(&self, channel: &Channel) -> usize {
        let mut tables = self.tables.write();
        let mut removed = Vec::new();
        tables.groups.retain(|_, channels| {
            if let Some(info) = channels.remove(&channel.id()) {
                removed.push(info);
            }
            !channels.is_empty()
        });
        for info in &removed {
            Self::forget_client(&mut tables, info);
        }
        removed.len()
    }

    /// Removes channels silent past the expiry timeout (or already closed) and returns them so
    /// the caller can close them.
    pub fn scan_expired(&self) -> Vec<ClientChannelInfo> {
        let now = self.clock.now_millis();
        let timeout = i64::try_from(self.channel_expired_timeout_ms.load(Ordering::Relaxed))
            .unwrap_or(i64::MAX);
        let mut tables = self.tables.write();
        let mut expired = Vec::new();
        tables.groups.retain(|group, channels| {
            channels.retain(|_, c| {
                let keep =
                    now.saturating_sub(c.last_update_millis) <= timeout && c.channel.is_active();
                if !keep {
                    tracing::info!(group = %group, client = %c.client_id, "producer channel expired");
                    expired.push(c.clone());
                }
                keep
            });
            !channels.is_empty()
        });
        for info in &expired {
            Self::forget_client(&mut tables, info);
        }
        expired
    }

    /// Connections of `group`.
    pub fn group_channels(&self, group: &str) -> Vec<ClientChannelInfo> {
        self.tables
            .read()
            .groups
            .get(group)
            .map(|c| c.values().cloned().collect())
            .unwrap_or_default()
    }

    /// A live connection of `group`, for a transaction check.
    pub fn available_channel(&self, group: &str) -> Option<Channel> {
        self.tables
            .read()
            .groups
            .get(group)?
            .values()
            .map(|c| &c.channel)
            .find(|c| c.is_active())
            .cloned()
    }

    /// The latest connection of `client_id`.
    pub fn find_channel(&self, client_id: &str) -> Option<Channel> {
        self.tables.read().clients.get(client_id).cloned()
    }

    /// Every producer group name.
    pub fn groups(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tables.read().groups.keys().cloned().collect();
        names.sort();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ManualClock;
    use crate::client::housekeeping::test_channels;
    use comet_protocol::LanguageCode;

    #[tokio::test]
    async fn register_lookup_close_and_expire() {
        let (_guard, chans) = test_channels(2).await;
        let clock = Arc::new(ManualClock::new(0));
        let m = ProducerManager::with_clock(Duration::from_secs(120), clock.clone());
        let info = |i: usize, id: &str| {
            ClientChannelInfo::new(chans[i].clone(), id, LanguageCode::Go, 317)
        };
        assert!(m.register_producer("pg", info(0, "p1")));
        assert!(m.register_producer("pg", info(1, "p2")));
        assert_eq!(m.group_channels("pg").len(), 2);
        assert_eq!(m.find_channel("p2").map(|c| c.id()), Some(chans[1].id()));
        assert!(m.available_channel("pg").is_some());

        assert!(m.unregister_producer("pg", &chans[0]));
        assert!(!m.unregister_producer("pg", &chans[0]));
        assert!(m.find_channel("p1").is_none());

        clock.advance(120_001);
        let expired = m.scan_expired();
        assert_eq!(expired.len(), 1);
        assert!(m.groups().is_empty());
        assert!(m.find_channel("p2").is_none());

        assert!(m.register_producer("pg", info(1, "p2")));
        assert_eq!(m.channel_closed(&chans[1]), 1);
        assert!(m.available_channel("pg").is_none());
    }
}
