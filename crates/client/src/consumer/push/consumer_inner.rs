//! What the client instance asks of a push consumer ([`MQConsumerInner`]): the group's data for
//! the heartbeat, the periodic rebalance and offset persistence, new subscribe sets from route
//! refreshes, and the broker's requests — running info (GET_CONSUMER_RUNNING_INFO), direct
//! consumption (CONSUME_MESSAGE_DIRECTLY), consume offsets (GET_CONSUMER_STATUS_FROM_CLIENT) and
//! offset resets (RESET_CONSUMER_CLIENT_OFFSET).

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use comet_protocol::body::{ConsumeMessageDirectlyResult, ConsumerRunningInfo};
use futures::future::BoxFuture;

use super::{ConsumeService, PushConsumerInner, Runtime};
use crate::consumer::{
    ConsumeFromWhere, ConsumeType, MessageExt, MessageModel, MessageQueue, SubscriptionData,
};
use crate::instance::{MQConsumerInner, ServiceState};

impl PushConsumerInner {
    /// Runs one rebalance of this consumer now.
    pub(super) async fn rebalance(&self) {
        let Some(rt) = self.runtime() else { return };
        let is_order = matches!(rt.consume_service, ConsumeService::Orderly(_));
        rt.rebalance.do_rebalance(self, is_order).await;
    }

    /// See [`super::DefaultMQPushConsumer::reset_offset_by_timestamp`].
    pub(super) async fn reset_offset_by_timestamp(
        &self,
        timestamp_ms: i64,
    ) -> Result<(), crate::error::ClientError> {
        let Some(rt) = self.runtime() else {
            return Err(crate::error::ClientError::NotStartable {
                service: "PushConsumer",
                state: self.state.lock().to_string(),
            });
        };
        let timeout = rt.instance.config().mq_client_api_timeout;
        for sub in rt.rebalance.subscriptions() {
            let Some(mqs) = rt.rebalance.topic_subscribe_info(&sub.topic) else {
                continue;
            };
            let mut offsets = HashMap::with_capacity(mqs.len());
            for mq in mqs {
                let addr = rt
                    .instance
                    .find_broker_address_in_publish(&mq.broker_name)
                    .ok_or_else(|| {
                        crate::error::ClientError::Client(format!(
                            "The broker[{}] not exist",
                            mq.broker_name
                        ))
                    })?;
                let offset = rt
                    .instance
                    .api()
                    .search_offset(&addr, &mq.topic, mq.queue_id, timestamp_ms, timeout)
                    .await?;
                offsets.insert(mq, offset);
            }
            MQConsumerInner::reset_offset(self, &sub.topic, offsets).await;
        }
        Ok(())
    }

    /// Persists the offsets of every owned queue.
    pub(super) async fn persist_offsets(&self) {
        if let Some(rt) = self.runtime() {
            self.persist_offsets_of(&rt).await;
        }
    }

    pub(super) async fn persist_offsets_of(&self, rt: &Runtime) {
        let owned = rt.rebalance.owned_queues();
        rt.offset_store.persist_all(&owned).await;
    }
}

impl MQConsumerInner for PushConsumerInner {
    fn group_name(&self) -> String {
        self.group()
    }

    fn message_model(&self) -> MessageModel {
        self.config.read().message_model
    }

    fn consume_type(&self) -> ConsumeType {
        ConsumeType::ConsumePassively
    }

    fn consume_from_where(&self) -> ConsumeFromWhere {
        self.config.read().consume_from_where
    }

    fn subscriptions(&self) -> Vec<SubscriptionData> {
        self.runtime()
            .map(|rt| rt.rebalance.subscriptions())
            .unwrap_or_default()
    }

    fn do_rebalance(&self) -> BoxFuture<'static, ()> {
        let me = self.arc();
        Box::pin(async move {
            if let Some(me) = me
                && !me.pause.load(Ordering::Acquire)
            {
                me.rebalance().await;
            }
        })
    }

    fn persist_consumer_offset(&self) -> BoxFuture<'static, ()> {
        let me = self.arc();
        Box::pin(async move {
            if let Some(me) = me
                && *me.state.lock() == ServiceState::Running
            {
                me.persist_offsets().await;
            }
        })
    }

    fn update_topic_subscribe_info(&self, topic: &str, info: Vec<MessageQueue>) {
        if let Some(rt) = self.runtime() {
            rt.rebalance.set_topic_subscribe_info(topic, info);
        }
    }

    fn is_subscribe_topic_need_update(&self, topic: &str) -> bool {
        self.runtime()
            .is_some_and(|rt| rt.rebalance.is_subscribe_topic_need_update(topic))
    }

    fn running_info(&self) -> ConsumerRunningInfo {
        self.consumer_running_info()
    }

    fn consume_message_directly(
        &self,
        msg: MessageExt,
        broker_name: &str,
    ) -> BoxFuture<'static, Option<ConsumeMessageDirectlyResult>> {
        let me = self.arc();
        let broker_name = broker_name.to_owned();
        Box::pin(async move { me?.consume_message_directly(msg, &broker_name).await })
    }

    fn reset_offset(
        &self,
        topic: &str,
        offsets: HashMap<MessageQueue, i64>,
    ) -> BoxFuture<'static, ()> {
        let me = self.arc();
        let topic = topic.to_owned();
        Box::pin(async move {
            let Some(me) = me else { return };
            let Some(rt) = me.runtime() else { return };
            me.pause.store(true, Ordering::Release);
            let targets: Vec<(MessageQueue, i64)> = rt
                .rebalance
                .process_queue_table()
                .into_iter()
                .filter(|(mq, _)| mq.topic == topic)
                .filter_map(|(mq, pq)| {
                    let offset = *offsets.get(&mq)?;
                    // Stop the queue first so no in-flight consumption commits over the reset.
                    pq.set_dropped(true);
                    pq.clear();
                    Some((mq, offset))
                })
                .collect();
            // Removing a queue persists its in-memory offset (now the reset one) and forgets it;
            // the rebalance below re-creates the queue from the stored offset.
            for (mq, offset) in &targets {
                if let Err(e) = rt.offset_store.update_and_persist_offset(mq, *offset).await {
                    tracing::warn!(%mq, offset, error = %e, "persisting a reset offset failed");
                }
                rt.rebalance.remove_process_queue(me.as_ref(), mq).await;
            }
            me.pause.store(false, Ordering::Release);
            me.rebalance().await;
        })
    }

    fn unit_mode(&self) -> bool {
        self.config.read().unit_mode
    }

    fn consumer_offsets(&self, topic: &str) -> HashMap<MessageQueue, i64> {
        self.runtime()
            .map(|rt| rt.offset_store.clone_offset_table(topic))
            .unwrap_or_default()
    }
}
