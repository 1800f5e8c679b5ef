//! The broker's persistent tables: topics, subscription groups, consumer offsets, delay offsets.
//!
//! Each table lives in memory behind a `parking_lot::RwLock` (request handlers on many tokio tasks
//! read and update them concurrently) and is written to its JSON file under `<root>/config/` by an
//! explicit [`persist`](TopicConfigTable::persist) call: the broker persists topics and groups
//! right after an admin change and offsets on a timer (`flushConsumerOffsetInterval`, 5 s), as
//! RocketMQ does. The files have RocketMQ's exact shapes, including the bare
//! integer keys of `consumerOffset.json` and `delayOffset.json`, so a store directory can move
//! between Comet and a Java broker.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use comet_protocol::body::{DataVersion, SubscriptionGroupConfig, from_fastjson};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use comet_config_file::{ConfigData, ConfigFile, ConfigFileError, DirtyFlag, to_fastjson_pretty};

pub use crate::topic_table::{TopicConfigTable, TopicsDocument};

/// Directory under the store root holding the config files.
pub const CONFIG_DIR: &str = "config";
/// Topic table file.
pub const TOPICS_FILE: &str = "topics.json";
/// Subscription group table file.
pub const SUBSCRIPTION_GROUP_FILE: &str = "subscriptionGroup.json";
/// Consumer offset table file.
pub const CONSUMER_OFFSET_FILE: &str = "consumerOffset.json";
/// Delay-queue progress file.
pub const DELAY_OFFSET_FILE: &str = "delayOffset.json";
/// Separator in consumer offset keys: `topic@group`.
pub const TOPIC_GROUP_SEPARATOR: char = '@';

/// `<root>/config/<file>`.
pub fn config_path(store_root: &Path, file: &str) -> PathBuf {
    store_root.join(CONFIG_DIR).join(file)
}

fn decode_fastjson<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ConfigFileError> {
    from_fastjson(text.as_bytes()).map_err(ConfigFileError::json)
}

// ---------------------------------------------------------------------------------------------
// subscriptionGroup.json

/// Content of `subscriptionGroup.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionGroupDocument {
    #[serde(default)]
    pub data_version: DataVersion,
    /// 5.x: group → topic → forbidden permission bits.
    #[serde(default)]
    pub forbidden_table: BTreeMap<String, BTreeMap<String, i32>>,
    #[serde(default)]
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
}

impl ConfigData for SubscriptionGroupDocument {
    fn encode(&self) -> Result<String, ConfigFileError> {
        to_fastjson_pretty(self)
    }

    fn decode(text: &str) -> Result<Self, ConfigFileError> {
        decode_fastjson(text)
    }
}

/// The broker's subscription group table (`subscriptionGroup.json`).
#[derive(Debug)]
pub struct SubscriptionGroupTable {
    file: ConfigFile<SubscriptionGroupDocument>,
    doc: RwLock<SubscriptionGroupDocument>,
}

impl SubscriptionGroupTable {
    /// Loads the table from `path` (with `.bak` fallback); empty on first start.
    pub fn open(path: &Path) -> Result<Self, ConfigFileError> {
        let file = ConfigFile::new(path);
        let doc = file.load()?.unwrap_or_default();
        Ok(SubscriptionGroupTable {
            file,
            doc: RwLock::new(doc),
        })
    }

    /// The group's configuration, if known.
    /// Makes the table a copy of `master`'s (groups, forbidden table, data version). Returns
    /// whether anything changed.
    pub fn mirror(&self, master: SubscriptionGroupDocument) -> bool {
        let mut doc = self.doc.write();
        if *doc == master {
            return false;
        }
        *doc = master;
        true
    }

    pub fn find(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        self.doc.read().subscription_group_table.get(group).cloned()
    }

    pub fn contains(&self, group: &str) -> bool {
        self.doc.read().subscription_group_table.contains_key(group)
    }

    /// RocketMQ's `findSubscriptionGroupConfig`: the group's configuration, created with the
    /// defaults when unknown and `auto_create` (`autoCreateSubscriptionGroup`) is on. The second
    /// value tells whether it was created (the caller then persists).
    pub fn find_or_create(
        &self,
        group: &str,
        auto_create: bool,
    ) -> Option<(SubscriptionGroupConfig, bool)> {
        if let Some(existing) = self.find(group) {
            return Some((existing, false));
        }
        if !auto_create {
            return None;
        }
        let mut doc = self.doc.write();
        if let Some(existing) = doc.subscription_group_table.get(group) {
            return Some((existing.clone(), false));
        }
        let config = SubscriptionGroupConfig::new(group);
        doc.subscription_group_table
            .insert(group.to_owned(), config.clone());
        doc.data_version.next_version();
        Some((config, true))
    }

    /// Creates or replaces a group (keyed by `group_name`); returns the previous configuration.
    pub fn put(&self, config: SubscriptionGroupConfig) -> Option<SubscriptionGroupConfig> {
        let mut doc = self.doc.write();
        let previous = doc
            .subscription_group_table
            .insert(config.group_name.clone(), config);
        doc.data_version.next_version();
        previous
    }

    /// Deletes a group (and its forbidden entries).
    pub fn remove(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        let mut doc = self.doc.write();
        let removed = doc.subscription_group_table.remove(group);
        doc.forbidden_table.remove(group);
        if removed.is_some() {
            doc.data_version.next_version();
        }
        removed
    }

    /// Every group, sorted by name.
    pub fn groups(&self) -> Vec<SubscriptionGroupConfig> {
        self.doc
            .read()
            .subscription_group_table
            .values()
            .cloned()
            .collect()
    }

    pub fn len(&self) -> usize {
        self.doc.read().subscription_group_table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.doc.read().subscription_group_table.is_empty()
    }

    pub fn data_version(&self) -> DataVersion {
        self.doc.read().data_version.clone()
    }

    /// A copy of the whole document.
    pub fn snapshot(&self) -> SubscriptionGroupDocument {
        self.doc.read().clone()
    }

    /// Writes `subscriptionGroup.json` atomically.
    pub fn persist(&self) -> Result<(), ConfigFileError> {
        self.file.persist_snapshot(|| self.doc.read().encode())
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }
}

// ---------------------------------------------------------------------------------------------
// consumerOffset.json

/// `topic@group` → queue id → next offset to consume.
pub type OffsetTable = BTreeMap<String, BTreeMap<i32, i64>>;

/// Content of `consumerOffset.json`, also the body of GET_ALL_CONSUMER_OFFSET. `dataVersion` is
/// written as 5.x brokers write it: a 5.x slave copying its master's offsets reads it
/// (`DataVersion.assignNewOne`) and fails on a body without one. Unknown keys (5.x
/// `pullOffsetTable`, ...) are ignored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerOffsetDocument {
    #[serde(default)]
    pub data_version: DataVersion,
    #[serde(default)]
    pub offset_table: OffsetTable,
}

impl ConfigData for ConsumerOffsetDocument {
    fn encode(&self) -> Result<String, ConfigFileError> {
        to_fastjson_pretty(self)
    }

    fn decode(text: &str) -> Result<Self, ConfigFileError> {
        decode_fastjson(text)
    }
}

fn offset_key(group: &str, topic: &str) -> String {
    let mut key = String::with_capacity(topic.len() + 1 + group.len());
    key.push_str(topic);
    key.push(TOPIC_GROUP_SEPARATOR);
    key.push_str(group);
    key
}

/// Splits `topic@group` (at the first `@`: topic names cannot contain it).
pub fn split_offset_key(key: &str) -> Option<(&str, &str)> {
    key.split_once(TOPIC_GROUP_SEPARATOR)
}

/// The committed offsets of every consumer group (`consumerOffset.json`).
#[derive(Debug)]
pub struct ConsumerOffsetTable {
    file: ConfigFile<ConsumerOffsetDocument>,
    table: RwLock<OffsetTable>,
    /// The table's `dataVersion`: it moves on at an encoding when the table changed since the
    /// previous one.
    data_version: Mutex<DataVersion>,
    changed: AtomicBool,
}

impl ConsumerOffsetTable {
    /// Loads the table from `path` (with `.bak` fallback); empty on first start.
    pub fn open(path: &Path) -> Result<Self, ConfigFileError> {
        let file = ConfigFile::new(path);
        let doc = file.load()?.unwrap_or_default();
        Ok(ConsumerOffsetTable {
            file,
            table: RwLock::new(doc.offset_table),
            data_version: Mutex::new(doc.data_version),
            changed: AtomicBool::new(false),
        })
    }

    fn mark_changed(&self) {
        self.changed.store(true, Ordering::Release);
    }

    /// Stores the next offset to consume. A lower value than the stored one replaces it (a
    /// consumer that seeks backwards relies on this).
    pub fn commit(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        let key = offset_key(group, topic);
        let mut table = self.table.write();
        let queues = table.entry(key).or_default();
        self.mark_changed();
        if let Some(previous) = queues.insert(queue_id, offset)
            && offset < previous
        {
            tracing::info!(
                group,
                topic,
                queue_id,
                previous,
                offset,
                "consumer offset moved backwards"
            );
        }
    }

    /// The committed offset of (group, topic, queue).
    pub fn query(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        self.table
            .read()
            .get(&offset_key(group, topic))?
            .get(&queue_id)
            .copied()
    }

    /// All queue offsets of (group, topic).
    pub fn offsets(&self, group: &str, topic: &str) -> Option<BTreeMap<i32, i64>> {
        self.table.read().get(&offset_key(group, topic)).cloned()
    }

    /// `topic → queue → offset` for every topic the group has committed on.
    pub fn offsets_of_group(&self, group: &str) -> BTreeMap<String, BTreeMap<i32, i64>> {
        self.table
            .read()
            .iter()
            .filter_map(|(key, queues)| {
                let (topic, g) = split_offset_key(key)?;
                (g == group).then(|| (topic.to_owned(), queues.clone()))
            })
            .collect()
    }

    /// Topics the group has offsets for, sorted.
    pub fn topics_of_group(&self, group: &str) -> Vec<String> {
        self.offsets_of_group(group).into_keys().collect()
    }

    /// Groups with offsets on the topic, sorted.
    pub fn groups_of_topic(&self, topic: &str) -> Vec<String> {
        self.table
            .read()
            .keys()
            .filter_map(|key| {
                let (t, group) = split_offset_key(key)?;
                (t == topic).then(|| group.to_owned())
            })
            .collect()
    }

    /// Every group that has committed something, sorted and deduplicated.
    pub fn groups(&self) -> Vec<String> {
        let mut groups: Vec<String> = self
            .table
            .read()
            .keys()
            .filter_map(|key| split_offset_key(key).map(|(_, g)| g.to_owned()))
            .collect();
        groups.sort_unstable();
        groups.dedup();
        groups
    }

    /// Removes the offsets of (group, topic); true if there were any.
    pub fn remove(&self, group: &str, topic: &str) -> bool {
        let removed = self
            .table
            .write()
            .remove(&offset_key(group, topic))
            .is_some();
        if removed {
            self.mark_changed();
        }
        removed
    }

    /// Removes every offset of a group; returns how many topics it had.
    pub fn remove_group(&self, group: &str) -> usize {
        let mut table = self.table.write();
        let before = table.len();
        table.retain(|key, _| split_offset_key(key).is_none_or(|(_, g)| g != group));
        let removed = before - table.len();
        if removed > 0 {
            self.mark_changed();
        }
        removed
    }

    /// Removes every group's offsets on a topic; returns how many groups had some.
    pub fn remove_topic(&self, topic: &str) -> usize {
        let mut table = self.table.write();
        let before = table.len();
        table.retain(|key, _| split_offset_key(key).is_none_or(|(t, _)| t != topic));
        let removed = before - table.len();
        if removed > 0 {
            self.mark_changed();
        }
        removed
    }

    /// A copy of the whole table, e.g. for persisting or for stats.
    pub fn snapshot(&self) -> OffsetTable {
        self.table.read().clone()
    }

    /// The table's `dataVersion` as the next encoding states it.
    pub fn data_version(&self) -> DataVersion {
        let mut version = self.data_version.lock();
        if self.changed.swap(false, Ordering::AcqRel) {
            version.next_version();
        }
        version.clone()
    }

    /// The file content for the current table (with its `dataVersion`, which moves on when the
    /// table changed since the previous encoding).
    pub fn encode(&self) -> Result<String, ConfigFileError> {
        ConsumerOffsetDocument {
            data_version: self.data_version(),
            offset_table: self.snapshot(),
        }
        .encode()
    }

    /// Writes `consumerOffset.json` atomically.
    pub fn persist(&self) -> Result<(), ConfigFileError> {
        self.file.persist_snapshot(|| self.encode())
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }
}

// ---------------------------------------------------------------------------------------------
// delayOffset.json

/// Content of `delayOffset.json`: delay level → next offset in that SCHEDULE_TOPIC_XXXX queue.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DelayOffsetDocument {
    #[serde(default)]
    pub offset_table: BTreeMap<i32, i64>,
}

impl ConfigData for DelayOffsetDocument {
    fn encode(&self) -> Result<String, ConfigFileError> {
        to_fastjson_pretty(self)
    }

    fn decode(text: &str) -> Result<Self, ConfigFileError> {
        decode_fastjson(text)
    }
}

/// Progress of the delay-level timers (`delayOffset.json`).
///
/// The broker's persist task runs every few seconds; `dirty` lets it skip the write while no
/// level advanced, which is most of the time on a broker without delayed messages.
#[derive(Debug)]
pub struct DelayOffsetTable {
    file: ConfigFile<DelayOffsetDocument>,
    table: RwLock<BTreeMap<i32, i64>>,
    dirty: DirtyFlag,
}

impl DelayOffsetTable {
    /// Loads the table from `path` (with `.bak` fallback); empty on first start.
    pub fn open(path: &Path) -> Result<Self, ConfigFileError> {
        let file = ConfigFile::new(path);
        let doc = file.load()?.unwrap_or_default();
        Ok(DelayOffsetTable {
            file,
            table: RwLock::new(doc.offset_table),
            dirty: DirtyFlag::default(),
        })
    }

    /// Next offset to deliver for a delay level.
    pub fn get(&self, level: i32) -> Option<i64> {
        self.table.read().get(&level).copied()
    }

    /// Records the next offset to deliver for a delay level.
    pub fn set(&self, level: i32, offset: i64) {
        if self.table.write().insert(level, offset) != Some(offset) {
            self.dirty.mark();
        }
    }

    /// A copy of the table.
    pub fn snapshot(&self) -> BTreeMap<i32, i64> {
        self.table.read().clone()
    }

    /// Writes `delayOffset.json` if a level advanced since the last write; true if it wrote.
    pub fn persist_if_dirty(&self) -> Result<bool, ConfigFileError> {
        self.dirty.write_if_marked(|| self.write_snapshot())
    }

    /// Writes `delayOffset.json` atomically, changed or not (shutdown).
    pub fn persist(&self) -> Result<(), ConfigFileError> {
        self.dirty.write(|| self.write_snapshot())
    }

    fn write_snapshot(&self) -> Result<(), ConfigFileError> {
        self.file.persist_snapshot(|| {
            DelayOffsetDocument {
                offset_table: self.snapshot(),
            }
            .encode()
        })
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }
}

/// The four tables of a store, opened from `<root>/config/`.
#[derive(Debug)]
pub struct ConfigTables {
    pub topics: TopicConfigTable,
    pub subscription_groups: SubscriptionGroupTable,
    pub consumer_offsets: ConsumerOffsetTable,
    pub delay_offsets: DelayOffsetTable,
}

impl ConfigTables {
    /// Opens every table under `<store_root>/config/`.
    pub fn open(store_root: &Path) -> Result<Self, ConfigFileError> {
        Ok(ConfigTables {
            topics: TopicConfigTable::open(&config_path(store_root, TOPICS_FILE))?,
            subscription_groups: SubscriptionGroupTable::open(&config_path(
                store_root,
                SUBSCRIPTION_GROUP_FILE,
            ))?,
            consumer_offsets: ConsumerOffsetTable::open(&config_path(
                store_root,
                CONSUMER_OFFSET_FILE,
            ))?,
            delay_offsets: DelayOffsetTable::open(&config_path(store_root, DELAY_OFFSET_FILE))?,
        })
    }

    /// Persists all four tables.
    pub fn persist_all(&self) -> Result<(), ConfigFileError> {
        self.topics.persist()?;
        self.subscription_groups.persist()?;
        self.consumer_offsets.persist()?;
        self.delay_offsets.persist()
    }
}
