//! The change log beside `topics.json`: one line per topic created, updated or deleted since the
//! file was last written whole.
//!
//! Writing `topics.json` whole after every change costs in proportion to the table (about 220
//! bytes per topic, written to a temporary file, copied to `.bak`, three fsyncs): at 10,000
//! topics every create wrote megabytes, and creating topics one after another slowed down as
//! the table grew. A change is therefore appended here as one JSON line and synced with one
//! `fdatasync`, whatever the table's size; the whole file is written again (and this log emptied)
//! by the broker's periodic persist, at shutdown, and when the log grows past a bound, so the
//! cost of one change stays flat and the log stays short.
//!
//! At start the table is `topics.json` with these lines replayed in order. Replaying is
//! idempotent: a line whose change the file already holds (a crash between writing the file
//! and emptying this log) leaves the table as the file has it. A last line cut short by a crash
//! is dropped; it was never acknowledged, since a change is answered after its sync. A store
//! directory taken to an Apache broker after a clean shutdown holds everything in
//! `topics.json` (the log is emptied on the way down).

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use comet_config_file::ConfigFileError;
use comet_protocol::body::{DataVersion, TopicConfig};
use serde::{Deserialize, Serialize};

/// Suffix of the log's file name after `topics.json`.
pub const JOURNAL_SUFFIX: &str = ".journal";

/// Lines past which a change writes the whole table at once instead of waiting for the periodic
/// persist (bounds the log and the replay at start).
pub const MAX_JOURNAL_LINES: usize = 50_000;

/// One change of the topic table, with the table's data version after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TopicChange {
    /// The topic was created or replaced by this configuration.
    Put(TopicConfig),
    /// The topic was deleted.
    Delete(String),
    /// Only the data version moved (a change the registered table reflects without a topic
    /// changing).
    Touch,
}

/// A line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Line {
    change: TopicChange,
    data_version: DataVersion,
}

/// The log file, opened for appending.
#[derive(Debug)]
pub struct TopicJournal {
    path: PathBuf,
    file: Option<File>,
    /// Lines in the file.
    lines: usize,
    /// Lines appended since the last sync.
    unsynced: usize,
    /// The next persist must write the whole table: an append or sync failed (the log may miss
    /// a change), or the table was replaced whole.
    compact_next: bool,
}

impl TopicJournal {
    /// The log of the table file at `table_path`: `<table_path>.journal`.
    pub fn path_for(table_path: &Path) -> PathBuf {
        let mut name = table_path.as_os_str().to_owned();
        name.push(JOURNAL_SUFFIX);
        PathBuf::from(name)
    }

    /// Reads the log of `table_path` (none on a first start): the changes in order, each with
    /// the data version after it. A last line cut short is dropped with a warning; a bad line
    /// elsewhere is an error (the log was damaged, not cut by a crash).
    pub fn replay(
        table_path: &Path,
    ) -> Result<(Self, Vec<(TopicChange, DataVersion)>), ConfigFileError> {
        let path = Self::path_for(table_path);
        let mut changes = Vec::new();
        let mut lines = 0;
        match File::open(&path) {
            Ok(file) => {
                let mut reader = BufReader::new(file).lines().peekable();
                while let Some(text) = reader.next() {
                    let text = text.map_err(|e| ConfigFileError::io(&path, e))?;
                    if text.trim().is_empty() {
                        continue;
                    }
                    match serde_json::from_str::<Line>(&text) {
                        Ok(line) => {
                            changes.push((line.change, line.data_version));
                            lines += 1;
                        }
                        Err(e) if reader.peek().is_none() => {
                            tracing::warn!(path = %path.display(), error = %e,
                                "dropping the topic log's last line, cut short (never acknowledged)");
                        }
                        Err(e) => {
                            return Err(ConfigFileError::Json {
                                path: path.clone(),
                                reason: format!("line {}: {e}", lines + 1),
                            });
                        }
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(ConfigFileError::io(&path, e)),
        }
        let journal = TopicJournal {
            path,
            file: None,
            lines,
            unsynced: 0,
            compact_next: false,
        };
        Ok((journal, changes))
    }

    /// Appends one change (not yet synced; see [`TopicJournal::sync`]). A failure marks the log
    /// broken: the next persist writes the whole table.
    pub fn append(&mut self, change: TopicChange, data_version: &DataVersion) {
        let line = Line {
            change,
            data_version: data_version.clone(),
        };
        let written = serde_json::to_string(&line)
            .map_err(std::io::Error::other)
            .and_then(|mut text| {
                text.push('\n');
                self.open()?.write_all(text.as_bytes())
            });
        match written {
            Ok(()) => {
                self.lines += 1;
                self.unsynced += 1;
            }
            Err(e) => {
                tracing::error!(path = %self.path.display(), error = %e,
                    "appending to the topic log failed; the whole table is written next");
                self.compact_next = true;
            }
        }
    }

    /// Makes the appended lines durable (one `fdatasync`).
    pub fn sync(&mut self) -> Result<(), ConfigFileError> {
        if self.unsynced == 0 {
            return Ok(());
        }
        let synced = match &self.file {
            Some(file) => file.sync_data(),
            None => Ok(()),
        };
        match synced {
            Ok(()) => {
                self.unsynced = 0;
                Ok(())
            }
            Err(e) => {
                self.compact_next = true;
                Err(ConfigFileError::io(&self.path, e))
            }
        }
    }

    /// Whether the next persist must write the whole table: an append or sync failed, or the
    /// log grew past [`MAX_JOURNAL_LINES`].
    pub fn wants_compaction(&self) -> bool {
        self.compact_next || self.lines >= MAX_JOURNAL_LINES
    }

    /// Asks the next persist to write the whole table (the table was replaced whole).
    pub fn force_compaction(&mut self) {
        self.compact_next = true;
    }

    /// Lines in the log.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Empties the log once the whole table was written durably: its changes are in the file.
    pub fn clear(&mut self) -> Result<(), ConfigFileError> {
        self.file = None;
        match std::fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                self.compact_next = true;
                return Err(ConfigFileError::io(&self.path, e));
            }
        }
        self.lines = 0;
        self.unsynced = 0;
        self.compact_next = false;
        Ok(())
    }

    fn open(&mut self) -> std::io::Result<&mut File> {
        match &mut self.file {
            Some(file) => Ok(file),
            slot => {
                // A new broker changes its system topics before anything else made `config/`.
                if let Some(dir) = self.path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                let file = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)?;
                Ok(slot.insert(file))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(counter: i64) -> DataVersion {
        DataVersion {
            timestamp: 1,
            counter,
            state_version: 0,
        }
    }

    #[test]
    fn appended_changes_replay_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("topics.json");
        let (mut journal, none) = TopicJournal::replay(&table).unwrap();
        assert!(none.is_empty());
        journal.append(TopicChange::Put(TopicConfig::new("A")), &version(1));
        journal.append(TopicChange::Delete("A".to_owned()), &version(2));
        journal.append(TopicChange::Touch, &version(3));
        journal.sync().unwrap();
        assert_eq!(journal.lines(), 3);
        let (again, changes) = TopicJournal::replay(&table).unwrap();
        assert_eq!(again.lines(), 3);
        assert_eq!(
            changes,
            vec![
                (TopicChange::Put(TopicConfig::new("A")), version(1)),
                (TopicChange::Delete("A".to_owned()), version(2)),
                (TopicChange::Touch, version(3)),
            ]
        );
    }

    #[test]
    fn a_last_line_cut_short_is_dropped_and_a_damaged_middle_refused() {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("topics.json");
        let (mut journal, _) = TopicJournal::replay(&table).unwrap();
        journal.append(TopicChange::Put(TopicConfig::new("A")), &version(1));
        journal.sync().unwrap();
        let log = TopicJournal::path_for(&table);
        let mut file = OpenOptions::new().append(true).open(&log).unwrap();
        file.write_all(b"{\"change\":{\"put\":{\"topicNa").unwrap();
        drop(file);
        let (_, changes) = TopicJournal::replay(&table).unwrap();
        assert_eq!(changes.len(), 1, "the cut line is dropped");

        let mut file = OpenOptions::new().append(true).open(&log).unwrap();
        file.write_all(b"\n{\"change\":\"touch\",\"dataVersion\":{\"counter\":3}}\n")
            .unwrap();
        drop(file);
        let err = TopicJournal::replay(&table).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn clear_empties_the_log_and_appending_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("topics.json");
        let (mut journal, _) = TopicJournal::replay(&table).unwrap();
        journal.append(TopicChange::Touch, &version(1));
        journal.sync().unwrap();
        journal.clear().unwrap();
        assert_eq!(journal.lines(), 0);
        assert!(!TopicJournal::path_for(&table).exists());
        journal.append(TopicChange::Touch, &version(2));
        journal.sync().unwrap();
        let (_, changes) = TopicJournal::replay(&table).unwrap();
        assert_eq!(changes, vec![(TopicChange::Touch, version(2))]);
    }
}
