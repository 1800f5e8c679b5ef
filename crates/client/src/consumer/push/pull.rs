//! The pull loop of a push consumer: one turn of a queue's [`PullRequest`] (Java
//! `DefaultMQPushConsumerImpl.pullMessage` and `PullAPIWrapper.pullKernelImpl`).
//!
//! A turn checks, in this order, that the queue was not dropped, that the consumer runs and is not
//! paused, that flow control admits the pull ([`crate::consumer::flow_control`]) and, for orderly
//! consumption, that the queue is locked on the broker; a refused turn puts the request back after
//! the delay its reason calls for. It then finds the subscription, sends PULL_MESSAGE to the
//! broker the previous pull suggested and hands the result to [`super::pull_result`].
//!
//! The pull is a long poll: when the queue has nothing new the broker holds the request for up to
//! [`BROKER_SUSPEND_MAX_TIME`] (15 s) and answers as soon as a message arrives, so an idle
//! consumer costs one request per queue per 15 s while a message is still delivered at once. The
//! request's own timeout, [`CONSUMER_TIMEOUT_WHEN_SUSPEND`] (30 s), must exceed that hold.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use comet_protocol::body::route::MASTER_ID;
use comet_protocol::headers::{PullMessageRequestHeader, pull_sys_flag};

use super::{ConsumeService, ProcessQueue, PushConsumerConfig, PushConsumerInner, Runtime};
use crate::api::PullResultExt;
use crate::consumer::flow_control::{FlowControlLimits, MIB, PULL_TIME_DELAY_WHEN_FLOW_CONTROL};
use crate::consumer::offset_store::ReadOffsetType;
use crate::consumer::pull_request::PullRequest;
use crate::consumer::{
    ConsumeFromWhere, MessageModel, MessageQueue, SubscriptionData, duration_millis,
    is_retry_topic, now_millis,
};
use crate::error::ClientError;
use crate::instance::ServiceState;

/// Delay of a pull after an error (`pullTimeDelayMillsWhenException`; configurable).
pub const PULL_TIME_DELAY_WHEN_EXCEPTION: Duration = Duration::from_millis(3000);
/// Delay of a pull while the consumer is suspended.
pub const PULL_TIME_DELAY_WHEN_SUSPEND: Duration = Duration::from_millis(1000);
/// How long the broker may hold a pull (long polling).
pub const BROKER_SUSPEND_MAX_TIME: Duration = Duration::from_millis(15_000);
/// Timeout of a pull request; must exceed [`BROKER_SUSPEND_MAX_TIME`].
pub const CONSUMER_TIMEOUT_WHEN_SUSPEND: Duration = Duration::from_millis(30_000);
/// Default start of CONSUME_FROM_TIMESTAMP: this long before the consumer starts.
pub const DEFAULT_CONSUME_TIMESTAMP_AGO: Duration = Duration::from_secs(30 * 60);
/// `maxMsgBytes` of a pull (5.x `pullBatchSizeInBytes`).
pub const PULL_BATCH_SIZE_IN_BYTES: i32 = 256 * 1024;

impl PushConsumerInner {
    fn execute_pull_request_later(rt: &Runtime, request: PullRequest, delay: Duration) {
        rt.pull_service.execute_pull_request_later(request, delay);
    }

    /// One turn of a queue's pull loop: the checks of [`Self::admit_pull`], the subscription, the
    /// commit offset piggybacked on the pull, the pull itself and its outcome.
    pub(crate) async fn pull_message(self: Arc<Self>, request: PullRequest) {
        let Some(rt) = self.runtime() else { return };
        let pq = Arc::clone(&request.process_queue);
        if pq.is_dropped() {
            tracing::info!(mq = %request.message_queue, "the pull request is dropped");
            return;
        }
        pq.set_last_pull_timestamp(now_millis());
        let config = self.config.read().clone();
        let Some(request) = self.admit_pull(&rt, &config, request, &pq).await else {
            return;
        };

        let Some(subscription) = rt.rebalance.subscription(&request.message_queue.topic) else {
            tracing::warn!(mq = %request.message_queue, "find the consumer's subscription failed");
            Self::execute_pull_request_later(&rt, request, config.pull_time_delay_when_exception);
            return;
        };

        // Sys flags.
        let mut commit_offset_value = 0;
        let mut commit_offset_enable = false;
        if config.message_model == MessageModel::Clustering {
            match rt
                .offset_store
                .read_offset(&request.message_queue, ReadOffsetType::ReadFromMemory)
                .await
            {
                Ok(Some(offset)) if offset > 0 => {
                    commit_offset_value = offset;
                    commit_offset_enable = true;
                }
                _ => {}
            }
        }
        let class_filter = subscription.class_filter_mode;
        let sub_expression = (config.post_subscription_when_pull && !class_filter)
            .then(|| subscription.sub_string.clone());

        let begin = Instant::now();
        let result = self
            .pull_kernel(
                &rt,
                &config,
                &request,
                &subscription,
                sub_expression,
                commit_offset_enable,
                commit_offset_value,
                class_filter,
            )
            .await;
        match result {
            Ok(result) => {
                self.on_pull_result(&rt, &config, request, &subscription, result, begin)
                    .await
            }
            Err(e) => {
                if self.stop.is_cancelled() {
                    // Shutting down: held pulls fail as the connections close; not worth a warning each.
                    tracing::debug!(mq = %request.message_queue, error = %e,
                        "pull ended by the consumer's shutdown");
                    return;
                }
                if !is_retry_topic(&request.message_queue.topic) {
                    tracing::warn!(mq = %request.message_queue, error = %e,
                        "execute the pull request exception");
                }
                Self::execute_pull_request_later(
                    &rt,
                    request,
                    config.pull_time_delay_when_exception,
                );
            }
        }
    }

    /// Whether the queue may be pulled now: the consumer runs and is not paused, flow control
    /// admits the pull and, for orderly consumption, the queue is locked on the broker. A refused
    /// request is put back after the delay its reason calls for and `None` returned. The first
    /// pull of an orderly queue since it was locked re-reads its start offset from the store,
    /// because the previous owner may have committed more before it let the lock go.
    async fn admit_pull(
        &self,
        rt: &Runtime,
        config: &PushConsumerConfig,
        mut request: PullRequest,
        pq: &ProcessQueue,
    ) -> Option<PullRequest> {
        if *self.state.lock() != ServiceState::Running {
            Self::execute_pull_request_later(rt, request, config.pull_time_delay_when_exception);
            return None;
        }
        if self.pause.load(Ordering::Acquire) {
            tracing::debug!(group = %config.consumer_group, "consumer paused, pull later");
            Self::execute_pull_request_later(rt, request, PULL_TIME_DELAY_WHEN_SUSPEND);
            return None;
        }

        let orderly = matches!(rt.consume_service, ConsumeService::Orderly(_));
        let limits = FlowControlLimits {
            count_for_consumer: None,
            count_for_queue: config.pull_threshold_for_queue,
            size_for_queue: config.pull_threshold_size_for_queue,
            size_unit: MIB,
            // The span only matters to concurrent consumption, whose commits wait for the oldest
            // unfinished message.
            max_span: (!orderly).then_some(config.consume_concurrently_max_span),
        };
        if !self.flow_control.admit(&request.message_queue, &limits, pq) {
            Self::execute_pull_request_later(rt, request, PULL_TIME_DELAY_WHEN_FLOW_CONTROL);
            return None;
        }
        if !orderly {
            return Some(request);
        }

        if !pq.is_locked() {
            tracing::info!(mq = %request.message_queue, "pull message later because not locked in broker");
            Self::execute_pull_request_later(rt, request, config.pull_time_delay_when_exception);
            return None;
        }
        if !request.previously_locked {
            let offset = match self
                .compute_pull_from_where_inner(rt, &request.message_queue)
                .await
            {
                Ok(offset) => offset,
                Err(e) => {
                    tracing::error!(mq = %request.message_queue, error = %e,
                        "failed to compute the pull offset");
                    Self::execute_pull_request_later(
                        rt,
                        request,
                        config.pull_time_delay_when_exception,
                    );
                    return None;
                }
            };
            let broker_busy = offset < request.next_offset;
            tracing::info!(mq = %request.message_queue, new_offset = offset, broker_busy,
                "the first time to pull message, so fix offset from broker");
            request.previously_locked = true;
            request.next_offset = offset;
        }
        Some(request)
    }

    /// `PullAPIWrapper.pullKernelImpl`: finds the broker and sends the pull.
    #[allow(clippy::too_many_arguments)]
    async fn pull_kernel(
        &self,
        rt: &Runtime,
        config: &PushConsumerConfig,
        request: &PullRequest,
        subscription: &SubscriptionData,
        sub_expression: Option<String>,
        commit_offset_enable: bool,
        commit_offset_value: i64,
        class_filter: bool,
    ) -> Result<PullResultExt, ClientError> {
        let mq = &request.message_queue;
        let broker_id = rt
            .pull_from_which_node
            .lock()
            .get(mq)
            .copied()
            .unwrap_or(MASTER_ID);
        let mut found =
            rt.instance
                .find_broker_address_in_subscribe(&mq.broker_name, broker_id, false);
        if found.is_none() {
            rt.instance
                .update_topic_route_info_from_name_server(&mq.topic)
                .await?;
            found = rt
                .instance
                .find_broker_address_in_subscribe(&mq.broker_name, broker_id, false);
        }
        let Some(found) = found else {
            return Err(ClientError::Client(format!(
                "The broker[{}] not exist",
                mq.broker_name
            )));
        };
        let mut sys_flag = pull_sys_flag::build(
            commit_offset_enable,
            true,
            sub_expression.is_some(),
            class_filter,
        );
        if found.slave {
            sys_flag = pull_sys_flag::clear_commit_offset(sys_flag);
        }
        let header = PullMessageRequestHeader {
            consumer_group: config.consumer_group.clone(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            queue_offset: request.next_offset,
            max_msg_nums: config.pull_batch_size,
            sys_flag,
            commit_offset: commit_offset_value,
            suspend_timeout_millis: duration_millis(BROKER_SUSPEND_MAX_TIME),
            subscription: sub_expression,
            sub_version: subscription.sub_version,
            expression_type: Some(subscription.expression_type.clone()),
            max_msg_bytes: Some(PULL_BATCH_SIZE_IN_BYTES),
            ..Default::default()
        };
        let mut result = rt
            .instance
            .api()
            .pull_message(&found.broker_addr, header, CONSUMER_TIMEOUT_WHEN_SUSPEND)
            .await?;
        rt.pull_from_which_node
            .lock()
            .insert(mq.clone(), result.suggest_which_broker_id);
        self.process_pull_result(
            &config.consumer_group,
            mq,
            &mut result,
            subscription,
            config.unit_mode,
        );
        Ok(result)
    }

    /// Where a queue without a usable stored offset starts (Java
    /// `RebalancePushImpl.computePullFromWhere`): the stored offset when there is one; otherwise
    /// per `consume_from_where` — offset 0 for the first offset, the queue's max offset for the
    /// last (0 for the retry topic), and for a timestamp the offset found by searching the queue
    /// for `consume_timestamp`, by default 30 minutes before the consumer started (the max offset
    /// for the retry topic).
    pub(super) async fn compute_pull_from_where_inner(
        &self,
        rt: &Runtime,
        mq: &MessageQueue,
    ) -> Result<i64, ClientError> {
        let (from_where, consume_timestamp) = {
            let config = self.config.read();
            (config.consume_from_where, config.consume_timestamp)
        };
        let last_offset = rt
            .offset_store
            .read_offset(mq, ReadOffsetType::ReadFromStore)
            .await?;
        if let Some(offset) = last_offset
            && offset >= 0
        {
            return Ok(offset);
        }
        let timeout = rt.instance.config().mq_client_api_timeout;
        let addr = || async {
            if rt
                .instance
                .find_broker_address_in_publish(&mq.broker_name)
                .is_none()
            {
                rt.instance
                    .update_topic_route_info_from_name_server(&mq.topic)
                    .await?;
            }
            rt.instance
                .find_broker_address_in_publish(&mq.broker_name)
                .ok_or_else(|| {
                    ClientError::Client(format!("The broker[{}] not exist", mq.broker_name))
                })
        };
        match from_where {
            ConsumeFromWhere::ConsumeFromFirstOffset | ConsumeFromWhere::ConsumeFromMinOffset => {
                Ok(0)
            }
            ConsumeFromWhere::ConsumeFromTimestamp => {
                let addr = addr().await?;
                if is_retry_topic(&mq.topic) {
                    return rt
                        .instance
                        .api()
                        .get_max_offset(&addr, &mq.topic, mq.queue_id, timeout)
                        .await;
                }
                let timestamp = consume_timestamp.unwrap_or_else(|| {
                    self.consumer_start_timestamp - duration_millis(DEFAULT_CONSUME_TIMESTAMP_AGO)
                });
                rt.instance
                    .api()
                    .search_offset(&addr, &mq.topic, mq.queue_id, timestamp, timeout)
                    .await
            }
            ConsumeFromWhere::ConsumeFromLastOffset
            | ConsumeFromWhere::ConsumeFromLastOffsetAndFromMinWhenBootFirst
            | ConsumeFromWhere::ConsumeFromMaxOffset => {
                if is_retry_topic(&mq.topic) {
                    return Ok(0);
                }
                let addr = addr().await?;
                rt.instance
                    .api()
                    .get_max_offset(&addr, &mq.topic, mq.queue_id, timeout)
                    .await
            }
        }
    }
}
