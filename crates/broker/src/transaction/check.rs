//! The transaction check service: finds half messages nobody ended and asks their producer group.
//!
//! Every `transactionCheckInterval` one round runs over half queue 0:
//!
//! 1. The op records from the op queue's progress offset are read into a map "half offset → op
//!    record" (more are read on demand, at most [`MAX_OP_RECORDS_PER_ROUND`]).
//! 2. Halves are walked from the half queue's progress offset. A half with an op record (for its
//!    own offset or for the first copy of its transaction) is finished and skipped. A half stored
//!    after the round began ends the walk (it is looked at next round). A half checked
//!    `transactionCheckMax` times, or older than the store keeps files (`fileReservedTime`), is
//!    discarded: an op record is written and the discard logged. A half born less than
//!    `transactionTimeOut` ago ends the walk — halves are in arrival order, so everything after it
//!    is younger. A half whose producer asked for a longer first delay
//!    (`CHECK_IMMUNITY_TIME_IN_SECONDS`) is put back at the tail unchanged until that passes.
//! 3. Any other half is put back at the tail with TRANSACTION_CHECK_TIMES + 1 (the commit log is
//!    append-only, so the count travels with a new copy) and CHECK_TRANSACTION_STATE is sent,
//!    oneway, to a live channel of its producer group (PGROUP), naming the copy, with the half
//!    as body, its topic and queue restored (the exact shape Apache sends: [`transaction_check`]).
//!    The producer answers END_TRANSACTION naming the copy's offsets.
//! 4. The half progress moves past everything walked; the op progress moves past the leading op
//!    records whose halves are all behind the half progress. Both are consumer offsets of
//!    [`TRANS_CHECK_GROUP`], persisted with `consumerOffset.json`.
//!
//! A round is bounded ([`HALF_MESSAGES_PER_ROUND`], [`MAX_ROUND_DURATION`]) and stops between two
//! messages when the broker shuts down, so shutdown never leaves a copy without its progress.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{CheckTransactionStateRequestHeader, RpcHeader, request_with_header};
use comet_protocol::message::MessageExt;
use comet_protocol::message::properties::keys;
use comet_protocol::message::record::encode_record;
use comet_store::consume_queue::CqUnit;
use tokio::task::JoinHandle;

use super::half::{self, HALF_QUEUE_ID};
use super::op;
use super::{TRANS_CHECK_GROUP, TransactionService};
use crate::context::BrokerContext;
use comet_protocol::naming::{TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC};

/// Most half messages one round looks at.
pub const HALF_MESSAGES_PER_ROUND: usize = 2048;
/// Op records read per batch when the map must grow.
pub const OP_RECORDS_PER_BATCH: usize = 32;
/// Most op records one round reads; past it, halves are checked without a complete map (the
/// answer of an already-ended transaction is then ignored by the END_TRANSACTION processor).
pub const MAX_OP_RECORDS_PER_ROUND: usize = 65_536;
/// Longest a round may run (RocketMQ `MAX_QUEUE_PROCESS_TIME`).
pub const MAX_ROUND_DURATION: Duration = Duration::from_secs(60);
/// Milliseconds per hour, for `fileReservedTime`.
const MILLIS_PER_HOUR: i64 = 3_600_000;
/// WAIT in the body of a CHECK_TRANSACTION_STATE (see [`transaction_check`]).
const CHECK_BODY_WAIT: &str = "false";

/// The settings a round runs with (from the broker config; tests pass their own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckSettings {
    /// `transactionTimeOut` in ms.
    pub timeout_ms: i64,
    /// `transactionCheckMax`.
    pub check_max: i32,
    /// `fileReservedTime` in ms: halves born longer ago are discarded unchecked.
    pub file_reserved_ms: i64,
}

impl CheckSettings {
    /// The settings in force in `ctx` (they may change while the broker runs).
    pub fn of(ctx: &BrokerContext) -> Self {
        let c = ctx.live_config();
        CheckSettings {
            timeout_ms: i64::try_from(c.transaction_timeout_ms).unwrap_or(i64::MAX),
            check_max: c.transaction_check_max,
            file_reserved_ms: i64::try_from(c.file_reserved_time_hours)
                .unwrap_or(i64::MAX)
                .saturating_mul(MILLIS_PER_HOUR),
        }
    }
}

/// What one round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// CHECK_TRANSACTION_STATE requests issued (or attempted without a live producer).
    pub checked: usize,
    /// Halves discarded (check budget exhausted or too old).
    pub discarded: usize,
    /// Halves skipped because they were already ended.
    pub finished: usize,
    /// Halves put back to wait for their immunity time.
    pub deferred: usize,
    /// Half and op progress after the round.
    pub half_offset: i64,
    pub op_offset: i64,
}

/// Spawns the periodic check, every `transactionCheckInterval` as in force when a round ends.
/// It stops when the broker's shutdown token is cancelled (between rounds, or between two
/// messages of a round).
pub fn start(service: Arc<TransactionService>, ctx: &Arc<BrokerContext>) -> JoinHandle<()> {
    let weak = Arc::downgrade(ctx);
    let shutdown = ctx.shutdown.clone();
    let mut interval = Duration::from_millis(ctx.config.transaction_check_interval_ms);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            let Some(ctx) = weak.upgrade() else { return };
            interval = Duration::from_millis(ctx.live_config().transaction_check_interval_ms);
            let report = check_once(&ctx, &service, CheckSettings::of(&ctx)).await;
            if report.checked + report.discarded + report.deferred > 0 {
                tracing::info!(?report, "transaction check round");
            } else {
                tracing::debug!(?report, "transaction check round");
            }
        }
    })
}

/// The check service's progress in `topic` queue 0: its committed offset, or the queue's min.
fn progress(ctx: &BrokerContext, topic: &str) -> i64 {
    let offset = ctx
        .consumer_offsets
        .query_offset(TRANS_CHECK_GROUP, topic, HALF_QUEUE_ID);
    if offset < 0 {
        ctx.store.get_min_offset_in_queue(topic, HALF_QUEUE_ID)
    } else {
        offset
    }
}

fn commit_progress(ctx: &BrokerContext, topic: &str, offset: i64) {
    ctx.consumer_offsets.commit_offset(
        ctx.store_host,
        TRANS_CHECK_GROUP,
        topic,
        HALF_QUEUE_ID,
        offset,
    );
}

/// Where a queue offset stands in a queue.
enum Slot {
    /// Below the queue's min (files removed): continue at the min.
    Below(i64),
    /// At or past the end.
    End,
    Unit(CqUnit),
    /// Inside the range but unreadable.
    Hole,
}

fn slot(ctx: &BrokerContext, topic: &str, offset: i64) -> Slot {
    let Some(queue) = ctx.store.consume_queues().find(topic, HALF_QUEUE_ID) else {
        return Slot::End;
    };
    let cq = queue.read();
    if offset < cq.min_offset() {
        return Slot::Below(cq.min_offset());
    }
    if offset >= cq.max_offset() {
        return Slot::End;
    }
    match cq.get(offset) {
        Some(unit) if unit.is_valid() => Slot::Unit(unit),
        _ => Slot::Hole,
    }
}

/// The op records read so far in a round.
struct OpWindow {
    start: i64,
    next: i64,
    /// Half offset → op queue offset that finishes it.
    removed: HashMap<i64, i64>,
    /// Per op record read (in order from `start`): the highest half offset it finishes, or
    /// `None` for a record that finishes nothing (malformed; skipped over).
    records: Vec<Option<i64>>,
    exhausted: bool,
}

impl OpWindow {
    fn new(start: i64) -> Self {
        OpWindow {
            start,
            next: start,
            removed: HashMap::new(),
            records: Vec::new(),
            exhausted: false,
        }
    }

    /// Reads up to `n` more op records; returns whether any was read.
    fn extend(&mut self, ctx: &BrokerContext, n: usize) -> bool {
        let mut read = 0;
        while read < n && self.records.len() < MAX_OP_RECORDS_PER_ROUND {
            match slot(ctx, TRANS_OP_HALF_TOPIC, self.next) {
                Slot::End => {
                    self.exhausted = true;
                    break;
                }
                Slot::Below(min) => {
                    // Op records were removed with their files: their halves are long gone too.
                    tracing::warn!(
                        from = self.next,
                        min,
                        "transaction op queue offset below its min; skipping"
                    );
                    self.start = min;
                    self.next = min;
                    self.records.clear();
                    continue;
                }
                Slot::Hole => self.records.push(None),
                Slot::Unit(unit) => {
                    let finished = match ctx.store.lookup_message_by_offset(unit.commit_log_offset)
                    {
                        Some(msg) if op::is_remove_op(&msg) => op::decode_op_body(&msg.body),
                        Some(msg) => {
                            tracing::error!(op_offset = self.next, tags = ?msg.tags(),
                                "transaction op record with an unknown tag; skipped");
                            Vec::new()
                        }
                        None => Vec::new(),
                    };
                    for half_offset in &finished {
                        self.removed.insert(*half_offset, self.next);
                    }
                    self.records.push(finished.iter().copied().max());
                }
            }
            self.next += 1;
            read += 1;
        }
        if self.records.len() >= MAX_OP_RECORDS_PER_ROUND {
            self.exhausted = true;
        }
        read > 0
    }

    fn finishes(&self, half: &MessageExt) -> bool {
        self.removed.contains_key(&half.queue_offset)
            || half::prepared_queue_offset(half).is_some_and(|p| self.removed.contains_key(&p))
    }

    /// The op progress after a round whose half progress is `half_offset`: past every leading
    /// record whose halves are all behind it.
    fn progress(&self, half_offset: i64) -> i64 {
        let done = self
            .records
            .iter()
            .take_while(|max| max.is_none_or(|m| m < half_offset))
            .count();
        self.start + i64::try_from(done).unwrap_or(0)
    }
}

/// Runs one check round (see the module docs).
pub async fn check_once(
    ctx: &BrokerContext,
    service: &TransactionService,
    settings: CheckSettings,
) -> CheckReport {
    let round_start = Instant::now();
    let start_ms = comet_protocol::time::now_millis();
    let half_start = progress(ctx, TRANS_HALF_TOPIC);
    let op_start = progress(ctx, TRANS_OP_HALF_TOPIC);
    let mut ops = OpWindow::new(op_start);
    ops.extend(ctx, OP_RECORDS_PER_BATCH);
    let mut report = CheckReport::default();

    let mut i = half_start;
    let mut walked = 0;
    while walked < HALF_MESSAGES_PER_ROUND
        && round_start.elapsed() < MAX_ROUND_DURATION
        && !ctx.is_shutting_down()
    {
        let unit = match slot(ctx, TRANS_HALF_TOPIC, i) {
            Slot::End => break,
            Slot::Below(min) => {
                tracing::warn!(
                    from = i,
                    min,
                    "transaction half queue offset below its min; skipping"
                );
                i = min;
                continue;
            }
            Slot::Hole => {
                i += 1;
                continue;
            }
            Slot::Unit(unit) => unit,
        };
        walked += 1;
        if ops.removed.contains_key(&i) {
            report.finished += 1;
            i += 1;
            continue;
        }
        let Some(msg) = ctx.store.lookup_message_by_offset(unit.commit_log_offset) else {
            tracing::warn!(
                half_offset = i,
                commit_log_offset = unit.commit_log_offset,
                "half message no longer in the commit log; skipped"
            );
            i += 1;
            continue;
        };
        if ops.finishes(&msg) || service.is_ended(half::transaction_identity(&msg)) {
            report.finished += 1;
            i += 1;
            continue;
        }
        // Stored after the round began (a copy this round put back, or a new half): next round.
        // Checked before the budget, so a copy is never discarded before its check is answered.
        if msg.store_timestamp >= start_ms {
            break;
        }
        let times = half::check_times(&msg);
        let age = start_ms.saturating_sub(msg.born_timestamp);
        if times >= settings.check_max || age > settings.file_reserved_ms {
            tracing::warn!(half_offset = i, uniq_key = ?msg.uniq_key(), times, age_ms = age,
                producer_group = ?msg.properties.get(keys::PRODUCER_GROUP),
                real_topic = ?msg.properties.get(keys::REAL_TOPIC),
                "transaction half message discarded: check budget exhausted or older than fileReservedTime");
            if !service.write_op(ctx, &msg).await {
                break;
            }
            report.discarded += 1;
            i += 1;
            continue;
        }
        match half::check_immunity_millis(&msg, settings.timeout_ms) {
            Some(immunity) if age < immunity => {
                // Put back unchanged; the walk goes on (later halves may have shorter waits).
                if put_back(ctx, &msg, None).await.is_none() {
                    break;
                }
                report.deferred += 1;
                i += 1;
                continue;
            }
            Some(_) => {}
            None if (0..settings.timeout_ms).contains(&age) => break,
            None => {}
        }
        if !ops.exhausted && ops.extend(ctx, OP_RECORDS_PER_BATCH) {
            // The map may not be complete yet: look at this half again with more op records.
            walked -= 1;
            continue;
        }
        let Some(copy) = put_back(ctx, &msg, Some(times.saturating_add(1))).await else {
            break;
        };
        send_check(ctx, &msg, &copy).await;
        report.checked += 1;
        i += 1;
    }

    if i != half_start {
        commit_progress(ctx, TRANS_HALF_TOPIC, i);
    }
    let op_offset = ops.progress(i);
    if op_offset != op_start {
        commit_progress(ctx, TRANS_OP_HALF_TOPIC, op_offset);
    }
    report.half_offset = i;
    report.op_offset = op_offset;
    report
}

/// Puts a renewed copy of `msg` at the tail of the half queue and returns it as stored.
async fn put_back(
    ctx: &BrokerContext,
    msg: &MessageExt,
    check_times: Option<i32>,
) -> Option<MessageExt> {
    let copy = half::renewed_half(msg, check_times);
    let result = ctx.store.put_message(copy).await;
    let append = result.append.filter(|_| result.status.is_written());
    let Some(append) = append else {
        tracing::error!(half_offset = msg.queue_offset, status = ?result.status,
            "putting a half message back failed; retried next round");
        return None;
    };
    let stored = ctx.store.lookup_message_by_offset(append.wrote_offset);
    if stored.is_none() {
        tracing::error!(
            commit_log_offset = append.wrote_offset,
            "a re-put half message cannot be read back"
        );
    }
    stored
}

/// Sends CHECK_TRANSACTION_STATE for `checked` (the half the round looked at), naming its stored
/// copy `copy`, to a live channel of its producer group.
async fn send_check(ctx: &BrokerContext, checked: &MessageExt, copy: &MessageExt) {
    let group = copy.properties.get(keys::PRODUCER_GROUP).unwrap_or("");
    let Some(channel) = ctx.producers.available_channel(group) else {
        tracing::warn!(producer_group = group, uniq_key = ?copy.uniq_key(),
            "transaction check not sent: no live producer of the group");
        return;
    };
    let check = match transaction_check(ctx, checked, copy) {
        Ok(check) => check,
        Err(e) => {
            tracing::error!(error = %e, half_offset = copy.queue_offset,
                "cannot build the transaction check");
            return;
        }
    };
    if let Some(local) = ctx.local_clients.get(&channel) {
        local.check_transaction(check);
        return;
    }
    let request = match check.to_request() {
        Ok(request) => request,
        Err(e) => {
            tracing::error!(error = %e, half_offset = copy.queue_offset,
                "cannot encode the transaction check request");
            return;
        }
    };
    if let Err(e) = channel.invoke_oneway(request).await {
        tracing::warn!(producer_group = group, peer = %channel.remote_addr(), error = %e,
            "transaction check not delivered");
    }
}

/// One transaction check: the CHECK_TRANSACTION_STATE header and the checked half as the
/// producer is shown it.
#[derive(Debug, Clone)]
pub struct TransactionCheck {
    pub header: CheckTransactionStateRequestHeader,
    /// The half, its real topic and queue restored (see [`transaction_check`]).
    pub message: MessageExt,
}

impl TransactionCheck {
    /// The CHECK_TRANSACTION_STATE request of this check, for a remoting producer.
    pub fn to_request(&self) -> Result<comet_protocol::RemotingCommand, CheckRequestError> {
        let mut body = BytesMut::new();
        encode_record(&self.message, &mut body)?;
        Ok(
            request_with_header(RequestCode::CheckTransactionState, &self.header)
                .with_body(body.freeze()),
        )
    }
}

/// Why a check request could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CheckRequestError {
    #[error(transparent)]
    Half(#[from] half::HalfError),
    #[error("encoding the half message: {0}")]
    Encode(#[from] comet_protocol::ProtocolError),
}

/// The check of the half `checked`, whose renewed copy `copy` was just stored: its
/// CHECK_TRANSACTION_STATE request ([`TransactionCheck::to_request`]) is exactly as Apache
/// RocketMQ 5.3.3 writes it (captured in
/// `crates/protocol/tests/fixtures/*-tx`):
///
/// - header: the copy's offsets and offset msgId, and as `topic` the half topic — Apache
///   fills the header before it restores the real topic, and 5.x clients echo it back in their
///   END_TRANSACTION;
/// - body: the checked half as a stored record at the copy's offsets, with its real topic and
///   queue restored and the properties of the half that was checked (so no
///   TRAN_PREPARED_QUEUE_OFFSET on a first check) plus the new TRANSACTION_CHECK_TIMES and
///   WAIT=false. Apache's copy shares its property map with the checked message and marks the
///   copy "do not wait for the store" after serializing it, so the stored copy keeps the
///   producer's WAIT while the check body says false.
pub fn transaction_check(
    ctx: &BrokerContext,
    checked: &MessageExt,
    copy: &MessageExt,
) -> Result<TransactionCheck, CheckRequestError> {
    let (topic, queue_id) = half::real_destination(copy)?;
    let uniq = copy.uniq_key().map(str::to_owned);
    let transaction_id = copy
        .properties
        .get(keys::TRANSACTION_ID)
        .map(str::to_owned)
        .or_else(|| uniq.clone());
    let header = CheckTransactionStateRequestHeader {
        topic: Some(copy.topic.clone()),
        tran_state_table_offset: copy.queue_offset,
        commit_log_offset: copy.commit_log_offset,
        msg_id: uniq,
        transaction_id,
        offset_msg_id: Some(copy.offset_msg_id()),
        rpc: RpcHeader {
            broker_name: Some(ctx.config.broker_name.clone()),
            ..Default::default()
        },
    };
    let mut view = checked.clone();
    view.topic = topic;
    view.queue_id = queue_id;
    view.queue_offset = copy.queue_offset;
    view.commit_log_offset = copy.commit_log_offset;
    if let Some(times) = copy.properties.get(keys::TRANSACTION_CHECK_TIMES) {
        view.properties.insert(keys::TRANSACTION_CHECK_TIMES, times);
    }
    view.properties
        .insert(keys::WAIT_STORE_MSG_OK, CHECK_BODY_WAIT);
    Ok(TransactionCheck {
        header,
        message: view,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BrokerConfig, ConfigError};

    #[test]
    fn transaction_keys_default_parse_and_validate() {
        let defaults = BrokerConfig::default();
        assert_eq!(
            (
                defaults.transaction_timeout_ms,
                defaults.transaction_check_interval_ms,
                defaults.transaction_check_max
            ),
            (6_000, 30_000, 15)
        );
        let parsed = BrokerConfig::parse(
            "transactionTimeOut=100\ntransactionCheckInterval=200\ntransactionCheckMax=3\n",
        )
        .unwrap()
        .config;
        assert_eq!(parsed.transaction_timeout_ms, 100);
        assert_eq!(parsed.transaction_check_interval_ms, 200);
        assert_eq!(parsed.transaction_check_max, 3);
        for (text, key) in [
            ("transactionCheckInterval=5\n", "transactionCheckInterval"),
            ("transactionCheckMax=0\n", "transactionCheckMax"),
        ] {
            match BrokerConfig::parse(text).map(|p| p.config.validate()) {
                Err(ConfigError::Invalid { key: k, .. })
                | Ok(Err(ConfigError::Invalid { key: k, .. })) => {
                    assert_eq!(k, key)
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn op_progress_stops_at_the_first_pending_record() {
        let mut w = OpWindow::new(10);
        w.records = vec![Some(3), None, Some(5), Some(9), Some(4)];
        assert_eq!(w.progress(6), 13);
        assert_eq!(w.progress(10), 15);
        assert_eq!(w.progress(0), 10);
    }
}
