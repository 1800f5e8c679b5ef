//! Property tests of the CommitLog alone: random append sequences over small segments read back
//! byte-identical, records never span segments (BLANK padding), queue offsets are contiguous per
//! queue, oversize records are refused, and reopening rebuilds the same view; appends committed
//! at once and deferred ones (committed later, or by a roll to the next segment) mix freely.

use std::collections::HashMap;

use bytes::Bytes;
use comet_protocol::message::record::{self, decode_record};
use comet_store::commit_log::CommitLog;
use comet_store::dispatch::scan_records;
use comet_store::{Commit, FlushDiskType, PutMessageStatus};
use comet_testkit::store::*;
use proptest::prelude::*;

const SEGMENT: usize = 16 * 1024;

#[derive(Debug, Clone)]
struct Op {
    topic: usize,
    queue_id: i32,
    body_len: usize,
    batch: usize,
    deferred: bool,
    /// Commit what is pending after this op.
    commit: bool,
}

fn op() -> impl Strategy<Value = Op> {
    (
        0usize..3,
        0i32..4,
        prop_oneof![0usize..200, 200usize..4000, 15_000usize..17_000],
        0usize..4,
        any::<bool>(),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(topic, queue_id, body_len, batch, deferred, commit)| Op {
            topic,
            queue_id,
            body_len,
            batch,
            deferred,
            commit,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn appends_read_back_identically(ops in proptest::collection::vec(op(), 1..80)) {
        let dir = fast_tempdir();
        let mut cfg = test_config(dir.path(), FlushDiskType::AsyncFlush);
        cfg.mapped_file_size_commit_log = SEGMENT;
        let log = CommitLog::new(&cfg);
        log.load().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let topics = ["A", "B", "%RETRY%group"];
        let mut next_qo: HashMap<(usize, i32), i64> = HashMap::new();
        let mut expected: Vec<(i64, String, i32, i64, Bytes)> = Vec::new();
        for (n, op) in ops.iter().enumerate() {
            let body = Bytes::from(vec![(n % 251) as u8; op.body_len]);
            let topic = topics[op.topic];
            let qo = next_qo.entry((op.topic, op.queue_id)).or_insert(0);
            let commit = if op.deferred { Commit::Deferred } else { Commit::Now };
            if op.batch == 0 {
                let msg = message(topic, op.queue_id, body.clone(), Some("t"), None);
                let size = record::encoded_record_size(&msg).unwrap_or(usize::MAX);
                match log.put_message_with(msg, commit) {
                    Ok(a) => {
                        prop_assert!(size + 8 <= SEGMENT);
                        let end = a.wrote_offset + size as i64;
                        if op.deferred {
                            prop_assert!(log.max_offset() < end, "deferred: not readable yet");
                        } else {
                            prop_assert_eq!(log.max_offset(), end, "committed with what was pending");
                        }
                        prop_assert_eq!(a.logics_offset, *qo);
                        prop_assert_eq!(a.wrote_bytes, size);
                        expected.push((a.wrote_offset, topic.to_owned(), op.queue_id, *qo, body));
                        *qo += 1;
                    }
                    Err(status) => {
                        prop_assert_eq!(status, PutMessageStatus::MessageIllegal);
                        prop_assert!(size + 8 > SEGMENT, "only oversize records are refused");
                    }
                }
            } else {
                let entries: Vec<_> = (0..op.batch)
                    .map(|i| comet_protocol::message::batch::BatchEntry {
                        flag: i as i32,
                        body: body.slice(..body.len().min(3000)),
                        properties: Default::default(),
                    })
                    .collect();
                let batch = comet_store::MessageExtBatch {
                    topic: topic.to_owned(),
                    queue_id: op.queue_id,
                    sys_flag: 0,
                    born_timestamp: 1,
                    born_host: born(),
                    store_host: store_host(),
                    reconsume_times: 0,
                    messages: entries.clone(),
                };
                if let Ok(a) = log.put_messages_with(batch, commit) {
                    prop_assert_eq!(a.msg_num, op.batch);
                    prop_assert_eq!(a.logics_offset, *qo);
                    let mut phys = a.wrote_offset;
                    for e in entries {
                        expected.push((phys, topic.to_owned(), op.queue_id, *qo, e.body.clone()));
                        let mut m = message(topic, op.queue_id, e.body, None, None);
                        m.properties = Default::default();
                        phys += record::encoded_record_size(&m).unwrap_or(0) as i64;
                        *qo += 1;
                    }
                }
            }
            if op.commit {
                log.commit().map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
        }
        log.commit().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(!log.commit().map_err(|e| TestCaseError::fail(e.to_string()))?, "nothing left");

        for pass in 0..2 {
            let mut seen = Vec::new();
            let outcome = scan_records(&log, 0, log.max_offset(), |v| {
                seen.push((v.commit_log_offset, v.topic.to_owned(), v.queue_id, v.queue_offset,
                    Bytes::copy_from_slice(v.body), v.size()));
            }, |_, _| None);
            prop_assert_eq!(outcome.next_offset, log.max_offset(), "pass {}", pass);
            prop_assert_eq!(seen.len(), expected.len());
            for (got, want) in seen.iter().zip(&expected) {
                prop_assert_eq!(&(got.0, got.1.clone(), got.2, got.3, got.4.clone()), want);
                let seg = SEGMENT as i64;
                prop_assert_eq!(got.0 / seg, (got.0 + got.5 as i64 - 1) / seg, "record spans segments");
                let bytes = log.get_message(got.0, got.5 as i32).ok_or_else(|| TestCaseError::fail("get"))?;
                let m = decode_record(&bytes, true).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(m.commit_log_offset, got.0);
            }
            // Second pass: a fresh CommitLog over the same files (positions as after load).
            if pass == 0 {
                let end = log.max_offset();
                drop(log);
                let reopened = CommitLog::new(&cfg);
                reopened.load().map_err(|e| TestCaseError::fail(e.to_string()))?;
                reopened.mapped_file_queue().truncate_dirty(end).map_err(|e| TestCaseError::fail(e.to_string()))?;
                return check_reopened(&reopened, &expected);
            }
        }
    }
}

fn check_reopened(
    log: &CommitLog,
    expected: &[(i64, String, i32, i64, Bytes)],
) -> Result<(), TestCaseError> {
    let mut n = 0;
    scan_records(
        log,
        0,
        log.max_offset(),
        |v| {
            if let Some(want) = expected.get(n) {
                assert_eq!(
                    (
                        v.commit_log_offset,
                        v.topic,
                        v.queue_id,
                        v.queue_offset,
                        v.body
                    ),
                    (want.0, want.1.as_str(), want.2, want.3, &want.4[..])
                );
            }
            n += 1;
        },
        |_, _| None,
    );
    prop_assert_eq!(n, expected.len());
    Ok(())
}
