//! Crash loop: run load against `comet serve`, SIGKILL it at a random moment, restart it on the
//! same data directory, audit everything it ever acknowledged, repeat.
//!
//! Load is a few producers doing synchronous raw sends (each acknowledged message's id and queue
//! position recorded) and one consumer that pulls every queue and commits its offsets. After each
//! restart the audit checks, against that ledger:
//!
//! - every acknowledged message is stored, intact, at the queue position its ack named (so the
//!   ConsumeQueue, which the pull goes through, agrees with the CommitLog record it points at);
//! - every queue holds consecutive offsets and only messages a producer sent (no invented or
//!   damaged record, no record stored twice);
//! - the consumer group's committed offset of every queue is at least what the consumer had
//!   committed (and seen acknowledged) more than the broker's offset persist window before the
//!   kill, and never more than it ever committed.
//!
//! Under SYNC_FLUSH a missing acknowledged message is a violation. Under ASYNC_FLUSH it is
//! counted as lost (the async contract allows it); note that SIGKILL leaves the page cache alone,
//! so even ASYNC_FLUSH is expected to lose nothing here — only a power cut could.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use comet_protocol::code::ResponseCode;
use comet_remoting::{ClientConfig, RemotingClient};
use parking_lot::Mutex;

use crate::body::{body_for, intact_id};
use crate::error::{Error, Result};
use crate::rng::SeededRng;
use crate::serve::{FlushMode, Serve, ServeOptions};
use crate::wire::{self, RPC_TIMEOUT, SendOutcome, Stored};

pub const TOPIC: &str = "ReliabilityCrashTopic";
pub const QUEUES: i32 = 4;
/// The consumer group whose committed offsets are audited.
pub const GROUP: &str = "reliability_crash_group";
/// The group the audit pulls with (it never commits).
const AUDIT_GROUP: &str = "reliability_audit_group";
/// The broker persists consumer offsets this often (`flushConsumerOffsetInterval`, RocketMQ's
/// default); a commit older than this at the kill must have survived it.
pub const OFFSET_PERSIST_WINDOW: Duration = Duration::from_secs(5);
/// Added to the persist window for the time one persist round takes.
const OFFSET_PERSIST_SLACK: Duration = Duration::from_secs(1);
/// Longest a cycle may wait for the producers to reach their quota (hang guard).
const PROGRESS_TIMEOUT: Duration = Duration::from_secs(60);
/// How often progress is looked at while waiting for the quota.
const PROGRESS_POLL: Duration = Duration::from_millis(5);
/// Pause of the consumer after a round over all queues found nothing new.
const IDLE_CONSUMER_PAUSE: Duration = Duration::from_millis(5);
/// Longest the final drain may take.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

/// What to run.
#[derive(Debug, Clone)]
pub struct CrashLoopConfig {
    pub comet_bin: PathBuf,
    pub data_dir: PathBuf,
    pub cycles: u32,
    pub flush: FlushMode,
    pub seed: u64,
    pub producers: usize,
    /// New acknowledgements each cycle must reach before the kill timer starts, so every kill
    /// lands under load.
    pub min_acks_per_cycle: usize,
    /// The kill comes at a random moment in `0..max_kill_delay` after the quota.
    pub max_kill_delay: Duration,
}

impl CrashLoopConfig {
    pub fn new(comet_bin: PathBuf, data_dir: PathBuf, cycles: u32, flush: FlushMode) -> Self {
        CrashLoopConfig {
            comet_bin,
            data_dir,
            cycles,
            flush,
            seed: 0x5eed,
            producers: 4,
            min_acks_per_cycle: 50,
            max_kill_delay: Duration::from_millis(1500),
        }
    }
}

/// The figures of a run.
#[derive(Debug, Clone, Default)]
pub struct CrashLoopReport {
    pub flush: Option<FlushMode>,
    pub cycles: u32,
    pub sends: u64,
    pub acked: u64,
    pub refused: u64,
    pub unanswered: u64,
    /// Acknowledged messages missing after a restart (a violation under SYNC_FLUSH).
    pub lost: u64,
    /// Sent, not acknowledged (the answer never arrived), and stored anyway: allowed.
    pub stored_unacked: u64,
    /// The same message stored twice (no producer retries, so always a violation).
    pub stored_duplicates: u64,
    pub delivered: u64,
    /// Deliveries of a message the consumer had seen before (offsets lost in the persist window).
    pub redelivered: u64,
    /// Largest distance a committed offset moved back over a crash, in messages.
    pub max_offset_regression: i64,
    pub audits: u32,
    pub elapsed: Duration,
}

impl fmt::Display for CrashLoopReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flush = self.flush.map(FlushMode::config_value).unwrap_or("?");
        write!(
            f,
            "crash-loop {flush}: {} cycles in {:.1}s, {} sends, {} acked, {} lost, {} refused, \
             {} unanswered, {} stored-unacked, {} stored twice, {} delivered, {} redelivered, \
             max offset regression {} msgs, {} audits",
            self.cycles,
            self.elapsed.as_secs_f64(),
            self.sends,
            self.acked,
            self.lost,
            self.refused,
            self.unanswered,
            self.stored_unacked,
            self.stored_duplicates,
            self.delivered,
            self.redelivered,
            self.max_offset_regression,
            self.audits,
        )
    }
}

/// Everything the load did, shared by its tasks.
#[derive(Default)]
pub(crate) struct Ledger {
    pub(crate) attempted: HashSet<u64>,
    pub(crate) acked: HashMap<u64, Stored>,
    pub(crate) lost: HashSet<u64>,
    pub(crate) deliveries: HashMap<u64, u32>,
    /// Per queue: acknowledged commits, (time the answer arrived, offset).
    pub(crate) commits: Vec<Vec<(Instant, i64)>>,
    /// Per queue: where this broker incarnation's commits begin in `commits`, and the offset it
    /// reported at its start (loaded from its offset file). A kill may lose the incarnation's
    /// recent commits, never what it started with.
    pub(crate) incarnation_commits: Vec<usize>,
    pub(crate) incarnation_start: Vec<i64>,
    pub(crate) violations: Vec<String>,
    pub(crate) refused: u64,
    /// Refusals with FLUSH_SLAVE_TIMEOUT: stored on a SYNC_MASTER whose slave did not confirm
    /// the copy in time.
    pub(crate) flush_slave_timeouts: u64,
    pub(crate) unanswered: u64,
}

/// What a load over the whole run amounted to.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LoadFigures {
    pub(crate) sends: u64,
    pub(crate) acked: u64,
    pub(crate) lost: u64,
    pub(crate) refused: u64,
    pub(crate) flush_slave_timeouts: u64,
    pub(crate) unanswered: u64,
    pub(crate) delivered: u64,
    pub(crate) redelivered: u64,
}

impl Ledger {
    /// A ledger for a topic of [`QUEUES`] queues.
    pub(crate) fn shared() -> SharedLedger {
        Arc::new(Mutex::new(Ledger {
            commits: vec![Vec::new(); QUEUES as usize],
            ..Default::default()
        }))
    }

    /// Fails when an acknowledged message, not counted as lost, never reached the group.
    pub(crate) fn check_all_delivered(&self) -> Result<()> {
        let undelivered = self
            .acked
            .keys()
            .filter(|id| !self.lost.contains(id) && !self.deliveries.contains_key(id))
            .count();
        if undelivered > 0 {
            return Err(Error::Violation(format!(
                "{undelivered} acknowledged messages were never delivered to {GROUP}"
            )));
        }
        Ok(())
    }

    pub(crate) fn figures(&self) -> LoadFigures {
        LoadFigures {
            sends: self.attempted.len() as u64,
            acked: self.acked.len() as u64,
            lost: self.lost.len() as u64,
            refused: self.refused,
            flush_slave_timeouts: self.flush_slave_timeouts,
            unanswered: self.unanswered,
            delivered: self.deliveries.values().map(|n| u64::from(*n)).sum(),
            redelivered: self
                .deliveries
                .values()
                .map(|n| u64::from(n.saturating_sub(1)))
                .sum(),
        }
    }

    fn record_delivery(&mut self, body: &[u8], queue_id: i32, queue_offset: i64) {
        match intact_id(body) {
            Some(id) if self.attempted.contains(&id) => {
                *self.deliveries.entry(id).or_default() += 1;
            }
            _ => self.violations.push(format!(
                "consumer got a message never produced (or damaged) at {queue_id}@{queue_offset}"
            )),
        }
    }
}

pub(crate) type SharedLedger = Arc<Mutex<Ledger>>;

/// Runs the crash loop; `Err(Error::Violation)` names the first broken promise.
pub async fn run(config: &CrashLoopConfig) -> Result<CrashLoopReport> {
    let started = Instant::now();
    let options = ServeOptions::new(
        config.comet_bin.clone(),
        config.data_dir.clone(),
        config.flush,
    );
    let ledger = Ledger::shared();
    let next_id = Arc::new(AtomicU64::new(0));
    let mut rng = SeededRng::new(config.seed);
    let mut report = CrashLoopReport {
        flush: Some(config.flush),
        ..Default::default()
    };
    let mut last_kill: Option<Instant> = None;

    for cycle in 0..config.cycles {
        let serve = start(&options).await?;
        if let Some(kill_at) = last_kill {
            audit(&serve, &ledger, kill_at, config.flush, &mut report).await?;
        }
        let client = RemotingClient::new(ClientConfig::default());
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for _ in 0..config.producers.max(1) {
            tasks.push(tokio::spawn(produce(
                client.clone(),
                serve.broker.clone(),
                Arc::clone(&ledger),
                Arc::clone(&next_id),
                Arc::clone(&stop),
            )));
        }
        let positions = committed_positions(&client, &serve.broker).await?;
        {
            let mut ledger = ledger.lock();
            ledger.incarnation_commits = ledger.commits.iter().map(Vec::len).collect();
            ledger.incarnation_start = positions.clone();
        }
        tasks.push(tokio::spawn(consume(
            client.clone(),
            serve.broker.clone(),
            Arc::clone(&ledger),
            Arc::clone(&stop),
            positions,
        )));

        let quota = ledger.lock().acked.len() + config.min_acks_per_cycle;
        let waiting = Instant::now();
        while ledger.lock().acked.len() < quota {
            if waiting.elapsed() > PROGRESS_TIMEOUT {
                stop.store(true, Ordering::Relaxed);
                return Err(Error::Violation(format!(
                    "cycle {cycle}: producers made no progress in {PROGRESS_TIMEOUT:?}"
                )));
            }
            tokio::time::sleep(PROGRESS_POLL).await;
        }
        // The deliberate random moment: the one sleep that is not synchronization.
        let max_ms = u64::try_from(config.max_kill_delay.as_millis()).unwrap_or(u64::MAX);
        tokio::time::sleep(Duration::from_millis(rng.range(0, max_ms))).await;
        last_kill = Some(Instant::now());
        serve.kill();
        stop.store(true, Ordering::Relaxed);
        for task in tasks {
            let _ = task.await;
        }
        client.shutdown().await;
        report.cycles = cycle + 1;
        tracing::info!(
            cycle,
            acked = ledger.lock().acked.len(),
            audits = report.audits,
            "crash-loop cycle done"
        );
        let violations = std::mem::take(&mut ledger.lock().violations);
        if let Some(first) = violations.first() {
            return Err(Error::Violation(format!("cycle {cycle}: {first}")));
        }
    }

    // Final restart: audit the last crash, then let the consumer catch up completely.
    let serve = start(&options).await?;
    if let Some(kill_at) = last_kill {
        audit(&serve, &ledger, kill_at, config.flush, &mut report).await?;
    }
    drain(&serve.broker, &ledger).await?;
    {
        let ledger = ledger.lock();
        ledger.check_all_delivered()?;
        let figures = ledger.figures();
        report.sends = figures.sends;
        report.acked = figures.acked;
        report.lost = figures.lost;
        report.refused = figures.refused;
        report.unanswered = figures.unanswered;
        report.delivered = figures.delivered;
        report.redelivered = figures.redelivered;
    }
    drop(serve);
    report.elapsed = started.elapsed();
    Ok(report)
}

async fn start(options: &ServeOptions) -> Result<Serve> {
    let options = options.clone();
    tokio::task::spawn_blocking(move || Serve::start(&options))
        .await
        .map_err(|e| Error::NotReady(format!("start task failed: {e}")))?
}

pub(crate) async fn produce(
    client: RemotingClient,
    addr: String,
    ledger: SharedLedger,
    next_id: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Relaxed) {
        let id = next_id.fetch_add(1, Ordering::Relaxed);
        ledger.lock().attempted.insert(id);
        let queue_id = i32::try_from(id % QUEUES as u64).unwrap_or(0);
        let request = wire::send_request(TOPIC, queue_id, QUEUES, body_for(id));
        match wire::send(&client, &addr, request, RPC_TIMEOUT).await {
            SendOutcome::Acked(stored) => {
                let mut ledger = ledger.lock();
                if stored.queue_id != queue_id {
                    ledger.violations.push(format!(
                        "message {id} sent to queue {queue_id} acknowledged in queue {}",
                        stored.queue_id
                    ));
                }
                ledger.acked.insert(id, stored);
            }
            SendOutcome::Refused { code, .. } => {
                let mut ledger = ledger.lock();
                ledger.refused += 1;
                if code == ResponseCode::FlushSlaveTimeout.code() {
                    ledger.flush_slave_timeouts += 1;
                }
            }
            SendOutcome::Unanswered(_) => {
                // The broker is gone (or hung): this producer is done for the cycle.
                ledger.lock().unanswered += 1;
                return;
            }
        }
    }
}

pub(crate) async fn committed_positions(client: &RemotingClient, addr: &str) -> Result<Vec<i64>> {
    let mut positions = Vec::new();
    for q in 0..QUEUES {
        positions.push(
            wire::query_offset(client, addr, GROUP, TOPIC, q)
                .await?
                .unwrap_or(0),
        );
    }
    Ok(positions)
}

/// One round over every queue: pull, record, commit. `Ok(false)` when nothing new was found.
async fn consume_round(
    client: &RemotingClient,
    addr: &str,
    ledger: &SharedLedger,
    positions: &mut [i64],
) -> Result<bool> {
    let mut progressed = false;
    for (q, position) in (0..QUEUES).zip(positions.iter_mut()) {
        let batch = wire::pull(client, addr, GROUP, TOPIC, q, *position).await?;
        if !batch.found {
            if batch.next_offset > *position && batch.next_offset <= batch.max_offset {
                *position = batch.next_offset;
            }
            continue;
        }
        {
            let mut ledger = ledger.lock();
            for m in &batch.messages {
                ledger.record_delivery(&m.body, m.queue_id, m.queue_offset);
            }
        }
        *position = batch.next_offset;
        progressed = true;
        wire::commit_offset(client, addr, GROUP, TOPIC, q, *position).await?;
        let answered = Instant::now();
        if let Some(commits) = ledger.lock().commits.get_mut(q as usize) {
            commits.push((answered, *position));
        }
    }
    Ok(progressed)
}

pub(crate) async fn consume(
    client: RemotingClient,
    addr: String,
    ledger: SharedLedger,
    stop: Arc<AtomicBool>,
    mut positions: Vec<i64>,
) {
    while !stop.load(Ordering::Relaxed) {
        match consume_round(&client, &addr, &ledger, &mut positions).await {
            Ok(true) => {}
            Ok(false) => tokio::time::sleep(IDLE_CONSUMER_PAUSE).await,
            // The broker is gone: the consumer is done for the cycle.
            Err(_) => return,
        }
    }
}

/// Consumes from the broker at `addr` until every queue's committed offset reaches its end.
pub(crate) async fn drain(addr: &str, ledger: &SharedLedger) -> Result<()> {
    let client = RemotingClient::new(ClientConfig::default());
    let mut positions = committed_positions(&client, addr).await?;
    let started = Instant::now();
    loop {
        let progressed = consume_round(&client, addr, ledger, &mut positions).await?;
        if !progressed {
            let mut done = true;
            for (q, position) in (0..QUEUES).zip(&positions) {
                if wire::max_offset(&client, addr, TOPIC, q).await? > *position {
                    done = false;
                }
            }
            if done {
                break;
            }
        }
        if started.elapsed() > DRAIN_TIMEOUT {
            return Err(Error::Violation(format!(
                "consumer could not catch up within {DRAIN_TIMEOUT:?}"
            )));
        }
    }
    client.shutdown().await;
    let violations = std::mem::take(&mut ledger.lock().violations);
    match violations.first() {
        Some(first) => Err(Error::Violation(format!("drain: {first}"))),
        None => Ok(()),
    }
}

/// Checks the restarted broker against the ledger (see the module docs).
async fn audit(
    serve: &Serve,
    ledger: &SharedLedger,
    kill_at: Instant,
    flush: FlushMode,
    report: &mut CrashLoopReport,
) -> Result<()> {
    let client = RemotingClient::new(ClientConfig::default());
    let stored = audit_queues(&client, &serve.broker, ledger).await?;
    report.stored_unacked = audit_acknowledged(
        &mut ledger.lock(),
        &stored,
        flush == FlushMode::Sync,
        "SYNC_FLUSH",
    )?;
    audit_committed_offsets(
        &client,
        &serve.broker,
        ledger,
        kill_at,
        &mut report.max_offset_regression,
    )
    .await?;
    client.shutdown().await;
    report.audits += 1;
    Ok(())
}

/// Pulls every queue of the broker at `addr` whole: consecutive offsets, each holding an intact
/// message a producer sent, none stored twice. Returns where each message is stored.
pub(crate) async fn audit_queues(
    client: &RemotingClient,
    addr: &str,
    ledger: &SharedLedger,
) -> Result<HashMap<u64, Stored>> {
    let mut stored: HashMap<u64, Stored> = HashMap::new();
    for q in 0..QUEUES {
        let messages = wire::pull_all(client, addr, AUDIT_GROUP, TOPIC, q).await?;
        let ledger = ledger.lock();
        for (expected, m) in (0_i64..).zip(&messages) {
            if m.topic != TOPIC || m.queue_id != q || m.queue_offset != expected {
                return Err(Error::Violation(format!(
                    "queue {q} slot {expected} holds a record of {}/{}@{}: ConsumeQueue and \
                     CommitLog disagree",
                    m.topic, m.queue_id, m.queue_offset
                )));
            }
            let id = intact_id(&m.body)
                .filter(|id| ledger.attempted.contains(id))
                .ok_or_else(|| {
                    Error::Violation(format!(
                        "queue {q} offset {expected} holds a message never produced (or damaged)"
                    ))
                })?;
            let at = Stored {
                queue_id: q,
                queue_offset: expected,
            };
            if let Some(first) = stored.insert(id, at) {
                return Err(Error::Violation(format!(
                    "message {id} stored twice: {first:?} and {at:?}"
                )));
            }
        }
    }
    Ok(stored)
}

/// Every acknowledged message is stored where its ack said; one missing is lost (a violation
/// when `loss_is_violation`, named by `guarantee`). Returns how many stored messages were never
/// acknowledged.
pub(crate) fn audit_acknowledged(
    ledger: &mut Ledger,
    stored: &HashMap<u64, Stored>,
    loss_is_violation: bool,
    guarantee: &str,
) -> Result<u64> {
    let newly_lost = acked_missing(ledger, stored)?;
    if !newly_lost.is_empty() && loss_is_violation {
        return Err(Error::Violation(format!(
            "{guarantee} lost {} acknowledged messages, e.g. {:?}",
            newly_lost.len(),
            newly_lost.first()
        )));
    }
    ledger.lost.extend(newly_lost);
    Ok(stored
        .keys()
        .filter(|id| !ledger.acked.contains_key(id))
        .count() as u64)
}

/// The acknowledged messages (not already counted lost) that `stored` lacks, in id order; one
/// stored elsewhere than its acknowledgement named is a violation.
pub(crate) fn acked_missing(ledger: &Ledger, stored: &HashMap<u64, Stored>) -> Result<Vec<u64>> {
    let mut missing = Vec::new();
    for (id, at) in &ledger.acked {
        if ledger.lost.contains(id) {
            continue;
        }
        match stored.get(id) {
            Some(found) if found == at => {}
            Some(found) => {
                return Err(Error::Violation(format!(
                    "message {id} acknowledged at {at:?} but stored at {found:?}"
                )));
            }
            None => missing.push(*id),
        }
    }
    missing.sort_unstable();
    Ok(missing)
}

/// [`audit_committed_offset`] for every queue of the broker at `addr`.
pub(crate) async fn audit_committed_offsets(
    client: &RemotingClient,
    addr: &str,
    ledger: &SharedLedger,
    kill_at: Instant,
    max_regression: &mut i64,
) -> Result<()> {
    for q in 0..QUEUES {
        let committed = wire::query_offset(client, addr, GROUP, TOPIC, q).await?;
        audit_committed_offset(&ledger.lock(), q, committed, kill_at, max_regression)?;
    }
    Ok(())
}

/// Queue `q`'s committed offset after the restart (`committed`) is at least the floor (see
/// [`offset_floor`]) and at most the highest offset ever committed; records how far it moved
/// back.
fn audit_committed_offset(
    ledger: &Ledger,
    q: i32,
    committed: Option<i64>,
    kill_at: Instant,
    max_regression: &mut i64,
) -> Result<()> {
    let commits = ledger
        .commits
        .get(q as usize)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let ceiling = commits.iter().map(|(_, o)| *o).max();
    let have = committed.unwrap_or(0);
    if let Some((floor, age)) = offset_floor(ledger, q, kill_at)
        && have < floor
    {
        let newest_kept = commits
            .iter()
            .filter(|(_, o)| *o <= have)
            .map(|(t, _)| kill_at.saturating_duration_since(*t))
            .min();
        let age = if age == Duration::MAX {
            "before the incarnation started".to_owned()
        } else {
            format!("{:.2}s before the kill", age.as_secs_f64())
        };
        return Err(Error::Violation(format!(
            "queue {q}: committed offset {have} after restart, but {floor} was committed \
             {age} (persist window {OFFSET_PERSIST_WINDOW:?} + {OFFSET_PERSIST_SLACK:?} \
             slack); the offset kept was answered {newest_kept:.2?} before the kill"
        )));
    }
    match ceiling {
        Some(ceiling) if have > ceiling => Err(Error::Violation(format!(
            "queue {q}: committed offset {have} was never committed (highest {ceiling})"
        ))),
        Some(ceiling) => {
            *max_regression = (*max_regression).max(ceiling - have);
            Ok(())
        }
        None if committed.is_some_and(|c| c > 0) => Err(Error::Violation(format!(
            "queue {q}: committed offset {have} although nothing was committed"
        ))),
        None => Ok(()),
    }
}

/// The lowest committed offset queue `q` may have after the kill at `kill_at`, with how long
/// before the kill it was committed (`Duration::MAX`: before the incarnation started): the
/// highest offset this incarnation committed more than the persist window (and its slack)
/// before the kill, when above what the incarnation started with; else what it started with,
/// when above zero.
fn offset_floor(ledger: &Ledger, q: i32, kill_at: Instant) -> Option<(i64, Duration)> {
    let floor_time = kill_at.checked_sub(OFFSET_PERSIST_WINDOW + OFFSET_PERSIST_SLACK);
    let commits = ledger
        .commits
        .get(q as usize)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let first = ledger
        .incarnation_commits
        .get(q as usize)
        .copied()
        .unwrap_or(0);
    let started_with = ledger
        .incarnation_start
        .get(q as usize)
        .copied()
        .unwrap_or(0);
    commits
        .get(first..)
        .unwrap_or_default()
        .iter()
        .filter(|(t, _)| floor_time.is_some_and(|f| *t <= f))
        .max_by_key(|(_, o)| *o)
        .map(|(t, o)| (*o, kill_at.saturating_duration_since(*t)))
        .filter(|(o, _)| *o > started_with)
        .or((started_with > 0).then_some((started_with, Duration::MAX)))
}
