//! `comet namesrv`: a stand-alone name server, for deployments that run brokers separately.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use comet_namesrv::{NameServer, NameServerHandle, NamesrvConfig};

#[derive(Debug, Args)]
pub struct NamesrvArgs {
    /// Listen address.
    #[arg(long, default_value = "127.0.0.1:9876", env = "COMET_NAMESRV_LISTEN")]
    pub listen: String,
    /// Directory for the name server's persisted state (kvConfig.json).
    #[arg(long, env = "COMET_NAMESRV_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

/// Starts a name server on `listen` keeping its state under `data_dir`.
pub async fn start(listen: &str, data_dir: PathBuf) -> Result<NameServerHandle> {
    let config = NamesrvConfig::new(listen, data_dir);
    NameServer::start(config)
        .await
        .with_context(|| format!("starting the name server on {listen}"))
}

pub async fn run(args: NamesrvArgs) -> Result<()> {
    let data_dir = args
        .data_dir
        .unwrap_or_else(|| crate::default_data_dir().join("namesrv"));
    let handle = start(&args.listen, data_dir).await?;
    tracing::info!(listen = %handle.local_addr(), "name server serving");
    crate::wait_for_signal().await?;
    tracing::info!("shutting down");
    handle.shutdown().await;
    Ok(())
}
