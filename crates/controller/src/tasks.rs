//! Starting a controller: the listener, the Raft instance, and the background work — the scan
//! for brokers that stopped heartbeating and, on the leader, the elections for groups whose
//! master is gone.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use comet_remoting::{
    CancellationToken, Channel, ChannelEventListener, ClientConfig, RemotingClient, RemotingServer,
    ServerConfig, ServerHandle,
};
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use crate::ControllerError;
use crate::config::ControllerConfig;
use crate::liveness::{Departed, Liveness};
use crate::processor::{ControllerContext, elect, register_processors};
use crate::raft::{self, log_store};

/// How often the leader looks for groups without a living master (`scanInactiveMasterInterval`).
const INACTIVE_MASTER_SCAN: Duration = Duration::from_secs(5);

/// Entry point of a controller.
#[derive(Debug, Clone, Copy)]
pub struct Controller;

impl Controller {
    /// Validates `config`, opens the Raft store, binds this controller's peer address and joins
    /// (or forms) the quorum named by the peers.
    pub async fn start(config: ControllerConfig) -> Result<ControllerHandle, ControllerError> {
        config.validate()?;
        let peers = config.parse_peers()?;
        let me = config.self_peer()?;
        let db = {
            let dir = config.store_path.clone();
            tokio::task::spawn_blocking(move || log_store::open_database(&dir))
                .await
                .map_err(|e| ControllerError::Storage(std::io::Error::other(e.to_string())))?
                .map_err(ControllerError::Storage)?
        };
        let client = Arc::new(RemotingClient::try_new(ClientConfig::default())?);
        let server = RemotingServer::bind(ServerConfig::new(config.listen_addr()?)).await?;
        let quorum = raft::start(me.node_id, &config.group, db, Arc::clone(&client)).await?;
        let ctx = Arc::new(ControllerContext {
            config: config.clone(),
            node_id: me.node_id,
            peers: peers.clone(),
            raft: quorum.raft,
            state: quorum.state,
            liveness: Liveness::default(),
            client,
        });
        register_processors(&server, &ctx);
        server.set_channel_event_listener(Arc::new(BrokerConnections {
            ctx: Arc::downgrade(&ctx),
        }));
        let local_addr = server.local_addr();
        let server = server.start();
        let members: BTreeMap<u64, String> =
            peers.iter().map(|p| (p.node_id, p.addr.clone())).collect();
        raft::initialize(&ctx.raft, &members).await?;
        let stop = CancellationToken::new();
        let tasks = vec![
            tokio::spawn(scan_silent_brokers(Arc::clone(&ctx), stop.clone())),
            tokio::spawn(scan_masterless_groups(Arc::clone(&ctx), stop.clone())),
        ];
        tracing::info!(
            addr = %local_addr,
            node = me.node_id,
            peers = peers.len(),
            store = %config.store_path.display(),
            "controller started"
        );
        Ok(ControllerHandle {
            local_addr,
            server,
            tasks,
            stop,
            ctx,
        })
    }
}

/// A running controller.
pub struct ControllerHandle {
    local_addr: SocketAddr,
    server: ServerHandle,
    tasks: Vec<JoinHandle<()>>,
    stop: CancellationToken,
    ctx: Arc<ControllerContext>,
}

impl std::fmt::Debug for ControllerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerHandle")
            .field("local_addr", &self.local_addr)
            .field("node_id", &self.ctx.node_id)
            .finish()
    }
}

impl ControllerHandle {
    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// This controller's Raft node id.
    pub fn node_id(&self) -> u64 {
        self.ctx.node_id
    }

    /// Whether this controller leads the quorum now.
    pub fn is_leader(&self) -> bool {
        self.ctx.is_leader()
    }

    /// The Raft instance (membership changes, metrics).
    pub fn raft(&self) -> &raft::Raft {
        &self.ctx.raft
    }

    /// Adds the controller `node` at `addr` to the quorum (on the leader).
    pub async fn add_voter(&self, node: u64, addr: String) -> Result<(), String> {
        raft::add_voter(&self.ctx.raft, node, addr).await
    }

    /// Removes the controller `node` from the quorum (on the leader).
    pub async fn remove_voter(&self, node: u64) -> Result<(), String> {
        raft::remove_voter(&self.ctx.raft, node).await
    }

    /// Stops the scans, the Raft instance and the listener.
    pub async fn shutdown(self) {
        self.stop.cancel();
        for task in self.tasks {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "controller task failed");
            }
        }
        if let Err(e) = self.ctx.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown");
        }
        self.server.shutdown().await;
        tracing::info!(addr = %self.local_addr, "controller stopped");
    }
}

/// A broker whose heartbeat connection closed is gone at once.
struct BrokerConnections {
    ctx: Weak<ControllerContext>,
}

impl ChannelEventListener for BrokerConnections {
    fn on_close(&self, channel: &Channel) {
        let Some(ctx) = self.ctx.upgrade() else {
            return;
        };
        let departed = ctx.liveness.channel_closed(channel.id());
        handle_departed(&ctx, departed);
    }
}

/// On the leader, elects a new master for every group whose master just departed.
fn handle_departed(ctx: &Arc<ControllerContext>, departed: Vec<Departed>) {
    if departed.is_empty() || !ctx.is_leader() {
        return;
    }
    for gone in departed {
        let was_master = ctx.read(|r| {
            r.group(&gone.broker_name)
                .is_some_and(|g| g.master == Some(gone.broker_id))
        });
        tracing::info!(
            broker = %gone.broker_name,
            id = gone.broker_id,
            was_master,
            "broker is no longer alive"
        );
        if was_master {
            let ctx = Arc::clone(ctx);
            tokio::spawn(async move {
                elect::elect_for_dead_master(&ctx, &gone.broker_name).await;
            });
        }
    }
}

fn ticker(period: Duration) -> tokio::time::Interval {
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker
}

/// Removes brokers silent past their heartbeat timeout (`scanNotActiveBrokerInterval`).
async fn scan_silent_brokers(ctx: Arc<ControllerContext>, stop: CancellationToken) {
    let mut ticker = ticker(ctx.config.scan_interval);
    loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            _ = ticker.tick() => {
                let departed = ctx.liveness.expire(ctx.now());
                handle_departed(&ctx, departed);
            }
        }
    }
}

/// On the leader: elects a master for every group whose master is not alive while one of its
/// brokers is. This also covers a change of controller leader, whose new leader never saw the
/// old master's connection close.
async fn scan_masterless_groups(ctx: Arc<ControllerContext>, stop: CancellationToken) {
    let mut ticker = ticker(INACTIVE_MASTER_SCAN);
    loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            _ = ticker.tick() => {
                if !ctx.is_leader() {
                    continue;
                }
                let now = ctx.now();
                let groups: Vec<(String, Option<u64>)> = ctx.read(|r| {
                    r.groups().map(|g| (g.broker_name.clone(), g.master)).collect()
                });
                for (name, master) in groups {
                    let master_alive = master.is_some_and(|m| ctx.liveness.is_alive(&name, m, now));
                    if !master_alive && !ctx.liveness.alive_ids(&name, now).is_empty() {
                        elect::elect_for_dead_master(&ctx, &name).await;
                    }
                }
            }
        }
    }
}
