//! Test doubles of the instance's unit tests: a producer that counts route updates, a consumer
//! that records what the instance asks of it, a client config and a one-broker route.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use comet_protocol::body::{
    BrokerData, ConsumeFromWhere, ConsumeType, MessageModel, MessageQueue, QueueData,
    SubscriptionData, TopicRouteData, perm,
};
use futures::future::BoxFuture;
use parking_lot::Mutex;

use super::{MQConsumerInner, MQProducerInner};
use crate::config::ClientConfig;
use crate::route::TopicPublishInfo;

pub(super) struct CountingProducer {
    pub(super) updates: AtomicUsize,
}

impl MQProducerInner for CountingProducer {
    fn publish_topic_list(&self) -> Vec<String> {
        vec!["T".to_string()]
    }
    fn update_topic_publish_info(&self, _topic: &str, _info: Arc<TopicPublishInfo>) {
        self.updates.fetch_add(1, Ordering::SeqCst);
    }
    fn is_publish_topic_need_update(&self, _topic: &str) -> bool {
        false
    }
}

pub(super) fn config(instance_name: &str) -> ClientConfig {
    let mut config = ClientConfig::new("127.0.0.1:1");
    config.client_ip = "10.9.8.7".to_string();
    config.instance_name = instance_name.to_string();
    config
}

pub(super) fn route() -> TopicRouteData {
    TopicRouteData {
        queue_datas: vec![QueueData {
            broker_name: "b".into(),
            read_queue_nums: 2,
            write_queue_nums: 2,
            perm: perm::PERM_READ_WRITE,
            topic_sys_flag: 0,
        }],
        broker_datas: vec![BrokerData {
            cluster: "c".into(),
            broker_name: "b".into(),
            broker_addrs: BTreeMap::from([(0, "m:1".to_string()), (1, "s:1".to_string())]),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A consumer that records what the instance asks of it.
#[derive(Default)]
pub(super) struct RecordingConsumer {
    pub(super) rebalances: AtomicUsize,
    pub(super) resets: Mutex<Vec<(String, HashMap<MessageQueue, i64>)>>,
}

impl MQConsumerInner for RecordingConsumer {
    fn group_name(&self) -> String {
        "cg".to_string()
    }
    fn message_model(&self) -> MessageModel {
        MessageModel::Clustering
    }
    fn consume_type(&self) -> ConsumeType {
        ConsumeType::ConsumePassively
    }
    fn consume_from_where(&self) -> ConsumeFromWhere {
        ConsumeFromWhere::ConsumeFromFirstOffset
    }
    fn subscriptions(&self) -> Vec<SubscriptionData> {
        vec![SubscriptionData::from_tag_expression("T", "TagA", 1)]
    }
    fn do_rebalance(&self) -> BoxFuture<'static, ()> {
        self.rebalances.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {})
    }
    fn persist_consumer_offset(&self) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
    fn update_topic_subscribe_info(&self, _topic: &str, _info: Vec<MessageQueue>) {}
    fn is_subscribe_topic_need_update(&self, _topic: &str) -> bool {
        false
    }
    fn running_info(&self) -> comet_protocol::body::ConsumerRunningInfo {
        let mut info = comet_protocol::body::ConsumerRunningInfo::default();
        info.properties
            .insert("consumerGroup".to_owned(), "cg".to_owned());
        info
    }
    fn reset_offset(
        &self,
        topic: &str,
        offsets: HashMap<MessageQueue, i64>,
    ) -> BoxFuture<'static, ()> {
        self.resets.lock().push((topic.to_string(), offsets));
        Box::pin(async {})
    }
    fn consumer_offsets(&self, topic: &str) -> HashMap<MessageQueue, i64> {
        HashMap::from([(MessageQueue::new(topic, "b", 0), 5)])
    }
}
