//! `comet namesrv`: a stand-alone name server, for deployments that run brokers separately.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use comet_namesrv::{NameServer, NameServerHandle, NamesrvConfig};
use comet_remoting::limits::{DEFAULT_IDLE_TIMEOUT, DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK};

#[derive(Debug, Args)]
pub struct NamesrvArgs {
    /// Listen address.
    #[arg(long, default_value = "127.0.0.1:9876", env = "COMET_NAMESRV_LISTEN")]
    pub listen: String,
    /// Directory for the name server's persisted state (kvConfig.json).
    #[arg(long, env = "COMET_NAMESRV_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Close connections that send nothing for this long, in seconds; 0 never closes them
    /// (RocketMQ `serverChannelMaxIdleTimeSeconds`).
    #[arg(
        long,
        default_value_t = DEFAULT_IDLE_TIMEOUT.as_secs(),
        env = "COMET_SERVER_CHANNEL_MAX_IDLE_TIME_SECONDS"
    )]
    pub server_channel_max_idle_time_seconds: u64,
    /// Unsent bytes of one connection above which it stops reading requests (RocketMQ
    /// `writeBufferHighWaterMark`).
    #[arg(
        long,
        default_value_t = DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK,
        env = "COMET_WRITE_BUFFER_HIGH_WATER_MARK"
    )]
    pub write_buffer_high_water_mark: usize,
}

/// Starts a name server with `config` (validated by the name server).
pub async fn start_with(config: NamesrvConfig) -> Result<NameServerHandle> {
    let listen = config.listen_addr.clone();
    NameServer::start(config)
        .await
        .with_context(|| format!("starting the name server on {listen}"))
}

pub async fn run(args: NamesrvArgs) -> Result<()> {
    let data_dir = args
        .data_dir
        .unwrap_or_else(|| crate::default_data_dir().join("namesrv"));
    let config = NamesrvConfig {
        idle_timeout: (args.server_channel_max_idle_time_seconds > 0)
            .then(|| Duration::from_secs(args.server_channel_max_idle_time_seconds)),
        write_buffer_high_water_mark: args.write_buffer_high_water_mark,
        ..NamesrvConfig::new(args.listen, data_dir)
    };
    let handle = start_with(config).await?;
    tracing::info!(listen = %handle.local_addr(), "name server serving");
    crate::wait_for_signal().await?;
    tracing::info!("shutting down");
    handle.shutdown().await;
    Ok(())
}
