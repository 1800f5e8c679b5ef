//! What the client instance asks of the lite pull consumer ([`MQConsumerInner`]): the group's
//! data for the heartbeat, the periodic rebalance (subscribe mode only) and offset persistence,
//! new subscribe sets from route refreshes, and the broker's requests — running info, consume
//! offsets and offset resets.

use std::collections::{HashMap, HashSet};

use futures::future::BoxFuture;

use super::{LiteInner, SubscriptionType};
use crate::consumer::{
    ConsumeFromWhere, ConsumeType, MessageModel, MessageQueue, SUB_ALL, SubscriptionData,
};
use crate::instance::{MQConsumerInner, ServiceState};

impl MQConsumerInner for LiteInner {
    fn group_name(&self) -> String {
        self.config.consumer_group.clone()
    }

    fn message_model(&self) -> MessageModel {
        self.config.message_model
    }

    fn consume_type(&self) -> ConsumeType {
        ConsumeType::ConsumeActively
    }

    fn consume_from_where(&self) -> ConsumeFromWhere {
        self.config.consume_from_where
    }

    fn subscriptions(&self) -> Vec<SubscriptionData> {
        let mut subs: Vec<SubscriptionData> = match *self.sub_type.lock() {
            SubscriptionType::Assign => {
                let topics: HashSet<String> = self
                    .assigned_by_app
                    .read()
                    .iter()
                    .map(|mq| mq.topic.clone())
                    .collect();
                topics
                    .into_iter()
                    .map(|t| SubscriptionData::from_tag_expression(t, SUB_ALL, 0))
                    .collect()
            }
            _ => self.subscriptions.read().values().cloned().collect(),
        };
        subs.sort_by(|a, b| a.topic.cmp(&b.topic));
        subs
    }

    fn do_rebalance(&self) -> BoxFuture<'static, ()> {
        let me = self.me.upgrade();
        Box::pin(async move {
            let Some(me) = me else { return };
            if *me.sub_type.lock() != SubscriptionType::Subscribe
                || *me.state.lock() != ServiceState::Running
            {
                return;
            }
            let runtime = me.runtime.read().clone();
            if let Some(rt) = runtime {
                rt.rebalance.do_rebalance(&*me, false).await;
            }
        })
    }

    fn persist_consumer_offset(&self) -> BoxFuture<'static, ()> {
        let me = self.me.upgrade();
        Box::pin(async move {
            let Some(me) = me else { return };
            let runtime = me.runtime.read().clone();
            if let Some(rt) = runtime {
                let owned: HashSet<MessageQueue> = me.queues.lock().keys().cloned().collect();
                rt.store.persist_all(&owned).await;
            }
        })
    }

    fn update_topic_subscribe_info(&self, topic: &str, info: Vec<MessageQueue>) {
        if let Some(rt) = self.runtime.read().as_ref() {
            rt.rebalance.set_topic_subscribe_info(topic, info);
        }
    }

    fn is_subscribe_topic_need_update(&self, topic: &str) -> bool {
        self.runtime
            .read()
            .as_ref()
            .is_some_and(|rt| rt.rebalance.is_subscribe_topic_need_update(topic))
    }

    fn running_info(&self) -> comet_protocol::body::ConsumerRunningInfo {
        let mut info = comet_protocol::body::ConsumerRunningInfo::default();
        info.properties
            .insert("consumerGroup".to_owned(), self.group_name());
        let mut subscriptions = self.subscriptions();
        subscriptions.sort_by(|a, b| (&a.topic, &a.sub_string).cmp(&(&b.topic, &b.sub_string)));
        info.subscription_set = subscriptions;
        for (mq, q) in self.queues.lock().iter() {
            let pq_info = comet_protocol::body::ProcessQueueInfo {
                commit_offset: q.consume_offset,
                cached_msg_count: i32::try_from(q.cached_msgs).unwrap_or(i32::MAX),
                cached_msg_size_in_mib: i32::try_from(q.cached_bytes / (1024 * 1024))
                    .unwrap_or(i32::MAX),
                ..Default::default()
            };
            info.mq_table.insert(mq.clone(), pq_info);
        }
        info
    }

    /// The broker reset the group's offsets (admin reset by time): owned queues jump there.
    fn reset_offset(
        &self,
        topic: &str,
        offsets: HashMap<MessageQueue, i64>,
    ) -> BoxFuture<'static, ()> {
        if let Some(rt) = self.runtime.read().as_ref() {
            for (mq, offset) in &offsets {
                if mq.topic == topic {
                    rt.store.update_offset(mq, *offset, false);
                    self.reposition(mq, *offset);
                }
            }
        }
        Box::pin(async {})
    }

    fn consumer_offsets(&self, topic: &str) -> HashMap<MessageQueue, i64> {
        self.queues
            .lock()
            .iter()
            .filter(|(mq, q)| mq.topic == topic && q.consume_offset >= 0)
            .map(|(mq, q)| (mq.clone(), q.consume_offset))
            .collect()
    }
}
