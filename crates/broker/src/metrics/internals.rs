//! Comet's own transport and flush figures, under `comet_`: how often the remoting listeners
//! pushed back on clients (SYSTEM_BUSY answers, refused calls, paused reads), and what the
//! CommitLog flushes did (count, bytes made durable — bytes per flush is the size of a group
//! commit — and a latency histogram).

use std::sync::Arc;

use comet_remoting::{OverloadReason, TransportStats};
use comet_store::FLUSH_LATENCY_BUCKETS_US;

use super::families::{Families, HistogramRow, Labels};
use crate::context::BrokerContext;

/// The back-pressure counters of the broker's listeners, summed.
pub(super) fn collect_transport(transport: &[Arc<TransportStats>], out: &mut Families) {
    let sum = |reason: OverloadReason| transport.iter().map(|t| t.count(reason)).sum::<u64>();
    for (name, help, reason) in [
        (
            "comet_remoting_system_busy_total",
            "Requests answered SYSTEM_BUSY because their processor was in flow control",
            OverloadReason::ProcessorBusy,
        ),
        (
            "comet_remoting_write_buffer_refusals_total",
            "Calls to a client refused because its connection's write buffer was full",
            OverloadReason::WriteBufferFull,
        ),
        (
            "comet_remoting_read_pauses_total",
            "Times a connection stopped reading because its unsent responses were over the bound",
            OverloadReason::ReadsPaused,
        ),
    ] {
        out.counter(name, help, sum(reason));
    }
}

/// The CommitLog flushes.
pub(super) fn collect_flush(ctx: &BrokerContext, out: &mut Families) {
    let flush = ctx.store.stats().flush;
    out.counter(
        "comet_store_flushes_total",
        "CommitLog flushes that made data durable",
        flush.flushes,
    );
    out.counter(
        "comet_store_flushed_bytes_total",
        "CommitLog bytes made durable by flushes",
        flush.flushed_bytes,
    );
    let bounds: Vec<f64> = FLUSH_LATENCY_BUCKETS_US
        .iter()
        .map(|us| *us as f64 / 1e6)
        .collect();
    let row = HistogramRow {
        labels: Labels::new(),
        buckets: flush.latency_buckets.to_vec(),
        count: flush.flushes,
        sum: flush.latency_sum_us as f64 / 1e6,
    };
    out.histogram(
        "comet_store_flush_latency_seconds",
        "Time a CommitLog flush took",
        &bounds,
        &[row],
    );
}
