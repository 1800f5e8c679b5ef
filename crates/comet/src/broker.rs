//! `comet broker`: a stand-alone broker configured like Apache RocketMQ's (`broker.conf` keys),
//! and the configuration layering shared with `comet serve`.
//!
//! Layers, later wins: built-in defaults → the `-c` file → `COMET_<KEY>` environment variables
//! (the broker.conf key in SCREAMING_SNAKE_CASE, e.g. `COMET_LISTEN_PORT`, `COMET_BROKER_IP1`) →
//! command-line flags (`-n`, `--set key=value`). Unknown keys warn with the key's name.
//!
//! The broker writes the settings changed while it runs (`updateBrokerConfig`) to its config
//! file, `brokerConfigPath`: the `-c` file when there is one. Without one it is
//! `<storePathRootDir>/config/broker.properties`, which then takes the `-c` file's place in the
//! layers when it exists, so a restart keeps what was changed.

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

/// The value `key` gets from the environment or `--set`, the layers above the file.
fn layered_value(key: &str, args: &BrokerArgs) -> Option<String> {
    let from_set = args.overrides.iter().rev().find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k.trim() == key).then(|| v.trim().to_owned())
    });
    from_set.or_else(|| std::env::var(env_name(key)).ok())
}

/// The config file of the broker: `-c`, else the file where a broker started without one keeps
/// its runtime changes (`brokerConfigPath`, else under `storePathRootDir`, as the layers above
/// the file set them) if it exists.
fn config_file(base: &BrokerConfig, args: &BrokerArgs) -> Result<Option<PathBuf>> {
    if let Some(path) = &args.config_file {
        return Ok(Some(path.clone()));
    }
    let mut probe = base.clone();
    for key in ["storePathRootDir", "brokerConfigPath"] {
        if let Some(value) = layered_value(key, args) {
            probe
                .set(key, &value)
                .with_context(|| format!("bad value for {key}"))?;
        }
    }
    let saved = probe.config_file_path();
    Ok(saved.is_file().then_some(saved))
}

/// Builds the effective configuration from `config` (the base) and the layers above it.
pub fn resolve(mut config: BrokerConfig, args: &BrokerArgs) -> Result<BrokerConfig> {
    let file = config_file(&config, args)?;
    if let Some(path) = &file {
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
        if config.broker_config_path.is_none() {
            // Runtime changes go back to the file the broker read.
            config.broker_config_path = Some(path.clone());
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

/// A running broker and the gRPC endpoint beside it.
pub struct RunningBroker {
    pub handle: BrokerHandle,
    pub grpc: Option<comet_grpc::GrpcEndpoint>,
}

impl RunningBroker {
    /// Where the gRPC endpoint listens, when it runs.
    pub fn grpc_addr(&self) -> Option<std::net::SocketAddr> {
        self.grpc.as_ref().map(|g| g.addr)
    }

    /// Stops the gRPC endpoint, then the broker.
    pub async fn shutdown(self) -> Result<()> {
        if let Some(grpc) = self.grpc {
            grpc.shutdown().await;
        }
        self.handle.shutdown().await.context("broker shutdown")
    }
}

/// Starts a broker, and its gRPC endpoint when its configuration serves one, and logs where
/// clients must reach it. The advertised address is the most common RocketMQ misconfiguration,
/// so one that only this machine can reach while the broker listens beyond it is a warning.
pub async fn start(config: BrokerConfig) -> Result<RunningBroker> {
    let handle = BrokerController::start(config)
        .await
        .context("starting the broker")?;
    let listen = handle.local_addr();
    let advertised = handle.broker_addr();
    if advertises_loopback_only(listen, &advertised) {
        tracing::warn!(%listen, %advertised,
            "broker listens beyond this machine but advertises a loopback address: clients on other \
             machines cannot reach it (set brokerIP1)");
    } else {
        tracing::info!(%listen, %advertised,
            "broker advertises {advertised} to clients (brokerIP1:listenPort)");
    }
    let grpc = match comet_grpc::start(&handle).await {
        Ok(grpc) => grpc,
        Err(e) => {
            if let Err(stop) = handle.shutdown().await {
                tracing::warn!(error = %stop, "broker shutdown after a failed gRPC start");
            }
            return Err(e).context("starting the gRPC endpoint");
        }
    };
    Ok(RunningBroker { handle, grpc })
}

/// Whether a broker listening on `listen` advertises `advertised` ("ip:port") on loopback while
/// it listens on other interfaces too.
fn advertises_loopback_only(listen: std::net::SocketAddr, advertised: &str) -> bool {
    let advertised_loopback = advertised
        .parse::<std::net::SocketAddr>()
        .is_ok_and(|a| a.ip().is_loopback());
    advertised_loopback && !listen.ip().is_loopback()
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
    handle.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_loopback_address_advertised_beyond_loopback_is_a_mistake() {
        let any: std::net::SocketAddr = "0.0.0.0:10911".parse().expect("literal");
        let lo: std::net::SocketAddr = "127.0.0.1:10911".parse().expect("literal");
        assert!(advertises_loopback_only(any, "127.0.0.1:10911"));
        assert!(!advertises_loopback_only(lo, "127.0.0.1:10911"));
        assert!(!advertises_loopback_only(any, "10.0.0.5:10911"));
    }

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
    fn runtime_changes_are_read_back_from_the_broker_config_file() {
        let dir = std::env::temp_dir().join(format!("comet-saved-conf-{}", std::process::id()));
        let saved = dir.join("store").join("config").join("broker.properties");
        std::fs::create_dir_all(saved.parent().unwrap()).unwrap();
        std::fs::write(&saved, "# saved\nflushIntervalCommitLog=900\n").unwrap();
        let root = format!("storePathRootDir={}", dir.join("store").display());
        // Without -c: the saved changes are the file layer, and the file changes go back to.
        let args = BrokerArgs {
            overrides: vec![root.clone()],
            ..BrokerArgs::default()
        };
        let config = resolve(BrokerConfig::default(), &args).unwrap();
        assert_eq!(config.flush_interval_commit_log_ms, 900);
        assert_eq!(config.broker_config_path.as_deref(), Some(saved.as_path()));
        // --set still wins over the saved value.
        let args = BrokerArgs {
            overrides: vec![root.clone(), "flushIntervalCommitLog=700".into()],
            ..BrokerArgs::default()
        };
        assert_eq!(
            resolve(BrokerConfig::default(), &args)
                .unwrap()
                .flush_interval_commit_log_ms,
            700
        );
        // With -c: that file alone is read, and changes go back to it.
        let conf = dir.join("broker.conf");
        std::fs::write(&conf, "brokerName=b9\n").unwrap();
        let args = BrokerArgs {
            config_file: Some(conf.clone()),
            overrides: vec![root],
            ..BrokerArgs::default()
        };
        let config = resolve(BrokerConfig::default(), &args).unwrap();
        assert_eq!(config.flush_interval_commit_log_ms, 500);
        assert_eq!(config.broker_config_path.as_deref(), Some(conf.as_path()));
        std::fs::remove_dir_all(&dir).unwrap();
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
