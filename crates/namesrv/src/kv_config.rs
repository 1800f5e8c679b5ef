//! `KvConfigManager`: the name server's small persistent key-value store (namespace → key →
//! value), e.g. namespace `ORDER_TOPIC_CONFIG` maps a topic to `brokerName:queueNum;...` for
//! globally ordered topics.
//!
//! It survives restarts in `<data dir>/kvConfig.json`, in the same shape as RocketMQ's file
//! (`{"configTable":{namespace:{key:value}}}`, fastjson pretty form), so a Java name server's file
//! can be taken over. Every change is written with `persist_atomically` (temporary file, fsync,
//! rename, `.bak` of the previous version) *before* it becomes visible: a change the disk refused
//! is reported to the caller and never served, so memory and disk cannot drift apart.
//!
//! Writes are serialized by one mutex (so the file always holds the latest change); reads take a
//! read lock only. Sizes are bounded by the named constants below.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use comet_config_file::{ConfigFileError, load_parsed, persist_atomically, pretty_fastjson};
use comet_protocol::ProtocolError;
use comet_protocol::body::{KvTable, from_fastjson, to_fastjson};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Namespace of the order-topic configuration (`NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`).
pub const NAMESPACE_ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";
/// Most namespaces.
pub const MAX_KV_NAMESPACES: usize = 1024;
/// Most keys in one namespace.
pub const MAX_KV_KEYS_PER_NAMESPACE: usize = 65_536;
/// Longest namespace or key, in bytes.
pub const MAX_KV_NAME_LEN: usize = 1024;
/// Longest value, in bytes.
pub const MAX_KV_VALUE_LEN: usize = 64 * 1024;

/// Why a KV operation failed.
#[derive(Debug, Error)]
pub enum KvConfigError {
    /// A namespace, key or value is longer than allowed.
    #[error("{field} of {len} bytes exceeds the limit of {max}")]
    TooLong {
        field: &'static str,
        len: usize,
        max: usize,
    },
    /// A namespace or key is empty.
    #[error("{0} must not be empty")]
    Empty(&'static str),
    /// The table already holds the most entries allowed.
    #[error("too many {what} (limit {limit})")]
    LimitExceeded { what: &'static str, limit: usize },
    /// The table could not be serialized.
    #[error("encoding the KV config failed: {0}")]
    Encode(#[from] ProtocolError),
    /// The file could not be written or read.
    #[error("KV config file: {0}")]
    File(#[from] ConfigFileError),
}

impl KvConfigError {
    /// Whether the caller's input is at fault (as opposed to the server's disk).
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            KvConfigError::TooLong { .. }
                | KvConfigError::Empty(_)
                | KvConfigError::LimitExceeded { .. }
        )
    }
}

type ConfigTable = BTreeMap<String, BTreeMap<String, String>>;

/// The file's shape (`KVConfigSerializeWrapper`).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KvConfigFile {
    #[serde(default)]
    config_table: ConfigTable,
}

/// Namespaced key-value configuration, persisted to one JSON file.
#[derive(Debug)]
pub struct KvConfigManager {
    path: PathBuf,
    table: RwLock<ConfigTable>,
    /// Serializes writers: build the new table, persist it, publish it.
    write: Mutex<()>,
}

impl KvConfigManager {
    /// Loads `path` (or its `.bak` when the main file is missing, empty or corrupt); a missing
    /// file is an empty table. Blocking I/O.
    pub fn load(path: impl Into<PathBuf>) -> Result<Self, KvConfigError> {
        let path = path.into();
        let parsed = load_parsed(&path, |text| {
            from_fastjson::<KvConfigFile>(text.as_bytes()).map_err(|e| ConfigFileError::Json {
                path: path.clone(),
                reason: e.to_string(),
            })
        })?;
        let table = parsed.map(|f| f.config_table).unwrap_or_default();
        tracing::info!(path = %path.display(), namespaces = table.len(), "KV config loaded");
        Ok(Self {
            path,
            table: RwLock::new(table),
            write: Mutex::new(()),
        })
    }

    /// The file this manager persists to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sets `namespace`/`key` to `value` and persists. Blocking I/O.
    pub fn put(&self, namespace: &str, key: &str, value: &str) -> Result<(), KvConfigError> {
        check_name("namespace", namespace)?;
        check_name("key", key)?;
        if value.len() > MAX_KV_VALUE_LEN {
            return Err(KvConfigError::TooLong {
                field: "value",
                len: value.len(),
                max: MAX_KV_VALUE_LEN,
            });
        }
        let _writer = self.write.lock();
        let mut next = self.table.read().clone();
        if !next.contains_key(namespace) && next.len() >= MAX_KV_NAMESPACES {
            return Err(KvConfigError::LimitExceeded {
                what: "namespaces",
                limit: MAX_KV_NAMESPACES,
            });
        }
        let entries = next.entry(namespace.to_string()).or_default();
        if !entries.contains_key(key) && entries.len() >= MAX_KV_KEYS_PER_NAMESPACE {
            return Err(KvConfigError::LimitExceeded {
                what: "keys in the namespace",
                limit: MAX_KV_KEYS_PER_NAMESPACE,
            });
        }
        if entries.get(key).map(String::as_str) == Some(value) {
            return Ok(());
        }
        entries.insert(key.to_string(), value.to_string());
        self.publish(next)?;
        tracing::info!(namespace, key, value, "KV config put");
        Ok(())
    }

    /// Removes `namespace`/`key` (and the namespace once empty) and persists. Returns whether the
    /// key existed. Blocking I/O.
    pub fn delete(&self, namespace: &str, key: &str) -> Result<bool, KvConfigError> {
        let _writer = self.write.lock();
        let mut next = self.table.read().clone();
        let Some(entries) = next.get_mut(namespace) else {
            return Ok(false);
        };
        if entries.remove(key).is_none() {
            return Ok(false);
        }
        if entries.is_empty() {
            next.remove(namespace);
        }
        self.publish(next)?;
        tracing::info!(namespace, key, "KV config deleted");
        Ok(true)
    }

    /// The value of `namespace`/`key`.
    pub fn get(&self, namespace: &str, key: &str) -> Option<String> {
        self.table.read().get(namespace)?.get(key).cloned()
    }

    /// Every entry of `namespace`, or `None` when it has none.
    pub fn namespace_table(&self, namespace: &str) -> Option<KvTable> {
        let table = self.table.read();
        let entries = table.get(namespace)?;
        Some(KvTable {
            table: entries
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        })
    }

    /// Persists `next`, then makes it the served table. Called with the writer lock held.
    fn publish(&self, next: ConfigTable) -> Result<(), KvConfigError> {
        let file = KvConfigFile { config_table: next };
        let text = pretty_fastjson(&to_fastjson(&file)?);
        persist_atomically(&self.path, &text)?;
        *self.table.write() = file.config_table;
        Ok(())
    }
}

fn check_name(field: &'static str, value: &str) -> Result<(), KvConfigError> {
    if value.is_empty() {
        return Err(KvConfigError::Empty(field));
    }
    if value.len() > MAX_KV_NAME_LEN {
        return Err(KvConfigError::TooLong {
            field,
            len: value.len(),
            max: MAX_KV_NAME_LEN,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_delete_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kvConfig.json");
        let kv = KvConfigManager::load(&path).unwrap();
        assert_eq!(kv.get("ns", "k"), None);
        kv.put(NAMESPACE_ORDER_TOPIC_CONFIG, "TopicA", "broker-a:4")
            .unwrap();
        kv.put("ns", "k", "v1").unwrap();
        kv.put("ns", "k", "v2").unwrap();
        assert_eq!(kv.get("ns", "k").as_deref(), Some("v2"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"configTable\":{"), "{text}");
        assert!(text.contains("\"TopicA\":\"broker-a:4\""), "{text}");

        let reloaded = KvConfigManager::load(&path).unwrap();
        assert_eq!(reloaded.get("ns", "k").as_deref(), Some("v2"));
        let order = reloaded
            .namespace_table(NAMESPACE_ORDER_TOPIC_CONFIG)
            .unwrap();
        assert_eq!(order.table["TopicA"], "broker-a:4");

        assert!(reloaded.delete("ns", "k").unwrap());
        assert!(!reloaded.delete("ns", "k").unwrap());
        assert!(reloaded.namespace_table("ns").is_none());
        assert!(
            KvConfigManager::load(&path)
                .unwrap()
                .get("ns", "k")
                .is_none()
        );
    }

    #[test]
    fn reads_a_java_file_and_falls_back_to_bak() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kvConfig.json");
        std::fs::write(
            &path,
            "{\n\t\"configTable\":{\n\t\t\"ORDER_TOPIC_CONFIG\":{\n\t\t\t\"T\":\"broker-a:8\"\n\t\t}\n\t}\n}",
        )
        .unwrap();
        let kv = KvConfigManager::load(&path).unwrap();
        assert_eq!(
            kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, "T").as_deref(),
            Some("broker-a:8")
        );
        kv.put("ns", "k", "v").unwrap(); // the previous file becomes the .bak
        std::fs::write(&path, "{not json").unwrap();
        let kv = KvConfigManager::load(&path).unwrap();
        assert_eq!(
            kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, "T").as_deref(),
            Some("broker-a:8")
        );
        assert_eq!(kv.get("ns", "k"), None);
    }

    #[test]
    fn bounds_and_disk_failures_leave_the_table_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let kv = KvConfigManager::load(dir.path().join("kvConfig.json")).unwrap();
        assert!(matches!(
            kv.put("", "k", "v"),
            Err(KvConfigError::Empty("namespace"))
        ));
        let long = "x".repeat(MAX_KV_VALUE_LEN + 1);
        let err = kv.put("ns", "k", &long).unwrap_err();
        assert!(err.is_invalid_input());
        assert!(matches!(err, KvConfigError::TooLong { field: "value", .. }));

        // The data directory becomes a file after start: persisting fails, nothing is served.
        let blocker = dir.path().join("blocker");
        let kv = KvConfigManager::load(blocker.join("kvConfig.json")).unwrap();
        std::fs::write(&blocker, "x").unwrap();
        let err = kv.put("ns", "k", "v").unwrap_err();
        assert!(matches!(err, KvConfigError::File(_)));
        assert!(!err.is_invalid_input());
        assert_eq!(kv.get("ns", "k"), None);
    }
}
