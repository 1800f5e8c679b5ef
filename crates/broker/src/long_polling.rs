//! Long polling: pulls that found nothing wait on the broker until a message arrives.
//!
//! A consumer pulls continuously. Answering "nothing new" at once would make an idle consumer spin
//! (or sleep and add latency), so a pull that finds its queue drained (PULL_NOT_FOUND), carries the
//! SUSPEND bit and is on its first attempt is *held*: no response is written, and the request waits
//! here under the key (topic, queue id) for up to `suspendTimeoutMillis` (15–20 s from clients;
//! `shortPollingTimeMills` when `longPollingEnable` is off).
//!
//! A held pull is answered by re-running it against the store with suspension disallowed — it
//! then returns the new messages, or PULL_NOT_FOUND once more — and writing the response with the
//! original opaque on the original channel. Three things trigger that:
//!
//! 1. **Arrival.** The store's dispatch thread reports every message that became consumable
//!    ([`NotifyMessageArrivingListener`]); held pulls of that queue whose offset is now below the
//!    queue's max and whose TAG filter matches the message are re-run immediately, on the tokio
//!    runtime (the dispatch thread only moves them out of the table).
//! 2. **Timer.** Every 5 s (long polling) or `shortPollingTimeMills` (short polling) every held
//!    pull is checked against the queue's current max offset, and pulls past their hold time are
//!    answered from the store.
//! 3. **Shutdown.** [`PullRequestHoldService::answer_all_now`] answers everything once.
//!
//! The table is bounded per queue and in total; a pull that does not fit is answered at once with
//! PULL_NOT_FOUND, which costs the client one round trip instead of costing the broker memory.
//! Held pulls of a closed connection are dropped ([`PullRequestHoldService::drop_channel`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use comet_protocol::RemotingCommand;
use comet_remoting::{CancellationToken, Channel};
use comet_store::{MessageArrival, MessageArrivingListener};
use futures::FutureExt;
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::filter::TagFilter;

/// Re-check period of held pulls with long polling on (RocketMQ: 5 s).
pub const LONG_POLLING_CHECK_INTERVAL: Duration = Duration::from_secs(5);
/// Most pulls held for one (topic, queue id). Past it a pull is answered PULL_NOT_FOUND at once.
pub const MAX_HELD_PULLS_PER_QUEUE: usize = 1024;
/// Most pulls held in total.
pub const MAX_HELD_PULLS_TOTAL: usize = 65_536;
/// Longest hold accepted from a client; a larger `suspendTimeoutMillis` is clamped to it so a
/// request cannot pin a table slot for hours.
pub const MAX_SUSPEND_TIMEOUT: Duration = Duration::from_secs(300);

/// A pull waiting for messages.
#[derive(Debug)]
pub struct HeldPull {
    /// The original request (its opaque addresses the eventual response).
    pub request: RemotingCommand,
    pub channel: Channel,
    /// Queue offset the pull reads from.
    pub pull_from_offset: i64,
    /// The subscription's TAG filter, to skip wake-ups for messages the pull would not return.
    pub filter: TagFilter,
    pub suspended_at: Instant,
    pub hold_time: Duration,
}

impl HeldPull {
    fn is_expired(&self, now: Instant) -> bool {
        now >= self.suspended_at + self.hold_time
    }
}

type QueueTable = HashMap<String, HashMap<i32, Vec<HeldPull>>>;

/// Runs a held pull again, now without suspension, and gives the response to write; `None`
/// when there is none to write (the broker is gone). The pull processor implements it; the hold
/// service only decides when.
pub trait HeldPullAnswerer: Send + Sync + std::fmt::Debug {
    /// The queue's next offset to be written, as dispatched so far; `None` when the broker is
    /// gone.
    fn max_offset(&self, topic: &str, queue_id: i32) -> Option<i64>;

    fn respond(
        &self,
        channel: &Channel,
        request: &RemotingCommand,
        suspended_at: Instant,
    ) -> Option<RemotingCommand>;
}

/// Holds pulls until messages arrive or their hold time passes (RocketMQ `PullRequestHoldService`).
#[derive(Debug)]
pub struct PullRequestHoldService {
    /// `longPollingEnable` and `shortPollingTimeMills`: change while the broker runs.
    long_polling_enable: AtomicBool,
    short_polling_millis: AtomicU64,
    table: Mutex<QueueTable>,
    held: AtomicUsize,
    answerer: OnceLock<Arc<dyn HeldPullAnswerer>>,
    runtime: OnceLock<tokio::runtime::Handle>,
    woken: AtomicU64,
    started: AtomicBool,
}

impl PullRequestHoldService {
    pub fn new(long_polling_enable: bool, short_polling_millis: u64) -> Self {
        Self {
            long_polling_enable: AtomicBool::new(long_polling_enable),
            short_polling_millis: AtomicU64::new(short_polling_millis),
            table: Mutex::new(HashMap::new()),
            held: AtomicUsize::new(0),
            answerer: OnceLock::new(),
            runtime: OnceLock::new(),
            woken: AtomicU64::new(0),
            started: AtomicBool::new(false),
        }
    }

    pub fn long_polling_enable(&self) -> bool {
        self.long_polling_enable.load(Ordering::Relaxed)
    }

    /// Changes the polling mode: pulls held from now on (and the re-check period) follow it.
    pub fn set_polling(&self, long_polling_enable: bool, short_polling_millis: u64) {
        self.short_polling_millis
            .store(short_polling_millis, Ordering::Relaxed);
        self.long_polling_enable
            .store(long_polling_enable, Ordering::Relaxed);
    }

    fn short_polling_millis(&self) -> u64 {
        self.short_polling_millis.load(Ordering::Relaxed)
    }

    /// How long a pull asking for `suspend_timeout_millis` is held.
    pub fn hold_time(&self, suspend_timeout_millis: i64) -> Duration {
        if self.long_polling_enable() {
            Duration::from_millis(u64::try_from(suspend_timeout_millis).unwrap_or(0))
                .min(MAX_SUSPEND_TIMEOUT)
        } else {
            Duration::from_millis(self.short_polling_millis())
        }
    }

    /// The re-check period.
    pub fn check_interval(&self) -> Duration {
        if self.long_polling_enable() {
            LONG_POLLING_CHECK_INTERVAL
        } else {
            Duration::from_millis(self.short_polling_millis().max(1))
        }
    }

    /// Pulls currently held.
    pub fn held_count(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Held pulls answered so far (by arrival, timer or shutdown).
    pub fn answered_count(&self) -> u64 {
        self.woken.load(Ordering::Relaxed)
    }

    /// Binds the service to the answerer of its held pulls and spawns the re-check task on the
    /// current runtime. The task ends when `shutdown` fires or the service is dropped.
    pub fn start(
        self: &Arc<Self>,
        answerer: Arc<dyn HeldPullAnswerer>,
        shutdown: CancellationToken,
    ) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::error!("PullRequestHoldService::start called outside a tokio runtime");
            return;
        };
        if self.started.swap(true, Ordering::AcqRel) {
            tracing::warn!("PullRequestHoldService started twice; ignoring");
            return;
        }
        let _ = self.answerer.set(answerer);
        let _ = self.runtime.set(runtime.clone());
        let service = Arc::downgrade(self);
        let interval = self.check_interval();
        runtime.spawn(async move {
            let mut ticker = tokio::time::interval_at(Instant::now() + interval, interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = ticker.tick() => {}
                }
                let Some(service) = service.upgrade() else {
                    break;
                };
                service.check_held_pulls();
            }
        });
    }

    /// Binds the service to `answerer` and the current runtime if [`start`](Self::start) has
    /// not: a held pull must always be answerable, even before (or without) the timer task.
    pub fn bind(&self, answerer: impl FnOnce() -> Arc<dyn HeldPullAnswerer>) {
        if self.answerer.get().is_none() {
            let _ = self.answerer.set(answerer());
        }
        if self.runtime.get().is_none()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            let _ = self.runtime.set(handle);
        }
    }

    fn answerer(&self) -> Option<Arc<dyn HeldPullAnswerer>> {
        self.answerer.get().cloned()
    }

    /// Holds `pull` under (topic, queue id). Gives it back when a bound is reached; the caller
    /// then answers it at once.
    pub fn hold(&self, topic: &str, queue_id: i32, pull: HeldPull) -> Result<(), Box<HeldPull>> {
        let mut table = self.table.lock();
        if self.held.load(Ordering::Acquire) >= MAX_HELD_PULLS_TOTAL {
            return Err(Box::new(pull));
        }
        let queues = match table.get_mut(topic) {
            Some(q) => q,
            None => table.entry(topic.to_owned()).or_default(),
        };
        let list = queues.entry(queue_id).or_default();
        if list.len() >= MAX_HELD_PULLS_PER_QUEUE {
            return Err(Box::new(pull));
        }
        list.push(pull);
        self.held.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// A message became consumable in (topic, queue id): the queue's max offset is now
    /// `max_offset`, and the message's tags code is `tags_code` (`None`: unknown, match all).
    /// Matching held pulls, and expired ones, are re-run on the runtime.
    pub fn notify_message_arriving(
        &self,
        topic: &str,
        queue_id: i32,
        max_offset: i64,
        tags_code: Option<i64>,
    ) {
        if self.held.load(Ordering::Acquire) == 0 {
            return;
        }
        let now = Instant::now();
        let answerer = self.answerer();
        let woken = {
            let mut table = self.table.lock();
            let Some(queues) = table.get_mut(topic) else {
                return;
            };
            let Some(list) = queues.get_mut(&queue_id) else {
                return;
            };
            let original = list.len();
            let mut newest = max_offset;
            let mut woken = Vec::new();
            let mut kept = Vec::with_capacity(original);
            for pull in list.drain(..) {
                if !pull.channel.is_active() {
                    continue;
                }
                if newest <= pull.pull_from_offset
                    && let Some(max) = answerer
                        .as_ref()
                        .and_then(|a| a.max_offset(topic, queue_id))
                {
                    newest = newest.max(max);
                }
                let arrived = newest > pull.pull_from_offset && pull.filter.matches(tags_code);
                if arrived || pull.is_expired(now) {
                    woken.push(pull);
                } else {
                    kept.push(pull);
                }
            }
            // Everything not kept leaves the table: woken, or dropped for a closed channel.
            self.release(original - kept.len());
            *list = kept;
            if list.is_empty() {
                queues.remove(&queue_id);
                if queues.is_empty() {
                    table.remove(topic);
                }
            }
            woken
        };
        for pull in woken {
            self.answer(pull);
        }
    }

    fn release(&self, n: usize) {
        if n > 0 {
            self.held.fetch_sub(n, Ordering::AcqRel);
        }
    }

    /// Re-checks every held pull against its queue's current max offset (the timer path).
    pub fn check_held_pulls(&self) {
        let Some(answerer) = self.answerer() else {
            return;
        };
        let keys: Vec<(String, i32)> = {
            let table = self.table.lock();
            table
                .iter()
                .flat_map(|(topic, queues)| queues.keys().map(move |q| (topic.clone(), *q)))
                .collect()
        };
        for (topic, queue_id) in keys {
            let Some(max) = answerer.max_offset(&topic, queue_id) else {
                return;
            };
            self.notify_message_arriving(&topic, queue_id, max, None);
        }
    }

    /// Answers every held pull once from the store (shutdown). The responses are computed and
    /// queued on their connections before this returns, so that a server shutting down right
    /// after still flushes them; only a response whose connection's write queue is full is left
    /// to a background task.
    pub fn answer_all_now(&self) {
        let all: Vec<HeldPull> = {
            let mut table = self.table.lock();
            let drained = std::mem::take(&mut *table);
            drained
                .into_values()
                .flat_map(HashMap::into_values)
                .flatten()
                .collect()
        };
        self.release(all.len());
        for pull in all {
            self.answer_inline(pull);
        }
    }

    /// Re-runs a held pull on the calling thread and queues the response without waiting; falls
    /// back to a task when the write queue has no room (or there is no runtime here).
    fn answer_inline(&self, pull: HeldPull) {
        if tokio::runtime::Handle::try_current().is_err() {
            self.answer(pull);
            return;
        }
        self.woken.fetch_add(1, Ordering::Relaxed);
        let Some(answerer) = self.answerer() else {
            return;
        };
        let HeldPull {
            request,
            channel,
            suspended_at,
            ..
        } = pull;
        let Some(response) = answerer.respond(&channel, &request, suspended_at) else {
            return;
        };
        match channel.send_response(response.clone()).now_or_never() {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                tracing::debug!(peer = %channel.remote_addr(), error = %e, "held pull response not delivered");
            }
            None => {
                if let Some(runtime) = self.runtime.get() {
                    runtime.spawn(async move {
                        if let Err(e) = channel.send_response(response).await {
                            tracing::debug!(peer = %channel.remote_addr(), error = %e,
                                "held pull response not delivered");
                        }
                    });
                }
            }
        }
    }

    /// Drops the held pulls of a closed connection.
    pub fn drop_channel(&self, channel: &Channel) -> usize {
        let mut table = self.table.lock();
        let mut dropped = 0;
        table.retain(|_, queues| {
            queues.retain(|_, list| {
                let before = list.len();
                list.retain(|p| p.channel != *channel);
                dropped += before - list.len();
                !list.is_empty()
            });
            !queues.is_empty()
        });
        drop(table);
        self.release(dropped);
        dropped
    }

    /// Re-runs a held pull (suspension disallowed) and writes its response.
    fn answer(&self, pull: HeldPull) {
        self.woken.fetch_add(1, Ordering::Relaxed);
        let Some(answerer) = self.answerer() else {
            return;
        };
        let Some(runtime) = self.runtime.get() else {
            return;
        };
        runtime.spawn(async move {
            let HeldPull {
                request,
                channel,
                suspended_at,
                ..
            } = pull;
            let Some(response) = answerer.respond(&channel, &request, suspended_at) else {
                return;
            };
            if let Err(e) = channel.send_response(response).await {
                tracing::debug!(peer = %channel.remote_addr(), error = %e, "held pull response not delivered");
            }
        });
    }
}

/// The store's arriving listener: forwards each dispatched message to the hold service.
#[derive(Debug)]
pub struct NotifyMessageArrivingListener {
    service: Arc<PullRequestHoldService>,
    pop: Arc<crate::pop::PopService>,
}

impl NotifyMessageArrivingListener {
    /// Forwards arrivals to the pull hold service and wakes held pops.
    pub fn new(service: Arc<PullRequestHoldService>, pop: Arc<crate::pop::PopService>) -> Self {
        Self { service, pop }
    }
}

impl MessageArrivingListener for NotifyMessageArrivingListener {
    fn arriving(&self, arrival: &MessageArrival<'_>) {
        self.pop.notify_arrival(arrival.topic);
        // With short polling RocketMQ does not wake on arrival: the 1 s timer answers.
        if self.service.long_polling_enable() {
            self.service.notify_message_arriving(
                arrival.topic,
                arrival.queue_id,
                arrival.max_offset,
                Some(arrival.tags_code),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::housekeeping::test_channels;
    use comet_protocol::body::SubscriptionData;
    use comet_protocol::message::tags_hash;

    fn held(channel: &Channel, offset: i64, expr: &str, hold_time: Duration) -> HeldPull {
        HeldPull {
            request: RemotingCommand::request(11),
            channel: channel.clone(),
            pull_from_offset: offset,
            filter: TagFilter::new(&SubscriptionData::from_tag_expression("T", expr, 1)),
            suspended_at: Instant::now(),
            hold_time,
        }
    }

    const LONG: Duration = Duration::from_secs(30);

    #[tokio::test]
    async fn arrival_wakes_only_matching_pulls_behind_the_new_max() {
        let (_guard, chans) = test_channels(1).await;
        let service = PullRequestHoldService::new(true, 1000);
        assert!(
            service
                .hold("T", 0, held(&chans[0], 5, "TagA", LONG))
                .is_ok()
        );
        assert!(
            service
                .hold("T", 0, held(&chans[0], 5, "TagB", LONG))
                .is_ok()
        );
        assert!(service.hold("T", 0, held(&chans[0], 9, "*", LONG)).is_ok());
        assert!(service.hold("T", 1, held(&chans[0], 5, "*", LONG)).is_ok());
        assert_eq!(service.held_count(), 4);

        // Offset 5 arrives with TagA: only the TagA pull at 5 is behind the new max and matches.
        service.notify_message_arriving("T", 0, 6, Some(tags_hash("TagA")));
        assert_eq!(service.held_count(), 3);
        assert_eq!(service.answered_count(), 1);
        // Unknown tags (the timer path) wake everything behind the max.
        service.notify_message_arriving("T", 0, 6, None);
        assert_eq!(service.held_count(), 2);
        // Other topics and queues are untouched.
        service.notify_message_arriving("U", 0, 100, None);
        assert_eq!(service.held_count(), 2);
    }

    #[tokio::test]
    async fn expired_pulls_are_answered_and_closed_channels_dropped() {
        let (_guard, chans) = test_channels(2).await;
        let service = PullRequestHoldService::new(true, 1000);
        assert!(
            service
                .hold("T", 0, held(&chans[0], 5, "*", Duration::ZERO))
                .is_ok()
        );
        assert!(service.hold("T", 0, held(&chans[1], 5, "*", LONG)).is_ok());
        // Nothing new, but the first pull's hold time is over.
        service.notify_message_arriving("T", 0, 5, None);
        assert_eq!(service.held_count(), 1);
        assert_eq!(service.drop_channel(&chans[1]), 1);
        assert_eq!(service.held_count(), 0);
        assert_eq!(service.drop_channel(&chans[1]), 0);
    }

    #[tokio::test]
    async fn the_table_is_bounded_per_queue() {
        let (_guard, chans) = test_channels(1).await;
        let service = PullRequestHoldService::new(true, 1000);
        for _ in 0..MAX_HELD_PULLS_PER_QUEUE {
            assert!(service.hold("T", 0, held(&chans[0], 0, "*", LONG)).is_ok());
        }
        assert!(service.hold("T", 0, held(&chans[0], 0, "*", LONG)).is_err());
        assert!(service.hold("T", 1, held(&chans[0], 0, "*", LONG)).is_ok());
        assert_eq!(service.held_count(), MAX_HELD_PULLS_PER_QUEUE + 1);
        service.answer_all_now();
        assert_eq!(service.held_count(), 0);
    }

    #[test]
    fn hold_time_follows_the_polling_mode() {
        let long = PullRequestHoldService::new(true, 1000);
        assert_eq!(long.hold_time(15_000), Duration::from_secs(15));
        assert_eq!(long.hold_time(-5), Duration::ZERO);
        assert_eq!(long.hold_time(i64::MAX), MAX_SUSPEND_TIMEOUT);
        assert_eq!(long.check_interval(), LONG_POLLING_CHECK_INTERVAL);
        let short = PullRequestHoldService::new(false, 700);
        assert_eq!(short.hold_time(15_000), Duration::from_millis(700));
        assert_eq!(short.check_interval(), Duration::from_millis(700));
    }
}
