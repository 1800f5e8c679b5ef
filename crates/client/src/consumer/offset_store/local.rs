//! `LocalFileOffsetStore`: a broadcasting consumer's offsets in
//! `<dir>/<clientId>/<group>/offsets.json`, where the Java client keeps them too (`<dir>` defaults
//! to `~/.rocketmq_offsets`).
//!
//! The file is replaced, never edited in place: the new content goes to `offsets.json.tmp`, the
//! previous file is copied to `offsets.json.bak`, and the temporary file is renamed over the
//! main one. A crash at any point leaves either the old or the new file intact, plus a `.bak`
//! from one version earlier; loading falls back to the `.bak` when the main file is missing,
//! empty or unparsable. The content is Java's `OffsetSerializeWrapper`
//! (`{"offsetTable":{<MessageQueue object>:offset}}`) written with the fastjson writer, so a Java
//! client pointed at the same directory reads it (compact rather than pretty-printed; fastjson
//! parses both).

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::{OffsetStore, OffsetTable, ReadOffsetType};
use crate::consumer::MessageQueue;
use crate::error::ClientError;

/// Environment variable overriding the base directory (Java's
/// `rocketmq.client.localOffsetStoreDir`).
pub const LOCAL_OFFSET_STORE_DIR_ENV: &str = "ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR";
/// Base directory name under the home directory.
pub const DEFAULT_LOCAL_OFFSET_DIR_NAME: &str = ".rocketmq_offsets";
/// File name of the offsets of one group.
pub const OFFSETS_FILE_NAME: &str = "offsets.json";
/// Suffix of the file being written.
pub const TMP_SUFFIX: &str = ".tmp";
/// Suffix of the previous version.
pub const BAK_SUFFIX: &str = ".bak";

/// `$ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR`, else `~/.rocketmq_offsets`.
pub fn default_local_offset_store_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(LOCAL_OFFSET_STORE_DIR_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(DEFAULT_LOCAL_OFFSET_DIR_NAME)
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OffsetSerializeWrapper {
    #[serde(default)]
    offset_table: HashMap<MessageQueue, i64>,
}

/// Offsets of a broadcasting consumer, kept in a local file.
#[derive(Debug)]
pub struct LocalFileOffsetStore {
    store_path: PathBuf,
    table: OffsetTable,
    /// Serialises writers so two persists never interleave their tmp/bak/rename steps.
    write_lock: parking_lot::Mutex<()>,
}

impl LocalFileOffsetStore {
    /// The store of `group` for client `client_id` under `base_dir`.
    pub fn new(base_dir: &Path, client_id: &str, group: &str) -> Self {
        LocalFileOffsetStore {
            store_path: base_dir.join(client_id).join(group).join(OFFSETS_FILE_NAME),
            table: OffsetTable::default(),
            write_lock: parking_lot::Mutex::new(()),
        }
    }

    /// Path of `offsets.json`.
    pub fn store_path(&self) -> &Path {
        &self.store_path
    }

    fn sibling(&self, suffix: &str) -> PathBuf {
        let mut name = self.store_path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    }

    /// Path of the previous version.
    pub fn bak_path(&self) -> PathBuf {
        self.sibling(BAK_SUFFIX)
    }

    /// Path of the file being written.
    pub fn tmp_path(&self) -> PathBuf {
        self.sibling(TMP_SUFFIX)
    }

    /// Reads the file, falling back to the `.bak`; `Ok(None)` when neither holds offsets.
    fn read_local_offset(&self) -> Result<Option<HashMap<MessageQueue, i64>>, ClientError> {
        match read_wrapper(&self.store_path) {
            Ok(Some(table)) => Ok(Some(table)),
            Ok(None) => self.read_local_offset_bak(),
            Err(e) => {
                tracing::warn!(path = %self.store_path.display(), error = %e,
                    "offset file unreadable, trying the backup");
                self.read_local_offset_bak()
            }
        }
    }

    fn read_local_offset_bak(&self) -> Result<Option<HashMap<MessageQueue, i64>>, ClientError> {
        let bak = self.bak_path();
        read_wrapper(&bak).map_err(|e| {
            ClientError::Client(format!(
                "offsets file {} and its backup are unreadable: {e}",
                self.store_path.display()
            ))
        })
    }

    /// Writes `content` with the tmp → bak → rename protocol.
    fn write_file(&self, content: &str) -> std::io::Result<()> {
        let _guard = self.write_lock.lock();
        if let Some(dir) = self.store_path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = self.tmp_path();
        {
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(content.as_bytes())?;
            file.sync_all()?;
        }
        match std::fs::read(&self.store_path) {
            Ok(previous) => std::fs::write(self.bak_path(), previous)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        std::fs::rename(&tmp, &self.store_path)
    }

    fn persist_entries(&self, entries: HashMap<MessageQueue, i64>) {
        if entries.is_empty() {
            return;
        }
        let wrapper = OffsetSerializeWrapper {
            offset_table: entries,
        };
        let content = match comet_protocol::body::to_fastjson(&wrapper) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "encoding the offset table failed");
                return;
            }
        };
        if let Err(e) = self.write_file(&content) {
            tracing::error!(path = %self.store_path.display(), error = %e,
                "persisting consumer offsets failed");
        }
    }
}

/// Parses one offsets file. `Ok(None)` for a missing or empty file.
fn read_wrapper(path: &Path) -> Result<Option<HashMap<MessageQueue, i64>>, ClientError> {
    let content = match std::fs::read(path) {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ClientError::Client(format!("{}: {e}", path.display()))),
    };
    if content.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let wrapper: OffsetSerializeWrapper = comet_protocol::body::from_fastjson(&content)?;
    Ok(Some(wrapper.offset_table))
}

impl OffsetStore for LocalFileOffsetStore {
    fn load(&self) -> Result<(), ClientError> {
        if let Some(table) = self.read_local_offset()? {
            self.table.replace_all(table);
        }
        Ok(())
    }

    fn update_offset(&self, mq: &MessageQueue, offset: i64, increase_only: bool) {
        self.table.update(mq, offset, increase_only);
    }

    fn read_offset<'a>(
        &'a self,
        mq: &'a MessageQueue,
        read_type: ReadOffsetType,
    ) -> BoxFuture<'a, Result<Option<i64>, ClientError>> {
        Box::pin(async move {
            match read_type {
                ReadOffsetType::ReadFromMemory => Ok(self.table.get(mq)),
                ReadOffsetType::MemoryFirstThenStore if self.table.get(mq).is_some() => {
                    Ok(self.table.get(mq))
                }
                ReadOffsetType::MemoryFirstThenStore | ReadOffsetType::ReadFromStore => {
                    let stored = self.read_local_offset()?;
                    let offset = stored.and_then(|t| t.get(mq).copied());
                    if let Some(offset) = offset {
                        self.table.update(mq, offset, false);
                    }
                    Ok(offset)
                }
            }
        })
    }

    fn persist_all<'a>(&'a self, mqs: &'a HashSet<MessageQueue>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if mqs.is_empty() {
                return;
            }
            let entries: HashMap<MessageQueue, i64> = self
                .table
                .snapshot()
                .into_iter()
                .filter(|(mq, _)| mqs.contains(mq))
                .collect();
            self.persist_entries(entries);
        })
    }

    fn persist<'a>(&'a self, mq: &'a MessageQueue) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if self.table.get(mq).is_some() {
                self.persist_entries(self.table.snapshot());
            }
        })
    }

    fn remove_offset(&self, mq: &MessageQueue) {
        self.table.remove(mq);
    }

    fn clone_offset_table(&self, topic: &str) -> HashMap<MessageQueue, i64> {
        self.table.clone_topic(topic)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mq(q: i32) -> MessageQueue {
        MessageQueue::new("T", "broker-a", q)
    }

    fn store(dir: &Path) -> LocalFileOffsetStore {
        LocalFileOffsetStore::new(dir, "127.0.0.1@1", "G")
    }

    async fn persist(s: &LocalFileOffsetStore, offsets: &[(i32, i64)]) {
        for (q, o) in offsets {
            s.update_offset(&mq(*q), *o, false);
        }
        let all: HashSet<_> = offsets.iter().map(|(q, _)| mq(*q)).collect();
        s.persist_all(&all).await;
    }

    #[tokio::test]
    async fn persist_writes_the_file_and_keeps_the_previous_as_bak() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = store(dir.path());
        persist(&s, &[(0, 5), (1, 7)]).await;
        assert!(s.store_path().ends_with("127.0.0.1@1/G/offsets.json"));
        assert!(s.store_path().exists());
        assert!(!s.bak_path().exists(), "no previous version yet");
        assert!(!s.tmp_path().exists(), "tmp renamed away");
        let first = std::fs::read_to_string(s.store_path()).expect("read");
        assert!(
            first.contains(r#"{"brokerName":"broker-a","queueId":0,"topic":"T"}:5"#),
            "{first}"
        );
        persist(&s, &[(0, 6), (1, 7)]).await;
        let bak = std::fs::read_to_string(s.bak_path()).expect("bak");
        assert_eq!(bak, first);

        let reloaded = store(dir.path());
        reloaded.load().expect("loads");
        assert_eq!(
            reloaded
                .read_offset(&mq(0), ReadOffsetType::ReadFromMemory)
                .await
                .expect("memory"),
            Some(6)
        );
    }

    #[tokio::test]
    async fn load_falls_back_to_bak_when_main_is_corrupt_empty_or_missing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = store(dir.path());
        persist(&s, &[(0, 5)]).await;
        persist(&s, &[(0, 9)]).await;
        // .bak holds 5, main holds 9.
        for damage in ["corrupt", "empty", "missing"] {
            let path = s.store_path().to_path_buf();
            match damage {
                "corrupt" => std::fs::write(&path, b"{\"offsetTable\":{{{").expect("write"),
                "empty" => std::fs::write(&path, b"").expect("write"),
                _ => std::fs::remove_file(&path).expect("remove"),
            }
            let reloaded = store(dir.path());
            reloaded.load().expect("falls back");
            assert_eq!(
                reloaded
                    .read_offset(&mq(0), ReadOffsetType::ReadFromMemory)
                    .await
                    .expect("memory"),
                Some(5),
                "{damage}"
            );
        }
        // Both unreadable is an error, both absent is an empty table.
        std::fs::write(s.store_path(), b"garbage").expect("write");
        std::fs::write(s.bak_path(), b"garbage").expect("write");
        assert!(store(dir.path()).load().is_err());
        let fresh = tempfile::tempdir().expect("tempdir");
        let empty = store(fresh.path());
        empty.load().expect("nothing to load");
        assert_eq!(
            empty
                .read_offset(&mq(0), ReadOffsetType::ReadFromStore)
                .await
                .expect("store"),
            None
        );
    }

    #[tokio::test]
    async fn persist_all_forgets_nothing_it_was_not_asked_about_on_disk() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = store(dir.path());
        s.update_offset(&mq(0), 1, false);
        s.update_offset(&mq(1), 2, false);
        s.persist_all(&[mq(1)].into_iter().collect()).await;
        let reloaded = store(dir.path());
        assert_eq!(
            reloaded
                .read_offset(&mq(1), ReadOffsetType::ReadFromStore)
                .await
                .expect("store"),
            Some(2)
        );
        assert_eq!(
            reloaded
                .read_offset(&mq(0), ReadOffsetType::ReadFromStore)
                .await
                .expect("store"),
            None
        );
    }
}
