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
//!
//! Where re-dispatch starts. Undamaged queues are complete up to the largest physical end any
//! queue reaches (a clean shutdown drains the dispatcher; after a crash the verification start
//! bounds what may be missing), so that is the usual start. A *damaged* queue — one whose own
//! recovery lost units (torn or short file) or that was cut back at a unit pointing at no record
//! — is complete only up to the end of its last good unit, which may lie far before what other
//! queues reach; re-dispatch therefore starts at the lowest such end. That point is a record
//! boundary (the good unit's record was verified, or lies in the trusted older log), so the scan
//! never starts inside a record. Starting early is safe because dispatch is idempotent per queue:
//! a unit already present at its queue offset is left alone, an index entry at or before the
//! index's last offset is skipped, and a record that would leave a gap in its queue is refused.
//!
//! One decode per record. The verification scan also matches each record with its ConsumeQueue
//! unit and the index ([`Coverage`]), so after a crash (a) queues whose every unit in the range
//! was matched are not reconciled again, (b) re-dispatch starts at the first record some derived
//! structure lacks rather than at the start of the verified range, and (c) re-dispatch passes over
//! records already in place from their fixed header, without parsing properties. Without it, a
//! restart after kill -9 would decode every record of the verified segment three times.
//! ([`Coverage`] lives in `coverage.rs`.)

mod coverage;

use std::path::PathBuf;
use std::sync::Arc;

use comet_protocol::message::record;
use comet_protocol::message::{BLANK_ENTRY_LEN, BLANK_MAGIC};
use parking_lot::RwLock;

use self::coverage::Coverage;
use crate::checkpoint::Checkpoint;
use crate::commit_log::CommitLog;
use crate::consume_queue::{ConsumeQueue, ConsumeQueueTable, SharedConsumeQueue};
use crate::dispatch::{DispatchRequest, Dispatcher, SCHEDULE_TOPIC, scan_records};
use crate::error::StoreError;
use crate::index_service::IndexService;
use crate::mapped_file::{MappedFile, OS_PAGE_SIZE};

/// The byte that ends every `name 0x01 value` pair of a properties string, the last one too.
const PROPERTY_SEPARATOR_BYTE: u8 = 0x02;
/// Normal recovery re-verifies this many of the newest segments.
pub const NORMAL_RECOVERY_LAST_FILES: usize = 3;
/// Records recovery reads between two releases of the segments' mapped pages.
const RECOVERY_RELEASE_RECORDS: u64 = 4096;

/// Recovery reads the segments through their maps; every [`RECOVERY_RELEASE_RECORDS`] records
/// it unmaps them from the process again (`page_release.rs`), so a restart over a large log
/// does not end with the whole verified range mapped: at most 4096 records' pages (their
/// fault-around included) are mapped at a time.
struct RecoveryPages<'a> {
    commit_log: &'a CommitLog,
    records: u64,
}

impl<'a> RecoveryPages<'a> {
    fn new(commit_log: &'a CommitLog) -> Self {
        Self {
            commit_log,
            records: 0,
        }
    }

    fn read_one(&mut self) {
        self.records += 1;
        if self.records.is_multiple_of(RECOVERY_RELEASE_RECORDS) {
            self.release();
        }
    }

    fn release(&self) {
        if !self.commit_log.page_release().is_enabled() {
            return;
        }
        for file in self.commit_log.mapped_file_queue().files() {
            if let Err(e) = file.release_pages_below(usize::MAX) {
                tracing::debug!(error = %e, "releasing recovered pages failed");
            }
        }
    }
}

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
    /// Records re-dispatched into the ConsumeQueues and index (the scan from `redispatch_from`
    /// minus `redispatch_skipped`).
    pub redispatched_records: u64,
    /// Records the re-dispatch scan passed over because every derived structure already had
    /// them (their unit is in place and the index reaches past them).
    pub redispatch_skipped: u64,
    /// ConsumeQueues found damaged (units lost to a torn or short file, or a unit pointing at no
    /// record) and refilled from the log.
    pub repaired_queues: usize,
    /// Lowest CommitLog offset a repaired queue was refilled from: the end of its last good unit
    /// (a record boundary), or the log's start for a queue left without units.
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

/// Verifies the record at `buf` (which starts at global `offset`) and returns its decoded view.
fn verify_record(buf: &[u8], offset: i64, check_crc: bool) -> Result<record::RecordView<'_>, Stop> {
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
    Ok(view)
}

/// Where an abnormal recovery starts verifying: the index in `files` (oldest first) of the
/// newest segment whose first record is valid and stored no later than `max_timestamp` (the
/// checkpoint's bound), or 0. Everything before that segment is trusted, never read.
pub(crate) fn abnormal_start(files: &[Arc<MappedFile>], max_timestamp: i64) -> usize {
    files
        .iter()
        .rposition(|f| first_record_matches(f, max_timestamp))
        .unwrap_or(0)
}

/// Whether `file`'s first record is valid and stored no later than `max_timestamp`. Reads what
/// is published: at recovery that is the whole file (see [`MappedFile::open`]), on a running
/// store the segment being appended to up to its wrote position.
fn first_record_matches(file: &MappedFile, max_timestamp: i64) -> bool {
    let Some(buf) = file.read_at(0, file.wrote_position()) else {
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
    let mut damaged = ctx.queues.recover_all()?;
    let mut coverage = Coverage::new(ctx.queues, ctx.index);
    let mut pages = RecoveryPages::new(ctx.commit_log);
    let end = verify_log(ctx, &mut coverage, &mut report, &mut damaged, &mut pages)?;
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

    let from = redispatch_start(ctx, &coverage, damaged, end, min_phy, &mut report);
    if from < end {
        redispatch(ctx, from, end, &mut coverage, &mut pages, &mut report);
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

/// Picks the segment verification starts from (see the module docs), verifies the log from
/// there and cuts everything after its valid end, which it returns.
fn verify_log(
    ctx: &RecoveryContext<'_>,
    coverage: &mut Coverage<'_>,
    report: &mut RecoveryReport,
    damaged: &mut Vec<SharedConsumeQueue>,
    pages: &mut RecoveryPages<'_>,
) -> Result<i64, StoreError> {
    let queue = ctx.commit_log.mapped_file_queue();
    let files = queue.files();
    if files.is_empty() {
        queue.set_flushed_where(0);
        return Ok(0);
    }
    let start = if report.abnormal {
        let limit = if ctx.message_index_safe {
            ctx.checkpoint.min_timestamp_index()
        } else {
            ctx.checkpoint.min_timestamp()
        };
        abnormal_start(&files, limit)
    } else {
        files.len().saturating_sub(NORMAL_RECOVERY_LAST_FILES)
    };
    report.verify_from = files.get(start).map_or(0, |f| f.file_from_offset());
    verify_and_truncate(ctx, &files, start, coverage, report, damaged, pages)
}

/// Where re-dispatch starts (see the module docs): after what the queues cover, or earlier for
/// a queue that lost units (`damaged`, refilled from the end of its last good unit), never
/// before the log's start `min_phy`. Fills in the report's repair and re-dispatch start.
fn redispatch_start(
    ctx: &RecoveryContext<'_>,
    coverage: &Coverage<'_>,
    damaged: Vec<SharedConsumeQueue>,
    end: i64,
    min_phy: i64,
    report: &mut RecoveryReport,
) -> i64 {
    let cq_max = ctx.queues.max_physical_offset();
    let mut from = if !report.abnormal {
        cq_max
    } else if cq_max < report.verify_from {
        // The queues stop before the verified range: what lies between was never checked.
        cq_max
    } else {
        // Every verified record before the first one missing somewhere is already in place.
        coverage
            .first_uncovered()
            .unwrap_or(end)
            .max(report.verify_from)
    };
    let mut repaired: Vec<SharedConsumeQueue> = Vec::with_capacity(damaged.len());
    for q in damaged {
        if !repaired.iter().any(|seen| Arc::ptr_eq(seen, &q)) {
            repaired.push(q);
        }
    }
    for q in &repaired {
        let point = refill_point(&q.read(), min_phy);
        report.repair_from = Some(report.repair_from.map_or(point, |r| r.min(point)));
    }
    report.repaired_queues = repaired.len();
    if let Some(repair) = report.repair_from {
        from = from.min(repair);
    }
    from = from.max(min_phy);
    report.redispatch_from = from;
    from
}

/// Dispatches the records of `[from, end)` the derived structures lack into the ConsumeQueues
/// and the index, passing over those they already hold.
fn redispatch(
    ctx: &RecoveryContext<'_>,
    from: i64,
    end: i64,
    coverage: &mut Coverage<'_>,
    pages: &mut RecoveryPages<'_>,
    report: &mut RecoveryReport,
) {
    let dispatcher = ctx.dispatcher;
    let mut skipped = 0u64;
    let outcome = scan_records(
        ctx.commit_log,
        from,
        end,
        |view| {
            pages.read_one();
            if coverage.has(view) {
                skipped += 1;
                return;
            }
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
    pages.release();
    report.redispatch_skipped = skipped;
    report.redispatched_records = outcome.records.saturating_sub(skipped);
}

/// Where a damaged queue must be refilled from: the end of its last unit (a record boundary), or
/// the start of the log when it has none left.
fn refill_point(cq: &ConsumeQueue, min_phy: i64) -> i64 {
    match cq.max_physical_offset() {
        0 => min_phy,
        end => end,
    }
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
    coverage: &mut Coverage<'_>,
    report: &mut RecoveryReport,
    pages: &mut RecoveryPages<'_>,
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
                Ok(view) => {
                    pages.read_one();
                    report.verified_records += 1;
                    coverage.confirm(&view, ctx.dispatcher.delay_levels_ms());
                    pos += view.size();
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
    /// The unit at `queue_offset` points at no record (`offset` is what it says): the queue is
    /// damaged from this unit on.
    DamagedUnit { offset: i64, queue_offset: i64 },
}

/// Checks every ConsumeQueue unit pointing into `[from, end)` against the record it points at
/// (topic, queue id, queue offset, size, transaction type, tags code). Returns, per queue, the
/// first disagreement.
fn reconcile_units(
    ctx: &RecoveryContext<'_>,
    from: i64,
    end: i64,
    coverage: &Coverage<'_>,
    pages: &mut RecoveryPages<'_>,
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
        // The verification scan already matched units with records; when it matched every unit
        // of the range, there is nothing left to look at (see [`Coverage::confirm`]).
        let (mut end_lo, mut end_hi) = (lo, cq.max_offset());
        while end_lo < end_hi {
            let mid = end_lo + (end_hi - end_lo) / 2;
            if cq.get(mid).is_none_or(|u| u.commit_log_offset < end) {
                end_lo = mid + 1;
            } else {
                end_hi = mid;
            }
        }
        let in_range = u64::try_from(end_lo - lo).unwrap_or(u64::MAX);
        if coverage.confirmed_units(&shared) == in_range {
            continue;
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
                pages.read_one();
                let Some(file) = ctx.commit_log.find_file(unit.commit_log_offset) else {
                    break 'queue Some(UnitMismatch::DamagedUnit {
                        offset: unit.commit_log_offset,
                        queue_offset: qo,
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
                        queue_offset: qo,
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
/// everything after the valid end, and returns that end. Queues cut back at a damaged unit are
/// added to `damaged`.
fn verify_and_truncate(
    ctx: &RecoveryContext<'_>,
    files: &[Arc<MappedFile>],
    start: usize,
    coverage: &mut Coverage<'_>,
    report: &mut RecoveryReport,
    damaged: &mut Vec<SharedConsumeQueue>,
    pages: &mut RecoveryPages<'_>,
) -> Result<i64, StoreError> {
    let queue = ctx.commit_log.mapped_file_queue();
    let (mut end, stop) = scan_valid_end(ctx, files, start, coverage, report, pages);
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

    for (shared, mismatch) in reconcile_units(ctx, report.verify_from, end, coverage, pages) {
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
            UnitMismatch::DamagedUnit {
                offset,
                queue_offset,
            } => {
                let mut cq = shared.write();
                tracing::warn!(
                    topic = cq.topic(),
                    queue_id = cq.queue_id(),
                    queue_offset,
                    offset,
                    "consume queue unit points at no record; dropping it and the units after it"
                );
                cq.truncate_from_queue_offset(queue_offset)?;
                drop(cq);
                damaged.push(shared);
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
    // The next append goes to the written end: it must be the valid end, or new records would
    // follow discarded bytes (and be cut off by the next recovery) or overwrite valid ones.
    let written_end = queue.max_offset();
    assert_eq!(
        written_end, end,
        "commit log written end {written_end} is not the recovered end {end}"
    );
    queue.set_flushed_where(end);
    Ok(end)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;

    use super::*;
    use crate::commit_log::append_test_message;
    use crate::config::MessageStoreConfig;
    use crate::mapped_file::file_name;

    /// After recovery cut a torn tail, the written end and the flushed offset are the valid end,
    /// and the next append lands right there.
    #[test]
    fn recovery_leaves_the_written_and_flushed_ends_at_the_valid_end() -> Result<(), StoreError> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::io("tmp", e))?;
        let mut config = MessageStoreConfig::with_root(dir.path());
        config.mapped_file_size_commit_log = 64 * 1024;
        let end = {
            let commit_log = CommitLog::new(&config);
            commit_log.load()?;
            for _ in 0..10 {
                append_test_message(&commit_log, "T", 0, 100);
            }
            commit_log.mapped_file_queue().flush(0)?;
            commit_log.max_offset()
        };
        // A torn append after the last record.
        let segment = config.commit_log_dir().join(file_name(0));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&segment)
            .map_err(|e| StoreError::io(&segment, e))?;
        file.write_all_at(&[0xAB; 40], u64::try_from(end).unwrap_or(0))
            .map_err(|e| StoreError::io(&segment, e))?;

        let commit_log = CommitLog::new(&config);
        commit_log.load()?;
        let queues = Arc::new(ConsumeQueueTable::load(dir.path(), 100)?);
        let checkpoint = Checkpoint::open(&config.checkpoint_path())?;
        let dispatcher = Dispatcher::new(
            Arc::clone(&queues),
            None,
            crate::live::LiveSettings::of(&config),
            Vec::new(),
        );
        let ctx = RecoveryContext {
            commit_log: &commit_log,
            queues: &queues,
            index: None,
            dispatcher: &dispatcher,
            checkpoint: &checkpoint,
            check_crc: true,
            message_index_safe: false,
        };
        let report = recover(&ctx, true)?;
        assert_eq!(report.max_phy_offset, end);
        assert!(report.corruption.is_some(), "{report:?}");
        assert_eq!(commit_log.max_offset(), end);
        assert_eq!(commit_log.flushed_where(), end);
        assert_eq!(
            queues.find("T", 0).map(|q| q.read().max_offset()),
            Some(10),
            "re-dispatched"
        );

        append_test_message(&commit_log, "T", 0, 100);
        let record = commit_log
            .get_record(end)
            .ok_or_else(|| StoreError::Config("no record at the recovered end".into()))?;
        let view =
            record::decode_record_view(&record).map_err(|e| StoreError::Config(e.to_string()))?;
        assert_eq!((view.commit_log_offset, view.queue_offset), (end, 10));
        Ok(())
    }
}
