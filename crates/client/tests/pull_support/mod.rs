//! Harness of the pull-consumer, lite-consumer and admin tests: a real name server and broker on
//! 127.0.0.1 with ephemeral ports in a temporary directory, plus helpers to create topics and send
//! messages with the real producer.
//!
//! Every client gets its own instance name: the process-wide MQClientManager shares an instance
//! per client id, and tests running in parallel against different brokers must not share one.
//! Asynchronous effects are awaited with [`wait_until`] (poll until a deadline), never a sleep.

#![allow(dead_code)]

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use comet_broker::{BrokerConfig, BrokerController, BrokerHandle};
use comet_client::admin::topic::default_topic_config;
use comet_client::admin::{MQAdmin, TopicTarget};
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{ClientConfig, Message, SendResult};
use comet_namesrv::{NameServer, NameServerHandle, NamesrvConfig};
use tempfile::TempDir;

/// Longest wait for an asynchronous effect: a hang guard, generous for a loaded CI box.
pub const WAIT_DEADLINE: Duration = Duration::from_secs(60);
/// Poll period of [`wait_until`].
pub const POLL: Duration = Duration::from_millis(20);

static NEXT_INSTANCE: AtomicU32 = AtomicU32::new(0);

/// A unique instance name for one client of one test.
pub fn unique_instance(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed)
    )
}

pub struct Env {
    pub namesrv: Option<NameServerHandle>,
    pub broker: Option<BrokerHandle>,
    pub broker_addr: String,
    pub dir: TempDir,
}

impl Env {
    pub async fn start() -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let namesrv = NameServer::start(NamesrvConfig::new(
            "127.0.0.1:0",
            dir.path().join("namesrv"),
        ))
        .await
        .expect("name server starts");
        let config = BrokerConfig {
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
            namesrv_addr: vec![namesrv.local_addr().to_string()],
            ..BrokerConfig::default()
        };
        let broker = BrokerController::start(config)
            .await
            .expect("broker starts");
        let broker_addr = broker.local_addr().to_string();
        Env {
            namesrv: Some(namesrv),
            broker: Some(broker),
            broker_addr,
            dir,
        }
    }

    pub fn namesrv_addr(&self) -> String {
        self.namesrv
            .as_ref()
            .map(|n| n.local_addr().to_string())
            .expect("name server running")
    }

    /// A client config for this name server with a unique instance name.
    pub fn client(&self, prefix: &str) -> ClientConfig {
        let mut config = ClientConfig::new(self.namesrv_addr());
        config.instance_name = unique_instance(prefix);
        config
    }

    pub fn admin(&self) -> MQAdmin {
        MQAdmin::new(self.client("admin")).expect("admin client")
    }

    /// Creates `topic` with `queues` read/write queues and waits until its route is served.
    pub async fn create_topic(&self, topic: &str, queues: i32) {
        let admin = self.admin();
        let mut config = default_topic_config(topic);
        config.read_queue_nums = queues;
        config.write_queue_nums = queues;
        admin
            .create_topic(&TopicTarget::Broker(self.broker_addr.clone()), &config)
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

    pub async fn producer(&self, group: &str) -> DefaultMQProducer {
        let mut config = ProducerConfig::new(group, self.namesrv_addr());
        config.client = self.client("producer");
        let producer = DefaultMQProducer::new(config);
        producer.start().await.expect("producer starts");
        producer
    }

    /// Waits until every record in the CommitLog has reached its ConsumeQueue. A send is
    /// acknowledged once appended; pulls, max offsets and stats read the ConsumeQueues, which
    /// asynchronous dispatch fills a little later (much later on a loaded box).
    pub async fn wait_dispatched(&self) {
        let store = std::sync::Arc::clone(
            &self
                .broker
                .as_ref()
                .expect("broker running")
                .context()
                .store,
        );
        let caught_up = tokio::task::spawn_blocking(move || {
            store.wait_dispatched(store.max_phy_offset(), WAIT_DEADLINE)
        })
        .await
        .expect("dispatch wait task");
        assert!(
            caught_up,
            "dispatch did not catch up within {WAIT_DEADLINE:?}"
        );
    }

    pub async fn shutdown(mut self) {
        if let Some(b) = self.broker.take() {
            b.shutdown().await.expect("broker shuts down");
        }
        if let Some(n) = self.namesrv.take() {
            n.shutdown().await;
        }
    }
}

/// Sends `msg` and asserts it was stored.
pub async fn send(producer: &DefaultMQProducer, msg: Message) -> SendResult {
    producer.send(msg).await.expect("message sent")
}

/// Polls `condition` every [`POLL`] until it holds or [`WAIT_DEADLINE`] passes.
pub async fn wait_until<F, Fut>(mut condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT_DEADLINE;
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

pub fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
