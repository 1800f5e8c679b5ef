//! Torn and corrupt logs, whole broker: store messages, stop the broker, damage the tail of the
//! CommitLog or of a ConsumeQueue file the way a crash or bit rot would, restart, and check that
//! the broker starts, serves every intact message (and nothing damaged), keeps taking new
//! messages, and says in its log what it dropped.

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use comet_reliability::body::{body_for, intact_id};
use comet_reliability::serve::{FlushMode, Serve, ServeOptions};
use comet_reliability::wire::{self, RPC_TIMEOUT, SendOutcome};
use comet_remoting::{ClientConfig, RemotingClient};
use comet_testkit::process::comet_bin;

const TOPIC: &str = "ReliabilityTornTopic";
const QUEUES: i32 = 2;
const MESSAGES: u64 = 200;
/// Bytes of one ConsumeQueue unit (commit log offset i64, size i32, tags code i64).
const CQ_UNIT: u64 = 20;
/// A clean stop must finish within this.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for acknowledged messages to be dispatched to their ConsumeQueues.
const DISPATCH_DEADLINE: Duration = Duration::from_secs(60);
/// Which byte of a body the bit flip hits (inside the id, so the damage cannot go unnoticed by
/// the test itself either).
const BODY_FLIP_INDEX: u64 = 12;

/// A message as stored: its id and where its record is.
#[derive(Debug, Clone, Copy)]
struct Placed {
    id: u64,
    queue_id: i32,
    commit_log_offset: u64,
    size: u64,
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    /// The segment file cut short in the middle of the last record.
    TruncateCommitLogFile,
    /// The second half of the last record never reached the disk (zeros).
    ZeroCommitLogTail,
    /// One flipped bit in the body of the last record (caught by the body CRC).
    FlipCommitLogBody,
    /// The ConsumeQueue file of queue 0 cut short in the middle of its last unit.
    TruncateConsumeQueueFile,
    /// The last unit of queue 0 points a few bytes off its record.
    FlipConsumeQueueUnit,
}

impl Damage {
    fn hits_commit_log(self) -> bool {
        matches!(
            self,
            Damage::TruncateCommitLogFile | Damage::ZeroCommitLogTail | Damage::FlipCommitLogBody
        )
    }
}

fn options(dir: &Path) -> ServeOptions {
    ServeOptions::new(comet_bin(), dir.to_path_buf(), FlushMode::Sync)
}

fn segment_path(store: &Path, dir: &str, file_from: u64) -> PathBuf {
    store.join(dir).join(format!("{file_from:020}"))
}

/// File position of `placed`'s body: the record holds it somewhere after its fixed fields
/// (BODYLENGTH, BODY, TOPICLENGTH, TOPIC, PROPERTIESLENGTH, PROPERTIES come last in a CommitLog
/// record), so look for the exact bytes inside the record.
fn body_position(path: &Path, placed: &Placed) -> u64 {
    let log = std::fs::read(path).expect("read commit log");
    let start = usize::try_from(placed.commit_log_offset).expect("fits");
    let end = start + usize::try_from(placed.size).expect("fits");
    let record = log.get(start..end).expect("record inside the segment");
    let body = body_for(placed.id);
    let within = record
        .windows(body.len())
        .position(|w| w == body.as_ref())
        .expect("the body is inside its record");
    placed.commit_log_offset + within as u64
}

fn flip(path: &Path, at: u64, mask: u8) {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open for damage");
    let mut byte = [0u8; 1];
    file.seek(SeekFrom::Start(at)).expect("seek");
    file.read_exact(&mut byte).expect("read byte");
    byte[0] ^= mask;
    file.seek(SeekFrom::Start(at)).expect("seek");
    file.write_all(&byte).expect("write byte");
    file.sync_all().expect("sync");
}

fn zero_from(path: &Path, at: u64) {
    let mut file = OpenOptions::new().write(true).open(path).expect("open");
    let len = file.metadata().expect("metadata").len();
    file.seek(SeekFrom::Start(at)).expect("seek");
    let zeros = vec![0u8; usize::try_from(len - at).expect("fits")];
    file.write_all(&zeros).expect("zero");
    file.sync_all().expect("sync");
}

fn truncate(path: &Path, len: u64) {
    let file = OpenOptions::new().write(true).open(path).expect("open");
    file.set_len(len).expect("truncate");
    file.sync_all().expect("sync");
}

/// Every message of the topic, checked for integrity and consecutive queue offsets.
async fn read_back(client: &RemotingClient, addr: &str) -> Vec<Placed> {
    let mut out = Vec::new();
    for q in 0..QUEUES {
        let messages = wire::pull_all(client, addr, "torn_audit", TOPIC, q)
            .await
            .expect("pull");
        for (expected, m) in (0_i64..).zip(&messages) {
            assert_eq!(
                m.queue_offset, expected,
                "queue {q} offsets are consecutive"
            );
            assert_eq!(m.queue_id, q);
            let id = intact_id(&m.body).expect("only intact messages are served");
            out.push(Placed {
                id,
                queue_id: q,
                commit_log_offset: u64::try_from(m.commit_log_offset).expect("offset"),
                size: u64::try_from(m.store_size).expect("size"),
            });
        }
    }
    out
}

/// How the broker stopped before the damage: the recovery path the restart takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// SIGTERM: clean shutdown, normal (fast) recovery.
    Clean,
    /// SIGKILL: the abort file survives, abnormal recovery.
    Kill,
}

async fn damage_and_restart(damage: Damage, stop: Stop) {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = options(dir.path());
    let store = options.store_dir();

    let mut serve = Serve::start(&options).expect("start");
    let client = RemotingClient::new(ClientConfig::default());
    for id in 0..MESSAGES {
        let queue_id = (id % QUEUES as u64) as i32;
        let request = wire::send_request(TOPIC, queue_id, QUEUES, body_for(id));
        let outcome = wire::send(&client, &serve.broker, request, RPC_TIMEOUT).await;
        assert!(
            matches!(outcome, SendOutcome::Acked(_)),
            "send {id}: {outcome:?}"
        );
    }
    // An acknowledged send is in the CommitLog; its ConsumeQueue unit follows by asynchronous
    // dispatch, so read back until every message is reachable (or the deadline passes).
    let deadline = tokio::time::Instant::now() + DISPATCH_DEADLINE;
    let mut placed = read_back(&client, &serve.broker).await;
    while (placed.len() as u64) < MESSAGES && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        placed = read_back(&client, &serve.broker).await;
    }
    assert_eq!(placed.len() as u64, MESSAGES);
    client.shutdown().await;
    match stop {
        Stop::Clean => {
            serve.signal_terminate().expect("SIGTERM");
            let exit = serve.wait_exit(STOP_TIMEOUT).expect("clean stop");
            assert!(exit.success());
        }
        Stop::Kill => serve.kill(),
    }

    let last = *placed
        .iter()
        .max_by_key(|p| p.commit_log_offset)
        .expect("messages stored");
    let last_q0 = *placed
        .iter()
        .filter(|p| p.queue_id == 0)
        .max_by_key(|p| p.commit_log_offset)
        .expect("queue 0 has messages");
    let q0_units = placed.iter().filter(|p| p.queue_id == 0).count() as u64;
    let commit_log = segment_path(&store, "commitlog", 0);
    let cq0 = segment_path(&store, &format!("consumequeue/{TOPIC}/0"), 0);
    match damage {
        Damage::TruncateCommitLogFile => {
            truncate(&commit_log, last.commit_log_offset + last.size / 2)
        }
        Damage::ZeroCommitLogTail => zero_from(&commit_log, last.commit_log_offset + last.size / 2),
        Damage::FlipCommitLogBody => {
            let at = body_position(&commit_log, &last) + BODY_FLIP_INDEX;
            flip(&commit_log, at, 0x10)
        }
        Damage::TruncateConsumeQueueFile => truncate(&cq0, q0_units * CQ_UNIT - CQ_UNIT / 2),
        // Byte 7 is the lowest byte of the big-endian commit log offset.
        Damage::FlipConsumeQueueUnit => flip(&cq0, (q0_units - 1) * CQ_UNIT + 7, 0x04),
    }

    let serve =
        Serve::start(&options).unwrap_or_else(|e| panic!("{damage:?}/{stop:?}: restart: {e}"));
    let client = RemotingClient::new(ClientConfig::default());
    let served: BTreeSet<u64> = read_back(&client, &serve.broker)
        .await
        .iter()
        .map(|p| p.id)
        .collect();
    let mut expected: BTreeSet<u64> = (0..MESSAGES).collect();
    if damage.hits_commit_log() {
        expected.remove(&last.id);
    }
    let missing: Vec<u64> = expected.difference(&served).copied().collect();
    let extra: Vec<u64> = served.difference(&expected).copied().collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{damage:?}/{stop:?}: every intact message and nothing else; missing {missing:?}, unexpected \
         {extra:?} (last record: message {}, last of queue 0: message {}); broker log:\n{}",
        last.id,
        last_q0.id,
        serve.log()
    );

    // The broker keeps working on the repaired store: a new message lands right after the
    // survivors of its queue and reads back.
    let next = MESSAGES;
    let queue_id = (next % QUEUES as u64) as i32;
    let survivors = served
        .iter()
        .filter(|id| (*id % QUEUES as u64) as i32 == queue_id)
        .count() as i64;
    let request = wire::send_request(TOPIC, queue_id, QUEUES, body_for(next));
    match wire::send(&client, &serve.broker, request, RPC_TIMEOUT).await {
        SendOutcome::Acked(stored) => assert_eq!(stored.queue_offset, survivors),
        other => panic!("{damage:?}: send after repair: {other:?}"),
    }
    // Dispatch is asynchronous: wait (bounded) for the new message to be reachable.
    let deadline = tokio::time::Instant::now() + DISPATCH_DEADLINE;
    let after = loop {
        let after: BTreeSet<u64> = read_back(&client, &serve.broker)
            .await
            .iter()
            .map(|p| p.id)
            .collect();
        if after.contains(&next) || tokio::time::Instant::now() >= deadline {
            break after;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(after.contains(&next));

    let log = serve.log();
    let reported = if damage.hits_commit_log() {
        log.contains("commit log recovered with truncation")
    } else {
        log.contains("consume queue")
    };
    assert!(
        reported,
        "{damage:?}/{stop:?}: the log must say what was dropped:\n{log}"
    );
    eprintln!("{damage:?}/{stop:?}: {} served after damage", served.len());
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_log_truncated_mid_record_after_sigterm() {
    damage_and_restart(Damage::TruncateCommitLogFile, Stop::Clean).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_log_truncated_mid_record_after_sigkill() {
    damage_and_restart(Damage::TruncateCommitLogFile, Stop::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_log_tail_zeroed_mid_record_after_sigterm() {
    damage_and_restart(Damage::ZeroCommitLogTail, Stop::Clean).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_log_tail_zeroed_mid_record_after_sigkill() {
    damage_and_restart(Damage::ZeroCommitLogTail, Stop::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_log_body_bit_flipped_after_sigterm() {
    damage_and_restart(Damage::FlipCommitLogBody, Stop::Clean).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_log_body_bit_flipped_after_sigkill() {
    damage_and_restart(Damage::FlipCommitLogBody, Stop::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_queue_truncated_mid_unit_after_sigterm() {
    damage_and_restart(Damage::TruncateConsumeQueueFile, Stop::Clean).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_queue_truncated_mid_unit_after_sigkill() {
    damage_and_restart(Damage::TruncateConsumeQueueFile, Stop::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_queue_unit_offset_flipped_after_sigterm() {
    damage_and_restart(Damage::FlipConsumeQueueUnit, Stop::Clean).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_queue_unit_offset_flipped_after_sigkill() {
    damage_and_restart(Damage::FlipConsumeQueueUnit, Stop::Kill).await;
}
