//! SET_MESSAGE_REQUEST_MODE (401) and GET_ALL_MESSAGE_REQUEST_MODE (402): whether a group reads a
//! topic by PULL or by POP, as `mqadmin setConsumeMode` sets it, kept in
//! `config/messageRequestMode.json` (RocketMQ's `MessageRequestModeManager`:
//! `{"messageRequestModeMap":{topic:{group:{topic,consumerGroup,mode,popShareQueueNum}}}}`).
//! A consumer that leaves rebalancing to the broker learns the mode with each QUERY_ASSIGNMENT.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use comet_config_file::{ConfigFileError, load_with_backup, persist_atomically};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::config_tables::config_path;

/// The file, under the store root's `config` directory.
pub const MESSAGE_REQUEST_MODE_FILE: &str = "messageRequestMode.json";

/// How a group reads a topic (RocketMQ's `SetMessageRequestModeRequestBody`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageRequestMode {
    /// The topic.
    pub topic: String,
    /// The group.
    pub consumer_group: String,
    /// `PULL` or `POP`.
    #[serde(default = "pull_mode")]
    pub mode: String,
    /// With POP: how many consumers share each queue (0 = all of them share all queues).
    #[serde(default)]
    pub pop_share_queue_num: i32,
}

fn pull_mode() -> String {
    "PULL".to_owned()
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Document {
    #[serde(default)]
    message_request_mode_map: BTreeMap<String, BTreeMap<String, MessageRequestMode>>,
}

/// The broker's request-mode table.
#[derive(Debug)]
pub struct MessageRequestModeManager {
    path: PathBuf,
    table: Mutex<Document>,
}

impl MessageRequestModeManager {
    /// Loads `<store_root>/config/messageRequestMode.json` (empty when absent).
    pub fn open(store_root: &Path) -> Result<Self, ConfigFileError> {
        let path = config_path(store_root, MESSAGE_REQUEST_MODE_FILE);
        let table = match load_with_backup(&path)? {
            Some(text) if !text.trim().is_empty() => {
                serde_json::from_str(&text).map_err(ConfigFileError::json)?
            }
            _ => Document::default(),
        };
        Ok(MessageRequestModeManager {
            path,
            table: Mutex::new(table),
        })
    }

    /// Sets a group's mode for a topic and persists the table.
    pub fn set(&self, mode: MessageRequestMode) -> Result<(), ConfigFileError> {
        let text = {
            let mut table = self.table.lock();
            table
                .message_request_mode_map
                .entry(mode.topic.clone())
                .or_default()
                .insert(mode.consumer_group.clone(), mode);
            serde_json::to_string(&*table).map_err(ConfigFileError::json)?
        };
        persist_atomically(&self.path, &text)
    }

    /// A group's mode for a topic, if one was set.
    pub fn get(&self, topic: &str, group: &str) -> Option<MessageRequestMode> {
        self.table
            .lock()
            .message_request_mode_map
            .get(topic)?
            .get(group)
            .cloned()
    }

    /// The whole table as GET_ALL_MESSAGE_REQUEST_MODE answers it.
    pub fn encode(&self) -> String {
        serde_json::to_string(&*self.table.lock())
            .unwrap_or_else(|_| r#"{"messageRequestModeMap":{}}"#.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_persisted_in_apaches_layout() {
        let dir = tempfile::tempdir().unwrap();
        let manager = MessageRequestModeManager::open(dir.path()).unwrap();
        assert_eq!(manager.encode(), r#"{"messageRequestModeMap":{}}"#);
        let mode: MessageRequestMode = serde_json::from_str(
            r#"{"topic":"T","consumerGroup":"g","mode":"POP","popShareQueueNum":8}"#,
        )
        .unwrap();
        manager.set(mode.clone()).unwrap();
        let reopened = MessageRequestModeManager::open(dir.path()).unwrap();
        assert_eq!(reopened.get("T", "g"), Some(mode));
        assert_eq!(
            reopened.encode(),
            r#"{"messageRequestModeMap":{"T":{"g":{"topic":"T","consumerGroup":"g","mode":"POP","popShareQueueNum":8}}}}"#
        );
    }
}
