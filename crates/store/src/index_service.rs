//! IndexService: the sequence of IndexFiles under `<root>/index/`.
//!
//! One IndexFile holds a bounded number of entries (20 million by default), so the service rolls
//! to a new file when the newest is full. Files are named by their creation time in local time,
//! `yyyyMMddHHmmssSSS` (RocketMQ's `UtilAll.timeMillisToHumanString`), which also orders them.
//! Local time comes from `localtime_r(3)`; where the C library cannot convert a time, UTC is used
//! (the name only needs to be unique and increasing, and we enforce both explicitly).
//!
//! Entries are added in CommitLog order by the dispatcher, so each file covers a contiguous range
//! of CommitLog offsets and a message that is dispatched again during recovery (offset not past
//! the newest file's `endPhyOffset`) is skipped, which makes re-dispatch idempotent.
//!
//! Creating a file (a 420 MB sparse file, its inode, its mapping) is filesystem metadata work that
//! can wait on the journal for tens of milliseconds while the disk is busy, and a roll happens on
//! the dispatch path, which the sends of a broker wait for. So the next file is made ahead, off
//! that path: when the store has no file yet or the newest is nearly full, the ConsumeQueue flush
//! thread (started with the store, before the broker listens) makes a *standby* file through the
//! service's [`Standby`] hand-off, and the roll takes it; a roll that finds the file still being
//! made waits for it (at most [`STANDBY_WAIT`]) rather than making a second one beside it. The
//! first send to a fresh broker then finds its IndexFile made, or nearly. A standby is not one of
//! the service's files until the roll takes it; a clean shutdown deletes an unused one, and one
//! left by a crash opens as an empty newest file, whose header [`IndexService::open`] starts where
//! the file before it ended, as a roll would have.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use comet_protocol::time::{now_millis, utc_civil_time};
use parking_lot::{Condvar, Mutex};

use crate::error::StoreError;
use crate::index_file::{
    DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM, IndexFile, IndexFlush, IndexPages, build_key,
};
use crate::os;

/// Directory under the store root holding the IndexFiles.
pub const INDEX_DIR: &str = "index";
/// Length of an IndexFile name (`yyyyMMddHHmmssSSS`).
pub const INDEX_FILE_NAME_LEN: usize = 17;
/// Fill (in percent of `maxIndexNum`) of the newest file from which its successor is made ahead.
pub const STANDBY_FILL_PERCENT: usize = 90;
/// Longest a roll waits for a standby being made before it makes its own file.
pub const STANDBY_WAIT: Duration = Duration::from_secs(1);

/// Geometry of the IndexFiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexConfig {
    /// Hash slots per file (`maxHashSlotNum`, 5,000,000).
    pub max_hash_slot_num: usize,
    /// Entries per file (`maxIndexNum`, 20,000,000).
    pub max_index_num: usize,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            max_hash_slot_num: DEFAULT_MAX_HASH_SLOT_NUM,
            max_index_num: DEFAULT_MAX_INDEX_NUM,
        }
    }
}

/// Formats a Unix time in milliseconds as local `yyyyMMddHHmmssSSS` (UTC if local time is
/// unavailable).
pub fn time_millis_to_file_name(unix_ms: i64) -> String {
    const MILLIS_PER_SECOND: i64 = 1000;
    let secs = unix_ms.div_euclid(MILLIS_PER_SECOND);
    let millis = unix_ms.rem_euclid(MILLIS_PER_SECOND);
    let (year, month, day, hour, minute, second) = local_civil_time(secs);
    format!("{year:04}{month:02}{day:02}{hour:02}{minute:02}{second:02}{millis:03}")
}

/// (year, month 1..=12, day, hour, minute, second) of `unix_secs` in local time (UTC if local
/// time is unavailable).
fn local_civil_time(unix_secs: i64) -> (i64, i64, i64, i64, i64, i64) {
    match os::local_time(unix_secs) {
        Some(t) => (t.year, t.month, t.day, t.hour, t.minute, t.second),
        None => utc_civil_time(unix_secs),
    }
}

/// Sort key of an IndexFile name: shorter (foreign) names first, then lexicographic.
fn name_order(name: &str) -> (usize, String) {
    (name.len(), name.to_owned())
}

/// The index of a store: rolls IndexFiles and answers key queries across them.
pub struct IndexService {
    cfg: IndexConfig,
    /// Oldest first.
    files: Vec<IndexFile>,
    /// The next file, made ahead of the roll by another thread.
    standby: Arc<Standby>,
}

/// The hand-off of a file made ahead between the thread that makes it and the roll. It also
/// chooses the names of new files, so that a file made ahead and one a roll makes itself never
/// share a name and always order after the files before them.
#[derive(Debug)]
pub struct Standby {
    dir: PathBuf,
    cfg: IndexConfig,
    state: Mutex<StandbyState>,
    made: Condvar,
}

#[derive(Debug, Default)]
struct StandbyState {
    /// The file made ahead; never holds entries.
    file: Option<IndexFile>,
    /// A [`StandbyPlan`] is out: its file is being made.
    making: bool,
    /// Name of the service's newest file.
    newest: Option<String>,
    /// The name last handed to a plan.
    reserved: Option<String>,
}

impl StandbyState {
    /// A name for a new file: the local time now, bumped past the newest file's and the reserved
    /// name, so names stay unique and increasing even within one millisecond or if the clock
    /// steps back.
    fn next_name(&self) -> String {
        let candidate = time_millis_to_file_name(now_millis());
        let Some(last) = [&self.newest, &self.reserved]
            .into_iter()
            .flatten()
            .max_by_key(|n| name_order(n))
        else {
            return candidate;
        };
        if name_order(&candidate) > name_order(last) {
            return candidate;
        }
        match last.parse::<u64>().ok().and_then(|n| n.checked_add(1)) {
            Some(n) => format!("{n:0width$}", width = last.len()),
            None => format!("{last}0"),
        }
    }
}

/// A standby file to make, with no lock held: its name was chosen (and reserved) by
/// [`Standby::plan`]. Dropping a plan unmade lets a waiting roll go on.
#[derive(Debug)]
pub struct StandbyPlan {
    standby: Arc<Standby>,
    path: PathBuf,
    open: bool,
}

impl StandbyPlan {
    /// Path of the file to make.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes the (empty, sparse) file and hands it to the next roll; slow when the filesystem
    /// is, which is why a background thread calls it. The file is deleted instead when a roll
    /// could not wait for it.
    pub fn make(mut self) -> Result<(), StoreError> {
        let made = self.create();
        let mut state = self.standby.state.lock();
        state.making = false;
        self.open = false;
        self.standby.made.notify_all();
        let file = made?;
        let next = state.file.is_none()
            && state
                .newest
                .as_ref()
                .is_none_or(|newest| name_order(&file.name()) > name_order(newest));
        if next {
            tracing::debug!(path = %file.path().display(), "index file made ahead");
            state.file = Some(file);
            return Ok(());
        }
        drop(state);
        file.destroy()
    }

    fn create(&self) -> Result<IndexFile, StoreError> {
        self.standby.create_file(&self.path, 0, 0)
    }
}

impl Drop for StandbyPlan {
    fn drop(&mut self) {
        if self.open {
            self.standby.state.lock().making = false;
            self.standby.made.notify_all();
        }
    }
}

impl Standby {
    fn new(dir: PathBuf, cfg: IndexConfig, newest: Option<String>) -> Self {
        Standby {
            dir,
            cfg,
            state: Mutex::new(StandbyState {
                newest,
                ..StandbyState::default()
            }),
            made: Condvar::new(),
        }
    }

    /// A plan to make the next file, unless one is ready or being made. The caller checks first
    /// that one is due ([`IndexService::standby_due`]).
    pub fn plan(self: &Arc<Self>) -> Option<StandbyPlan> {
        let mut state = self.state.lock();
        if state.file.is_some() || state.making {
            return None;
        }
        let name = state.next_name();
        state.reserved = Some(name.clone());
        state.making = true;
        Some(StandbyPlan {
            standby: Arc::clone(self),
            path: self.dir.join(name),
            open: true,
        })
    }

    /// Whether a file made ahead is ready for the next roll.
    pub fn is_ready(&self) -> bool {
        self.state.lock().file.is_some()
    }

    /// Deletes an unused file made ahead (at shutdown), so that it does not open as a file.
    pub fn discard(&self) -> Result<(), StoreError> {
        let file = self.state.lock().file.take();
        match file {
            Some(file) => file.destroy(),
            None => Ok(()),
        }
    }

    /// The file for a roll: the one made ahead, waiting up to `wait` for one being made; else
    /// the name the roll's own file takes.
    fn take(&self, wait: Duration) -> Result<IndexFile, String> {
        let deadline = Instant::now() + wait;
        let mut state = self.state.lock();
        while state.file.is_none() && state.making {
            if self.made.wait_until(&mut state, deadline).timed_out() {
                tracing::warn!("the index file made ahead is late; the roll makes its own");
                break;
            }
        }
        match state.file.take() {
            Some(file) => Ok(file),
            None => Err(state.next_name()),
        }
    }

    /// Creates a new file at `path` in the index directory (made if missing), its span starting
    /// where the previous file ended: the one way both a plan and a roll make a file.
    fn create_file(
        &self,
        path: &Path,
        end_phy_offset: i64,
        end_timestamp: i64,
    ) -> Result<IndexFile, StoreError> {
        fs::create_dir_all(&self.dir).map_err(|e| StoreError::io(&self.dir, e))?;
        IndexFile::create(
            path,
            self.cfg.max_hash_slot_num,
            self.cfg.max_index_num,
            end_phy_offset,
            end_timestamp,
        )
    }

    fn set_newest(&self, name: String) {
        self.state.lock().newest = Some(name);
    }
}

impl std::fmt::Debug for IndexService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexService")
            .field("dir", &self.standby.dir)
            .field("cfg", &self.cfg)
            .field("files", &self.files.len())
            .finish()
    }
}

impl IndexService {
    /// Opens every IndexFile in `<root>/index/` (created on first put if absent).
    pub fn open(root: &Path, cfg: IndexConfig) -> Result<Self, StoreError> {
        let dir = root.join(INDEX_DIR);
        let mut names = Vec::new();
        match fs::read_dir(&dir) {
            Ok(entries) => {
                for entry in entries {
                    let entry = entry.map_err(|e| StoreError::io(&dir, e))?;
                    let path = entry.path();
                    let name = entry.file_name().to_str().map(str::to_owned);
                    match name {
                        Some(name)
                            if !name.is_empty()
                                && name.bytes().all(|b| b.is_ascii_digit())
                                && path.is_file() =>
                        {
                            names.push(name)
                        }
                        _ => {
                            tracing::warn!(path = %path.display(), "ignoring unexpected file in index directory")
                        }
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(&dir, e)),
        }
        names.sort_by_key(|n| name_order(n));
        let mut files = Vec::with_capacity(names.len());
        for name in names {
            files.push(IndexFile::open(
                &dir.join(&name),
                cfg.max_hash_slot_num,
                cfg.max_index_num,
            )?);
        }
        // An empty newest file (a standby left by a crash, or a roll with no entry yet) starts
        // where the file before it ended, as a roll sets it.
        if let [.., previous, last] = files.as_mut_slice()
            && last.entry_count() == 0
        {
            let end = previous.header();
            let (end_phy, end_ts) = (end.end_phy_offset, end.end_timestamp);
            let header = last.header();
            if header.begin_phy_offset != end_phy || header.begin_timestamp != end_ts {
                last.start_at(end_phy, end_ts);
            }
        }
        let standby = Arc::new(Standby::new(dir, cfg, files.last().map(IndexFile::name)));
        Ok(IndexService {
            cfg,
            files,
            standby,
        })
    }

    /// The geometry in use.
    pub fn config(&self) -> IndexConfig {
        self.cfg
    }

    /// The IndexFiles, oldest first.
    pub fn files(&self) -> &[IndexFile] {
        &self.files
    }

    /// Whether the next file should be made ahead now: the store has no file yet or the newest
    /// is [`STANDBY_FILL_PERCENT`] full.
    pub fn standby_due(&self) -> bool {
        let fill_due = self.cfg.max_index_num.saturating_mul(STANDBY_FILL_PERCENT) / 100;
        self.files
            .last()
            .is_none_or(|f| f.entry_count() >= fill_due)
    }

    /// The hand-off through which another thread makes the next file ahead.
    pub fn standby(&self) -> Arc<Standby> {
        Arc::clone(&self.standby)
    }

    fn roll(&mut self) -> Result<(), StoreError> {
        let (end_phy, end_ts) = self.files.last().map_or((0, 0), |f| {
            (f.header().end_phy_offset, f.header().end_timestamp)
        });
        let file = match self.standby.take(STANDBY_WAIT) {
            Ok(mut file) => {
                file.start_at(end_phy, end_ts);
                tracing::info!(path = %file.path().display(), "rolled to the index file made ahead");
                file
            }
            Err(name) => {
                let path = self.standby.dir.join(name);
                let file = self.standby.create_file(&path, end_phy, end_ts)?;
                tracing::info!(path = %path.display(), "created index file");
                file
            }
        };
        self.standby.set_newest(file.name());
        self.files.push(file);
        Ok(())
    }

    /// True when the index already covers the message at `commit_log_offset`.
    fn already_indexed(&self, commit_log_offset: i64) -> bool {
        self.files
            .iter()
            .rev()
            .find(|f| f.entry_count() > 0)
            .is_some_and(|f| commit_log_offset <= f.header().end_phy_offset)
    }

    /// Indexes one message under each of `keys` (its UNIQ_KEY and each KEYS entry; empty keys are
    /// skipped), rolling to a new file when the newest is full. A message at or before the last
    /// indexed offset is skipped (re-dispatch after recovery).
    pub fn put(
        &mut self,
        topic: &str,
        keys: &[&str],
        commit_log_offset: i64,
        store_timestamp: i64,
    ) -> Result<(), StoreError> {
        if self.already_indexed(commit_log_offset) {
            return Ok(());
        }
        for key in keys.iter().filter(|k| !k.is_empty()) {
            let full_key = build_key(topic, key);
            let mut rolled = false;
            loop {
                let written = match self.files.last_mut() {
                    Some(file) => file.put_key(&full_key, commit_log_offset, store_timestamp),
                    None => false,
                };
                if written {
                    break;
                }
                if rolled {
                    return Err(StoreError::Config(
                        "a fresh index file refused an entry; check the index geometry".into(),
                    ));
                }
                self.roll()?;
                rolled = true;
            }
        }
        Ok(())
    }

    /// CommitLog offsets of messages indexed under `topic#key` with a store time in
    /// `[begin_ts, end_ts]`, newest first, at most `max_num`. Offsets of colliding keys may be
    /// included: the caller checks the key of each message it loads.
    pub fn query(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin_ts: i64,
        end_ts: i64,
    ) -> Vec<i64> {
        let full_key = build_key(topic, key);
        let mut out = Vec::new();
        for file in self.files.iter().rev() {
            if out.len() >= max_num {
                break;
            }
            if file.is_time_matched(begin_ts, end_ts) {
                file.select_phy_offsets(&mut out, &full_key, max_num, begin_ts, end_ts);
            }
            if file.header().begin_timestamp < begin_ts {
                break;
            }
        }
        out
    }

    /// The written entries of every file (see [`IndexFile::written_entries`]).
    pub fn written_entries(&self) -> Vec<IndexPages> {
        self.files.iter().map(IndexFile::written_entries).collect()
    }

    /// `endPhyOffset` of the newest file (0 without files).
    pub fn max_physical_offset(&self) -> i64 {
        self.files.last().map_or(0, |f| f.header().end_phy_offset)
    }

    /// Drops every entry at or past `max_commit_log_offset` (the CommitLog was truncated there):
    /// files wholly past it are deleted, the file straddling it is truncated in place.
    pub fn truncate_dirty(&mut self, max_commit_log_offset: i64) -> Result<(), StoreError> {
        for file in self.files.iter_mut().rev() {
            if file.header().end_phy_offset < max_commit_log_offset {
                break;
            }
            let removed = file.truncate_from(max_commit_log_offset);
            if removed > 0 {
                tracing::info!(path = %file.path().display(), removed, "truncated dirty index entries");
            }
        }
        while let Some(last) = self.files.last() {
            let dirty =
                last.entry_count() == 0 && last.header().begin_phy_offset >= max_commit_log_offset;
            if !dirty {
                break;
            }
            if let Some(file) = self.files.pop() {
                tracing::info!(path = %file.path().display(), "deleting dirty index file");
                file.destroy()?;
            }
        }
        Ok(())
    }

    /// Deletes files, oldest first, whose `endPhyOffset` is below `min_commit_log_offset` (all
    /// their messages are gone from the CommitLog). The newest file is kept. Returns the count.
    pub fn delete_expired(&mut self, min_commit_log_offset: i64) -> Result<usize, StoreError> {
        let mut deleted = 0;
        while self.files.len() > 1 {
            let expired = self
                .files
                .first()
                .is_some_and(|f| f.header().end_phy_offset < min_commit_log_offset);
            if !expired {
                break;
            }
            let file = self.files.remove(0);
            tracing::info!(path = %file.path().display(), "deleting expired index file");
            file.destroy()?;
            deleted += 1;
        }
        Ok(deleted)
    }

    /// The flushes of the files changed since the last flush, to run without the service's lock
    /// (see [`IndexFile::flush_handle`]): the full ones, and the newest too when `newest` is set.
    /// Also returns the end timestamp of the newest full file (0 without one), up to which the
    /// index is durable once the full files are flushed.
    pub fn flush_handles(&self, newest: bool) -> (Vec<IndexFlush>, i64) {
        let full = self.files.len().saturating_sub(1);
        let files = if newest {
            &self.files[..]
        } else {
            &self.files[..full]
        };
        let full_end = self.files[..full]
            .last()
            .map_or(0, |f| f.header().end_timestamp);
        (
            files.iter().filter_map(IndexFile::flush_handle).collect(),
            full_end,
        )
    }

    /// Flushes every file changed since the last flush.
    pub fn flush(&self) -> Result<(), StoreError> {
        for file in &self.files {
            file.flush()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_civil_time_known_dates() {
        assert_eq!(utc_civil_time(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(utc_civil_time(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(utc_civil_time(1_700_000_000), (2023, 11, 14, 22, 13, 20));
        assert_eq!(utc_civil_time(-1), (1969, 12, 31, 23, 59, 59));
    }

    #[test]
    fn file_names_are_17_digits() {
        let name = time_millis_to_file_name(1_700_000_000_123);
        assert_eq!(name.len(), INDEX_FILE_NAME_LEN);
        assert!(name.ends_with("123"));
        assert!(name.bytes().all(|b| b.is_ascii_digit()));
    }
}
