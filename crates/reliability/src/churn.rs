//! Consumer churn: a clustering group whose push consumers (the comet-client SDK) join and leave
//! every few seconds while producers keep sending. Every rebalance hands queues from one member
//! to another; a queue handed over with an offset not yet committed is consumed again (counted
//! as duplicates, which clustering allows), but a message must never be skipped: after the load
//! stops, every acknowledged message must eventually reach some member.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{ConsumeConcurrentlyStatus, ConsumeFromWhere, concurrently_fn};
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{Message, SendStatus};
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::body::{body_for, intact_id};
use crate::error::{Error, Result};
use crate::rng::SeededRng;
use crate::serve::{FlushMode, Serve, ServeOptions};

pub const TOPIC: &str = "ReliabilityChurnTopic";
pub const GROUP: &str = "reliability_churn_group";
const PRODUCER_GROUP: &str = "reliability_churn_producer";
/// Queues of the topic: more queues than live consumers, so every rebalance moves several.
pub const QUEUES: i32 = 8;
/// Client timers shortened from RocketMQ's defaults (30 s heartbeat, 20 s rebalance) so that
/// membership changes take effect within the churn period instead of after it.
const CLIENT_TIMER: Duration = Duration::from_secs(1);
/// After the load stops, every acknowledged message must be consumed within this.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the drain re-checks when no consumption woke it up.
const DRAIN_RECHECK: Duration = Duration::from_millis(500);

/// What to run.
#[derive(Debug, Clone)]
pub struct ChurnConfig {
    pub comet_bin: PathBuf,
    pub data_dir: PathBuf,
    pub duration: Duration,
    pub seed: u64,
    pub producers: usize,
    /// When a join makes more members than this, a random member leaves.
    pub max_live_consumers: usize,
    /// A membership change happens every `min_period..max_period` (seeded random).
    pub min_period: Duration,
    pub max_period: Duration,
}

impl ChurnConfig {
    pub fn new(comet_bin: PathBuf, data_dir: PathBuf, duration: Duration) -> Self {
        ChurnConfig {
            comet_bin,
            data_dir,
            duration,
            seed: 0xc4u64,
            producers: 2,
            max_live_consumers: 3,
            min_period: Duration::from_millis(1000),
            max_period: Duration::from_millis(3000),
        }
    }
}

/// The figures of a run.
#[derive(Debug, Clone, Default)]
pub struct ChurnReport {
    pub duration: Duration,
    pub sends: u64,
    pub acked: u64,
    pub send_failures: u64,
    pub consumers_started: u64,
    pub consumers_stopped: u64,
    /// Distinct acknowledged messages consumed.
    pub consumed: u64,
    /// Listener deliveries beyond the first of a message.
    pub duplicates: u64,
    /// Acknowledged messages never consumed within the drain timeout.
    pub lost: u64,
    /// Deliveries of something no producer sent (or a damaged body).
    pub unknown: u64,
    pub drain: Duration,
}

impl fmt::Display for ChurnReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "churn: {:.0}s, {} sends, {} acked, {} send failures, {} consumers started, {} stopped, \
             {} consumed, {} duplicates, {} lost, {} unknown, drained in {:.1}s",
            self.duration.as_secs_f64(),
            self.sends,
            self.acked,
            self.send_failures,
            self.consumers_started,
            self.consumers_stopped,
            self.consumed,
            self.duplicates,
            self.lost,
            self.unknown,
            self.drain.as_secs_f64(),
        )
    }
}

#[derive(Default)]
struct Deliveries {
    counts: Mutex<HashMap<u64, u32>>,
    unknown: AtomicU64,
    changed: Notify,
}

async fn start_consumer(
    namesrv: &str,
    n: u64,
    deliveries: &Arc<Deliveries>,
) -> Result<DefaultMQPushConsumer> {
    let mut config = PushConsumerConfig::new(GROUP);
    config.client.namesrv_addr = namesrv.to_owned();
    config.client.instance_name = format!("churn-{}-{n}", std::process::id());
    config.client.heartbeat_broker_interval = CLIENT_TIMER;
    config.client.rebalance_interval = CLIENT_TIMER;
    config.client.persist_consumer_offset_interval = CLIENT_TIMER;
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    let consumer = DefaultMQPushConsumer::new(config);
    consumer.subscribe(TOPIC, "*").await?;
    let sink = Arc::clone(deliveries);
    consumer.register_message_listener(concurrently_fn(move |msgs, _ctx| {
        for m in msgs {
            match intact_id(&m.body) {
                Some(id) => *sink.counts.lock().entry(id).or_default() += 1,
                None => {
                    sink.unknown.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        sink.changed.notify_waiters();
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }));
    consumer.start().await?;
    Ok(consumer)
}

#[derive(Default)]
struct Sent {
    attempted: AtomicU64,
    failures: AtomicU64,
    acked: Mutex<HashSet<u64>>,
}

/// Runs the churn; the report says what was lost (the caller decides whether that fails).
pub async fn run(config: &ChurnConfig) -> Result<ChurnReport> {
    let options = ServeOptions::new(
        config.comet_bin.clone(),
        config.data_dir.clone(),
        FlushMode::Async,
    );
    let serve = {
        let options = options.clone();
        tokio::task::spawn_blocking(move || Serve::start(&options))
            .await
            .map_err(|e| Error::NotReady(format!("start task failed: {e}")))??
    };
    let mut producer_config = ProducerConfig::new(PRODUCER_GROUP, serve.namesrv.clone());
    producer_config.default_topic_queue_nums = QUEUES;
    producer_config.client.instance_name = format!("churn-producer-{}", std::process::id());
    let producer = DefaultMQProducer::new(producer_config);
    producer.start().await?;

    let sent = Arc::new(Sent::default());
    let next_id = Arc::new(AtomicU64::new(0));
    // The first send creates the topic, so consumers find a route when they join.
    send_one(&producer, &sent, &next_id).await;
    if sent.acked.lock().is_empty() {
        return Err(Error::Violation(
            "the first send was not acknowledged".into(),
        ));
    }

    let stop = Arc::new(AtomicBool::new(false));
    let mut producers = Vec::new();
    for _ in 0..config.producers.max(1) {
        let producer = producer.clone();
        let sent = Arc::clone(&sent);
        let next_id = Arc::clone(&next_id);
        let stop = Arc::clone(&stop);
        producers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                send_one(&producer, &sent, &next_id).await;
            }
        }));
    }

    let deliveries = Arc::new(Deliveries::default());
    let mut rng = SeededRng::new(config.seed);
    let mut live: VecDeque<DefaultMQPushConsumer> = VecDeque::new();
    let mut report = ChurnReport::default();
    let started = Instant::now();
    live.push_back(start_consumer(&serve.namesrv, report.consumers_started, &deliveries).await?);
    report.consumers_started += 1;
    let min_ms = u64::try_from(config.min_period.as_millis()).unwrap_or(u64::MAX);
    let max_ms = u64::try_from(config.max_period.as_millis()).unwrap_or(u64::MAX);
    while started.elapsed() < config.duration {
        // Workload pacing, not synchronization: membership changes at seeded random intervals.
        tokio::time::sleep(Duration::from_millis(rng.range(min_ms, max_ms))).await;
        live.push_back(
            start_consumer(&serve.namesrv, report.consumers_started, &deliveries).await?,
        );
        report.consumers_started += 1;
        if live.len() > config.max_live_consumers.max(1) {
            let victim = usize::try_from(rng.range(0, live.len() as u64)).unwrap_or(0);
            if let Some(consumer) = live.remove(victim) {
                consumer.shutdown().await;
                report.consumers_stopped += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for p in producers {
        let _ = p.await;
    }
    report.duration = started.elapsed();

    // Drain: the remaining members must consume everything acknowledged.
    let acked: HashSet<u64> = sent.acked.lock().clone();
    let drain_started = Instant::now();
    loop {
        let changed = deliveries.changed.notified();
        let missing = {
            let counts = deliveries.counts.lock();
            acked.iter().filter(|id| !counts.contains_key(id)).count()
        };
        if missing == 0 || drain_started.elapsed() > DRAIN_TIMEOUT {
            report.lost = missing as u64;
            break;
        }
        let _ = tokio::time::timeout(DRAIN_RECHECK, changed).await;
    }
    report.drain = drain_started.elapsed();
    for consumer in live {
        consumer.shutdown().await;
    }
    producer.shutdown().await;
    drop(serve);

    let counts = deliveries.counts.lock();
    report.sends = sent.attempted.load(Ordering::Relaxed);
    report.send_failures = sent.failures.load(Ordering::Relaxed);
    report.acked = acked.len() as u64;
    report.consumed = acked.iter().filter(|id| counts.contains_key(id)).count() as u64;
    report.duplicates = counts
        .values()
        .map(|n| u64::from(n.saturating_sub(1)))
        .sum();
    report.unknown = deliveries.unknown.load(Ordering::Relaxed)
        + counts
            .keys()
            .filter(|id| !sent_ids_contains(&next_id, **id))
            .count() as u64;
    Ok(report)
}

/// Ids are handed out in order, so "was ever produced" is "below the next id".
fn sent_ids_contains(next_id: &AtomicU64, id: u64) -> bool {
    id < next_id.load(Ordering::Relaxed)
}

async fn send_one(producer: &DefaultMQProducer, sent: &Sent, next_id: &AtomicU64) {
    let id = next_id.fetch_add(1, Ordering::Relaxed);
    sent.attempted.fetch_add(1, Ordering::Relaxed);
    match producer.send(Message::new(TOPIC, body_for(id))).await {
        Ok(result) if result.send_status == SendStatus::SendOk => {
            sent.acked.lock().insert(id);
        }
        _ => {
            sent.failures.fetch_add(1, Ordering::Relaxed);
        }
    }
}
