//! The broker's topic table: `topics.json` in memory, with each change logged to the file's
//! journal before it is answered (see [`crate::topic_journal`]) and the whole file written by
//! the periodic persist, at shutdown and when the journal grows long.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use comet_config_file::{ConfigData, ConfigFile, ConfigFileError, to_fastjson_pretty};
use comet_protocol::body::{DataVersion, TopicConfig, TopicConfigSerializeWrapper, from_fastjson};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use crate::topic_journal::{TopicChange, TopicJournal};

/// Content of `topics.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicsDocument {
    #[serde(default)]
    pub data_version: DataVersion,
    #[serde(default)]
    pub topic_config_table: BTreeMap<String, TopicConfig>,
}

impl ConfigData for TopicsDocument {
    fn encode(&self) -> Result<String, ConfigFileError> {
        to_fastjson_pretty(self)
    }

    fn decode(text: &str) -> Result<Self, ConfigFileError> {
        from_fastjson(text.as_bytes()).map_err(ConfigFileError::json)
    }
}

/// The broker's topic table (`topics.json`).
#[derive(Debug)]
pub struct TopicConfigTable {
    file: ConfigFile<TopicsDocument>,
    doc: RwLock<TopicsDocument>,
    /// Changes since the file was last written whole. Taken before `doc` by every change, so
    /// its lines are in the order the changes were made.
    journal: Mutex<TopicJournal>,
}

impl TopicConfigTable {
    /// Loads the table from `path` (with `.bak` fallback) and replays its journal; empty on
    /// first start.
    pub fn open(path: &Path) -> Result<Self, ConfigFileError> {
        let file = ConfigFile::new(path);
        let mut doc: TopicsDocument = file.load()?.unwrap_or_default();
        let (journal, changes) = TopicJournal::replay(path)?;
        if !changes.is_empty() {
            tracing::info!(changes = changes.len(), path = %path.display(), "replaying the topic journal");
        }
        for (change, version) in changes {
            apply(&mut doc, &change);
            doc.data_version = version;
        }
        Ok(TopicConfigTable {
            file,
            doc: RwLock::new(doc),
            journal: Mutex::new(journal),
        })
    }

    /// The topic's configuration.
    pub fn get(&self, topic: &str) -> Option<TopicConfig> {
        self.doc.read().topic_config_table.get(topic).cloned()
    }

    pub fn contains(&self, topic: &str) -> bool {
        self.doc.read().topic_config_table.contains_key(topic)
    }

    /// Makes the changes `decide` asks for, given the table as it is, under the journal's lock:
    /// applies them, bumps the data version once (not at all without a change) and logs them
    /// with that version; [`TopicConfigTable::sync`] makes them durable. Returns what `decide`
    /// returned beside the changes.
    fn change<R>(&self, decide: impl FnOnce(&TopicsDocument) -> (R, Vec<TopicChange>)) -> R {
        let mut journal = self.journal.lock();
        let mut doc = self.doc.write();
        let (result, changes) = decide(&doc);
        if changes.is_empty() {
            return result;
        }
        for change in &changes {
            apply(&mut doc, change);
        }
        doc.data_version.next_version();
        let version = doc.data_version.clone();
        drop(doc);
        for change in changes {
            journal.append(change, &version);
        }
        result
    }

    /// Creates or replaces a topic (keyed by its `topic_name`) and bumps the data version;
    /// returns the previous configuration.
    pub fn put(&self, config: TopicConfig) -> Option<TopicConfig> {
        self.change(|doc| {
            let previous = doc.topic_config_table.get(&config.topic_name).cloned();
            (previous, vec![TopicChange::Put(config)])
        })
    }

    /// Creates or replaces every topic of `configs` and bumps the data version once.
    pub fn put_all(&self, configs: Vec<TopicConfig>) {
        self.change(|_| ((), configs.into_iter().map(TopicChange::Put).collect()));
    }

    /// Creates the topic with `make()` if it does not exist; returns the (existing or new)
    /// configuration and whether it was created.
    pub fn get_or_create(
        &self,
        topic: &str,
        make: impl FnOnce() -> TopicConfig,
    ) -> (TopicConfig, bool) {
        if let Some(existing) = self.get(topic) {
            return (existing, false);
        }
        self.change(|doc| match doc.topic_config_table.get(topic) {
            Some(existing) => ((existing.clone(), false), Vec::new()),
            None => {
                let mut config = make();
                config.topic_name = topic.to_owned();
                ((config.clone(), true), vec![TopicChange::Put(config)])
            }
        })
    }

    /// Makes the table a copy of `master`'s: its topics (attributes included) and its data
    /// version. Returns whether anything changed.
    pub fn mirror(&self, master: TopicsDocument) -> bool {
        let mut journal = self.journal.lock();
        let mut doc = self.doc.write();
        if *doc == master {
            return false;
        }
        *doc = master;
        // A whole new table: written whole by the persist that follows.
        journal.force_compaction();
        true
    }

    /// Bumps the data version without changing a topic.
    pub fn touch(&self) {
        self.change(|_| ((), vec![TopicChange::Touch]));
    }

    /// Deletes a topic and bumps the data version.
    pub fn remove(&self, topic: &str) -> Option<TopicConfig> {
        self.change(|doc| match doc.topic_config_table.get(topic) {
            Some(removed) => (
                Some(removed.clone()),
                vec![TopicChange::Delete(topic.to_owned())],
            ),
            None => (None, Vec::new()),
        })
    }

    /// Every topic, sorted by name.
    pub fn topics(&self) -> Vec<TopicConfig> {
        self.doc
            .read()
            .topic_config_table
            .values()
            .cloned()
            .collect()
    }

    /// Every topic name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.doc.read().topic_config_table.keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.doc.read().topic_config_table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.doc.read().topic_config_table.is_empty()
    }

    /// Current data version (sent with broker registration).
    pub fn data_version(&self) -> DataVersion {
        self.doc.read().data_version.clone()
    }

    /// A copy of the whole document.
    pub fn snapshot(&self) -> TopicsDocument {
        self.doc.read().clone()
    }

    /// The topics of `names` that exist, in the form REGISTER_BROKER carries, with the current
    /// data version.
    pub fn to_partial_wrapper(&self, names: &BTreeSet<String>) -> TopicConfigSerializeWrapper {
        let doc = self.doc.read();
        TopicConfigSerializeWrapper {
            topic_config_table: names
                .iter()
                .filter_map(|name| {
                    let config = doc.topic_config_table.get(name)?;
                    Some((name.clone(), config.clone()))
                })
                .collect(),
            data_version: doc.data_version.clone(),
            ..TopicConfigSerializeWrapper::default()
        }
    }

    /// The table in the form REGISTER_BROKER carries.
    pub fn to_wrapper(&self) -> TopicConfigSerializeWrapper {
        let doc = self.doc.read();
        TopicConfigSerializeWrapper {
            topic_config_table: doc
                .topic_config_table
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            data_version: doc.data_version.clone(),
            ..TopicConfigSerializeWrapper::default()
        }
    }

    /// Makes the changes logged so far durable: one sync of the journal, or the whole file when
    /// the journal asks for it (too long, or an append failed).
    pub fn sync(&self) -> Result<(), ConfigFileError> {
        let mut journal = self.journal.lock();
        if journal.wants_compaction() {
            return self.write_whole(&mut journal);
        }
        match journal.sync() {
            Ok(()) => Ok(()),
            // The change is not durable in the journal: write the whole table instead.
            Err(e) => {
                tracing::error!(error = %e, "syncing the topic journal failed; writing topics.json whole");
                self.write_whole(&mut journal)
            }
        }
    }

    /// Writes `topics.json` whole (atomically) and empties the journal.
    pub fn persist(&self) -> Result<(), ConfigFileError> {
        let mut journal = self.journal.lock();
        self.write_whole(&mut journal)
    }

    /// [`TopicConfigTable::persist`] when the journal holds changes (the periodic persist).
    /// Returns whether it wrote.
    pub fn persist_if_journaled(&self) -> Result<bool, ConfigFileError> {
        let mut journal = self.journal.lock();
        if journal.lines() == 0 && !journal.wants_compaction() {
            return Ok(false);
        }
        self.write_whole(&mut journal).map(|()| true)
    }

    fn write_whole(&self, journal: &mut TopicJournal) -> Result<(), ConfigFileError> {
        self.file.persist_snapshot(|| self.doc.read().encode())?;
        journal.clear()
    }

    /// Path of the file.
    pub fn path(&self) -> &Path {
        self.file.path()
    }
}

/// One change applied to the table (live, and when the journal is replayed at start).
fn apply(doc: &mut TopicsDocument, change: &TopicChange) {
    match change {
        TopicChange::Put(config) => {
            doc.topic_config_table
                .insert(config.topic_name.clone(), config.clone());
        }
        TopicChange::Delete(topic) => {
            doc.topic_config_table.remove(topic);
        }
        TopicChange::Touch => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> TopicConfigTable {
        TopicConfigTable::open(&dir.join("topics.json")).expect("open")
    }

    #[test]
    fn journaled_changes_survive_a_restart_without_a_whole_write() {
        let dir = tempfile::tempdir().unwrap();
        let table = open(dir.path());
        table.put(TopicConfig::new("A"));
        table.put_all(vec![TopicConfig::new("B"), TopicConfig::new("C")]);
        table.remove("A");
        let (_, created) = table.get_or_create("D", || TopicConfig::new("ignored"));
        assert!(created);
        table.touch();
        table.sync().unwrap();
        assert!(!dir.path().join("topics.json").exists(), "no whole write");
        let expected = table.snapshot();
        drop(table);

        let reopened = open(dir.path());
        assert_eq!(reopened.snapshot(), expected);
        assert_eq!(reopened.names(), ["B", "C", "D"]);
    }

    #[test]
    fn a_whole_write_empties_the_journal_and_replaying_it_again_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let table = open(dir.path());
        table.put(TopicConfig::new("A"));
        table.put(TopicConfig::with_queues("B", 2, 2, 6));
        table.remove("A");
        table.sync().unwrap();
        let journal = TopicJournal::path_for(&dir.path().join("topics.json"));
        let kept = std::fs::read(&journal).unwrap();
        assert!(table.persist_if_journaled().unwrap());
        assert!(!journal.exists(), "emptied");
        assert!(!table.persist_if_journaled().unwrap(), "nothing to write");
        let expected = table.snapshot();
        drop(table);
        assert_eq!(open(dir.path()).snapshot(), expected);

        // A crash after the whole write, before the journal was emptied: replayed on top of a
        // file that already holds its changes.
        std::fs::write(&journal, kept).unwrap();
        assert_eq!(open(dir.path()).snapshot(), expected);
    }

    #[test]
    fn a_mirrored_table_is_written_whole() {
        let dir = tempfile::tempdir().unwrap();
        let table = open(dir.path());
        table.put(TopicConfig::new("Old"));
        table.sync().unwrap();
        let mut master = TopicsDocument::default();
        master
            .topic_config_table
            .insert("New".to_owned(), TopicConfig::new("New"));
        assert!(table.mirror(master.clone()));
        table.sync().unwrap();
        assert!(dir.path().join("topics.json").exists());
        drop(table);
        assert_eq!(open(dir.path()).snapshot(), master);
    }

    #[test]
    fn a_partial_wrapper_holds_the_named_topics_that_exist() {
        let dir = tempfile::tempdir().unwrap();
        let table = open(dir.path());
        table.put(TopicConfig::new("A"));
        table.put(TopicConfig::new("B"));
        let names: BTreeSet<String> = ["A".to_owned(), "Gone".to_owned()].into();
        let wrapper = table.to_partial_wrapper(&names);
        assert_eq!(wrapper.topic_config_table.keys().collect::<Vec<_>>(), ["A"]);
        assert_eq!(wrapper.data_version, table.data_version());
    }
}
