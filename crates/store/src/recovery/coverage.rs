//! What the derived structures already hold of the verified log (see [`Coverage`]).

use std::sync::Arc;

use comet_protocol::message::{record, sysflag};
use parking_lot::RwLock;

use crate::consume_queue::{ConsumeQueueTable, SharedConsumeQueue};
use crate::dispatch::{DispatchRequest, SCHEDULE_TOPIC};
use crate::index_service::IndexService;

/// Which records every derived structure already holds, learnt from the verification scan so
/// that after a crash each record of the verified range is decoded once, not three times (verify,
/// reconcile, re-dispatch).
///
/// During the scan, [`Coverage::confirm`] looks up the ConsumeQueue unit at each verified
/// record's (topic, queue id, queue offset): a unit pointing at that record with the same size
/// and tags code is *confirmed*, counted per queue. Confirmed units are distinct (one per queue
/// offset) and all point into the verified range, so a queue whose confirmed count equals its
/// number of units in the range has every unit checked already and [`reconcile_units`] skips it;
/// any other queue is reconciled unit by unit as before. A record is *covered* when its unit is
/// confirmed (or it gets none: PREPARED/ROLLBACK) and the index already reaches its CommitLog
/// offset (or it gets no entries: ROLLBACK; or there is no index). Abnormal re-dispatch starts at
/// the first record not covered, instead of at the start of the verified range.
///
/// During re-dispatch, [`Coverage::has`] recognises covered records from their fixed header alone
/// (no properties parsing) and the scan passes over them. It does not compare the tags code: in the
/// verified range the scan or [`reconcile_units`] already did, and before it the log is trusted (a
/// damaged queue was cut back at its last good unit, so its missing records are never covered).
/// Anything not covered takes the full dispatch path, which keeps its own idempotence checks.
pub(super) struct Coverage<'a> {
    queues: &'a ConsumeQueueTable,
    /// Queues looked up so far: records of a handful of queues interleave in the log, so a short
    /// list beats hashing the topic of every record.
    known: Vec<KnownQueue>,
    /// Last CommitLog offset the index holds (-1 when empty); `None` without an index.
    index_end: Option<i64>,
    /// CommitLog offset of the first verified record some derived structure lacks.
    first_uncovered: Option<i64>,
}

struct KnownQueue {
    queue_id: i32,
    topic: String,
    queue: SharedConsumeQueue,
    /// Units the verification scan matched with their record.
    confirmed: u64,
}

impl<'a> Coverage<'a> {
    /// Nothing covered yet, over the store's `queues` and `index` (if it has one).
    pub(super) fn new(queues: &'a ConsumeQueueTable, index: Option<&RwLock<IndexService>>) -> Self {
        let index_end = index.map(|index| {
            index
                .read()
                .files()
                .iter()
                .rev()
                .find(|f| f.entry_count() > 0)
                .map_or(-1, |f| f.header().end_phy_offset)
        });
        Coverage {
            queues,
            known: Vec::new(),
            index_end,
            first_uncovered: None,
        }
    }

    fn known(&mut self, topic: &str, queue_id: i32) -> Option<&mut KnownQueue> {
        let pos = match self
            .known
            .iter()
            .position(|k| k.queue_id == queue_id && k.topic == topic)
        {
            Some(pos) => pos,
            None => {
                let queue = self.queues.find(topic, queue_id)?;
                self.known.push(KnownQueue {
                    queue_id,
                    topic: topic.to_owned(),
                    queue,
                    confirmed: 0,
                });
                self.known.len() - 1
            }
        };
        self.known.get_mut(pos)
    }

    /// CommitLog offset of the first verified record some derived structure lacks.
    pub(super) fn first_uncovered(&self) -> Option<i64> {
        self.first_uncovered
    }

    /// Units of `queue` the verification scan matched with their record.
    pub(super) fn confirmed_units(&self, queue: &SharedConsumeQueue) -> u64 {
        self.known
            .iter()
            .find(|k| Arc::ptr_eq(&k.queue, queue))
            .map_or(0, |k| k.confirmed)
    }

    fn indexed(&self, view: &record::RecordView<'_>) -> bool {
        !sysflag::gets_index_entries(view.sys_flag)
            || self.index_end.is_none_or(|e| view.commit_log_offset <= e)
    }

    /// Verification scan: matches a verified record with its unit (see the type docs).
    pub(super) fn confirm(&mut self, view: &record::RecordView<'_>, delay_levels_ms: &[i64]) {
        let indexed = self.indexed(view);
        let queued = !sysflag::gets_queue_unit(view.sys_flag)
            || self.known(view.topic, view.queue_id).is_some_and(|known| {
                let unit = known.queue.read().get(view.queue_offset);
                let matches = unit.is_some_and(|unit| {
                    unit.commit_log_offset == view.commit_log_offset
                        && unit.size == view.total_size
                        && (view.topic == SCHEDULE_TOPIC
                            || DispatchRequest::from_view(view, delay_levels_ms).tags_code
                                == unit.tags_code)
                });
                if matches {
                    known.confirmed += 1;
                }
                matches
            });
        if !(indexed && queued) && self.first_uncovered.is_none() {
            self.first_uncovered = Some(view.commit_log_offset);
        }
    }

    /// Re-dispatch: whether every derived structure holds the record, from its header alone.
    pub(super) fn has(&mut self, view: &record::RecordView<'_>) -> bool {
        if !self.indexed(view) {
            return false;
        }
        if !sysflag::gets_queue_unit(view.sys_flag) {
            return true;
        }
        let Some(known) = self.known(view.topic, view.queue_id) else {
            return false;
        };
        let unit = known.queue.read().get(view.queue_offset);
        unit.is_some_and(|unit| {
            unit.commit_log_offset == view.commit_log_offset && unit.size == view.total_size
        })
    }
}
