//! `comet serve`: a name server and a broker in one process.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use comet_remoting::{RemotingServer, ServerConfig};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Name server listen address.
    #[arg(long, default_value = "127.0.0.1:9876", env = "COMET_NAMESRV_LISTEN")]
    pub namesrv_listen: String,
    /// Broker listen address.
    #[arg(long, default_value = "127.0.0.1:10911", env = "COMET_BROKER_LISTEN")]
    pub broker_listen: String,
    /// Data directory (commit log, consume queues, config files).
    #[arg(long, default_value_os_t = crate::default_data_dir(), env = "COMET_DATA_DIR")]
    pub data_dir: PathBuf,
}

pub async fn run(args: ServeArgs) -> Result<()> {
    let namesrv =
        crate::namesrv::start(&args.namesrv_listen, args.data_dir.join("namesrv")).await?;
    let broker = RemotingServer::bind(ServerConfig::new(args.broker_listen.clone()))
        .await
        .with_context(|| format!("binding the broker on {}", args.broker_listen))?;
    tracing::info!(namesrv = %namesrv.local_addr(), broker = %broker.local_addr(), data_dir = %args.data_dir.display(), "comet serving");
    let broker = broker.start();
    crate::wait_for_signal().await?;
    tracing::info!("shutting down");
    broker.shutdown().await;
    namesrv.shutdown().await;
    Ok(())
}
