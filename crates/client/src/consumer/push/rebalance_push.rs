//! The push consumer's part of rebalance (Java `RebalancePushImpl`): what happens when the set
//! of owned queues changes.
//!
//! - A changed set splits the per-topic thresholds (`pull_threshold_for_topic`,
//!   `pull_threshold_size_for_topic`) evenly over the owned queues and sends a heartbeat, so the
//!   brokers learn the new subscription at once.
//! - A queue given up has its offset persisted and forgotten; an orderly consumer in clustering
//!   also unlocks it on the broker, once no batch of it is running.
//! - A new queue starts where [`PushConsumerInner::compute_pull_from_where_inner`] says, and its
//!   [`PullRequest`] goes to the [`PullMessageService`](super::PullMessageService).

use std::collections::HashSet;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::{ConsumeService, ProcessQueue, PushConsumerInner, orderly};
use crate::consumer::pull_request::PullRequest;
use crate::consumer::rebalance::RebalanceDelegate;
use crate::consumer::{ConsumeType, MessageModel, MessageQueue};
use crate::error::ClientError;

impl RebalanceDelegate for PushConsumerInner {
    fn consume_type(&self) -> ConsumeType {
        ConsumeType::ConsumePassively
    }

    fn pull_max_idle(&self) -> std::time::Duration {
        self.config.read().pull_max_idle()
    }

    fn message_queue_changed<'a>(
        &'a self,
        topic: &'a str,
        _mq_all: &'a HashSet<MessageQueue>,
        mq_divided: &'a HashSet<MessageQueue>,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(rt) = self.runtime() else { return };
            // Split the per-topic thresholds over the owned queues.
            let owned = i64::try_from(mq_divided.len()).unwrap_or(i64::MAX);
            if owned > 0 {
                let mut config = self.config.write();
                if config.pull_threshold_for_topic != -1 {
                    let new = (config.pull_threshold_for_topic / owned).max(1);
                    tracing::info!(topic, new, "pullThresholdForQueue adjusted");
                    config.pull_threshold_for_queue = new;
                }
                if config.pull_threshold_size_for_topic != -1 {
                    let new = (config.pull_threshold_size_for_topic / owned).max(1);
                    tracing::info!(topic, new, "pullThresholdSizeForQueue adjusted");
                    config.pull_threshold_size_for_queue = new;
                }
            }
            rt.instance.send_heartbeat_to_all_brokers().await;
        })
    }

    fn remove_unnecessary_message_queue<'a>(
        &'a self,
        mq: &'a MessageQueue,
        pq: &'a Arc<ProcessQueue>,
    ) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let Some(rt) = self.runtime() else {
                return true;
            };
            rt.offset_store.persist(mq).await;
            rt.offset_store.remove_offset(mq);
            if matches!(rt.consume_service, ConsumeService::Orderly(_))
                && self.message_model() == MessageModel::Clustering
            {
                let unlock_delay = self.config.read().unlock_delay();
                return orderly::unlock_when_idle(&rt, mq, pq, unlock_delay).await;
            }
            true
        })
    }

    fn remove_dirty_offset(&self, mq: &MessageQueue) {
        if let Some(rt) = self.runtime() {
            rt.offset_store.remove_offset(mq);
        }
    }

    fn compute_pull_from_where<'a>(
        &'a self,
        mq: &'a MessageQueue,
    ) -> BoxFuture<'a, Result<i64, ClientError>> {
        Box::pin(async move {
            let Some(rt) = self.runtime() else {
                return Err(ClientError::Client("consumer not started".into()));
            };
            self.compute_pull_from_where_inner(&rt, mq).await
        })
    }

    fn dispatch_pull_request(&self, requests: Vec<PullRequest>) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let Some(rt) = self.runtime() else { return };
            for request in requests {
                rt.pull_service
                    .execute_pull_request_immediately(request)
                    .await;
            }
        })
    }
}
