//! Auto-renewal: a push consumer receives with `auto_renew`, and the broker keeps its messages
//! invisible while the client works on them, as Apache's proxy does.
//!
//! The broker holds the newest receipt handle of each such message, by client id, group and
//! message id. Every [`RENEW_PERIOD`] it renews the handles whose invisible time ends within
//! [`RENEW_AHEAD`] (a ChangeInvisibleDuration of its own), each time for longer:
//! [`RENEW_STEPS`], the last step repeating. Once the message has been renewed for
//! [`MAX_RENEW`], the broker gives it back: it stays invisible for the group's retry delay of its
//! delivery (the consumers' backoff table) and the handle is forgotten. Once the client's
//! Telemetry stream is gone it makes the message visible again after [`GONE_INVISIBLE`] and
//! forgets the handle. When a renewal fails the handle is forgotten too, and the message comes
//! back when its invisible time ends.
//! An ack, change or dead-letter forward of the message by the client acts on the held handle
//! (the client's own may be outdated) and ends the renewal. Renewals and those three take turns,
//! so none acts on a handle the other has just replaced.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use comet_protocol::time::now_millis;
use parking_lot::Mutex;
use tokio::task::JoinHandle;

use super::clients::GrpcClients;
use super::consumer::GrpcReceipt;
use super::invisible::change;
use super::telemetry::CONSUMER_BACKOFF_SECS;
use comet_broker::context::BrokerContext;

/// How often the due handles are renewed.
pub const RENEW_PERIOD: Duration = Duration::from_secs(1);
/// How long before its invisible time ends a handle is renewed.
pub const RENEW_AHEAD: Duration = Duration::from_secs(10);
/// The invisible time left to a message whose client has gone away.
pub const GONE_INVISIBLE: Duration = Duration::from_secs(1);
/// How long a message is renewed at most, counted from its receipt.
pub const MAX_RENEW: Duration = Duration::from_secs(3 * 60 * 60);
/// The invisible time of the n-th renewal of a message: 1, 3, 5, 10 and 30 minutes, then an hour
/// for every further one.
pub const RENEW_STEPS: [Duration; 6] = [
    Duration::from_secs(60),
    Duration::from_secs(3 * 60),
    Duration::from_secs(5 * 60),
    Duration::from_secs(10 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(60 * 60),
];

/// Client id, group, message id.
type Key = (String, String, String);

#[derive(Debug, Clone)]
struct Held {
    topic: String,
    receipt: GrpcReceipt,
    /// When the broker started holding it (the receive), epoch ms.
    since: i64,
    /// Renewals so far.
    renewed: usize,
    /// The message's reconsume count at its receipt.
    reconsume_times: i32,
}

/// What a pass of the renewal service does with one held handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Its invisible time does not end soon.
    Wait,
    /// Renew it for this many ms.
    Renew(i64),
    /// Make the message visible again after this many ms, and forget the handle: its client is
    /// gone, or it has been renewed for [`MAX_RENEW`].
    GiveBack(i64),
}

impl Held {
    /// The step due for this handle at `now`, its client `gone` or not.
    fn step(&self, now: i64, gone: bool) -> Step {
        if gone {
            return Step::GiveBack(as_millis(GONE_INVISIBLE));
        }
        let handle = &self.receipt.handle;
        let until = handle.pop_time.saturating_add(handle.invisible_time);
        if until.saturating_sub(now) > as_millis(RENEW_AHEAD) {
            return Step::Wait;
        }
        if now.saturating_sub(self.since) >= as_millis(MAX_RENEW) {
            return Step::GiveBack(retry_delay_ms(self.reconsume_times));
        }
        let last = RENEW_STEPS.len() - 1;
        Step::Renew(as_millis(RENEW_STEPS[self.renewed.min(last)]))
    }
}

/// The group's retry delay of a message consumed `reconsume_times` times before: the consumers'
/// backoff table from its third entry on (the first redelivery waits 10 s), as RocketMQ's
/// customized retry policy reads it.
fn retry_delay_ms(reconsume_times: i32) -> i64 {
    let last = CONSUMER_BACKOFF_SECS.len() - 1;
    let index = usize::try_from(reconsume_times.max(0))
        .unwrap_or(last)
        .saturating_add(2)
        .min(last);
    as_millis(Duration::from_secs(CONSUMER_BACKOFF_SECS[index]))
}

/// The handles the broker renews.
#[derive(Debug, Default)]
pub struct Renewals {
    held: Mutex<HashMap<Key, Held>>,
    /// Taken by each renewal and by each release, so they take turns.
    turn: tokio::sync::Mutex<()>,
}

fn key(client_id: &str, group: &str, message_id: &str) -> Key {
    (
        client_id.to_owned(),
        group.to_owned(),
        message_id.to_owned(),
    )
}

fn as_millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Renewals {
    /// Starts renewing `receipt`, the handle of `message_id` received by `client_id` for `group`
    /// from `topic`, consumed `reconsume_times` times before.
    pub fn hold(
        &self,
        (client_id, group, topic): (&str, &str, &str),
        message_id: &str,
        receipt: GrpcReceipt,
        reconsume_times: i32,
    ) {
        self.held.lock().insert(
            key(client_id, group, message_id),
            Held {
                topic: topic.to_owned(),
                receipt,
                since: now_millis(),
                renewed: 0,
                reconsume_times,
            },
        );
    }

    /// Stops renewing `message_id` of `client_id` and `group`; its newest handle, if it was
    /// renewed.
    pub async fn release(
        &self,
        client_id: &str,
        group: &str,
        message_id: &str,
    ) -> Option<GrpcReceipt> {
        let _turn = self.turn.lock().await;
        self.held
            .lock()
            .remove(&key(client_id, group, message_id))
            .map(|h| h.receipt)
    }

    /// Handles renewed now.
    pub fn len(&self) -> usize {
        self.held.lock().len()
    }

    /// Whether no handle is renewed.
    pub fn is_empty(&self) -> bool {
        self.held.lock().is_empty()
    }

    /// The handles to act on at `now`, with their steps (see [`Held::step`]); `gone` tells the
    /// clients that have gone away.
    fn due(&self, now: i64, gone: impl Fn(&str) -> bool) -> Vec<(Key, Held, Step)> {
        self.held
            .lock()
            .iter()
            .filter_map(|(k, h)| match h.step(now, gone(&k.0)) {
                Step::Wait => None,
                step => Some((k.clone(), h.clone(), step)),
            })
            .collect()
    }
}

/// Renews every due handle once (see the module docs).
pub async fn renew_due(ctx: &BrokerContext, renewals: &Renewals, clients: &GrpcClients) {
    let now = now_millis();
    let gone = |client_id: &str| clients.attached(client_id).is_none();
    for (key, held, step) in renewals.due(now, gone) {
        let _turn = renewals.turn.lock().await;
        let (client_id, group, message_id) = &key;
        let still_held = renewals
            .held
            .lock()
            .get(&key)
            .is_some_and(|h| h.receipt == held.receipt);
        if !still_held {
            continue;
        }
        let (Step::Renew(ms) | Step::GiveBack(ms)) = step else {
            continue;
        };
        if matches!(step, Step::GiveBack(_)) {
            renewals.held.lock().remove(&key);
        }
        match change(ctx, group, &held.topic, &held.receipt, ms).await {
            Ok(renewed) => {
                if let Some(h) = renewals.held.lock().get_mut(&key) {
                    h.receipt = renewed;
                    h.renewed = h.renewed.saturating_add(1);
                }
            }
            Err(status) => {
                tracing::warn!(
                    client_id,
                    group,
                    message_id,
                    ?step,
                    code = status.code,
                    reason = %status.message,
                    "changing the invisible time of a held receipt handle failed; the message \
                     comes back when its invisible time ends"
                );
                renewals.held.lock().remove(&key);
            }
        }
    }
}

/// Renews due handles every [`RENEW_PERIOD`] until the broker shuts down.
pub fn start(
    ctx: Arc<BrokerContext>,
    renewals: Arc<Renewals>,
    clients: Arc<GrpcClients>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(RENEW_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = ctx.shutdown.cancelled() => return,
                _ = tick.tick() => renew_due(&ctx, &renewals, &clients).await,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use comet_broker::pop::handle::ReceiptHandle;

    const POPPED_AT: i64 = 1_800_000_000_000;
    const MINUTE_MS: i64 = 60_000;

    /// A handle popped at [`POPPED_AT`] for `invisible_ms`, renewed `renewed` times, received
    /// `held_for_ms` before the handle's pop time.
    fn held(invisible_ms: i64, renewed: usize, held_for_ms: i64) -> Held {
        let handle = ReceiptHandle {
            ck_start_offset: 0,
            pop_time: POPPED_AT,
            invisible_time: invisible_ms,
            revive_qid: 0,
            retry_flag: "0".into(),
            broker_name: "broker-a".into(),
            queue_id: 0,
            queue_offset: Some(0),
        };
        Held {
            topic: "T".into(),
            receipt: GrpcReceipt::new(handle, 0, 0),
            since: POPPED_AT - held_for_ms,
            renewed,
            reconsume_times: 0,
        }
    }

    #[test]
    fn a_handle_is_renewed_only_within_the_last_ten_seconds() {
        let h = held(MINUTE_MS, 0, 0);
        let ends = POPPED_AT + MINUTE_MS;
        assert_eq!(h.step(ends - 10_001, false), Step::Wait);
        assert_eq!(h.step(ends - 10_000, false), Step::Renew(MINUTE_MS));
        assert_eq!(h.step(ends + 5_000, false), Step::Renew(MINUTE_MS));
    }

    #[test]
    fn renewals_grow_from_one_minute_to_an_hour() {
        let now = POPPED_AT + 55_000;
        let minutes: Vec<i64> = (0..8)
            .map(
                |renewed| match held(MINUTE_MS, renewed, 0).step(now, false) {
                    Step::Renew(ms) => ms / MINUTE_MS,
                    other => panic!("renewal {renewed}: {other:?}"),
                },
            )
            .collect();
        assert_eq!(minutes, vec![1, 3, 5, 10, 30, 60, 60, 60]);
    }

    #[test]
    fn after_three_hours_the_message_is_given_back_after_the_retry_delay() {
        let now = POPPED_AT + 55_000;
        let three_hours = as_millis(MAX_RENEW);
        assert!(matches!(
            held(MINUTE_MS, 6, three_hours - 55_001).step(now, false),
            Step::Renew(_)
        ));
        let mut h = held(MINUTE_MS, 6, three_hours - 55_000);
        assert_eq!(h.step(now, false), Step::GiveBack(10_000));
        h.reconsume_times = 2;
        assert_eq!(h.step(now, false), Step::GiveBack(MINUTE_MS));
        h.reconsume_times = 40;
        assert_eq!(h.step(now, false), Step::GiveBack(2 * 60 * MINUTE_MS));
    }

    #[test]
    fn a_gone_clients_message_comes_back_after_a_second_whatever_its_time() {
        let h = held(30 * MINUTE_MS, 2, 0);
        assert_eq!(h.step(POPPED_AT, true), Step::GiveBack(1_000));
        assert_eq!(h.step(POPPED_AT, false), Step::Wait);
    }

    #[test]
    fn retry_delays_follow_the_customized_policy_from_its_third_entry() {
        assert_eq!(retry_delay_ms(-1), 10_000);
        assert_eq!(retry_delay_ms(0), 10_000);
        assert_eq!(retry_delay_ms(1), 30_000);
        assert_eq!(retry_delay_ms(15), 7_200_000);
        assert_eq!(retry_delay_ms(i32::MAX), 7_200_000);
    }
}
