//! # comet-namesrv
//!
//! Comet's name server: the directory of a RocketMQ deployment. Brokers register their topics
//! with every name server every 30 s; producers and consumers ask any name server for the route
//! of a topic (which brokers hold it, with how many queues). Name servers never talk to each
//! other — each is complete on its own because every broker registers with all of them — so
//! several can run side by side and clients fail over between them.
//!
//! Layout:
//! - [`route_info::RouteInfoManager`] holds the routing tables;
//! - [`kv_config::KvConfigManager`] holds the persistent namespace/key/value configuration;
//! - `processor/` answers the remoting commands, one module per command family;
//! - [`NameServer::start`] wires them onto a `comet_remoting` server, removes a broker as soon
//!   as its connection closes, and runs the expiry scan that drops brokers that went silent.
//!
//! ```no_run
//! # async fn demo() -> Result<(), comet_namesrv::NamesrvError> {
//! use comet_namesrv::{NameServer, NamesrvConfig};
//! let handle = NameServer::start(NamesrvConfig::new("127.0.0.1:9876", "data/namesrv")).await?;
//! println!("name server on {}", handle.local_addr());
//! handle.shutdown().await;
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

pub mod config;
pub mod kv_config;
mod processor;
pub mod route_info;

use std::net::SocketAddr;
use std::sync::Arc;

use comet_remoting::{
    CancellationToken, Channel, ChannelEventListener, RemotingError, RemotingServer, ServerHandle,
};
use thiserror::Error;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

pub use config::{ConfigError, NamesrvConfig};
pub use kv_config::{KvConfigError, KvConfigManager, NAMESPACE_ORDER_TOPIC_CONFIG};
pub use processor::broker::{REGISTER_BODY_MIN_VERSION, ZONE_NAME_EXT_KEY, body_crc32};
pub use processor::route::TOPIC_NOT_EXIST_HINT;
pub use route_info::{
    BrokerAddrInfo, BrokerRegistration, Clock, RegisterBrokerResult, RouteError, RouteInfoManager,
    SystemClock,
};

use processor::NamesrvContext;

/// Why the name server could not start.
#[derive(Debug, Error)]
pub enum NamesrvError {
    #[error("invalid name server configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("loading the KV config failed: {0}")]
    KvConfig(#[from] KvConfigError),
    #[error("starting the name server listener failed: {0}")]
    Remoting(#[from] RemotingError),
    #[error("loading the KV config was interrupted: {0}")]
    Startup(String),
}

/// Entry point of the name server.
#[derive(Debug, Clone, Copy)]
pub struct NameServer;

impl NameServer {
    /// Validates `config`, loads the KV config, binds the listen address and starts serving and
    /// scanning for expired brokers.
    pub async fn start(config: NamesrvConfig) -> Result<NameServerHandle, NamesrvError> {
        Self::start_with_clock(config, Arc::new(SystemClock)).await
    }

    /// [`NameServer::start`] with an explicit clock for broker expiry.
    pub async fn start_with_clock(
        config: NamesrvConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<NameServerHandle, NamesrvError> {
        config.validate()?;
        let kv_path = config.kv_config_path();
        let kv = tokio::task::spawn_blocking(move || KvConfigManager::load(kv_path))
            .await
            .map_err(|e| NamesrvError::Startup(e.to_string()))??;
        let route = Arc::new(RouteInfoManager::with_clock(
            config.broker_expiry_millis(),
            clock,
        ));
        let ctx = Arc::new(NamesrvContext {
            config: config.clone(),
            route: Arc::clone(&route),
            kv: Arc::new(kv),
            order_message_enable: std::sync::atomic::AtomicBool::new(config.order_message_enable),
        });

        let server = RemotingServer::bind(config.server_config()).await?;
        processor::register_processors(&server, &ctx);
        server.set_channel_event_listener(Arc::new(BrokerHousekeeping {
            route: Arc::clone(&route),
        }));
        let local_addr = server.local_addr();
        let server = server.start();

        let stop = CancellationToken::new();
        let scanner = tokio::spawn(scan_not_active_brokers(
            Arc::clone(&route),
            config.scan_interval,
            stop.clone(),
        ));
        tracing::info!(addr = %local_addr, data_dir = %config.data_dir.display(), "name server started");
        Ok(NameServerHandle {
            local_addr,
            server,
            scanner,
            stop,
            ctx,
        })
    }
}

/// A running name server.
pub struct NameServerHandle {
    local_addr: SocketAddr,
    server: ServerHandle,
    scanner: JoinHandle<()>,
    stop: CancellationToken,
    ctx: Arc<NamesrvContext>,
}

impl std::fmt::Debug for NameServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NameServerHandle")
            .field("local_addr", &self.local_addr)
            .field("route", &self.ctx.route)
            .finish()
    }
}

impl NameServerHandle {
    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The routing tables (for embedding and inspection).
    pub fn route_info(&self) -> &Arc<RouteInfoManager> {
        &self.ctx.route
    }

    /// The KV configuration.
    pub fn kv_config(&self) -> &Arc<KvConfigManager> {
        &self.ctx.kv
    }

    pub fn config(&self) -> &NamesrvConfig {
        &self.ctx.config
    }

    /// Stops the expiry scan and the server (gracefully: in-flight requests are answered).
    pub async fn shutdown(self) {
        self.stop.cancel();
        if let Err(e) = self.scanner.await {
            tracing::error!(error = %e, "broker expiry scanner failed");
        }
        self.server.shutdown().await;
        tracing::info!(addr = %self.local_addr, "name server stopped");
    }
}

/// Removes a broker as soon as the connection it registered through closes.
struct BrokerHousekeeping {
    route: Arc<RouteInfoManager>,
}

impl ChannelEventListener for BrokerHousekeeping {
    fn on_close(&self, channel: &Channel) {
        self.route.on_channel_destroy(channel.id());
    }
}

async fn scan_not_active_brokers(
    route: Arc<RouteInfoManager>,
    period: std::time::Duration,
    stop: CancellationToken,
) {
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            _ = ticker.tick() => {
                let removed = route.scan_not_active_brokers();
                if !removed.is_empty() {
                    tracing::info!(count = removed.len(), "expired brokers removed");
                }
            }
        }
    }
}
