//! Load for the network-namespace fault suite (`reliability/netns/run.sh`): producers and a push
//! consumer built on the comet-client SDK (name-server routing, retries on another broker,
//! consumption from a slave when the master is gone), each a long-running process that writes
//! what happened to a line file, flushed line by line so that even a SIGKILL loses nothing
//! already written. The checker ([`crate::fault_check`]) audits the brokers against these files.
//!
//! Message ids: `round << 40 | task << 32 | sequence`. Each producer process is one round of the
//! suite; its tasks send one message at a time, so a task's sequence numbers are in send order
//! and must be in queue order wherever two of them share a queue. Bodies are
//! [`crate::body::body_for`] of the id.
//!
//! Ledger lines (producer):
//! - `P <round> <tasks>`: the id space this file declares (first line);
//! - `A <id> <status> <broker> <queue> <offset> <unix ms>`: an answered send; `status` is
//!   `SEND_OK` (acknowledged) or the store status the broker reported instead
//!   (`FLUSH_SLAVE_TIMEOUT`, ...: stored, not acknowledged);
//! - `F <id> <unix ms> <error>`: a send that failed after the SDK's retries.
//!
//! Delivery lines (consumer): `D <unix ms> <broker> <queue> <offset> <id or -> <body hash>`.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::rebalance::AllocateMessageQueueAveragelyByCircle;
use comet_client::consumer::{ConsumeConcurrentlyStatus, ConsumeFromWhere, concurrently_fn};
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{Message, SendStatus};
use parking_lot::Mutex;

use crate::body::{body_for, intact_id};
use crate::churn_consumer::body_hash;
use crate::error::{Error, Result};

/// Bits of the sequence number in an id.
pub const TASK_SHIFT: u32 = 32;
/// Bits below the round number in an id.
pub const ROUND_SHIFT: u32 = 40;
/// Most producer tasks per round.
pub const MAX_TASKS: u32 = 1 << (ROUND_SHIFT - TASK_SHIFT);
const PRODUCER_GROUP: &str = "fault_producer";

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The id of message `seq` of `task` in `round`.
pub fn message_id(round: u32, task: u32, seq: u64) -> u64 {
    (u64::from(round) << ROUND_SHIFT) | (u64::from(task) << TASK_SHIFT) | (seq & 0xFFFF_FFFF)
}

/// The (round, task) a message id belongs to, and its sequence number.
pub fn split_id(id: u64) -> ((u32, u32), u64) {
    let round = u32::try_from(id >> ROUND_SHIFT).unwrap_or(u32::MAX);
    let task = u32::try_from((id >> TASK_SHIFT) & u64::from(MAX_TASKS - 1)).unwrap_or(0);
    ((round, task), id & 0xFFFF_FFFF)
}

/// A line file written one flushed line at a time.
struct LineFile(Mutex<File>);

impl LineFile {
    fn create(path: &Path) -> Result<LineFile> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        Ok(LineFile(Mutex::new(file)))
    }

    /// Appends `text` (whole lines); a failed write ends the process, since what it records
    /// would be incomplete from then on.
    fn write(&self, text: &str) {
        let mut file = self.0.lock();
        if let Err(e) = file.write_all(text.as_bytes()).and_then(|()| file.flush()) {
            eprintln!("cannot write the fault-suite file: {e}");
            std::process::exit(2);
        }
    }
}

fn status_name(status: SendStatus) -> &'static str {
    match status {
        SendStatus::SendOk => "SEND_OK",
        SendStatus::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
        SendStatus::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
        SendStatus::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
    }
}

/// How a producer process sends.
#[derive(Debug, Clone)]
pub struct ProduceOptions {
    pub namesrv: String,
    pub topic: String,
    pub ledger: PathBuf,
    pub round: u32,
    pub tasks: u32,
    /// Pause of each task between sends.
    pub pause: Duration,
    /// `pollNameServerInterval` of the client.
    pub route_refresh: Duration,
}

/// Sends until SIGTERM or SIGINT, then lets every task finish its send and exits.
pub async fn produce(options: &ProduceOptions) -> Result<()> {
    if options.tasks == 0 || options.tasks > MAX_TASKS {
        return Err(Error::Violation(format!(
            "--tasks must be within 1..={MAX_TASKS}"
        )));
    }
    let ledger = Arc::new(LineFile::create(&options.ledger)?);
    ledger.write(&format!("P {} {}\n", options.round, options.tasks));
    let mut config = ProducerConfig::new(PRODUCER_GROUP, options.namesrv.clone());
    config.client.instance_name = format!("fault-producer-{}", options.round);
    config.client.poll_name_server_interval = options.route_refresh;
    let producer = DefaultMQProducer::new(config);
    producer.start().await?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for task in 0..options.tasks {
        let (producer, ledger, stop) = (producer.clone(), Arc::clone(&ledger), Arc::clone(&stop));
        let (topic, round, pause) = (options.topic.clone(), options.round, options.pause);
        tasks.push(tokio::spawn(async move {
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let id = message_id(round, task, seq);
                seq += 1;
                let line = match producer.send(Message::new(&topic, body_for(id))).await {
                    Ok(r) => format!(
                        "A {id} {} {} {} {} {}\n",
                        status_name(r.send_status),
                        r.message_queue.broker_name,
                        r.message_queue.queue_id,
                        r.queue_offset,
                        unix_millis()
                    ),
                    Err(e) => format!("F {id} {} {}\n", unix_millis(), one_line(&e.to_string())),
                };
                ledger.write(&line);
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
            }
        }));
    }
    wait_for_stop_signal().await?;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        let _ = task.await;
    }
    producer.shutdown().await;
    Ok(())
}

fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

/// Resolves on SIGTERM or SIGINT.
async fn wait_for_stop_signal() -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(|e| Error::io("SIGTERM", e))?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| Error::io("SIGINT", e))?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

/// How the consumer process consumes.
#[derive(Debug, Clone)]
pub struct ConsumeOptions {
    pub namesrv: String,
    pub topic: String,
    pub group: String,
    pub deliveries: PathBuf,
    /// `pollNameServerInterval` of the client.
    pub route_refresh: Duration,
}

/// Consumes until SIGTERM or SIGINT, then shuts the consumer down gracefully.
pub async fn consume(options: &ConsumeOptions) -> Result<()> {
    let out = Arc::new(LineFile::create(&options.deliveries)?);
    let mut config = PushConsumerConfig::new(options.group.clone());
    config.client.namesrv_addr.clone_from(&options.namesrv);
    config.client.instance_name = "fault-consumer".to_owned();
    config.client.poll_name_server_interval = options.route_refresh;
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    // By circle: with two members (this one and the suite's Java consumer) each holds queues of
    // both groups, so both fall back to a slave when a master dies.
    config.allocate_message_queue_strategy = Arc::new(AllocateMessageQueueAveragelyByCircle);
    let consumer = DefaultMQPushConsumer::new(config);
    consumer.subscribe(&options.topic, "*").await?;
    let sink = Arc::clone(&out);
    consumer.register_message_listener(concurrently_fn(move |msgs, ctx| {
        let broker = &ctx.message_queue.broker_name;
        let mut text = String::new();
        for m in msgs {
            let id = intact_id(&m.body).map_or_else(|| "-".to_owned(), |id| id.to_string());
            text.push_str(&format!(
                "D {} {broker} {} {} {id} {:016x}\n",
                unix_millis(),
                m.queue_id,
                m.queue_offset,
                body_hash(&m.body)
            ));
        }
        sink.write(&text);
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }));
    consumer.start().await?;
    wait_for_stop_signal().await?;
    consumer.shutdown().await;
    Ok(())
}

/// One answered or failed send of a ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendRecord {
    Answered {
        id: u64,
        status: String,
        broker: String,
        queue_id: i32,
        queue_offset: i64,
        at_ms: i64,
    },
    Failed {
        id: u64,
        at_ms: i64,
    },
}

/// A parsed ledger: the id spaces declared and the records.
#[derive(Debug, Default)]
pub struct LedgerFile {
    /// (round, tasks) of every `P` line.
    pub spaces: Vec<(u32, u32)>,
    pub records: Vec<SendRecord>,
}

impl LedgerFile {
    /// Whether `id` belongs to a declared id space.
    pub fn declares(&self, id: u64) -> bool {
        let ((round, task), _) = split_id(id);
        self.spaces.iter().any(|(r, t)| *r == round && task < *t)
    }

    /// Parses one line; other lines (a torn last one) are skipped.
    fn add_line(&mut self, line: &str) {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<i64>().ok());
        let id = f.get(1).and_then(|v| v.parse::<u64>().ok());
        match (f.first().copied(), id) {
            (Some("P"), _) => {
                let round = f.get(1).and_then(|v| v.parse().ok());
                let tasks = f.get(2).and_then(|v| v.parse().ok());
                if let (Some(r), Some(t)) = (round, tasks) {
                    self.spaces.push((r, t));
                }
            }
            (Some("A"), Some(id)) if f.len() == 7 => {
                if let (Some(q), Some(o), Some(at)) = (num(4), num(5), num(6)) {
                    self.records.push(SendRecord::Answered {
                        id,
                        status: f[2].to_owned(),
                        broker: f[3].to_owned(),
                        queue_id: i32::try_from(q).unwrap_or(-1),
                        queue_offset: o,
                        at_ms: at,
                    });
                }
            }
            (Some("F"), Some(id)) => {
                if let Some(at) = num(2) {
                    self.records.push(SendRecord::Failed { id, at_ms: at });
                }
            }
            _ => {}
        }
    }

    /// Reads every `*.ledger` file of `dir`.
    pub fn read_dir(dir: &Path) -> Result<LedgerFile> {
        let mut out = LedgerFile::default();
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| Error::io(dir, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "ledger"))
            .collect();
        paths.sort();
        for path in paths {
            let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
            for line in BufReader::new(file).lines() {
                out.add_line(&line.map_err(|e| Error::io(&path, e))?);
            }
        }
        Ok(out)
    }
}

/// One delivery line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRecord {
    pub at_ms: i64,
    pub broker: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    /// `None`: the body was not one the suite produced (or was damaged).
    pub id: Option<u64>,
}

/// Reads a deliveries file (a missing file is empty: the consumer has delivered nothing yet).
pub fn read_deliveries(path: &Path) -> Result<Vec<DeliveryRecord>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(path, e)),
    };
    let mut out = Vec::new();
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|e| Error::io(path, e))?;
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        if f.len() != 7 || f[0] != "D" {
            continue;
        }
        let (Ok(at_ms), Ok(queue_id), Ok(queue_offset)) =
            (f[1].parse(), f[3].parse(), f[4].parse())
        else {
            continue;
        };
        out.push(DeliveryRecord {
            at_ms,
            broker: f[2].to_owned(),
            queue_id,
            queue_offset,
            id: f[5].parse().ok(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_split_into_round_task_and_sequence() {
        let id = message_id(7, 3, 12345);
        assert_eq!(split_id(id), ((7, 3), 12345));
        assert_eq!(split_id(message_id(0, 0, 0)), ((0, 0), 0));
        assert_eq!(
            split_id(message_id(1 << 20, 255, 0xFFFF_FFFF)).0,
            (1 << 20, 255)
        );
    }

    #[test]
    fn ledger_lines_parse_and_torn_ones_are_skipped() {
        let mut ledger = LedgerFile::default();
        for line in [
            "P 2 4",
            "A 8796093022208 SEND_OK broker-a 1 17 1700000000000",
            "A 8796093022209 FLUSH_SLAVE_TIMEOUT broker-b 0 3 1700000000001",
            "F 8796093022210 1700000000002 send failed: timeout",
            "A 8796093022211 SEND_OK broker-a 1",
        ] {
            ledger.add_line(line);
        }
        assert_eq!(ledger.spaces, vec![(2, 4)]);
        assert_eq!(ledger.records.len(), 3);
        assert!(ledger.declares(message_id(2, 3, 99)));
        assert!(!ledger.declares(message_id(2, 4, 0)));
        assert!(!ledger.declares(message_id(3, 0, 0)));
        assert_eq!(
            ledger.records[0],
            SendRecord::Answered {
                id: 8796093022208,
                status: "SEND_OK".into(),
                broker: "broker-a".into(),
                queue_id: 1,
                queue_offset: 17,
                at_ms: 1700000000000,
            }
        );
    }
}
