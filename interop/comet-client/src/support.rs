//! What every scenario needs: unique names, started clients, topic creation, reading a topic
//! back, collecting push deliveries, and polling a condition under a deadline.
//!
//! Scenarios never sleep to synchronize: they wait for deliveries on a channel or poll a
//! condition with [`wait_until`], always under a deadline, so a bug fails the row instead of
//! hanging the suite.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use comet_client::admin::topic::default_topic_config;
use comet_client::admin::{MQAdmin, TopicTarget};
use comet_client::consumer::pull::{DefaultMQPullConsumer, PullConsumerConfig};
use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{ConsumeConcurrentlyStatus, MessageListener, concurrently_fn};
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{ClientConfig, MessageExt, MessageQueue, PullStatus};
use comet_protocol::SerializeType;
use tokio::sync::mpsc;

/// How a scenario fails: the first assertion that did not hold, in words.
pub type Outcome = Result<(), String>;

/// Longest wait for one asynchronous effect (a delivery, an index entry, a rebalance).
pub const DEADLINE: Duration = Duration::from_secs(30);
/// Period of [`wait_until`].
pub const POLL: Duration = Duration::from_millis(100);
/// How long the runtime waits for leftover client tasks after a scenario.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// Queues of every topic a scenario creates (Apache's default for auto-created topics too).
pub const QUEUES: i32 = 4;
/// Messages per pull when reading a topic back.
const READ_BATCH: i32 = 32;

/// Fails the scenario with a formatted message unless `cond` holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

/// Turns a client error into the scenario's failure, naming the step.
pub trait Step<T> {
    fn step(self, what: &str) -> Result<T, String>;
}

impl<T, E: std::fmt::Display> Step<T> for Result<T, E> {
    fn step(self, what: &str) -> Result<T, String> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

static INSTANCE_SEQ: AtomicUsize = AtomicUsize::new(0);

/// One scenario's view of the cluster: the name server and the suffix of every name.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub namesrv: String,
    pub suffix: String,
    /// Header codec of every client of the scenario (JSON, or RocketMQ's binary one).
    pub serialize: SerializeType,
}

impl Ctx {
    pub fn new(namesrv: String, suffix: String, serialize: SerializeType) -> Self {
        Ctx {
            namesrv,
            suffix,
            serialize,
        }
    }

    /// A topic name unique to this run.
    pub fn topic(&self, name: &str) -> String {
        format!("CometIop_{name}_{}", self.suffix)
    }

    /// A group name unique to this run.
    pub fn group(&self, name: &str) -> String {
        format!("comet_iop_{name}_{}", self.suffix)
    }

    /// A client config with an instance name of its own: instances are shared per client id,
    /// and two consumers of one group in one process must be two clients.
    pub fn client(&self, role: &str) -> ClientConfig {
        let mut config = ClientConfig::new(self.namesrv.clone());
        config.instance_name = format!(
            "{role}-{}-{}",
            self.suffix,
            INSTANCE_SEQ.fetch_add(1, Ordering::Relaxed)
        );
        config.serialize_type = self.serialize;
        config
    }

    pub fn admin(&self) -> Result<MQAdmin, String> {
        MQAdmin::new(self.client("admin")).step("admin client")
    }

    pub async fn producer(&self, name: &str) -> Result<DefaultMQProducer, String> {
        let mut config = ProducerConfig::new(self.group(name), self.namesrv.clone());
        config.client = self.client(name);
        let producer = DefaultMQProducer::new(config);
        producer.start().await.step("producer start")?;
        Ok(producer)
    }

    /// Creates `topic` with `queues` read/write queues on every master and waits until the name
    /// server routes it.
    pub async fn create_topic(&self, topic: &str, queues: i32) -> Result<(), String> {
        let admin = self.admin()?;
        let mut config = default_topic_config(topic);
        config.read_queue_nums = queues;
        config.write_queue_nums = queues;
        // A broker that just booted may not have registered yet (slow on a loaded machine).
        let registered =
            wait_until(|| async { admin.master_addrs(None).await.is_ok_and(|m| !m.is_empty()) })
                .await;
        ensure!(registered, "the name server knows no master broker");
        let masters = admin.master_addrs(None).await.step("cluster info")?;
        for (_, addr) in masters {
            admin
                .create_topic(&TopicTarget::Broker(addr), &config)
                .await
                .step("create topic")?;
        }
        let routed = wait_until(|| async {
            admin.topic_route(topic).await.is_ok_and(|r| {
                r.queue_datas.iter().map(|q| q.read_queue_nums).sum::<i32>() == queues
            })
        })
        .await;
        admin.shutdown().await;
        ensure!(routed, "topic {topic} not routed by the name server");
        Ok(())
    }

    /// Every message of `topic` (all queues, from the queue's min offset), re-reading until at
    /// least `expected` are there or the deadline passes. Commits nothing.
    pub async fn read_topic(
        &self,
        topic: &str,
        expected: usize,
    ) -> Result<Vec<MessageExt>, String> {
        let consumer = DefaultMQPullConsumer::new(PullConsumerConfig::new(
            self.group("reader"),
            self.client("reader"),
        ));
        consumer.start().await.step("pull consumer start")?;
        let outcome = async {
            let queues = consumer
                .fetch_subscribe_message_queues(topic)
                .await
                .step("subscribe queues")?;
            let begin = Instant::now();
            loop {
                let mut found = Vec::new();
                for mq in &queues {
                    found.append(&mut read_queue(&consumer, mq, "*").await?);
                }
                if found.len() >= expected || begin.elapsed() > DEADLINE {
                    return Ok(found);
                }
                tokio::time::sleep(POLL).await;
            }
        }
        .await;
        consumer.shutdown().await;
        outcome
    }
}

/// Every message of one queue from its min offset, matching `expression`.
pub async fn read_queue(
    consumer: &DefaultMQPullConsumer,
    mq: &MessageQueue,
    expression: &str,
) -> Result<Vec<MessageExt>, String> {
    let mut offset = consumer.min_offset(mq).await.step("min offset")?;
    let mut found = Vec::new();
    loop {
        let result = consumer
            .pull(mq, expression, offset, READ_BATCH)
            .await
            .step("pull")?;
        match result.pull_status {
            PullStatus::Found => found.extend(result.msg_found_list),
            PullStatus::NoMatchedMsg => {}
            PullStatus::NoNewMsg | PullStatus::OffsetIllegal => return Ok(found),
        }
        ensure!(
            result.next_begin_offset > offset,
            "pull of {mq} at {offset} did not advance ({:?})",
            result.pull_status
        );
        offset = result.next_begin_offset;
    }
}

/// Polls `cond` every [`POLL`] until it holds (true) or [`DEADLINE`] passes (false).
pub async fn wait_until<F, Fut>(cond: F) -> bool
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    wait_until_for(DEADLINE, cond).await
}

/// [`wait_until`] with an explicit deadline.
pub async fn wait_until_for<F, Fut>(deadline: Duration, cond: F) -> bool
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let begin = Instant::now();
    loop {
        if cond().await {
            return true;
        }
        if begin.elapsed() > deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Wall-clock milliseconds since the epoch.
pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The message's body as text (interop bodies are ASCII).
pub fn body_text(msg: &MessageExt) -> String {
    String::from_utf8_lossy(&msg.body).into_owned()
}

/// One push delivery: which consumer got which message.
pub type Delivery = (usize, MessageExt);

/// A concurrent listener that reports every message on `tx` tagged with `who`, and answers
/// `status`.
pub fn reporting_listener(
    who: usize,
    tx: mpsc::UnboundedSender<Delivery>,
    status: ConsumeConcurrentlyStatus,
) -> MessageListener {
    concurrently_fn(move |msgs, _ctx| {
        for msg in msgs {
            // A closed channel means the scenario already finished; nothing to report to.
            let _ = tx.send((who, msg.clone()));
        }
        status
    })
}

/// A started push consumer of `topic` (`expression`) in `config`'s group with `listener`.
pub async fn push_consumer(
    mut config: PushConsumerConfig,
    client: ClientConfig,
    topic: &str,
    expression: &str,
    listener: MessageListener,
) -> Result<DefaultMQPushConsumer, String> {
    config.client = client;
    let consumer = DefaultMQPushConsumer::new(config);
    consumer
        .subscribe(topic, expression)
        .await
        .step("subscribe")?;
    consumer.register_message_listener(listener);
    consumer.start().await.step("push consumer start")?;
    Ok(consumer)
}

/// Receives deliveries until `done` says the collection is complete or [`DEADLINE`] passes;
/// returns everything received (the caller asserts on it).
pub async fn collect_until(
    rx: &mut mpsc::UnboundedReceiver<Delivery>,
    deadline: Duration,
    done: impl Fn(&[Delivery]) -> bool,
) -> Vec<Delivery> {
    let begin = Instant::now();
    let mut got = Vec::new();
    while !done(&got) {
        let Some(left) = deadline.checked_sub(begin.elapsed()) else {
            break;
        };
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(d)) => got.push(d),
            Ok(None) | Err(_) => break,
        }
    }
    got
}

/// Counts of each body among deliveries.
pub fn body_counts(got: &[Delivery]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for (_, msg) in got {
        *counts.entry(body_text(msg)).or_insert(0) += 1;
    }
    counts
}

/// Shuts consumers down in parallel-safe order (each one unregisters from the broker).
pub async fn shutdown_all(consumers: &[Arc<DefaultMQPushConsumer>]) {
    for c in consumers {
        c.shutdown().await;
    }
}
