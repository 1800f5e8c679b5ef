//! Client housekeeping: reacting to closed connections and expiring silent clients.
//!
//! [`ClientHousekeeping`] is the remoting server's channel listener. When a connection closes
//! (normally, on an I/O error, or by idle timeout) its consumers leave their groups — the
//! remaining members are notified so they rebalance the departed client's queues at once — its
//! producers are forgotten, and the pulls it had held are dropped.
//!
//! A client can also vanish without its socket closing (a frozen process, a half-open TCP
//! connection). [`ClientHousekeeping::start`] therefore scans every [`HOUSEKEEPING_INTERVAL`] and
//! drops clients without a heartbeat for `channelExpiredTimeout`, closing their connections.

use std::sync::{Arc, Weak};
use std::time::Duration;

use comet_remoting::{Channel, ChannelEventListener, RemotingError};
use tokio::task::JoinHandle;

use super::consumer_manager::GroupChange;
use super::notify_consumer_ids_changed;
use crate::context::BrokerContext;

/// Period of the expiry scan (RocketMQ `ClientHousekeepingService`: 10 s).
pub const HOUSEKEEPING_INTERVAL: Duration = Duration::from_secs(10);

/// Channel listener and expiry scanner of the broker's client tables.
#[derive(Debug, Clone)]
pub struct ClientHousekeeping {
    ctx: Weak<BrokerContext>,
}

impl ClientHousekeeping {
    pub fn new(ctx: Weak<BrokerContext>) -> Self {
        Self { ctx }
    }

    /// Spawns the periodic expiry scan; it stops with the broker's shutdown token.
    pub fn start(ctx: &Arc<BrokerContext>) -> JoinHandle<()> {
        Self::start_with_interval(ctx, HOUSEKEEPING_INTERVAL)
    }

    /// Same with an explicit period (tests).
    pub fn start_with_interval(ctx: &Arc<BrokerContext>, interval: Duration) -> JoinHandle<()> {
        let weak = Arc::downgrade(ctx);
        let shutdown = ctx.shutdown.clone();
        tokio::spawn(async move {
            let start = tokio::time::Instant::now() + interval;
            let mut ticker = tokio::time::interval_at(start, interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = ticker.tick() => {}
                }
                let Some(ctx) = weak.upgrade() else {
                    break;
                };
                scan_expired(&ctx);
            }
        })
    }

    fn channel_gone(&self, channel: &Channel) {
        let Some(ctx) = self.ctx.upgrade() else {
            return;
        };
        channel_gone(&ctx, channel);
    }
}

/// Removes a departed connection from every client table.
pub fn channel_gone(ctx: &BrokerContext, channel: &Channel) {
    let changes = ctx.consumers.channel_closed(channel);
    notify_changes(ctx, changes);
    ctx.producers.channel_closed(channel);
    let dropped = ctx.pull_hold.drop_channel(channel);
    if dropped > 0 {
        tracing::debug!(peer = %channel.remote_addr(), dropped, "held pulls of a closed channel dropped");
    }
}

/// One expiry pass over the consumer and producer tables.
pub fn scan_expired(ctx: &BrokerContext) {
    let changes = ctx.consumers.scan_expired();
    for change in &changes {
        change.removed.channel.close();
    }
    notify_changes(ctx, changes);
    for expired in ctx.producers.scan_expired() {
        expired.channel.close();
    }
}

fn notify_changes(ctx: &BrokerContext, changes: Vec<GroupChange>) {
    for change in changes {
        if crate::processor::client_manage::notify_enabled(ctx, &change.group) {
            notify_consumer_ids_changed(&change.group, change.remaining);
        }
    }
}

impl ChannelEventListener for ClientHousekeeping {
    fn on_close(&self, channel: &Channel) {
        self.channel_gone(channel);
    }

    fn on_idle(&self, channel: &Channel) {
        self.channel_gone(channel);
    }

    fn on_exception(&self, channel: &Channel, _error: &RemotingError) {
        self.channel_gone(channel);
    }
}

/// Test support: `n` live server-side channels (one client connection each), plus what keeps
/// them open.
#[cfg(test)]
pub(crate) async fn test_channels(n: usize) -> (TestConnections, Vec<Channel>) {
    use comet_protocol::RemotingCommand;
    use comet_remoting::{
        ClientConfig, RemotingClient, RemotingServer, RequestProcessor, ServerConfig,
    };
    use futures::future::BoxFuture;
    use tokio::sync::mpsc;

    struct Capture(mpsc::UnboundedSender<Channel>);
    impl RequestProcessor for Capture {
        fn process(
            &self,
            channel: &Channel,
            _request: RemotingCommand,
        ) -> BoxFuture<'static, Option<RemotingCommand>> {
            let _ = self.0.send(channel.clone());
            Box::pin(async { Some(RemotingCommand::response(0, None)) })
        }
    }

    const PROBE_CODE: i32 = 9_999;
    let server = RemotingServer::bind(ServerConfig::new("127.0.0.1:0"))
        .await
        .expect("bind test server");
    let (tx, mut rx) = mpsc::unbounded_channel();
    server.register(PROBE_CODE, Arc::new(Capture(tx)));
    let handle = server.start();
    let addr = handle.local_addr().to_string();
    let mut clients = Vec::new();
    let mut channels = Vec::new();
    for _ in 0..n {
        let client = RemotingClient::new(ClientConfig::default());
        client
            .invoke(
                &addr,
                RemotingCommand::request(PROBE_CODE),
                Duration::from_secs(5),
            )
            .await
            .expect("probe request");
        channels.push(rx.recv().await.expect("captured channel"));
        clients.push(client);
    }
    (
        TestConnections {
            _server: handle,
            _clients: clients,
        },
        channels,
    )
}

#[cfg(test)]
pub(crate) struct TestConnections {
    _server: comet_remoting::ServerHandle,
    _clients: Vec<comet_remoting::RemotingClient>,
}
