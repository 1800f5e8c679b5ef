//! Replication between two stores, as a master's and a slave's HA connection drive it: the slave
//! appends the master's CommitLog bytes at the master's offsets, builds its ConsumeQueues and
//! index from them by its own dispatch, serves the same messages, and survives a crash in the
//! middle of a record.

use std::sync::Arc;
use std::time::Duration;

use comet_store::{FlushDiskType, MessageStore, PutMessageStatus};
use comet_testkit::store::*;

/// Hang guard for asynchronous effects: only a failing test waits this long.
const WAIT: Duration = Duration::from_secs(60);

fn open(dir: &std::path::Path, mode: FlushDiskType) -> Arc<MessageStore> {
    MessageStore::open(test_config(dir, mode)).unwrap_or_else(|e| panic!("open: {e}"))
}

/// Sends `master`'s log from the slave's end onwards in transfers of at most `batch` bytes.
fn replicate(master: &MessageStore, slave: &MessageStore, batch: usize) -> i64 {
    let mut offset = slave.max_phy_offset();
    while let Some(bytes) = master.read_replicated(offset, batch) {
        offset = slave
            .append_replicated(offset, &bytes)
            .unwrap_or_else(|e| panic!("append at {offset}: {e}"));
    }
    offset
}

/// Every body of `topic`/`queue_id` from offset 0, as a pull reads them.
fn bodies(store: &MessageStore, topic: &str, queue_id: i32) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let r = store.get_message("g", topic, queue_id, offset, 32, 1 << 20, None);
        if r.messages.is_empty() {
            return out;
        }
        for record in &r.messages {
            let msg = comet_protocol::message::record::decode_record(record, true)
                .unwrap_or_else(|e| panic!("record: {e}"));
            out.push(msg.body.to_vec());
        }
        offset = r.next_begin_offset;
    }
}

fn wait_dispatched(store: &MessageStore, topic: &str, queue_id: i32, count: i64) {
    let deadline = std::time::Instant::now() + WAIT;
    while store.get_max_offset_in_queue(topic, queue_id) < count {
        assert!(
            std::time::Instant::now() < deadline,
            "{topic}/{queue_id} dispatched {} of {count}",
            store.get_max_offset_in_queue(topic, queue_id)
        );
        std::thread::yield_now();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_serves_what_its_master_stored() {
    for mode in [FlushDiskType::AsyncFlush, FlushDiskType::SyncFlush] {
        let (m, s) = (fast_tempdir(), fast_tempdir());
        let master = open(m.path(), FlushDiskType::AsyncFlush);
        let slave = open(s.path(), mode);
        let mut rng = Rng(7);
        let mut sent: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 3];
        for i in 0..400 {
            let queue_id = i % 3;
            let len = 50 + rng.below(900) as usize;
            let body = rng.bytes(len);
            let r = master
                .put_message(message(
                    "Replicated",
                    queue_id,
                    body.clone(),
                    Some("t"),
                    None,
                ))
                .await;
            assert_eq!(r.status, PutMessageStatus::PutOk);
            sent[queue_id as usize].push(body);
            if i % 97 == 0 {
                replicate(&master, &slave, 1000);
            }
        }
        let end = replicate(&master, &slave, 333);
        assert_eq!(end, master.max_phy_offset());
        for (queue_id, expected) in sent.iter().enumerate() {
            let queue_id = queue_id as i32;
            wait_dispatched(&slave, "Replicated", queue_id, expected.len() as i64);
            assert_eq!(
                &bodies(&slave, "Replicated", queue_id),
                expected,
                "{mode:?}"
            );
        }
        slave.shutdown().unwrap_or_else(|e| panic!("{e}"));
        master.shutdown().unwrap_or_else(|e| panic!("{e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_killed_inside_a_record_resumes_from_its_last_whole_record() {
    let (m, s) = (fast_tempdir(), fast_tempdir());
    let master = open(m.path(), FlushDiskType::AsyncFlush);
    let mut ends = Vec::new();
    for i in 0..50u8 {
        let r = master
            .put_message(message("Torn", 0, vec![i; 600], None, None))
            .await;
        assert_eq!(r.status, PutMessageStatus::PutOk);
        ends.push(master.max_phy_offset());
    }
    let cut = ends[29] + 100;
    let crashed = fast_tempdir();
    {
        let slave = open(s.path(), FlushDiskType::AsyncFlush);
        let head = master
            .read_replicated(0, usize::try_from(cut).unwrap_or(0))
            .unwrap_or_else(|| panic!("master bytes"));
        assert_eq!(slave.append_replicated(0, &head).ok(), Some(cut));
        wait_dispatched(&slave, "Torn", 0, 30);
        assert_eq!(
            slave.get_max_offset_in_queue("Torn", 0),
            30,
            "no partial record"
        );
        // What a crash leaves: the files as they are, the abort marker included.
        slave.flush().unwrap_or_else(|e| panic!("{e}"));
        copy_dir(s.path(), crashed.path());
        slave.shutdown().unwrap_or_else(|e| panic!("{e}"));
    }
    let slave = open(crashed.path(), FlushDiskType::AsyncFlush);
    // Recovery drops the torn record; replication resumes from the last whole one.
    assert_eq!(slave.max_phy_offset(), ends[29]);
    let end = replicate(&master, &slave, 4096);
    assert_eq!(end, master.max_phy_offset());
    wait_dispatched(&slave, "Torn", 0, 50);
    let expected: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 600]).collect();
    assert_eq!(bodies(&slave, "Torn", 0), expected);
    slave.shutdown().unwrap_or_else(|e| panic!("{e}"));
    master.shutdown().unwrap_or_else(|e| panic!("{e}"));
}
