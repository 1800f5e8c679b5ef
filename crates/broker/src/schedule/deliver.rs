//! The delivery tasks of the delay levels: one per level, re-putting each due message of its
//! `SCHEDULE_TOPIC_XXXX` queue to its real topic through the broker's write path (see the
//! module docs of [`super`]).

use std::sync::{Arc, Weak};
use std::time::Duration;

use comet_protocol::naming::SCHEDULE_TOPIC;
use comet_protocol::time::now_millis;
use comet_store::consume_queue::CqUnit;
use tokio::task::JoinHandle;

use super::{
    FIRST_DELAY, POLL_INTERVAL, RETRY_AFTER_FAILURE, ScheduleMessageService, UNITS_PER_ROUND,
    restore_real_topic,
};
use crate::context::BrokerContext;

impl ScheduleMessageService {
    /// Spawns one delivery task per level. They stop when the context is dropped or its
    /// shutdown token is cancelled.
    pub fn start(self: &Arc<Self>, ctx: &Arc<BrokerContext>) -> Vec<JoinHandle<()>> {
        (1..=self.max_delay_level())
            .map(|level| {
                let service = Arc::clone(self);
                let weak = Arc::downgrade(ctx);
                let shutdown = ctx.shutdown.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = shutdown.cancelled() => {}
                        _ = service.run_level(level, weak) => {}
                    }
                })
            })
            .collect()
    }

    async fn run_level(&self, level: i32, ctx: Weak<BrokerContext>) {
        tokio::time::sleep(FIRST_DELAY).await;
        loop {
            let Some(ctx) = ctx.upgrade() else {
                return;
            };
            let pause = self.deliver_due(level, &ctx).await;
            drop(ctx);
            tokio::time::sleep(pause).await;
        }
    }

    /// Delivers every due message at the head of `level`'s queue; returns how long to wait
    /// before the next check.
    pub async fn deliver_due(&self, level: i32, ctx: &BrokerContext) -> Duration {
        let queue_id = level - 1;
        let Some(queue) = ctx.store.consume_queues().find(SCHEDULE_TOPIC, queue_id) else {
            return POLL_INTERVAL;
        };
        let delay = self.delay_millis(level).unwrap_or(0);
        let mut offset = self.offset(level);
        loop {
            let mut units: Vec<CqUnit> = Vec::with_capacity(UNITS_PER_ROUND);
            {
                let cq = queue.read();
                let min = cq.min_offset();
                if offset < min {
                    tracing::warn!(
                        level,
                        offset,
                        min,
                        "delay queue offset below its min; skipping removed messages"
                    );
                    offset = min;
                    self.offsets.set(level, offset);
                }
                cq.read(offset, UNITS_PER_ROUND, &mut units);
            }
            if units.is_empty() {
                return POLL_INTERVAL;
            }
            for unit in units {
                let now = now_millis();
                // A delivery time further away than the level's delay comes from a clock jump
                // or a changed level table: deliver now rather than hold the queue.
                let deliver_at = if unit.tags_code > now.saturating_add(delay) {
                    now
                } else {
                    unit.tags_code
                };
                if deliver_at > now {
                    let wait = u64::try_from(deliver_at - now).unwrap_or(0);
                    return Duration::from_millis(wait).min(POLL_INTERVAL);
                }
                if unit.is_valid() {
                    match ctx.store.lookup_message_by_offset(unit.commit_log_offset) {
                        Some(stored) => {
                            let Some(msg) = restore_real_topic(stored) else {
                                tracing::error!(
                                    level,
                                    offset,
                                    "delayed message without REAL_TOPIC/REAL_QID dropped"
                                );
                                offset += 1;
                                self.offsets.set(level, offset);
                                continue;
                            };
                            let topic = msg.topic.clone();
                            let result = crate::core::put::put_due_message(ctx, msg).await;
                            if !result.status.is_written() {
                                tracing::error!(level, offset, topic = %topic, status = ?result.status,
                                    "re-putting a delayed message failed; retrying");
                                return RETRY_AFTER_FAILURE;
                            }
                        }
                        None => {
                            tracing::warn!(
                                level,
                                offset,
                                commit_log_offset = unit.commit_log_offset,
                                "delayed message no longer in the commit log; skipped"
                            );
                        }
                    }
                }
                offset += 1;
                self.offsets.set(level, offset);
            }
        }
    }
}
