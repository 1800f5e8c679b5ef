//! `TopicConfigManager`: the broker's topic table, its system topics, topic auto-creation and
//! name validation.
//!
//! The table itself (in memory + `config/topics.json`) is a [`TopicConfigTable`]; this
//! layer adds RocketMQ's rules on top of it:
//!
//! - **System topics** are created at start-up (TBW102 when auto-creation is on, SELF_TEST_TOPIC,
//!   the cluster- and broker-name topics, OFFSET_MOVED_EVENT, SCHEDULE_TOPIC_XXXX with one queue
//!   per delay level, the transaction topics, ...), as a Java broker does, so that clients and
//!   tools find the same routes.
//! - **Auto-creation** on send: a send naming an unknown topic and a `defaultTopic` whose
//!   perm has INHERIT creates the topic with `min(client queue nums, default's write queues)`
//!   queues and the default's perm minus INHERIT.
//! - **Every change** is persisted at once (atomically, by the table) and signalled through
//!   [`TopicConfigManager::changed`], on which the controller's registration task re-registers
//!   with the name servers immediately, so a new topic becomes routable without waiting for the
//!   30 s period.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::config_tables::{TOPICS_FILE, TopicConfigTable, config_path};
use comet_config_file::ConfigFileError;
use comet_protocol::body::{
    DataVersion, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType, perm,
};
use comet_protocol::naming::{
    AUTO_CREATE_TOPIC_KEY_TOPIC, BENCHMARK_TOPIC, OFFSET_MOVED_EVENT, SCHEDULE_TOPIC,
    SELF_TEST_TOPIC, TIMER_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, validate_topic,
};
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::config::{BrokerConfig, MAX_QUEUE_NUMS};

/// Queues of the benchmark topic.
pub const BENCHMARK_TOPIC_QUEUE_NUMS: i32 = 1024;
/// Suffix of the cluster's request/reply topic (`<cluster>_REPLY_TOPIC`).
pub const REPLY_TOPIC_SUFFIX: &str = "_REPLY_TOPIC";
/// Queues of the cluster-name topic.
pub const CLUSTER_TOPIC_QUEUE_NUMS: i32 = 16;

/// The broker's topic table with RocketMQ's rules (see the module docs).
pub struct TopicConfigManager {
    table: TopicConfigTable,
    config: Arc<BrokerConfig>,
    /// `autoCreateTopicEnable`: changes while the broker runs.
    auto_create_topic_enable: AtomicBool,
    /// Signalled after every change; a stored permit means "re-register soon".
    changed: Notify,
    /// Serializes auto-creation so two racing sends create a topic once.
    create_lock: Mutex<()>,
    /// What changed since the last registration took it (see
    /// [`TopicConfigManager::registration_table`]).
    unregistered: Mutex<Unregistered>,
}

/// The changes the name servers have not been sent yet: topics created or updated, or a change
/// only the whole table conveys (a deletion, the broker permission, a replaced table, a
/// registration that failed somewhere).
#[derive(Debug, Default)]
struct Unregistered {
    topics: BTreeSet<String>,
    whole: bool,
}

impl std::fmt::Debug for TopicConfigManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicConfigManager")
            .field("topics", &self.table.len())
            .finish()
    }
}

impl TopicConfigManager {
    /// Loads `<store_root>/config/topics.json` and creates the system topics.
    pub fn open(store_root: &Path, config: Arc<BrokerConfig>) -> Result<Self, ConfigFileError> {
        let table = TopicConfigTable::open(&config_path(store_root, TOPICS_FILE))?;
        let manager = TopicConfigManager {
            table,
            auto_create_topic_enable: AtomicBool::new(config.auto_create_topic_enable),
            config,
            changed: Notify::new(),
            create_lock: Mutex::new(()),
            unregistered: Mutex::new(Unregistered {
                topics: BTreeSet::new(),
                whole: true,
            }),
        };
        manager.init_system_topics();
        manager.table.persist()?;
        Ok(manager)
    }

    fn system_topics(&self) -> Vec<TopicConfig> {
        let c = &self.config;
        let rw = perm::PERM_READ_WRITE;
        let mut topics = Vec::new();
        if c.auto_create_topic_enable {
            topics.push(TopicConfig::with_queues(
                AUTO_CREATE_TOPIC_KEY_TOPIC,
                c.default_topic_queue_nums,
                c.default_topic_queue_nums,
                perm::PERM_INHERIT | rw,
            ));
        }
        topics.push(TopicConfig::with_queues(SELF_TEST_TOPIC, 1, 1, rw));
        topics.push(TopicConfig::with_queues(
            BENCHMARK_TOPIC,
            BENCHMARK_TOPIC_QUEUE_NUMS,
            BENCHMARK_TOPIC_QUEUE_NUMS,
            rw,
        ));
        let cluster_perm = perm::PERM_INHERIT | if c.cluster_topic_enable { rw } else { 0 };
        topics.push(TopicConfig::with_queues(
            c.broker_cluster_name.clone(),
            CLUSTER_TOPIC_QUEUE_NUMS,
            CLUSTER_TOPIC_QUEUE_NUMS,
            cluster_perm,
        ));
        let broker_perm = perm::PERM_INHERIT | if c.broker_topic_enable { rw } else { 0 };
        topics.push(TopicConfig::with_queues(
            c.broker_name.clone(),
            1,
            1,
            broker_perm,
        ));
        topics.push(TopicConfig::with_queues(OFFSET_MOVED_EVENT, 1, 1, rw));
        let levels = i32::try_from(c.delay_levels_millis().len()).unwrap_or(i32::MAX);
        topics.push(TopicConfig::with_queues(SCHEDULE_TOPIC, levels, levels, rw));
        if c.trace_topic_enable {
            topics.push(TopicConfig::with_queues(
                c.msg_trace_topic_name.clone(),
                1,
                1,
                rw,
            ));
        }
        topics.push(TopicConfig::with_queues(
            format!("{}{REPLY_TOPIC_SUFFIX}", c.broker_cluster_name),
            1,
            1,
            rw,
        ));
        topics.push(TopicConfig::with_queues(TRANS_HALF_TOPIC, 1, 1, rw));
        topics.push(TopicConfig::with_queues(TRANS_OP_HALF_TOPIC, 1, 1, rw));
        if c.timer_wheel_enable {
            topics.push(TopicConfig::with_queues(TIMER_TOPIC, 1, 1, rw));
        }
        topics
    }

    /// Creates the system topics that are missing (existing ones keep their stored settings, as
    /// in RocketMQ, except the rules below).
    fn init_system_topics(&self) {
        for topic in self.system_topics() {
            let name = topic.topic_name.clone();
            let (_, created) = self.table.get_or_create(&name, || topic);
            if created {
                tracing::debug!(topic = %name, "system topic created");
            }
        }
        // SCHEDULE_TOPIC_XXXX needs one queue per configured delay level.
        let levels = i32::try_from(self.config.delay_levels_millis().len()).unwrap_or(i32::MAX);
        if let Some(mut schedule) = self.table.get(SCHEDULE_TOPIC)
            && (schedule.read_queue_nums < levels || schedule.write_queue_nums < levels)
        {
            schedule.read_queue_nums = levels;
            schedule.write_queue_nums = levels;
            self.table.put(schedule);
        }
        // With auto-creation off, a TBW102 left from an earlier run must not allow inheriting.
        if !self.auto_create_topic_enable.load(Ordering::Relaxed)
            && let Some(mut tbw) = self.table.get(AUTO_CREATE_TOPIC_KEY_TOPIC)
            && tbw.perm != perm::PERM_READ_WRITE
        {
            tbw.perm = perm::PERM_READ_WRITE;
            self.table.put(tbw);
        }
    }

    /// The topic's configuration.
    pub fn select(&self, topic: &str) -> Option<TopicConfig> {
        self.table.get(topic)
    }

    /// Every topic, sorted by name.
    pub fn all(&self) -> Vec<TopicConfig> {
        self.table.topics()
    }

    /// Every topic name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.table.names()
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Current data version of the table.
    pub fn data_version(&self) -> DataVersion {
        self.table.data_version()
    }

    /// Whether `topic` is a system topic ([`comet_protocol::naming::is_system_topic`], this
    /// broker's cluster and name included) or one of the topics the broker creates for itself
    /// (its trace topic may have any name).
    pub fn is_system_topic(&self, topic: &str) -> bool {
        let config = &self.config;
        topic == AUTO_CREATE_TOPIC_KEY_TOPIC
            || comet_protocol::naming::is_system_topic(topic, |t| {
                t == config.broker_cluster_name || t == config.broker_name
            })
            || self.system_topics().iter().any(|t| t.topic_name == topic)
    }

    /// Resolves once something changed since the last wait (a permit is kept if nobody waits).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Makes the change durable and signals it (registration): `topics` created or updated, or,
    /// with none, a change only the whole table conveys.
    fn commit_change(&self, topics: &[&str]) {
        if let Err(e) = self.table.sync() {
            tracing::error!(error = %e, path = %self.table.path().display(), "persisting topics.json failed");
        }
        {
            let mut unregistered = self.unregistered.lock();
            if topics.is_empty() {
                unregistered.whole = true;
            }
            unregistered
                .topics
                .extend(topics.iter().map(|t| (*t).to_owned()));
        }
        self.changed.notify_one();
    }

    /// Moves the data version on and signals a registration, for a change the registered table
    /// reflects without a topic changing (the broker permission).
    pub fn touch(&self) {
        self.table.touch();
        self.commit_change(&[]);
    }

    /// The table the next registration carries, taking what changed since the last one: only
    /// the topics created or updated since (with the current data version, as RocketMQ's
    /// incremental registration sends them; name servers add or update those topics and keep the
    /// others), or the whole table when `whole` is asked for (the periodic registration) or a
    /// change needs it. A registration of only some topics costs what they cost, not what the
    /// table does. When the broker permission in force lacks READ or WRITE, every topic's perm
    /// is ANDed with it, so producers or consumers stop using us.
    pub fn registration_table(&self, broker_perm: i32, whole: bool) -> TopicConfigSerializeWrapper {
        let taken = std::mem::take(&mut *self.unregistered.lock());
        let mut wrapper = if whole || taken.whole || taken.topics.is_empty() {
            self.table.to_wrapper()
        } else {
            self.table.to_partial_wrapper(&taken.topics)
        };
        if !perm::is_writeable(broker_perm) || !perm::is_readable(broker_perm) {
            for topic in wrapper.topic_config_table.values_mut() {
                topic.perm &= broker_perm;
            }
        }
        wrapper
    }

    /// Makes the next registration carry the whole table (one just failed with some name
    /// server, which may then miss a change a later partial registration would not repeat).
    pub fn register_whole_next(&self) {
        self.unregistered.lock().whole = true;
    }

    /// Creates `topic`, a system topic a service started while the broker runs needs (the timer
    /// topic of a timer wheel turned on), unless it exists; a created one is persisted and
    /// registered.
    pub fn ensure_system_topic(&self, topic: TopicConfig) {
        let name = topic.topic_name.clone();
        let (_, created) = self.table.get_or_create(&name, || topic);
        if created {
            tracing::info!(topic = %name, "system topic created");
            self.commit_change(&[&name]);
        }
    }

    /// Turns auto-creation from TBW102 on or off while the broker runs, with TBW102 as a start
    /// with that setting leaves it: on, TBW102 exists and may be inherited (it is made, with
    /// `defaultTopicQueueNums` queues, when missing); off, it may not. A changed TBW102 is
    /// persisted and re-registered.
    pub fn set_auto_create_topic_enable(&self, enable: bool) {
        if self
            .auto_create_topic_enable
            .swap(enable, Ordering::Relaxed)
            == enable
        {
            return;
        }
        let _guard = self.create_lock.lock();
        let rw = perm::PERM_READ_WRITE;
        let tbw = match self.table.get(AUTO_CREATE_TOPIC_KEY_TOPIC) {
            Some(mut tbw) if enable && !perm::is_inherited(tbw.perm) => {
                tbw.perm |= perm::PERM_INHERIT | rw;
                Some(tbw)
            }
            None if enable => Some(TopicConfig::with_queues(
                AUTO_CREATE_TOPIC_KEY_TOPIC,
                self.config.default_topic_queue_nums,
                self.config.default_topic_queue_nums,
                perm::PERM_INHERIT | rw,
            )),
            Some(mut tbw) if !enable && tbw.perm != rw => {
                tbw.perm = rw;
                Some(tbw)
            }
            _ => None,
        };
        if let Some(tbw) = tbw {
            tracing::info!(
                enable,
                perm = tbw.perm,
                "autoCreateTopicEnable changed: TBW102 follows"
            );
            self.table.put(tbw);
            self.commit_change(&[AUTO_CREATE_TOPIC_KEY_TOPIC]);
        }
    }

    /// Creates or replaces a topic (admin UPDATE_AND_CREATE_TOPIC, RocketMQ `updateTopicConfig`).
    /// A configuration equal to the one in force changes nothing (no write, no registration),
    /// as in RocketMQ.
    pub fn update(&self, config: TopicConfig) {
        let name = config.topic_name.clone();
        let previous = self.table.get(&name);
        if previous.as_ref() == Some(&config) {
            tracing::info!(topic = %name, "topic unchanged");
            return;
        }
        self.table.put(config.clone());
        match previous {
            Some(old) => tracing::info!(topic = %name, ?old, new = ?config, "topic updated"),
            None => tracing::info!(topic = %name, new = ?config, "topic created"),
        }
        self.commit_change(&[&name]);
    }

    /// Creates or replaces several topics at once (admin UPDATE_AND_CREATE_TOPIC_LIST): one
    /// durable write and one registration for all of them. Configurations equal to the ones in
    /// force are left out; returns how many topics changed.
    pub fn update_all(&self, configs: Vec<TopicConfig>) -> usize {
        let changed: Vec<TopicConfig> = configs
            .into_iter()
            .filter(|c| self.table.get(&c.topic_name).as_ref() != Some(c))
            .collect();
        if changed.is_empty() {
            return 0;
        }
        let names: Vec<String> = changed.iter().map(|c| c.topic_name.clone()).collect();
        tracing::info!(topics = names.len(), first = %names[0], "topics created or updated");
        self.table.put_all(changed);
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        self.commit_change(&refs);
        names.len()
    }

    /// A slave's copy of its master's table: replaces the whole table (topics with their
    /// attributes, data version) when it differs, persists it and re-registers. Returns whether
    /// it changed.
    pub fn mirror_master(&self, master: crate::config_tables::TopicsDocument) -> bool {
        let changed = self.table.mirror(master);
        if changed {
            if let Err(e) = self.table.persist() {
                tracing::error!(error = %e, path = %self.table.path().display(), "persisting topics.json failed");
            }
            self.commit_change(&[]);
        }
        changed
    }

    /// Deletes a topic; returns its configuration if it existed.
    pub fn delete(&self, topic: &str) -> Option<TopicConfig> {
        let removed = self.table.remove(topic);
        if removed.is_some() {
            tracing::info!(topic, "topic deleted");
            self.commit_change(&[]);
        }
        removed
    }

    /// Send-path auto-creation: `topic` is unknown; create it from `default_topic` if that
    /// is an inheritable template. Returns the (existing or new) configuration, or `None` when
    /// the topic cannot be created.
    pub fn create_topic_in_send_message_method(
        &self,
        topic: &str,
        default_topic: &str,
        client_default_topic_queue_nums: i32,
        topic_sys_flag: i32,
    ) -> Option<TopicConfig> {
        let _guard = self.create_lock.lock();
        if let Some(existing) = self.table.get(topic) {
            return Some(existing);
        }
        let Some(template) = self.table.get(default_topic) else {
            tracing::warn!(
                topic,
                default_topic,
                "auto-create refused: default topic does not exist"
            );
            return None;
        };
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC
            && !self.auto_create_topic_enable.load(Ordering::Relaxed)
        {
            tracing::warn!(topic, "auto-create refused: autoCreateTopicEnable=false");
            return None;
        }
        if !perm::is_inherited(template.perm) {
            tracing::warn!(
                topic,
                default_topic,
                perm = template.perm,
                "auto-create refused: default topic has no INHERIT permission"
            );
            return None;
        }
        let queue_nums = client_default_topic_queue_nums
            .min(template.write_queue_nums)
            .clamp(1, MAX_QUEUE_NUMS);
        let mut created = TopicConfig::with_queues(
            topic,
            queue_nums,
            queue_nums,
            template.perm & !perm::PERM_INHERIT,
        );
        created.topic_filter_type = template.topic_filter_type;
        created.topic_sys_flag = topic_sys_flag;
        self.table.put(created.clone());
        tracing::info!(
            topic,
            default_topic,
            queue_nums,
            "topic auto-created on send"
        );
        self.commit_change(&[topic]);
        Some(created)
    }

    /// Creates a retry or DLQ topic (send-back, DLQ routing) if it does not exist.
    pub fn create_topic_in_send_message_back(
        &self,
        topic: &str,
        queue_nums: i32,
        perm: i32,
        topic_sys_flag: i32,
    ) -> Option<TopicConfig> {
        if let Some(existing) = self.table.get(topic) {
            return Some(existing);
        }
        if let Err(e) = validate_topic(topic) {
            tracing::warn!(topic, error = %e, "cannot create retry/DLQ topic");
            return None;
        }
        let _guard = self.create_lock.lock();
        let queue_nums = queue_nums.clamp(1, MAX_QUEUE_NUMS);
        let (config, created) = self.table.get_or_create(topic, || {
            let mut t = TopicConfig::with_queues(topic, queue_nums, queue_nums, perm);
            t.topic_sys_flag = topic_sys_flag;
            t.topic_filter_type = TopicFilterType::SingleTag;
            t
        });
        if created {
            tracing::info!(topic, queue_nums, "retry/DLQ topic created");
            self.commit_change(&[topic]);
        }
        Some(config)
    }

    /// The table as stored (GET_ALL_TOPIC_CONFIG), without the broker-permission mask.
    pub fn wrapper(&self) -> TopicConfigSerializeWrapper {
        self.table.to_wrapper()
    }

    /// Writes `topics.json` whole and empties its journal.
    pub fn persist(&self) -> Result<(), ConfigFileError> {
        self.table.persist()
    }

    /// Writes `topics.json` whole when its journal holds changes (the periodic persist).
    pub fn persist_if_journaled(&self) -> Result<bool, ConfigFileError> {
        self.table.persist_if_journaled()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manager(dir: &Path, auto: bool) -> TopicConfigManager {
        let config = BrokerConfig {
            auto_create_topic_enable: auto,
            store_path_root_dir: dir.to_path_buf(),
            ..BrokerConfig::default()
        };
        match TopicConfigManager::open(dir, Arc::new(config)) {
            Ok(m) => m,
            Err(e) => panic!("open failed: {e}"),
        }
    }

    /// After created or updated topics a registration carries only those; after a deletion, a
    /// failed registration or when asked, the whole table; an unchanged update changes nothing.
    #[test]
    fn registrations_carry_only_the_topics_changed_since_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), true);
        let rw = perm::PERM_READ_WRITE;
        let all = m.wrapper().topic_config_table.len();
        assert_eq!(
            m.registration_table(rw, false).topic_config_table.len(),
            all,
            "the first registration carries the whole table"
        );
        m.update(TopicConfig::new("A"));
        m.update_all(vec![TopicConfig::new("B"), TopicConfig::new("C")]);
        let increment = m.registration_table(rw, false);
        let mut names: Vec<_> = increment.topic_config_table.keys().collect();
        names.sort();
        assert_eq!(names, ["A", "B", "C"]);
        assert_eq!(increment.data_version, m.data_version());
        let version = m.data_version();
        m.update(TopicConfig::new("A"));
        assert_eq!(
            m.data_version(),
            version,
            "an unchanged topic is left alone"
        );
        assert_eq!(m.update_all(vec![TopicConfig::new("B")]), 0);

        m.update(TopicConfig::new("D"));
        m.register_whole_next();
        assert!(m.registration_table(rw, false).topic_config_table.len() > all);
        m.update(TopicConfig::new("E"));
        assert!(m.registration_table(rw, true).topic_config_table.len() > all);
        m.delete("E");
        assert!(m.registration_table(rw, false).topic_config_table.len() > all);
        // Without write permission every topic of an increment is masked too.
        m.update(TopicConfig::new("F"));
        let masked = m.registration_table(perm::PERM_READ, false);
        assert_eq!(masked.topic_config_table["F"].perm, perm::PERM_READ);
    }

    #[test]
    fn system_topics_and_auto_create() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), true);
        let tbw = m.select(AUTO_CREATE_TOPIC_KEY_TOPIC).unwrap();
        assert_eq!((tbw.read_queue_nums, tbw.perm), (8, 7));
        assert_eq!(m.select(SCHEDULE_TOPIC).unwrap().write_queue_nums, 18);
        assert_eq!(m.select("DefaultCluster").unwrap().read_queue_nums, 16);
        assert!(m.select(TRANS_HALF_TOPIC).is_some());
        assert!(m.is_system_topic("broker-a"));

        let t = m
            .create_topic_in_send_message_method("NewTopic", AUTO_CREATE_TOPIC_KEY_TOPIC, 4, 0)
            .unwrap();
        assert_eq!((t.read_queue_nums, t.write_queue_nums, t.perm), (4, 4, 6));
        // The cap is the template's queue count.
        let t = m
            .create_topic_in_send_message_method("Wide", AUTO_CREATE_TOPIC_KEY_TOPIC, 64, 0)
            .unwrap();
        assert_eq!(t.write_queue_nums, 8);
        // A template without INHERIT cannot be used.
        assert!(
            m.create_topic_in_send_message_method("X", "NewTopic", 4, 0)
                .is_none()
        );
        drop(m);
        // Reload from topics.json.
        let m = manager(dir.path(), true);
        assert_eq!(m.select("NewTopic").unwrap().write_queue_nums, 4);
    }

    #[test]
    fn trace_topic_exists_only_with_trace_topic_enable() {
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), true);
        assert!(m.select(comet_protocol::naming::TRACE_TOPIC).is_none());
        drop(m);
        let dir = tempfile::tempdir().unwrap();
        let config = BrokerConfig {
            trace_topic_enable: true,
            msg_trace_topic_name: "MyTrace".to_owned(),
            store_path_root_dir: dir.path().to_path_buf(),
            ..BrokerConfig::default()
        };
        let m = match TopicConfigManager::open(dir.path(), Arc::new(config)) {
            Ok(m) => m,
            Err(e) => panic!("open failed: {e}"),
        };
        let trace = m.select("MyTrace").unwrap();
        assert_eq!(
            (trace.read_queue_nums, trace.write_queue_nums, trace.perm),
            (1, 1, 6)
        );
        assert!(m.is_system_topic("MyTrace"));
    }

    #[test]
    fn auto_create_disabled_blocks_inherit() {
        let dir = tempfile::tempdir().unwrap();
        drop(manager(dir.path(), true));
        let m = manager(dir.path(), false);
        assert_eq!(m.select(AUTO_CREATE_TOPIC_KEY_TOPIC).unwrap().perm, 6);
        assert!(
            m.create_topic_in_send_message_method("T", AUTO_CREATE_TOPIC_KEY_TOPIC, 4, 0)
                .is_none()
        );
        let dir = tempfile::tempdir().unwrap();
        let m = manager(dir.path(), false);
        assert!(m.select(AUTO_CREATE_TOPIC_KEY_TOPIC).is_none());
    }

    #[test]
    fn register_wrapper_masks_perm() {
        let dir = tempfile::tempdir().unwrap();
        let config = BrokerConfig {
            broker_permission: perm::PERM_READ,
            ..BrokerConfig::default()
        };
        let m = TopicConfigManager::open(dir.path(), Arc::new(config)).unwrap();
        let w = m.registration_table(perm::PERM_READ, true);
        assert!(
            w.topic_config_table
                .values()
                .all(|t| !perm::is_writeable(t.perm))
        );
    }
}
