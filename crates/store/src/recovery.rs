//! Start-up recovery: find where the CommitLog's valid data ends, cut everything after it, and
//! make the ConsumeQueues and the index agree with the log exactly.
//!
//! - **Normal** (no `abort` file: the last run shut down cleanly): verify from the 3rd-last
//!   segment, as RocketMQ 4.9 does; older segments are trusted.
//! - **Abnormal** (the `abort` file survived: crash, kill -9, power cut): walk back from the
//!   newest segment to the first whose first record is valid and was stored at or before the
//!   checkpoint's `min(physic, logics) − 3 s` — everything before that is known durable in both
//!   the log and the queues — and verify forward from there.
//!
//! Verifying a record means: a known magic, a TOTALSIZE that matches its fields and fits the
//! segment, a PHYSICALOFFSET equal to where it sits, a properties string ending with its 0x02
//! separator (catches a record torn inside its properties), and (with `check_crc_on_recover`) the
//! body CRC. The first failure ends the valid log. Then every ConsumeQueue unit pointing into the
//! verified range is checked against its record (topic, queue id, queue offset, size, tags):
//! a unit pointing at a genuine record whose header says otherwise means the header is damaged
//! (bit rot in a field no CRC covers), so the log ends before that record too; a unit pointing at
//! no record at all means the queue is damaged, so the queue is cut back there and refilled from
//! the log. The tail after the end is zeroed (so no later scan can
//! resurrect a stale record that happens to sit on a record boundary) and later segments are
//! deleted. ConsumeQueue units and index entries at or past the end are dropped, and every valid
//! record after what the ConsumeQueues already cover is re-dispatched, so that every unit points
//! at a valid record and no record is missing. Damage is reported with file and offset, through
//! `tracing::warn!` and the returned [`RecoveryReport`]; nothing here panics on bad data.

use std::path::PathBuf;
use std::sync::Arc;

use comet_protocol::message::record;
use comet_protocol::message::{BLANK_ENTRY_LEN, BLANK_MAGIC};
use parking_lot::RwLock;

use crate::checkpoint::Checkpoint;
use crate::commit_log::CommitLog;
use crate::consume_queue::{ConsumeQueueTable, SharedConsumeQueue};
use crate::dispatch::{DispatchRequest, Dispatcher, SCHEDULE_TOPIC, scan_records};
use crate::error::StoreError;
use crate::index_service::IndexService;
use crate::mapped_file::{MappedFile, OS_PAGE_SIZE};

/// The byte that ends every properties string (§5.4).
const PROPERTY_SEPARATOR_BYTE: u8 = 0x02;
/// Normal recovery re-verifies this many of the newest segments.
pub const NORMAL_RECOVERY_LAST_FILES: usize = 3;

/// Where the CommitLog stopped being valid, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corruption {
    pub file: PathBuf,
    /// Global CommitLog offset of the first invalid byte.
    pub offset: i64,
    pub reason: String,
}

/// What recovery found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The last run did not shut down cleanly.
    pub abnormal: bool,
    /// Offset verification started from (start of a segment).
    pub verify_from: i64,
    /// Records verified.
    pub verified_records: u64,
    /// End of the valid CommitLog (the next append goes here).
    pub max_phy_offset: i64,
    /// Set when data after the valid end was cut off: the offset it was cut at.
    pub truncated_from: Option<i64>,
    /// Approximate bytes of data discarded after the valid end (page granularity).
    pub dropped_bytes: u64,
    /// Segments deleted because they lay after the valid end.
    pub deleted_segments: usize,
    /// Set when the valid log ended at something other than clean zeros.
    pub corruption: Option<Corruption>,
    /// Offset re-dispatch started from.
    pub redispatch_from: i64,
    /// Records re-dispatched into the ConsumeQueues and index.
    pub redispatched_records: u64,
    /// ConsumeQueues cut back because a unit pointed at no record.
    pub repaired_queues: usize,
    /// Lowest CommitLog offset a repaired queue was cut back to.
    pub repair_from: Option<i64>,
}

/// The pieces recovery works on.
pub struct RecoveryContext<'a> {
    pub commit_log: &'a CommitLog,
    pub queues: &'a ConsumeQueueTable,
    pub index: Option<&'a RwLock<IndexService>>,
    pub dispatcher: &'a Dispatcher,
    pub checkpoint: &'a Checkpoint,
    pub check_crc: bool,
    /// `messageIndexSafe`: the index timestamp also bounds the abnormal start file.
    pub message_index_safe: bool,
}

/// Why verification stopped inside a segment.
enum Stop {
    /// Clean end: zeros where the next record would be.
    Clean,
    /// Invalid data.
    Corrupt(String),
}

/// Verifies the record at `buf` (which starts at global `offset`).
fn verify_record(buf: &[u8], offset: i64, check_crc: bool) -> Result<usize, Stop> {
    if record::peek_total_size(buf) == Some(0) && record::peek_magic(buf) == Some(0) {
        return Err(Stop::Clean);
    }
    let view = record::decode_record_view(buf).map_err(|e| Stop::Corrupt(e.to_string()))?;
    if view.commit_log_offset != offset {
        return Err(Stop::Corrupt(format!(
            "PHYSICALOFFSET field {} does not match the record position",
            view.commit_log_offset
        )));
    }
    // Every writer ends a non-empty properties string with the 0x02 separator; a record whose
    // last byte is anything else was torn while its properties were being copied (the body CRC
    // cannot see that).
    if !view.properties.is_empty() && view.properties.last() != Some(&PROPERTY_SEPARATOR_BYTE) {
        return Err(Stop::Corrupt(
            "properties do not end with the 0x02 separator (torn record)".to_owned(),
        ));
    }
    if check_crc && !view.body_crc_matches() {
        return Err(Stop::Corrupt(format!(
            "body CRC mismatch (stored {:#x})",
            view.body_crc
        )));
    }
    Ok(view.size())
}

/// Whether `file`'s first record is valid and stored no later than `max_timestamp`.
fn first_record_matches(file: &MappedFile, max_timestamp: i64) -> bool {
    let Some(buf) = file.read_at(0, file.file_size()) else {
        return false;
    };
    match record::decode_record_view(buf) {
        Ok(view) => {
            view.commit_log_offset == file.file_from_offset()
                && view.store_timestamp != 0
                && view.store_timestamp <= max_timestamp
        }
        Err(_) => false,
    }
}

/// Approximate bytes of data from `pos` on: pages are scanned until the first all-zero page
/// (appends are contiguous, so that is where written data ended).
fn data_extent(file: &MappedFile, pos: usize) -> u64 {
    let size = file.file_size();
    let mut at = pos;
    while at < size {
        let chunk_end = ((at / OS_PAGE_SIZE) + 1) * OS_PAGE_SIZE;
        let len = chunk_end.min(size) - at;
        match file.read_at(at, len) {
            Some(chunk) if chunk.iter().any(|b| *b != 0) => at += len,
            _ => break,
        }
    }
    u64::try_from(at - pos).unwrap_or(0)
}

/// Runs recovery; `abnormal` is whether the `abort` file was present.
pub fn recover(ctx: &RecoveryContext<'_>, abnormal: bool) -> Result<RecoveryReport, StoreError> {
    let mut report = RecoveryReport {
        abnormal,
        ..RecoveryReport::default()
    };
    ctx.queues.recover_all()?;
    let queue = ctx.commit_log.mapped_file_queue();
    let files = queue.files();

    let end = if files.is_empty() {
        queue.set_flushed_where(0);
        0
    } else {
        let start = if abnormal {
            let limit = if ctx.message_index_safe {
                ctx.checkpoint.min_timestamp_index()
            } else {
                ctx.checkpoint.min_timestamp()
            };
            files
                .iter()
                .rposition(|f| first_record_matches(f, limit))
                .unwrap_or(0)
        } else {
            files.len().saturating_sub(NORMAL_RECOVERY_LAST_FILES)
        };
        report.verify_from = files.get(start).map_or(0, |f| f.file_from_offset());
        verify_and_truncate(ctx, &files, start, &mut report)?
    };
    report.max_phy_offset = end;

    // Derived structures: nothing may point at or past the end.
    ctx.queues.truncate_dirty(end)?;
    if let Some(index) = ctx.index {
        index.write().truncate_dirty(end)?;
    }
    let min_phy = ctx.commit_log.min_offset();
    for q in ctx.queues.all() {
        q.write().correct_min_offset(min_phy);
    }

    // Re-dispatch what the queues do not cover yet.
    let cq_max = ctx.queues.max_physical_offset();
    let mut from = if abnormal {
        cq_max.min(report.verify_from)
    } else {
        cq_max
    };
    if let Some(repair) = report.repair_from {
        from = from.min(repair);
    }
    from = from.max(min_phy);
    report.redispatch_from = from;
    if from < end {
        let dispatcher = ctx.dispatcher;
        let outcome = scan_records(
            ctx.commit_log,
            from,
            end,
            |view| {
                let req = DispatchRequest::from_view(view, dispatcher.delay_levels_ms());
                if let Err(e) = dispatcher.dispatch(&req) {
                    tracing::warn!(topic = req.topic, queue_id = req.queue_id,
                        offset = req.commit_log_offset, error = %e, "re-dispatch during recovery failed");
                }
            },
            |offset, reason| {
                tracing::warn!(offset, reason, "undecodable record during re-dispatch");
                None
            },
        );
        report.redispatched_records = outcome.records;
    }

    ctx.commit_log.set_topic_queue_table(
        ctx.queues
            .entries()
            .into_iter()
            .map(|(topic, id, q)| (topic, id, q.read().max_offset())),
    );
    if report.truncated_from.is_some() || report.corruption.is_some() {
        tracing::warn!(?report, "commit log recovered with truncation");
    } else {
        tracing::info!(abnormal, max_phy_offset = end, "commit log recovered");
    }
    Ok(report)
}

/// Where the forward scan stopped: segment index and why.
struct ScanStop {
    idx: usize,
    why: Stop,
}

/// Verifies segments from `files[start]` on; returns the valid end and where/why it stopped.
fn scan_valid_end(
    ctx: &RecoveryContext<'_>,
    files: &[Arc<MappedFile>],
    start: usize,
    report: &mut RecoveryReport,
) -> (i64, Option<ScanStop>) {
    'files: for (idx, file) in files.iter().enumerate().skip(start) {
        let size = file.file_size();
        let base = file.file_from_offset();
        let mut pos = 0usize;
        loop {
            if size - pos < BLANK_ENTRY_LEN {
                continue 'files;
            }
            let Some(buf) = file.read_at(pos, size - pos) else {
                continue 'files;
            };
            if record::peek_magic(buf) == Some(BLANK_MAGIC) {
                let declared = record::peek_total_size(buf).and_then(|n| usize::try_from(n).ok());
                if declared == Some(size - pos) {
                    continue 'files;
                }
                let why = Stop::Corrupt(format!(
                    "BLANK entry declares {declared:?} bytes but {} remain",
                    size - pos
                ));
                return (base + to_i64(pos), Some(ScanStop { idx, why }));
            }
            let offset = base + to_i64(pos);
            match verify_record(buf, offset, ctx.check_crc) {
                Ok(len) => {
                    report.verified_records += 1;
                    pos += len;
                }
                Err(why) => return (offset, Some(ScanStop { idx, why })),
            }
        }
    }
    let end = files
        .last()
        .map_or(0, |f| f.file_from_offset() + to_i64(f.file_size()));
    (end, None)
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// How one ConsumeQueue unit in the verified range disagrees with the log.
enum UnitMismatch {
    /// The unit points at a genuine record (right PHYSICALOFFSET, valid CRC) whose queue fields
    /// no longer match: the record header is damaged, the log must end before it.
    DamagedRecord { offset: i64, reason: String },
    /// The unit points at no record: the queue is damaged from this unit on.
    DamagedUnit { offset: i64 },
}

/// Checks every ConsumeQueue unit pointing into `[from, end)` against the record it points at
/// (topic, queue id, queue offset, size, transaction type, tags code). Returns, per queue, the
/// first disagreement.
fn reconcile_units(
    ctx: &RecoveryContext<'_>,
    from: i64,
    end: i64,
) -> Vec<(SharedConsumeQueue, UnitMismatch)> {
    const CHUNK: usize = 1024;
    let dispatcher = ctx.dispatcher;
    let mut found = Vec::new();
    for (topic, queue_id, shared) in ctx.queues.entries() {
        let cq = shared.read();
        let (mut lo, mut hi) = (cq.min_offset(), cq.max_offset());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if cq.get(mid).is_none_or(|u| u.commit_log_offset < from) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let mut qo = lo;
        let mut units = Vec::with_capacity(CHUNK);
        let mismatch = 'queue: loop {
            units.clear();
            cq.read(qo, CHUNK, &mut units);
            if units.is_empty() {
                break None;
            }
            for unit in &units {
                if unit.commit_log_offset >= end {
                    break 'queue None;
                }
                if unit.is_blank() {
                    qo += 1;
                    continue;
                }
                let Some(file) = ctx.commit_log.find_file(unit.commit_log_offset) else {
                    break 'queue Some(UnitMismatch::DamagedUnit {
                        offset: unit.commit_log_offset,
                    });
                };
                let pos = usize::try_from(unit.commit_log_offset - file.file_from_offset())
                    .unwrap_or(usize::MAX);
                let buf = file
                    .read_at(pos, file.file_size().saturating_sub(pos))
                    .unwrap_or(&[]);
                let view = record::decode_record_view(buf).ok();
                // The forward scan already verified the CRC of every record in the range;
                // a unit pointing at one is recognised by its PHYSICALOFFSET field.
                let Some(view) = view.filter(|v| v.commit_log_offset == unit.commit_log_offset)
                else {
                    break 'queue Some(UnitMismatch::DamagedUnit {
                        offset: unit.commit_log_offset,
                    });
                };
                let req = DispatchRequest::from_view(&view, dispatcher.delay_levels_ms());
                let tags_ok = req.topic == SCHEDULE_TOPIC || req.tags_code == unit.tags_code;
                let agrees = req.topic == topic
                    && req.queue_id == queue_id
                    && req.consume_queue_offset == qo
                    && req.msg_size == unit.size
                    && req.is_consumable()
                    && tags_ok;
                if !agrees {
                    break 'queue Some(UnitMismatch::DamagedRecord {
                        offset: unit.commit_log_offset,
                        reason: format!(
                            "record disagrees with ConsumeQueue {topic}-{queue_id} unit {qo} \
                             (record says {}-{} offset {})",
                            req.topic, req.queue_id, req.consume_queue_offset
                        ),
                    });
                }
                qo += 1;
            }
        };
        drop(cq);
        if let Some(m) = mismatch {
            found.push((shared, m));
        }
    }
    found
}

/// Verifies the log from `files[start]`, reconciles the ConsumeQueues with it, truncates
/// everything after the valid end, and returns that end.
fn verify_and_truncate(
    ctx: &RecoveryContext<'_>,
    files: &[Arc<MappedFile>],
    start: usize,
    report: &mut RecoveryReport,
) -> Result<i64, StoreError> {
    let queue = ctx.commit_log.mapped_file_queue();
    let (mut end, stop) = scan_valid_end(ctx, files, start, report);
    let mut corruption = match stop {
        Some(ScanStop {
            idx,
            why: Stop::Corrupt(reason),
            ..
        }) => Some(Corruption {
            file: files
                .get(idx)
                .map_or_else(PathBuf::new, |f| f.path().to_path_buf()),
            offset: end,
            reason,
        }),
        _ => None,
    };

    for (shared, mismatch) in reconcile_units(ctx, report.verify_from, end) {
        match mismatch {
            UnitMismatch::DamagedRecord { offset, reason } => {
                if offset < end {
                    end = offset;
                    let file = ctx
                        .commit_log
                        .find_file(offset)
                        .map_or_else(PathBuf::new, |f| f.path().to_path_buf());
                    corruption = Some(Corruption {
                        file,
                        offset,
                        reason,
                    });
                }
            }
            UnitMismatch::DamagedUnit { offset } => {
                let mut cq = shared.write();
                tracing::warn!(
                    topic = cq.topic(),
                    queue_id = cq.queue_id(),
                    offset,
                    "consume queue unit points at no record; dropping it and the units after it"
                );
                cq.truncate_dirty(offset)?;
                report.repaired_queues += 1;
                report.repair_from =
                    Some(report.repair_from.map_or(offset, |r: i64| r.min(offset)));
            }
        }
    }

    // What is discarded: the rest of the segment holding `end` and every later segment.
    let end_idx = files
        .iter()
        .position(|f| end < f.file_from_offset() + to_i64(f.file_size()))
        .unwrap_or(files.len());
    let mut dropped = files.get(end_idx).map_or(0, |f| {
        data_extent(f, usize::try_from(end - f.file_from_offset()).unwrap_or(0))
    });
    let later = files.get(end_idx + 1..).unwrap_or(&[]);
    for f in later {
        dropped += data_extent(f, 0);
    }
    report.deleted_segments = later.len();
    report.dropped_bytes = dropped;
    if dropped > 0 || !later.is_empty() {
        report.truncated_from = Some(end);
    }
    if let Some(c) = &corruption {
        tracing::warn!(file = %c.file.display(), offset = c.offset, reason = %c.reason,
            "commit log invalid from here; truncating");
    }
    report.corruption = corruption;
    // Zero the tail unconditionally: cheap (hole punching) and it guarantees nothing stale
    // survives past the end.
    queue.truncate_dirty(end)?;
    queue.set_flushed_where(end);
    Ok(end)
}
