//! The send-side rewrite of a timer message (RocketMQ's `HookUtils.handleScheduleMessage`).

use comet_protocol::message::properties::keys;
use comet_protocol::message::{MessageExt, sysflag};
use comet_protocol::naming::TIMER_TOPIC;
use comet_store::PutMessageStatus;

/// Timer settings the rewrite checks against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerRules {
    /// `timerWheelEnable`.
    pub enabled: bool,
    /// `timerPrecisionMs`.
    pub precision_ms: i64,
    /// `timerMaxDelaySec`.
    pub max_delay_sec: i64,
}

/// Whether `msg` asks for the timer wheel: a non-transactional or commit message outside the
/// timer topic that carries TIMER_DELIVER_MS, TIMER_DELAY_SEC or TIMER_DELAY_MS and no
/// TIMER_OUT_MS (a message the wheel already delivered keeps its timer properties). A message
/// with a delay level takes the delay queue instead, and loses its timer properties here.
fn asks_for_timer(msg: &mut MessageExt) -> bool {
    let tran = sysflag::transaction_type(msg.sys_flag);
    if tran != sysflag::TRANSACTION_NOT_TYPE && tran != sysflag::TRANSACTION_COMMIT_TYPE {
        return false;
    }
    if msg.topic == TIMER_TOPIC {
        return false;
    }
    let level = msg
        .properties
        .get(keys::DELAY_TIME_LEVEL)
        .and_then(|l| l.parse::<i32>().ok())
        .unwrap_or(0);
    if level > 0 {
        for key in [
            keys::TIMER_DELIVER_MS,
            keys::TIMER_DELAY_SEC,
            keys::TIMER_DELAY_MS,
        ] {
            msg.properties.remove(key);
        }
        return false;
    }
    if msg.properties.get(keys::TIMER_OUT_MS).is_some() {
        return false;
    }
    [
        keys::TIMER_DELIVER_MS,
        keys::TIMER_DELAY_SEC,
        keys::TIMER_DELAY_MS,
    ]
    .iter()
    .any(|key| msg.properties.get(key).is_some())
}

/// The absolute delivery time a timer message asks for, at `now_ms`: TIMER_DELAY_SEC, else
/// TIMER_DELAY_MS (both relative to its arrival), else TIMER_DELIVER_MS. `None` when the value
/// read is not a number.
pub fn requested_deliver_ms(msg: &MessageExt, now_ms: i64) -> Option<i64> {
    if let Some(sec) = msg.properties.get(keys::TIMER_DELAY_SEC) {
        return now_ms.checked_add(sec.parse::<i64>().ok()?.checked_mul(1000)?);
    }
    if let Some(ms) = msg.properties.get(keys::TIMER_DELAY_MS) {
        return now_ms.checked_add(ms.parse::<i64>().ok()?);
    }
    msg.properties.get(keys::TIMER_DELIVER_MS)?.parse().ok()
}

/// Rewrites a timer message due in the future for the wheel: TIMER_OUT_MS gets its slot time
/// (the requested time rounded down to the precision, one slot earlier when it falls on a slot
/// boundary — the slot is delivered once it has ended, so never before the requested time),
/// REAL_TOPIC/REAL_QID its topic and queue, and it moves to `rmq_sys_wheel_timer` queue 0. One
/// already due is left as it is and delivered at once. Refused: timers off, an unreadable time,
/// a time further ahead than the maximum delay, a timer delete marker already due.
pub fn transform(
    msg: &mut MessageExt,
    rules: &TimerRules,
    now_ms: impl FnOnce() -> i64,
) -> Result<bool, PutMessageStatus> {
    if !asks_for_timer(msg) {
        return Ok(false);
    }
    if !rules.enabled {
        return Err(PutMessageStatus::WheelTimerNotEnable);
    }
    let now_ms = now_ms();
    let deliver_ms =
        requested_deliver_ms(msg, now_ms).ok_or(PutMessageStatus::WheelTimerMsgIllegal)?;
    if deliver_ms <= now_ms {
        if msg.properties.get(keys::TIMER_DEL_UNIQKEY).is_some() {
            return Err(PutMessageStatus::WheelTimerMsgIllegal);
        }
        return Ok(false);
    }
    if deliver_ms - now_ms > rules.max_delay_sec.saturating_mul(1000) {
        return Err(PutMessageStatus::WheelTimerMsgIllegal);
    }
    let p = rules.precision_ms.max(1);
    let out_ms = if deliver_ms % p == 0 {
        deliver_ms - p
    } else {
        deliver_ms / p * p
    };
    msg.properties
        .insert(keys::TIMER_OUT_MS, out_ms.to_string());
    msg.properties.insert(keys::REAL_TOPIC, msg.topic.clone());
    msg.properties
        .insert(keys::REAL_QUEUE_ID, msg.queue_id.to_string());
    msg.topic = TIMER_TOPIC.to_owned();
    msg.queue_id = 0;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    const NOW: i64 = 1_700_000_000_500;
    const RULES: TimerRules = TimerRules {
        enabled: true,
        precision_ms: 1000,
        max_delay_sec: 259_200,
    };

    fn msg(props: &[(&str, &str)]) -> MessageExt {
        let mut m = MessageExt::new("T", Bytes::from_static(b"x"));
        m.queue_id = 3;
        for (k, v) in props {
            m.properties.insert(k, *v);
        }
        m
    }

    #[test]
    fn a_relative_delay_parks_the_message_in_the_timer_topic() {
        let mut m = msg(&[(keys::TIMER_DELAY_MS, "2000")]);
        assert_eq!(transform(&mut m, &RULES, || NOW), Ok(true));
        assert_eq!((m.topic.as_str(), m.queue_id), (TIMER_TOPIC, 0));
        assert_eq!(m.properties.get(keys::REAL_TOPIC), Some("T"));
        assert_eq!(m.properties.get(keys::REAL_QUEUE_ID), Some("3"));
        // 1_700_000_002_500 rounded down.
        assert_eq!(m.properties.get(keys::TIMER_OUT_MS), Some("1700000002000"));
        assert_eq!(m.properties.get(keys::TIMER_DELAY_MS), Some("2000"));

        let mut m = msg(&[(keys::TIMER_DELAY_SEC, "3")]);
        assert_eq!(transform(&mut m, &RULES, || NOW), Ok(true));
        assert_eq!(m.properties.get(keys::TIMER_OUT_MS), Some("1700000003000"));
    }

    #[test]
    fn a_time_on_a_slot_boundary_takes_the_slot_before() {
        let mut m = msg(&[(keys::TIMER_DELIVER_MS, "1700000005000")]);
        assert_eq!(transform(&mut m, &RULES, || NOW), Ok(true));
        assert_eq!(m.properties.get(keys::TIMER_OUT_MS), Some("1700000004000"));
    }

    #[test]
    fn a_past_time_is_delivered_as_it_is() {
        let mut m = msg(&[(keys::TIMER_DELIVER_MS, "1000")]);
        assert_eq!(transform(&mut m, &RULES, || NOW), Ok(false));
        assert_eq!(m.topic, "T");
        assert_eq!(m.properties.get(keys::TIMER_OUT_MS), None);
        let mut del = msg(&[
            (keys::TIMER_DELIVER_MS, "1000"),
            (keys::TIMER_DEL_UNIQKEY, "k"),
        ]);
        assert_eq!(
            transform(&mut del, &RULES, || NOW),
            Err(PutMessageStatus::WheelTimerMsgIllegal)
        );
    }

    #[test]
    fn refusals() {
        let far = (NOW + 259_200_000 + 1).to_string();
        let mut m = msg(&[(keys::TIMER_DELIVER_MS, far.as_str())]);
        assert_eq!(
            transform(&mut m, &RULES, || NOW),
            Err(PutMessageStatus::WheelTimerMsgIllegal)
        );
        let edge = (NOW + 259_200_000).to_string();
        let mut m = msg(&[(keys::TIMER_DELIVER_MS, edge.as_str())]);
        assert_eq!(transform(&mut m, &RULES, || NOW), Ok(true));
        let mut m = msg(&[(keys::TIMER_DELAY_MS, "soon")]);
        assert_eq!(
            transform(&mut m, &RULES, || NOW),
            Err(PutMessageStatus::WheelTimerMsgIllegal)
        );
        let off = TimerRules {
            enabled: false,
            ..RULES
        };
        let mut m = msg(&[(keys::TIMER_DELAY_MS, "2000")]);
        assert_eq!(
            transform(&mut m, &off, || NOW),
            Err(PutMessageStatus::WheelTimerNotEnable)
        );
    }

    #[test]
    fn what_is_not_a_new_timer_message_is_left_alone() {
        let mut delayed = msg(&[
            (keys::TIMER_DELAY_MS, "2000"),
            (keys::DELAY_TIME_LEVEL, "2"),
        ]);
        assert_eq!(transform(&mut delayed, &RULES, || NOW), Ok(false));
        assert_eq!(delayed.properties.get(keys::TIMER_DELAY_MS), None);
        let mut delivered = msg(&[(keys::TIMER_DELAY_MS, "2000"), (keys::TIMER_OUT_MS, "1")]);
        assert_eq!(transform(&mut delivered, &RULES, || NOW), Ok(false));
        assert_eq!(delivered.topic, "T");
        let mut plain = msg(&[]);
        assert_eq!(transform(&mut plain, &RULES, || NOW), Ok(false));
        let mut prepared = msg(&[(keys::TIMER_DELAY_MS, "2000")]);
        prepared.sys_flag = sysflag::TRANSACTION_PREPARED_TYPE;
        assert_eq!(transform(&mut prepared, &RULES, || NOW), Ok(false));
    }
}
