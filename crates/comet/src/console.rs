//! `comet console`: the web console against any RocketMQ cluster (Apache's included), reached
//! only through its name servers, and the console keys of `comet serve` / `comet broker`.
//!
//! The console keys (`consoleEnable`, `consolePort`, ...) are read from the same layers as the
//! broker's keys: the `-c` file, `COMET_CONSOLE_*` environment variables, then `--set`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use comet_client::ClientConfig;
use comet_console::{ConsoleConfig, ConsoleHandle};

use crate::broker::BrokerArgs;

#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// Name server address(es) of the cluster, `;`-separated.
    #[arg(
        short = 'n',
        long = "namesrv",
        env = "NAMESRV_ADDR",
        default_value = "127.0.0.1:9876"
    )]
    pub namesrv: String,
    /// Address to serve the console on.
    #[arg(long, default_value = "127.0.0.1:8080", env = "COMET_CONSOLE_LISTEN")]
    pub listen: SocketAddr,
    /// Directory of the console's accounts file (the generated password's hash).
    #[arg(long, default_value_os_t = crate::default_data_dir().join("console"), env = "COMET_CONSOLE_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Override a console key: `--set consoleSessionTimeoutSecs=600` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

/// The environment variable of a console key: `consolePort` → `COMET_CONSOLE_PORT`.
fn env_name(key: &str) -> String {
    let mut out = String::from("COMET_");
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

fn set(config: &mut ConsoleConfig, key: &str, value: &str, source: &str) -> Result<()> {
    let known = config
        .set(key, value)
        .with_context(|| format!("{source}: bad value for {key}"))?;
    if !known {
        tracing::warn!(key, source, "unknown console configuration key ignored");
    }
    Ok(())
}

/// The `key=value` lines of a properties file whose key is a console key.
fn console_lines(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.starts_with('!'))
        .filter_map(|l| l.split_once(['=', ':']))
        .map(|(k, v)| (k.trim(), v.trim()))
        .filter(|(k, _)| ConsoleConfig::is_console_key(k))
}

/// The console configuration of a `comet serve` / `comet broker` process: `base`, then the
/// console keys of the broker's file, environment and `--set` layers.
pub fn resolve(mut config: ConsoleConfig, args: &BrokerArgs) -> Result<ConsoleConfig> {
    if let Some(path) = &args.config_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading broker config {}", path.display()))?;
        for (key, value) in console_lines(&text) {
            set(&mut config, key, value, "config file")?;
        }
    }
    apply_env_and_overrides(&mut config, &args.overrides)?;
    config.validate().context("invalid console configuration")?;
    Ok(config)
}

/// Applies the console keys of the environment (`COMET_CONSOLE_*`), then those of `overrides`
/// (`key=value`; other keys are left alone).
pub fn apply_env_and_overrides(config: &mut ConsoleConfig, overrides: &[String]) -> Result<()> {
    for key in ConsoleConfig::KEYS {
        if let Ok(value) = std::env::var(env_name(key)) {
            set(config, key, &value, "environment")?;
        }
    }
    for kv in overrides {
        let Some((key, value)) = kv.split_once('=') else {
            bail!("--set expects KEY=VALUE, got {kv:?}");
        };
        if ConsoleConfig::is_console_key(key.trim()) {
            set(config, key.trim(), value.trim(), "--set")?;
        }
    }
    Ok(())
}

/// Starts the console of a broker process when `consoleEnable` is on. The broker is the
/// process's purpose, so a console that cannot start (its port taken, its accounts file
/// unreadable) is reported and the broker keeps running without it.
pub async fn start_embedded(config: ConsoleConfig, namesrv: &str) -> Option<ConsoleHandle> {
    if !config.enable {
        return None;
    }
    match comet_console::start(config, ClientConfig::new(namesrv)).await {
        Ok(handle) => Some(handle),
        Err(e) => {
            tracing::error!(
                error = %e,
                "the web console did not start; the broker runs without it \
                 (consoleEnable=false silences this)"
            );
            None
        }
    }
}

pub async fn run(args: ConsoleArgs) -> Result<()> {
    let mut config = ConsoleConfig {
        host: args.listen.ip(),
        port: args.listen.port(),
        data_dir: args.data_dir.clone(),
        ..ConsoleConfig::default()
    };
    apply_env_and_overrides(&mut config, &args.overrides)?;
    config.validate().context("invalid console configuration")?;
    let handle = comet_console::start(config, ClientConfig::new(args.namesrv.clone()))
        .await
        .context("starting the console")?;
    tracing::info!(
        namesrv = %args.namesrv,
        "console for the cluster of {} at http://{}/",
        args.namesrv,
        handle.local_addr()
    );
    crate::wait_for_signal().await?;
    handle.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_keys_come_from_the_file_and_set_layers() {
        assert_eq!(env_name("consolePort"), "COMET_CONSOLE_PORT");
        assert_eq!(
            env_name("consoleSessionTimeoutSecs"),
            "COMET_CONSOLE_SESSION_TIMEOUT_SECS"
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("broker.conf");
        std::fs::write(
            &file,
            "brokerName=b\nconsolePort=9090\n# consoleHost=0.0.0.0\n",
        )
        .unwrap();
        let args = BrokerArgs {
            config_file: Some(file),
            overrides: vec![
                "consoleSessionTimeoutSecs=60".to_owned(),
                "listenPort=1".to_owned(),
            ],
            ..BrokerArgs::default()
        };
        let config = resolve(ConsoleConfig::default(), &args).unwrap();
        assert_eq!(config.port, 9090);
        assert_eq!(config.host.to_string(), "127.0.0.1");
        assert_eq!(config.session_timeout_secs, 60);
        let bad = BrokerArgs {
            overrides: vec!["consolePort=x".to_owned()],
            ..BrokerArgs::default()
        };
        assert!(resolve(ConsoleConfig::default(), &bad).is_err());
    }
}
