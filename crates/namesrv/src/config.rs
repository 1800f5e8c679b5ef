//! `NamesrvConfig`: every setting of the name server, its defaults and its validation, in one
//! place.
//!
//! Defaults are RocketMQ's: port 9876, an expiry scan every 5 s, brokers
//! forgotten after 120 s without a registration. A broker may shorten or lengthen its own expiry
//! with the `heartbeatTimeoutMillis` header of REGISTER_BROKER; the configured value applies to
//! brokers that do not send it (every 4.x broker).

use std::path::PathBuf;
use std::time::Duration;

use comet_remoting::limits::{DEFAULT_IDLE_TIMEOUT, DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK};
use comet_remoting::{ServerConfig, ServerConfigError, TlsConfig};
use thiserror::Error;

/// Default listen address. Loopback, so a default start exposes nothing; deployments set
/// `0.0.0.0:9876` explicitly.
pub const DEFAULT_LISTEN_ADDR: &str = "127.0.0.1:9876";
/// Default data directory (holds `kvConfig.json`).
pub const DEFAULT_DATA_DIR: &str = "namesrv-data";
/// File name of the persisted KV config inside the data directory (RocketMQ's name).
pub const KV_CONFIG_FILE_NAME: &str = "kvConfig.json";
/// How often brokers are checked for expiry (`scanNotActiveBrokerInterval`).
pub const DEFAULT_SCAN_INTERVAL: Duration = Duration::from_secs(5);
/// How long a broker stays registered without re-registering (`DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`).
pub const DEFAULT_BROKER_EXPIRY: Duration = Duration::from_secs(120);
/// Shortest accepted scan interval: a tighter loop would only burn CPU.
pub const MIN_SCAN_INTERVAL: Duration = Duration::from_millis(10);
/// Longest accepted broker expiry: a dead broker must leave the routes within a day.
pub const MAX_BROKER_EXPIRY: Duration = Duration::from_secs(24 * 60 * 60);

/// A configuration value is out of range.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    #[error("listen address must not be empty")]
    EmptyListenAddr,
    #[error("data directory must not be empty")]
    EmptyDataDir,
    #[error("scan interval {0:?} is shorter than the minimum {MIN_SCAN_INTERVAL:?}")]
    ScanIntervalTooShort(Duration),
    #[error("broker expiry {0:?} must be positive and at most {MAX_BROKER_EXPIRY:?}")]
    BrokerExpiryOutOfRange(Duration),
    #[error(transparent)]
    Listener(#[from] ServerConfigError),
}

/// When a change of a name server key takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// `updateNamesrvConfig` changes it while the name server runs (until it stops).
    Live,
    /// Read only at start: an update is refused with INVALID_PARAMETER naming the key.
    Start,
    /// Shown by `getNamesrvConfig` but never changed by a tool: an update is refused with
    /// NO_PERMISSION, as Apache RocketMQ refuses it.
    Never,
}

/// One name server key for the configuration reference (`docs/configuration.md`).
#[derive(Debug, Clone, Copy)]
pub struct KeyDoc {
    /// The key, as `getNamesrvConfig` lists it and `updateNamesrvConfig` takes it.
    pub key: &'static str,
    /// The default of `comet namesrv`, as `getNamesrvConfig` shows it.
    pub default: &'static str,
    /// The `comet namesrv` flag that sets it, or empty when no flag does.
    pub flag: &'static str,
    /// When a change takes effect.
    pub applied: Applied,
    /// What it means.
    pub doc: &'static str,
}

impl NamesrvConfig {
    /// Every key `getNamesrvConfig` lists, in its order (sorted by key).
    pub const REFERENCE: &'static [KeyDoc] = &[
        KeyDoc {
            key: "bindAddress",
            default: "127.0.0.1",
            flag: "--listen",
            applied: Applied::Start,
            doc: "IP the listener binds: the host part of `--listen` (default \
                  `127.0.0.1:9876`, so a default start is reachable from this machine only; \
                  deployments give `0.0.0.0:9876`).",
        },
        KeyDoc {
            key: "configBlackList",
            default: "configBlackList;configStorePath;kvConfigPath",
            flag: "",
            applied: Applied::Never,
            doc: "Keys `updateNamesrvConfig` refuses with NO_PERMISSION (Apache's default list).",
        },
        KeyDoc {
            key: "kvConfigPath",
            default: "<data dir>/kvConfig.json",
            flag: "--data-dir",
            applied: Applied::Never,
            doc: "The KV config file (`mqadmin updateKvConfig`, the order-topic configuration). \
                  Its directory is `--data-dir`: `comet-data/namesrv` for `comet namesrv`, \
                  `<--data-dir>/namesrv` for `comet serve`.",
        },
        KeyDoc {
            key: "listenPort",
            default: "9876",
            flag: "--listen",
            applied: Applied::Start,
            doc: "Port of the listener: the port part of `--listen`; 0 picks an ephemeral port.",
        },
        KeyDoc {
            key: "orderMessageEnable",
            default: "true",
            flag: "",
            applied: Applied::Live,
            doc: "Put the order-topic configuration (KV namespace `ORDER_TOPIC_CONFIG`, filled by \
                  `mqadmin updateOrderConf`) into topic routes. Apache's default is `false`; \
                  Comet's is `true`, because the namespace stays empty until an operator fills \
                  it, and one who does wants it used.",
        },
        KeyDoc {
            key: "scanNotActiveBrokerInterval",
            default: "5000",
            flag: "",
            applied: Applied::Start,
            doc: "Period, in ms, of the scan that drops brokers whose registration expired \
                  (after 120 s, or the `heartbeatTimeoutMillis` a broker's registration \
                  announces). Fixed \
                  in `comet namesrv`: no flag sets it.",
        },
        KeyDoc {
            key: "serverChannelMaxIdleTimeSeconds",
            default: "120",
            flag: "--server-channel-max-idle-time-seconds",
            applied: Applied::Start,
            doc: "Connections that send nothing for this many seconds are closed; 0 never \
                  closes them. Under `comet serve`, the broker's key of the same name.",
        },
        KeyDoc {
            key: "writeBufferHighWaterMark",
            default: "4194304",
            flag: "--write-buffer-high-water-mark",
            applied: Applied::Start,
            doc: "Unsent bytes of one connection above which it stops reading requests. Under \
                  `comet serve`, the broker's key of the same name.",
        },
    ];
}

/// Settings of a [`crate::NameServer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamesrvConfig {
    /// Address to listen on; `127.0.0.1:0` picks a free port (tests).
    pub listen_addr: String,
    /// Directory of the persisted state (`kvConfig.json`).
    pub data_dir: PathBuf,
    /// Period of the broker expiry scan.
    pub scan_interval: Duration,
    /// Expiry of brokers that do not announce their own `heartbeatTimeoutMillis`.
    pub broker_expiry: Duration,
    /// Put `orderTopicConf` (KV namespace `ORDER_TOPIC_CONFIG`) into topic routes.
    ///
    /// Java's `orderMessageEnable` defaults to `false`; Comet defaults to `true` because the
    /// namespace stays empty unless an operator fills it (`mqadmin updateOrderConf`), and an
    /// operator who does so wants it used.
    pub order_message_enable: bool,
    /// Close connections that send nothing for this long (`serverChannelMaxIdleTimeSeconds`);
    /// `None` never closes them.
    pub idle_timeout: Option<Duration>,
    /// Unsent bytes of one connection above which it stops reading (`writeBufferHighWaterMark`).
    pub write_buffer_high_water_mark: usize,
    /// TLS on the listener (`comet serve` shares the broker's), `None` for plaintext only.
    pub tls: Option<TlsConfig>,
}

impl Default for NamesrvConfig {
    fn default() -> Self {
        Self {
            listen_addr: DEFAULT_LISTEN_ADDR.to_string(),
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            scan_interval: DEFAULT_SCAN_INTERVAL,
            broker_expiry: DEFAULT_BROKER_EXPIRY,
            order_message_enable: true,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            write_buffer_high_water_mark: DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK,
            tls: None,
        }
    }
}

impl NamesrvConfig {
    /// Defaults with the given listen address and data directory.
    pub fn new(listen_addr: impl Into<String>, data_dir: impl Into<PathBuf>) -> Self {
        Self {
            listen_addr: listen_addr.into(),
            data_dir: data_dir.into(),
            ..Self::default()
        }
    }

    /// Checks every value; [`crate::NameServer::start`] refuses an invalid configuration.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.listen_addr.trim().is_empty() {
            return Err(ConfigError::EmptyListenAddr);
        }
        if self.data_dir.as_os_str().is_empty() {
            return Err(ConfigError::EmptyDataDir);
        }
        if self.scan_interval < MIN_SCAN_INTERVAL {
            return Err(ConfigError::ScanIntervalTooShort(self.scan_interval));
        }
        if self.broker_expiry.is_zero() || self.broker_expiry > MAX_BROKER_EXPIRY {
            return Err(ConfigError::BrokerExpiryOutOfRange(self.broker_expiry));
        }
        self.server_config().validate()?;
        Ok(())
    }

    /// The listener settings.
    pub fn server_config(&self) -> ServerConfig {
        ServerConfig {
            idle_timeout: self.idle_timeout,
            write_buffer_high_water_mark: self.write_buffer_high_water_mark,
            tls: self.tls.clone(),
            ..ServerConfig::new(self.listen_addr.clone())
        }
    }

    /// Path of the persisted KV config.
    pub fn kv_config_path(&self) -> PathBuf {
        self.data_dir.join(KV_CONFIG_FILE_NAME)
    }

    /// The default broker expiry in milliseconds, as stored in the live table.
    pub fn broker_expiry_millis(&self) -> i64 {
        i64::try_from(self.broker_expiry.as_millis()).unwrap_or(i64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_rocketmq_defaults_and_valid() {
        let c = NamesrvConfig::default();
        assert_eq!(c.listen_addr, "127.0.0.1:9876");
        assert_eq!(c.scan_interval, Duration::from_secs(5));
        assert_eq!(c.broker_expiry_millis(), 120_000);
        assert_eq!(
            c.kv_config_path(),
            PathBuf::from("namesrv-data/kvConfig.json")
        );
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn rejects_out_of_range_values() {
        let mut c = NamesrvConfig::new("", "d");
        assert_eq!(c.validate(), Err(ConfigError::EmptyListenAddr));
        c.listen_addr = "127.0.0.1:0".into();
        c.data_dir = PathBuf::new();
        assert_eq!(c.validate(), Err(ConfigError::EmptyDataDir));
        c.data_dir = "d".into();
        c.scan_interval = Duration::ZERO;
        assert_eq!(
            c.validate(),
            Err(ConfigError::ScanIntervalTooShort(Duration::ZERO))
        );
        c.scan_interval = DEFAULT_SCAN_INTERVAL;
        c.broker_expiry = Duration::ZERO;
        assert!(matches!(
            c.validate(),
            Err(ConfigError::BrokerExpiryOutOfRange(_))
        ));
        c.broker_expiry = MAX_BROKER_EXPIRY + Duration::from_secs(1);
        assert!(matches!(
            c.validate(),
            Err(ConfigError::BrokerExpiryOutOfRange(_))
        ));
        c.broker_expiry = MAX_BROKER_EXPIRY;
        assert_eq!(c.validate(), Ok(()));
    }
}
