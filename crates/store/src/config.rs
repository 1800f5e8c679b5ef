//! Store configuration, named after Apache RocketMQ's `MessageStoreConfig` so an operator's
//! `broker.conf` knowledge carries over (snake_case of the Java property name, same defaults).
//!
//! Only the settings this store actually honours are here; every bound the store enforces is a
//! field (or a named constant) rather than a literal buried in code.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::StoreError;

/// Default size of one CommitLog segment (`mappedFileSizeCommitLog`, 1 GiB).
pub const DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG: usize = 1024 * 1024 * 1024;
/// Entries per ConsumeQueue file (`300000`); one entry is 20 bytes.
pub const DEFAULT_CONSUME_QUEUE_ENTRIES_PER_FILE: usize = 300_000;
/// Smallest segment size accepted: a segment must at least hold a BLANK marker and a header.
pub const MIN_MAPPED_FILE_SIZE: usize = 4096;
/// RocketMQ's default delay levels (`messageDelayLevel`).
pub const DEFAULT_MESSAGE_DELAY_LEVEL: &str =
    "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";
/// Default of `mappedPagesReleaseBytes`: bytes read from the CommitLog between two releases of
/// the mapped pages behind the readers (see `page_release.rs`).
pub const DEFAULT_MAPPED_PAGES_RELEASE_BYTES: u64 = 64 * 1024 * 1024;
/// Default of `commitLogPageCacheBytes`: CommitLog bytes behind the end left in the page cache.
/// It holds a backlog of 1,000,000 messages of 1 KiB with room to spare.
pub const DEFAULT_COMMIT_LOG_PAGE_CACHE_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// Default of `commitLogZeroAheadBytes`: bytes kept prepared after the append position (see
/// `zero_ahead.rs`).
pub const DEFAULT_COMMIT_LOG_ZERO_AHEAD_BYTES: u64 = 8 * 1024 * 1024;

/// How the CommitLog is made durable before a put is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlushDiskType {
    /// Acknowledge once the record is in the page cache; a flush thread msyncs periodically.
    #[default]
    AsyncFlush,
    /// Acknowledge only after an msync covering the record (group commit).
    SyncFlush,
}

/// Configuration of a [`crate::MessageStore`].
#[derive(Debug, Clone)]
pub struct MessageStoreConfig {
    /// `storePathRootDir`: root of commitlog/, consumequeue/, index/, checkpoint, abort, lock.
    pub store_path_root_dir: PathBuf,
    /// `storePathCommitLog`: defaults to `<root>/commitlog`.
    pub store_path_commit_log: Option<PathBuf>,
    /// `mappedFileSizeCommitLog`: bytes per CommitLog segment.
    pub mapped_file_size_commit_log: usize,
    /// `mappedFileSizeConsumeQueue / 20`: entries per ConsumeQueue file.
    pub consume_queue_entries_per_file: usize,
    /// `flushDiskType`.
    pub flush_disk_type: FlushDiskType,
    /// `flushIntervalCommitLog`: period of the asynchronous CommitLog flush.
    pub flush_interval_commit_log: Duration,
    /// `flushCommitLogLeastPages`: an async flush waits until this many 4 KiB pages are dirty.
    pub flush_commit_log_least_pages: usize,
    /// `flushCommitLogTimed`: under ASYNC_FLUSH, flush only every `flush_interval_commit_log`
    /// (Apache's default since 4.9). When false, appends wake the flush thread as soon as
    /// `flush_commit_log_least_pages` are dirty: an msync (with its TLB shootdown and write-protect
    /// faults on the pages written next) every 16 KiB at the defaults.
    pub flush_commit_log_timed: bool,
    /// `flushCommitLogThoroughInterval`: at least this often, flush whatever is dirty.
    pub flush_commit_log_thorough_interval: Duration,
    /// `flushIntervalConsumeQueue`: period of the ConsumeQueue/index/checkpoint flush.
    pub flush_interval_consume_queue: Duration,
    /// `syncFlushTimeout`: a SYNC_FLUSH put waiting longer than this answers FLUSH_DISK_TIMEOUT.
    pub sync_flush_timeout: Duration,
    /// `maxMessageSize`: largest body (or whole batch body) accepted.
    pub max_message_size: usize,
    /// `checkCRCOnRecover`: verify each record's body CRC during recovery.
    pub check_crc_on_recover: bool,
    /// `autoMessageVersionOnTopicLen`: write MAGIC V2 records for topics longer than 127 bytes.
    pub auto_message_version_on_topic_len: bool,
    /// `messageIndexEnable`: build the IndexFile (UNIQ_KEY and KEYS). The value the store opens
    /// with; it changes while the store runs through [`crate::live::LiveStoreSettings`].
    pub message_index_enable: bool,
    /// `messageIndexSafe`: include the index timestamp when choosing the recovery start file,
    /// and flush the newest IndexFile every `flushIntervalConsumeQueue` (otherwise an IndexFile
    /// is flushed when full and at shutdown, as in RocketMQ).
    pub message_index_safe: bool,
    /// `maxHashSlotNum`.
    pub max_hash_slot_num: usize,
    /// `maxIndexNum`.
    pub max_index_num: usize,
    /// `fileReservedTime` in hours: CommitLog segments older than this are deleted.
    pub file_reserved_time_hours: u64,
    /// `deleteWhen`: hours of the day (`"04"`, or `"04;05"`) when expired files are deleted.
    pub delete_when: String,
    /// `diskMaxUsedSpaceRatio` (%): above it, expired files are deleted at any hour.
    pub disk_max_used_space_ratio: u32,
    /// `diskSpaceCleanForciblyRatio` (%): above it, files are deleted even if not expired.
    pub disk_space_clean_forcibly_ratio: u32,
    /// `diskSpaceWarningLevelRatio` (%): above it, writes are refused (SERVICE_NOT_AVAILABLE).
    pub disk_space_warning_level_ratio: u32,
    /// `cleanResourceInterval`: period of the cleanup service.
    pub clean_resource_interval: Duration,
    /// `deleteCommitLogFilesInterval`: pause between two segment deletions in one run.
    pub delete_commit_log_files_interval: Duration,
    /// Most files one cleanup run deletes (RocketMQ `DELETE_FILES_BATCH_MAX`).
    pub delete_files_batch_max: usize,
    /// `accessMessageInMemoryMaxRatio` (%): data further back than this share of RAM is "on disk".
    pub access_message_in_memory_max_ratio: u32,
    /// `maxTransferBytesOnMessageInMemory`.
    pub max_transfer_bytes_on_message_in_memory: usize,
    /// `maxTransferCountOnMessageInMemory`.
    pub max_transfer_count_on_message_in_memory: usize,
    /// `maxTransferBytesOnMessageInDisk`.
    pub max_transfer_bytes_on_message_in_disk: usize,
    /// `maxTransferCountOnMessageInDisk`.
    pub max_transfer_count_on_message_in_disk: usize,
    /// `messageDelayLevel`: used to compute the ConsumeQueue tags code of SCHEDULE_TOPIC_XXXX.
    pub message_delay_level: String,
    /// `mappedPagesReleaseBytes` (Comet's own): after this many bytes were read from the
    /// CommitLog, the pages of the store's mapped files behind the readers are unmapped from
    /// the process (`page_release.rs`); 0 keeps them mapped, as RocketMQ does.
    pub mapped_pages_release_bytes: u64,
    /// `commitLogPageCacheBytes` (Comet's own): flushed CommitLog pages more than this many
    /// bytes behind the end are dropped from the page cache by the page-release rounds
    /// (`page_release.rs`; so only while `mapped_pages_release_bytes` > 0); 0 leaves the page
    /// cache to the kernel, as RocketMQ does. The pull batch limits still judge "in memory" by
    /// `access_message_in_memory_max_ratio` of RAM: a consumer catching up from disk keeps
    /// RocketMQ's in-memory batch sizes until it is that far behind.
    pub commit_log_page_cache_bytes: u64,
    /// `commitLogZeroAheadBytes` (Comet's own): bytes of the newest CommitLog segment kept
    /// prepared after the append position (`zero_ahead.rs`): zeroed under SYNC_FLUSH, so the
    /// group commit's msync finds its blocks allocated; allocated with `fallocate` under
    /// ASYNC_FLUSH, so an append never waits for the timed flush's block allocation. 0 leaves
    /// the segment sparse until written back.
    pub commit_log_zero_ahead_bytes: u64,
}

impl Default for MessageStoreConfig {
    fn default() -> Self {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."));
        Self {
            store_path_root_dir: home.join("store"),
            store_path_commit_log: None,
            mapped_file_size_commit_log: DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG,
            consume_queue_entries_per_file: DEFAULT_CONSUME_QUEUE_ENTRIES_PER_FILE,
            flush_disk_type: FlushDiskType::AsyncFlush,
            flush_interval_commit_log: Duration::from_millis(500),
            flush_commit_log_least_pages: 4,
            flush_commit_log_timed: true,
            flush_commit_log_thorough_interval: Duration::from_secs(10),
            flush_interval_consume_queue: Duration::from_secs(1),
            sync_flush_timeout: Duration::from_secs(5),
            max_message_size: comet_protocol::limits::MAX_MESSAGE_SIZE,
            check_crc_on_recover: true,
            auto_message_version_on_topic_len: true,
            message_index_enable: true,
            message_index_safe: false,
            max_hash_slot_num: 5_000_000,
            max_index_num: 20_000_000,
            file_reserved_time_hours: 72,
            delete_when: "04".to_owned(),
            disk_max_used_space_ratio: 75,
            disk_space_clean_forcibly_ratio: 85,
            disk_space_warning_level_ratio: 90,
            clean_resource_interval: Duration::from_secs(10),
            delete_commit_log_files_interval: Duration::from_millis(100),
            delete_files_batch_max: 10,
            access_message_in_memory_max_ratio: 40,
            max_transfer_bytes_on_message_in_memory: 256 * 1024,
            max_transfer_count_on_message_in_memory: 32,
            max_transfer_bytes_on_message_in_disk: 64 * 1024,
            max_transfer_count_on_message_in_disk: 8,
            mapped_pages_release_bytes: DEFAULT_MAPPED_PAGES_RELEASE_BYTES,
            commit_log_page_cache_bytes: DEFAULT_COMMIT_LOG_PAGE_CACHE_BYTES,
            commit_log_zero_ahead_bytes: DEFAULT_COMMIT_LOG_ZERO_AHEAD_BYTES,
            message_delay_level: DEFAULT_MESSAGE_DELAY_LEVEL.to_owned(),
        }
    }
}

impl MessageStoreConfig {
    /// A default configuration rooted at `root`.
    pub fn with_root(root: impl Into<PathBuf>) -> Self {
        Self {
            store_path_root_dir: root.into(),
            ..Self::default()
        }
    }

    /// Directory of the CommitLog segments.
    pub fn commit_log_dir(&self) -> PathBuf {
        self.store_path_commit_log
            .clone()
            .unwrap_or_else(|| self.store_path_root_dir.join("commitlog"))
    }

    /// Root of the ConsumeQueue tree (`<root>/consumequeue`).
    pub fn consume_queue_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("consumequeue")
    }

    /// `<root>/checkpoint`.
    pub fn checkpoint_path(&self) -> PathBuf {
        self.store_path_root_dir.join("checkpoint")
    }

    /// `<root>/abort`.
    pub fn abort_path(&self) -> PathBuf {
        self.store_path_root_dir.join("abort")
    }

    /// `<root>/lock`.
    pub fn lock_path(&self) -> PathBuf {
        self.store_path_root_dir.join("lock")
    }

    /// Root directory.
    pub fn root(&self) -> &Path {
        &self.store_path_root_dir
    }

    /// Checks the values the store relies on; returns [`StoreError::Config`] naming the culprit.
    pub fn validate(&self) -> Result<(), StoreError> {
        if self.mapped_file_size_commit_log < MIN_MAPPED_FILE_SIZE {
            return Err(StoreError::Config(format!(
                "mapped_file_size_commit_log {} is below the minimum {MIN_MAPPED_FILE_SIZE}",
                self.mapped_file_size_commit_log
            )));
        }
        if i64::try_from(self.mapped_file_size_commit_log).is_err()
            || i32::try_from(self.mapped_file_size_commit_log).is_err()
        {
            return Err(StoreError::Config(format!(
                "mapped_file_size_commit_log {} does not fit a record's i32 BLANK length",
                self.mapped_file_size_commit_log
            )));
        }
        if self.consume_queue_entries_per_file == 0 {
            return Err(StoreError::Config(
                "consume_queue_entries_per_file must be positive".to_owned(),
            ));
        }
        if self.max_message_size == 0 {
            return Err(StoreError::Config(
                "max_message_size must be positive".to_owned(),
            ));
        }
        let ratios = [
            ("disk_max_used_space_ratio", self.disk_max_used_space_ratio),
            (
                "disk_space_clean_forcibly_ratio",
                self.disk_space_clean_forcibly_ratio,
            ),
            (
                "disk_space_warning_level_ratio",
                self.disk_space_warning_level_ratio,
            ),
            (
                "access_message_in_memory_max_ratio",
                self.access_message_in_memory_max_ratio,
            ),
        ];
        for (name, value) in ratios {
            if value > 100 {
                return Err(StoreError::Config(format!(
                    "{name} {value} is not a percentage"
                )));
            }
        }
        self.delay_levels_millis()?;
        Ok(())
    }

    /// Parses `message_delay_level` into milliseconds per level (index 0 = level 1).
    pub fn delay_levels_millis(&self) -> Result<Vec<i64>, StoreError> {
        let mut out = Vec::new();
        for token in self.message_delay_level.split_whitespace() {
            let (num, unit) = token.split_at(token.len().saturating_sub(1));
            let factor: i64 = match unit {
                "s" => 1_000,
                "m" => 60_000,
                "h" => 3_600_000,
                "d" => 86_400_000,
                _ => {
                    return Err(StoreError::Config(format!(
                        "message_delay_level entry {token:?} has no s/m/h/d unit"
                    )));
                }
            };
            let n: i64 = num.parse().map_err(|_| {
                StoreError::Config(format!(
                    "message_delay_level entry {token:?} is not a number"
                ))
            })?;
            out.push(n.saturating_mul(factor));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_delay_levels_parse() {
        let levels = MessageStoreConfig::default()
            .delay_levels_millis()
            .unwrap_or_default();
        assert_eq!(levels.len(), 18);
        assert_eq!(levels.first(), Some(&1_000));
        assert_eq!(levels.get(4), Some(&60_000));
        assert_eq!(levels.last(), Some(&7_200_000));
    }

    #[test]
    fn validate_rejects_bad_values() {
        let mut cfg = MessageStoreConfig::with_root("/tmp/x");
        assert!(cfg.validate().is_ok());
        cfg.mapped_file_size_commit_log = 100;
        assert!(cfg.validate().is_err());
        let mut cfg = MessageStoreConfig::with_root("/tmp/x");
        cfg.message_delay_level = "1x".into();
        assert!(cfg.validate().is_err());
        cfg.message_delay_level = "1s 2m".into();
        assert_eq!(
            cfg.delay_levels_millis().unwrap_or_default(),
            vec![1000, 120_000]
        );
    }
}
