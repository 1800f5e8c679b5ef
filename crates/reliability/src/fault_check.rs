//! The checker of the network-namespace fault suite: reads the producers' ledgers and the
//! consumer's deliveries ([`crate::fault_load`]) and audits the broker groups against them.
//!
//! For each group it reads every queue of the topic whole, from the master, or from the slave
//! when the master is down (`--master-down`), and counts:
//!
//! - **lost**: acknowledged (SEND_OK) messages not stored at the queue offset their answer named;
//!   a violation unless `--allow-loss`;
//! - **misplaced**: acknowledged messages stored elsewhere than their answer named (violation);
//! - **stored twice**: messages at more than one queue position, and how many of those have a
//!   copy at their acknowledged position (the SDK retried a send whose first attempt was stored
//!   after its timeout: at-least-once, allowed);
//! - **out of order**: a message of a producer task stored in a queue after a later message of
//!   the same task, where the earlier one was answered (violation). A task sends one message at
//!   a time, so an answered message was stored before the next was sent; a send that timed out
//!   may still be stored after later ones (the client reconnects, the broker reads the old
//!   connection later) and promises no order;
//! - **unknown**: stored or delivered messages no producer sent, or damaged (violation);
//!   queues must hold consecutive offsets.
//!
//! For each group whose master is up it then waits until the slave has caught up, compares the
//! two CommitLogs byte for byte, and checks that the slave's queues hold exactly the master's
//! messages at the same offsets (replication never stores a message twice). With `--drain`, it
//! waits until the consumer has delivered every acknowledged message that is not lost, and
//! reports when the last one first arrived (relative to `--since-ms`, e.g. a master's kill).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use comet_remoting::{ClientConfig, RemotingClient};

use crate::body::intact_id;
use crate::error::{Error, Result};
use crate::fault_load::{
    DeliveryRecord, LedgerFile, SendRecord, read_deliveries, split_id, unix_millis,
};
use crate::logs::compare_commit_logs;
use crate::wire;

/// The group the checker pulls with (never commits).
const AUDIT_GROUP: &str = "fault_audit_group";
/// How often a condition is looked at.
const POLL: Duration = Duration::from_millis(200);
/// Examples quoted per kind of violation.
const EXAMPLES: usize = 3;

/// A broker group: `NAME,MASTER_ADDR,SLAVE_ADDR,MASTER_STORE,SLAVE_STORE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSpec {
    pub name: String,
    pub master: String,
    pub slave: String,
    pub master_store: PathBuf,
    pub slave_store: PathBuf,
}

impl std::str::FromStr for GroupSpec {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let f: Vec<&str> = s.split(',').collect();
        let [name, master, slave, master_store, slave_store] = f.as_slice() else {
            return Err(format!(
                "expected NAME,MASTER_ADDR,SLAVE_ADDR,MASTER_STORE,SLAVE_STORE, got {s:?}"
            ));
        };
        Ok(GroupSpec {
            name: (*name).to_owned(),
            master: (*master).to_owned(),
            slave: (*slave).to_owned(),
            master_store: PathBuf::from(master_store),
            slave_store: PathBuf::from(slave_store),
        })
    }
}

/// What to check.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    pub label: String,
    pub topic: String,
    pub queues: i32,
    pub ledger_dir: PathBuf,
    /// The deliveries files of the group's consumers (their union is what the group consumed).
    pub deliveries: Vec<PathBuf>,
    pub groups: Vec<GroupSpec>,
    /// Groups read from their slave only (the master is down or empty); no log comparison.
    pub master_down: Vec<String>,
    /// Compare each slave with its master (needs the load stopped: a master still written to
    /// never stands still long enough).
    pub compare: bool,
    /// Lost acknowledged messages are counted, not a violation, and added to `known_lost`.
    pub allow_loss: bool,
    /// Ids of acknowledged messages an earlier check accepted as lost (one per line): not
    /// expected anywhere any more.
    pub known_lost: Option<PathBuf>,
    /// Wait this long for the consumer to deliver every acknowledged message (`None`: don't).
    pub drain: Option<Duration>,
    /// Wait this long for each slave to catch up before comparing logs.
    pub settle: Duration,
    /// Drain times are reported relative to this moment (Unix ms).
    pub since_ms: Option<i64>,
}

/// A message's place: group, queue, offset.
type Place = (String, i32, i64);

/// The figures of one check.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    pub label: String,
    pub acked: u64,
    /// Acknowledged messages an earlier check accepted as lost.
    pub known_lost: u64,
    /// Answered with another status than SEND_OK (stored, not acknowledged).
    pub answered_not_ok: u64,
    pub failed_sends: u64,
    pub stored: u64,
    pub lost: u64,
    pub misplaced: u64,
    pub stored_twice: u64,
    /// Of `stored_twice`, those with a copy at their acknowledged position.
    pub stored_twice_retried: u64,
    pub out_of_order: u64,
    pub unknown_stored: u64,
    /// Per compared group: CommitLog bytes found equal.
    pub logs_equal: Vec<(String, u64)>,
    pub delivered: u64,
    pub redelivered: u64,
    pub unknown_delivered: u64,
    pub undelivered: u64,
    /// When the last acknowledged message was first delivered, after `since_ms`.
    pub drained_after_ms: Option<i64>,
    pub violations: Vec<String>,
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let logs: Vec<String> = self
            .logs_equal
            .iter()
            .map(|(g, b)| format!("{g}={b}"))
            .collect();
        let drained = self.drained_after_ms.map_or_else(
            || "-".to_owned(),
            |ms| format!("{:.1}s", ms as f64 / 1000.0),
        );
        write!(
            f,
            "check {}: acked={} known-lost={} not-ok={} failed={} stored={} lost={} misplaced={} \
             stored-twice={} (retried {}) out-of-order={} unknown={} logs-equal=[{}] \
             delivered={} redelivered={} undelivered={} unknown-delivered={} drained-after={} \
             violations={}",
            self.label,
            self.acked,
            self.known_lost,
            self.answered_not_ok,
            self.failed_sends,
            self.stored,
            self.lost,
            self.misplaced,
            self.stored_twice,
            self.stored_twice_retried,
            self.out_of_order,
            self.unknown_stored,
            logs.join(" "),
            self.delivered,
            self.redelivered,
            self.undelivered,
            self.unknown_delivered,
            drained,
            self.violations.len()
        )
    }
}

/// The acknowledged sends of a ledger, by id.
fn acked_places(ledger: &LedgerFile, report: &mut CheckReport) -> HashMap<u64, Place> {
    let mut acked = HashMap::new();
    for record in &ledger.records {
        match record {
            SendRecord::Answered {
                id,
                status,
                broker,
                queue_id,
                queue_offset,
                ..
            } if status == "SEND_OK" => {
                acked.insert(*id, (broker.clone(), *queue_id, *queue_offset));
            }
            SendRecord::Answered { .. } => report.answered_not_ok += 1,
            SendRecord::Failed { .. } => report.failed_sends += 1,
        }
    }
    report.acked = acked.len() as u64;
    acked
}

/// Runs the check; the report lists the violations (empty: every promise held).
pub async fn check(options: &CheckOptions) -> Result<CheckReport> {
    let client = RemotingClient::new(ClientConfig::default());
    let outcome = check_with(&client, options).await;
    client.shutdown().await;
    outcome
}

async fn check_with(client: &RemotingClient, options: &CheckOptions) -> Result<CheckReport> {
    let mut report = CheckReport {
        label: options.label.clone(),
        ..Default::default()
    };
    let ledger = LedgerFile::read_dir(&options.ledger_dir)?;
    let mut acked = acked_places(&ledger, &mut report);
    let known_lost = read_known_lost(options.known_lost.as_deref())?;
    acked.retain(|id, _| !known_lost.contains(id));
    report.known_lost = known_lost.len() as u64;
    let mut stored: HashMap<u64, Vec<Place>> = HashMap::new();
    for group in &options.groups {
        let down = options.master_down.contains(&group.name);
        let addr = if down { &group.slave } else { &group.master };
        wait_dispatched(client, addr, options.settle).await?;
        let contents = read_group(client, options, &group.name, addr, &ledger, &mut report).await?;
        for (id, place) in contents {
            stored.entry(id).or_default().push(place);
        }
    }
    report.stored = stored.values().map(|v| v.len() as u64).sum();
    let newly_lost = audit_places(&acked, &stored, options.allow_loss, &mut report);
    if let (true, Some(path)) = (options.allow_loss, &options.known_lost) {
        append_known_lost(path, &newly_lost)?;
    }
    let answered: HashSet<Place> = ledger
        .records
        .iter()
        .filter_map(|r| match r {
            SendRecord::Answered {
                broker,
                queue_id,
                queue_offset,
                ..
            } => Some((broker.clone(), *queue_id, *queue_offset)),
            SendRecord::Failed { .. } => None,
        })
        .collect();
    audit_order(&stored, &answered, &mut report);
    for group in options.groups.iter().filter(|_| options.compare) {
        if !options.master_down.contains(&group.name) {
            compare_group(client, options, group, &ledger, &mut report).await?;
        }
    }
    if let (false, Some(deadline)) = (options.deliveries.is_empty(), options.drain) {
        let lost: HashSet<u64> = acked
            .iter()
            .filter(|(id, place)| !stored.get(id).is_some_and(|p| p.contains(place)))
            .map(|(id, _)| *id)
            .collect();
        audit_deliveries(&acked, &lost, &ledger, deadline, options, &mut report).await?;
    }
    Ok(report)
}

/// Waits until the broker at `addr` has dispatched everything it holds.
async fn wait_dispatched(client: &RemotingClient, addr: &str, settle: Duration) -> Result<()> {
    let started = Instant::now();
    loop {
        match wire::log_state(client, addr).await {
            Ok(state) if state.dispatch_behind == 0 => return Ok(()),
            Ok(_) => {}
            Err(e) if started.elapsed() > settle => return Err(e),
            Err(_) => {}
        }
        if started.elapsed() > settle {
            return Err(Error::Violation(format!(
                "{addr} did not finish dispatching within {settle:?}"
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Every queue of the topic on the broker at `addr`: consecutive offsets, messages a producer
/// sent, intact. Returns each message's place (a message stored twice appears twice).
async fn read_group(
    client: &RemotingClient,
    options: &CheckOptions,
    group: &str,
    addr: &str,
    ledger: &LedgerFile,
    report: &mut CheckReport,
) -> Result<Vec<(u64, Place)>> {
    let mut out = Vec::new();
    for q in 0..options.queues {
        let messages = wire::pull_all(client, addr, AUDIT_GROUP, &options.topic, q).await?;
        let mut expected = messages.first().map(|m| m.queue_offset);
        for m in &messages {
            if m.queue_id != q || Some(m.queue_offset) != expected {
                report.violations.push(format!(
                    "{group} ({addr}) queue {q}: record {}@{} where offset {expected:?} was \
                     expected",
                    m.queue_id, m.queue_offset
                ));
            }
            expected = Some(m.queue_offset + 1);
            match intact_id(&m.body).filter(|id| ledger.declares(*id)) {
                Some(id) => out.push((id, (group.to_owned(), q, m.queue_offset))),
                None => {
                    report.unknown_stored += 1;
                    if report.unknown_stored <= EXAMPLES as u64 {
                        report.violations.push(format!(
                            "{group} ({addr}) queue {q} offset {} holds a message no producer \
                             sent, or a damaged one",
                            m.queue_offset
                        ));
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The ids in a known-lost file (none when there is no file yet).
fn read_known_lost(path: Option<&std::path::Path>) -> Result<HashSet<u64>> {
    let Some(path) = path else {
        return Ok(HashSet::new());
    };
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(HashSet::new()),
        Err(e) => Err(Error::io(path, e)),
    }
}

fn append_known_lost(path: &std::path::Path, ids: &[u64]) -> Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    let text: String = ids.iter().map(|id| format!("{id}\n")).collect();
    file.write_all(text.as_bytes())
        .map_err(|e| Error::io(path, e))
}

/// Lost, misplaced and twice-stored messages; returns the lost ids.
fn audit_places(
    acked: &HashMap<u64, Place>,
    stored: &HashMap<u64, Vec<Place>>,
    allow_loss: bool,
    report: &mut CheckReport,
) -> Vec<u64> {
    let mut lost = Vec::new();
    for (id, place) in acked {
        match stored.get(id) {
            Some(places) if places.contains(place) => {}
            Some(places) => {
                report.misplaced += 1;
                if report.misplaced <= EXAMPLES as u64 {
                    report.violations.push(format!(
                        "message {id} acknowledged at {place:?} but stored at {places:?}"
                    ));
                }
            }
            None => lost.push(*id),
        }
    }
    report.lost = lost.len() as u64;
    lost.sort_unstable();
    if !lost.is_empty() && !allow_loss {
        report.violations.push(format!(
            "{} acknowledged messages lost, e.g. {:?}",
            lost.len(),
            &lost[..lost.len().min(EXAMPLES)]
        ));
    }
    for (id, places) in stored {
        if places.len() > 1 {
            report.stored_twice += 1;
            if acked.get(id).is_some_and(|p| places.contains(p)) {
                report.stored_twice_retried += 1;
            }
        }
    }
    lost
}

/// A producer task's messages in one queue: ((round, task), group, queue).
type TaskQueue<'a> = ((u32, u32), &'a str, i32);

/// An answered message of a producer task must come before every later message of the task
/// in its queue (`answered`: the places answers named).
fn audit_order(
    stored: &HashMap<u64, Vec<Place>>,
    answered: &HashSet<Place>,
    report: &mut CheckReport,
) {
    let mut queues: HashMap<TaskQueue<'_>, BTreeMap<i64, (u64, bool)>> = HashMap::new();
    for (id, places) in stored {
        let (task, seq) = split_id(*id);
        for place in places {
            let (group, q, offset) = place;
            queues
                .entry((task, group.as_str(), *q))
                .or_default()
                .insert(*offset, (seq, answered.contains(place)));
        }
    }
    for ((task, group, q), by_offset) in &queues {
        // The highest sequence stored so far in the queue, and where.
        let mut highest: Option<(u64, i64)> = None;
        for (offset, (seq, was_answered)) in by_offset {
            if let Some((top, top_offset)) = highest
                && *was_answered
                && *seq < top
            {
                report.out_of_order += 1;
                if report.out_of_order <= EXAMPLES as u64 {
                    report.violations.push(format!(
                        "{group} queue {q}: task {task:?} message {seq} (answered) at offset \
                         {offset} after its message {top} at offset {top_offset}"
                    ));
                }
            }
            if highest.is_none_or(|(top, _)| *seq > top) {
                highest = Some((*seq, *offset));
            }
        }
    }
}

/// Waits for the slave of `group` to catch up, then compares the CommitLogs byte for byte and
/// the slave's queues with the master's.
async fn compare_group(
    client: &RemotingClient,
    options: &CheckOptions,
    group: &GroupSpec,
    ledger: &LedgerFile,
    report: &mut CheckReport,
) -> Result<()> {
    let started = Instant::now();
    let (m, s) = loop {
        let m = wire::log_state(client, &group.master).await;
        let s = wire::log_state(client, &group.slave).await;
        if let (Ok(m), Ok(s)) = (&m, &s)
            && s.max_offset == m.max_offset
            && m.dispatch_behind == 0
            && s.dispatch_behind == 0
        {
            break (*m, *s);
        }
        if started.elapsed() > options.settle {
            report.violations.push(format!(
                "{}: the slave did not catch up within {:?} (master {m:?}, slave {s:?})",
                group.name, options.settle
            ));
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    };
    let from = m.min_offset.max(s.min_offset);
    match compare_commit_logs(
        &group.master_store.join("commitlog"),
        &group.slave_store.join("commitlog"),
        from,
        m.max_offset,
    ) {
        Ok(bytes) => report.logs_equal.push((group.name.clone(), bytes)),
        Err(e) => report.violations.push(format!("{}: {e}", group.name)),
    }
    let mut scratch = CheckReport::default();
    let of_master = read_group(
        client,
        options,
        &group.name,
        &group.master,
        ledger,
        &mut scratch,
    );
    let of_master = of_master.await?;
    let of_slave = read_group(
        client,
        options,
        &group.name,
        &group.slave,
        ledger,
        &mut scratch,
    );
    let of_slave = of_slave.await?;
    let first_slave: HashMap<i32, i64> = of_slave.iter().fold(HashMap::new(), |mut acc, (_, p)| {
        let e = acc.entry(p.1).or_insert(p.2);
        *e = (*e).min(p.2);
        acc
    });
    // The slave may have started empty later than the master (at its newest segment): compare
    // what both hold.
    let held_by_both = |(_, (_, q, o)): &&(u64, Place)| first_slave.get(q).is_some_and(|f| o >= f);
    let master_set: HashSet<&(u64, Place)> = of_master.iter().filter(held_by_both).collect();
    let slave_set: HashSet<&(u64, Place)> = of_slave.iter().collect();
    if master_set != slave_set || of_slave.len() != slave_set.len() {
        report.violations.push(format!(
            "{}: the caught-up slave's queues differ from the master's ({} vs {} messages)",
            group.name,
            of_slave.len(),
            master_set.len()
        ));
    }
    Ok(())
}

/// Waits up to `deadline` until every acknowledged message not in `lost` was delivered; counts
/// redeliveries and unknown deliveries.
async fn audit_deliveries(
    acked: &HashMap<u64, Place>,
    lost: &HashSet<u64>,
    ledger: &LedgerFile,
    deadline: Duration,
    options: &CheckOptions,
    report: &mut CheckReport,
) -> Result<()> {
    let started = Instant::now();
    let deliveries: Vec<DeliveryRecord> = loop {
        let mut deliveries = Vec::new();
        for path in &options.deliveries {
            deliveries.extend(read_deliveries(path)?);
        }
        let seen: HashSet<u64> = deliveries.iter().filter_map(|d| d.id).collect();
        let missing = acked
            .keys()
            .filter(|id| !lost.contains(id) && !seen.contains(id))
            .count();
        if missing == 0 || started.elapsed() > deadline {
            report.undelivered = missing as u64;
            break deliveries;
        }
        tokio::time::sleep(POLL).await;
    };
    let mut first: HashMap<u64, i64> = HashMap::new();
    for d in &deliveries {
        match d.id.filter(|id| ledger.declares(*id)) {
            Some(id) => {
                report.delivered += 1;
                if first.insert(id, d.at_ms).is_some() {
                    report.redelivered += 1;
                }
            }
            None => report.unknown_delivered += 1,
        }
    }
    if report.undelivered > 0 {
        report.violations.push(format!(
            "{} acknowledged messages not delivered within {deadline:?}",
            report.undelivered
        ));
    }
    if report.unknown_delivered > 0 {
        report.violations.push(format!(
            "{} deliveries of messages no producer sent",
            report.unknown_delivered
        ));
    }
    let last_first = acked
        .keys()
        .filter_map(|id| first.get(id))
        .max()
        .copied()
        .unwrap_or_else(unix_millis);
    report.drained_after_ms = options.since_ms.map(|since| (last_first - since).max(0));
    Ok(())
}

/// Which answers [`wait_acks`] counts.
#[derive(Debug, Clone)]
pub struct AckFilter {
    pub round: Option<u32>,
    pub broker: Option<String>,
    /// Only answers at or after this Unix time (ms).
    pub after_ms: Option<i64>,
    pub status: String,
}

impl AckFilter {
    fn round_and_time(&self, id: u64, at_ms: i64) -> bool {
        self.round.is_none_or(|r| split_id(id).0.0 == r) && self.after_ms.is_none_or(|t| at_ms >= t)
    }

    fn counts(&self, record: &SendRecord) -> bool {
        match record {
            SendRecord::Answered {
                id,
                status,
                broker,
                at_ms,
                ..
            } => {
                *status == self.status
                    && self.broker.as_ref().is_none_or(|b| b == broker)
                    && self.round_and_time(*id, *at_ms)
            }
            SendRecord::Failed { .. } => false,
        }
    }
}

/// Waits until the ledgers of `ledger_dir` hold `count` answers `filter` counts. Returns how
/// many there were and how many sends failed in the same round and window.
pub async fn wait_acks(
    ledger_dir: &std::path::Path,
    filter: &AckFilter,
    count: u64,
    deadline: Duration,
) -> Result<(u64, u64)> {
    let started = Instant::now();
    loop {
        let ledger = LedgerFile::read_dir(ledger_dir)?;
        let acks = ledger.records.iter().filter(|r| filter.counts(r)).count() as u64;
        let failures = ledger
            .records
            .iter()
            .filter(|r| matches!(r, SendRecord::Failed { id, at_ms } if filter.round_and_time(*id, *at_ms)))
            .count() as u64;
        if acks >= count {
            return Ok((acks, failures));
        }
        if started.elapsed() > deadline {
            return Err(Error::Violation(format!(
                "only {acks} of {count} {} answers within {deadline:?} ({failures} sends failed)",
                filter.status
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault_load::message_id;

    fn place(g: &str, q: i32, o: i64) -> Place {
        (g.to_owned(), q, o)
    }

    #[test]
    fn group_specs_parse() {
        let spec: GroupSpec = "broker-a,10.0.0.1:10911,10.0.0.2:10911,/d/ma/store,/d/sa/store"
            .parse()
            .expect("parses");
        assert_eq!(spec.name, "broker-a");
        assert_eq!(spec.slave_store, PathBuf::from("/d/sa/store"));
        assert!("broker-a,x".parse::<GroupSpec>().is_err());
    }

    #[test]
    fn lost_misplaced_and_retried_duplicates_are_told_apart() {
        let (a, b, c, d) = (
            message_id(1, 0, 0),
            message_id(1, 0, 1),
            message_id(1, 0, 2),
            message_id(1, 0, 3),
        );
        let acked: HashMap<u64, Place> = [
            (a, place("g", 0, 0)),
            (b, place("g", 1, 0)),
            (c, place("g", 2, 0)),
            (d, place("g", 3, 0)),
        ]
        .into_iter()
        .collect();
        let stored: HashMap<u64, Vec<Place>> = [
            (a, vec![place("g", 0, 0)]),
            (b, vec![place("g", 1, 5)]),
            (d, vec![place("g", 3, 0), place("h", 0, 9)]),
        ]
        .into_iter()
        .collect();
        let mut report = CheckReport::default();
        audit_places(&acked, &stored, false, &mut report);
        assert_eq!((report.lost, report.misplaced), (1, 1));
        assert_eq!((report.stored_twice, report.stored_twice_retried), (1, 1));
        assert_eq!(report.violations.len(), 2);
        let mut tolerant = CheckReport::default();
        audit_places(&acked, &stored, true, &mut tolerant);
        assert_eq!(tolerant.violations.len(), 1, "only the misplaced message");
    }

    #[test]
    fn an_answered_message_after_a_later_one_of_its_task_is_out_of_order() {
        let stored: HashMap<u64, Vec<Place>> = [
            (message_id(1, 0, 0), vec![place("g", 0, 0)]),
            (message_id(1, 0, 1), vec![place("g", 0, 2)]),
            (message_id(1, 0, 2), vec![place("g", 0, 1)]),
            (message_id(1, 1, 0), vec![place("g", 0, 3)]),
            (message_id(1, 0, 3), vec![place("g", 1, 0)]),
            // A send that timed out, stored late: no order promised.
            (message_id(1, 0, 4), vec![place("g", 1, 2)]),
            (message_id(1, 0, 5), vec![place("g", 1, 1)]),
        ]
        .into_iter()
        .collect();
        let answered: HashSet<Place> = stored
            .iter()
            .filter(|(id, _)| **id != message_id(1, 0, 4))
            .flat_map(|(_, p)| p.clone())
            .collect();
        let mut report = CheckReport::default();
        audit_order(&stored, &answered, &mut report);
        assert_eq!(report.out_of_order, 1, "{:?}", report.violations);
        assert!(report.violations[0].contains("message 1 (answered) at offset 2"));
    }
}
