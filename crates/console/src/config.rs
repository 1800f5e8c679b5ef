//! The console's configuration: its keys (camelCase, as in `broker.conf`), defaults and
//! validation in one place.
//!
//! The keys are read from the same layers as the broker's (file, `COMET_<KEY>` environment
//! variables, `--set key=value`), so [`ConsoleConfig::set`] takes one key and its text value.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::error::ConfigError;

/// Default port of the console.
pub const DEFAULT_PORT: u16 = 8080;
/// Default idle time after which a session ends.
pub const DEFAULT_SESSION_TIMEOUT_SECS: u64 = 1800;
/// Shortest password accepted from the configuration.
pub const MIN_PASSWORD_LEN: usize = 8;
/// Default seconds between two samples of the charts' figures.
pub const DEFAULT_SAMPLE_INTERVAL_SECS: u64 = 10;
/// Longest sample interval accepted (an hour).
pub const MAX_SAMPLE_INTERVAL_SECS: u64 = 3600;

/// One console key for the configuration reference (`docs/configuration.md`).
#[derive(Debug, Clone, Copy)]
pub struct KeyDoc {
    /// The key.
    pub key: &'static str,
    /// The default as text; empty when the key is unset by default.
    pub default: &'static str,
    /// What it means and which values are accepted.
    pub doc: &'static str,
}

/// Everything the console needs to start.
#[derive(Clone, PartialEq, Eq)]
pub struct ConsoleConfig {
    /// `consoleEnable`: whether the broker process serves the console.
    pub enable: bool,
    /// `consoleHost`: the address the console listens on.
    pub host: IpAddr,
    /// `consolePort`: the port the console listens on (0 = any free port).
    pub port: u16,
    /// `consolePassword`: the `admin` account's password. Absent, one is generated at first start
    /// and its hash kept in [`ConsoleConfig::data_dir`].
    pub password: Option<String>,
    /// `consoleReadOnlyPassword`: the password of the read-only `viewer` account; absent, that
    /// account does not exist.
    pub read_only_password: Option<String>,
    /// `consoleSessionTimeoutSecs`: idle seconds after which a session ends.
    pub session_timeout_secs: u64,
    /// Where the generated password's hash is kept (`users.json`).
    pub data_dir: PathBuf,
    /// `consoleAccessKey`: the ACL account the console signs its cluster requests with (needed
    /// when the brokers run with `aclEnable=true`; an admin account to make changes).
    pub access_key: Option<String>,
    /// `consoleSecretKey`: that account's secret key.
    pub secret_key: Option<String>,
    /// `consoleSampleIntervalSecs`: seconds between two samples of the figures the charts
    /// show (message rates, lag).
    pub sample_interval_secs: u64,
}

impl std::fmt::Debug for ConsoleConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleConfig")
            .field("enable", &self.enable)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("password", &self.password.as_ref().map(|_| "<set>"))
            .field(
                "read_only_password",
                &self.read_only_password.as_ref().map(|_| "<set>"),
            )
            .field("session_timeout_secs", &self.session_timeout_secs)
            .field("data_dir", &self.data_dir)
            .field("access_key", &self.access_key)
            .field("secret_key", &self.secret_key.as_ref().map(|_| "<set>"))
            .field("sample_interval_secs", &self.sample_interval_secs)
            .finish()
    }
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        ConsoleConfig {
            enable: true,
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: DEFAULT_PORT,
            password: None,
            read_only_password: None,
            session_timeout_secs: DEFAULT_SESSION_TIMEOUT_SECS,
            data_dir: PathBuf::from("comet-data").join("console"),
            access_key: None,
            secret_key: None,
            sample_interval_secs: DEFAULT_SAMPLE_INTERVAL_SECS,
        }
    }
}

impl ConsoleConfig {
    /// Every key [`ConsoleConfig::set`] knows.
    pub const KEYS: &'static [&'static str] = &[
        "consoleEnable",
        "consoleHost",
        "consolePort",
        "consolePassword",
        "consoleReadOnlyPassword",
        "consoleSessionTimeoutSecs",
        "consoleAccessKey",
        "consoleSecretKey",
        "consoleSampleIntervalSecs",
    ];

    /// Every key with its default and meaning, in the order of [`ConsoleConfig::KEYS`].
    pub const REFERENCE: &'static [KeyDoc] = &[
        KeyDoc {
            key: "consoleEnable",
            default: "true",
            doc: "Serve the console from the `comet serve` or `comet broker` process (`comet \
                  cluster` and `comet console` serve theirs in their own process).",
        },
        KeyDoc {
            key: "consoleHost",
            default: "127.0.0.1",
            doc: "IP the console listens on. It speaks plain HTTP: to expose it, put TLS in \
                  front of it.",
        },
        KeyDoc {
            key: "consolePort",
            default: "8080",
            doc: "Port the console listens on; 0 picks a free port. Under `comet serve` with an \
                  ephemeral broker port (`--broker-listen 127.0.0.1:0`) it is ephemeral too, and \
                  the ready file gains `\"console\":\"host:port\"`.",
        },
        KeyDoc {
            key: "consolePassword",
            default: "",
            doc: "The `admin` (read-write) account's password, at least 8 characters. Unset, \
                  one is generated at first start, printed once and its hash kept in \
                  `users.json` in the console's data directory.",
        },
        KeyDoc {
            key: "consoleReadOnlyPassword",
            default: "",
            doc: "The read-only `viewer` account's password, at least 8 characters and not \
                  `consolePassword`. Unset, there is no `viewer` account.",
        },
        KeyDoc {
            key: "consoleSessionTimeoutSecs",
            default: "1800",
            doc: "Idle seconds after which a session ends (1 to 604800).",
        },
        KeyDoc {
            key: "consoleAccessKey",
            default: "",
            doc: "The ACL 1.0 account the console signs its cluster requests with, for brokers \
                  with `aclEnable=true`; an admin account to create, delete or reset. Set with \
                  `consoleSecretKey` or not at all.",
        },
        KeyDoc {
            key: "consoleSecretKey",
            default: "",
            doc: "The secret key of `consoleAccessKey`.",
        },
        KeyDoc {
            key: "consoleSampleIntervalSecs",
            default: "10",
            doc: "Seconds between two samples of the charts' figures (message rates, lag), 1 to \
                  3600; each series keeps 360 samples.",
        },
    ];

    /// Whether `key` is a console key (they all start with `console`).
    pub fn is_console_key(key: &str) -> bool {
        key.starts_with("console")
    }

    /// Sets `key` from its text form. `Ok(false)` for a key the console does not know.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        let value = value.trim();
        let bad = |reason: &str| ConfigError::BadValue {
            key: key.to_owned(),
            reason: reason.to_owned(),
        };
        match key {
            "consoleEnable" => {
                self.enable = value.parse().map_err(|_| bad("expected true or false"))?;
            }
            "consoleHost" => {
                self.host = value.parse().map_err(|_| bad("expected an IP address"))?;
            }
            "consolePort" => {
                self.port = value.parse().map_err(|_| bad("expected a port number"))?;
            }
            "consolePassword" => {
                self.password = (!value.is_empty()).then(|| value.to_owned());
            }
            "consoleReadOnlyPassword" => {
                self.read_only_password = (!value.is_empty()).then(|| value.to_owned());
            }
            "consoleSessionTimeoutSecs" => {
                self.session_timeout_secs = value
                    .parse()
                    .map_err(|_| bad("expected a number of seconds"))?;
            }
            "consoleAccessKey" => {
                self.access_key = (!value.is_empty()).then(|| value.to_owned());
            }
            "consoleSecretKey" => {
                self.secret_key = (!value.is_empty()).then(|| value.to_owned());
            }
            "consoleSampleIntervalSecs" => {
                self.sample_interval_secs = value
                    .parse()
                    .map_err(|_| bad("expected a number of seconds"))?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Checks the values together: a session lasts at least a second and at most a week, the
    /// sample interval is 1 s to an hour, a configured password is long enough and differs
    /// from the read-only one, and the ACL keys come as a pair.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, reason: &str| ConfigError::BadValue {
            key: key.to_owned(),
            reason: reason.to_owned(),
        };
        if self.session_timeout_secs == 0 || self.session_timeout_secs > 7 * 24 * 3600 {
            return Err(bad(
                "consoleSessionTimeoutSecs",
                "must be between 1 and 604800",
            ));
        }
        for (key, password) in [
            ("consolePassword", &self.password),
            ("consoleReadOnlyPassword", &self.read_only_password),
        ] {
            if password
                .as_ref()
                .is_some_and(|p| p.chars().count() < MIN_PASSWORD_LEN)
            {
                return Err(bad(key, "must be at least 8 characters"));
            }
        }
        if self.sample_interval_secs == 0 || self.sample_interval_secs > MAX_SAMPLE_INTERVAL_SECS {
            return Err(bad(
                "consoleSampleIntervalSecs",
                "must be between 1 and 3600",
            ));
        }
        if self.access_key.is_some() != self.secret_key.is_some() {
            return Err(bad(
                "consoleAccessKey",
                "consoleAccessKey and consoleSecretKey go together",
            ));
        }
        if self.password.is_some() && self.password == self.read_only_password {
            return Err(bad(
                "consoleReadOnlyPassword",
                "must differ from consolePassword",
            ));
        }
        Ok(())
    }

    /// The address to listen on.
    pub fn listen_addr(&self) -> SocketAddr {
        SocketAddr::new(self.host, self.port)
    }

    /// The idle time after which a session ends.
    pub fn session_timeout(&self) -> Duration {
        Duration::from_secs(self.session_timeout_secs)
    }

    /// The time between two samples of the charts' figures.
    pub fn sample_interval(&self) -> Duration {
        Duration::from_secs(self.sample_interval_secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference table names every key once, in the order of `KEYS`, with the default a
    /// fresh configuration has.
    #[test]
    fn the_reference_table_matches_the_keys_and_defaults() {
        let keys: Vec<&str> = ConsoleConfig::REFERENCE.iter().map(|d| d.key).collect();
        assert_eq!(keys, ConsoleConfig::KEYS);
        for doc in ConsoleConfig::REFERENCE {
            let mut c = ConsoleConfig::default();
            assert_eq!(c.set(doc.key, doc.default), Ok(true), "{}", doc.key);
            assert!(c == ConsoleConfig::default(), "default of {}", doc.key);
            assert!(
                !doc.doc.trim().is_empty(),
                "{} has no documentation",
                doc.key
            );
        }
    }

    #[test]
    fn defaults_keys_and_validation() {
        let mut c = ConsoleConfig::default();
        assert!(c.enable);
        assert_eq!(c.listen_addr().to_string(), "127.0.0.1:8080");
        assert_eq!(c.session_timeout_secs, 1800);
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.set("consolePort", "0"), Ok(true));
        assert_eq!(c.set("consoleHost", "0.0.0.0"), Ok(true));
        assert_eq!(c.set("consoleEnable", "false"), Ok(true));
        assert_eq!(c.set("consoleSomething", "1"), Ok(false));
        assert!(c.set("consolePort", "http").is_err());
        assert!(c.set("consoleEnable", "yes").is_err());
        assert_eq!(c.listen_addr().to_string(), "0.0.0.0:0");
        assert!(!c.enable);
        c.set("consoleSessionTimeoutSecs", "0").unwrap();
        assert!(c.validate().is_err());
        c.set("consoleSessionTimeoutSecs", "5").unwrap();
        c.set("consolePassword", "short").unwrap();
        assert!(c.validate().is_err());
        c.set("consolePassword", "long enough").unwrap();
        c.set("consoleReadOnlyPassword", "long enough").unwrap();
        assert!(c.validate().is_err(), "the two accounts share a password");
        c.set("consoleReadOnlyPassword", "another one").unwrap();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.sample_interval().as_secs(), 10);
        c.set("consoleSampleIntervalSecs", "0").unwrap();
        assert!(c.validate().is_err());
        c.set("consoleSampleIntervalSecs", "3601").unwrap();
        assert!(c.validate().is_err());
        c.set("consoleSampleIntervalSecs", "2").unwrap();
        assert_eq!(c.validate(), Ok(()));
        assert!(c.set("consoleSampleIntervalSecs", "soon").is_err());
        assert!(
            !format!("{c:?}").contains("long enough"),
            "Debug hides passwords"
        );
    }
}
