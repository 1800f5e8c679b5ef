//! Timer-message crash test: messages due over the next `span` are sent with absolute
//! TIMER_DELIVER_MS, the broker is SIGKILLed `kills` times while they wait in the timer wheel
//! and restarted on the same data directory, and a ledger checks what a consumer pulls from
//! the real topic:
//! - every acknowledged message is delivered (at least once);
//! - none is delivered early: the delivered record's store time and the moment the consumer saw
//!   it are both at or after the message's due time;
//! - nothing unknown arrives.
//!
//! Re-deliveries after a kill (what was delivered since the last timer checkpoint) are counted
//! as duplicates: the timer wheel is at-least-once. The report gives the distribution of the
//! lateness (consumption time − due time).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use comet_protocol::RemotingCommand;
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{
    SendMessageRequestHeader, SendMessageRequestHeaderV2, request_with_header,
};
use comet_protocol::message::Properties;
use comet_protocol::naming::AUTO_CREATE_TOPIC_KEY_TOPIC;
use comet_protocol::time::now_millis;
use comet_remoting::{ClientConfig, RemotingClient};
use parking_lot::Mutex;

use crate::body::{body_for, intact_id};
use crate::error::{Error, Result};
use crate::rng::SeededRng;
use crate::serve::{FlushMode, Serve, ServeOptions};
use crate::wire::{self, PRODUCER_GROUP, RPC_TIMEOUT, SendOutcome};

/// Topic the timer messages are due in.
pub const TOPIC: &str = "TimerCrashTopic";
/// Queues of [`TOPIC`].
pub const QUEUES: i32 = 4;
/// Group the ledger's consumer pulls as.
pub const GROUP: &str = "timer_crash_group";
/// Concurrent senders.
const SENDERS: usize = 4;
/// Pause of the consumer between rounds that found nothing.
const CONSUMER_IDLE: Duration = Duration::from_millis(20);
/// How long after the last due time every message must have arrived.
const DRAIN_DEADLINE: Duration = Duration::from_secs(60);

/// What to run.
#[derive(Debug, Clone)]
pub struct TimerCrashConfig {
    pub comet_bin: PathBuf,
    pub data_dir: PathBuf,
    pub flush: FlushMode,
    /// Timer messages sent.
    pub messages: u64,
    /// Their due times are spread evenly over this span, starting `lead` after the start.
    pub span: Duration,
    /// Time between the start and the first due time (the sends happen in it).
    pub lead: Duration,
    /// SIGKILLs while messages are waiting, each followed by a restart.
    pub kills: u32,
    pub seed: u64,
}

impl TimerCrashConfig {
    /// The long run's shape: 10,000 messages over 60 s, two kills.
    pub fn new(comet_bin: PathBuf, data_dir: PathBuf) -> Self {
        TimerCrashConfig {
            comet_bin,
            data_dir,
            flush: FlushMode::Async,
            messages: 10_000,
            span: Duration::from_secs(60),
            lead: Duration::from_secs(5),
            kills: 2,
            seed: 0x5eed,
        }
    }
}

/// What the run saw.
#[derive(Debug, Clone, Default)]
pub struct TimerCrashReport {
    pub sent: u64,
    pub acked: u64,
    pub kills: u32,
    /// Acknowledged messages never delivered.
    pub lost: u64,
    /// Deliveries before the due time (by store time or by consumption time).
    pub early: u64,
    /// Deliveries beyond the first of a message.
    pub duplicates: u64,
    /// Messages pulled that the harness never sent (or damaged bodies).
    pub unknown: u64,
    /// Lateness (consumption time − due time) of first deliveries, in ms.
    pub late_p50_ms: i64,
    pub late_p99_ms: i64,
    pub late_max_ms: i64,
}

impl std::fmt::Display for TimerCrashReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "timer-crash: sent {} acked {} kills {} lost {} early {} duplicates {} unknown {} \
             lateness p50 {} ms p99 {} ms max {} ms",
            self.sent,
            self.acked,
            self.kills,
            self.lost,
            self.early,
            self.duplicates,
            self.unknown,
            self.late_p50_ms,
            self.late_p99_ms,
            self.late_max_ms
        )
    }
}

/// One send of message `id` due at `due_ms`, to `queue_id` of [`TOPIC`].
pub fn timer_send_request(id: u64, queue_id: i32, due_ms: i64) -> RemotingCommand {
    let due = due_ms.to_string();
    let props: Properties = [("WAIT", "true"), ("TIMER_DELIVER_MS", due.as_str())]
        .into_iter()
        .collect();
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: PRODUCER_GROUP.to_owned(),
        topic: TOPIC.to_owned(),
        default_topic: AUTO_CREATE_TOPIC_KEY_TOPIC.to_owned(),
        default_topic_queue_nums: QUEUES,
        queue_id,
        sys_flag: 0,
        born_timestamp: now_millis(),
        flag: 0,
        properties: Some(props.encode()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: None,
        max_reconsume_times: None,
        rpc: Default::default(),
    });
    request_with_header(RequestCode::SendMessageV2, &header).with_body(body_for(id))
}

/// The ledger: due time of every acknowledged message and what the consumer saw.
#[derive(Debug, Default)]
struct Ledger {
    due: HashMap<u64, i64>,
    /// Consumption time of each message's first delivery.
    first_seen: HashMap<u64, i64>,
    duplicates: u64,
    early: u64,
    unknown: u64,
}

/// Runs the test (see the module docs).
pub async fn run(config: &TimerCrashConfig) -> Result<TimerCrashReport> {
    let options = ServeOptions::new(
        config.comet_bin.clone(),
        config.data_dir.clone(),
        config.flush,
    );
    let mut serve = Serve::start(&options)?;
    let client = Arc::new(RemotingClient::new(ClientConfig::default()));
    let addr = Arc::new(Mutex::new(serve.broker.clone()));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let start = now_millis();
    let first_due = start + millis(config.lead);
    let span_ms = millis(config.span).max(1);
    let n = config.messages.max(1);
    let due_of = |id: u64| first_due + i64::try_from(id).unwrap_or(0) * span_ms / n as i64;
    let last_due = due_of(n - 1);

    let sent = send_all(&client, &serve.broker, &ledger, config.messages, &due_of).await?;
    let acked = ledger.lock().due.len() as u64;

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let consumer = tokio::spawn(consume(
        Arc::clone(&client),
        Arc::clone(&addr),
        Arc::clone(&ledger),
        Arc::clone(&stop),
    ));

    // Kills spread over the span, each at a seeded moment within its share of it.
    let mut rng = SeededRng::new(config.seed);
    let share = span_ms / i64::from(config.kills + 1);
    for k in 0..config.kills {
        let low = u64::try_from(share * i64::from(k) + share / 2).unwrap_or(0);
        let high = u64::try_from(share * i64::from(k + 1)).unwrap_or(low + 1);
        let at = first_due + i64::try_from(rng.range(low, high.max(low + 1))).unwrap_or(0);
        sleep_until_ms(at).await;
        serve.kill();
        tracing::info!(kill = k + 1, "broker SIGKILLed with timer messages parked");
        serve = Serve::start(&options)?;
        *addr.lock() = serve.broker.clone();
    }

    // Wait for every acknowledged message, at most DRAIN_DEADLINE after the last due time.
    let deadline = last_due + millis(DRAIN_DEADLINE);
    loop {
        let done = {
            let l = ledger.lock();
            l.due.keys().all(|id| l.first_seen.contains_key(id))
        };
        if done || now_millis() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A little longer, so re-deliveries after the last kill are counted too.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    consumer
        .await
        .map_err(|e| Error::Violation(format!("consumer task failed: {e}")))??;
    drop(serve);

    let l = ledger.lock();
    let mut lateness: Vec<i64> = l
        .first_seen
        .iter()
        .filter_map(|(id, seen)| l.due.get(id).map(|due| seen - due))
        .collect();
    lateness.sort_unstable();
    let pct = |p: usize| {
        lateness
            .get((lateness.len().saturating_sub(1)) * p / 100)
            .copied()
            .unwrap_or(0)
    };
    Ok(TimerCrashReport {
        sent,
        acked,
        kills: config.kills,
        lost: l
            .due
            .keys()
            .filter(|id| !l.first_seen.contains_key(id))
            .count() as u64,
        early: l.early,
        duplicates: l.duplicates,
        unknown: l.unknown,
        late_p50_ms: pct(50),
        late_p99_ms: pct(99),
        late_max_ms: lateness.last().copied().unwrap_or(0),
    })
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

async fn sleep_until_ms(at: i64) {
    let wait = at - now_millis();
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(u64::try_from(wait).unwrap_or(0))).await;
    }
}

/// Sends messages `0..count` with [`SENDERS`] concurrent senders; records acknowledged ones
/// with their due time. A refused or unanswered send is retried a few times.
async fn send_all(
    client: &Arc<RemotingClient>,
    addr: &str,
    ledger: &Arc<Mutex<Ledger>>,
    count: u64,
    due_of: &(dyn Fn(u64) -> i64 + Sync),
) -> Result<u64> {
    let dues: Vec<i64> = (0..count).map(due_of).collect();
    let dues = Arc::new(dues);
    let mut tasks = Vec::new();
    for s in 0..SENDERS as u64 {
        let (client, ledger, dues, addr) = (
            Arc::clone(client),
            Arc::clone(ledger),
            Arc::clone(&dues),
            addr.to_owned(),
        );
        tasks.push(tokio::spawn(async move {
            let mut id = s;
            while id < count {
                let due = dues[id as usize];
                let queue = i32::try_from(id % QUEUES as u64).unwrap_or(0);
                for _attempt in 0..5 {
                    let request = timer_send_request(id, queue, due);
                    match wire::send(&client, &addr, request, RPC_TIMEOUT).await {
                        SendOutcome::Acked(_) => {
                            ledger.lock().due.insert(id, due);
                            break;
                        }
                        outcome => {
                            tracing::warn!(id, ?outcome, "timer send not acknowledged; retrying");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                }
                id += SENDERS as u64;
            }
        }));
    }
    for task in tasks {
        task.await
            .map_err(|e| Error::Violation(format!("sender task failed: {e}")))?;
    }
    Ok(count)
}

/// Pulls every queue of [`TOPIC`] from its start, following the broker across restarts, and
/// books each message in the ledger, until `stop`.
async fn consume(
    client: Arc<RemotingClient>,
    addr: Arc<Mutex<String>>,
    ledger: Arc<Mutex<Ledger>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Result<()> {
    let mut next = [0i64; QUEUES as usize];
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let broker = addr.lock().clone();
        let mut found_any = false;
        for queue in 0..QUEUES {
            let offset = next[queue as usize];
            let Ok(batch) = wire::pull(&client, &broker, GROUP, TOPIC, queue, offset).await else {
                continue;
            };
            let seen_at = now_millis();
            if batch.found {
                found_any = true;
                let mut l = ledger.lock();
                for m in &batch.messages {
                    book(&mut l, &m.body, m.store_timestamp, seen_at);
                }
            }
            if batch.next_offset > offset {
                next[queue as usize] = batch.next_offset;
            }
        }
        if !found_any {
            tokio::time::sleep(CONSUMER_IDLE).await;
        }
    }
    Ok(())
}

fn book(l: &mut Ledger, body: &Bytes, store_ms: i64, seen_ms: i64) {
    let Some(id) = intact_id(body) else {
        l.unknown += 1;
        return;
    };
    let Some(&due) = l.due.get(&id) else {
        l.unknown += 1;
        return;
    };
    if store_ms < due || seen_ms < due {
        tracing::error!(id, due, store_ms, seen_ms, "timer message delivered early");
        l.early += 1;
    }
    match l.first_seen.entry(id) {
        std::collections::hash_map::Entry::Occupied(_) => l.duplicates += 1,
        std::collections::hash_map::Entry::Vacant(slot) => {
            slot.insert(seen_ms);
        }
    }
}
