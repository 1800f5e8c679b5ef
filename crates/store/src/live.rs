//! The store settings an operator may change while the store runs (RocketMQ's
//! `updateBrokerConfig`): flush periods, the SYNC_FLUSH timeout, the largest message, retention,
//! the pull batch limits and whether new messages are indexed.
//!
//! The services read them through one shared [`LiveSettings`] on every use instead of copying
//! them at start: a flush thread reads its period each time it goes to sleep, the retention
//! thread reads its thresholds each round, a put or a pull reads its limits as it runs, dispatch
//! reads `messageIndexEnable` for each record it would index. A change replaces the whole set at
//! once, so a reader never sees half of one. Every other [`MessageStoreConfig`] field (file
//! sizes, paths, the flush type, the index geometry) shapes files or threads made at start and
//! keeps the value the store was opened with.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, Guard};

use crate::config::MessageStoreConfig;

/// The settings of a running store that may change (see the module docs). Fields are named
/// after the [`MessageStoreConfig`] fields they come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveStoreSettings {
    /// `flushIntervalCommitLog`.
    pub flush_interval_commit_log: Duration,
    /// `flushCommitLogTimed`.
    pub flush_commit_log_timed: bool,
    /// `flushCommitLogLeastPages`.
    pub flush_commit_log_least_pages: usize,
    /// `flushIntervalConsumeQueue`.
    pub flush_interval_consume_queue: Duration,
    /// `syncFlushTimeout`.
    pub sync_flush_timeout: Duration,
    /// `maxMessageSize`.
    pub max_message_size: usize,
    /// `fileReservedTime`, in hours.
    pub file_reserved_time_hours: u64,
    /// `deleteWhen`.
    pub delete_when: String,
    /// `diskMaxUsedSpaceRatio` (%).
    pub disk_max_used_space_ratio: u32,
    /// `diskSpaceCleanForciblyRatio` (%).
    pub disk_space_clean_forcibly_ratio: u32,
    /// `diskSpaceWarningLevelRatio` (%).
    pub disk_space_warning_level_ratio: u32,
    /// `cleanResourceInterval`.
    pub clean_resource_interval: Duration,
    /// `accessMessageInMemoryMaxRatio` (%).
    pub access_message_in_memory_max_ratio: u32,
    /// `maxTransferBytesOnMessageInMemory`.
    pub max_transfer_bytes_on_message_in_memory: usize,
    /// `maxTransferCountOnMessageInMemory`.
    pub max_transfer_count_on_message_in_memory: usize,
    /// `maxTransferBytesOnMessageInDisk`.
    pub max_transfer_bytes_on_message_in_disk: usize,
    /// `maxTransferCountOnMessageInDisk`.
    pub max_transfer_count_on_message_in_disk: usize,
    /// `messageIndexEnable`: dispatch adds index entries for the records it dispatches (turned
    /// off, the entries already made stay and are still found; turned on again, the records
    /// dispatched meanwhile stay without entries).
    pub message_index_enable: bool,
}

impl LiveStoreSettings {
    /// The changeable part of `config`.
    pub fn of(config: &MessageStoreConfig) -> Self {
        LiveStoreSettings {
            flush_interval_commit_log: config.flush_interval_commit_log,
            flush_commit_log_timed: config.flush_commit_log_timed,
            flush_commit_log_least_pages: config.flush_commit_log_least_pages,
            flush_interval_consume_queue: config.flush_interval_consume_queue,
            sync_flush_timeout: config.sync_flush_timeout,
            max_message_size: config.max_message_size,
            file_reserved_time_hours: config.file_reserved_time_hours,
            delete_when: config.delete_when.clone(),
            disk_max_used_space_ratio: config.disk_max_used_space_ratio,
            disk_space_clean_forcibly_ratio: config.disk_space_clean_forcibly_ratio,
            disk_space_warning_level_ratio: config.disk_space_warning_level_ratio,
            clean_resource_interval: config.clean_resource_interval,
            access_message_in_memory_max_ratio: config.access_message_in_memory_max_ratio,
            max_transfer_bytes_on_message_in_memory: config.max_transfer_bytes_on_message_in_memory,
            max_transfer_count_on_message_in_memory: config.max_transfer_count_on_message_in_memory,
            max_transfer_bytes_on_message_in_disk: config.max_transfer_bytes_on_message_in_disk,
            max_transfer_count_on_message_in_disk: config.max_transfer_count_on_message_in_disk,
            message_index_enable: config.message_index_enable,
        }
    }
}

/// The live settings shared by the store and its services, replaced whole by
/// [`LiveSettings::set`].
#[derive(Debug)]
pub struct LiveSettings {
    current: ArcSwap<LiveStoreSettings>,
}

impl LiveSettings {
    /// Live settings starting from `config`'s values.
    pub fn of(config: &MessageStoreConfig) -> Arc<Self> {
        Arc::new(LiveSettings {
            current: ArcSwap::from_pointee(LiveStoreSettings::of(config)),
        })
    }

    /// The settings in force (a guard to read them through, not to keep).
    pub fn get(&self) -> Guard<Arc<LiveStoreSettings>> {
        self.current.load()
    }

    /// Puts `settings` in force; returns the ones they replace.
    pub fn set(&self, settings: LiveStoreSettings) -> Arc<LiveStoreSettings> {
        self.current.swap(Arc::new(settings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_replaces_the_whole_set() {
        let config = MessageStoreConfig::with_root("/tmp/live-settings");
        let live = LiveSettings::of(&config);
        assert_eq!(**live.get(), LiveStoreSettings::of(&config));
        let held = live.get().clone();
        let mut changed = LiveStoreSettings::of(&config);
        changed.flush_interval_commit_log = Duration::from_millis(900);
        changed.delete_when = "01;02".to_owned();
        let previous = live.set(changed.clone());
        assert_eq!(previous, held);
        assert_eq!(**live.get(), changed);
        assert_eq!(
            held.flush_interval_commit_log, config.flush_interval_commit_log,
            "a reader keeps the set it took"
        );
    }
}
