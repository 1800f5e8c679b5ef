//! The client-level tests' side of a cluster: client settings with instance names unique in the
//! process, a started producer, push consumers whose listeners report every delivery on a
//! channel, and the pull-side helpers (admin client, topic created through it, producer of a
//! group).
//!
//! Every client gets its own instance name: the process-wide client manager shares an instance
//! per client id, and tests running side by side against different brokers must not share one.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use comet_client::admin::topic::default_topic_config;
use comet_client::admin::{MQAdmin, TopicTarget};
use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{
    ConsumeConcurrentlyStatus, MessageExt, MessageListener, MessageListenerConcurrently,
    MessageQueue,
};
use comet_client::message::Message;
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{ClientConfig, SendResult};
use futures::future::BoxFuture;
use tokio::sync::mpsc;

// What the client-level tests use beside this module, so that `use comet_testkit::client::*`
// is their whole harness.
pub use crate::cluster::{Cluster, RPC_TIMEOUT, TestBroker};
pub use crate::requests::now_millis;
pub use crate::wait::{POLL, WAIT_DEADLINE, eventually, wait_for, wait_until};

/// Eighteen delay levels of one second each, so retries come back quickly.
pub const FAST_DELAY_LEVELS: &str = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s";

static INSTANCE_SEQ: AtomicUsize = AtomicUsize::new(0);

/// A client instance name unique in this test process (instances are shared per client id, so
/// parallel tests must not reuse one).
pub fn unique_instance(prefix: &str) -> String {
    format!("{prefix}-{}", INSTANCE_SEQ.fetch_add(1, Ordering::Relaxed))
}

/// Client settings for tests: this cluster, a unique instance, fast route refresh.
pub fn client_config(cluster: &TestBroker, instance: &str) -> ClientConfig {
    let mut client = ClientConfig::new(cluster.namesrv_addr());
    client.client_ip = "127.0.0.1".to_owned();
    client.instance_name = instance.to_owned();
    client.poll_name_server_interval = Duration::from_secs(1);
    client.heartbeat_broker_interval = Duration::from_secs(5);
    client.persist_consumer_offset_interval = Duration::from_secs(1);
    client.rebalance_interval = Duration::from_secs(1);
    client
}

/// A push consumer config of `group` on this cluster, reading from the first offset.
pub fn consumer_config(cluster: &TestBroker, group: &str, instance: &str) -> PushConsumerConfig {
    let mut config = PushConsumerConfig::new(group);
    config.client = client_config(cluster, instance);
    config.consume_from_where = comet_client::consumer::ConsumeFromWhere::ConsumeFromFirstOffset;
    config.pull_time_delay_when_exception = Duration::from_millis(200);
    config
}

/// A started producer on this cluster.
pub async fn producer(cluster: &TestBroker) -> DefaultMQProducer {
    let mut config = ProducerConfig::new(
        format!("pg-{}", unique_instance("p")),
        cluster.namesrv_addr(),
    );
    config.client.client_ip = "127.0.0.1".to_owned();
    config.client.instance_name = unique_instance("producer");
    let producer = DefaultMQProducer::new(config);
    producer.start().await.expect("producer starts");
    producer
}

/// Sends `count` messages `"<prefix>-<i>"` to `queue_id` of `topic` (or spread over the queues
/// when `None`), returning their bodies.
pub async fn send_bodies(
    producer: &DefaultMQProducer,
    topic: &str,
    broker_name: &str,
    queue_id: Option<i32>,
    queues: i32,
    prefix: &str,
    count: usize,
) -> Vec<String> {
    let mut bodies = Vec::with_capacity(count);
    for i in 0..count {
        let body = format!("{prefix}-{i}");
        let msg = Message::new(topic, body.clone().into_bytes()).with_tags("TagA");
        let qid = queue_id.unwrap_or_else(|| i32::try_from(i).expect("small") % queues);
        let mq = MessageQueue::new(topic, broker_name, qid);
        producer.send_to_queue(msg, &mq).await.expect("send");
        bodies.push(body);
    }
    bodies
}

/// One delivery seen by a listener.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub consumer: String,
    pub body: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub reconsume_times: i32,
    pub topic: String,
    pub msg: MessageExt,
}

impl Delivery {
    fn of(consumer: &str, msg: &MessageExt) -> Self {
        Delivery {
            consumer: consumer.to_owned(),
            body: String::from_utf8_lossy(&msg.body).into_owned(),
            queue_id: msg.queue_id,
            queue_offset: msg.queue_offset,
            reconsume_times: msg.reconsume_times,
            topic: msg.topic.clone(),
            msg: msg.clone(),
        }
    }
}

type Decide = dyn Fn(&MessageExt) -> ConsumeConcurrentlyStatus + Send + Sync;

/// A concurrent listener reporting each message on a channel, answering per `decide`.
pub struct Reporter {
    name: String,
    tx: mpsc::UnboundedSender<Delivery>,
    decide: Box<Decide>,
    gate: Option<Arc<tokio::sync::Semaphore>>,
}

impl MessageListenerConcurrently for Reporter {
    fn consume_message<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        _ctx: &'a mut comet_client::consumer::ConsumeConcurrentlyContext,
    ) -> BoxFuture<'a, ConsumeConcurrentlyStatus> {
        Box::pin(async move {
            if let Some(gate) = &self.gate {
                // Held until the test opens the gate: keeps messages cached.
                let _ = gate.acquire().await;
            }
            let mut status = ConsumeConcurrentlyStatus::ConsumeSuccess;
            for msg in msgs {
                let _ = self.tx.send(Delivery::of(&self.name, msg));
                if (self.decide)(msg) == ConsumeConcurrentlyStatus::ReconsumeLater {
                    status = ConsumeConcurrentlyStatus::ReconsumeLater;
                }
            }
            status
        })
    }
}

/// A listener that accepts everything, and the receiving end of its deliveries.
pub fn reporting_listener(name: &str) -> (MessageListener, mpsc::UnboundedReceiver<Delivery>) {
    reporting_listener_with(name, None, |_| ConsumeConcurrentlyStatus::ConsumeSuccess)
}

/// A listener answering per `decide`, optionally held behind `gate`.
pub fn reporting_listener_with(
    name: &str,
    gate: Option<Arc<tokio::sync::Semaphore>>,
    decide: impl Fn(&MessageExt) -> ConsumeConcurrentlyStatus + Send + Sync + 'static,
) -> (MessageListener, mpsc::UnboundedReceiver<Delivery>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let listener = Reporter {
        name: name.to_owned(),
        tx,
        decide: Box::new(decide),
        gate,
    };
    (MessageListener::Concurrently(Arc::new(listener)), rx)
}

/// Receives deliveries until `done` says the collected set is complete, or fails at the deadline.
pub async fn collect_until(
    rx: &mut mpsc::UnboundedReceiver<Delivery>,
    seen: &mut Vec<Delivery>,
    mut done: impl FnMut(&[Delivery]) -> bool,
) {
    let deadline = tokio::time::Instant::now() + WAIT_DEADLINE;
    while !done(seen) {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(d)) => seen.push(d),
            Ok(None) => panic!("listener channel closed"),
            Err(_) => panic!("deadline passed with {} deliveries", seen.len()),
        }
    }
}

/// Receives until every body in `expected` was delivered at least once.
pub async fn collect_bodies(
    rx: &mut mpsc::UnboundedReceiver<Delivery>,
    seen: &mut Vec<Delivery>,
    expected: &[String],
) {
    let expected: HashSet<&String> = expected.iter().collect();
    collect_until(rx, seen, |s| {
        let got: HashSet<&String> = s.iter().map(|d| &d.body).collect();
        expected.iter().all(|b| got.contains(b))
    })
    .await;
}

/// A started push consumer subscribed to `topic` with `*`.
pub async fn start_consumer(
    config: PushConsumerConfig,
    topic: &str,
    listener: MessageListener,
) -> DefaultMQPushConsumer {
    let consumer = DefaultMQPushConsumer::new(config);
    consumer.subscribe(topic, "*").await.expect("subscribe");
    consumer.register_message_listener(listener);
    consumer.start().await.expect("consumer starts");
    consumer
}

impl TestBroker {
    /// A default client config for this name server with a unique instance name.
    pub fn default_client(&self, prefix: &str) -> ClientConfig {
        let mut config = ClientConfig::new(self.namesrv_addr());
        config.instance_name = unique_instance(prefix);
        config
    }

    /// An admin client of this name server.
    pub fn admin(&self) -> MQAdmin {
        MQAdmin::new(self.default_client("admin")).expect("admin client")
    }

    /// Creates `topic` with `queues` read/write queues through the admin client and waits until
    /// the name server routes it.
    pub async fn create_topic_via_admin(&self, topic: &str, queues: i32) {
        let admin = self.admin();
        let mut config = default_topic_config(topic);
        config.read_queue_nums = queues;
        config.write_queue_nums = queues;
        admin
            .create_topic(&TopicTarget::Broker(self.broker_addr()), &config)
            .await
            .expect("topic created");
        let routed = wait_until(|| async {
            admin
                .topic_route(topic)
                .await
                .is_ok_and(|r| r.queue_datas.iter().any(|q| q.read_queue_nums == queues))
        })
        .await;
        admin.shutdown().await;
        assert!(routed, "route of {topic} never appeared");
    }

    /// A producer config of `group` with a default client config
    /// ([`TestBroker::default_client`]).
    pub fn producer_config(&self, group: &str) -> ProducerConfig {
        let mut config = ProducerConfig::new(group, self.namesrv_addr());
        config.client = self.default_client("producer");
        config
    }

    /// A started producer of [`TestBroker::producer_config`].
    pub async fn producer(&self, group: &str) -> DefaultMQProducer {
        let producer = DefaultMQProducer::new(self.producer_config(group));
        producer.start().await.expect("producer starts");
        producer
    }
}

/// Sends `msg` and asserts it was stored.
pub async fn send(producer: &DefaultMQProducer, msg: Message) -> SendResult {
    producer.send(msg).await.expect("message sent")
}
