//! Consumer churn: a clustering group whose push consumers (the comet-client SDK) join and leave
//! every few seconds while producers keep sending. Every rebalance hands queues from one member
//! to another; a queue handed over with an offset not yet committed is consumed again (counted
//! as duplicates, which clustering allows), but a message must never be skipped: after the load
//! stops, every acknowledged message must eventually reach some member.
//!
//! Each consumer is a child process ([`crate::churn_consumer`]) so that it can leave the way
//! real consumers leave: some exit gracefully (offsets persisted, unregistered, queues
//! unlocked), others are SIGKILLed — nothing persisted or unregistered, and the broker has to
//! notice the closed connection and rebalance the group on its own. The children report every
//! delivery on stdout, with a machine-wide monotonic timestamp, and the audit runs on the union.
//!
//! In [`ChurnMode::Orderly`] producers send with an order key (the queue is chosen by the key's
//! hash, each key has its own sequence number, carried in the message id) and consumers use the
//! orderly listener. RocketMQ promises order only while a queue is locked by one member; after
//! a kill the next owner re-reads from the last persisted offset, so re-deliveries are allowed.
//! What must hold is that the *first* delivery of each message follows queue order (and hence
//! each key's sequence). A killed orderly member's queue locks are not released: the broker
//! keeps them until they expire (60 s, as in RocketMQ), so those queues stall for that long.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use comet_client::producer::selector::SelectMessageQueueByHash;
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{Message, SendStatus};
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::body::body_for;
use crate::churn_consumer::{Delivery, body_hash};
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
pub const CLIENT_TIMER: Duration = Duration::from_secs(1);
/// After the load stops, every acknowledged message must be consumed within this.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);
/// Orderly drain: a killed member's queue locks expire on the broker only after 60 s
/// (`rocketmq.broker.rebalance.lockMaxLiveTime`), then the queues need the usual drain time.
pub const ORDERLY_DRAIN_TIMEOUT: Duration = Duration::from_secs(120);
/// How often the drain re-checks when no consumption woke it up.
const DRAIN_RECHECK: Duration = Duration::from_millis(500);
/// A consumer asked to exit (stdin closed) must be gone within this; it is killed otherwise.
const CONSUMER_EXIT_TIMEOUT: Duration = Duration::from_secs(30);
/// How often an exiting consumer's status is looked at.
const EXIT_POLL: Duration = Duration::from_millis(20);
/// Order keys in orderly mode: several per queue, so one queue interleaves several sequences.
pub const ORDER_KEYS: u64 = 32;
/// An orderly message id is `key << ORDER_KEY_SHIFT | sequence`.
pub const ORDER_KEY_SHIFT: u32 = 32;
/// Mask of the sequence part of an orderly message id.
const ORDER_SEQ_MASK: u64 = (1 << ORDER_KEY_SHIFT) - 1;
/// Percent upper bound for [`ChurnConfig::kill_percent`].
const PERCENT: u64 = 100;

/// Runs started by this process: client instance names (hence client ids) must differ between
/// two runs in one process (the CI tests), or the broker would see one member twice.
static RUNS: AtomicU64 = AtomicU64::new(0);

/// Which listener the consumers use and how producers pick queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ChurnMode {
    /// Plain sends (round robin over queues), concurrent listener.
    Concurrently,
    /// Sends by order key (hash selector), orderly listener; order of first deliveries checked.
    Orderly,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct ChurnConfig {
    pub comet_bin: PathBuf,
    /// The `comet-reliability` binary, started as `churn-consumer` for every consumer.
    pub consumer_bin: PathBuf,
    pub data_dir: PathBuf,
    pub duration: Duration,
    pub seed: u64,
    pub mode: ChurnMode,
    pub producers: usize,
    /// When a join makes more members than this, a random member leaves.
    pub max_live_consumers: usize,
    /// A membership change happens every `min_period..max_period` (seeded random).
    pub min_period: Duration,
    pub max_period: Duration,
    /// Share of leaves (percent, seeded) done by SIGKILL; the others exit gracefully.
    pub kill_percent: u64,
    /// After the load stops, every acknowledged message must be consumed within this.
    pub drain_timeout: Duration,
    /// Pause of each producer between two sends (zero: send flat out). A paced load keeps the
    /// consumers' caches mostly empty, so an orderly member giving a queue up rarely has to
    /// delay its unlock (the client's 20 s `UNLOCK_DELAY` when messages are still cached).
    pub send_pause: Duration,
}

impl ChurnConfig {
    pub fn new(
        comet_bin: PathBuf,
        consumer_bin: PathBuf,
        data_dir: PathBuf,
        duration: Duration,
        mode: ChurnMode,
    ) -> Self {
        ChurnConfig {
            comet_bin,
            consumer_bin,
            data_dir,
            duration,
            seed: 0xc4u64,
            mode,
            producers: 2,
            max_live_consumers: 3,
            min_period: Duration::from_millis(1000),
            max_period: Duration::from_millis(3000),
            kill_percent: 50,
            drain_timeout: match mode {
                ChurnMode::Concurrently => DRAIN_TIMEOUT,
                ChurnMode::Orderly => ORDERLY_DRAIN_TIMEOUT,
            },
            send_pause: Duration::ZERO,
        }
    }
}

/// The figures of a run.
#[derive(Debug, Clone)]
pub struct ChurnReport {
    pub mode: ChurnMode,
    pub duration: Duration,
    pub sends: u64,
    pub acked: u64,
    pub send_failures: u64,
    pub consumers_started: u64,
    /// Members that left by SIGKILL.
    pub consumers_killed: u64,
    /// Members that left gracefully (stdin closed, `shutdown()`).
    pub consumers_exited: u64,
    /// Graceful exits that failed (non-zero status, or killed after the exit timeout).
    pub consumer_exit_failures: u64,
    /// Lines reported by all consumers.
    pub deliveries: u64,
    pub audit: Audit,
    pub drain: Duration,
}

impl fmt::Display for ChurnReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "churn ({:?}): {:.0}s, {} sends, {} acked, {} send failures, {} consumers started, \
             {} killed, {} exited ({} exit failures), {} deliveries, {} consumed, {} duplicates, \
             {} lost, {} unknown, {} queue-order violations, {} key-order violations, \
             drained in {:.1}s",
            self.mode,
            self.duration.as_secs_f64(),
            self.sends,
            self.acked,
            self.send_failures,
            self.consumers_started,
            self.consumers_killed,
            self.consumers_exited,
            self.consumer_exit_failures,
            self.deliveries,
            self.audit.consumed,
            self.audit.duplicates,
            self.audit.lost,
            self.audit.unknown,
            self.audit.queue_order_violations,
            self.audit.key_order_violations,
            self.drain.as_secs_f64(),
        )?;
        if let Some(first) = &self.audit.first_violation {
            write!(f, "; first violation: {first}")?;
        }
        Ok(())
    }
}

/// What the deliveries say, against what was sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Audit {
    /// Distinct acknowledged messages consumed.
    pub consumed: u64,
    /// Deliveries beyond the first of a message.
    pub duplicates: u64,
    /// Acknowledged messages never consumed.
    pub lost: u64,
    /// Deliveries of something no producer sent, or of a damaged body.
    pub unknown: u64,
    /// Orderly: first deliveries of a queue not in increasing queue offset order.
    pub queue_order_violations: u64,
    /// Orderly: first deliveries of a key not in increasing sequence order, or a key seen in
    /// two queues.
    pub key_order_violations: u64,
    /// Description of the first order violation, for the report.
    pub first_violation: Option<String>,
}

/// Audits `deliveries` (in any order; they are put in timestamp order first) against the ids
/// producers attempted and those acknowledged. With `orderly`, ids are `key << 32 | sequence`.
pub fn audit(
    deliveries: &[Delivery],
    attempted: &HashSet<u64>,
    acked: &HashSet<u64>,
    orderly: bool,
) -> Audit {
    let mut sorted: Vec<&Delivery> = deliveries.iter().collect();
    sorted.sort_by_key(|d| d.at_nanos);
    let mut result = Audit::default();
    let mut counts: HashMap<u64, u64> = HashMap::new();
    let mut last_queue_offset: HashMap<i32, i64> = HashMap::new();
    let mut last_key_seq: HashMap<u64, (u64, i32)> = HashMap::new();
    for d in sorted {
        let Some(id) =
            d.id.filter(|id| attempted.contains(id) && body_hash(&body_for(*id)) == d.body_hash)
        else {
            result.unknown += 1;
            continue;
        };
        let count = counts.entry(id).or_default();
        *count += 1;
        if *count > 1 || !orderly {
            continue;
        }
        if let Some(prev) = last_queue_offset.insert(d.queue_id, d.queue_offset)
            && prev >= d.queue_offset
        {
            result.queue_order_violations += 1;
            result.first_violation.get_or_insert_with(|| {
                format!(
                    "queue {}: offset {} first delivered after offset {prev}",
                    d.queue_id, d.queue_offset
                )
            });
        }
        let (key, seq) = (id >> ORDER_KEY_SHIFT, id & ORDER_SEQ_MASK);
        if let Some((prev_seq, prev_queue)) = last_key_seq.insert(key, (seq, d.queue_id))
            && (prev_seq >= seq || prev_queue != d.queue_id)
        {
            result.key_order_violations += 1;
            result.first_violation.get_or_insert_with(|| {
                format!(
                    "key {key}: sequence {seq} (queue {}) first delivered after {prev_seq} \
                     (queue {prev_queue})",
                    d.queue_id
                )
            });
        }
    }
    result.duplicates = counts.values().map(|n| n.saturating_sub(1)).sum();
    result.consumed = acked.iter().filter(|id| counts.contains_key(id)).count() as u64;
    result.lost = acked.len() as u64 - result.consumed;
    result
}

/// Deliveries reported by all consumer processes.
#[derive(Default)]
struct Deliveries {
    all: Mutex<Vec<Delivery>>,
    /// Ids delivered at least once (for the drain check).
    seen: Mutex<HashSet<u64>>,
    changed: Notify,
}

impl Deliveries {
    fn record(&self, delivery: Delivery) {
        if let Some(id) = delivery.id {
            self.seen.lock().insert(id);
        }
        self.all.lock().push(delivery);
        self.changed.notify_waiters();
    }
}

/// A consumer child process and the thread reading its reports.
struct ConsumerProcess {
    child: Child,
    reader: Option<JoinHandle<()>>,
}

impl ConsumerProcess {
    fn spawn(
        config: &ChurnConfig,
        namesrv: &str,
        run_tag: &str,
        n: u64,
        deliveries: &Arc<Deliveries>,
    ) -> Result<Self> {
        let log_path = config.data_dir.join(format!("consumer-{n}.log"));
        let log = File::create(&log_path).map_err(|e| Error::io(&log_path, e))?;
        let mut command = Command::new(&config.consumer_bin);
        command
            .args(["churn-consumer", "--namesrv", namesrv, "--instance"])
            .arg(format!("churn-{run_tag}-{n}"))
            .args(["--topic", TOPIC, "--group", GROUP]);
        if config.mode == ChurnMode::Orderly {
            command.arg("--orderly");
        }
        let mut child = command
            .env(
                "RUST_LOG",
                std::env::var("COMET_CHURN_CONSUMER_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|source| Error::Spawn {
                bin: config.consumer_bin.clone(),
                source,
            })?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| Error::Violation("consumer stdout was not piped".into()))?;
        let sink = Arc::clone(deliveries);
        let reader = std::thread::Builder::new()
            .name(format!("churn-consumer-{n}"))
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if let Some(delivery) = Delivery::parse_line(&line) {
                        sink.record(delivery);
                    }
                }
            })
            .map_err(|e| Error::io(&log_path, e))?;
        Ok(ConsumerProcess {
            child,
            reader: Some(reader),
        })
    }

    /// Ends the process (SIGKILL, or closing its stdin for a graceful exit), reaps it and
    /// collects its last reports. Returns `true` for a graceful exit that went as asked.
    fn leave(mut self, kill: bool) -> bool {
        let ok = if kill {
            let _ = self.child.kill();
            let _ = self.child.wait();
            true
        } else {
            drop(self.child.stdin.take());
            match self.wait_exit(CONSUMER_EXIT_TIMEOUT) {
                Some(status) => status.success(),
                None => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    false
                }
            }
        };
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        ok
    }

    fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(EXIT_POLL),
                _ => return None,
            }
        }
    }
}

impl Drop for ConsumerProcess {
    fn drop(&mut self) {
        // Only reached on an error path (`leave` consumes the reader): never leave a child behind.
        if self.reader.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Ends `consumer` off the async runtime (waiting for a process blocks).
async fn leave(consumer: ConsumerProcess, kill: bool) -> Result<bool> {
    tokio::task::spawn_blocking(move || consumer.leave(kill))
        .await
        .map_err(|e| Error::Violation(format!("consumer exit task failed: {e}")))
}

#[derive(Default)]
struct Sent {
    attempted: Mutex<HashSet<u64>>,
    failures: AtomicU64,
    acked: Mutex<HashSet<u64>>,
    /// Next id of a plain send.
    next_id: AtomicU64,
    /// Set when the producers must stop.
    stop: AtomicBool,
}

impl Sent {
    fn outcome(&self, id: u64, ok: bool) {
        if ok {
            self.acked.lock().insert(id);
        } else {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A plain send of message `id` (the producer picks the queue).
async fn send_plain(producer: &DefaultMQProducer, sent: &Sent, id: u64) {
    sent.attempted.lock().insert(id);
    let result = producer.send(Message::new(TOPIC, body_for(id))).await;
    sent.outcome(
        id,
        matches!(result, Ok(r) if r.send_status == SendStatus::SendOk),
    );
}

/// Sends sequence number `seq` of order key `key` to the key's queue.
async fn send_keyed(producer: &DefaultMQProducer, sent: &Sent, key: u64, seq: u64) {
    let id = (key << ORDER_KEY_SHIFT) | (seq & ORDER_SEQ_MASK);
    sent.attempted.lock().insert(id);
    let result = producer
        .send_with_selector(
            Message::new(TOPIC, body_for(id)),
            &SelectMessageQueueByHash,
            &key,
        )
        .await;
    sent.outcome(
        id,
        matches!(result, Ok(r) if r.send_status == SendStatus::SendOk),
    );
}

/// One producer task: plain sends with ids from the shared counter, or (orderly) the keys
/// `k ≡ index (mod producers)` in turn, each with its own increasing sequence, one send at a
/// time so that a key's send order is its sequence order.
async fn produce(
    producer: DefaultMQProducer,
    sent: Arc<Sent>,
    mode: ChurnMode,
    (index, producers): (u64, u64),
    pause: Duration,
) {
    let keys: Vec<u64> = (0..ORDER_KEYS).filter(|k| k % producers == index).collect();
    let mut seqs = vec![0u64; keys.len()];
    let mut turn = 0usize;
    while !sent.stop.load(Ordering::Relaxed) {
        match mode {
            ChurnMode::Concurrently => {
                let id = sent.next_id.fetch_add(1, Ordering::Relaxed);
                send_plain(&producer, &sent, id).await;
            }
            ChurnMode::Orderly => {
                let slot = turn % keys.len().max(1);
                turn = turn.wrapping_add(1);
                let (Some(key), Some(seq)) = (keys.get(slot).copied(), seqs.get_mut(slot)) else {
                    return;
                };
                *seq += 1;
                send_keyed(&producer, &sent, key, *seq).await;
            }
        }
        if !pause.is_zero() {
            // Load shaping, not synchronization.
            tokio::time::sleep(pause).await;
        }
    }
}

/// Runs the churn; the report says what was lost or out of order (the caller decides whether
/// that fails).
pub async fn run(config: &ChurnConfig) -> Result<ChurnReport> {
    let serve = start_serve(config).await?;
    let run_tag = format!(
        "{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    );
    let producer = start_producer(&serve, &run_tag).await?;
    let sent = Arc::new(Sent::default());
    create_topic(&producer, &sent, config.mode).await?;
    let producers = spawn_producers(&producer, &sent, config);

    let deliveries = Arc::new(Deliveries::default());
    let started = Instant::now();
    let mut members = churn_members(config, &serve.namesrv, &run_tag, &deliveries, started).await?;
    sent.stop.store(true, Ordering::Relaxed);
    for p in producers {
        let _ = p.await;
    }
    let duration = started.elapsed();

    // Drain: the remaining members must consume everything acknowledged.
    let acked: HashSet<u64> = sent.acked.lock().clone();
    let drain = drain(&deliveries, &acked, config.drain_timeout).await;
    members.leave_all().await?;
    producer.shutdown().await;
    drop(serve);

    let attempted = sent.attempted.lock().clone();
    let all = deliveries.all.lock().clone();
    Ok(ChurnReport {
        mode: config.mode,
        duration,
        sends: attempted.len() as u64,
        acked: acked.len() as u64,
        send_failures: sent.failures.load(Ordering::Relaxed),
        consumers_started: members.started,
        consumers_killed: members.killed,
        consumers_exited: members.exited,
        consumer_exit_failures: members.exit_failures,
        deliveries: all.len() as u64,
        audit: audit(&all, &attempted, &acked, config.mode == ChurnMode::Orderly),
        drain,
    })
}

/// Starts `comet serve` (ASYNC_FLUSH) on the run's data directory.
async fn start_serve(config: &ChurnConfig) -> Result<Serve> {
    let options = ServeOptions::new(
        config.comet_bin.clone(),
        config.data_dir.clone(),
        FlushMode::Async,
    );
    tokio::task::spawn_blocking(move || Serve::start(&options))
        .await
        .map_err(|e| Error::NotReady(format!("start task failed: {e}")))?
}

/// The run's producer, started against `serve`'s name server.
async fn start_producer(serve: &Serve, run_tag: &str) -> Result<DefaultMQProducer> {
    let mut producer_config = ProducerConfig::new(PRODUCER_GROUP, serve.namesrv.clone());
    producer_config.default_topic_queue_nums = QUEUES;
    producer_config.client.instance_name = format!("churn-producer-{run_tag}");
    let producer = DefaultMQProducer::new(producer_config);
    producer.start().await?;
    Ok(producer)
}

/// The first send creates the topic, so consumers find a route when they join. In orderly mode
/// it uses a key no producer task owns.
async fn create_topic(producer: &DefaultMQProducer, sent: &Sent, mode: ChurnMode) -> Result<()> {
    match mode {
        ChurnMode::Concurrently => {
            let id = sent.next_id.fetch_add(1, Ordering::Relaxed);
            send_plain(producer, sent, id).await;
        }
        ChurnMode::Orderly => send_keyed(producer, sent, ORDER_KEYS, 0).await,
    }
    if sent.acked.lock().is_empty() {
        return Err(Error::Violation(
            "the first send was not acknowledged".into(),
        ));
    }
    Ok(())
}

/// One [`produce`] task per configured producer, all sharing `producer`.
fn spawn_producers(
    producer: &DefaultMQProducer,
    sent: &Arc<Sent>,
    config: &ChurnConfig,
) -> Vec<tokio::task::JoinHandle<()>> {
    let producer_count = config.producers.max(1) as u64;
    let mut producers = Vec::new();
    for index in 0..producer_count {
        producers.push(tokio::spawn(produce(
            producer.clone(),
            Arc::clone(sent),
            config.mode,
            (index, producer_count),
            config.send_pause,
        )));
    }
    producers
}

/// The consumer processes of a run and what became of them.
#[derive(Default)]
struct Members {
    live: VecDeque<ConsumerProcess>,
    started: u64,
    killed: u64,
    exited: u64,
    exit_failures: u64,
}

impl Members {
    /// Starts one more consumer process.
    fn join(
        &mut self,
        config: &ChurnConfig,
        namesrv: &str,
        run_tag: &str,
        deliveries: &Arc<Deliveries>,
    ) -> Result<()> {
        self.live.push_back(ConsumerProcess::spawn(
            config,
            namesrv,
            run_tag,
            self.started,
            deliveries,
        )?);
        self.started += 1;
        Ok(())
    }

    /// The live member at `index` leaves: killed, or asked to exit.
    async fn remove(&mut self, index: usize, kill: bool) -> Result<()> {
        if let Some(consumer) = self.live.remove(index) {
            let ok = leave(consumer, kill).await?;
            if kill {
                self.killed += 1;
            } else {
                self.exited += 1;
                self.exit_failures += u64::from(!ok);
            }
        }
        Ok(())
    }

    /// Every live member exits gracefully.
    async fn leave_all(&mut self) -> Result<()> {
        for consumer in std::mem::take(&mut self.live) {
            self.exited += 1;
            self.exit_failures += u64::from(!leave(consumer, false).await?);
        }
        Ok(())
    }
}

/// Membership churn until `config.duration` has passed since `started`: a consumer joins at
/// seeded random intervals, and when that makes too many, a random one leaves (killed or
/// exiting, seeded).
async fn churn_members(
    config: &ChurnConfig,
    namesrv: &str,
    run_tag: &str,
    deliveries: &Arc<Deliveries>,
    started: Instant,
) -> Result<Members> {
    let mut rng = SeededRng::new(config.seed);
    let mut members = Members::default();
    members.join(config, namesrv, run_tag, deliveries)?;
    let min_ms = u64::try_from(config.min_period.as_millis()).unwrap_or(u64::MAX);
    let max_ms = u64::try_from(config.max_period.as_millis()).unwrap_or(u64::MAX);
    while started.elapsed() < config.duration {
        // Workload pacing, not synchronization: membership changes at seeded random intervals.
        tokio::time::sleep(Duration::from_millis(rng.range(min_ms, max_ms))).await;
        members.join(config, namesrv, run_tag, deliveries)?;
        if members.live.len() > config.max_live_consumers.max(1) {
            let victim = usize::try_from(rng.range(0, members.live.len() as u64)).unwrap_or(0);
            let kill = rng.range(0, PERCENT) < config.kill_percent;
            members.remove(victim, kill).await?;
        }
    }
    Ok(members)
}

/// Waits until every acknowledged message was delivered at least once, or `timeout` passed.
/// Returns how long it waited.
async fn drain(deliveries: &Deliveries, acked: &HashSet<u64>, timeout: Duration) -> Duration {
    let drain_started = Instant::now();
    loop {
        let changed = deliveries.changed.notified();
        let missing = {
            let seen = deliveries.seen.lock();
            acked.iter().filter(|id| !seen.contains(id)).count()
        };
        if missing == 0 || drain_started.elapsed() > timeout {
            break;
        }
        let _ = tokio::time::timeout(DRAIN_RECHECK, changed).await;
    }
    drain_started.elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(at_nanos: u64, queue_id: i32, queue_offset: i64, id: u64) -> Delivery {
        Delivery {
            at_nanos,
            queue_id,
            queue_offset,
            id: Some(id),
            body_hash: body_hash(&body_for(id)),
        }
    }

    fn keyed(key: u64, seq: u64) -> u64 {
        (key << ORDER_KEY_SHIFT) | seq
    }

    #[test]
    fn audit_counts_duplicates_losses_and_unknowns() {
        let attempted: HashSet<u64> = (0..4).collect();
        let acked: HashSet<u64> = (0..3).collect();
        let mut forged = delivery(5, 0, 9, 1);
        forged.body_hash ^= 1;
        let deliveries = [
            delivery(1, 0, 0, 0),
            delivery(2, 1, 0, 1),
            delivery(3, 0, 0, 0),
            delivery(4, 2, 0, 99),
            forged,
            Delivery {
                id: None,
                ..delivery(6, 0, 1, 3)
            },
        ];
        let a = audit(&deliveries, &attempted, &acked, false);
        assert_eq!(
            (a.consumed, a.duplicates, a.lost, a.unknown),
            (2, 1, 1, 3),
            "{a:?}"
        );
        assert_eq!(a.queue_order_violations, 0);
    }

    #[test]
    fn audit_checks_first_delivery_order_per_queue_and_key() {
        let ids = [keyed(1, 1), keyed(1, 2), keyed(9, 1), keyed(1, 3)];
        let attempted: HashSet<u64> = ids.iter().copied().collect();
        // In order, with a re-delivery of an older message after a "kill": allowed.
        let good = [
            delivery(10, 1, 0, ids[0]),
            delivery(11, 1, 1, ids[1]),
            delivery(12, 1, 2, ids[2]),
            delivery(20, 1, 1, ids[1]),
            delivery(21, 1, 3, ids[3]),
        ];
        let a = audit(&good, &attempted, &attempted, true);
        assert_eq!(
            (a.queue_order_violations, a.key_order_violations),
            (0, 0),
            "{a:?}"
        );
        assert_eq!(a.duplicates, 1);
        // Timestamps, not report order, decide: the same lines shuffled still pass.
        let mut shuffled = good;
        shuffled.reverse();
        assert_eq!(audit(&shuffled, &attempted, &attempted, true), a);
        // Offset 2 first delivered before offset 1: both the queue and the key are out of order.
        let bad = [
            delivery(10, 1, 0, ids[0]),
            delivery(11, 1, 2, ids[2]),
            delivery(12, 1, 1, ids[1]),
            delivery(13, 1, 3, ids[3]),
        ];
        let a = audit(&bad, &attempted, &attempted, true);
        assert_eq!(a.queue_order_violations, 1, "{a:?}");
        assert_eq!(
            a.key_order_violations, 0,
            "key 9 and key 1 are separate sequences"
        );
        assert!(a.first_violation.is_some());
        // A key that shows up in two queues breaks the key's order.
        let split = [delivery(10, 1, 0, ids[0]), delivery(11, 2, 0, ids[1])];
        let a = audit(&split, &attempted, &attempted, true);
        assert_eq!(a.key_order_violations, 1, "{a:?}");
    }
}
