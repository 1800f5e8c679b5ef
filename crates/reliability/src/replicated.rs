//! Replicated crash loop: a name server, a master and its slave as three `comet` processes, the
//! crash loop's load against the master, and at random moments a SIGKILL of the master, the
//! slave or both (in turn), each restarted on its own data directory, then an audit.
//!
//! After every kill that takes the master down, the slave is examined before the master comes
//! back: what it holds then is all that would survive if the master's disk were lost at that
//! moment. Under `SYNC_MASTER` (inSyncReplicas 2) every acknowledged message must be on it; under
//! `ASYNC_MASTER` the acknowledged messages it lacks, and the CommitLog bytes it is behind the
//! restarted master, are measured and reported. Then, after every cycle:
//!
//! - the master is audited as in the single-broker crash loop: every acknowledged message at its
//!   acknowledged queue offset, consecutive queue offsets, nothing stored twice, committed
//!   offsets within the persist window (after a master restart);
//! - once the slave has caught up (same CommitLog end, both dispatched), its CommitLog must equal
//!   the master's byte for byte, read from the two data directories, and its queues must hold
//!   exactly the master's messages at the same offsets: consecutive, none stored twice.
//!
//! The victim rotates master, slave, both (from a seeded start), the moment is random. After a
//! slave-only kill the load goes on for a random while, so a `SYNC_MASTER` answers sends with
//! FLUSH_SLAVE_TIMEOUT (stored, not acknowledged) and the restarted slave has to catch up on them.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use comet_remoting::{ClientConfig, RemotingClient};
use tokio::task::JoinHandle;

use crate::crash_loop::{
    self, Ledger, QUEUES, SharedLedger, TOPIC, acked_missing, audit_acknowledged,
    audit_committed_offsets, audit_queues, committed_positions,
};
use crate::error::{Error, Result};
use crate::logs::compare_commit_logs;
use crate::processes::{self, BrokerSpec, Process};
use crate::rng::SeededRng;
use crate::serve::FlushMode;
use crate::wire::{self, Stored};

/// Longest a cycle may wait for the producers to reach their quota.
const PROGRESS_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a condition is looked at while waiting for it.
const POLL: Duration = Duration::from_millis(20);
/// Longest wait for the slave to know the topic, to notice its master died, or to catch up
/// (it redials a dead master every 5 s).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
/// The slave logs this when its connection to the master opens...
const HA_CONNECTED: &str = "replicating from the master";
/// ...and one of these when it ends.
const HA_DISCONNECTED: [&str; 2] = [
    "replication connection lost",
    "replication from the master stopped",
];
const BROKER_NAME: &str = "broker-r";
/// `registerNameServerPeriod` of both brokers, RocketMQ's lowest (default 30 s): a slave started
/// while its master is down learns the master's address only from its next registration.
const REGISTER_PERIOD_MS: u64 = 10_000;

/// `brokerRole` of the master.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReplicationMode {
    /// `SYNC_MASTER`, inSyncReplicas 2: a send is acknowledged once the slave holds it.
    Sync,
    /// `ASYNC_MASTER`: a send is acknowledged before the slave has it.
    Async,
}

impl ReplicationMode {
    pub fn role(self) -> &'static str {
        match self {
            ReplicationMode::Sync => "SYNC_MASTER",
            ReplicationMode::Async => "ASYNC_MASTER",
        }
    }
}

/// Who is killed in a cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Victim {
    Master,
    Slave,
    Both,
}

const VICTIMS: [Victim; 3] = [Victim::Master, Victim::Slave, Victim::Both];

impl Victim {
    fn takes_master(self) -> bool {
        matches!(self, Victim::Master | Victim::Both)
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct ReplicatedConfig {
    pub comet_bin: PathBuf,
    pub data_dir: PathBuf,
    pub cycles: u32,
    pub mode: ReplicationMode,
    pub flush: FlushMode,
    pub seed: u64,
    pub producers: usize,
    /// New acknowledgements each cycle must reach before the kill timer starts.
    pub min_acks_per_cycle: usize,
    /// The kill comes at a random moment in `0..max_kill_delay` after the quota.
    pub max_kill_delay: Duration,
    /// More broker.conf keys for both brokers (e.g. `inSyncReplicas=1`, to see the audit fail).
    pub broker_settings: Vec<(String, String)>,
}

impl ReplicatedConfig {
    pub fn new(comet_bin: PathBuf, data_dir: PathBuf, cycles: u32, mode: ReplicationMode) -> Self {
        ReplicatedConfig {
            comet_bin,
            data_dir,
            cycles,
            mode,
            flush: FlushMode::Async,
            seed: 0x5eed,
            producers: 4,
            min_acks_per_cycle: 50,
            max_kill_delay: Duration::from_millis(1500),
            broker_settings: Vec::new(),
        }
    }
}

/// What the slave lacked when its master died (before the master came back).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlaveGap {
    /// Acknowledged messages not on the slave.
    pub acked_missing: u64,
    /// Messages the restarted master holds and the slave did not.
    pub messages_missing: u64,
    /// CommitLog bytes between the slave's end and the restarted master's.
    pub bytes_missing: u64,
}

/// The figures of a run.
#[derive(Debug, Clone, Default)]
pub struct ReplicatedReport {
    pub mode: Option<ReplicationMode>,
    pub flush: Option<FlushMode>,
    pub cycles: u32,
    pub master_kills: u32,
    pub slave_kills: u32,
    pub both_kills: u32,
    pub sends: u64,
    pub acked: u64,
    pub refused: u64,
    pub flush_slave_timeouts: u64,
    pub unanswered: u64,
    /// Acknowledged messages missing on the master after a restart.
    pub lost: u64,
    pub stored_unacked: u64,
    /// One entry per kill that took the master down.
    pub gaps: Vec<SlaveGap>,
    /// Byte comparisons of the two CommitLogs, all equal.
    pub log_comparisons: u32,
    /// Bytes covered by the last comparison.
    pub bytes_compared: u64,
    /// Longest wait, after the audit of the master, for the slave to be connected to it again.
    pub max_reconnect: Duration,
    pub delivered: u64,
    pub redelivered: u64,
    pub max_offset_regression: i64,
    pub audits: u32,
    pub elapsed: Duration,
}

impl ReplicatedReport {
    fn gap_sum(&self, f: impl Fn(&SlaveGap) -> u64) -> (u64, u64) {
        let values = self.gaps.iter().map(&f);
        (values.clone().sum(), values.max().unwrap_or(0))
    }
}

impl fmt::Display for ReplicatedReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = self.mode.map(ReplicationMode::role).unwrap_or("?");
        let flush = self.flush.map(FlushMode::config_value).unwrap_or("?");
        let (acked_gap, acked_gap_max) = self.gap_sum(|g| g.acked_missing);
        let (msg_gap, msg_gap_max) = self.gap_sum(|g| g.messages_missing);
        let (byte_gap, byte_gap_max) = self.gap_sum(|g| g.bytes_missing);
        let behind = self.gaps.iter().filter(|g| g.bytes_missing > 0).count();
        write!(
            f,
            "crash-loop replicated {mode} {flush}: {} cycles in {:.1}s (kills: {} master, {} \
             slave, {} both), {} sends, {} acked, {} lost, {} refused ({} FLUSH_SLAVE_TIMEOUT), \
             {} unanswered, {} stored-unacked; slave at master kills: behind {behind} of {} \
             times, acked missing {acked_gap} (max {acked_gap_max}), messages missing {msg_gap} \
             (max {msg_gap_max}), bytes missing {byte_gap} (max {byte_gap_max}); slave \
             reconnected within {:.1}s; {} byte-equal CommitLog comparisons (last {} bytes), {} \
             delivered, {} redelivered, max offset \
             regression {} msgs, {} audits",
            self.cycles,
            self.elapsed.as_secs_f64(),
            self.master_kills,
            self.slave_kills,
            self.both_kills,
            self.sends,
            self.acked,
            self.lost,
            self.refused,
            self.flush_slave_timeouts,
            self.unanswered,
            self.stored_unacked,
            self.gaps.len(),
            self.max_reconnect.as_secs_f64(),
            self.log_comparisons,
            self.bytes_compared,
            self.delivered,
            self.redelivered,
            self.max_offset_regression,
            self.audits,
        )
    }
}

/// The three processes and how to restart them.
struct Pair {
    bin: PathBuf,
    _namesrv: Process,
    master_spec: BrokerSpec,
    slave_spec: BrokerSpec,
    master: Option<Process>,
    slave: Option<Process>,
    client: RemotingClient,
}

impl Pair {
    async fn start(config: &ReplicatedConfig) -> Result<Pair> {
        let bin = config.comet_bin.clone();
        let namesrv_addr = processes::free_addr(false)?;
        let namesrv_dir = config.data_dir.join("namesrv");
        let namesrv_bin = bin.clone();
        let namesrv = tokio::task::spawn_blocking(move || {
            processes::start_namesrv(&namesrv_bin, &namesrv_dir, namesrv_addr)
        })
        .await
        .map_err(|e| Error::NotReady(format!("name server start task failed: {e}")))??;
        let spec = |name: &str, role: &str, id: u32| -> Result<BrokerSpec> {
            Ok(BrokerSpec {
                name: name.to_owned(),
                dir: config.data_dir.join(name),
                addr: processes::free_addr(true)?,
                role: role.to_owned(),
                broker_id: id,
                broker_name: BROKER_NAME.to_owned(),
                namesrv: namesrv_addr.to_string(),
                flush: config.flush,
                extra: std::iter::once((
                    "registerNameServerPeriod".to_owned(),
                    REGISTER_PERIOD_MS.to_string(),
                ))
                .chain(config.broker_settings.iter().cloned())
                .collect(),
            })
        };
        let mut pair = Pair {
            master_spec: spec("master", config.mode.role(), 0)?,
            slave_spec: spec("slave", "SLAVE", 1)?,
            bin,
            _namesrv: namesrv,
            master: None,
            slave: None,
            client: RemotingClient::new(ClientConfig::default()),
        };
        pair.start_master().await?;
        wire::create_topic(&pair.client, &pair.master_addr(), TOPIC, QUEUES).await?;
        pair.start_slave().await?;
        let slave = pair.slave_addr();
        wait_for("the slave to copy the topic", || async {
            wire::knows_topic(&pair.client, &slave, TOPIC).await
        })
        .await?;
        Ok(pair)
    }

    fn master_addr(&self) -> String {
        self.master_spec.addr.to_string()
    }

    fn slave_addr(&self) -> String {
        self.slave_spec.addr.to_string()
    }

    async fn start_master(&mut self) -> Result<()> {
        let mut process = self.master_spec.spawn(&self.bin)?;
        processes::wait_broker_ready(&self.client, &mut process, &self.master_addr()).await?;
        self.master = Some(process);
        Ok(())
    }

    async fn start_slave(&mut self) -> Result<()> {
        let mut process = self.slave_spec.spawn(&self.bin)?;
        processes::wait_broker_ready(&self.client, &mut process, &self.slave_addr()).await?;
        self.slave = Some(process);
        Ok(())
    }

    fn slave_process(&self) -> Result<&Process> {
        self.slave
            .as_ref()
            .ok_or_else(|| Error::NotReady("the slave is not running".into()))
    }
}

/// Polls `check` until it answers `true`; fails after [`SETTLE_TIMEOUT`] naming `what`.
async fn wait_for<F, Fut>(what: &str, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool>>,
{
    let started = Instant::now();
    let mut last_error = None;
    loop {
        match check().await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => last_error = Some(e),
        }
        if started.elapsed() > SETTLE_TIMEOUT {
            let detail = last_error.map(|e| format!(" (last error: {e})"));
            return Err(Error::Violation(format!(
                "waited {SETTLE_TIMEOUT:?} for {what}{}",
                detail.unwrap_or_default()
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Whether the last replication event in a slave's log is a connection that opened.
fn slave_connected(log: &str) -> bool {
    log.lines()
        .rev()
        .find_map(|line| {
            if line.contains(HA_CONNECTED) {
                Some(true)
            } else if HA_DISCONNECTED.iter().any(|m| line.contains(m)) {
                Some(false)
            } else {
                None
            }
        })
        .unwrap_or(false)
}

/// The load of one cycle against the master.
struct Load {
    client: RemotingClient,
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Load {
    async fn start(
        config: &ReplicatedConfig,
        addr: &str,
        ledger: &SharedLedger,
        next_id: &Arc<AtomicU64>,
        new_incarnation: bool,
    ) -> Result<Load> {
        let client = RemotingClient::new(ClientConfig::default());
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for _ in 0..config.producers.max(1) {
            tasks.push(tokio::spawn(crash_loop::produce(
                client.clone(),
                addr.to_owned(),
                Arc::clone(ledger),
                Arc::clone(next_id),
                Arc::clone(&stop),
            )));
        }
        let positions = committed_positions(&client, addr).await?;
        if new_incarnation {
            let mut ledger = ledger.lock();
            ledger.incarnation_commits = ledger.commits.iter().map(Vec::len).collect();
            ledger.incarnation_start = positions.clone();
        }
        tasks.push(tokio::spawn(crash_loop::consume(
            client.clone(),
            addr.to_owned(),
            Arc::clone(ledger),
            Arc::clone(&stop),
            positions,
        )));
        Ok(Load {
            client,
            stop,
            tasks,
        })
    }

    async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            let _ = task.await;
        }
        self.client.shutdown().await;
    }
}

/// Runs the replicated crash loop; `Err(Error::Violation)` names the first broken promise.
pub async fn run(config: &ReplicatedConfig) -> Result<ReplicatedReport> {
    let started = Instant::now();
    let mut pair = Pair::start(config).await?;
    let ledger = Ledger::shared();
    let next_id = Arc::new(AtomicU64::new(0));
    let mut rng = SeededRng::new(config.seed);
    let first_victim = usize::try_from(rng.range(0, VICTIMS.len() as u64)).unwrap_or(0);
    let mut report = ReplicatedReport {
        mode: Some(config.mode),
        flush: Some(config.flush),
        ..Default::default()
    };
    let mut new_incarnation = true;
    for cycle in 0..config.cycles {
        let victim = VICTIMS[(first_victim + cycle as usize) % VICTIMS.len()];
        let kill_at = run_cycle(
            config,
            &mut pair,
            &ledger,
            &next_id,
            &mut rng,
            victim,
            new_incarnation,
        )
        .await
        .map_err(|e| cycle_error(cycle, e))?;
        match victim {
            Victim::Master => report.master_kills += 1,
            Victim::Slave => report.slave_kills += 1,
            Victim::Both => report.both_kills += 1,
        }
        recover_and_audit(config, &mut pair, &ledger, victim, kill_at, &mut report)
            .await
            .map_err(|e| cycle_error(cycle, e))?;
        new_incarnation = victim.takes_master();
        report.cycles = cycle + 1;
        tracing::info!(
            cycle,
            ?victim,
            acked = ledger.lock().acked.len(),
            "replicated cycle done"
        );
    }
    crash_loop::drain(&pair.master_addr(), &ledger).await?;
    let ledger = ledger.lock();
    ledger.check_all_delivered()?;
    let figures = ledger.figures();
    report.sends = figures.sends;
    report.acked = figures.acked;
    report.lost = figures.lost;
    report.refused = figures.refused;
    report.flush_slave_timeouts = figures.flush_slave_timeouts;
    report.unanswered = figures.unanswered;
    report.delivered = figures.delivered;
    report.redelivered = figures.redelivered;
    report.elapsed = started.elapsed();
    Ok(report)
}

fn cycle_error(cycle: u32, e: Error) -> Error {
    match e {
        Error::Violation(v) => Error::Violation(format!("cycle {cycle}: {v}")),
        other => other,
    }
}

/// Load, the random moment, the kill. Returns when the victim died; the load is stopped.
#[allow(clippy::too_many_arguments)]
async fn run_cycle(
    config: &ReplicatedConfig,
    pair: &mut Pair,
    ledger: &SharedLedger,
    next_id: &Arc<AtomicU64>,
    rng: &mut SeededRng,
    victim: Victim,
    new_incarnation: bool,
) -> Result<KillMoment> {
    let load = Load::start(
        config,
        &pair.master_addr(),
        ledger,
        next_id,
        new_incarnation,
    )
    .await?;
    let quota = ledger.lock().acked.len() + config.min_acks_per_cycle;
    let waiting = Instant::now();
    while ledger.lock().acked.len() < quota {
        if waiting.elapsed() > PROGRESS_TIMEOUT {
            load.stop().await;
            return Err(Error::Violation(format!(
                "producers made no progress in {PROGRESS_TIMEOUT:?}"
            )));
        }
        tokio::time::sleep(POLL).await;
    }
    // The deliberate random moments: the only sleeps that are not synchronization.
    let max_ms = u64::try_from(config.max_kill_delay.as_millis()).unwrap_or(u64::MAX);
    tokio::time::sleep(Duration::from_millis(rng.range(0, max_ms))).await;
    let slave = pair.slave_process()?;
    let moment = KillMoment {
        at: Instant::now(),
        slave_log: slave.log_position(),
        slave_connected: slave_connected(&slave.log()),
    };
    match victim {
        Victim::Master => kill(&mut pair.master),
        Victim::Slave => {
            kill(&mut pair.slave);
            tokio::time::sleep(Duration::from_millis(rng.range(0, max_ms))).await;
        }
        Victim::Both => {
            kill(&mut pair.master);
            kill(&mut pair.slave);
        }
    }
    load.stop().await;
    let violations = std::mem::take(&mut ledger.lock().violations);
    match violations.into_iter().next() {
        Some(first) => Err(Error::Violation(first)),
        None => Ok(moment),
    }
}

/// When the kill came, and the slave's state then.
#[derive(Debug, Clone, Copy)]
struct KillMoment {
    at: Instant,
    /// Length of the slave's log at the kill.
    slave_log: u64,
    /// Whether the slave was connected to the master at the kill.
    slave_connected: bool,
}

fn kill(process: &mut Option<Process>) {
    if let Some(p) = process.take() {
        p.kill();
    }
}

/// Restarts what was killed and audits both brokers (see the module docs).
async fn recover_and_audit(
    config: &ReplicatedConfig,
    pair: &mut Pair,
    ledger: &SharedLedger,
    victim: Victim,
    moment: KillMoment,
    report: &mut ReplicatedReport,
) -> Result<()> {
    let slave_at_kill = if victim.takes_master() {
        if victim == Victim::Both {
            pair.start_slave().await?;
        } else if moment.slave_connected {
            let slave = pair.slave_process()?;
            wait_for("the slave to notice its master died", || async {
                let text = slave.log_since(moment.slave_log);
                Ok(HA_DISCONNECTED.iter().any(|m| text.contains(m)))
            })
            .await?;
        }
        Some(examine_slave_alone(config, pair, ledger).await?)
    } else {
        pair.start_slave().await?;
        None
    };
    if victim.takes_master() {
        pair.start_master().await?;
    }
    let master = pair.master_addr();
    let stored = audit_queues(&pair.client, &master, ledger).await?;
    let strict = config.mode == ReplicationMode::Sync || config.flush == FlushMode::Sync;
    let guarantee = format!(
        "{} with {}",
        config.mode.role(),
        config.flush.config_value()
    );
    report.stored_unacked = audit_acknowledged(&mut ledger.lock(), &stored, strict, &guarantee)?;
    if victim.takes_master() {
        audit_committed_offsets(
            &pair.client,
            &master,
            ledger,
            moment.at,
            &mut report.max_offset_regression,
        )
        .await?;
    }
    if let Some((slave_end, slave_ids, acked_missing)) = slave_at_kill {
        let master_end = wire::log_state(&pair.client, &master).await?.max_offset;
        report.gaps.push(SlaveGap {
            acked_missing,
            messages_missing: stored.keys().filter(|id| !slave_ids.contains(id)).count() as u64,
            bytes_missing: u64::try_from(master_end - slave_end).unwrap_or(0),
        });
    }
    let waiting = Instant::now();
    let slave = pair.slave_process()?;
    wait_for("the slave to connect to its master", || async {
        Ok(slave_connected(&slave.log()))
    })
    .await?;
    report.max_reconnect = report.max_reconnect.max(waiting.elapsed());
    compare_caught_up(pair, ledger, &stored, report).await?;
    report.audits += 1;
    Ok(())
}

/// The slave while its master is down: settled (everything it received dispatched), its queues
/// consistent. Returns its CommitLog end, the ids it holds and how many acknowledged messages it
/// lacks (a violation under `SYNC_MASTER`).
async fn examine_slave_alone(
    config: &ReplicatedConfig,
    pair: &Pair,
    ledger: &SharedLedger,
) -> Result<(i64, HashSet<u64>, u64)> {
    let slave = pair.slave_addr();
    wait_for("the slave to dispatch what it received", || async {
        Ok(wire::log_state(&pair.client, &slave).await?.dispatch_behind == 0)
    })
    .await?;
    let end = wire::log_state(&pair.client, &slave).await?.max_offset;
    let held = audit_queues(&pair.client, &slave, ledger)
        .await
        .map_err(|e| label("slave", e))?;
    let missing = acked_missing(&ledger.lock(), &held).map_err(|e| label("slave", e))?;
    if config.mode == ReplicationMode::Sync && !missing.is_empty() {
        return Err(Error::Violation(format!(
            "SYNC_MASTER: the slave lacks {} acknowledged messages when its master dies, e.g. {:?}",
            missing.len(),
            missing.first()
        )));
    }
    Ok((end, held.into_keys().collect(), missing.len() as u64))
}

fn label(who: &str, e: Error) -> Error {
    match e {
        Error::Violation(v) => Error::Violation(format!("{who}: {v}")),
        other => other,
    }
}

/// Waits until the slave holds everything the master does, then compares the two CommitLogs
/// byte for byte and the slave's queues with `master_stored`.
async fn compare_caught_up(
    pair: &Pair,
    ledger: &SharedLedger,
    master_stored: &HashMap<u64, Stored>,
    report: &mut ReplicatedReport,
) -> Result<()> {
    let (master, slave) = (pair.master_addr(), pair.slave_addr());
    wait_for("the slave to catch up with the master", || async {
        let m = wire::log_state(&pair.client, &master).await?;
        let s = wire::log_state(&pair.client, &slave).await?;
        if s.max_offset > m.max_offset {
            return Err(Error::Violation(format!(
                "the slave's CommitLog ends at {}, beyond the master's {}",
                s.max_offset, m.max_offset
            )));
        }
        Ok(s.max_offset == m.max_offset && s.dispatch_behind == 0 && m.dispatch_behind == 0)
    })
    .await?;
    let m = wire::log_state(&pair.client, &master).await?;
    let s = wire::log_state(&pair.client, &slave).await?;
    let from = m.min_offset.max(s.min_offset);
    report.bytes_compared = compare_commit_logs(
        &pair.master_spec.commit_log_dir(),
        &pair.slave_spec.commit_log_dir(),
        from,
        m.max_offset,
    )?;
    report.log_comparisons += 1;
    let held = audit_queues(&pair.client, &slave, ledger)
        .await
        .map_err(|e| label("slave", e))?;
    if &held != master_stored {
        let extra = held
            .keys()
            .filter(|id| !master_stored.contains_key(id))
            .count();
        let missing = master_stored
            .keys()
            .filter(|id| !held.contains_key(id))
            .count();
        return Err(Error::Violation(format!(
            "caught-up slave's queues differ from the master's: {missing} messages missing, \
             {extra} not on the master, or messages at other offsets"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slave_link_state_is_the_last_replication_event() {
        assert!(!slave_connected(""));
        let log = "x replicating from the master master=1\ny other line\n";
        assert!(slave_connected(log));
        let log = format!("{log}z replication connection lost; redialing\n");
        assert!(!slave_connected(&log));
        let log = format!("{log}a replicating from the master\n");
        assert!(slave_connected(&log));
        let log = format!("{log}b replication from the master stopped; redialing\n");
        assert!(!slave_connected(&log));
    }

    #[test]
    fn gaps_sum_and_max() {
        let report = ReplicatedReport {
            gaps: vec![
                SlaveGap {
                    acked_missing: 2,
                    messages_missing: 3,
                    bytes_missing: 400,
                },
                SlaveGap::default(),
                SlaveGap {
                    acked_missing: 5,
                    messages_missing: 5,
                    bytes_missing: 100,
                },
            ],
            ..Default::default()
        };
        assert_eq!(report.gap_sum(|g| g.acked_missing), (7, 5));
        assert_eq!(report.gap_sum(|g| g.bytes_missing), (500, 400));
        assert!(report.to_string().contains("behind 2 of 3 times"));
    }
}
