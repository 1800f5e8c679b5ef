//! Recovery under damage: a store with several hundred records is cut at every byte position
//! inside its last records (and, separately, has random bytes flipped there), then reopened as
//! after a crash. Recovery must never panic, must keep every complete valid record before the
//! damage, and must leave the ConsumeQueues and the index exactly consistent with the log.
//!
//! Each case works on a fresh copy of one template directory, with 64 KiB segments, so the whole
//! file runs in seconds.

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
use comet_testkit::store::*;

const RECORDS: usize = 300;
/// How many of the newest records the damage is applied to.
const DAMAGED_TAIL_RECORDS: usize = 3;
const FLIP_CASES: usize = 100;
/// Hang guard for asynchronous effects: only a failing test waits this long, so it is generous
/// enough for a loaded 2-core CI box.
const WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
struct Rec {
    phys: i64,
    size: i64,
    topic: String,
    queue_id: i32,
    queue_offset: i64,
    body_hash: u64,
    key: String,
    /// Has a ConsumeQueue unit (not a PREPARED transaction record).
    consumable: bool,
}

impl Rec {
    fn end(&self) -> i64 {
        self.phys + self.size
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
            consumable: !prepared,
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

/// How a ConsumeQueue's last unit is damaged while the store is down.
#[derive(Debug, Clone, Copy)]
enum UnitDamage {
    /// The file is cut in the middle of its last unit.
    TruncatedMidUnit,
    /// The last unit's CommitLog offset is 4 bytes off (one flipped bit): it points inside its
    /// record, at no record boundary.
    OffsetOffByFour,
}

/// Bytes of one ConsumeQueue unit.
const CQ_UNIT: usize = 20;

/// Damages the last unit of the queue whose last record comes earliest in the log (so the other
/// queues' later records reach well past it: the hardest queue to refill), after a clean
/// shutdown (`abnormal == false`) or as after a crash, reopens, and checks the queue was refilled
/// from the end of its last good unit and the index holds the refilled message once.
fn damaged_unit_is_refilled(damage: UnitDamage, abnormal: bool) {
    let tmp = fast_tempdir();
    let root = tmp.path().join("store");
    let recs = build_template(&root);
    let last_of = |topic: &str, queue_id: i32| {
        recs.iter()
            .filter(|r| r.consumable && r.topic == topic && r.queue_id == queue_id)
            .max_by_key(|r| r.phys)
    };
    let victim = [("RA", 0), ("RA", 1), ("RB", 0), ("RB", 1)]
        .into_iter()
        .filter_map(|(t, q)| last_of(t, q))
        .min_by_key(|r| r.phys)
        .unwrap_or_else(|| panic!("queues have records"))
        .clone();
    let later_records = recs.iter().filter(|r| r.phys > victim.phys).count();
    assert!(
        later_records > 0,
        "other queues' records follow the damaged unit"
    );
    let previous_end = recs
        .iter()
        .filter(|r| {
            r.consumable
                && r.topic == victim.topic
                && r.queue_id == victim.queue_id
                && r.phys < victim.phys
        })
        .map(Rec::end)
        .max()
        .unwrap_or_else(|| panic!("the victim queue has an earlier record"));

    let qo = usize::try_from(victim.queue_offset).unwrap_or_else(|e| panic!("{e}"));
    let file_start = (qo - qo % TEST_CQ_ENTRIES_PER_FILE) * CQ_UNIT;
    let cq_file = root
        .join("consumequeue")
        .join(&victim.topic)
        .join(victim.queue_id.to_string())
        .join(file_name(file_start as i64));
    let unit_pos = (qo % TEST_CQ_ENTRIES_PER_FILE) * CQ_UNIT;
    match damage {
        UnitDamage::TruncatedMidUnit => {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&cq_file)
                .unwrap_or_else(|e| panic!("{}: {e}", cq_file.display()));
            f.set_len((unit_pos + CQ_UNIT / 2) as u64)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        UnitDamage::OffsetOffByFour => {
            let mut data = std::fs::read(&cq_file).unwrap_or_else(|e| panic!("{e}"));
            // Byte 7 is the lowest byte of the big-endian CommitLog offset.
            let byte = data
                .get_mut(unit_pos + 7)
                .unwrap_or_else(|| panic!("unit inside the file"));
            *byte ^= 0x04;
            std::fs::write(&cq_file, &data).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let store = if abnormal {
        open_abnormal(&root)
    } else {
        MessageStore::open(test_config(&root, FlushDiskType::AsyncFlush))
            .unwrap_or_else(|e| panic!("open after damage: {e}"))
    };
    let report = store.recovery_report().clone();
    let case = format!("{damage:?}, abnormal={abnormal}");
    assert_eq!(report.abnormal, abnormal, "{case}");
    assert_eq!(report.repaired_queues, 1, "{case}: {report:?}");
    assert_eq!(report.repair_from, Some(previous_end), "{case}: {report:?}");
    assert!(report.redispatch_from <= previous_end, "{case}: {report:?}");
    assert!(
        report.corruption.is_none(),
        "{case}: the log itself is intact"
    );

    // The lost message is served again at its queue offset, and its key is indexed once.
    let got = store.get_message(
        "g",
        &victim.topic,
        victim.queue_id,
        victim.queue_offset,
        1,
        1 << 20,
        None,
    );
    assert_eq!(got.status, GetMessageStatus::Found, "{case}");
    let body = got
        .messages
        .first()
        .and_then(|b| decode_record(b, true).ok())
        .map(|m| hash(&m.body));
    assert_eq!(body, Some(victim.body_hash), "{case}");
    let q = store.query_message(&victim.topic, &victim.key, 8, 0, i64::MAX);
    assert_eq!(
        q.commit_log_offsets,
        vec![victim.phys],
        "{case}: key indexed once"
    );

    check_store(&store, &recs, &[], &rt);
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn consume_queue_truncated_mid_unit_after_clean_shutdown() {
    damaged_unit_is_refilled(UnitDamage::TruncatedMidUnit, false);
}

#[test]
fn consume_queue_truncated_mid_unit_after_crash() {
    damaged_unit_is_refilled(UnitDamage::TruncatedMidUnit, true);
}

#[test]
fn consume_queue_unit_off_its_record_after_clean_shutdown() {
    damaged_unit_is_refilled(UnitDamage::OffsetOffByFour, false);
}

#[test]
fn consume_queue_unit_off_its_record_after_crash() {
    damaged_unit_is_refilled(UnitDamage::OffsetOffByFour, true);
}

/// After a crash with every derived structure complete, the verification scan matches every
/// record with its unit and the index, so nothing is re-dispatched and no queue is reconciled
/// unit by unit; the store is still exactly consistent.
#[test]
fn crash_with_complete_queues_redispatches_nothing() {
    let tmp = fast_tempdir();
    let root = tmp.path().join("store");
    let recs = build_template(&root);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let store = open_abnormal(&root);
    let report = store.recovery_report().clone();
    assert!(report.abnormal);
    assert!(report.verified_records > 0, "{report:?}");
    assert_eq!(report.redispatch_from, report.max_phy_offset, "{report:?}");
    assert_eq!(report.redispatched_records, 0, "{report:?}");
    check_store(&store, &recs, &[], &rt);
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
}

/// How many of a queue's newest units a simulated power cut loses (zeroed, so the queue file
/// looks cleanly shorter rather than damaged).
const LOST_TAIL_UNITS: usize = 3;

/// After a crash in which one queue lost its newest units to zeros (its file looks clean, only
/// shorter), re-dispatch starts exactly at the first record that queue lacks, and refills it.
#[test]
fn crash_with_a_queue_short_of_its_tail_redispatches_from_the_first_gap() {
    let tmp = fast_tempdir();
    let root = tmp.path().join("store");
    let recs = build_template(&root);
    let (topic, queue_id) = ("RB", 1);
    let queue: Vec<&Rec> = recs
        .iter()
        .filter(|r| r.consumable && r.topic == topic && r.queue_id == queue_id)
        .collect();
    assert!(queue.len() > LOST_TAIL_UNITS, "the queue has records");
    let lost = queue
        .get(queue.len() - LOST_TAIL_UNITS..)
        .unwrap_or_else(|| panic!("tail"));
    let first_lost = lost.first().unwrap_or_else(|| panic!("tail"));
    for rec in lost {
        let qo = usize::try_from(rec.queue_offset).unwrap_or_else(|e| panic!("{e}"));
        let file_start = (qo - qo % TEST_CQ_ENTRIES_PER_FILE) * CQ_UNIT;
        let cq_file = root
            .join("consumequeue")
            .join(topic)
            .join(queue_id.to_string())
            .join(file_name(file_start as i64));
        let mut data = std::fs::read(&cq_file).unwrap_or_else(|e| panic!("{e}"));
        let unit_pos = (qo % TEST_CQ_ENTRIES_PER_FILE) * CQ_UNIT;
        data.get_mut(unit_pos..unit_pos + CQ_UNIT)
            .unwrap_or_else(|| panic!("unit inside the file"))
            .fill(0);
        std::fs::write(&cq_file, &data).unwrap_or_else(|e| panic!("{e}"));
    }

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let store = open_abnormal(&root);
    let report = store.recovery_report().clone();
    assert!(report.verify_from <= first_lost.phys, "{report:?}");
    assert_eq!(
        report.repaired_queues, 0,
        "zeros are a clean end: {report:?}"
    );
    assert_eq!(report.redispatch_from, first_lost.phys, "{report:?}");
    let after_gap = recs.iter().filter(|r| r.phys >= first_lost.phys).count() as u64;
    assert_eq!(
        report.redispatched_records + report.redispatch_skipped,
        after_gap,
        "{report:?}"
    );
    assert!(
        report.redispatched_records >= LOST_TAIL_UNITS as u64,
        "{report:?}"
    );
    check_store(&store, &recs, &[], &rt);
    store.shutdown().unwrap_or_else(|e| panic!("{e}"));
}
