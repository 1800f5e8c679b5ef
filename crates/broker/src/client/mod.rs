//! Clients connected to the broker: consumer groups, producer groups and their housekeeping.
//!
//! A RocketMQ client announces itself only through HEART_BEAT (every 30 s by default); the
//! broker keeps, per group, the connection ("channel") the heartbeat arrived on together with the
//! client id, language and version. Everything consumer-side depends on this table: a pull without
//! the SUBSCRIPTION bit reads the group's subscription from it, rebalancing clients ask for the
//! group's client ids (GET_CONSUMER_LIST_BY_GROUP), and a membership change is pushed to every
//! member as NOTIFY_CONSUMER_IDS_CHANGED so they rebalance at once instead of within 20 s.
//!
//! Entries leave the table three ways: UNREGISTER_CLIENT, the connection closing (see
//! [`housekeeping::ClientHousekeeping`], the server's channel listener), and expiry after
//! `channelExpiredTimeout` (120 s) without a heartbeat — a client that vanished without closing
//! its socket must not keep queues assigned to itself forever.
//!
//! Time is read through [`Clock`] so expiry can be tested without sleeping.

use std::net::SocketAddr;

use comet_protocol::LanguageCode;
use comet_protocol::RemotingCommand;
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{NotifyConsumerIdsChangedRequestHeader, request_with_header};
use comet_remoting::Channel;

pub mod consumer_manager;
pub mod housekeeping;
pub mod local;
pub mod producer_manager;

pub use consumer_manager::{ConsumerGroupInfo, ConsumerManager, RegisterOutcome};
pub use housekeeping::ClientHousekeeping;
pub use local::{LocalClient, LocalClients};
pub use producer_manager::ProducerManager;

pub use comet_remoting::clock::{Clock, ManualClock, SystemClock, system_clock};

/// A duration in whole milliseconds, saturating.
fn millis_of(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// One client connection of a group, as the last heartbeat described it.
#[derive(Debug, Clone)]
pub struct ClientChannelInfo {
    pub channel: Channel,
    pub client_id: String,
    pub language: LanguageCode,
    /// The client's `MQVersion` ordinal.
    pub version: i32,
    /// Wall-clock ms of the last heartbeat on this channel.
    pub last_update_millis: i64,
}

impl ClientChannelInfo {
    pub fn new(
        channel: Channel,
        client_id: impl Into<String>,
        language: LanguageCode,
        version: i32,
    ) -> Self {
        Self {
            channel,
            client_id: client_id.into(),
            language,
            version,
            last_update_millis: 0,
        }
    }

    /// The peer address, as `ip:port` (what admin tools show as `clientAddr`).
    pub fn client_addr(&self) -> SocketAddr {
        self.channel.remote_addr()
    }
}

/// Sends NOTIFY_CONSUMER_IDS_CHANGED (oneway, header `consumerGroup`) to every channel, on
/// background tasks so the caller (a heartbeat, a channel-close callback) never waits for a slow
/// client's socket. Failures are logged: the client rebalances on its own timer anyway.
pub fn notify_consumer_ids_changed(group: &str, channels: Vec<Channel>) {
    if channels.is_empty() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(group, "no runtime to send NOTIFY_CONSUMER_IDS_CHANGED on");
        return;
    };
    for channel in channels {
        if !channel.is_active() {
            continue;
        }
        let request = notify_request(group);
        let group = group.to_owned();
        runtime.spawn(async move {
            if let Err(e) = channel.invoke_oneway(request).await {
                tracing::debug!(group, peer = %channel.remote_addr(), error = %e,
                    "NOTIFY_CONSUMER_IDS_CHANGED not delivered");
            }
        });
    }
}

fn notify_request(group: &str) -> RemotingCommand {
    let header = NotifyConsumerIdsChangedRequestHeader {
        consumer_group: group.to_owned(),
        ..Default::default()
    };
    request_with_header(RequestCode::NotifyConsumerIdsChanged, &header)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(1_000);
        assert_eq!(clock.now_millis(), 1_000);
        clock.advance(500);
        assert_eq!(clock.now_millis(), 1_500);
        clock.set(7);
        assert_eq!(clock.now_millis(), 7);
    }

    #[test]
    fn notify_request_carries_the_group() {
        let cmd = notify_request("g1");
        assert_eq!(cmd.code, 40);
        assert_eq!(cmd.ext("consumerGroup"), Some("g1"));
    }
}
