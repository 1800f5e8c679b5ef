//! `comet namesrv`: a stand-alone name server, for deployments that run brokers separately.
//! With `-c namesrv.conf` and `enableControllerInNamesrv=true` in it, the process also runs a
//! controller (the file's controller keys), as Apache's name server does.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use comet_controller::{Controller, ControllerConfig, ControllerHandle};
use comet_namesrv::{NameServer, NameServerHandle, NamesrvConfig};
use comet_remoting::limits::{DEFAULT_IDLE_TIMEOUT, DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK};

#[derive(Debug, Args)]
pub struct NamesrvArgs {
    /// A RocketMQ `namesrv.conf` (listenPort, bindAddress, orderMessageEnable, ...); with
    /// `enableControllerInNamesrv=true` its controller keys start a controller beside the name
    /// server. Its keys override the flags.
    #[arg(short = 'c', long = "config-file")]
    pub config_file: Option<PathBuf>,
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

/// A name server's file: its own settings and, when embedded, a controller's.
struct NamesrvFile {
    config: NamesrvConfig,
    controller: Option<ControllerConfig>,
}

fn parse_bool(key: &str, value: &str) -> Result<bool> {
    match value.trim() {
        v if v.eq_ignore_ascii_case("true") => Ok(true),
        v if v.eq_ignore_ascii_case("false") => Ok(false),
        other => bail!("{key}: expected true or false, got {other:?}"),
    }
}

fn parse_number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T> {
    value
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("{key}: not a number: {value:?}"))
}

/// Applies `namesrv.conf` text over `config`.
fn apply_file(mut config: NamesrvConfig, text: &str) -> Result<NamesrvFile> {
    let (mut host, mut port) = match config.listen_addr.rsplit_once(':') {
        Some((h, p)) => (h.to_owned(), p.to_owned()),
        None => (config.listen_addr.clone(), "9876".to_owned()),
    };
    let mut controller = ControllerConfig {
        store_path: crate::default_data_dir().join("controller"),
        ..ControllerConfig::default()
    };
    let mut embedded = false;
    for (key, value) in comet_config_file::properties::parse_pairs(text)? {
        match key.as_str() {
            "bindAddress" => host = value.clone(),
            "listenPort" => port = value.clone(),
            "orderMessageEnable" => config.order_message_enable = parse_bool(&key, &value)?,
            "serverChannelMaxIdleTimeSeconds" => {
                let secs: u64 = parse_number(&key, &value)?;
                config.idle_timeout = (secs > 0).then(|| Duration::from_secs(secs));
            }
            "writeBufferHighWaterMark" => {
                config.write_buffer_high_water_mark = parse_number(&key, &value)?;
            }
            "enableControllerInNamesrv" => embedded = parse_bool(&key, &value)?,
            _ => {}
        }
        // Both read scanNotActiveBrokerInterval; the controller reads its own keys too.
        if key == "scanNotActiveBrokerInterval" {
            config.scan_interval = Duration::from_millis(parse_number(&key, &value)?);
        }
        let known_to_namesrv = NamesrvConfig::REFERENCE.iter().any(|k| k.key == key)
            || key == "enableControllerInNamesrv";
        let known_to_controller = key != "bindAddress" && controller.set(&key, &value)?;
        if !known_to_namesrv
            && !known_to_controller
            && !comet_controller::config::IGNORED_KEYS.contains(&key.as_str())
        {
            tracing::warn!(key = %key, "unknown name server configuration key ignored");
        }
    }
    config.listen_addr = format!("{host}:{port}");
    Ok(NamesrvFile {
        config,
        controller: embedded.then_some(controller),
    })
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
    let file = match &args.config_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading name server config {}", path.display()))?;
            apply_file(config, &text)
                .with_context(|| format!("parsing name server config {}", path.display()))?
        }
        None => NamesrvFile {
            config,
            controller: None,
        },
    };
    let handle = start_with(file.config).await?;
    tracing::info!(listen = %handle.local_addr(), "name server serving");
    let controller: Option<ControllerHandle> = match file.controller {
        Some(config) => {
            let controller = Controller::start(config)
                .await
                .context("starting the controller inside the name server")?;
            tracing::info!(listen = %controller.local_addr(), "controller serving");
            Some(controller)
        }
        None => None,
    };
    crate::wait_for_signal().await?;
    tracing::info!("shutting down");
    if let Some(controller) = controller {
        controller.shutdown().await;
    }
    handle.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namesrv_conf_with_an_embedded_controller_is_read() {
        let base = NamesrvConfig::new("127.0.0.1:9876", "/tmp/ns");
        let file = apply_file(
            base.clone(),
            "listenPort=19876\nenableControllerInNamesrv=true\n\
             controllerDLegerGroup=g\ncontrollerDLegerPeers=n0-127.0.0.1:19878\n\
             controllerDLegerSelfId=n0\ncontrollerStorePath=/tmp/c\n\
             scanNotActiveBrokerInterval=2000\n",
        )
        .expect("parses");
        assert_eq!(file.config.listen_addr, "127.0.0.1:19876");
        assert_eq!(file.config.scan_interval, Duration::from_millis(2000));
        let controller = file.controller.expect("embedded controller");
        assert_eq!(controller.group, "g");
        assert_eq!(controller.scan_interval, Duration::from_millis(2000));
        controller.validate().expect("valid");

        let plain = apply_file(base, "orderMessageEnable=true\n").expect("parses");
        assert!(plain.controller.is_none());
        assert!(plain.config.order_message_enable);
    }

    #[test]
    fn a_bad_value_names_its_key() {
        let base = NamesrvConfig::new("127.0.0.1:9876", "/tmp/ns");
        let err = apply_file(base, "orderMessageEnable=maybe\n")
            .err()
            .expect("refused");
        assert!(format!("{err:#}").contains("orderMessageEnable"), "{err:#}");
    }
}
