//! The `comet` binary: parses the command line and wires the crates together. No protocol or storage
//! logic lives here; each subcommand is a thin shell over a library crate.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

mod broker;
mod namesrv;
mod serve;

/// Comet: a message queue that speaks Apache RocketMQ's remoting protocol.
#[derive(Debug, Parser)]
#[command(name = "comet", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run an embedded name server and broker in one process (zero configuration).
    Serve(serve::ServeArgs),
    /// Run a stand-alone name server.
    Namesrv(namesrv::NamesrvArgs),
    /// Run a stand-alone broker (RocketMQ broker.conf keys; `-n` names the name servers).
    Broker(broker::BrokerArgs),
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("comet")
        .build()
        .context("building the tokio runtime")?;
    runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve::run(args).await,
            Command::Namesrv(args) => namesrv::run(args).await,
            Command::Broker(args) => broker::run(args).await,
        }
    })
}

/// The default data directory: `./comet-data`.
pub fn default_data_dir() -> PathBuf {
    PathBuf::from("comet-data")
}

/// Resolves when the process receives SIGINT (Ctrl-C) or SIGTERM.
pub async fn wait_for_signal() -> Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
        _ = term.recv() => {}
    }
    Ok(())
}
