//! Harness of the push-consumer integration tests: a real name server and broker on 127.0.0.1
//! with ephemeral ports in a temporary directory, topic creation, a producer, and listeners that
//! report every delivery on a channel.
//!
//! Tests never sleep to synchronize: they await deliveries on channels, or poll a condition with
//! [`wait_until`], always under a deadline so a bug fails the test instead of hanging it.

#![allow(dead_code)]

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use comet_broker::{BrokerConfig, BrokerController, BrokerHandle};
use comet_client::ClientConfig;
use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{
    ConsumeConcurrentlyStatus, MessageExt, MessageListener, MessageListenerConcurrently,
    MessageQueue,
};
use comet_client::message::Message;
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_namesrv::{NameServer, NameServerHandle, NamesrvConfig};
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{CreateTopicRequestHeader, request_with_header};
use comet_remoting::RemotingClient;
use futures::future::BoxFuture;
use tempfile::TempDir;
use tokio::sync::mpsc;

/// Longest wait for an asynchronous effect before a test fails: a hang guard, generous enough
/// for a loaded 2-core CI box (the orderly hand-over alone waits out a 20 s unlock delay).
pub const DEADLINE: Duration = Duration::from_secs(60);
/// Poll period of [`wait_until`].
pub const POLL: Duration = Duration::from_millis(20);
/// Timeout of one admin request.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(10);
/// Eighteen delay levels of one second each, so retries come back quickly.
pub const FAST_DELAY_LEVELS: &str = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s";

static INSTANCE_SEQ: AtomicUsize = AtomicUsize::new(0);

/// A client instance name unique in this test process (instances are shared per client id, so
/// parallel tests must not reuse one).
pub fn unique_instance(prefix: &str) -> String {
    format!("{prefix}-{}", INSTANCE_SEQ.fetch_add(1, Ordering::Relaxed))
}

/// A name server and a broker.
pub struct Cluster {
    pub namesrv: Option<NameServerHandle>,
    pub broker: Option<BrokerHandle>,
    pub client: RemotingClient,
    pub dir: TempDir,
}

impl Cluster {
    pub async fn start() -> Cluster {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(tweak: impl FnOnce(&mut BrokerConfig)) -> Cluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let namesrv = NameServer::start(NamesrvConfig::new(
            "127.0.0.1:0",
            dir.path().join("namesrv"),
        ))
        .await
        .expect("name server starts");
        let mut config = BrokerConfig {
            bind_address: "127.0.0.1".parse().expect("literal IP"),
            listen_port: 0,
            store_path_root_dir: dir.path().join("store"),
            mapped_file_size_commit_log: 4 * 1024 * 1024,
            mapped_file_size_consume_queue: 1000 * 20,
            max_hash_slot_num: 1000,
            max_index_num: 4000,
            flush_interval_commit_log_ms: 50,
            flush_interval_consume_queue_ms: 100,
            flush_consumer_offset_interval_ms: 200,
            ..BrokerConfig::default()
        };
        config.namesrv_addr = vec![namesrv.local_addr().to_string()];
        tweak(&mut config);
        let broker = BrokerController::start(config)
            .await
            .expect("broker starts");
        Cluster {
            namesrv: Some(namesrv),
            broker: Some(broker),
            client: RemotingClient::new(comet_remoting::ClientConfig::default()),
            dir,
        }
    }

    pub fn namesrv_addr(&self) -> String {
        self.namesrv
            .as_ref()
            .map(|n| n.local_addr().to_string())
            .expect("name server running")
    }

    pub fn broker(&self) -> &BrokerHandle {
        self.broker.as_ref().expect("broker running")
    }

    pub fn broker_addr(&self) -> String {
        self.broker().local_addr().to_string()
    }

    pub fn broker_name(&self) -> String {
        self.broker().context().config.broker_name.clone()
    }

    /// Creates `topic` with `queues` read/write queues and registers it with the name server.
    pub async fn create_topic(&self, topic: &str, queues: i32) {
        let request = request_with_header(
            RequestCode::UpdateAndCreateTopic,
            &CreateTopicRequestHeader {
                topic: topic.to_owned(),
                default_topic: "TBW102".to_owned(),
                read_queue_nums: queues,
                write_queue_nums: queues,
                perm: 6,
                order: false,
                ..Default::default()
            },
        );
        let response = self
            .client
            .invoke(&self.broker_addr(), request, RPC_TIMEOUT)
            .await
            .expect("broker answers");
        assert_eq!(response.code, 0, "create topic: {:?}", response.remark);
        self.broker().register_now().await;
    }

    /// The group's committed offset of a queue on the broker (-1 if none).
    pub fn committed_offset(&self, group: &str, topic: &str, queue_id: i32) -> i64 {
        self.broker()
            .context()
            .consumer_offsets
            .query_offset(group, topic, queue_id)
    }

    /// Waits until every record in the CommitLog has reached its ConsumeQueue. A send is
    /// acknowledged once appended; the queue unit (what max offsets, pulls and start offsets
    /// read) follows by asynchronous dispatch, which a loaded box can delay.
    pub async fn wait_dispatched(&self) {
        let store = Arc::clone(&self.broker().context().store);
        let caught_up = tokio::task::spawn_blocking(move || {
            store.wait_dispatched(store.max_phy_offset(), DEADLINE)
        })
        .await
        .expect("dispatch wait task");
        assert!(caught_up, "dispatch did not catch up within {DEADLINE:?}");
    }

    /// Waits until the broker holds `offset` as the group's committed offset of a queue. A
    /// consumer persists its offsets oneway (as Java does), also at shutdown, so the broker
    /// applies them some time after the call returns.
    pub async fn wait_committed(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        let committed = wait_until(|| {
            let now = self.committed_offset(group, topic, queue_id);
            async move { now == offset }
        })
        .await;
        assert!(
            committed,
            "{group} never committed {offset} on {topic}:{queue_id} (broker has {})",
            self.committed_offset(group, topic, queue_id)
        );
    }

    /// Next offset to be written in a queue (as dispatched so far).
    pub fn max_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.broker()
            .context()
            .store
            .get_max_offset_in_queue(topic, queue_id)
    }

    pub async fn shutdown(mut self) {
        if let Some(broker) = self.broker.take() {
            broker.shutdown().await.expect("broker shuts down");
        }
        if let Some(namesrv) = self.namesrv.take() {
            namesrv.shutdown().await;
        }
        self.client.shutdown().await;
    }
}

/// Client settings for tests: this cluster, a unique instance, fast route refresh.
pub fn client_config(cluster: &Cluster, instance: &str) -> ClientConfig {
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
pub fn consumer_config(cluster: &Cluster, group: &str, instance: &str) -> PushConsumerConfig {
    let mut config = PushConsumerConfig::new(group);
    config.client = client_config(cluster, instance);
    config.consume_from_where = comet_client::consumer::ConsumeFromWhere::ConsumeFromFirstOffset;
    config.pull_time_delay_when_exception = Duration::from_millis(200);
    config
}

/// A started producer on this cluster.
pub async fn producer(cluster: &Cluster) -> DefaultMQProducer {
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
    let deadline = tokio::time::Instant::now() + DEADLINE;
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

/// Polls `condition` every [`POLL`] until it holds; `false` after [`DEADLINE`].
pub async fn wait_until<F, Fut>(mut condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if condition().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
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

/// Current wall-clock milliseconds.
pub fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
