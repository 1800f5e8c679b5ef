//! The tasks that move timer messages on: *enqueue* parks each message of the timer topic in its
//! wheel slot, *dequeue* re-puts the messages of each slot the clock has passed through the
//! broker's write path, and a third writes the checkpoint (see the module docs of [`super`]).

use std::sync::{Arc, Weak};
use std::time::Duration;

use comet_protocol::body::TopicConfig;
use comet_protocol::body::perm::PERM_READ_WRITE;
use comet_protocol::message::MessageExt;
use comet_protocol::message::properties::keys;
use comet_protocol::naming::TIMER_TOPIC;
use comet_protocol::time::now_millis;
use comet_store::consume_queue::CqUnit;
use comet_store::timer::{DueSlot, Enqueued, TimerRecord, TimerStore};
use comet_store::{PutMessageStatus, StoreError};
use tokio::task::JoinHandle;

use super::{
    DEQUEUE_POLL, ENQUEUE_POLL, RETRY_AFTER_FAILURE, TimerMessageService, UNITS_PER_ROUND,
    timer_delivery,
};
use crate::context::BrokerContext;

impl TimerMessageService {
    /// Spawns the enqueue, dequeue and checkpoint tasks; none when timers are off.
    pub fn start(self: &Arc<Self>, ctx: &Arc<BrokerContext>) -> Vec<JoinHandle<()>> {
        if self.store.get().is_none() {
            return Vec::new();
        }
        let mut tasks = Vec::new();
        let shutdown = ctx.shutdown.clone();
        let (service, weak) = (Arc::clone(self), Arc::downgrade(ctx));
        tasks.push(tokio::spawn(async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = service.run_enqueue(weak) => {}
            }
        }));
        let shutdown = ctx.shutdown.clone();
        let (service, weak) = (Arc::clone(self), Arc::downgrade(ctx));
        tasks.push(tokio::spawn(async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = service.run_dequeue(weak) => {}
            }
        }));
        tasks.push(self.spawn_checkpoints(ctx));
        tasks
    }

    /// Opens the wheel of a broker started without it (`timerWheelEnable` turned on while it
    /// runs), creates the timer topic and, on a master, starts the tasks; nothing when it is
    /// open already. Messages sent to the timer topic before are enqueued from where the
    /// wheel's checkpoint left off.
    pub async fn turn_on(self: &Arc<Self>, ctx: &Arc<BrokerContext>) -> Result<(), StoreError> {
        let _one_at_a_time = self.opening.lock().await;
        if self.store.get().is_some() {
            return Ok(());
        }
        let (root, config) = (self.root.clone(), self.timer_config);
        let store =
            tokio::task::spawn_blocking(move || TimerStore::open(&root, config, now_millis()))
                .await
                .map_err(|e| StoreError::Config(format!("opening the timer wheel: {e}")))??;
        let _ = self.store.set(store);
        ctx.topic_config
            .ensure_system_topic(TopicConfig::with_queues(TIMER_TOPIC, 1, 1, PERM_READ_WRITE));
        if !ctx.config.is_slave() {
            let tasks = self.start(ctx);
            self.late_tasks.lock().extend(tasks);
        }
        tracing::info!(root = %self.root.display(), "timerWheelEnable turned on: timer wheel opened");
        Ok(())
    }

    /// Writes the checkpoint every `timerFlushIntervalMs`, read from the configuration in force
    /// each time the task waits: a change wakes it, and the new period counts from the last
    /// checkpoint (one already overdue is written at once).
    fn spawn_checkpoints(self: &Arc<Self>, ctx: &Arc<BrokerContext>) -> JoinHandle<()> {
        let shutdown = ctx.shutdown.clone();
        let runtime = Arc::clone(&ctx.runtime);
        let service = Arc::clone(self);
        tokio::spawn(async move {
            let mut changes = runtime.subscribe();
            let mut last = tokio::time::Instant::now();
            loop {
                let period = Duration::from_millis(runtime.read().timer_flush_interval_ms);
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    changed = changes.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        continue;
                    }
                    _ = tokio::time::sleep_until(last + period) => {}
                }
                let service = Arc::clone(&service);
                match tokio::task::spawn_blocking(move || service.checkpoint()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::error!(error = %e, "timer checkpoint failed"),
                    Err(e) => tracing::error!(error = %e, "timer checkpoint task failed"),
                }
                last = tokio::time::Instant::now();
            }
        })
    }

    async fn run_enqueue(&self, ctx: Weak<BrokerContext>) {
        loop {
            let Some(ctx) = ctx.upgrade() else { return };
            let pause = self.enqueue_available(&ctx).await;
            drop(ctx);
            tokio::time::sleep(pause).await;
        }
    }

    /// Enqueues every message of the timer topic not enqueued yet; returns how long to wait
    /// before looking again.
    pub async fn enqueue_available(&self, ctx: &BrokerContext) -> Duration {
        let Some(store) = self.store.get() else {
            return ENQUEUE_POLL;
        };
        let Some(queue) = ctx.store.consume_queues().find(TIMER_TOPIC, 0) else {
            return ENQUEUE_POLL;
        };
        loop {
            let mut offset = store.enqueue_offset();
            let mut units: Vec<CqUnit> = Vec::with_capacity(UNITS_PER_ROUND);
            {
                let cq = queue.read();
                let min = cq.min_offset();
                if offset < min {
                    tracing::warn!(
                        offset,
                        min,
                        "timer queue offset below its min; skipping removed messages"
                    );
                    offset = min;
                    store.set_enqueue_offset(min);
                }
                cq.read(offset, UNITS_PER_ROUND, &mut units);
            }
            if units.is_empty() {
                return ENQUEUE_POLL;
            }
            for unit in units {
                if let Err(pause) = self.enqueue_one(ctx, store, offset, &unit).await {
                    return pause;
                }
                offset += 1;
            }
        }
    }

    /// Parks (or, when already due, delivers) the message of timer-queue offset `offset`.
    async fn enqueue_one(
        &self,
        ctx: &BrokerContext,
        store: &TimerStore,
        offset: i64,
        unit: &CqUnit,
    ) -> Result<(), Duration> {
        let stored = if unit.is_valid() {
            ctx.store.lookup_message_by_offset(unit.commit_log_offset)
        } else {
            None
        };
        let Some(stored) = stored else {
            tracing::warn!(offset, "timer message no longer in the commit log; skipped");
            store.set_enqueue_offset(offset + 1);
            return Ok(());
        };
        // A record without a readable slot time is delivered now rather than held forever.
        let out_ms = stored
            .properties
            .get(keys::TIMER_OUT_MS)
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(i64::MIN);
        let enqueued = if out_ms == i64::MIN {
            Ok(Enqueued::Due)
        } else {
            store.enqueue(offset, unit.commit_log_offset, unit.size, out_ms)
        };
        match enqueued {
            Ok(Enqueued::Parked { .. }) => Ok(()),
            Ok(Enqueued::Due) => {
                let enqueue_ms = now_millis();
                if !deliver(ctx, stored, false, enqueue_ms).await {
                    return Err(RETRY_AFTER_FAILURE);
                }
                store.set_enqueue_offset(offset + 1);
                Ok(())
            }
            Err(e) => {
                tracing::error!(offset, error = %e, "parking a timer message failed; retrying");
                Err(RETRY_AFTER_FAILURE)
            }
        }
    }

    async fn run_dequeue(&self, ctx: Weak<BrokerContext>) {
        let mut pending: Option<(DueSlot, usize)> = None;
        loop {
            let Some(ctx) = ctx.upgrade() else { return };
            let pause = self.dequeue_due(&ctx, &mut pending).await;
            drop(ctx);
            tokio::time::sleep(pause).await;
        }
    }

    /// Delivers every due slot, continuing `pending` (a slot and how many of its records were
    /// delivered) first; returns how long to wait before looking again.
    async fn dequeue_due(
        &self,
        ctx: &BrokerContext,
        pending: &mut Option<(DueSlot, usize)>,
    ) -> Duration {
        let Some(store) = self.store.get() else {
            return DEQUEUE_POLL;
        };
        loop {
            if pending.is_none() {
                let now = now_millis();
                match store.collect_due(now) {
                    Ok(Some(mut slot)) => {
                        // The chain is newest first: deliver in arrival order.
                        slot.records.reverse();
                        *pending = Some((slot, 0));
                    }
                    Ok(None) => {
                        let next_due = store.collect_ms() + store.config().precision_ms;
                        let wait = u64::try_from(next_due - now).unwrap_or(0).max(1);
                        return Duration::from_millis(wait).min(DEQUEUE_POLL);
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "reading a timer slot failed");
                        return DEQUEUE_POLL;
                    }
                }
            }
            let Some((slot, next)) = pending.as_mut() else {
                continue;
            };
            while let Some(record) = slot.records.get(*next) {
                if !deliver_record(ctx, record).await {
                    return RETRY_AFTER_FAILURE;
                }
                *next += 1;
            }
            store.mark_delivered(slot.slot_ms);
            *pending = None;
        }
    }
}

/// Delivers (or rolls) one fired record; `false` when the re-put failed and must be retried.
async fn deliver_record(ctx: &BrokerContext, record: &TimerRecord) -> bool {
    let Some(stored) = ctx.store.lookup_message_by_offset(record.commit_log_offset) else {
        tracing::warn!(
            commit_log_offset = record.commit_log_offset,
            "timer message no longer in the commit log; skipped"
        );
        return true;
    };
    deliver(ctx, stored, record.is_roll(), now_millis()).await
}

/// Re-puts a timer-topic message: to its real topic, or back into the timer topic when
/// `roll`. `false` when the store refused it for a reason worth a retry.
async fn deliver(ctx: &BrokerContext, stored: MessageExt, roll: bool, enqueue_ms: i64) -> bool {
    if stored.properties.get(keys::TIMER_DEL_UNIQKEY).is_some() && !roll {
        // A delete marker: cancelling other timer messages is not supported, and the marker
        // itself is never delivered.
        return true;
    }
    let Some(msg) = timer_delivery(stored, roll, enqueue_ms, now_millis()) else {
        tracing::error!("timer message without REAL_TOPIC/REAL_QID dropped");
        return true;
    };
    let topic = msg.topic.clone();
    let result = crate::core::put::put_due_message(ctx, msg).await;
    if result.status.is_written() {
        if !roll {
            ctx.traffic.record_timer(&topic, true);
        }
        return true;
    }
    if matches!(
        result.status,
        PutMessageStatus::MessageIllegal
            | PutMessageStatus::PropertiesSizeExceeded
            | PutMessageStatus::WheelTimerMsgIllegal
            | PutMessageStatus::WheelTimerNotEnable
    ) {
        tracing::error!(topic = %topic, status = ?result.status, "timer message refused by the store; dropped");
        return true;
    }
    tracing::error!(topic = %topic, status = ?result.status, "re-putting a timer message failed; retrying");
    false
}
