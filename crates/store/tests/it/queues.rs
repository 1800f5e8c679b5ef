//! Integration tests of the ConsumeQueue, the IndexService and the retention helpers, on real
//! files in temporary directories.

use std::fs;
use std::path::Path;

use comet_store::StoreError;
use comet_store::cleanup::{DiskThresholds, assess_disk, disk_usage};
use comet_store::consume_queue::{
    CQ_STORE_UNIT_SIZE, ConsumeQueue, ConsumeQueueTable, CqUnit, DEFAULT_CQ_ENTRIES_PER_FILE,
};
use comet_store::index_file::{index_file_size, java_string_hash};
use comet_store::index_service::{INDEX_DIR, IndexConfig, IndexService, StandbyPlan};
use comet_store::mapped_file::file_name;
use proptest::prelude::*;

type TestResult = Result<(), StoreError>;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |e| StoreError::io(path, e)
}

/// Unit number `i`: records of 100 bytes back to back.
fn unit(i: i64) -> CqUnit {
    CqUnit {
        commit_log_offset: i * 100,
        size: 100,
        tags_code: i * 7 - 3,
    }
}

const TOPIC: &str = "TopicTest";

fn queue_dir(root: &Path, queue_id: i32) -> std::path::PathBuf {
    root.join("consumequeue")
        .join(TOPIC)
        .join(queue_id.to_string())
}

fn filled_queue(root: &Path, epf: usize, n: i64) -> Result<ConsumeQueue, StoreError> {
    let mut cq = ConsumeQueue::open(root, TOPIC, 0, epf)?;
    for i in 0..n {
        cq.put(i, unit(i))?;
    }
    Ok(cq)
}

fn reopen(root: &Path, epf: usize) -> Result<ConsumeQueue, StoreError> {
    let mut cq = ConsumeQueue::open(root, TOPIC, 0, epf)?;
    cq.recover()?;
    Ok(cq)
}

fn copy_dir(from: &Path, to: &Path) -> TestResult {
    fs::create_dir_all(to).map_err(io(to))?;
    for entry in fs::read_dir(from).map_err(io(from))? {
        let entry = entry.map_err(io(from))?;
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), &target).map_err(io(&target))?;
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// ConsumeQueue

#[test]
fn cq_put_get_read_across_files() -> TestResult {
    let dir = tmp();
    let cq = filled_queue(dir.path(), 10, 35)?;
    assert_eq!((cq.min_offset(), cq.max_offset()), (0, 35));
    assert_eq!(cq.file_count(), 4);
    assert_eq!(cq.max_physical_offset(), 34 * 100 + 100);
    for i in 0..35 {
        assert_eq!(cq.get(i), Some(unit(i)), "offset {i}");
    }
    assert_eq!(cq.get(35), None);
    assert_eq!(cq.get(-1), None);
    let mut out = Vec::new();
    cq.read(8, 5, &mut out);
    assert_eq!(
        out,
        (8..13).map(unit).collect::<Vec<_>>(),
        "read spans a file boundary"
    );
    out.clear();
    cq.read(0, 1000, &mut out);
    assert_eq!(out, (0..35).map(unit).collect::<Vec<_>>());
    out.clear();
    cq.read(35, 10, &mut out);
    assert!(out.is_empty());
    // Layout: 20-byte big-endian units, files named by the byte offset of their first unit.
    let second = queue_dir(dir.path(), 0).join(file_name(200));
    let raw = fs::read(&second).map_err(io(&second))?;
    assert_eq!(raw.len(), 10 * CQ_STORE_UNIT_SIZE);
    assert_eq!(&raw[..20], &unit(10).encode());
    assert_eq!(
        i64::from_be_bytes(raw[..8].try_into().unwrap_or_default()),
        1000
    );
    assert_eq!(DEFAULT_CQ_ENTRIES_PER_FILE * CQ_STORE_UNIT_SIZE, 6_000_000);
    Ok(())
}

#[test]
fn cq_put_rules() -> TestResult {
    let dir = tmp();
    let mut cq = filled_queue(dir.path(), 10, 12)?;
    cq.put(5, unit(5))?; // identical re-dispatch: no-op
    assert_eq!(cq.max_offset(), 12);
    assert!(
        cq.put(5, unit(6)).is_err(),
        "a different unit at a used offset"
    );
    assert!(cq.put(14, unit(14)).is_err(), "a gap");
    assert!(cq.put(-1, unit(0)).is_err());
    assert!(
        cq.put(
            12,
            CqUnit {
                commit_log_offset: 1200,
                size: 0,
                tags_code: 0
            }
        )
        .is_err()
    );
    assert!(cq.put(12, CqUnit::BLANK).is_err());
    cq.put(12, unit(12))?;
    assert_eq!(cq.max_offset(), 13);
    Ok(())
}

#[test]
fn cq_queue_starting_mid_way_is_padded() -> TestResult {
    let dir = tmp();
    let mut cq = ConsumeQueue::open(dir.path(), TOPIC, 0, 10)?;
    assert_eq!((cq.min_offset(), cq.max_offset()), (0, 0));
    cq.put(23, unit(23))?;
    cq.put(24, unit(24))?;
    assert_eq!((cq.min_offset(), cq.max_offset()), (23, 25));
    assert_eq!(cq.get(22), None, "padding is below the min offset");
    assert_eq!(cq.get(23), Some(unit(23)));
    let path = queue_dir(dir.path(), 0).join(file_name(20 * 20));
    let raw = fs::read(&path).map_err(io(&path))?;
    for k in 0..3 {
        assert_eq!(
            &raw[k * 20..k * 20 + 20],
            &CqUnit::BLANK.encode(),
            "blank unit {k}"
        );
    }
    let mut out = Vec::new();
    cq.read(20, 10, &mut out);
    assert!(out.is_empty(), "reading below min yields nothing");
    cq.read(23, 10, &mut out);
    assert_eq!(out, vec![unit(23), unit(24)]);
    cq.flush()?;
    drop(cq);
    let cq = reopen(dir.path(), 10)?;
    assert_eq!((cq.min_offset(), cq.max_offset()), (23, 25));
    assert_eq!(cq.max_physical_offset(), 2500);
    Ok(())
}

#[test]
fn cq_reopen_and_recover() -> TestResult {
    let dir = tmp();
    let cq = filled_queue(dir.path(), 10, 25)?;
    cq.flush()?;
    drop(cq);
    let mut cq = reopen(dir.path(), 10)?;
    assert_eq!((cq.min_offset(), cq.max_offset()), (0, 25));
    assert_eq!(cq.max_physical_offset(), 2500);
    for i in 0..25 {
        assert_eq!(cq.get(i), Some(unit(i)));
    }
    for i in 25..31 {
        cq.put(i, unit(i))?;
    }
    cq.recover()?;
    assert_eq!(
        cq.max_offset(),
        31,
        "recovering a live queue changes nothing"
    );
    drop(cq);
    let cq = reopen(dir.path(), 10)?;
    assert_eq!(cq.max_offset(), 31);
    assert_eq!(cq.file_count(), 4);
    // Exactly full last file: the next put opens a new file.
    let dir2 = tmp();
    drop(filled_queue(dir2.path(), 10, 20)?);
    let mut cq = reopen(dir2.path(), 10)?;
    assert_eq!((cq.max_offset(), cq.file_count()), (20, 2));
    cq.put(20, unit(20))?;
    assert_eq!((cq.max_offset(), cq.file_count()), (21, 3));
    Ok(())
}

#[test]
fn cq_recovery_stops_at_every_torn_byte() -> TestResult {
    let template = tmp();
    drop(filled_queue(template.path(), 10, 25)?);
    let qdir = queue_dir(template.path(), 0);
    // Cut the last file (5 units, 100 bytes) at every byte, and the middle file at a few.
    let mut cases: Vec<(i64, usize)> = (0..=100).map(|cut| (400, cut)).collect();
    cases.extend(
        [0usize, 1, 19, 20, 21, 99, 199]
            .iter()
            .map(|&cut| (200, cut)),
    );
    for (file_start, cut) in cases {
        let case = tmp();
        copy_dir(template.path(), case.path())?;
        let path = queue_dir(case.path(), 0).join(file_name(file_start));
        let file = fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(io(&path))?;
        file.set_len(cut as u64).map_err(io(&path))?;
        drop(file);
        let mut cq = reopen(case.path(), 10)?;
        let expected = file_start / 20 + (cut / CQ_STORE_UNIT_SIZE) as i64;
        assert_eq!(cq.max_offset(), expected, "cut {file_start}+{cut}");
        assert_eq!(
            cq.max_physical_offset(),
            if expected > 0 { expected * 100 } else { 0 }
        );
        for i in 0..expected {
            assert_eq!(
                cq.get(i),
                Some(unit(i)),
                "cut {file_start}+{cut}, offset {i}"
            );
        }
        assert_eq!(cq.get(expected), None);
        // The queue keeps working: re-dispatch fills it up again and it survives a reopen.
        for i in expected..25 {
            cq.put(i, unit(i))?;
        }
        drop(cq);
        let cq = reopen(case.path(), 10)?;
        assert_eq!(cq.max_offset(), 25, "cut {file_start}+{cut} after refill");
        assert_eq!(cq.get(24), Some(unit(24)));
    }
    assert!(qdir.exists());
    Ok(())
}

#[test]
fn cq_recovery_zeroes_units_after_a_bad_one() -> TestResult {
    let dir = tmp();
    drop(filled_queue(dir.path(), 10, 25)?);
    // Zero the size of unit 22: recovery stops there and must not resurrect 23 and 24 later.
    let path = queue_dir(dir.path(), 0).join(file_name(400));
    let mut raw = fs::read(&path).map_err(io(&path))?;
    raw[2 * 20 + 8..2 * 20 + 12].copy_from_slice(&0i32.to_be_bytes());
    fs::write(&path, &raw).map_err(io(&path))?;
    let mut cq = reopen(dir.path(), 10)?;
    assert_eq!(cq.max_offset(), 22);
    cq.put(22, unit(22))?;
    drop(cq);
    let cq = reopen(dir.path(), 10)?;
    assert_eq!(cq.max_offset(), 23, "units after the damaged one stay gone");
    // A negative commit-log offset also ends recovery.
    drop(cq);
    let mut raw = fs::read(&path).map_err(io(&path))?;
    raw[..8].copy_from_slice(&(-5i64).to_be_bytes());
    fs::write(&path, &raw).map_err(io(&path))?;
    let cq = reopen(dir.path(), 10)?;
    assert_eq!(cq.max_offset(), 20);
    Ok(())
}

#[test]
fn cq_recovery_says_whether_units_were_lost() -> TestResult {
    let open = |root: &Path| -> Result<(ConsumeQueue, bool), StoreError> {
        let mut cq = ConsumeQueue::open(root, TOPIC, 0, 10)?;
        let lost = cq.recover()?;
        Ok((cq, lost))
    };
    // A clean end (valid units, then zeros) lost nothing.
    let dir = tmp();
    drop(filled_queue(dir.path(), 10, 25)?);
    let (cq, lost) = open(dir.path())?;
    assert_eq!((cq.max_offset(), lost), (25, false));
    drop(cq);
    // The newest file cut in the middle of unit 24: unit 24 is lost, and said to be.
    let path = newest_file(dir.path());
    let file = fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(io(&path))?;
    file.set_len(4 * 20 + 10).map_err(io(&path))?;
    drop(file);
    let (cq, lost) = open(dir.path())?;
    assert_eq!((cq.max_offset(), lost), (24, true));
    assert_eq!(cq.max_physical_offset(), unit(23).commit_log_offset + 100);
    drop(cq);
    // A bad unit with data after it: the units after it are lost.
    let dir = tmp();
    drop(filled_queue(dir.path(), 10, 25)?);
    let path = newest_file(dir.path());
    let mut raw = fs::read(&path).map_err(io(&path))?;
    raw[2 * 20 + 8..2 * 20 + 12].copy_from_slice(&0i32.to_be_bytes());
    fs::write(&path, &raw).map_err(io(&path))?;
    let (cq, lost) = open(dir.path())?;
    assert_eq!((cq.max_offset(), lost), (22, true));
    drop(cq);
    // Recovering again finds the zeroed tail clean.
    let (cq, lost) = open(dir.path())?;
    assert_eq!((cq.max_offset(), lost), (22, false));
    Ok(())
}

/// The newest file (units 20..) of the 25-unit, 10-per-file queue of
/// `cq_recovery_says_whether_units_were_lost`.
fn newest_file(root: &Path) -> std::path::PathBuf {
    queue_dir(root, 0).join(file_name(400))
}

#[test]
fn cq_truncate_from_queue_offset() -> TestResult {
    let dir = tmp();
    let mut cq = filled_queue(dir.path(), 10, 35)?;
    cq.truncate_from_queue_offset(27)?;
    assert_eq!((cq.max_offset(), cq.file_count()), (27, 3));
    assert_eq!(cq.max_physical_offset(), unit(26).commit_log_offset + 100);
    // Cutting at a file's first unit deletes that file.
    cq.truncate_from_queue_offset(20)?;
    assert_eq!((cq.max_offset(), cq.file_count()), (20, 2));
    assert_eq!(cq.get(19), Some(unit(19)));
    cq.put(20, unit(20))?;
    assert!(cq.put(22, unit(22)).is_err(), "no gap after a cut");
    drop(cq);
    let mut cq = reopen(dir.path(), 10)?;
    assert_eq!(cq.max_offset(), 21, "the cut survives a reopen");
    cq.truncate_from_queue_offset(0)?;
    assert_eq!(
        (cq.file_count(), cq.max_offset(), cq.max_physical_offset()),
        (0, 0, 0)
    );
    cq.put(0, unit(0))?;
    assert_eq!(cq.get(0), Some(unit(0)));
    Ok(())
}

#[test]
fn cq_rejects_damaged_directories() -> TestResult {
    let dir = tmp();
    drop(filled_queue(dir.path(), 10, 35)?);
    let qdir = queue_dir(dir.path(), 0);
    // A file larger than the configured size.
    let path = qdir.join(file_name(600));
    fs::write(&path, vec![0u8; 300]).map_err(io(&path))?;
    assert!(matches!(
        ConsumeQueue::open(dir.path(), TOPIC, 0, 10),
        Err(StoreError::Corrupt { .. })
    ));
    fs::write(&path, vec![0u8; 200]).map_err(io(&path))?;
    // A short file that recovery would not rescan (not among the last three).
    let first = qdir.join(file_name(0));
    let full = fs::read(&first).map_err(io(&first))?;
    fs::write(&first, &full[..150]).map_err(io(&first))?;
    assert!(matches!(
        ConsumeQueue::open(dir.path(), TOPIC, 0, 10),
        Err(StoreError::Corrupt { .. })
    ));
    fs::write(&first, &full).map_err(io(&first))?;
    // A hole in the sequence of files.
    fs::remove_file(qdir.join(file_name(200))).map_err(io(&qdir))?;
    assert!(matches!(
        ConsumeQueue::open(dir.path(), TOPIC, 0, 10),
        Err(StoreError::Corrupt { .. })
    ));
    // Stray files are ignored.
    let other = tmp();
    drop(filled_queue(other.path(), 10, 5)?);
    let stray = queue_dir(other.path(), 0).join("00000000000000000000.tmp");
    fs::write(&stray, b"x").map_err(io(&stray))?;
    assert_eq!(reopen(other.path(), 10)?.max_offset(), 5);
    assert!(ConsumeQueue::open(dir.path(), "../evil", 0, 10).is_err());
    assert!(ConsumeQueue::open(dir.path(), TOPIC, 0, 0).is_err());
    Ok(())
}

#[test]
fn cq_truncate_dirty() -> TestResult {
    let dir = tmp();
    let mut cq = filled_queue(dir.path(), 10, 35)?;
    cq.truncate_dirty(3050)?;
    assert_eq!(cq.max_offset(), 31, "units at 3100.. are dropped");
    assert_eq!(cq.max_physical_offset(), 3100);
    assert_eq!(cq.file_count(), 4);
    cq.truncate_dirty(1000)?;
    assert_eq!(
        (cq.max_offset(), cq.file_count()),
        (10, 1),
        "emptied files are deleted"
    );
    assert_eq!(cq.get(9), Some(unit(9)));
    assert_eq!(cq.get(10), None);
    for i in 10..15 {
        cq.put(i, unit(i))?;
    }
    drop(cq);
    let mut cq = reopen(dir.path(), 10)?;
    assert_eq!(cq.max_offset(), 15);
    cq.truncate_dirty(0)?;
    assert_eq!((cq.file_count(), cq.max_physical_offset()), (0, 0));
    Ok(())
}

#[test]
fn cq_delete_expired_and_min_offset() -> TestResult {
    let dir = tmp();
    let mut cq = filled_queue(dir.path(), 10, 35)?;
    // CommitLog now starts at 1500: file 0 (last unit at 900) is wholly before it.
    assert_eq!(cq.delete_expired(1500)?, 1);
    assert_eq!(cq.min_offset(), 10);
    assert!(!queue_dir(dir.path(), 0).join(file_name(0)).exists());
    cq.correct_min_offset(1500);
    assert_eq!(cq.min_offset(), 15);
    assert_eq!(cq.get(14), None);
    assert_eq!(cq.get(15), Some(unit(15)));
    let mut out = Vec::new();
    cq.read(14, 3, &mut out);
    assert!(out.is_empty());
    // Min never moves backwards.
    cq.correct_min_offset(0);
    assert_eq!(cq.min_offset(), 15);
    // Everything expired: the newest file stays, the queue is logically empty.
    assert_eq!(cq.delete_expired(i64::MAX)?, 2);
    assert_eq!(cq.file_count(), 1);
    cq.correct_min_offset(i64::MAX);
    assert_eq!((cq.min_offset(), cq.max_offset()), (35, 35));
    cq.put(35, unit(35))?;
    assert_eq!(cq.get(35), Some(unit(35)));
    drop(cq);
    let cq = reopen(dir.path(), 10)?;
    assert_eq!((cq.min_offset(), cq.max_offset()), (30, 36));
    Ok(())
}

#[test]
fn cq_offset_by_time() -> TestResult {
    let dir = tmp();
    let cq = filled_queue(dir.path(), 10, 40)?;
    // Store time: three messages per second, i.e. runs of equal timestamps.
    let time_of = |offset: i64| 1_000_000 + (offset / 100) / 3 * 1000;
    let store_time = |offset: i64, _size: i32| Some(time_of(offset));
    for ts in (990_000..1_016_000).step_by(250) {
        let expected = (0..40).find(|&i| time_of(i * 100) >= ts).unwrap_or(40);
        assert_eq!(cq.offset_by_time(ts, &store_time), expected, "ts {ts}");
    }
    // Records no longer in the CommitLog count as older than anything.
    let gone_before_1000 = |offset: i64, _size: i32| (offset >= 1000).then(|| time_of(offset));
    assert_eq!(cq.offset_by_time(0, &gone_before_1000), 10);
    Ok(())
}

#[test]
fn cq_table_discovers_and_manages_queues() -> TestResult {
    let dir = tmp();
    {
        let table = ConsumeQueueTable::new(dir.path(), 10);
        for qid in 0..3 {
            let cq = table.find_or_create(TOPIC, qid)?;
            let mut cq = cq.write();
            for i in 0..(5 + i64::from(qid)) {
                cq.put(i, unit(i * 3 + i64::from(qid)))?;
            }
        }
        table
            .find_or_create("Other", 1)?
            .write()
            .put(0, unit(200))?;
        table.flush()?;
    }
    let table = ConsumeQueueTable::load(dir.path(), 10)?;
    table.recover_all()?;
    assert_eq!(table.queue_ids(TOPIC), vec![0, 1, 2]);
    let offsets = table.max_offsets();
    assert_eq!(offsets.get("TopicTest-2"), Some(&7));
    assert_eq!(offsets.get("Other-1"), Some(&1));
    assert_eq!(table.max_physical_offset(), 20_100);
    table.truncate_dirty(1000)?;
    assert_eq!(
        table.find("Other", 1).map(|q| q.read().max_offset()),
        Some(0)
    );
    assert_eq!(table.remove_topic(TOPIC)?, 3);
    assert!(!dir.path().join("consumequeue").join(TOPIC).exists());
    assert!(table.find(TOPIC, 0).is_none());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random queues (start offset, length, file size, reopen points) read back exactly.
    #[test]
    fn cq_random_put_sequences_read_back(
        epf in 1usize..9,
        start in 0i64..30,
        gaps in proptest::collection::vec(1i64..500, 0..60),
        reopen_every in 0usize..20,
    ) {
        let dir = tmp();
        let mut cq = ConsumeQueue::open(dir.path(), TOPIC, 3, epf).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut expected = Vec::new();
        let mut phys = 0i64;
        for (k, gap) in gaps.iter().enumerate() {
            let u = CqUnit { commit_log_offset: phys, size: i32::try_from(*gap).unwrap_or(1), tags_code: gap * 31 };
            phys += gap;
            cq.put(start + k as i64, u).map_err(|e| TestCaseError::fail(e.to_string()))?;
            expected.push(u);
            if reopen_every > 0 && k % reopen_every == reopen_every - 1 {
                drop(cq);
                cq = ConsumeQueue::open(dir.path(), TOPIC, 3, epf).map_err(|e| TestCaseError::fail(e.to_string()))?;
                cq.recover().map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
        }
        let n = expected.len() as i64;
        if n > 0 {
            prop_assert_eq!(cq.min_offset(), start);
            prop_assert_eq!(cq.max_offset(), start + n);
            prop_assert_eq!(cq.max_physical_offset(), phys);
        }
        let mut out = Vec::new();
        cq.read(start, expected.len() + 5, &mut out);
        prop_assert_eq!(&out, &expected);
        for (k, u) in expected.iter().enumerate() {
            prop_assert_eq!(cq.get(start + k as i64), Some(*u));
        }
    }
}

// ------------------------------------------------------------------------------------------------
// IndexService

fn small_index() -> IndexConfig {
    IndexConfig {
        max_hash_slot_num: 8,
        max_index_num: 5,
    }
}

#[test]
fn index_put_query_across_files_and_reopen() -> TestResult {
    let dir = tmp();
    let cfg = small_index();
    let mut index = IndexService::open(dir.path(), cfg)?;
    assert_eq!(index.max_physical_offset(), 0);
    // 12 messages, 2 keys each (uniq key + business key) → 24 entries, 4 per file → 6 files.
    for i in 0..12i64 {
        let uniq = format!("UNIQ{i}");
        let business = format!("order-{}", i % 3);
        index.put(
            TOPIC,
            &[uniq.as_str(), business.as_str(), ""],
            i * 100,
            1_700_000_000_000 + i * 1000,
        )?;
    }
    assert_eq!(index.files().len(), 6);
    assert_eq!(index.max_physical_offset(), 1100);
    let all = (0, i64::MAX);
    assert_eq!(index.query(TOPIC, "UNIQ7", 10, all.0, all.1), vec![700]);
    assert_eq!(
        index.query(TOPIC, "order-1", 10, all.0, all.1),
        vec![1000, 700, 400, 100],
        "newest first"
    );
    assert_eq!(
        index.query(TOPIC, "order-1", 2, all.0, all.1),
        vec![1000, 700],
        "max count"
    );
    assert!(
        index
            .query("OtherTopic", "order-1", 10, all.0, all.1)
            .is_empty()
    );
    assert!(index.query(TOPIC, "nope", 10, all.0, all.1).is_empty());
    // Re-dispatch of an indexed message is skipped.
    index.put(TOPIC, &["UNIQ7"], 700, 1_700_000_007_000)?;
    assert_eq!(index.query(TOPIC, "UNIQ7", 10, all.0, all.1), vec![700]);
    index.flush()?;
    let names: Vec<String> = index.files().iter().map(|f| f.name()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(names, sorted, "file names are unique and increasing");
    assert!(names.iter().all(|n| n.len() == 17));
    drop(index);
    let mut index = IndexService::open(dir.path(), cfg)?;
    assert_eq!(index.files().len(), 6);
    assert_eq!(
        index.query(TOPIC, "order-1", 10, all.0, all.1),
        vec![1000, 700, 400, 100]
    );
    index.put(TOPIC, &["order-1"], 1200, 1_700_000_012_000)?;
    assert_eq!(index.query(TOPIC, "order-1", 1, all.0, all.1), vec![1200]);
    // A different geometry does not silently misread the files.
    drop(index);
    assert!(
        IndexService::open(
            dir.path(),
            IndexConfig {
                max_hash_slot_num: 9,
                max_index_num: 5
            }
        )
        .is_err()
    );
    Ok(())
}

#[test]
fn index_collisions_and_time_filter() -> TestResult {
    let dir = tmp();
    // One slot: every key shares one chain.
    let mut index = IndexService::open(
        dir.path(),
        IndexConfig {
            max_hash_slot_num: 1,
            max_index_num: 64,
        },
    )?;
    let base = 1_700_000_000_000i64;
    for i in 0..30i64 {
        let key = format!("k{}", i % 5);
        index.put(TOPIC, &[key.as_str()], i * 10, base + i * 10_000)?;
    }
    assert_eq!(index.files().len(), 1);
    assert_eq!(
        index.query(TOPIC, "k2", 100, 0, i64::MAX),
        vec![270, 220, 170, 120, 70, 20]
    );
    // Time window [base+70s, base+180s] holds messages 7..=18.
    assert_eq!(
        index.query(TOPIC, "k2", 100, base + 70_000, base + 180_000),
        vec![170, 120, 70]
    );
    assert_eq!(
        index.query(TOPIC, "k3", 100, base + 70_000, base + 180_000),
        vec![180, 130, 80]
    );
    assert!(
        index
            .query(TOPIC, "k3", 100, base + 1_000_000, base + 2_000_000)
            .is_empty()
    );
    // "Aa" and "BB" have the same Java hash: the index cannot tell them apart, the caller checks
    // each message's keys.
    assert_eq!(java_string_hash("Aa"), java_string_hash("BB"));
    index.put(TOPIC, &["Aa"], 1000, base + 400_000)?;
    index.put(TOPIC, &["BB"], 1010, base + 401_000)?;
    assert_eq!(index.query(TOPIC, "Aa", 10, 0, i64::MAX), vec![1010, 1000]);
    Ok(())
}

#[test]
fn index_truncate_and_delete_expired() -> TestResult {
    let dir = tmp();
    let mut index = IndexService::open(dir.path(), small_index())?;
    for i in 0..16i64 {
        index.put(
            TOPIC,
            &[format!("k{i}").as_str()],
            i * 100,
            1_700_000_000_000 + i,
        )?;
    }
    assert_eq!(index.files().len(), 4);
    index.truncate_dirty(950)?;
    assert_eq!(index.max_physical_offset(), 900);
    assert_eq!(index.files().len(), 3, "the wholly dirty file is deleted");
    assert!(index.query(TOPIC, "k10", 10, 0, i64::MAX).is_empty());
    assert_eq!(index.query(TOPIC, "k9", 10, 0, i64::MAX), vec![900]);
    // Re-dispatch after the truncation indexes again.
    index.put(TOPIC, &["k10"], 1000, 1_700_000_000_010)?;
    assert_eq!(index.query(TOPIC, "k10", 10, 0, i64::MAX), vec![1000]);
    assert_eq!(
        index.delete_expired(650)?,
        1,
        "only the file ending at 300 is before 650"
    );
    assert!(index.query(TOPIC, "k1", 10, 0, i64::MAX).is_empty());
    assert_eq!(index.query(TOPIC, "k5", 10, 0, i64::MAX), vec![500]);
    assert_eq!(
        index.delete_expired(i64::MAX)?,
        1,
        "the newest file is kept"
    );
    assert_eq!(index.files().len(), 1);
    Ok(())
}

/// Makes the next file ahead, as the ConsumeQueue flush thread does; returns its path.
fn make_standby(index: &IndexService) -> Result<std::path::PathBuf, StoreError> {
    if !index.standby_due() {
        return Err(StoreError::Config("no standby is due".into()));
    }
    let plan = plan_standby(index)?;
    let path = plan.path().to_path_buf();
    plan.make()?;
    Ok(path)
}

/// A plan for the next file, as the ConsumeQueue flush thread takes one, left for the test to make.
fn plan_standby(index: &IndexService) -> Result<StandbyPlan, StoreError> {
    index
        .standby()
        .plan()
        .ok_or_else(|| StoreError::Config("a standby is ready or being made".into()))
}

fn file_paths(index: &IndexService) -> Vec<std::path::PathBuf> {
    index
        .files()
        .iter()
        .map(|f| f.path().to_path_buf())
        .collect()
}

fn put_one(index: &mut IndexService, i: i64) -> TestResult {
    index.put(
        TOPIC,
        &[format!("k{i}").as_str()],
        i * 100,
        1_700_000_000_000 + i * 1000,
    )
}

#[test]
fn index_rolls_into_the_file_made_ahead() -> TestResult {
    let dir = tmp();
    let mut index = IndexService::open(dir.path(), small_index())?;
    // A fresh store: the first file is due at once, and one standby at a time.
    let first = make_standby(&index)?;
    assert!(index.standby().is_ready());
    assert!(index.standby().plan().is_none(), "one standby at a time");
    assert!(
        index.files().is_empty(),
        "a standby is not a file of the index"
    );
    assert!(index.query(TOPIC, "k0", 10, 0, i64::MAX).is_empty());
    put_one(&mut index, 0)?;
    assert_eq!(
        file_paths(&index),
        vec![first.clone()],
        "the put used the file made ahead"
    );
    assert!(!index.standby().is_ready());
    // Not due again until the newest file is 90 % full (all 4 of its entries here).
    for i in 1..4 {
        assert!(!index.standby_due(), "due at {i} entries");
        put_one(&mut index, i)?;
    }
    let second = make_standby(&index)?;
    put_one(&mut index, 4)?;
    assert_eq!(file_paths(&index), vec![first, second]);
    let header = *index.files()[1].header();
    assert_eq!(
        header.begin_phy_offset, 400,
        "the first entry sets the span"
    );
    assert_eq!(header.begin_timestamp, 1_700_000_004_000);
    assert_eq!(index.query(TOPIC, "k4", 10, 0, i64::MAX), vec![400]);
    assert_eq!(index.query(TOPIC, "k2", 10, 0, i64::MAX), vec![200]);
    Ok(())
}

#[test]
fn a_roll_waits_for_the_file_being_made() -> TestResult {
    let dir = tmp();
    let mut index = IndexService::open(dir.path(), small_index())?;
    let plan = plan_standby(&index)?;
    let planned = plan.path().to_path_buf();
    // The file is made on another thread, before or while the roll waits: either way the roll
    // takes it and makes no second file.
    let maker = std::thread::spawn(move || plan.make());
    put_one(&mut index, 0)?;
    maker
        .join()
        .map_err(|_| StoreError::Config("maker panicked".into()))??;
    assert_eq!(file_paths(&index), vec![planned]);
    let names = fs::read_dir(dir.path().join(INDEX_DIR)).map_err(io(dir.path()))?;
    assert_eq!(names.count(), 1, "one file on disk");
    Ok(())
}

#[test]
fn a_roll_that_cannot_wait_names_its_file_past_the_late_one() -> TestResult {
    let dir = tmp();
    let mut index = IndexService::open(dir.path(), small_index())?;
    let plan = plan_standby(&index)?;
    let late = plan.path().to_path_buf();
    // Nobody makes the planned file: the roll waits out STANDBY_WAIT, then makes its own.
    put_one(&mut index, 0)?;
    assert_eq!(index.files().len(), 1);
    let own = index.files()[0].name();
    let reserved = late.file_name().map(|n| n.to_string_lossy().into_owned());
    assert!(
        Some(own.as_str()) > reserved.as_deref(),
        "{own} is past {reserved:?}"
    );
    // The late file, made after all, is deleted rather than kept as a standby.
    plan.make()?;
    assert!(!late.exists());
    assert!(!index.standby().is_ready());
    assert_eq!(index.query(TOPIC, "k0", 10, 0, i64::MAX), vec![0]);
    Ok(())
}

#[test]
fn a_standby_left_by_a_crash_opens_as_an_empty_newest_file() -> TestResult {
    let dir = tmp();
    let mut index = IndexService::open(dir.path(), small_index())?;
    for i in 0..4 {
        put_one(&mut index, i)?;
    }
    let standby = make_standby(&index)?;
    // A crash: no discard; the standby's header still says 0.
    drop(index);
    let mut index = IndexService::open(dir.path(), small_index())?;
    assert_eq!(index.files().len(), 2);
    assert_eq!(index.files()[1].path(), standby.as_path());
    let header = *index.files()[1].header();
    assert_eq!(
        (
            header.begin_phy_offset,
            header.end_phy_offset,
            header.begin_timestamp
        ),
        (300, 300, 1_700_000_003_000),
        "the empty newest file starts where the one before ended"
    );
    assert_eq!(
        index.max_physical_offset(),
        300,
        "recovery sees the index's true end"
    );
    assert!(
        !index.standby_due(),
        "the empty newest file is the next one"
    );
    assert_eq!(index.query(TOPIC, "k3", 10, 0, i64::MAX), vec![300]);
    put_one(&mut index, 4)?;
    assert_eq!(
        index.files().len(),
        2,
        "the left standby takes the next entry"
    );
    assert_eq!(index.query(TOPIC, "k4", 10, 0, i64::MAX), vec![400]);
    // A clean shutdown deletes an unused standby instead.
    for i in 5..8 {
        put_one(&mut index, i)?;
    }
    let unused = make_standby(&index)?;
    index.standby().discard()?;
    assert!(!unused.exists());
    Ok(())
}

#[test]
fn index_default_file_is_sparse() -> TestResult {
    use std::os::unix::fs::MetadataExt;
    let dir = tmp();
    let mut index = IndexService::open(dir.path(), IndexConfig::default())?;
    index.put(TOPIC, &["a", "b"], 0, 1_700_000_000_000)?;
    index.flush()?;
    let file = index.files().first().map(|f| f.path().to_path_buf());
    let Some(path) = file else {
        return Err(StoreError::Config("no index file".into()));
    };
    let meta = fs::metadata(&path).map_err(io(&path))?;
    assert_eq!(
        meta.len() as usize,
        index_file_size(5_000_000, 20_000_000).unwrap_or(0)
    );
    assert_eq!(meta.len(), 420_000_040);
    assert!(
        meta.blocks() * 512 < 4 * 1024 * 1024,
        "{} bytes allocated",
        meta.blocks() * 512
    );
    assert!(path.starts_with(dir.path().join(INDEX_DIR)));
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// Retention

#[test]
fn disk_usage_of_the_store_filesystem() -> TestResult {
    let dir = tmp();
    let usage = disk_usage(dir.path())?;
    let ratio = usage.used_ratio();
    assert!(ratio.is_some_and(|r| (0.0..=1.0).contains(&r)));
    // Whatever the machine's disk, thresholds of 0 % / 100 % classify it at the extremes.
    let all_full = DiskThresholds {
        max_used_ratio: -1.0,
        clean_forcibly_ratio: -1.0,
        warning_ratio: -1.0,
    };
    assert_eq!(
        assess_disk(ratio, &all_full),
        comet_store::cleanup::DiskPressure::Full
    );
    let never = DiskThresholds {
        max_used_ratio: 2.0,
        clean_forcibly_ratio: 2.0,
        warning_ratio: 2.0,
    };
    assert_eq!(
        assess_disk(ratio, &never),
        comet_store::cleanup::DiskPressure::Normal
    );
    Ok(())
}

/// The consume-queue flush takes handles of the dirty files under the queue's read lock and
/// msyncs them after releasing it: only files with unflushed units are handed out, a flushed
/// file is clean until the next unit, and a handle still flushes after retention deleted its
/// file.
#[test]
fn cq_dirty_files_are_flushed_outside_the_queue() -> TestResult {
    let dir = tmp();
    let mut cq = filled_queue(dir.path(), 10, 25)?;
    let dirty = cq.dirty_files();
    assert_eq!(dirty.len(), 3, "three files hold unflushed units");
    for file in &dirty {
        file.flush()?;
    }
    assert!(cq.dirty_files().is_empty());
    cq.put(25, unit(25))?;
    let dirty = cq.dirty_files();
    assert_eq!(dirty.len(), 1, "only the file the new unit went to");
    assert_eq!(cq.delete_expired(i64::MAX)?, 2);
    for file in &dirty {
        file.flush()?;
    }
    assert!(cq.dirty_files().is_empty());
    let got = cq.get(25).map(|u| u.commit_log_offset);
    assert_eq!(got, Some(2500));
    Ok(())
}
