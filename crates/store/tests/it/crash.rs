//! Crash test: a child process (this test binary re-executed) appends with SYNC_FLUSH from
//! several concurrent tasks and, after each acknowledgement, records (physical offset, queue
//! offset, body hash) in a side file. The parent SIGKILLs it at a random moment, reopens the
//! store (abnormal recovery) and checks that every acknowledged record is present and intact,
//! several rounds in a row on the same directory.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use comet_store::{FlushDiskType, GetMessageStatus, MessageStore, PutMessageStatus};
use comet_testkit::store::*;
use parking_lot::Mutex;

const CHILD_ENV: &str = "COMET_CRASH_CHILD_DIR";
const ROUND_ENV: &str = "COMET_CRASH_ROUND";
const ROUNDS: u64 = 5;
const WRITERS: i32 = 4;
const TOPIC: &str = "Crash";
/// The parent waits for at least this many acks before arming the kill.
const MIN_ACKS_BEFORE_KILL: usize = 20;
/// Hang guards (only a failing round waits this long): the child reaching its first acks, and
/// the reopened store dispatching the recovered log.
const CHILD_START_TIMEOUT: Duration = Duration::from_secs(60);
const DISPATCH_WAIT: Duration = Duration::from_secs(60);

fn side_file(dir: &Path) -> std::path::PathBuf {
    dir.join("acked.log")
}

/// The child: write until killed.
#[test]
#[ignore = "run by crash_kill_and_recover as a child process"]
fn crash_child_writer() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let round: u64 = std::env::var(ROUND_ENV)
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let store = MessageStore::open(test_config(&dir.join("store"), FlushDiskType::SyncFlush))
        .unwrap_or_else(|e| panic!("child open: {e}"));
    let side = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(side_file(&dir))
        .unwrap_or_else(|e| panic!("{e}"));
    let side = Arc::new(Mutex::new(side));
    rt.block_on(async move {
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let store = Arc::clone(&store);
            let side = Arc::clone(&side);
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng(round * 1000 + w as u64 + 1);
                for i in 0u64.. {
                    let len = 16 + rng.below(2000) as usize;
                    let mut body = format!("r{round}-w{w}-i{i}-").into_bytes();
                    body.extend(rng.bytes(len));
                    let h = hash(&body);
                    let r = store
                        .put_message(message(TOPIC, w, body, Some("t"), None))
                        .await;
                    if r.status != PutMessageStatus::PutOk {
                        continue;
                    }
                    let Some(a) = r.append else { continue };
                    // One write per line: a kill lands between lines or loses the line.
                    let line = format!(
                        "{} {} {} {} {h}\n",
                        a.wrote_offset, a.wrote_bytes, w, a.logics_offset
                    );
                    let _ = side.lock().write_all(line.as_bytes());
                }
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
    });
}

#[derive(Debug)]
struct Acked {
    phys: i64,
    size: i32,
    queue_id: i32,
    queue_offset: i64,
    body_hash: u64,
}

fn read_acked(dir: &Path) -> Vec<Acked> {
    let text = std::fs::read_to_string(side_file(dir)).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            if f.len() != 5 {
                return None;
            }
            Some(Acked {
                phys: f[0].parse().ok()?,
                size: f[1].parse().ok()?,
                queue_id: f[2].parse().ok()?,
                queue_offset: f[3].parse().ok()?,
                body_hash: f[4].parse().ok()?,
            })
        })
        .collect()
}

#[test]
fn crash_kill_and_recover() {
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = tmp.path();
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
    let mut rng = Rng(0x000c_4a54);
    let mut total_acked = 0usize;
    for round in 0..ROUNDS {
        let before = read_acked(dir).len();
        let mut child = Command::new(&exe)
            .args([
                // Its path in the store's test binary, where this file is module `crash`.
                "crash::crash_child_writer",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir)
            .env(ROUND_ENV, round.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn child: {e}"));
        let deadline = Instant::now() + CHILD_START_TIMEOUT;
        while read_acked(dir).len() < before + MIN_ACKS_BEFORE_KILL {
            assert!(
                Instant::now() < deadline,
                "child made no progress in round {round}"
            );
            if let Ok(Some(status)) = child.try_wait() {
                panic!("child exited early: {status}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(rng.below(400)));
        child.kill().unwrap_or_else(|e| panic!("kill: {e}")); // SIGKILL
        let _ = child.wait();

        let acked = read_acked(dir);
        total_acked = acked.len();
        let store = MessageStore::open(test_config(&dir.join("store"), FlushDiskType::SyncFlush))
            .unwrap_or_else(|e| panic!("reopen after kill in round {round}: {e}"));
        assert!(
            store.recovery_report().abnormal,
            "the killed child left its abort file"
        );
        assert!(store.wait_dispatched(store.max_phy_offset(), DISPATCH_WAIT));
        for a in &acked {
            let m = store
                .lookup_message_by_offset(a.phys)
                .unwrap_or_else(|| panic!("round {round}: acked record at {} lost", a.phys));
            assert_eq!(
                hash(&m.body),
                a.body_hash,
                "round {round}: record at {} damaged",
                a.phys
            );
            assert_eq!(m.store_size, a.size);
            assert_eq!((m.queue_id, m.queue_offset), (a.queue_id, a.queue_offset));
            assert_eq!(
                store.get_commit_log_offset_in_queue(TOPIC, a.queue_id, a.queue_offset),
                a.phys,
                "round {round}: ConsumeQueue unit of an acked record"
            );
        }
        // Queue offsets stay dense: the pull path sees every record of each queue in order.
        for q in 0..WRITERS {
            let max = store.get_max_offset_in_queue(TOPIC, q);
            let mut offset = store.get_min_offset_in_queue(TOPIC, q);
            while offset < max {
                let r = store.get_message("g", TOPIC, q, offset, 32, 1 << 22, None);
                assert_eq!(
                    r.status,
                    GetMessageStatus::Found,
                    "round {round} queue {q} at {offset}"
                );
                assert_eq!(r.queue_offsets.first(), Some(&offset));
                offset = r.next_begin_offset;
            }
        }
        // Alternate clean and unclean hand-over to the next child.
        if round % 2 == 0 {
            store.shutdown().unwrap_or_else(|e| panic!("{e}"));
        }
        drop(store);
    }
    println!(
        "crash rounds: {ROUNDS}, acked records verified: {total_acked}, elapsed {:?}",
        started.elapsed()
    );
    assert!(started.elapsed() < Duration::from_secs(60));
}
