//! Auto-renewal: a push consumer receives with `auto_renew`, and the broker keeps its messages
//! invisible while the client works on them, as Apache's proxy does.
//!
//! The broker holds the newest receipt handle of each such message, by client id, group and
//! message id. Every [`RENEW_PERIOD`] it renews the handles whose invisible time ends within
//! [`RENEW_AHEAD`], by `defaultInvisibleTimeMills` from then (a ChangeInvisibleDuration of its
//! own). Once the client's Telemetry stream is gone it makes the message visible again after
//! [`GONE_INVISIBLE`] and forgets the handle. It also forgets it, so that the message comes back
//! when its invisible time ends, after [`MAX_RENEW`] or when a renewal fails.
//! An ack, change or dead-letter forward of the message by the client acts on the held handle
//! (the client's own may be outdated) and ends the renewal. Renewals and those three take turns,
//! so none acts on a handle the other has just replaced.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use comet_protocol::time::now_millis;
use parking_lot::Mutex;
use tokio::task::JoinHandle;

use super::ack::change;
use super::clients::GrpcClients;
use super::consumer::GrpcReceipt;
use crate::context::BrokerContext;

/// How often the due handles are renewed.
pub const RENEW_PERIOD: Duration = Duration::from_secs(1);
/// How long before its invisible time ends a handle is renewed.
pub const RENEW_AHEAD: Duration = Duration::from_secs(10);
/// The invisible time left to a message whose client has gone away.
pub const GONE_INVISIBLE: Duration = Duration::from_secs(1);
/// How long a message is renewed at most, counted from its receipt.
pub const MAX_RENEW: Duration = Duration::from_secs(3 * 60 * 60);

/// Client id, group, message id.
type Key = (String, String, String);

#[derive(Debug, Clone)]
struct Held {
    topic: String,
    receipt: GrpcReceipt,
    since: i64,
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
    /// from `topic`.
    pub fn hold(
        &self,
        client_id: &str,
        group: &str,
        topic: &str,
        message_id: &str,
        receipt: GrpcReceipt,
    ) {
        self.held.lock().insert(
            key(client_id, group, message_id),
            Held {
                topic: topic.to_owned(),
                receipt,
                since: now_millis(),
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

    /// The handles to act on at `now`: those ending within [`RENEW_AHEAD`], and those of clients
    /// that are `gone`.
    fn due(&self, now: i64, gone: impl Fn(&str) -> bool) -> Vec<(Key, Held)> {
        let ahead = as_millis(RENEW_AHEAD);
        self.held
            .lock()
            .iter()
            .filter(|((client_id, _, _), h)| {
                let until = h
                    .receipt
                    .handle
                    .pop_time
                    .saturating_add(h.receipt.handle.invisible_time);
                until.saturating_sub(now) <= ahead || gone(client_id)
            })
            .map(|(k, h)| (k.clone(), h.clone()))
            .collect()
    }
}

/// Renews every due handle once (see the module docs).
pub async fn renew_due(ctx: &BrokerContext, renewals: &Renewals, clients: &GrpcClients) {
    let now = now_millis();
    let invisible = i64::try_from(ctx.config.default_invisible_time_mills).unwrap_or(i64::MAX);
    let gone = |client_id: &str| clients.attached(client_id).is_none();
    for (key, held) in renewals.due(now, gone) {
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
        if now.saturating_sub(held.since) > as_millis(MAX_RENEW) {
            renewals.held.lock().remove(&key);
            continue;
        }
        if gone(client_id) {
            renewals.held.lock().remove(&key);
            let _ = change(
                ctx,
                group,
                &held.topic,
                &held.receipt,
                as_millis(GONE_INVISIBLE),
            )
            .await;
            continue;
        }
        match change(ctx, group, &held.topic, &held.receipt, invisible).await {
            Ok(renewed) => {
                if let Some(h) = renewals.held.lock().get_mut(&key) {
                    h.receipt = renewed;
                }
            }
            Err(status) => {
                tracing::warn!(
                    client_id,
                    group,
                    message_id,
                    code = status.code,
                    reason = %status.message,
                    "renewing a receipt handle failed; the message comes back when it ends"
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
