//! One owned queue's pull task: wait while the queue is paused or flow control refuses (the check
//! of [`crate::consumer::flow_control`], without warnings), compute the start position when there
//! is none, long-poll the broker (LITE_PULL_MESSAGE, held up to `broker_suspend_max_time`) and
//! buffer what it returns for `poll`, unless the queue was repositioned meanwhile.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{ConsumeRequest, LiteInner};
use crate::api::PullStatus;
use crate::consumer::flow_control::{
    CachedCounts, FlowControlLimits, PULL_TIME_DELAY_WHEN_FLOW_CONTROL, saturating_i64,
};
use crate::consumer::{MessageQueue, SUB_ALL, SubscriptionData};

/// Pause of a pull task after a failed pull.
const PULL_DELAY_ON_EXCEPTION: Duration = Duration::from_secs(3);
/// Pause of a pull task whose queue is paused (a resume wakes it earlier).
const PULL_DELAY_WHEN_PAUSED: Duration = Duration::from_secs(1);

impl LiteInner {
    fn subscription_for(&self, topic: &str) -> SubscriptionData {
        self.subscriptions
            .read()
            .get(topic)
            .cloned()
            .unwrap_or_else(|| SubscriptionData::from_tag_expression(topic, SUB_ALL, 0))
    }

    /// The buffer bounds as flow-control thresholds (message counts, and bytes compared as bytes).
    fn flow_control_limits(&self) -> FlowControlLimits {
        FlowControlLimits {
            count_for_consumer: Some(saturating_i64(self.config.pull_threshold_for_all)),
            count_for_queue: saturating_i64(self.config.pull_threshold_for_queue),
            size_for_queue: saturating_i64(self.config.pull_threshold_size_for_queue),
            size_unit: 1,
            max_span: None,
        }
    }

    /// Waits `delay`, returning early on a wake-up; `false` when the task must stop.
    async fn pause_task(delay: Duration, wake: &Notify, cancel: &CancellationToken) -> bool {
        tokio::select! {
            () = cancel.cancelled() => false,
            () = wake.notified() => true,
            () = tokio::time::sleep(delay) => true,
        }
    }

    /// One queue's pull loop: flow control, position, long-polling pull, buffering.
    pub(super) async fn pull_loop(
        self: Arc<Self>,
        mq: MessageQueue,
        wake: Arc<Notify>,
        cancel: CancellationToken,
    ) {
        let Some(rt) = self.runtime.read().clone() else {
            return;
        };
        let batch = self.config.pull_batch_size;
        while !cancel.is_cancelled() {
            if self.paused.lock().contains(&mq) {
                if !Self::pause_task(PULL_DELAY_WHEN_PAUSED, &wake, &cancel).await {
                    break;
                }
                continue;
            }
            let buffered = *self.buffered_msgs.lock();
            let snapshot = {
                let queues = self.queues.lock();
                queues
                    .get(&mq)
                    .map(|q| (q.epoch, q.pull_offset, q.cached_msgs, q.cached_bytes))
            };
            let Some((epoch, pull_offset, cached_msgs, cached_bytes)) = snapshot else {
                break;
            };
            let cached = CachedCounts::of(buffered, cached_msgs, cached_bytes);
            if !self
                .flow_control
                .admit(&mq, &self.flow_control_limits(), &cached)
            {
                if !Self::pause_task(PULL_TIME_DELAY_WHEN_FLOW_CONTROL, &wake, &cancel).await {
                    break;
                }
                continue;
            }
            let offset = match pull_offset {
                Some(o) => o,
                None => match self.compute_start_offset(&rt, &mq).await {
                    Ok(o) => {
                        let mut queues = self.queues.lock();
                        match queues.get_mut(&mq) {
                            Some(q) if q.epoch == epoch && q.pull_offset.is_none() => {
                                q.pull_offset = Some(o);
                                if q.consume_offset < 0 {
                                    q.consume_offset = o;
                                }
                            }
                            _ => {}
                        }
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(%mq, error = %e, "lite pull: cannot compute the start offset");
                        if !Self::pause_task(PULL_DELAY_ON_EXCEPTION, &wake, &cancel).await {
                            break;
                        }
                        continue;
                    }
                },
            };
            let subscription = self.subscription_for(&mq.topic);
            let pulled = tokio::select! {
                () = cancel.cancelled() => break,
                () = wake.notified() => continue,
                r = rt.access.pull(
                    &mq,
                    &subscription,
                    offset,
                    batch,
                    true,
                    self.config.broker_suspend_max_time,
                    self.config.consumer_timeout_when_suspend,
                    true,
                ) => r,
            };
            match pulled {
                Ok(result) => self.accept_pull(&mq, epoch, result),
                Err(e) => {
                    tracing::warn!(%mq, offset, error = %e, "lite pull failed");
                    if !Self::pause_task(PULL_DELAY_ON_EXCEPTION, &wake, &cancel).await {
                        break;
                    }
                }
            }
        }
    }

    /// Buffers a pull's messages and advances the pull offset, unless the queue moved on.
    fn accept_pull(
        &self,
        mq: &MessageQueue,
        epoch: u64,
        result: crate::consumer::pull::PullResult,
    ) {
        let mut queues = self.queues.lock();
        let Some(q) = queues.get_mut(mq) else { return };
        if q.epoch != epoch {
            return;
        }
        if result.pull_status == PullStatus::OffsetIllegal {
            tracing::warn!(%mq, next = result.next_begin_offset, "lite pull: offset illegal, moving on");
        }
        q.pull_offset = Some(result.next_begin_offset);
        if result.pull_status == PullStatus::Found && !result.msg_found_list.is_empty() {
            let n = result.msg_found_list.len();
            let bytes: usize = result.msg_found_list.iter().map(|m| m.body.len()).sum();
            q.cached_msgs += n;
            q.cached_bytes += bytes;
            let request = ConsumeRequest {
                mq: mq.clone(),
                epoch,
                msgs: result.msg_found_list,
                bytes,
            };
            drop(queues);
            self.buffer.lock().push_back(request);
            *self.buffered_msgs.lock() += n;
            self.buffer_ready.notify_one();
        }
    }
}
