//! `comet broker`: a stand-alone broker configured like Apache RocketMQ's (`broker.conf` keys),
//! and the configuration layering shared with `comet serve`.
//!
//! Layers, later wins: built-in defaults → the `-c` file → `COMET_<KEY>` environment variables
//! (the broker.conf key in SCREAMING_SNAKE_CASE, e.g. `COMET_LISTEN_PORT`, `COMET_BROKER_IP1`) →
//! command-line flags (`-n`, `--set key=value`). Unknown keys warn with the key's name.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use comet_broker::{BrokerConfig, BrokerController, BrokerHandle};

#[derive(Debug, Args, Default)]
pub struct BrokerArgs {
    /// A RocketMQ `broker.conf` (Java properties: brokerClusterName, brokerName, listenPort, ...).
    #[arg(short = 'c', long = "config")]
    pub config_file: Option<PathBuf>,
    /// Name server address list, `;`-separated (the `namesrvAddr` key).
    #[arg(short = 'n', long = "namesrv-addr")]
    pub namesrv_addr: Option<String>,
    /// Override any broker.conf key: `--set listenPort=10921` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Print the effective configuration as broker.conf text and exit.
    #[arg(long)]
    pub print_config: bool,
}

/// `brokerIP1` → `BROKER_IP1`, `listenPort` → `LISTEN_PORT`.
fn env_name(key: &str) -> String {
    let mut out = String::from("COMET_");
    let mut prev_lower = false;
    for c in key.chars() {
        if c.is_ascii_uppercase() && prev_lower {
            out.push('_');
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        out.push(c.to_ascii_uppercase());
    }
    out
}

fn set(config: &mut BrokerConfig, key: &str, value: &str, source: &str) -> Result<()> {
    let known = config
        .set(key, value)
        .with_context(|| format!("{source}: bad value for {key}"))?;
    if !known {
        tracing::warn!(key, source, "unknown broker configuration key ignored");
    }
    Ok(())
}

/// Builds the effective configuration from `config` (the base) and the layers above it.
pub fn resolve(mut config: BrokerConfig, args: &BrokerArgs) -> Result<BrokerConfig> {
    if let Some(path) = &args.config_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading broker config {}", path.display()))?;
        let unknown = config
            .apply_text(&text)
            .with_context(|| format!("parsing broker config {}", path.display()))?;
        for key in unknown
            .iter()
            .filter(|k| !comet_console::ConsoleConfig::is_console_key(k))
        {
            tracing::warn!(key = %key, file = %path.display(), "unknown broker configuration key ignored");
        }
    }
    for key in BrokerConfig::KEYS {
        if let Ok(value) = std::env::var(env_name(key)) {
            set(&mut config, key, &value, "environment")?;
        }
    }
    if let Some(addr) = &args.namesrv_addr {
        set(&mut config, "namesrvAddr", addr, "-n")?;
    }
    for kv in &args.overrides {
        let Some((key, value)) = kv.split_once('=') else {
            bail!("--set expects KEY=VALUE, got {kv:?}");
        };
        if comet_console::ConsoleConfig::is_console_key(key.trim()) {
            continue;
        }
        set(&mut config, key.trim(), value.trim(), "--set")?;
    }
    config.validate().context("invalid broker configuration")?;
    Ok(config)
}

/// Starts a broker and logs where clients must reach it (the advertised address is the most
/// common RocketMQ misconfiguration, so it is said loudly).
pub async fn start(config: BrokerConfig) -> Result<BrokerHandle> {
    let handle = BrokerController::start(config)
        .await
        .context("starting the broker")?;
    tracing::warn!(
        listen = %handle.local_addr(),
        advertised = %handle.broker_addr(),
        "broker advertises {} to clients (brokerIP1:listenPort); clients must be able to reach it",
        handle.broker_addr()
    );
    Ok(handle)
}

pub async fn run(args: BrokerArgs) -> Result<()> {
    let config = resolve(BrokerConfig::default(), &args)?;
    if args.print_config {
        print!("{}", config.to_properties());
        return Ok(());
    }
    let console_base = comet_console::ConsoleConfig {
        data_dir: config.store_path_root_dir.join("console"),
        ..comet_console::ConsoleConfig::default()
    };
    let console_config = crate::console::resolve(console_base, &args)?;
    let namesrv = config.namesrv_addr.join(";");
    let handle = start(config).await?;
    let console = if namesrv.is_empty() {
        tracing::warn!("no namesrvAddr: the console is not started");
        None
    } else {
        crate::console::start_embedded(console_config, &namesrv).await
    };
    crate::wait_for_signal().await?;
    tracing::info!("shutting down the broker");
    if let Some(console) = console {
        console.shutdown().await;
    }
    handle.shutdown().await.context("broker shutdown")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_names_follow_the_keys() {
        assert_eq!(env_name("listenPort"), "COMET_LISTEN_PORT");
        assert_eq!(env_name("brokerIP1"), "COMET_BROKER_IP1");
        assert_eq!(env_name("brokerClusterName"), "COMET_BROKER_CLUSTER_NAME");
        assert_eq!(env_name("flushDiskType"), "COMET_FLUSH_DISK_TYPE");
    }

    #[test]
    fn set_overrides_apply_and_bad_ones_fail() {
        let args = BrokerArgs {
            overrides: vec!["listenPort=10921".into(), "brokerName=b1".into()],
            namesrv_addr: Some("127.0.0.1:9876".into()),
            ..BrokerArgs::default()
        };
        let config = resolve(BrokerConfig::default(), &args).unwrap();
        assert_eq!(config.listen_port, 10921);
        assert_eq!(config.broker_name, "b1");
        assert_eq!(config.namesrv_addr, vec!["127.0.0.1:9876".to_owned()]);
        let bad = BrokerArgs {
            overrides: vec!["listenPort=notaport".into()],
            ..BrokerArgs::default()
        };
        assert!(resolve(BrokerConfig::default(), &bad).is_err());
        let malformed = BrokerArgs {
            overrides: vec!["listenPort".into()],
            ..BrokerArgs::default()
        };
        assert!(resolve(BrokerConfig::default(), &malformed).is_err());
    }

    #[test]
    fn config_file_layers_over_the_base() {
        let dir = std::env::temp_dir().join(format!("comet-broker-conf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("broker.conf");
        std::fs::write(
            &file,
            "brokerName=fromfile\n# comment\nnotAKey=1\nlistenPort=10911\n",
        )
        .unwrap();
        let base = BrokerConfig {
            listen_port: 12345,
            ..BrokerConfig::default()
        };
        let args = BrokerArgs {
            config_file: Some(file),
            ..BrokerArgs::default()
        };
        let config = resolve(base, &args).unwrap();
        assert_eq!(config.broker_name, "fromfile");
        // The file sets listenPort to the default value explicitly: it still wins over the base.
        assert_eq!(config.listen_port, 10911);
        assert_eq!(config.broker_ip1, None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
