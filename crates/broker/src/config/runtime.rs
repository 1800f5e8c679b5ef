//! The broker's configuration while it runs: the values in force, and their change by
//! `updateBrokerConfig`.
//!
//! [`RuntimeConfig`] holds the configuration in force as one immutable [`BrokerConfig`] that an
//! update replaces whole. Request handlers read the keys marked *live* in the configuration
//! table from it on every use (`BrokerContext::live_config`), so a change reaches the next
//! request, and so do the services that share it (the HA connections, the registration); the
//! services that keep their own copy of a key are told by the broker right after the swap, and
//! the tasks that wait a configured period or keep a registration up to date wait on
//! [`RuntimeConfig::subscribe`] too, so a change wakes them. Keys marked *start* are read once
//! when the broker starts and are never changed here.
//!
//! An update is all or nothing: every key is checked (black list, known, live, value parses, the
//! whole configuration still validates) before anything changes; then the changed keys are
//! written to the config file ([`super::persist`]); only once that succeeded is the new
//! configuration put in force. Updates run one at a time.

use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};
use parking_lot::Mutex;
use thiserror::Error;
use tokio::sync::watch;

use super::{Applied, BrokerConfig, ConfigError, persist};

/// Why an update was refused; nothing was changed.
#[derive(Debug, Error)]
pub enum UpdateError {
    /// The key is in the black list (the remark is Apache's, word for word).
    #[error("Can not update config in black list.")]
    BlackListed { key: String },
    /// The key is read only at start.
    #[error(
        "{key} takes effect only when the broker starts: change it in the broker's config file \
         and restart; nothing was changed"
    )]
    AtStart { key: String },
    /// This broker has no such key.
    #[error("unknown broker config key `{key}`: Comet has no such setting; nothing was changed")]
    Unknown { key: String },
    /// A value does not parse, or the configuration it makes is invalid.
    #[error("{0}; nothing was changed")]
    Invalid(#[from] ConfigError),
    /// The config file could not be written, so the change would not survive a restart.
    #[error("cannot write the change to {}: {reason}; nothing was changed", path.display())]
    Persist { path: PathBuf, reason: String },
}

/// Keys an update sets, each with its value as written to the config file.
pub type SetKeys = Vec<(&'static str, String)>;

/// An update that was put in force.
#[derive(Debug, Clone)]
pub struct ConfigChange {
    /// The configuration before.
    pub previous: Arc<BrokerConfig>,
    /// The configuration now in force.
    pub current: Arc<BrokerConfig>,
    /// The keys the update set, with their values as written to the file.
    pub keys: SetKeys,
    /// The file they were written to.
    pub file: PathBuf,
}

/// The configuration in force (see the module docs).
#[derive(Debug)]
pub struct RuntimeConfig {
    current: ArcSwap<BrokerConfig>,
    /// Held through a whole update: check, write, swap.
    updating: Mutex<()>,
    /// Marked after each swap, for the tasks waiting on [`RuntimeConfig::subscribe`].
    changes: watch::Sender<()>,
}

impl RuntimeConfig {
    /// The configuration the broker started with, in force.
    pub fn new(config: Arc<BrokerConfig>) -> Self {
        RuntimeConfig {
            current: ArcSwap::new(config),
            updating: Mutex::new(()),
            changes: watch::Sender::new(()),
        }
    }

    /// A receiver marked changed after each update put in force from now on: a task waiting a
    /// period read from the configuration waits on it too, and reads the period again when it
    /// fires (it fires with an error once the configuration is gone).
    pub fn subscribe(&self) -> watch::Receiver<()> {
        self.changes.subscribe()
    }

    /// The configuration in force, to keep.
    pub fn current(&self) -> Arc<BrokerConfig> {
        self.current.load_full()
    }

    /// The configuration in force, to read a key of now (a guard, not to keep).
    pub fn read(&self) -> Guard<Arc<BrokerConfig>> {
        self.current.load()
    }

    /// Checks `pairs` (`key`, value text) whole, writes them to the config file and puts them in
    /// force (see the module docs). A key given twice takes its last value.
    pub fn update(&self, pairs: &[(String, String)]) -> Result<ConfigChange, UpdateError> {
        let _one_at_a_time = self.updating.lock();
        let previous = self.current();
        let (candidate, keys) = Self::check(&previous, pairs)?;
        let file = previous.config_file_path();
        if !keys.is_empty() {
            persist::write_changes(&file, &keys).map_err(|e| UpdateError::Persist {
                path: file.clone(),
                reason: e.to_string(),
            })?;
        }
        let current = Arc::new(candidate);
        self.current.store(Arc::clone(&current));
        if !keys.is_empty() {
            self.changes.send_replace(());
        }
        Ok(ConfigChange {
            previous,
            current,
            keys,
            file,
        })
    }

    /// The configuration `pairs` make of `base`, and the keys they set with the values to
    /// write, or why they are refused.
    fn check(
        base: &BrokerConfig,
        pairs: &[(String, String)],
    ) -> Result<(BrokerConfig, SetKeys), UpdateError> {
        if let Some((key, _)) = pairs.iter().find(|(k, _)| base.is_black_listed(k.trim())) {
            return Err(UpdateError::BlackListed { key: key.clone() });
        }
        let mut candidate = base.clone();
        let mut keys: Vec<&'static str> = Vec::new();
        for (key, value) in pairs {
            let (key, value) = (key.trim(), value.trim());
            let known = BrokerConfig::KEYS.iter().find(|k| **k == key);
            let Some(&known) = known else {
                return Err(UpdateError::Unknown {
                    key: key.to_owned(),
                });
            };
            if BrokerConfig::applied(known) != Some(Applied::Live) {
                return Err(UpdateError::AtStart {
                    key: key.to_owned(),
                });
            }
            if value.ends_with('\\') {
                return Err(UpdateError::Invalid(ConfigError::Invalid {
                    key: known,
                    reason: "a value may not end with a backslash".to_owned(),
                }));
            }
            candidate.set(known, value)?;
            if !keys.contains(&known) {
                keys.push(known);
            }
        }
        candidate.validate()?;
        let entries = candidate.entries();
        let written = keys
            .into_iter()
            .map(|key| {
                let value = entries
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                (key, value)
            })
            .collect();
        Ok((candidate, written))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn runtime(dir: &std::path::Path) -> RuntimeConfig {
        RuntimeConfig::new(Arc::new(BrokerConfig {
            store_path_root_dir: dir.to_path_buf(),
            ..BrokerConfig::default()
        }))
    }

    #[test]
    fn an_update_is_checked_whole_written_then_put_in_force() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = runtime(dir.path());
        let change = config
            .update(&pairs(&[
                ("flushIntervalCommitLog", " 900"),
                ("slaveReadEnable", "TRUE"),
                ("deleteWhen", "01;02"),
            ]))
            .expect("accepted");
        assert_eq!(change.previous.flush_interval_commit_log_ms, 500);
        let now = config.current();
        assert_eq!(now.flush_interval_commit_log_ms, 900);
        assert!(now.slave_read_enable);
        assert_eq!(now.delete_when, "01;02");
        assert_eq!(change.file, dir.path().join("config/broker.properties"));
        let text = std::fs::read_to_string(&change.file).expect("written");
        for line in [
            "flushIntervalCommitLog=900",
            "slaveReadEnable=true",
            "deleteWhen=01;02",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing: {text}");
        }
    }

    #[test]
    fn a_refused_update_changes_nothing_and_writes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = runtime(dir.path());
        let before = config.current();
        let refused = [
            (
                pairs(&[("flushIntervalCommitLog", "900"), ("rocketmqHome", "/x")]),
                "black list",
            ),
            (
                pairs(&[("flushIntervalCommitLog", "900"), ("listenPort", "1")]),
                "only when the broker starts",
            ),
            (
                pairs(&[("flushIntervalCommitLog", "900"), ("noSuchKey", "1")]),
                "unknown broker config key `noSuchKey`",
            ),
            (
                pairs(&[("flushIntervalCommitLog", "abc")]),
                "flushIntervalCommitLog",
            ),
            (
                pairs(&[
                    ("flushIntervalCommitLog", "900"),
                    ("flushIntervalConsumeQueue", "1"),
                ]),
                "flushIntervalConsumeQueue",
            ),
            (pairs(&[("deleteWhen", "4am")]), "deleteWhen"),
            (
                pairs(&[("diskMaxUsedSpaceRatio", "101")]),
                "diskMaxUsedSpaceRatio",
            ),
            (pairs(&[("regionId", "a\\")]), "regionId"),
        ];
        for (update, named) in refused {
            let err = config.update(&update).expect_err("refused");
            assert!(err.to_string().contains(named), "{update:?}: {err}");
            assert_eq!(*config.current(), *before, "{update:?} changed the config");
        }
        assert!(!dir.path().join("config/broker.properties").exists());
    }

    #[test]
    fn an_update_put_in_force_wakes_the_subscribers_and_a_refused_one_does_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = runtime(dir.path());
        let mut changes = config.subscribe();
        assert!(!changes.has_changed().expect("open"));
        config
            .update(&pairs(&[("timerFlushIntervalMs", "5")]))
            .expect_err("refused: under 10 ms");
        assert!(!changes.has_changed().expect("open"), "refused, yet woken");
        config
            .update(&pairs(&[("timerFlushIntervalMs", "250")]))
            .expect("accepted");
        assert!(changes.has_changed().expect("open"));
        changes.mark_unchanged();
        assert_eq!(config.read().timer_flush_interval_ms, 250);
        config.update(&[]).expect("an empty update is accepted");
        assert!(!changes.has_changed().expect("open"), "nothing changed");
    }

    #[test]
    fn the_black_list_is_apaches_plus_config_black_list() {
        let config = BrokerConfig {
            config_black_list: "configBlackList;brokerConfigPath; maxMessageSize".to_owned(),
            ..BrokerConfig::default()
        };
        for key in [
            "brokerConfigPath",
            "rocketmqHome",
            "configBlackList",
            "maxMessageSize",
        ] {
            assert!(config.is_black_listed(key), "{key}");
        }
        assert!(!config.is_black_listed("flushIntervalCommitLog"));
        assert!(!BrokerConfig::default().is_black_listed("maxMessageSize"));
        assert!(!BrokerConfig::default().is_black_listed(""));
    }
}
