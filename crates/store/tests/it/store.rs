//! End-to-end tests of the message store: append/read round trips across segment boundaries,
//! batches, per-queue offsets, the get_message statuses, the arriving listener.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use comet_protocol::message::batch::BatchEntry;
use comet_protocol::message::properties::keys;
use comet_protocol::message::record::{self, decode_record};
use comet_protocol::message::{Properties, sysflag};
use comet_store::{
    Commit, FlushDiskType, GetMessageStatus, MessageArrival, MessageArrivingListener,
    MessageExtBatch, MessageFilter, MessageStore, PutMessageStatus,
};
use comet_testkit::store::*;
use parking_lot::Mutex;

/// Hang guard for asynchronous effects: only a failing test waits this long, so it is generous
/// enough for a loaded 2-core CI box.
const WAIT: Duration = Duration::from_secs(60);

fn open(dir: &std::path::Path, mode: FlushDiskType) -> Arc<MessageStore> {
    MessageStore::open(test_config(dir, mode)).unwrap_or_else(|e| panic!("open: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_appends_read_back_byte_identical() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = open(dir.path(), FlushDiskType::AsyncFlush);
    let mut rng = Rng(0x5eed_1234);
    let topics = ["TopicA", "TopicB"];
    // (topic, queue, expected bodies in queue order)
    let mut expected: std::collections::HashMap<(String, i32), Vec<Vec<u8>>> = Default::default();
    let mut last_end = 0i64;
    for i in 0..600 {
        let topic = topics[(rng.below(2)) as usize];
        let queue_id = rng.below(3) as i32;
        // Mostly small, sometimes big enough to force BLANK padding quickly.
        let len = if rng.below(10) == 0 {
            4000 + rng.below(12_000)
        } else {
            rng.below(300)
        } as usize;
        let body = rng.bytes(len);
        let tags = format!("tag{}", i % 4);
        let r = store
            .put_message(message(
                topic,
                queue_id,
                body.clone(),
                Some(&tags),
                Some(&format!("k{i}")),
            ))
            .await;
        assert_eq!(r.status, PutMessageStatus::PutOk);
        let append = r.append.unwrap_or_else(|| panic!("append result"));
        let q = expected.entry((topic.to_owned(), queue_id)).or_default();
        assert_eq!(
            append.logics_offset,
            q.len() as i64,
            "queue offsets are contiguous"
        );
        assert!(append.wrote_offset >= last_end, "physical offsets increase");
        last_end = append.wrote_offset + append.wrote_bytes as i64;
        q.push(body);
    }
    assert!(
        store.commit_log().mapped_file_queue().file_count() > 3,
        "crossed segments"
    );
    assert!(store.wait_dispatched(store.max_phy_offset(), WAIT));

    for ((topic, queue_id), bodies) in &expected {
        let mut offset = 0i64;
        let mut got = Vec::new();
        while offset < bodies.len() as i64 {
            let r = store.get_message("g", topic, *queue_id, offset, 32, 1 << 20, None);
            assert_eq!(
                r.status,
                GetMessageStatus::Found,
                "at {topic}-{queue_id}@{offset}"
            );
            assert_eq!(r.next_begin_offset, offset + r.msg_count as i64);
            assert_transfer_joins_the_records(&r);
            for (bytes, qo) in r.messages.iter().zip(&r.queue_offsets) {
                let m = decode_record(bytes, true).unwrap_or_else(|e| panic!("decode: {e}"));
                assert_eq!(m.queue_offset, *qo);
                assert_eq!(&m.topic, topic);
                assert_eq!(m.queue_id, *queue_id);
                // The record read is exactly what lookup by physical offset returns.
                let again = store
                    .select_one_message_by_offset(m.commit_log_offset, m.store_size)
                    .unwrap_or_else(|| panic!("select"));
                assert_eq!(&again[..], &bytes[..]);
                got.push(m.body.to_vec());
            }
            offset = r.next_begin_offset;
        }
        assert_eq!(&got, bodies, "{topic}-{queue_id} read back byte-identical");
    }
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
    drop(store);

    // Reopen (clean): same content, queue offsets continue.
    let store = open(dir.path(), FlushDiskType::AsyncFlush);
    assert!(!store.recovery_report().abnormal);
    assert_eq!(store.recovery_report().corruption, None);
    for ((topic, queue_id), bodies) in &expected {
        assert_eq!(
            store.get_max_offset_in_queue(topic, *queue_id),
            bodies.len() as i64
        );
        let r = store
            .put_message(message(topic, *queue_id, &b"more"[..], None, None))
            .await;
        assert_eq!(r.append.map(|a| a.logics_offset), Some(bodies.len() as i64));
    }
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blank_entry_pads_segment_end() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = open(dir.path(), FlushDiskType::AsyncFlush);
    let body = vec![7u8; 20_000];
    let mut offsets = Vec::new();
    for _ in 0..4 {
        let r = store
            .put_message(message("T", 0, body.clone(), None, None))
            .await;
        let a = r.append.unwrap_or_else(|| panic!("append"));
        offsets.push((a.wrote_offset, a.wrote_bytes));
    }
    // 3 records fit in 64 KiB; the 4th starts the second segment.
    let seg = TEST_SEGMENT_SIZE as i64;
    assert_eq!(offsets[3].0, seg);
    let end_of_third = offsets[2].0 + offsets[2].1 as i64;
    let free = (seg - end_of_third) as usize;
    let file = store
        .commit_log()
        .find_file(0)
        .unwrap_or_else(|| panic!("segment 0"));
    let blank = file
        .read_at(end_of_third as usize, 8)
        .unwrap_or_else(|| panic!("blank"));
    assert_eq!(record::peek_total_size(blank), Some(free as i32));
    assert_eq!(
        record::peek_magic(blank),
        Some(comet_protocol::message::BLANK_MAGIC)
    );
    assert!(store.wait_dispatched(store.max_phy_offset(), WAIT));
    let r = store.get_message("g", "T", 0, 0, 32, 1 << 20, None);
    assert_eq!(
        r.msg_count, 4,
        "dispatch skips the BLANK and continues in the next segment"
    );
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
}

/// The transfer buffers of a read hold exactly its records, in order, and join every run of
/// adjacent records (so there are as many buffers as gaps between records, plus one).
fn assert_transfer_joins_the_records(r: &comet_store::GetMessageResult) {
    let records: Vec<u8> = r.messages.iter().flat_map(|m| m.to_vec()).collect();
    let transfer: Vec<u8> = r.transfer.iter().flat_map(|t| t.to_vec()).collect();
    assert_eq!(transfer, records);
    assert_eq!(r.messages.len(), r.msg_count);
    assert_eq!(r.queue_offsets.len(), r.msg_count);
    let gaps = r
        .messages
        .windows(2)
        .filter(|pair| pair[0].as_ptr().wrapping_add(pair[0].len()) != pair[1].as_ptr())
        .count();
    let runs = if r.messages.is_empty() { 0 } else { gaps + 1 };
    assert_eq!(r.transfer.len(), runs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_gets_consecutive_offsets() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = open(dir.path(), FlushDiskType::SyncFlush);
    store
        .put_message(message("B", 1, &b"single"[..], None, None))
        .await;
    let entries: Vec<BatchEntry> = (0..10)
        .map(|i| {
            let mut p = Properties::new();
            p.insert(keys::UNIQ_KEY, format!("UNIQ{i}"));
            BatchEntry {
                flag: i,
                body: Bytes::from(format!("batch-{i}")),
                properties: p,
            }
        })
        .collect();
    let mut encoded = bytes::BytesMut::new();
    comet_protocol::message::batch::encode_batch(&entries, &mut encoded)
        .unwrap_or_else(|e| panic!("{e}"));
    let batch = MessageExtBatch::from_body("B", 1, &encoded.freeze(), born(), store_host())
        .unwrap_or_else(|e| panic!("{e}"));
    let r = store.put_messages(batch).await;
    assert_eq!(r.status, PutMessageStatus::PutOk);
    let a = r.append.unwrap_or_else(|| panic!("append"));
    assert_eq!(a.msg_num, 10);
    assert_eq!(a.logics_offset, 1);
    assert_eq!(a.msg_id.split(',').count(), 10);
    // SYNC_FLUSH: durable, hence dispatchable, right after the ack.
    assert!(store.commit_log().flushed_where() >= a.wrote_offset + a.wrote_bytes as i64);
    assert!(store.wait_dispatched(store.max_phy_offset(), WAIT));
    let got = store.get_message("g", "B", 1, 1, 32, 1 << 20, None);
    assert_eq!(got.msg_count, 10);
    // A batch is stored contiguously: its pull is one buffer.
    assert_transfer_joins_the_records(&got);
    assert_eq!(got.transfer.len(), 1);
    for (i, bytes) in got.messages.iter().enumerate() {
        let m = decode_record(bytes, true).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.queue_offset, 1 + i as i64);
        assert_eq!(m.flag, i as i32);
        assert_eq!(&m.body[..], format!("batch-{i}").as_bytes());
    }
    // Index: every UNIQ_KEY is queryable.
    let q = store.query_message("B", "UNIQ7", 10, 0, i64::MAX);
    assert_eq!(q.messages.len(), 1);
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_validation() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = open(dir.path(), FlushDiskType::AsyncFlush);
    let big = vec![0u8; 4 * 1024 * 1024 + 1];
    assert_eq!(
        store
            .put_message(message("T", 0, big, None, None))
            .await
            .status,
        PutMessageStatus::MessageIllegal
    );
    // Larger than a test segment, below max_message_size: refused rather than spanning files.
    let seg = vec![0u8; TEST_SEGMENT_SIZE];
    assert_eq!(
        store
            .put_message(message("T", 0, seg, None, None))
            .await
            .status,
        PutMessageStatus::MessageIllegal
    );
    let mut m = message("T", 0, &b"x"[..], None, None);
    m.properties.insert("P", "v".repeat(40_000));
    assert_eq!(
        store.put_message(m).await.status,
        PutMessageStatus::PropertiesSizeExceeded
    );
    let long = "t".repeat(128);
    assert_eq!(
        store
            .put_message(message(&long, 0, &b"x"[..], None, None))
            .await
            .status,
        PutMessageStatus::MessageIllegal
    );
    let retry = format!("%RETRY%{}", "g".repeat(130));
    let r = store
        .put_message(message(&retry, 0, &b"x"[..], None, None))
        .await;
    assert_eq!(
        r.status,
        PutMessageStatus::PutOk,
        "retry topics may use MAGIC V2"
    );
    assert!(store.wait_dispatched(store.max_phy_offset(), WAIT));
    let got = store.get_message("g", &retry, 0, 0, 1, 1 << 20, None);
    let m = decode_record(&got.messages[0], true).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.topic, retry);
    assert_eq!(
        store
            .put_message(message("", 0, &b"x"[..], None, None))
            .await
            .status,
        PutMessageStatus::MessageIllegal
    );
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        store
            .put_message(message("T", 0, &b"x"[..], None, None))
            .await
            .status,
        PutMessageStatus::ServiceNotAvailable
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_prepared_not_consumable() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = open(dir.path(), FlushDiskType::AsyncFlush);
    let mut half = message("Tx", 0, &b"half"[..], None, Some("txkey"));
    half.sys_flag = sysflag::TRANSACTION_PREPARED_TYPE;
    let r = store.put_message(half).await;
    assert_eq!(r.append.as_ref().map(|a| a.logics_offset), Some(0));
    let mut commit = message("Tx", 0, &b"commit"[..], None, None);
    commit.sys_flag = sysflag::TRANSACTION_COMMIT_TYPE;
    let r2 = store.put_message(commit).await;
    assert_eq!(
        r2.append.as_ref().map(|a| a.logics_offset),
        Some(0),
        "prepared took no queue slot"
    );
    assert!(store.wait_dispatched(store.max_phy_offset(), WAIT));
    assert_eq!(store.get_max_offset_in_queue("Tx", 0), 1);
    // The half message is still indexed (for transaction checks), and readable by offset.
    assert_eq!(
        store
            .query_message("Tx", "txkey", 4, 0, i64::MAX)
            .messages
            .len(),
        1
    );
    let half_offset = r.append.map(|a| a.wrote_offset).unwrap_or(-1);
    let looked = store
        .lookup_message_by_offset(half_offset)
        .unwrap_or_else(|| panic!("lookup"));
    assert_eq!(&looked.body[..], b"half");
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
}

struct TagFilter(i64);

impl MessageFilter for TagFilter {
    fn is_matched_by_consume_queue(&self, tags_code: i64) -> bool {
        tags_code == self.0
    }
    fn is_matched_by_commit_log(&self, _record: &[u8]) -> bool {
        true
    }
}

struct RejectByBody;

impl MessageFilter for RejectByBody {
    fn is_matched_by_consume_queue(&self, _tags_code: i64) -> bool {
        true
    }
    fn is_matched_by_commit_log(&self, record: &[u8]) -> bool {
        record::decode_record_view(record).is_ok_and(|v| v.body != b"drop")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_message_statuses() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = open(dir.path(), FlushDiskType::AsyncFlush);

    // Unknown queue / impossible queue.
    let r = store.get_message("g", "Nope", 0, 5, 32, 1 << 20, None);
    assert_eq!(
        (r.status, r.next_begin_offset),
        (GetMessageStatus::NoMessageInQueue, 0)
    );
    let r = store.get_message("g", "a/b", 0, 5, 32, 1 << 20, None);
    assert_eq!(
        (r.status, r.next_begin_offset),
        (GetMessageStatus::NoMatchedLogicQueue, 0)
    );
    let r = store.get_message("g", "T", -1, 5, 32, 1 << 20, None);
    assert_eq!(
        (r.status, r.next_begin_offset),
        (GetMessageStatus::NoMatchedLogicQueue, 0)
    );

    // Fill queue T-0 across several segments: 40 records of ~4 KiB = ~3 segments.
    let body = vec![1u8; 4000];
    for i in 0..40 {
        let tags = if i % 2 == 0 { "even" } else { "odd" };
        store
            .put_message(message("T", 0, body.clone(), Some(tags), None))
            .await;
    }
    assert!(store.wait_dispatched(store.max_phy_offset(), WAIT));

    let r = store.get_message("g", "T", 0, 40, 32, 1 << 20, None);
    assert_eq!(
        (r.status, r.next_begin_offset),
        (GetMessageStatus::OffsetOverflowOne, 40)
    );
    let r = store.get_message("g", "T", 0, 45, 32, 1 << 20, None);
    assert_eq!(
        (r.status, r.next_begin_offset),
        (GetMessageStatus::OffsetOverflowBadly, 40)
    );

    let r = store.get_message("g", "T", 0, 0, 4, 1 << 20, None);
    assert_eq!(
        (r.status, r.msg_count, r.next_begin_offset),
        (GetMessageStatus::Found, 4, 4)
    );
    // Byte budget: 2 records of ~4.1 KiB fit in 9000 bytes.
    let r = store.get_message("g", "T", 0, 0, 32, 9000, None);
    assert_eq!(
        (r.status, r.msg_count, r.next_begin_offset),
        (GetMessageStatus::Found, 2, 2)
    );

    // Tag filter: only odd ones.
    let odd = comet_protocol::message::tags_hash("odd");
    let r = store.get_message("g", "T", 0, 0, 3, 1 << 20, Some(&TagFilter(odd)));
    assert_eq!(r.status, GetMessageStatus::Found);
    assert_eq!(r.queue_offsets, vec![1, 3, 5]);
    assert_eq!(r.next_begin_offset, 6);
    let none = comet_protocol::message::tags_hash("none");
    let r = store.get_message("g", "T", 0, 10, 32, 1 << 20, Some(&TagFilter(none)));
    assert_eq!(r.status, GetMessageStatus::NoMatchedMessage);
    assert_eq!(r.next_begin_offset, 40, "every examined unit is skipped");

    // Commit-log filter.
    store
        .put_message(message("F", 0, &b"drop"[..], None, None))
        .await;
    store
        .put_message(message("F", 0, &b"keep"[..], None, None))
        .await;
    assert!(store.wait_dispatched(store.max_phy_offset(), WAIT));
    let r = store.get_message("g", "F", 0, 0, 1, 1 << 20, Some(&RejectByBody));
    assert_eq!(
        (r.status, r.next_begin_offset),
        (GetMessageStatus::Found, 2)
    );
    let r = store.get_message("g", "F", 0, 0, 1, 1 << 20, Some(&RejectByBody));
    assert_eq!(r.queue_offsets, vec![1]);
    let r2 = store.get_message("g", "F", 0, 0, 1, 1 << 20, None);
    assert_eq!(r2.queue_offsets, vec![0]);

    // Push T's records out of all but the newest segments with traffic on another topic.
    let filler = vec![2u8; 8000];
    for _ in 0..20 {
        store
            .put_message(message("Z", 0, filler.clone(), None, None))
            .await;
    }
    assert!(store.wait_dispatched(store.max_phy_offset(), WAIT));
    let t_last = store.get_commit_log_offset_in_queue("T", 0, 39);
    let z_first = store.get_commit_log_offset_in_queue("Z", 0, 0);
    assert!(t_last < z_first);

    // Retention step 1: delete every CommitLog segment but the newest, ConsumeQueues not yet
    // corrected → every unit examined points at removed data.
    let segments = store.commit_log().mapped_file_queue().file_count();
    let deleted = store
        .delete_expired_commit_log(Duration::ZERO, true, 100)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(deleted, segments - 1);
    assert!(store.min_phy_offset() > t_last);
    let r = store.get_message("g", "T", 0, 0, 4, 1 << 20, None);
    assert_eq!(
        (r.status, r.next_begin_offset),
        (GetMessageStatus::MessageWasRemoving, 40)
    );
    // Step 2: ConsumeQueues catch up → OffsetTooSmall with next = new min (= max, all gone).
    store
        .clean_expired_consume_queues()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(store.get_min_offset_in_queue("T", 0), 40);
    let r = store.get_message("g", "T", 0, 0, 4, 1 << 20, None);
    assert_eq!(
        (r.status, r.next_begin_offset),
        (GetMessageStatus::OffsetTooSmall, 40)
    );
    // Z kept its newest records; its min moved to the first one still stored.
    let z_min = store.get_min_offset_in_queue("Z", 0);
    assert!(z_min > 0);
    let r = store.get_message("g", "Z", 0, z_min, 4, 1 << 20, None);
    assert_eq!(r.status, GetMessageStatus::Found);
    assert_eq!(r.queue_offsets.first(), Some(&z_min));

    // NoMessageInQueue for an existing but empty queue: a topic whose queue was emptied.
    store
        .delete_topics(&["F"])
        .unwrap_or_else(|e| panic!("{e}"));
    let r = store.get_message("g", "F", 0, 1, 4, 1 << 20, None);
    assert_eq!(
        (r.status, r.next_begin_offset),
        (GetMessageStatus::NoMessageInQueue, 0)
    );

    let s = store.stats();
    assert!(s.get_message_times_found > 0 && s.get_message_times_miss > 0);
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_by_time_and_key() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = open(dir.path(), FlushDiskType::AsyncFlush);
    let mut stamps = Vec::new();
    for i in 0..5 {
        let r = store
            .put_message(message(
                "Q",
                2,
                format!("m{i}"),
                None,
                Some(&format!("order-{i} shared")),
            ))
            .await;
        stamps.push(r.append.map(|a| a.store_timestamp).unwrap_or(0));
        std::thread::sleep(Duration::from_millis(3));
    }
    assert!(store.wait_dispatched(store.max_phy_offset(), WAIT));
    assert_eq!(store.get_offset_in_queue_by_time("Q", 2, stamps[3]), 3);
    assert_eq!(store.get_offset_in_queue_by_time("Q", 2, 0), 0);
    assert_eq!(store.get_offset_in_queue_by_time("Q", 2, i64::MAX), 5);
    assert_eq!(store.get_earliest_message_time("Q", 2), stamps[0]);
    assert_eq!(store.get_message_store_timestamp("Q", 2, 4), stamps[4]);
    assert_eq!(store.get_message_store_timestamp("Q", 2, 5), -1);
    let clo = store.get_commit_log_offset_in_queue("Q", 2, 1);
    assert_eq!(
        store.lookup_message_by_offset(clo).map(|m| m.body),
        Some(Bytes::from("m1"))
    );
    let q = store.query_message("Q", "shared", 3, 0, i64::MAX);
    assert_eq!(q.messages.len(), 3, "capped at max_num");
    let q = store.query_message("Q", "order-2", 10, 0, i64::MAX);
    assert_eq!(q.messages.len(), 1);
    let q = store.query_message("Other", "order-2", 10, 0, i64::MAX);
    assert!(q.messages.is_empty(), "topic is part of the key");
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
}

/// Names of the files in the store's index directory, sorted.
fn index_file_names(root: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("index"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Waits (at most [`WAIT`]) until the store's flush thread has made an index file; its names.
async fn wait_for_index_file(root: &std::path::Path) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    loop {
        let names = index_file_names(root);
        if !names.is_empty() {
            return names;
        }
        assert!(Instant::now() < deadline, "no index file made ahead");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_index_file_is_made_before_the_first_send() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = open(dir.path(), FlushDiskType::AsyncFlush);
    // The ConsumeQueue flush thread makes the file as the store starts, before any put.
    let made = wait_for_index_file(dir.path()).await;
    assert_eq!(made.len(), 1);
    let r = store
        .put_message(message("Q", 0, "m".to_owned(), None, Some("key-1")))
        .await;
    assert_eq!(r.status, PutMessageStatus::PutOk);
    assert!(store.wait_dispatched(store.max_phy_offset(), WAIT));
    assert_eq!(
        index_file_names(dir.path()),
        made,
        "the first put used the file made ahead"
    );
    assert_eq!(
        store
            .query_message("Q", "key-1", 10, 0, i64::MAX)
            .messages
            .len(),
        1
    );
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(index_file_names(dir.path()), made, "a used file stays");

    // A store shut down before its first put leaves no empty index file behind.
    let fresh = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = open(fresh.path(), FlushDiskType::AsyncFlush);
    wait_for_index_file(fresh.path()).await;
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
    assert!(index_file_names(fresh.path()).is_empty());
}

/// Records, per arrival, the time since the matching put started.
struct LatencyListener {
    started: Mutex<Vec<Instant>>,
    latencies_ns: Mutex<Vec<u64>>,
    arrivals: AtomicU64,
    last: Mutex<Option<(String, i32, i64, i64)>>,
}

impl MessageArrivingListener for LatencyListener {
    fn arriving(&self, a: &MessageArrival<'_>) {
        // One dispatch thread calls this; publish `last` before the count the test waits on.
        let idx = self.arrivals.load(Ordering::Acquire) as usize;
        if let Some(start) = self.started.lock().get(idx) {
            self.latencies_ns
                .lock()
                .push(start.elapsed().as_nanos() as u64);
        }
        *self.last.lock() = Some((a.topic.to_owned(), a.queue_id, a.max_offset, a.tags_code));
        self.arrivals.fetch_add(1, Ordering::Release);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listener_is_woken_per_message_and_latency_is_recorded() {
    for mode in [FlushDiskType::AsyncFlush, FlushDiskType::SyncFlush] {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = open(dir.path(), mode);
        let listener = Arc::new(LatencyListener {
            started: Mutex::new(Vec::new()),
            latencies_ns: Mutex::new(Vec::new()),
            arrivals: AtomicU64::new(0),
            last: Mutex::new(None),
        });
        store.set_arriving_listener(Some(listener.clone()));
        let n = 200u64;
        for i in 0..n {
            listener.started.lock().push(Instant::now());
            store
                .put_message(message("L", 3, &b"hello"[..], Some("TagA"), None))
                .await;
            // One at a time, so each latency is a single append → listener hop.
            let deadline = Instant::now() + WAIT;
            while listener.arrivals.load(Ordering::Acquire) <= i && Instant::now() < deadline {
                std::thread::yield_now();
            }
        }
        assert_eq!(listener.arrivals.load(Ordering::Acquire), n);
        assert_eq!(
            listener.last.lock().clone(),
            Some((
                "L".to_owned(),
                3,
                n as i64,
                comet_protocol::message::tags_hash("TagA")
            ))
        );
        let mut lat = listener.latencies_ns.lock().clone();
        lat.sort_unstable();
        let pct = |p: usize| lat.get(lat.len() * p / 100).copied().unwrap_or(0) as f64 / 1000.0;
        println!(
            "append→listener latency {mode:?}: p50 {:.1} µs, p90 {:.1} µs, p99 {:.1} µs (n={})",
            pct(50),
            pct(90),
            pct(99),
            lat.len()
        );
        store.shutdown().unwrap_or_else(|e| panic!("{e}"));
    }
}

/// A deferred put (what the broker does for the sends it answers) has its offsets at once but is
/// neither readable nor dispatched until a commit; a non-deferred put commits what is pending
/// before it; pending bytes nobody commits are written by the flush thread's next round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_puts_are_readable_and_dispatched_only_once_committed() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = open(dir.path(), FlushDiskType::AsyncFlush);
    let start = store.max_phy_offset();
    let mut ends = Vec::new();
    for (i, body) in [&b"first"[..], &b"second"[..]].into_iter().enumerate() {
        let r = store
            .put_message_with(message("D", 0, body, None, None), Commit::Deferred)
            .await;
        assert_eq!(r.status, PutMessageStatus::PutOk);
        let a = r.append.unwrap_or_else(|| panic!("append"));
        assert_eq!(a.logics_offset, i as i64);
        assert_eq!(
            a.wrote_offset,
            *ends.last().unwrap_or(&start),
            "back to back"
        );
        ends.push(a.wrote_offset + a.wrote_bytes as i64);
    }
    assert_eq!(
        store.max_phy_offset(),
        start,
        "nothing readable before the commit"
    );
    assert!(store.lookup_message_by_offset(start).is_none());
    assert_eq!(store.get_max_offset_in_queue("D", 0), 0, "nor dispatched");

    store
        .commit_pending()
        .unwrap_or_else(|e| panic!("commit: {e}"));
    assert_eq!(store.max_phy_offset(), ends[1]);
    assert!(store.wait_dispatched(ends[1], WAIT));
    let r = store.get_message("g", "D", 0, 0, 32, 1 << 20, None);
    assert_eq!(r.msg_count, 2);
    let second = store
        .lookup_message_by_offset(ends[0])
        .unwrap_or_else(|| panic!("second record"));
    assert_eq!(&second.body[..], b"second");

    // A put that commits takes the pending one before it along.
    let r = store
        .put_message_with(
            message("D", 0, &b"pending"[..], None, None),
            Commit::Deferred,
        )
        .await;
    let pending = r.append.unwrap_or_else(|| panic!("append"));
    let r = store
        .put_message(message("D", 0, &b"now"[..], None, None))
        .await;
    let now = r.append.unwrap_or_else(|| panic!("append"));
    assert_eq!(
        store.max_phy_offset(),
        now.wrote_offset + now.wrote_bytes as i64
    );
    assert!(
        store
            .lookup_message_by_offset(pending.wrote_offset)
            .is_some()
    );

    // Left pending with nobody to commit it: the flush writes it (the flush thread's round).
    let r = store
        .put_message_with(
            message("D", 0, &b"orphan"[..], None, None),
            Commit::Deferred,
        )
        .await;
    let orphan = r.append.unwrap_or_else(|| panic!("append"));
    let end = orphan.wrote_offset + orphan.wrote_bytes as i64;
    assert!(store.max_phy_offset() < end);
    store.flush().unwrap_or_else(|e| panic!("flush: {e}"));
    assert_eq!(store.max_phy_offset(), end);
    assert!(store.wait_dispatched(end, WAIT));
    assert_eq!(store.get_max_offset_in_queue("D", 0), 5);
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
}

/// SYNC_FLUSH: deferred puts (the broker's answered sends) return at once with the offset their
/// answer waits for; one commit writes them all, wakes the flush thread, and the flushed offset
/// it publishes covers every one of them; consumers see them once flushed. A put with Commit::Now
/// still waits for its flush itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_sync_flush_puts_name_the_flush_their_answer_waits_for() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = open(dir.path(), FlushDiskType::SyncFlush);
    let mut flushed = store.flushed_watch();
    let mut ends = Vec::new();
    for i in 0..8 {
        let body = Bytes::from(format!("sync-{i}"));
        let r = store
            .put_message_with(message("Y", 0, body, None, None), Commit::Deferred)
            .await;
        assert_eq!(r.status, PutMessageStatus::PutOk);
        let a = r.append.unwrap_or_else(|| panic!("append"));
        let end = a.wrote_offset + a.wrote_bytes as i64;
        assert_eq!(r.flush_until, Some(end));
        ends.push(end);
    }
    assert!(ends.windows(2).all(|w| w[0] < w[1]), "consecutive records");
    let last = *ends.last().unwrap_or_else(|| panic!("ends"));
    assert_eq!(store.commit_log().max_offset(), 0, "nothing written yet");
    assert!(*flushed.borrow_and_update() < last as u64);

    store
        .commit_pending()
        .unwrap_or_else(|e| panic!("commit: {e}"));
    let covered = tokio::time::timeout(WAIT, flushed.wait_for(|&at| at >= last as u64))
        .await
        .unwrap_or_else(|_| panic!("the commit's flush was never published"))
        .map(|at| *at)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(covered >= last as u64);
    assert!(
        store.commit_log().flushed_where() >= last,
        "published only once flushed"
    );
    assert!(store.wait_dispatched(last, WAIT));
    let got = store.get_message("g", "Y", 0, 0, 32, 1 << 20, None);
    assert_eq!(got.msg_count, 8);

    let r = store
        .put_message(message("Y", 0, &b"now"[..], None, None))
        .await;
    assert_eq!(r.flush_until, None);
    let a = r.append.unwrap_or_else(|| panic!("append"));
    assert!(store.commit_log().flushed_where() >= a.wrote_offset + a.wrote_bytes as i64);
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
}

/// SYNC_FLUSH, the broker's writer path: `write_pending` writes the deferred records without
/// flushing them, `flush_pending` has the flush thread flush them and the published offset
/// covers them; consumers then see them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn written_sync_flush_records_are_flushed_for_the_writer_that_holds_their_answers() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = open(dir.path(), FlushDiskType::SyncFlush);
    let mut flushed = store.flushed_watch();
    let mut last = 0;
    for i in 0..4 {
        let body = Bytes::from(format!("held-{i}"));
        let r = store
            .put_message_with(message("H", 0, body, None, None), Commit::Deferred)
            .await;
        last = r.flush_until.unwrap_or_else(|| panic!("a held answer"));
    }
    assert!(
        store
            .write_pending()
            .unwrap_or_else(|e| panic!("write: {e}"))
    );
    assert_eq!(store.commit_log().max_offset(), last, "written");
    assert!(
        !store
            .write_pending()
            .unwrap_or_else(|e| panic!("write: {e}"))
    );
    store.flush_pending();
    let covered = tokio::time::timeout(WAIT, flushed.wait_for(|&at| at >= last as u64))
        .await
        .unwrap_or_else(|_| panic!("the writer's flush was never published"))
        .map(|at| *at)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(covered >= last as u64);
    assert!(store.commit_log().flushed_where() >= last);
    assert!(store.wait_dispatched(last, WAIT));
    assert_eq!(
        store
            .get_message("g", "H", 0, 0, 32, 1 << 20, None)
            .msg_count,
        4
    );
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
}

/// Both flush modes keep the newest segment prepared `commitLogZeroAheadBytes` past its appends
/// (by their own thread: woken after group commits under SYNC_FLUSH, after commits of appends
/// under ASYNC_FLUSH): the blocks are allocated there, and the records beside them are intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_flush_modes_prepare_blocks_ahead_of_the_appends() {
    use std::os::unix::fs::MetadataExt;
    // Less than a test segment (TEST_SEGMENT_SIZE) after the first page.
    const AHEAD: usize = 16 * 1024;
    for mode in [FlushDiskType::SyncFlush, FlushDiskType::AsyncFlush] {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut cfg = test_config(dir.path(), mode);
        cfg.commit_log_zero_ahead_bytes = AHEAD as u64;
        let store = MessageStore::open(cfg).unwrap_or_else(|e| panic!("open: {e}"));
        for i in 0..5 {
            let r = store
                .put_message(message("Z", 0, Bytes::from(format!("z{i}")), None, None))
                .await;
            assert_eq!(r.status, PutMessageStatus::PutOk);
        }
        store.flush().unwrap_or_else(|e| panic!("flush: {e}"));
        let file = store
            .commit_log()
            .mapped_file_queue()
            .last_file()
            .unwrap_or_else(|| panic!("a segment"));
        let end = file.appended_position().next_multiple_of(4096) + AHEAD;
        let deadline = Instant::now() + WAIT;
        while file.prepared_to() < end {
            assert!(
                Instant::now() < deadline,
                "{mode:?}: prepared to {}",
                file.prepared_to()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(file.prepared_to(), end, "{mode:?}");
        let blocks = std::fs::metadata(file.path())
            .map(|m| m.blocks())
            .unwrap_or(0);
        assert!(
            blocks * 512 >= end as u64,
            "{mode:?}: {blocks} blocks for {end} bytes prepared"
        );
        assert!(store.wait_dispatched(store.max_phy_offset(), WAIT));
        let got = store.get_message("g", "Z", 0, 0, 32, 1 << 20, None);
        assert_eq!(got.msg_count, 5, "records intact beside the prepared range");
        store.shutdown().unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn second_open_is_refused_by_the_lock() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = open(dir.path(), FlushDiskType::AsyncFlush);
    let again = MessageStore::open(test_config(dir.path(), FlushDiskType::AsyncFlush));
    assert!(matches!(again, Err(comet_store::StoreError::Locked(_))));
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !dir.path().join("abort").exists(),
        "clean shutdown removes abort"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_segments_and_disk_full_refuses_writes() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut cfg = test_config(dir.path(), FlushDiskType::AsyncFlush);
    // Any usage counts as "above the warning level": deletion runs now, unexpired files go
    // (clean immediately) and writes are refused.
    cfg.disk_space_warning_level_ratio = 0;
    cfg.disk_space_clean_forcibly_ratio = 0;
    cfg.delete_commit_log_files_interval = Duration::ZERO;
    let store = MessageStore::open(cfg).unwrap_or_else(|e| panic!("{e}"));
    let body = vec![3u8; 6000];
    for _ in 0..40 {
        store
            .put_message(message("R", 0, body.clone(), None, None))
            .await;
    }
    assert!(store.wait_dispatched(store.max_phy_offset(), WAIT));
    let segments = store.commit_log().mapped_file_queue().file_count();
    assert!(segments >= 4);
    assert!(!store.is_disk_full());

    let deleted = store.run_cleanup_once().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(deleted, segments - 1, "all but the newest segment");
    assert!(store.is_disk_full());
    let r = store
        .put_message(message("R", 0, &b"refused"[..], None, None))
        .await;
    assert_eq!(r.status, PutMessageStatus::ServiceNotAvailable);

    // The ConsumeQueue follows the CommitLog start.
    let min = store.get_min_offset_in_queue("R", 0);
    assert!(min > 0);
    let first = store.get_commit_log_offset_in_queue("R", 0, min);
    assert!(first >= store.min_phy_offset());
    let r = store.get_message("g", "R", 0, 0, 4, 1 << 20, None);
    assert_eq!(
        (r.status, r.next_begin_offset),
        (GetMessageStatus::OffsetTooSmall, min)
    );
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
}

/// Regression (abuse test): a pull asking for `i32::MAX` messages used to size its ConsumeQueue
/// read buffer from that number and abort the broker on a 48 GiB allocation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_max_msg_nums_is_bounded() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = open(dir.path(), FlushDiskType::SyncFlush);
    for i in 0..3 {
        store
            .put_message(message("H", 0, Bytes::from(format!("m{i}")), None, None))
            .await;
    }
    assert!(store.wait_dispatched(store.max_phy_offset(), WAIT));
    let got = store.get_message("g", "H", 0, 0, i32::MAX as usize, 1 << 20, None);
    assert_eq!(got.status, GetMessageStatus::Found);
    assert_eq!(got.msg_count, 3);
    let got = store.get_message("g", "H", 0, 0, usize::MAX, usize::MAX, None);
    assert_eq!(got.msg_count, 3);
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
}
