//! `ConsumerManager`: consumer groups, their live connections and their subscriptions.
//!
//! Every HEART_BEAT re-registers each consumer group the client runs: the channel is refreshed (or
//! added — a membership change), and the group's subscription table is replaced by the one in the
//! heartbeat when it differs (a subscription change). Both kinds of change are reported back to
//! the caller in a [`RegisterOutcome`] so that it can notify the group (the notify switch lives in
//! the group's config, which this table does not own).
//!
//! A group exists here only while it has at least one channel: the last channel leaving removes
//! the group, so GET_CONSUMER_LIST_BY_GROUP and subscription lookups see exactly the live members.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use comet_protocol::body::{ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData};
use comet_remoting::Channel;
use parking_lot::RwLock;

use super::{ClientChannelInfo, Clock, millis_of, system_clock};

/// Most consumer groups one broker tracks; heartbeats for further groups are refused, so a
/// misbehaving client cannot grow the table without bound.
pub const MAX_CONSUMER_GROUPS: usize = 100_000;
/// Most connections one consumer group may have.
pub const MAX_CHANNELS_PER_GROUP: usize = 10_000;
/// Most topics one consumer group may subscribe to.
pub const MAX_SUBSCRIPTIONS_PER_GROUP: usize = 10_000;

/// A consumer group as the broker sees it.
#[derive(Debug, Clone)]
pub struct ConsumerGroupInfo {
    pub group_name: String,
    pub consume_type: ConsumeType,
    pub message_model: MessageModel,
    pub consume_from_where: ConsumeFromWhere,
    /// Live connections, keyed by channel id.
    channels: HashMap<u64, ClientChannelInfo>,
    /// Subscriptions by topic.
    subscriptions: HashMap<String, SubscriptionData>,
    /// Wall-clock ms of the last subscription change.
    pub last_update_millis: i64,
}

impl ConsumerGroupInfo {
    fn new(
        group_name: &str,
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
    ) -> Self {
        Self {
            group_name: group_name.to_owned(),
            consume_type,
            message_model,
            consume_from_where,
            channels: HashMap::new(),
            subscriptions: HashMap::new(),
            last_update_millis: 0,
        }
    }

    /// Every connection of the group.
    pub fn channels(&self) -> impl Iterator<Item = &ClientChannelInfo> {
        self.channels.values()
    }

    /// The raw channels, e.g. to notify them.
    pub fn all_channels(&self) -> Vec<Channel> {
        self.channels.values().map(|c| c.channel.clone()).collect()
    }

    /// Client ids of the group's connections (one per connection; a client normally has one).
    pub fn client_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .channels
            .values()
            .map(|c| c.client_id.clone())
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// The subscription of `topic`.
    pub fn subscription(&self, topic: &str) -> Option<&SubscriptionData> {
        self.subscriptions.get(topic)
    }

    /// Every subscription, by topic.
    pub fn subscriptions(&self) -> &HashMap<String, SubscriptionData> {
        &self.subscriptions
    }

    /// Adds or refreshes a channel; `true` when the channel is new to the group.
    fn update_channel(&mut self, mut info: ClientChannelInfo, now: i64) -> bool {
        info.last_update_millis = now;
        let id = info.channel.id();
        match self.channels.get_mut(&id) {
            Some(existing) => {
                if existing.client_id != info.client_id {
                    tracing::warn!(group = %self.group_name, old = %existing.client_id,
                        new = %info.client_id, "client id changed on one channel");
                }
                *existing = info;
                false
            }
            None => {
                self.channels.insert(id, info);
                true
            }
        }
    }

    /// Replaces the subscription table with `subs`; `true` when any topic was added, removed, or
    /// had its expression changed by a newer version.
    fn update_subscriptions(&mut self, subs: &[SubscriptionData], now: i64) -> bool {
        let mut changed = false;
        for sub in subs {
            match self.subscriptions.get(&sub.topic) {
                None => {
                    self.subscriptions.insert(sub.topic.clone(), sub.clone());
                    changed = true;
                }
                Some(old) if sub.sub_version > old.sub_version => {
                    if old.sub_string != sub.sub_string
                        || old.expression_type != sub.expression_type
                        || old.code_set != sub.code_set
                    {
                        changed = true;
                    }
                    self.subscriptions.insert(sub.topic.clone(), sub.clone());
                }
                Some(_) => {}
            }
        }
        let before = self.subscriptions.len();
        self.subscriptions
            .retain(|topic, _| subs.iter().any(|s| &s.topic == topic));
        if self.subscriptions.len() != before {
            changed = true;
        }
        if changed {
            self.last_update_millis = now;
        }
        changed
    }
}

/// What a registration changed.
#[derive(Debug, Clone, Default)]
pub struct RegisterOutcome {
    /// A new channel joined the group.
    pub membership_changed: bool,
    /// The group's subscriptions changed.
    pub subscription_changed: bool,
    /// Every channel of the group after the registration (the ones to notify).
    pub channels: Vec<Channel>,
    /// The registration was refused because a table bound was reached.
    pub refused: bool,
}

impl RegisterOutcome {
    pub fn changed(&self) -> bool {
        self.membership_changed || self.subscription_changed
    }
}

/// A channel removed from a group, and who is left.
#[derive(Debug, Clone)]
pub struct GroupChange {
    pub group: String,
    pub removed: ClientChannelInfo,
    /// Channels still in the group (empty when the group is gone).
    pub remaining: Vec<Channel>,
}

/// The consumer group table.
#[derive(Debug)]
pub struct ConsumerManager {
    groups: RwLock<HashMap<String, ConsumerGroupInfo>>,
    /// `channelExpiredTimeout` in ms; changes while the broker runs.
    channel_expired_timeout_ms: AtomicU64,
    clock: Arc<dyn Clock>,
}

impl ConsumerManager {
    /// A manager that drops channels silent for longer than `channel_expired_timeout`.
    pub fn new(channel_expired_timeout: Duration) -> Self {
        Self::with_clock(channel_expired_timeout, system_clock())
    }

    /// Same, reading time from `clock` (tests).
    pub fn with_clock(channel_expired_timeout: Duration, clock: Arc<dyn Clock>) -> Self {
        Self {
            groups: RwLock::new(HashMap::new()),
            channel_expired_timeout_ms: AtomicU64::new(millis_of(channel_expired_timeout)),
            clock,
        }
    }

    pub fn channel_expired_timeout(&self) -> Duration {
        Duration::from_millis(self.channel_expired_timeout_ms.load(Ordering::Relaxed))
    }

    /// Changes how long a channel may stay silent; the next scan uses it.
    pub fn set_channel_expired_timeout(&self, timeout: Duration) {
        self.channel_expired_timeout_ms
            .store(millis_of(timeout), Ordering::Relaxed);
    }

    /// Registers (or refreshes) one consumer of `group` from a heartbeat. `subscriptions` is
    /// `None` for a heartbeat sent without its subscription set (5.x `withoutSub`): the stored
    /// subscriptions are kept.
    pub fn register_consumer(
        &self,
        group: &str,
        info: ClientChannelInfo,
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        subscriptions: Option<&[SubscriptionData]>,
    ) -> RegisterOutcome {
        let now = self.clock.now_millis();
        let mut groups = self.groups.write();
        if !groups.contains_key(group) && groups.len() >= MAX_CONSUMER_GROUPS {
            tracing::warn!(
                group,
                limit = MAX_CONSUMER_GROUPS,
                "consumer group table full"
            );
            return RegisterOutcome {
                refused: true,
                ..Default::default()
            };
        }
        let entry = groups.entry(group.to_owned()).or_insert_with(|| {
            ConsumerGroupInfo::new(group, consume_type, message_model, consume_from_where)
        });
        if !entry.channels.contains_key(&info.channel.id())
            && entry.channels.len() >= MAX_CHANNELS_PER_GROUP
        {
            tracing::warn!(
                group,
                limit = MAX_CHANNELS_PER_GROUP,
                "consumer group has too many channels"
            );
            return RegisterOutcome {
                refused: true,
                channels: entry.all_channels(),
                ..Default::default()
            };
        }
        entry.consume_type = consume_type;
        entry.message_model = message_model;
        entry.consume_from_where = consume_from_where;
        let membership_changed = entry.update_channel(info, now);
        let subscription_changed = match subscriptions {
            Some(subs) => {
                let bounded = subs.get(..MAX_SUBSCRIPTIONS_PER_GROUP).unwrap_or(subs);
                entry.update_subscriptions(bounded, now)
            }
            None => false,
        };
        RegisterOutcome {
            membership_changed,
            subscription_changed,
            channels: entry.all_channels(),
            refused: false,
        }
    }

    /// Removes `channel` from `group` (UNREGISTER_CLIENT). `None` when it was not a member.
    pub fn unregister_consumer(&self, group: &str, channel: &Channel) -> Option<GroupChange> {
        let mut groups = self.groups.write();
        let info = groups.get_mut(group)?;
        let removed = info.channels.remove(&channel.id())?;
        let remaining = info.all_channels();
        if info.channels.is_empty() {
            groups.remove(group);
        }
        Some(GroupChange {
            group: group.to_owned(),
            removed,
            remaining,
        })
    }

    /// Removes a closed channel from every group it was in.
    pub fn channel_closed(&self, channel: &Channel) -> Vec<GroupChange> {
        let mut changes = Vec::new();
        let mut groups = self.groups.write();
        groups.retain(|name, info| {
            if let Some(removed) = info.channels.remove(&channel.id()) {
                changes.push(GroupChange {
                    group: name.clone(),
                    removed,
                    remaining: info.all_channels(),
                });
            }
            !info.channels.is_empty()
        });
        changes
    }

    /// Removes channels without a heartbeat for longer than the expiry timeout, and channels
    /// already closed. The caller closes the returned channels and notifies the rest.
    pub fn scan_expired(&self) -> Vec<GroupChange> {
        let now = self.clock.now_millis();
        let timeout = i64::try_from(self.channel_expired_timeout_ms.load(Ordering::Relaxed))
            .unwrap_or(i64::MAX);
        let mut changes = Vec::new();
        let mut groups = self.groups.write();
        groups.retain(|name, info| {
            let expired: Vec<u64> = info
                .channels
                .iter()
                .filter(|(_, c)| {
                    now.saturating_sub(c.last_update_millis) > timeout || !c.channel.is_active()
                })
                .map(|(id, _)| *id)
                .collect();
            for id in expired {
                if let Some(removed) = info.channels.remove(&id) {
                    tracing::info!(group = %name, client = %removed.client_id,
                        peer = %removed.channel.remote_addr(), "consumer channel expired");
                    changes.push(GroupChange {
                        group: name.clone(),
                        removed,
                        remaining: Vec::new(),
                    });
                }
            }
            !info.channels.is_empty()
        });
        for change in &mut changes {
            if let Some(info) = groups.get(&change.group) {
                change.remaining = info.all_channels();
            }
        }
        changes
    }

    /// The connection of `client_id` in `group`.
    pub fn find_channel(&self, group: &str, client_id: &str) -> Option<ClientChannelInfo> {
        let groups = self.groups.read();
        groups
            .get(group)?
            .channels
            .values()
            .find(|c| c.client_id == client_id)
            .cloned()
    }

    /// Sorted, de-duplicated client ids of `group` (empty for an unknown group).
    pub fn consumer_ids(&self, group: &str) -> Vec<String> {
        self.groups
            .read()
            .get(group)
            .map(ConsumerGroupInfo::client_ids)
            .unwrap_or_default()
    }

    /// A snapshot of `group`.
    pub fn group_info(&self, group: &str) -> Option<ConsumerGroupInfo> {
        self.groups.read().get(group).cloned()
    }

    /// The subscription of `group` to `topic`, from its heartbeats.
    pub fn subscription(&self, group: &str, topic: &str) -> Option<SubscriptionData> {
        self.groups
            .read()
            .get(group)?
            .subscriptions
            .get(topic)
            .cloned()
    }

    /// Names of every group with a live consumer.
    pub fn groups(&self) -> Vec<String> {
        let mut names: Vec<String> = self.groups.read().keys().cloned().collect();
        names.sort();
        names
    }

    /// Groups subscribed to `topic`.
    pub fn groups_by_topic(&self, topic: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .groups
            .read()
            .values()
            .filter(|g| g.subscriptions.contains_key(topic))
            .map(|g| g.group_name.clone())
            .collect();
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

    fn info(channel: &Channel, id: &str) -> ClientChannelInfo {
        ClientChannelInfo::new(channel.clone(), id, LanguageCode::Java, 479)
    }

    fn sub(topic: &str, expr: &str, version: i64) -> SubscriptionData {
        SubscriptionData::from_tag_expression(topic, expr, version)
    }

    fn register(
        m: &ConsumerManager,
        ch: &Channel,
        id: &str,
        subs: &[SubscriptionData],
    ) -> RegisterOutcome {
        m.register_consumer(
            "g",
            info(ch, id),
            ConsumeType::ConsumePassively,
            MessageModel::Clustering,
            ConsumeFromWhere::ConsumeFromLastOffset,
            Some(subs),
        )
    }

    #[tokio::test]
    async fn membership_and_subscription_changes_are_reported() {
        let (_guard, chans) = test_channels(2).await;
        let m = ConsumerManager::new(Duration::from_secs(120));
        let subs = [sub("T", "TagA", 1)];
        let first = register(&m, &chans[0], "c1", &subs);
        assert!(first.membership_changed && first.subscription_changed);
        let again = register(&m, &chans[0], "c1", &subs);
        assert!(!again.changed());
        let second = register(&m, &chans[1], "c2", &subs);
        assert!(second.membership_changed && !second.subscription_changed);
        assert_eq!(second.channels.len(), 2);
        assert_eq!(m.consumer_ids("g"), vec!["c1", "c2"]);

        let newer = register(&m, &chans[1], "c2", &[sub("T", "TagB", 2)]);
        assert!(newer.subscription_changed && !newer.membership_changed);
        assert_eq!(
            m.subscription("g", "T").map(|s| s.sub_string),
            Some("TagB".into())
        );
        let older = register(&m, &chans[0], "c1", &[sub("T", "TagA", 1)]);
        assert!(
            !older.changed(),
            "an older subscription version must not win"
        );
        let dropped = register(&m, &chans[0], "c1", &[]);
        assert!(dropped.subscription_changed);
        assert!(m.subscription("g", "T").is_none());
        assert_eq!(
            m.find_channel("g", "c2").map(|c| c.channel.id()),
            Some(chans[1].id())
        );
    }

    #[tokio::test]
    async fn unregister_and_close_remove_members_and_empty_groups() {
        let (_guard, chans) = test_channels(2).await;
        let m = ConsumerManager::new(Duration::from_secs(120));
        register(&m, &chans[0], "c1", &[]);
        register(&m, &chans[1], "c2", &[]);
        let change = m
            .unregister_consumer("g", &chans[0])
            .map(|c| c.remaining.len());
        assert_eq!(change, Some(1));
        assert!(m.unregister_consumer("g", &chans[0]).is_none());
        let closed = m.channel_closed(&chans[1]);
        assert_eq!(closed.len(), 1);
        assert!(closed[0].remaining.is_empty());
        assert!(m.group_info("g").is_none());
        assert!(m.consumer_ids("g").is_empty());
    }

    #[tokio::test]
    async fn silent_channels_expire() {
        let (_guard, chans) = test_channels(2).await;
        let clock = Arc::new(ManualClock::new(1_000_000));
        let m = ConsumerManager::with_clock(Duration::from_secs(120), clock.clone());
        register(&m, &chans[0], "c1", &[]);
        clock.advance(60_000);
        register(&m, &chans[1], "c2", &[]);
        clock.advance(60_000);
        assert!(
            m.scan_expired().is_empty(),
            "exactly 120 s is not yet expired"
        );
        clock.advance(1);
        let expired = m.scan_expired();
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].removed.client_id, "c1");
        assert_eq!(expired[0].remaining.len(), 1);
        assert_eq!(m.consumer_ids("g"), vec!["c2"]);
        clock.advance(60_000);
        assert_eq!(m.scan_expired().len(), 1);
        assert!(m.group_info("g").is_none());
    }
}
