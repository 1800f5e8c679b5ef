//! `comet serve`: a name server and a broker in one process, zero configuration.
//!
//! The broker registers with the embedded name server, keeps its store under `<data-dir>/store`
//! and advertises the address it listens on. Every broker.conf key can still be set with
//! `-c`, `COMET_<KEY>` or `--set`, exactly as for `comet broker`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use comet_broker::BrokerConfig;

use crate::broker::BrokerArgs;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Name server listen address.
    #[arg(long, default_value = "127.0.0.1:9876", env = "COMET_NAMESRV_LISTEN")]
    pub namesrv_listen: String,
    /// Broker listen address (its IP is also advertised as brokerIP1 unless that is set).
    #[arg(long, default_value = "127.0.0.1:10911", env = "COMET_BROKER_LISTEN")]
    pub broker_listen: SocketAddr,
    /// Data directory (commit log, consume queues, config files, name server state).
    #[arg(long, default_value_os_t = crate::default_data_dir(), env = "COMET_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Once both servers accept connections, write `{"namesrv":"ip:port","broker":"ip:port"}` here
    /// (atomically). Lets scripts and tests use port 0 and learn the real ports.
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,
    #[command(flatten)]
    pub broker: BrokerArgs,
}

fn write_ready_file(path: &std::path::Path, namesrv: SocketAddr, broker: SocketAddr) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let text = format!("{{\"namesrv\":\"{namesrv}\",\"broker\":\"{broker}\"}}\n");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

/// The embedded broker's base configuration before files, environment and flags apply.
fn base_config(args: &ServeArgs, namesrv: SocketAddr) -> BrokerConfig {
    BrokerConfig {
        bind_address: args.broker_listen.ip(),
        listen_port: args.broker_listen.port(),
        broker_ip1: (!args.broker_listen.ip().is_unspecified()).then(|| args.broker_listen.ip()),
        namesrv_addr: vec![namesrv.to_string()],
        store_path_root_dir: args.data_dir.join("store"),
        ..BrokerConfig::default()
    }
}

pub async fn run(args: ServeArgs) -> Result<()> {
    if args.broker.print_config {
        let placeholder: SocketAddr = args
            .namesrv_listen
            .parse()
            .with_context(|| format!("name server address {}", args.namesrv_listen))?;
        let config = crate::broker::resolve(base_config(&args, placeholder), &args.broker)?;
        print!("{}", config.to_properties());
        return Ok(());
    }
    let namesrv =
        crate::namesrv::start(&args.namesrv_listen, args.data_dir.join("namesrv")).await?;
    let config = crate::broker::resolve(base_config(&args, namesrv.local_addr()), &args.broker)?;
    let broker = crate::broker::start(config).await?;
    tracing::info!(
        namesrv = %namesrv.local_addr(),
        broker = %broker.local_addr(),
        data_dir = %args.data_dir.display(),
        "comet serving: point clients at namesrvAddr={}",
        namesrv.local_addr()
    );
    if let Some(path) = &args.ready_file {
        write_ready_file(path, namesrv.local_addr(), broker.local_addr())?;
    }
    crate::wait_for_signal().await?;
    tracing::info!("shutting down");
    let result = broker.shutdown().await.context("broker shutdown");
    namesrv.shutdown().await;
    result
}
