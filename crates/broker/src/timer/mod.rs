//! Timer messages: delivery at an arbitrary time (RocketMQ 5.x `TimerMessageStore`).
//!
//! A send carrying TIMER_DELIVER_MS (absolute), TIMER_DELAY_SEC or TIMER_DELAY_MS (relative to
//! its arrival) is rewritten by [`transform`] into `rmq_sys_wheel_timer` queue 0, exactly as
//! RocketMQ stores it. Two tasks then move it on, over the store's
//! [`comet_store::timer::TimerStore`]:
//! - *enqueue* follows the timer topic's queue and parks each message in the wheel slot of its
//!   TIMER_OUT_MS; one whose slot has already been delivered is re-put at once;
//! - *dequeue* collects each slot once the clock has passed it and re-puts its messages to
//!   their real topic and queue (TIMER_ENQUEUE_MS and TIMER_DEQUEUE_MS added, every other
//!   property kept, as Apache stores it) through the same path as delay-level
//!   deliveries; a roll record puts its message back into the timer topic with
//!   TIMER_ROLL_TIMES incremented, to be parked again nearer its time.
//!
//! A third task writes the timer checkpoint every `timerFlushIntervalMs` (read from the
//! configuration in force each time it waits); a crash re-delivers what was delivered since
//! (at-least-once). Only a master runs the tasks.

mod deliver;
pub mod transform;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use comet_protocol::message::MessageExt;
use comet_protocol::message::properties::keys;
use comet_protocol::naming::TIMER_TOPIC;
use comet_protocol::time::now_millis;
use comet_store::timer::{TimerConfig, TimerStats, TimerStore};
use comet_store::{PutMessageStatus, StoreError};
use parking_lot::Mutex;
use tokio::task::JoinHandle;

use crate::config::BrokerConfig;
use crate::schedule::{reput_copy, restore_real_topic};
pub use transform::TimerRules;

/// Longest pause of the enqueue task when the timer topic has nothing new.
pub const ENQUEUE_POLL: Duration = Duration::from_millis(100);
/// Longest pause of the dequeue task before it looks at the clock again.
pub const DEQUEUE_POLL: Duration = Duration::from_millis(100);
/// Pause after a failed re-put before the same message is tried again.
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_millis(100);
/// Timer-topic queue units read per round.
pub const UNITS_PER_ROUND: usize = 64;

/// `timerMaxDelaySec` of `config`.
fn max_delay_sec(config: &BrokerConfig) -> i64 {
    i64::try_from(config.timer_max_delay_sec).unwrap_or(i64::MAX)
}

/// The remark of a refused timer message (RocketMQ's, with the maximum of `config`, the
/// configuration in force).
pub fn illegal_remark(config: &BrokerConfig) -> String {
    format!(
        "timer message illegal, the delay time should not be bigger than the max delay {}ms; \
         or if set del msg, the delay time should be bigger than the current time",
        config.timer_max_delay_sec.saturating_mul(1000)
    )
}

/// The recall handle the answer to a parked timer message carries (RocketMQ 5.3's
/// `RecallMessageHandle.HandleV1`): URL-safe base64 of `v1 <real topic> <broker name>
/// <TIMER_OUT_MS + 1> <UNIQ_KEY>`. `None` for a message the timer did not park and for one of a
/// retry topic.
pub fn recall_handle(broker_name: &str, parked: &MessageExt) -> Option<String> {
    use base64::Engine;
    let out_ms: i64 = parked.properties.get(keys::TIMER_OUT_MS)?.parse().ok()?;
    let topic = parked.properties.get(keys::REAL_TOPIC)?;
    if topic.starts_with(comet_protocol::naming::RETRY_GROUP_TOPIC_PREFIX) {
        return None;
    }
    let id = parked.uniq_key().unwrap_or_default();
    let raw = format!("v1 {topic} {broker_name} {} {id}", out_ms.saturating_add(1));
    Some(base64::engine::general_purpose::URL_SAFE.encode(raw))
}

/// `timerPrecisionMs` as RocketMQ applies it: the largest of 100, 200, 500 and 1000 ms not above
/// the configured value (100 below that).
pub fn effective_precision_ms(configured: u64) -> i64 {
    match configured {
        0..200 => 100,
        200..500 => 200,
        500..1000 => 500,
        _ => 1000,
    }
}

/// Most slots of the roll window: RocketMQ's wheel spans 7 days of slots, 60 of them kept
/// blank.
pub const MAX_ROLL_WINDOW_SLOTS: i64 = 7 * 24 * 3600 - comet_store::timer::BLANK_SLOTS;

/// `timerRollWindowSlot` as RocketMQ applies it: a value below 2 or above
/// [`MAX_ROLL_WINDOW_SLOTS`] means that maximum.
pub fn effective_roll_window(configured: u64) -> i64 {
    match i64::try_from(configured) {
        Ok(slots) if (2..=MAX_ROLL_WINDOW_SLOTS).contains(&slots) => slots,
        _ => MAX_ROLL_WINDOW_SLOTS,
    }
}

/// The timer wheel of a broker (see the module docs); without a store while timers have been
/// off since the broker started.
///
/// `timerWheelEnable` is read from the configuration in force by every put
/// ([`TimerMessageService::transform`]) and every POP ([`TimerMessageService::is_on`]), as Apache
/// reads it on each use: turned off, timer messages and POPs are refused while the wheel keeps
/// delivering what it holds; turned on in a broker started without it, the broker opens the
/// wheel and starts its tasks ([`TimerMessageService::turn_on`]). The wheel's geometry
/// (`timerPrecisionMs`, `timerRollWindowSlot`) is read at start.
#[derive(Debug)]
pub struct TimerMessageService {
    /// `timerPrecisionMs` as applied, read at start: the width of the wheel's slots.
    precision_ms: i64,
    /// The wheel's geometry, read at start (also for a wheel opened later).
    timer_config: TimerConfig,
    /// The store root the wheel lives under.
    root: PathBuf,
    /// The wheel: opened at start with `timerWheelEnable`, or when it is turned on later.
    store: OnceLock<TimerStore>,
    /// Serialises opening the wheel while the broker runs.
    opening: tokio::sync::Mutex<()>,
    /// The tasks of a wheel opened while the broker runs (the broker's shutdown awaits them; the
    /// ones started with the broker are its own).
    late_tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl TimerMessageService {
    /// Opens the timer store under `root` when `timerWheelEnable` is on.
    pub fn open(root: &Path, config: &BrokerConfig) -> Result<Self, StoreError> {
        let precision_ms = effective_precision_ms(config.timer_precision_ms);
        let timer_config = TimerConfig {
            precision_ms,
            roll_window_slots: effective_roll_window(config.timer_roll_window_slot),
        };
        let store = OnceLock::new();
        if config.timer_wheel_enable {
            let _ = store.set(TimerStore::open(root, timer_config, now_millis())?);
        }
        Ok(TimerMessageService {
            precision_ms,
            timer_config,
            root: root.to_path_buf(),
            store,
            opening: tokio::sync::Mutex::new(()),
            late_tasks: Mutex::new(Vec::new()),
        })
    }

    /// Whether timer messages (and POPs, whose checkpoints are timer messages) are taken under
    /// `live`, the configuration in force: `timerWheelEnable` is on and the wheel is open.
    pub fn is_on(&self, live: &BrokerConfig) -> bool {
        live.timer_wheel_enable && self.store.get().is_some()
    }

    /// The send-side rewrite ([`transform::transform`]) with this broker's rules, whether timers
    /// are on ([`TimerMessageService::is_on`]) and the maximum delay (`timerMaxDelaySec`) taken
    /// from `live`, the configuration in force. `Ok(true)` when the message now goes to the
    /// timer topic. `now_ms` is read only for a message that asks for a delivery time: most
    /// sends skip the clock.
    pub fn transform(
        &self,
        msg: &mut MessageExt,
        live: &BrokerConfig,
        now_ms: impl FnOnce() -> i64,
    ) -> Result<bool, PutMessageStatus> {
        let rules = TimerRules {
            enabled: self.is_on(live),
            precision_ms: self.precision_ms,
            max_delay_sec: max_delay_sec(live),
        };
        transform::transform(msg, &rules, now_ms)
    }

    /// The tasks of a wheel opened while the broker runs, for the broker's shutdown to await.
    pub fn take_late_tasks(&self) -> Vec<JoinHandle<()>> {
        std::mem::take(&mut *self.late_tasks.lock())
    }

    /// The timer store, when the wheel is open.
    pub fn store(&self) -> Option<&TimerStore> {
        self.store.get()
    }

    /// The store's figures, when the wheel is open.
    pub fn stats(&self) -> Option<TimerStats> {
        self.store.get().map(TimerStore::stats)
    }

    /// Writes the timer checkpoint (blocking file I/O).
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        match self.store.get() {
            Some(store) => store.checkpoint().map(|_| ()),
            None => Ok(()),
        }
    }
}

/// The message to put for a fired timer record: to the real topic and queue, or, for a roll,
/// back to the timer topic with TIMER_ROLL_TIMES incremented. Both get TIMER_ENQUEUE_MS and
/// TIMER_DEQUEUE_MS and keep every other property, REAL_TOPIC and REAL_QID included: Apache
/// 5.3.3 clears those two only after it has serialized the properties it stores. `None` without
/// a real topic.
pub fn timer_delivery(
    stored: MessageExt,
    roll: bool,
    enqueue_ms: i64,
    dequeue_ms: i64,
) -> Option<MessageExt> {
    let mut msg = if roll {
        let rolls = stored
            .properties
            .get(keys::TIMER_ROLL_TIMES)
            .and_then(|r| r.parse::<i32>().ok())
            .unwrap_or(0);
        let mut msg = reput_copy(stored, TIMER_TOPIC.to_owned(), 0);
        msg.properties
            .insert(keys::TIMER_ROLL_TIMES, rolls.saturating_add(1).to_string());
        msg
    } else {
        restore_real_topic(stored)?
    };
    msg.properties
        .insert(keys::TIMER_ENQUEUE_MS, enqueue_ms.to_string());
    msg.properties
        .insert(keys::TIMER_DEQUEUE_MS, dequeue_ms.to_string());
    Some(msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn parked() -> MessageExt {
        let mut m = MessageExt::new(TIMER_TOPIC, Bytes::from_static(b"x"));
        m.properties.insert(keys::REAL_TOPIC, "T");
        m.properties.insert(keys::REAL_QUEUE_ID, "2");
        m.properties.insert(keys::TIMER_OUT_MS, "5000");
        m.properties.insert(keys::TIMER_DELAY_MS, "3000");
        m.properties.insert(keys::TAGS, "a");
        m
    }

    #[test]
    fn delivery_goes_to_the_real_topic_and_stamps_the_times() {
        let msg = timer_delivery(parked(), false, 11, 22).unwrap();
        assert_eq!((msg.topic.as_str(), msg.queue_id), ("T", 2));
        assert_eq!(msg.properties.get(keys::REAL_TOPIC), Some("T"));
        assert_eq!(msg.properties.get(keys::REAL_QUEUE_ID), Some("2"));
        assert_eq!(msg.properties.get(keys::TIMER_OUT_MS), Some("5000"));
        assert_eq!(msg.properties.get(keys::TIMER_DELAY_MS), Some("3000"));
        assert_eq!(msg.properties.get(keys::TIMER_ENQUEUE_MS), Some("11"));
        assert_eq!(msg.properties.get(keys::TIMER_DEQUEUE_MS), Some("22"));
        assert_eq!(msg.tags(), Some("a"));
        // Stored as Apache stores it: the put does not wait, but no WAIT property says so.
        assert_eq!(msg.properties.get(keys::WAIT_STORE_MSG_OK), None);
    }

    #[test]
    fn a_roll_goes_back_to_the_timer_topic() {
        let msg = timer_delivery(parked(), true, 1, 2).unwrap();
        assert_eq!((msg.topic.as_str(), msg.queue_id), (TIMER_TOPIC, 0));
        assert_eq!(msg.properties.get(keys::TIMER_ROLL_TIMES), Some("1"));
        assert_eq!(msg.properties.get(keys::REAL_TOPIC), Some("T"));
        assert_eq!(msg.properties.get(keys::WAIT_STORE_MSG_OK), None);
        let again = timer_delivery(msg, true, 1, 2).unwrap();
        assert_eq!(again.properties.get(keys::TIMER_ROLL_TIMES), Some("2"));
    }

    #[test]
    fn the_recall_handle_is_apaches() {
        let mut m = parked();
        m.properties.insert(keys::UNIQ_KEY, "ID1");
        let handle = recall_handle("broker-a", &m).unwrap();
        use base64::Engine;
        let raw = base64::engine::general_purpose::URL_SAFE
            .decode(handle)
            .unwrap();
        assert_eq!(String::from_utf8(raw).unwrap(), "v1 T broker-a 5001 ID1");
        m.properties.insert(keys::REAL_TOPIC, "%RETRY%g");
        assert_eq!(recall_handle("broker-a", &m), None);
        m.properties.remove(keys::TIMER_OUT_MS);
        assert_eq!(recall_handle("broker-a", &m), None);
    }

    #[test]
    fn an_out_of_range_roll_window_means_the_whole_wheel() {
        assert_eq!(effective_roll_window(2), 2);
        assert_eq!(effective_roll_window(172_800), 172_800);
        assert_eq!(effective_roll_window(1), MAX_ROLL_WINDOW_SLOTS);
        assert_eq!(effective_roll_window(10_000_000), MAX_ROLL_WINDOW_SLOTS);
    }

    #[test]
    fn the_precision_snaps_to_apaches_candidates() {
        let snapped: Vec<i64> = [1, 150, 200, 499, 500, 999, 1000, 5000]
            .into_iter()
            .map(effective_precision_ms)
            .collect();
        assert_eq!(snapped, vec![100, 100, 200, 200, 500, 500, 1000, 1000]);
    }

    #[test]
    fn the_refusal_remark_names_the_maximum() {
        let config = BrokerConfig::default();
        assert!(illegal_remark(&config).contains("max delay 259200000ms"));
    }

    #[test]
    fn timer_wheel_enable_is_the_one_in_force_and_needs_an_open_wheel() {
        let ask = || {
            let mut msg = MessageExt::new("T", bytes::Bytes::from_static(b"x"));
            msg.properties.insert(keys::TIMER_DELAY_SEC, "30");
            msg
        };
        let now = || 1_700_000_000_000;
        let on = BrokerConfig::default();
        let off = BrokerConfig {
            timer_wheel_enable: false,
            ..on.clone()
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let open = TimerMessageService::open(dir.path(), &on).expect("timer opens");
        assert!(open.is_on(&on) && !open.is_on(&off));
        assert_eq!(open.transform(&mut ask(), &on, now), Ok(true));
        assert_eq!(
            open.transform(&mut ask(), &off, now),
            Err(PutMessageStatus::WheelTimerNotEnable)
        );
        // Started off: turned on in the configuration, but no wheel is open yet.
        let closed = TimerMessageService::open(dir.path(), &off).expect("nothing to open");
        assert!(closed.store().is_none() && !closed.is_on(&on));
        assert_eq!(
            closed.transform(&mut ask(), &on, now),
            Err(PutMessageStatus::WheelTimerNotEnable)
        );
    }

    #[test]
    fn the_maximum_delay_is_the_one_in_force() {
        let dir = tempfile::tempdir().expect("tempdir");
        let started = BrokerConfig::default();
        let service = TimerMessageService::open(dir.path(), &started).expect("timer opens");
        let in_force = BrokerConfig {
            timer_max_delay_sec: 60,
            ..started.clone()
        };
        let ask = |delay_sec: &str| {
            let mut msg = MessageExt::new("T", bytes::Bytes::from_static(b"x"));
            msg.properties.insert(keys::TIMER_DELAY_SEC, delay_sec);
            msg
        };
        let now = || 1_700_000_000_000;
        assert_eq!(service.transform(&mut ask("120"), &started, now), Ok(true));
        assert_eq!(
            service.transform(&mut ask("120"), &in_force, now),
            Err(PutMessageStatus::WheelTimerMsgIllegal)
        );
        assert_eq!(service.transform(&mut ask("30"), &in_force, now), Ok(true));
    }
}
