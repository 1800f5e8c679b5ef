//! `comet controller`: one controller of a RocketMQ 5.x controller-mode quorum. An Apache
//! `controller.conf` (`-c`) starts it unchanged; its DLedger peers then run openraft.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use comet_controller::{Controller, ControllerConfig};

#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// A RocketMQ `controller.conf` (controllerDLegerGroup, controllerDLegerPeers,
    /// controllerDLegerSelfId, controllerStorePath, ...).
    #[arg(short = 'c', long = "config-file")]
    pub config_file: Option<PathBuf>,
    /// Set one key over the file, e.g. `--set controllerDLegerSelfId=n1` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

/// Builds the configuration: defaults (one controller on 127.0.0.1:9878, its store under
/// Comet's data directory), then the file, then `--set`.
pub fn resolve(args: &ControllerArgs) -> Result<ControllerConfig> {
    let mut config = ControllerConfig {
        store_path: crate::default_data_dir().join("controller"),
        ..ControllerConfig::default()
    };
    if let Some(path) = &args.config_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading controller config {}", path.display()))?;
        let unknown = config
            .apply_text(&text)
            .with_context(|| format!("parsing controller config {}", path.display()))?;
        for key in unknown {
            tracing::warn!(key = %key, file = %path.display(), "unknown controller configuration key ignored");
        }
    }
    for kv in &args.overrides {
        let Some((key, value)) = kv.split_once('=') else {
            bail!("--set expects KEY=VALUE, got {kv:?}");
        };
        if !config.set(key.trim(), value.trim())? {
            bail!("--set {key}: not a controller key");
        }
    }
    config
        .validate()
        .context("invalid controller configuration")?;
    Ok(config)
}

pub async fn run(args: ControllerArgs) -> Result<()> {
    let config = resolve(&args)?;
    let handle = Controller::start(config)
        .await
        .context("starting the controller")?;
    tracing::info!(listen = %handle.local_addr(), node = handle.node_id(), "controller serving");
    crate::wait_for_signal().await?;
    tracing::info!("shutting down");
    handle.shutdown().await;
    Ok(())
}
