//! `SubscriptionGroupManager`: consumer-group configurations (`config/subscriptionGroup.json`).
//!
//! A group's config decides whether it may consume at all (`consumeEnable`), in broadcast mode
//! (`consumeBroadcastEnable`), how often a failed message is retried before it goes to the DLQ
//! (`retryMaxTimes`) and how many retry queues it has. With `autoCreateSubscriptionGroup` (the
//! default) a group is created with RocketMQ's defaults the first time a client uses it; every
//! creation or change is persisted at once, because a restart must not forget a group whose
//! offsets are already stored.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::config_tables::{SUBSCRIPTION_GROUP_FILE, SubscriptionGroupTable, config_path};
use comet_config_file::ConfigFileError;
use comet_protocol::body::{DataVersion, SubscriptionGroupConfig};
use comet_protocol::naming::validate_group;

/// Groups a Java broker creates for its own tools at start-up.
pub const SYSTEM_GROUPS: &[&str] = &[
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "__MONITOR_CONSUMER",
    "CLIENT_INNER_PRODUCER",
    "SELF_TEST_P_GROUP",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_ONSAPI_PULL",
    "CID_RMQ_SYS_TRANS",
];

/// The broker's subscription-group table.
#[derive(Debug)]
pub struct SubscriptionGroupManager {
    table: SubscriptionGroupTable,
    /// `autoCreateSubscriptionGroup`: changes while the broker runs.
    auto_create: AtomicBool,
}

impl SubscriptionGroupManager {
    /// Loads `<store_root>/config/subscriptionGroup.json` and adds the system groups.
    pub fn open(store_root: &Path, auto_create: bool) -> Result<Self, ConfigFileError> {
        let table =
            SubscriptionGroupTable::open(&config_path(store_root, SUBSCRIPTION_GROUP_FILE))?;
        let manager = SubscriptionGroupManager {
            table,
            auto_create: AtomicBool::new(auto_create),
        };
        for group in SYSTEM_GROUPS {
            let _ = manager.table.find_or_create(group, true);
        }
        manager.table.persist()?;
        Ok(manager)
    }

    /// The group's config, created with the defaults if unknown and auto-creation is on
    /// (RocketMQ `findSubscriptionGroupConfig`). `None`: unknown and not creatable.
    pub fn find_or_create(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        if validate_group(group).is_err() {
            return self.table.find(group);
        }
        let auto_create = self.auto_create.load(Ordering::Relaxed);
        let (config, created) = self.table.find_or_create(group, auto_create)?;
        if created {
            tracing::info!(group, "subscription group auto-created");
            self.persist_logged();
        }
        Some(config)
    }

    /// Turns the creation of unknown groups on first use on or off.
    pub fn set_auto_create(&self, auto_create: bool) {
        self.auto_create.store(auto_create, Ordering::Relaxed);
    }

    /// The group's config, without creating it.
    pub fn find(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        self.table.find(group)
    }

    pub fn contains(&self, group: &str) -> bool {
        self.table.contains(group)
    }

    /// Creates or replaces a group (admin UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).
    pub fn update(&self, config: SubscriptionGroupConfig) {
        let name = config.group_name.clone();
        match self.table.put(config) {
            Some(_) => tracing::info!(group = %name, "subscription group updated"),
            None => tracing::info!(group = %name, "subscription group created"),
        }
        self.persist_logged();
    }

    /// Deletes a group; returns its config if it existed.
    pub fn delete(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        let removed = self.table.remove(group);
        if removed.is_some() {
            tracing::info!(group, "subscription group deleted");
            self.persist_logged();
        }
        removed
    }

    /// Every group, sorted by name.
    pub fn all(&self) -> Vec<SubscriptionGroupConfig> {
        self.table.groups()
    }

    pub fn data_version(&self) -> DataVersion {
        self.table.data_version()
    }

    /// The whole document as subscriptionGroup.json holds it (GET_ALL_SUBSCRIPTIONGROUP_CONFIG).
    pub fn snapshot(&self) -> crate::config_tables::SubscriptionGroupDocument {
        self.table.snapshot()
    }

    /// Writes `subscriptionGroup.json`.
    /// A slave's copy of its master's groups: replaces the whole table when it differs and
    /// persists it. Returns whether it changed.
    pub fn mirror_master(
        &self,
        master: crate::config_tables::SubscriptionGroupDocument,
    ) -> Result<bool, ConfigFileError> {
        if !self.table.mirror(master) {
            return Ok(false);
        }
        self.table.persist()?;
        Ok(true)
    }

    pub fn persist(&self) -> Result<(), ConfigFileError> {
        self.table.persist()
    }

    fn persist_logged(&self) {
        if let Err(e) = self.table.persist() {
            tracing::error!(error = %e, path = %self.table.path().display(), "persisting subscriptionGroup.json failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_create_and_persist() {
        let dir = tempfile::tempdir().unwrap();
        let m = SubscriptionGroupManager::open(dir.path(), true).unwrap();
        assert!(m.find("TOOLS_CONSUMER").is_some());
        let g = m.find_or_create("cg").unwrap();
        assert_eq!(g.retry_max_times, 16);
        assert!(g.consume_enable && g.consume_broadcast_enable);
        assert!(m.find_or_create("bad name").is_none());
        let mut changed = g.clone();
        changed.retry_max_times = 3;
        m.update(changed);
        drop(m);
        let m = SubscriptionGroupManager::open(dir.path(), false).unwrap();
        assert_eq!(m.find("cg").map(|g| g.retry_max_times), Some(3));
        assert!(m.find_or_create("other").is_none());
        assert!(m.delete("cg").is_some());
        assert!(m.find("cg").is_none());
    }
}
