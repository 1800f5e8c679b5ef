//! `ControllerConfig`: every setting of a controller, its defaults and its validation, in one
//! place. The keys are Apache RocketMQ's `controller.conf` keys, so an Apache controller's file
//! starts a Comet controller unchanged (the DLedger peers then run openraft).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use comet_config_file::properties::{PropertiesError, parse_pairs};
use thiserror::Error;

/// Default Raft group name (`controllerDLegerGroup`).
pub const DEFAULT_GROUP: &str = "DefaultControllerGroup";
/// Default peers (`controllerDLegerPeers`): one controller on loopback, Apache's default port.
pub const DEFAULT_PEERS: &str = "n0-127.0.0.1:9878";
/// How often brokers are checked for missed heartbeats (`scanNotActiveBrokerInterval`).
pub const DEFAULT_SCAN_INTERVAL: Duration = Duration::from_secs(5);
/// Shortest accepted scan interval.
pub const MIN_SCAN_INTERVAL: Duration = Duration::from_millis(100);
/// A broker's heartbeat timeout when its heartbeat does not name one (Apache's default).
pub const DEFAULT_BROKER_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(10);
/// Most controllers one quorum may name.
pub const MAX_PEERS: usize = 9;

/// Apache controller keys that configure things Comet does not have (DLedger's segment size,
/// Java thread pools, jRaft, metrics exporters). Accepted without a warning and without effect.
pub const IGNORED_KEYS: &[&str] = &[
    "mappedFileSize",
    "controllerThreadPoolNums",
    "controllerRequestThreadPoolQueueCapacity",
    "rocketmqHome",
    "configStorePath",
    "isProcessReadEvent",
    "scanInactiveMasterInterval",
    "listenPort",
    "electMasterMaxRetryCount",
    "metricsExporterType",
    "metricsPromExporterPort",
    "metricsPromExporterHost",
    "jRaftGroupId",
    "jRaftServerId",
    "jRaftInitConf",
    "jRaftControllerRPCAddr",
    "jRaftElectionTimeoutMs",
    "jRaftSnapshotIntervalSecs",
];

/// One controller key for the configuration reference (`docs/configuration.md`).
#[derive(Debug, Clone, Copy)]
pub struct KeyDoc {
    pub key: &'static str,
    /// The default of `comet controller`.
    pub default: &'static str,
    pub doc: &'static str,
}

impl ControllerConfig {
    /// Every key `comet controller` reads, sorted by key.
    pub const REFERENCE: &'static [KeyDoc] = &[
        KeyDoc {
            key: "bindAddress",
            default: "",
            doc: "Host the controller listens on, with the port of its own entry in \
                  `controllerDLegerPeers`; unset, the host of that entry.",
        },
        KeyDoc {
            key: "controllerDLegerGroup",
            default: DEFAULT_GROUP,
            doc: "Name of the quorum (every controller of it gives the same); \
                  CONTROLLER_GET_METADATA_INFO and `getControllerMetaData` show it.",
        },
        KeyDoc {
            key: "controllerDLegerPeers",
            default: DEFAULT_PEERS,
            doc: "Every controller of the quorum, `id-host:port` separated by `;` (at most 9). \
                  The id ends with the controller's number (`n0`, `n1`, ...). Brokers list the \
                  same addresses in `controllerAddr`. The quorum keeps working while a majority \
                  of them runs.",
        },
        KeyDoc {
            key: "controllerDLegerSelfId",
            default: "n0",
            doc: "Which entry of `controllerDLegerPeers` this controller is; it listens on that \
                  entry's address.",
        },
        KeyDoc {
            key: "controllerStorePath",
            default: "comet-data/controller",
            doc: "Directory of the Raft log, vote and snapshots (`raft.redb`); a restarted \
                  controller reads its state back from it.",
        },
        KeyDoc {
            key: "controllerType",
            default: "DLedger",
            doc: "Accepted as `DLedger` or `jRaft` (Apache's two engines); Comet's controllers \
                  run openraft for either, so they form a quorum only with each other.",
        },
        KeyDoc {
            key: "enableElectUncleanMaster",
            default: "false",
            doc: "When no replica of the SyncStateSet is alive, elect another living replica. \
                  It lacks messages the old master acknowledged: they are lost.",
        },
        KeyDoc {
            key: "notifyBrokerRoleChanged",
            default: "true",
            doc: "After an election, tell the group's living brokers at once \
                  (NOTIFY_BROKER_ROLE_CHANGED) rather than at their next poll (5 s).",
        },
        KeyDoc {
            key: "scanNotActiveBrokerInterval",
            default: "5000",
            doc: "Period, in ms (at least 100), of the scan that finds brokers whose heartbeats \
                  are older than the timeout they announced (`controllerHeartBeatTimeoutMills`, \
                  10 s by default), and elects a new master when one of them was a master. A \
                  killed broker is found at once, when its connection closes.",
        },
    ];
}

/// A controller configuration value is missing or out of range.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    #[error("controller.conf {0}")]
    Syntax(#[from] PropertiesError),
    #[error("{key}: {reason}")]
    Invalid { key: &'static str, reason: String },
}

fn invalid(key: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        reason: reason.into(),
    }
}

/// Every setting of one controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    /// `controllerDLegerGroup`: the quorum's name.
    pub group: String,
    /// `controllerDLegerPeers`: `id-host:port` entries separated by `;`.
    pub peers: String,
    /// `controllerDLegerSelfId`: which entry of the peers this controller is.
    pub self_id: String,
    /// `controllerStorePath`: where the Raft log and snapshots live.
    pub store_path: PathBuf,
    /// `scanNotActiveBrokerInterval`.
    pub scan_interval: Duration,
    /// `enableElectUncleanMaster`: elect a replica outside the SyncStateSet when none in it is
    /// alive. Off by default: such a master lacks messages the old one acknowledged.
    pub elect_unclean_master: bool,
    /// `notifyBrokerRoleChanged`: tell a group's brokers of a master the controller elected.
    pub notify_broker_role_changed: bool,
    /// `bindAddress`: the host to listen on, with the port of this controller's peer entry
    /// (unset: the peer entry's host).
    pub bind_address: Option<String>,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            group: DEFAULT_GROUP.to_owned(),
            peers: DEFAULT_PEERS.to_owned(),
            self_id: "n0".to_owned(),
            store_path: PathBuf::from("controller-data"),
            scan_interval: DEFAULT_SCAN_INTERVAL,
            elect_unclean_master: false,
            notify_broker_role_changed: true,
            bind_address: None,
        }
    }
}

/// One controller of the quorum as the peers list names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// The name in the list (`n0`).
    pub name: String,
    /// Raft node id: the number the name ends with.
    pub node_id: u64,
    /// `host:port` it serves brokers and its peers on.
    pub addr: String,
}

fn parse_bool(key: &'static str, value: &str) -> Result<bool, ConfigError> {
    match value.trim() {
        v if v.eq_ignore_ascii_case("true") => Ok(true),
        v if v.eq_ignore_ascii_case("false") => Ok(false),
        other => Err(invalid(
            key,
            format!("expected true or false, got {other:?}"),
        )),
    }
}

impl ControllerConfig {
    /// Applies `controller.conf` text over `self` and returns the keys it does not know.
    pub fn apply_text(&mut self, text: &str) -> Result<Vec<String>, ConfigError> {
        let mut unknown = Vec::new();
        for (key, value) in parse_pairs(text)? {
            if !self.set(&key, &value)? && !IGNORED_KEYS.contains(&key.as_str()) {
                unknown.push(key);
            }
        }
        Ok(unknown)
    }

    /// Sets one key; `Ok(false)` when the key is not a controller key.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        match key {
            "controllerDLegerGroup" => self.group = value.to_owned(),
            "controllerDLegerPeers" => self.peers = value.to_owned(),
            "controllerDLegerSelfId" => self.self_id = value.to_owned(),
            "controllerStorePath" => self.store_path = PathBuf::from(value),
            "scanNotActiveBrokerInterval" => {
                let millis: u64 = value.trim().parse().map_err(|_| {
                    invalid(
                        "scanNotActiveBrokerInterval",
                        format!("not a number: {value:?}"),
                    )
                })?;
                self.scan_interval = Duration::from_millis(millis);
            }
            "enableElectUncleanMaster" => {
                self.elect_unclean_master = parse_bool("enableElectUncleanMaster", value)?;
            }
            "notifyBrokerRoleChanged" => {
                self.notify_broker_role_changed = parse_bool("notifyBrokerRoleChanged", value)?;
            }
            "bindAddress" => self.bind_address = Some(value.trim().to_owned()),
            "controllerType" => {
                // DLedger and jRaft are Apache's two engines; Comet runs openraft for either.
                if !(value.eq_ignore_ascii_case("DLedger") || value.eq_ignore_ascii_case("jRaft")) {
                    return Err(invalid("controllerType", format!("unknown type {value:?}")));
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The quorum's controllers, in node-id order.
    pub fn parse_peers(&self) -> Result<Vec<Peer>, ConfigError> {
        let key = "controllerDLegerPeers";
        let mut peers: BTreeMap<u64, Peer> = BTreeMap::new();
        for entry in self
            .peers
            .split(';')
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            let (name, addr) = entry
                .split_once('-')
                .ok_or_else(|| invalid(key, format!("{entry:?} is not id-host:port")))?;
            let digits: String = name
                .chars()
                .rev()
                .take_while(char::is_ascii_digit)
                .collect();
            let digits: String = digits.chars().rev().collect();
            let node_id = digits.parse::<u64>().map_err(|_| {
                invalid(key, format!("peer id {name:?} does not end with a number"))
            })?;
            if !addr.contains(':') {
                return Err(invalid(
                    key,
                    format!("{entry:?}: address {addr:?} has no port"),
                ));
            }
            let peer = Peer {
                name: name.to_owned(),
                node_id,
                addr: addr.to_owned(),
            };
            if let Some(previous) = peers.insert(node_id, peer) {
                return Err(invalid(
                    key,
                    format!(
                        "peers {:?} and {name:?} share node id {node_id}",
                        previous.name
                    ),
                ));
            }
        }
        if peers.is_empty() {
            return Err(invalid(key, "names no controller"));
        }
        if peers.len() > MAX_PEERS {
            return Err(invalid(
                key,
                format!("names {} controllers, at most {MAX_PEERS}", peers.len()),
            ));
        }
        Ok(peers.into_values().collect())
    }

    /// This controller's entry of the peers.
    pub fn self_peer(&self) -> Result<Peer, ConfigError> {
        self.parse_peers()?
            .into_iter()
            .find(|p| p.name == self.self_id)
            .ok_or_else(|| {
                invalid(
                    "controllerDLegerSelfId",
                    format!(
                        "{:?} is not one of controllerDLegerPeers ({})",
                        self.self_id, self.peers
                    ),
                )
            })
    }

    /// Checks every value; the controller refuses to start otherwise.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.group.trim().is_empty() {
            return Err(invalid("controllerDLegerGroup", "must not be empty"));
        }
        if self.store_path.as_os_str().is_empty() {
            return Err(invalid("controllerStorePath", "must not be empty"));
        }
        if self.scan_interval < MIN_SCAN_INTERVAL {
            return Err(invalid(
                "scanNotActiveBrokerInterval",
                format!(
                    "{:?} is below the minimum {MIN_SCAN_INTERVAL:?}",
                    self.scan_interval
                ),
            ));
        }
        self.self_peer()?;
        Ok(())
    }

    /// Where this controller listens: its peer entry's address, or that port on `bindAddress`.
    pub fn listen_addr(&self) -> Result<String, ConfigError> {
        let peer = self.self_peer()?.addr;
        match (&self.bind_address, peer.rsplit_once(':')) {
            (Some(host), Some((_, port))) if !host.is_empty() => Ok(format!("{host}:{port}")),
            _ => Ok(peer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_apache_controller_conf_is_read_unchanged() {
        let mut config = ControllerConfig::default();
        let unknown = config
            .apply_text(
                "controllerDLegerGroup = group1\n\
                 controllerDLegerPeers = n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858\n\
                 controllerDLegerSelfId = n1\n\
                 controllerStorePath = /tmp/c1\n\
                 mappedFileSize = 16777216\n\
                 enableElectUncleanMaster = false\n\
                 notifyBrokerRoleChanged = true\n\
                 bindAddress = 0.0.0.0\n\
                 somethingElse = 1\n",
            )
            .expect("parses");
        assert_eq!(unknown, vec!["somethingElse".to_owned()]);
        config.validate().expect("valid");
        let peers = config.parse_peers().expect("peers");
        assert_eq!(
            peers.iter().map(|p| p.node_id).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert_eq!(config.listen_addr().expect("addr"), "0.0.0.0:9868");
    }

    #[test]
    fn bad_peers_are_refused_naming_the_key() {
        for (peers, self_id) in [
            ("n0-127.0.0.1", "n0"),
            ("nx-127.0.0.1:1", "nx"),
            ("n0-127.0.0.1:1;m0-127.0.0.1:2", "n0"),
            ("n0-127.0.0.1:1", "n1"),
            ("", "n0"),
        ] {
            let config = ControllerConfig {
                peers: peers.to_owned(),
                self_id: self_id.to_owned(),
                ..ControllerConfig::default()
            };
            let err = config.validate().expect_err(peers);
            assert!(
                err.to_string().contains("controllerDLeger"),
                "{peers}: {err}"
            );
        }
    }

    #[test]
    fn every_documented_key_is_read() {
        let mut config = ControllerConfig::default();
        for doc in ControllerConfig::REFERENCE {
            let value = match doc.default {
                "" => "127.0.0.1",
                v => v,
            };
            assert!(
                config.set(doc.key, value).expect(doc.key),
                "{} is not read",
                doc.key
            );
        }
    }

    #[test]
    fn a_scan_interval_below_the_minimum_is_refused() {
        let mut config = ControllerConfig::default();
        config
            .set("scanNotActiveBrokerInterval", "10")
            .expect("number");
        assert!(config.validate().is_err());
        assert!(config.set("scanNotActiveBrokerInterval", "soon").is_err());
    }
}
