//! The outcome of a push consumer's pull (Java `PullAPIWrapper.processPullResult` and the
//! `PullCallback` of `DefaultMQPushConsumerImpl.pullMessage`): the client-side tag filter and the
//! filter hooks, then what each pull status means for the queue's [`PullRequest`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::hook::FilterMessageContext;
use super::{ConsumeService, PushConsumerConfig, PushConsumerInner, Runtime};
use crate::api::{PullResultExt, PullStatus};
use crate::consumer::pull_request::PullRequest;
use crate::consumer::{MessageQueue, SubscriptionData};

/// Default of [`PushConsumerConfig::offset_illegal_fix_delay`]: after OFFSET_ILLEGAL, how long
/// the dropped queue waits before its offset is fixed and its state removed (the Java client's
/// 10 s).
pub const OFFSET_ILLEGAL_FIX_DELAY: Duration = Duration::from_secs(10);

impl PushConsumerInner {
    /// `PullAPIWrapper.processPullResult`: the client-side tag filter (the broker only compares
    /// tag hash codes, which may collide) and the filter hooks.
    pub(super) fn process_pull_result(
        &self,
        group: &str,
        mq: &MessageQueue,
        result: &mut PullResultExt,
        subscription: &SubscriptionData,
        unit_mode: bool,
    ) {
        if result.pull_status != PullStatus::Found {
            return;
        }
        if !subscription.tags_set.is_empty() && !subscription.class_filter_mode {
            result.msg_found_list.retain(|msg| {
                msg.tags()
                    .is_some_and(|t| subscription.tags_set.iter().any(|s| s == t))
            });
        }
        let hooks = self.filter_hooks.read().clone();
        for hook in hooks {
            let mut ctx = FilterMessageContext {
                consumer_group: group,
                message_queue: mq,
                msg_list: &mut result.msg_found_list,
                unit_mode,
            };
            hook.filter_message(&mut ctx);
        }
    }

    /// What a pull's outcome means (Java's `PullCallback`). FOUND hands the messages to the
    /// consume service and pulls again (after `pull_interval` when set); NO_NEW_MSG and
    /// NO_MATCHED_MSG move the offset on and pull again; OFFSET_ILLEGAL drops the queue and, after
    /// `offset_illegal_fix_delay`, stores and persists the broker's offset and removes the queue,
    /// for a rebalance (asked for at once) to re-create it from there.
    pub(super) async fn on_pull_result(
        &self,
        rt: &Arc<Runtime>,
        config: &PushConsumerConfig,
        mut request: PullRequest,
        _subscription: &SubscriptionData,
        result: PullResultExt,
        begin: Instant,
    ) {
        let mq = request.message_queue.clone();
        let pq = Arc::clone(&request.process_queue);
        match result.pull_status {
            PullStatus::Found => {
                let prev_request_offset = request.next_offset;
                request.next_offset = result.next_begin_offset;
                let pull_rt = u64::try_from(begin.elapsed().as_millis()).unwrap_or(u64::MAX);
                self.stats.inc_pull_rt(&mq.topic, pull_rt);
                let msgs = result.msg_found_list;
                let first_msg_offset = msgs.first().map_or(i64::MAX, |m| m.queue_offset);
                if msgs.is_empty() {
                    rt.pull_service
                        .execute_pull_request_immediately(request)
                        .await;
                } else {
                    self.stats
                        .inc_pull_tps(&mq.topic, u64::try_from(msgs.len()).unwrap_or(u64::MAX));
                    // Concurrent batches carry the messages themselves; only orderly
                    // consumption takes them from the process queue, so only it needs copies.
                    let dispatch = match &rt.consume_service {
                        ConsumeService::Concurrently(_) => pq.track_messages(&msgs),
                        ConsumeService::Orderly(_) => pq.put_message(&msgs),
                    };
                    if let Some(me) = self.arc() {
                        rt.submit_consume_request(&me, msgs, Arc::clone(&pq), mq.clone(), dispatch);
                    }
                    if config.pull_interval > Duration::ZERO {
                        rt.pull_service
                            .execute_pull_request_later(request, config.pull_interval);
                    } else {
                        rt.pull_service
                            .execute_pull_request_immediately(request)
                            .await;
                    }
                }
                if result.next_begin_offset < prev_request_offset
                    || first_msg_offset < prev_request_offset
                {
                    tracing::warn!(
                        next_begin_offset = result.next_begin_offset,
                        first_msg_offset,
                        prev_request_offset,
                        "[BUG] pull message result maybe data wrong"
                    );
                }
            }
            PullStatus::NoNewMsg | PullStatus::NoMatchedMsg => {
                request.next_offset = result.next_begin_offset;
                // correctTagsOffset: nothing cached means everything up to here is consumed.
                if pq.msg_count() == 0 {
                    rt.offset_store
                        .update_offset(&mq, request.next_offset, true);
                }
                rt.pull_service
                    .execute_pull_request_immediately(request)
                    .await;
            }
            PullStatus::OffsetIllegal => {
                tracing::warn!(%mq, next_offset = request.next_offset,
                    next_begin_offset = result.next_begin_offset,
                    min_offset = result.min_offset, max_offset = result.max_offset,
                    "the pull request offset illegal");
                request.next_offset = result.next_begin_offset;
                pq.set_dropped(true);
                let Some(me) = self.arc() else { return };
                let rt2 = Arc::clone(rt);
                rt.pull_service.execute_task_later(
                    async move {
                        rt2.offset_store
                            .update_offset(&request.message_queue, request.next_offset, false);
                        rt2.offset_store.persist(&request.message_queue).await;
                        rt2.rebalance
                            .remove_process_queue(me.as_ref(), &request.message_queue)
                            .await;
                        // Re-create the queue now, from the fixed offset, instead of at the
                        // next periodic rebalance.
                        rt2.instance.rebalance_immediately();
                        tracing::warn!(mq = %request.message_queue, next_offset = request.next_offset,
                            "fix the pull request offset");
                    },
                    config.offset_illegal_fix_delay,
                );
            }
        }
    }
}
