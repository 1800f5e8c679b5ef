//! Recovery under damage: a store with several hundred records is cut at every byte position
//! inside its last records (and, separately, has random bytes flipped there), then reopened as
//! after a crash. Recovery must never panic, must keep every complete valid record before the
//! damage, and must leave the ConsumeQueues and the index exactly consistent with the log.
//!
//! Each case works on a fresh copy of one template directory, with 64 KiB segments, so the whole
//! file runs in seconds.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use comet_protocol::message::properties::keys;
use comet_protocol::message::record::{decode_record, decode_record_view};
use comet_protocol::message::sysflag;
use comet_store::mapped_file::file_name;
use comet_store::{FlushDiskType, GetMessageStatus, MessageStore, PutMessageStatus};
use common::*;

const RECORDS: usize = 300;
/// How many of the newest records the damage is applied to.
const DAMAGED_TAIL_RECORDS: usize = 3;
const FLIP_CASES: usize = 100;
const WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
struct Rec {
    phys: i64,
    size: i64,
    topic: String,
    queue_id: i32,
    queue_offset: i64,
    body_hash: u64,
    key: String,
}

impl Rec {
    fn end(&self) -> i64 {
        self.phys + self.size
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("mkdir {}: {e}", to.display()));
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{e}")) {
        let entry = entry.unwrap_or_else(|e| panic!("{e}"));
        let dst = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &dst);
        } else {
            std::fs::copy(entry.path(), &dst).unwrap_or_else(|e| panic!("copy: {e}"));
        }
    }
}

/// Builds the template store and returns its records in log order.
fn build_template(root: &Path) -> Vec<Rec> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let store = MessageStore::open(test_config(root, FlushDiskType::AsyncFlush))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut rng = Rng(0xdecaf);
    let mut recs = Vec::new();
    for i in 0..RECORDS {
        let topic = if rng.below(2) == 0 { "RA" } else { "RB" };
        let queue_id = rng.below(2) as i32;
        let len = 20 + rng.below(280) as usize;
        let body = rng.bytes(len);
        let key = format!("key-{i}");
        let mut msg = message(
            topic,
            queue_id,
            body.clone(),
            Some(&format!("t{}", i % 3)),
            Some(&key),
        );
        msg.properties.insert(keys::UNIQ_KEY, format!("U{i:06}"));
        let prepared = i % 50 == 7 && i + 20 < RECORDS;
        if prepared {
            msg.sys_flag = sysflag::TRANSACTION_PREPARED_TYPE;
        }
        let r = rt.block_on(store.put_message(msg));
        assert_eq!(r.status, PutMessageStatus::PutOk);
        let a = r.append.unwrap_or_else(|| panic!("append"));
        recs.push(Rec {
            phys: a.wrote_offset,
            size: a.wrote_bytes as i64,
            topic: topic.to_owned(),
            queue_id,
            queue_offset: a.logics_offset,
            body_hash: hash(&body),
            key,
        });
    }
    assert!(store.wait_dispatched(store.max_phy_offset(), WAIT));
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
    recs
}

fn last_segment_path(root: &Path, recs: &[Rec]) -> (PathBuf, i64) {
    let last = recs.last().unwrap_or_else(|| panic!("records"));
    let seg = TEST_SEGMENT_SIZE as i64;
    let from = last.phys - last.phys % seg;
    (root.join("commitlog").join(file_name(from)), from)
}

/// Every invariant recovery promises, for a store whose log should hold exactly `kept`
/// undamaged records followed (possibly) by records we cannot vouch for.
fn check_store(
    store: &Arc<MessageStore>,
    kept: &[Rec],
    dropped: &[Rec],
    rt: &tokio::runtime::Runtime,
) {
    let end = store.max_phy_offset();
    assert_eq!(store.recovery_report().max_phy_offset, end);

    // 1. Every kept record is intact and at its place.
    for r in kept {
        let m = store
            .lookup_message_by_offset(r.phys)
            .unwrap_or_else(|| panic!("record at {} lost", r.phys));
        assert_eq!(hash(&m.body), r.body_hash, "record at {}", r.phys);
        assert_eq!(
            (m.topic.as_str(), m.queue_id),
            (r.topic.as_str(), r.queue_id)
        );
        assert_eq!(m.queue_offset, r.queue_offset);
    }

    // 2. Every ConsumeQueue unit points at a valid record of its queue, inside the log.
    let mut units_seen: HashMap<i64, (String, i32, i64)> = HashMap::new();
    for (topic, queue_id, q) in store.consume_queues().entries() {
        let cq = q.read();
        for qo in cq.min_offset()..cq.max_offset() {
            let unit = cq
                .get(qo)
                .unwrap_or_else(|| panic!("{topic}-{queue_id} unit {qo} missing"));
            assert!(
                unit.commit_log_offset + i64::from(unit.size) <= end,
                "unit past the log end"
            );
            let bytes = store
                .select_one_message_by_offset(unit.commit_log_offset, unit.size)
                .unwrap_or_else(|| panic!("unit {qo} points at nothing"));
            let m = decode_record(&bytes, true).unwrap_or_else(|e| panic!("unit {qo}: {e}"));
            assert_eq!(
                (m.topic.as_str(), m.queue_id, m.queue_offset),
                (topic.as_str(), queue_id, qo)
            );
            units_seen.insert(unit.commit_log_offset, (topic.clone(), queue_id, qo));
        }
    }

    // 3. No consumable record of the log is missing from its queue.
    let mut offset = store.min_phy_offset();
    while offset < end {
        let seg = TEST_SEGMENT_SIZE as i64;
        let Some(bytes) = store.commit_log().get_record(offset) else {
            offset = offset - offset % seg + seg; // BLANK / tail: next segment
            continue;
        };
        let Ok(view) = decode_record_view(&bytes) else {
            offset = offset - offset % seg + seg;
            continue;
        };
        let tran = sysflag::transaction_type(view.sys_flag);
        if tran != sysflag::TRANSACTION_PREPARED_TYPE && tran != sysflag::TRANSACTION_ROLLBACK_TYPE
        {
            assert_eq!(
                units_seen.get(&offset),
                Some(&(view.topic.to_owned(), view.queue_id, view.queue_offset)),
                "record at {offset} has no ConsumeQueue unit"
            );
        }
        offset += i64::from(view.total_size);
    }

    // 4. Index: kept keys are found (newest few, to keep it fast), dropped keys are not.
    for r in kept.iter().rev().take(8) {
        let q = store.query_message(&r.topic, &r.key, 4, 0, i64::MAX);
        assert_eq!(q.commit_log_offsets, vec![r.phys], "key {}", r.key);
    }
    for r in dropped.iter().filter(|r| r.phys >= end) {
        let q = store.query_message(&r.topic, &r.key, 4, 0, i64::MAX);
        assert!(q.messages.is_empty(), "dropped key {} still indexed", r.key);
    }

    // 5. The store keeps working: a new message lands at the end with the next queue offset.
    let next = store.get_max_offset_in_queue("RA", 1);
    let r = rt.block_on(store.put_message(message("RA", 1, &b"after"[..], None, None)));
    let a = r
        .append
        .unwrap_or_else(|| panic!("append after recovery: {:?}", r.status));
    assert_eq!(
        a.wrote_offset,
        end.max(a.wrote_offset - a.wrote_offset % TEST_SEGMENT_SIZE as i64)
    );
    assert_eq!(a.logics_offset, next);
    assert!(store.wait_dispatched(store.max_phy_offset(), WAIT));
    let got = store.get_message("g", "RA", 1, next, 1, 1 << 20, None);
    assert_eq!(got.status, GetMessageStatus::Found);
    assert_eq!(
        got.messages
            .first()
            .map(|b| decode_record(b, true).map(|m| m.body).ok()),
        Some(Some(Bytes::from("after")))
    );
}

fn open_abnormal(dir: &Path) -> Arc<MessageStore> {
    std::fs::write(dir.join("abort"), b"12345").unwrap_or_else(|e| panic!("{e}"));
    MessageStore::open(test_config(dir, FlushDiskType::AsyncFlush))
        .unwrap_or_else(|e| panic!("open after damage: {e}"))
}

#[test]
fn truncation_at_every_byte_of_the_tail() {
    let tmp = fast_tempdir();
    let template = tmp.path().join("template");
    let recs = build_template(&template);
    let (seg_path, seg_from) = last_segment_path(&template, &recs);
    let tail: Vec<&Rec> = recs.iter().rev().take(DAMAGED_TAIL_RECORDS).collect();
    assert!(
        tail.iter().all(|r| r.phys >= seg_from),
        "tail records share the last segment"
    );
    let first = tail.last().map_or(0, |r| r.phys);
    let last_end = recs.last().map_or(0, Rec::end);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));

    let template_seg = std::fs::read(&seg_path).unwrap_or_else(|e| panic!("{e}"));
    let mut cases = 0;
    for cut in first..=last_end {
        let case = tmp.path().join(format!("cut-{cut}"));
        copy_dir(&template, &case);
        let seg = case
            .join("commitlog")
            .join(seg_path.file_name().unwrap_or_default());
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&seg)
            .unwrap_or_else(|e| panic!("{e}"));
        f.set_len((cut - seg_from) as u64)
            .unwrap_or_else(|e| panic!("{e}"));
        drop(f);

        let store = open_abnormal(&case);
        let report = store.recovery_report().clone();
        assert!(report.abnormal);
        let kept: Vec<Rec> = recs.iter().filter(|r| r.end() <= cut).cloned().collect();
        let dropped: Vec<Rec> = recs.iter().filter(|r| r.end() > cut).cloned().collect();
        let expected_end = kept.last().map_or(0, Rec::end);
        assert_eq!(report.max_phy_offset, expected_end, "cut at {cut}");
        // A torn record is detectable when any of its surviving bytes is non-zero (a cut inside
        // the zero high bytes of TOTALSIZE leaves nothing to tell from a clean end).
        let torn_bytes_nonzero = template_seg
            .get((expected_end - seg_from) as usize..(cut - seg_from) as usize)
            .is_some_and(|b| b.iter().any(|x| *x != 0));
        if torn_bytes_nonzero {
            assert_eq!(report.truncated_from, Some(expected_end), "cut at {cut}");
            assert!(
                report.corruption.is_some(),
                "a torn record is reported (cut at {cut})"
            );
        }
        check_store(&store, &kept, &dropped, &rt);
        store.shutdown().unwrap_or_else(|e| panic!("{e}"));
        drop(store);
        std::fs::remove_dir_all(&case).unwrap_or_else(|e| panic!("{e}"));
        cases += 1;
    }
    println!("truncation cases: {cases}");
}

#[test]
fn random_byte_flips_in_the_tail() {
    let tmp = fast_tempdir();
    let template = tmp.path().join("template");
    let recs = build_template(&template);
    let (seg_path, seg_from) = last_segment_path(&template, &recs);
    let first = recs
        .get(recs.len().saturating_sub(DAMAGED_TAIL_RECORDS))
        .map_or(0, |r| r.phys);
    let last_end = recs.last().map_or(0, Rec::end);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut rng = Rng(0xf1ee_f10b);
    let mut reported = 0;
    for case_no in 0..FLIP_CASES {
        let case = tmp.path().join(format!("flip-{case_no}"));
        copy_dir(&template, &case);
        let seg = case
            .join("commitlog")
            .join(seg_path.file_name().unwrap_or_default());
        let mut data = std::fs::read(&seg).unwrap_or_else(|e| panic!("{e}"));
        let flips = 1 + rng.below(3) as usize;
        let mut first_flip = i64::MAX;
        for _ in 0..flips {
            let at = first + rng.below((last_end - first) as u64) as i64;
            let mask = 1u8 << rng.below(8);
            if let Some(b) = data.get_mut((at - seg_from) as usize) {
                *b ^= mask;
            }
            first_flip = first_flip.min(at);
        }
        std::fs::write(&seg, &data).unwrap_or_else(|e| panic!("{e}"));

        let store = open_abnormal(&case);
        let report = store.recovery_report().clone();
        reported += usize::from(report.corruption.is_some());
        // Records wholly before the first damaged byte survive; what follows is kept only if
        // it still verifies, and is then held to the same consistency rules.
        let kept: Vec<Rec> = recs
            .iter()
            .filter(|r| r.end() <= first_flip)
            .cloned()
            .collect();
        let damaged_start = recs
            .iter()
            .find(|r| r.end() > first_flip)
            .map_or(last_end, |r| r.phys);
        assert!(
            report.max_phy_offset >= damaged_start,
            "case {case_no}: {report:?}"
        );
        assert!(report.max_phy_offset <= last_end);
        check_store(&store, &kept, &[], &rt);
        store.shutdown().unwrap_or_else(|e| panic!("{e}"));
        drop(store);
        std::fs::remove_dir_all(&case).unwrap_or_else(|e| panic!("{e}"));
    }
    println!("flip cases: {FLIP_CASES}, reported as corruption: {reported}");
    assert!(reported > FLIP_CASES / 2, "most flips hit validated fields");
}

#[test]
fn lost_consume_queues_are_rebuilt_from_the_log() {
    let tmp = fast_tempdir();
    let root = tmp.path().join("store");
    let recs = build_template(&root);
    std::fs::remove_dir_all(root.join("consumequeue")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_dir_all(root.join("index")).unwrap_or_else(|e| panic!("{e}"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let store = open_abnormal(&root);
    assert_eq!(store.recovery_report().redispatched_records, RECORDS as u64);
    check_store(&store, &recs, &[], &rt);
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
}
