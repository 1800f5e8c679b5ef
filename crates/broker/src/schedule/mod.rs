//! `ScheduleMessageService`: delivers delayed messages (delay levels).
//!
//! A send with `DELAY=n` (n ≥ 1) is stored in `SCHEDULE_TOPIC_XXXX`, queue `n − 1`, and the store
//! gives its ConsumeQueue unit the delivery time (store time + the level's delay) as tags code.
//! Within one level every message has the same delay, so each queue is ordered by delivery time
//! and only its head needs watching. One task per level does that: it reads units from the
//! level's progress offset, re-puts every due message to its real topic and queue (DELAY removed,
//! REAL_TOPIC/REAL_QID kept, tags code recomputed by the store) and advances the offset; when
//! the head is not due yet it sleeps until it is, at most [`POLL_INTERVAL`].
//!
//! Progress per level is `delayOffset.json` (level → next queue offset), written by the
//! controller's periodic persist and at shutdown. A crash replays at most the messages delivered
//! since the last write — at-least-once, as in RocketMQ.

mod deliver;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use comet_config_file::ConfigFileError;
use comet_protocol::message::MessageExt;
use comet_protocol::message::properties::keys;

use crate::config_tables::{DELAY_OFFSET_FILE, DelayOffsetTable, config_path};

/// Pause before a level's first check after start-up (RocketMQ `FIRST_DELAY_TIME`).
pub const FIRST_DELAY: Duration = Duration::from_millis(1000);
/// Longest sleep between two checks of a queue head (RocketMQ `DELAY_FOR_A_WHILE`).
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Pause after a failed re-put (store full or shutting down) before retrying the same message.
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_millis(100);
/// ConsumeQueue units read per round.
pub const UNITS_PER_ROUND: usize = 32;

/// Delay-level timers and their progress (see the module docs).
#[derive(Debug)]
pub struct ScheduleMessageService {
    offsets: DelayOffsetTable,
    /// Delay of each level in ms; index 0 = level 1.
    levels_ms: Vec<i64>,
}

impl ScheduleMessageService {
    /// Loads `<store_root>/config/delayOffset.json`.
    pub fn open(store_root: &Path, levels_ms: Vec<i64>) -> Result<Self, ConfigFileError> {
        Ok(ScheduleMessageService {
            offsets: DelayOffsetTable::open(&config_path(store_root, DELAY_OFFSET_FILE))?,
            levels_ms,
        })
    }

    /// The highest delay level.
    pub fn max_delay_level(&self) -> i32 {
        i32::try_from(self.levels_ms.len()).unwrap_or(i32::MAX)
    }

    /// Delay of `level` (1-based) in ms.
    pub fn delay_millis(&self, level: i32) -> Option<i64> {
        let idx = usize::try_from(level.checked_sub(1)?).ok()?;
        self.levels_ms.get(idx).copied()
    }

    /// Next queue offset to deliver of `level`.
    pub fn offset(&self, level: i32) -> i64 {
        self.offsets.get(level).unwrap_or(0)
    }

    /// Level → next offset, as delayOffset.json holds it.
    pub fn offset_table(&self) -> BTreeMap<i32, i64> {
        self.offsets.snapshot()
    }

    /// The delayOffset.json text (GET_ALL_DELAY_OFFSET body).
    pub fn encode(&self) -> Result<String, ConfigFileError> {
        comet_config_file::to_fastjson_pretty(&crate::config_tables::DelayOffsetDocument {
            offset_table: self.offset_table(),
        })
    }

    /// A slave's copy of its master's delivery progress (the master delivers; a slave keeps
    /// the offsets current for the day it serves in its place).
    pub fn mirror_offsets(&self, master: &BTreeMap<i32, i64>) {
        for (level, offset) in master {
            self.offsets.set(*level, *offset);
        }
    }

    /// Writes delayOffset.json.
    pub fn persist(&self) -> Result<(), ConfigFileError> {
        self.offsets.persist()
    }

    /// Writes delayOffset.json if a level advanced since the last write (the periodic persist).
    pub fn persist_if_dirty(&self) -> Result<bool, ConfigFileError> {
        self.offsets.persist_if_dirty()
    }
}

/// The message to deliver for a stored delayed one: real topic and queue restored, DELAY
/// removed, everything else (body, flag, properties, born info, reconsume times) kept. `None`
/// when the record lacks REAL_TOPIC/REAL_QID.
pub fn restore_real_topic(stored: MessageExt) -> Option<MessageExt> {
    let topic = stored.properties.get(keys::REAL_TOPIC)?.to_owned();
    let queue_id: i32 = stored
        .properties
        .get(keys::REAL_QUEUE_ID)?
        .trim()
        .parse()
        .ok()?;
    let mut msg = reput_copy(stored, topic, queue_id);
    msg.properties.remove(keys::DELAY_TIME_LEVEL);
    Some(msg)
}

/// A stored message to put again into `topic`/`queue_id`: body, flag, properties, sys flag,
/// born and store hosts, reconsume times and prepared offset kept; the store assigns the rest.
pub fn reput_copy(stored: MessageExt, topic: String, queue_id: i32) -> MessageExt {
    let mut msg = MessageExt::new(topic, stored.body.clone());
    msg.flag = stored.flag;
    msg.properties = stored.properties;
    msg.queue_id = queue_id;
    msg.sys_flag = stored.sys_flag;
    msg.born_timestamp = stored.born_timestamp;
    msg.born_host = stored.born_host;
    msg.store_host = stored.store_host;
    msg.reconsume_times = stored.reconsume_times;
    msg.prepared_transaction_offset = stored.prepared_transaction_offset;
    msg
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use comet_protocol::naming::SCHEDULE_TOPIC;

    #[test]
    fn restore_moves_back_to_real_topic() {
        let mut stored = MessageExt::new(SCHEDULE_TOPIC, Bytes::from_static(b"hi"));
        stored.queue_id = 0;
        stored.properties.insert(keys::REAL_TOPIC, "T");
        stored.properties.insert(keys::REAL_QUEUE_ID, "3");
        stored.properties.insert(keys::DELAY_TIME_LEVEL, "1");
        stored.properties.insert(keys::TAGS, "a");
        stored.reconsume_times = 2;
        let msg = restore_real_topic(stored).unwrap();
        assert_eq!((msg.topic.as_str(), msg.queue_id), ("T", 3));
        assert_eq!(msg.properties.get(keys::DELAY_TIME_LEVEL), None);
        assert_eq!(msg.tags(), Some("a"));
        assert_eq!(msg.reconsume_times, 2);

        let mut bad = MessageExt::new(SCHEDULE_TOPIC, Bytes::new());
        bad.properties.insert(keys::REAL_TOPIC, "T");
        assert!(restore_real_topic(bad).is_none());
    }

    #[test]
    fn levels_and_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let s = ScheduleMessageService::open(dir.path(), vec![1000, 5000]).unwrap();
        assert_eq!(s.max_delay_level(), 2);
        assert_eq!(s.delay_millis(1), Some(1000));
        assert_eq!(s.delay_millis(0), None);
        assert_eq!(s.delay_millis(3), None);
        s.offsets.set(2, 7);
        s.persist().unwrap();
        let s = ScheduleMessageService::open(dir.path(), vec![1000, 5000]).unwrap();
        assert_eq!(s.offset(2), 7);
        assert!(s.encode().unwrap().contains('7'));
    }

    #[test]
    fn the_periodic_persist_writes_only_after_a_level_advanced() {
        let dir = tempfile::tempdir().unwrap();
        let s = ScheduleMessageService::open(dir.path(), vec![1000, 5000]).unwrap();
        let path = config_path(dir.path(), DELAY_OFFSET_FILE);
        assert!(!s.persist_if_dirty().unwrap());
        assert!(!path.exists(), "nothing advanced, nothing written");

        s.offsets.set(1, 3);
        assert!(s.persist_if_dirty().unwrap());
        assert!(std::fs::read_to_string(&path).unwrap().contains('3'));
        // Written once; setting a level to the offset it already has is no change.
        std::fs::remove_file(&path).unwrap();
        s.offsets.set(1, 3);
        assert!(!s.persist_if_dirty().unwrap());
        assert!(!path.exists());

        s.offsets.set(1, 4);
        assert!(s.persist_if_dirty().unwrap());
        let reopened = ScheduleMessageService::open(dir.path(), vec![1000, 5000]).unwrap();
        assert_eq!(reopened.offset(1), 4);
    }
}
