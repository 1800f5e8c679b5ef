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

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::StoreError;
use crate::index_file::{
    DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM, IndexFile, IndexFlush, IndexPages, build_key,
};

/// Directory under the store root holding the IndexFiles.
pub const INDEX_DIR: &str = "index";
/// Length of an IndexFile name (`yyyyMMddHHmmssSSS`).
pub const INDEX_FILE_NAME_LEN: usize = 17;

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

/// (year, month 1..=12, day, hour, minute, second) of `unix_secs` in local time.
fn local_civil_time(unix_secs: i64) -> (i64, i64, i64, i64, i64, i64) {
    #[allow(irrefutable_let_patterns)]
    if let Ok(t) = libc::time_t::try_from(unix_secs) {
        // SAFETY: `tm` is plain old data (zeroed is valid); `localtime_r` only writes into it.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are valid for the duration of the call.
        let res = unsafe { libc::localtime_r(&t, &mut tm) };
        if !res.is_null() {
            return (
                i64::from(tm.tm_year) + 1900,
                i64::from(tm.tm_mon) + 1,
                i64::from(tm.tm_mday),
                i64::from(tm.tm_hour),
                i64::from(tm.tm_min),
                i64::from(tm.tm_sec),
            );
        }
    }
    utc_civil_time(unix_secs)
}

/// UTC civil time of `unix_secs` (Howard Hinnant's days-from-civil inverse).
fn utc_civil_time(unix_secs: i64) -> (i64, i64, i64, i64, i64, i64) {
    const SECS_PER_DAY: i64 = 86_400;
    let days = unix_secs.div_euclid(SECS_PER_DAY);
    let rem = unix_secs.rem_euclid(SECS_PER_DAY);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, rem / 3600, rem % 3600 / 60, rem % 60)
}

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Sort key of an IndexFile name: shorter (foreign) names first, then lexicographic.
fn name_order(name: &str) -> (usize, String) {
    (name.len(), name.to_owned())
}

/// The index of a store: rolls IndexFiles and answers key queries across them.
pub struct IndexService {
    dir: PathBuf,
    cfg: IndexConfig,
    /// Oldest first.
    files: Vec<IndexFile>,
}

impl std::fmt::Debug for IndexService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexService")
            .field("dir", &self.dir)
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
        Ok(IndexService { dir, cfg, files })
    }

    /// The geometry in use.
    pub fn config(&self) -> IndexConfig {
        self.cfg
    }

    /// The IndexFiles, oldest first.
    pub fn files(&self) -> &[IndexFile] {
        &self.files
    }

    /// A name for a new file: the local time now, bumped past the newest existing name so names
    /// stay unique and increasing even within one millisecond or if the clock steps back.
    fn next_file_name(&self) -> String {
        let candidate = time_millis_to_file_name(now_millis());
        let Some(last) = self.files.last().map(IndexFile::name) else {
            return candidate;
        };
        if name_order(&candidate) > name_order(&last) {
            return candidate;
        }
        match last.parse::<u64>().ok().and_then(|n| n.checked_add(1)) {
            Some(n) => format!("{n:0width$}", width = last.len()),
            None => format!("{last}0"),
        }
    }

    fn roll(&mut self) -> Result<(), StoreError> {
        fs::create_dir_all(&self.dir).map_err(|e| StoreError::io(&self.dir, e))?;
        let (end_phy, end_ts) = self.files.last().map_or((0, 0), |f| {
            (f.header().end_phy_offset, f.header().end_timestamp)
        });
        let path = self.dir.join(self.next_file_name());
        let file = IndexFile::create(
            &path,
            self.cfg.max_hash_slot_num,
            self.cfg.max_index_num,
            end_phy,
            end_ts,
        )?;
        tracing::info!(path = %path.display(), "created index file");
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

    /// The flushes of every file changed since the last flush, to run without the service's
    /// lock (see [`IndexFile::flush_handle`]).
    pub fn flush_handles(&self) -> Vec<IndexFlush> {
        self.files
            .iter()
            .filter_map(IndexFile::flush_handle)
            .collect()
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
