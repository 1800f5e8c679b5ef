//! The traffic counters ([`super::traffic`]) as Apache 5.x's families: messages and bytes in by
//! topic and message type with the message-size histogram, messages and bytes out by topic and
//! consumer group, messages sent to a DLQ, and transaction outcomes.

use std::sync::atomic::{AtomicU64, Ordering};

use super::families::{Families, HistogramRow, Labels};
use super::rpc::LATENCY_BUCKETS_US;
use super::system::{is_system_group, is_system_topic};
use super::traffic::{FINISH_LATENCY_BUCKETS_MS, MESSAGE_SIZE_BUCKETS_BYTES, MessageType};
use crate::context::BrokerContext;

fn load(n: &AtomicU64) -> u64 {
    n.load(Ordering::Relaxed)
}

pub(super) fn collect(ctx: &BrokerContext, out: &mut Families) {
    collect_rpc(ctx, out);
    collect_create_times(ctx, out);
    collect_in(ctx, out);
    collect_out(ctx, out);
    let traffic = &ctx.traffic;
    let dlq: Vec<(Labels, u64)> = traffic
        .dlq()
        .into_iter()
        .map(|((group, topic), n)| {
            let system = (is_system_group(&group) || is_system_topic(ctx, &topic)).to_string();
            let labels = vec![
                ("consumer_group", group),
                ("topic", topic),
                ("is_system", system),
            ];
            (labels, load(&n))
        })
        .collect();
    out.counters(
        "rocketmq_send_to_dlq_messages_total",
        "Consumer send to DLQ messages",
        &dlq,
    );
    for (name, help, rows) in [
        (
            "rocketmq_commit_messages_total",
            "Total number of commit messages",
            traffic.commits(),
        ),
        (
            "rocketmq_rollback_messages_total",
            "Total number of rollback messages",
            traffic.rollbacks(),
        ),
    ] {
        let rows: Vec<(Labels, u64)> = rows
            .into_iter()
            .map(|(topic, n)| (vec![("topic", topic)], load(&n)))
            .collect();
        out.counters(name, help, &rows);
    }
    let half: Vec<(Labels, i64)> = traffic
        .half_messages()
        .into_iter()
        .map(|(topic, n)| (vec![("topic", topic)], n))
        .collect();
    out.gauge(
        "rocketmq_half_messages",
        "Half messages of all topics",
        &half,
    );
    collect_timers(ctx, out);
    let finish: Vec<HistogramRow> = traffic
        .finish_latencies()
        .into_iter()
        .map(|(topic, h)| HistogramRow {
            labels: vec![("topic", topic)],
            buckets: h.buckets.iter().map(load).collect(),
            count: load(&h.count),
            sum: load(&h.sum_ms) as f64,
        })
        .collect();
    let bounds: Vec<f64> = FINISH_LATENCY_BUCKETS_MS
        .iter()
        .map(|b| *b as f64)
        .collect();
    out.histogram(
        "rocketmq_finish_message_latency_milliseconds",
        "Transaction finish latency",
        &bounds,
        &finish,
    );
    out.counter(
        "comet_metrics_dropped_total",
        "Traffic not recorded because its label set was beyond the bound",
        load(&traffic.dropped),
    );
}

fn collect_in(ctx: &BrokerContext, out: &mut Families) {
    let mut messages = Vec::new();
    let mut bytes = Vec::new();
    let mut sizes = Vec::new();
    for (topic, counters) in ctx.traffic.inbound() {
        let system = is_system_topic(ctx, &topic).to_string();
        for kind in MessageType::ALL {
            let flow = &counters.by_type[kind as usize];
            let count = load(&flow.size_count);
            if count == 0 {
                continue;
            }
            let labels: Labels = vec![
                ("topic", topic.clone()),
                ("message_type", kind.label().to_owned()),
                ("is_system", system.clone()),
            ];
            messages.push((labels.clone(), load(&flow.messages)));
            bytes.push((labels.clone(), load(&flow.bytes)));
            sizes.push(HistogramRow {
                labels,
                buckets: flow.size_buckets.iter().map(load).collect(),
                count,
                sum: load(&flow.size_sum) as f64,
            });
        }
    }
    out.counters(
        "rocketmq_messages_in_total",
        "Total number of incoming messages",
        &messages,
    );
    out.counters(
        "rocketmq_throughput_in_total",
        "Total traffic of incoming messages",
        &bytes,
    );
    let bounds: Vec<f64> = MESSAGE_SIZE_BUCKETS_BYTES
        .iter()
        .map(|b| *b as f64)
        .collect();
    out.histogram(
        "rocketmq_message_size",
        "Incoming messages size",
        &bounds,
        &sizes,
    );
}

fn collect_out(ctx: &BrokerContext, out: &mut Families) {
    let mut messages = Vec::new();
    let mut bytes = Vec::new();
    for ((topic, group), flow) in ctx.traffic.outbound() {
        let system = (is_system_topic(ctx, &topic) || is_system_group(&group)).to_string();
        let labels: Labels = vec![
            ("topic", topic),
            ("consumer_group", group),
            ("is_system", system),
        ];
        messages.push((labels.clone(), load(&flow.messages)));
        bytes.push((labels, load(&flow.bytes)));
    }
    out.counters(
        "rocketmq_messages_out_total",
        "Total number of outgoing messages",
        &messages,
    );
    out.counters(
        "rocketmq_throughput_out_total",
        "Total traffic of outgoing messages",
        &bytes,
    );
}

/// A code's label as Apache writes it: the constant's name in lower case, or the number when
/// the code has no name.
fn code_label(name: &str, code: i32) -> String {
    if name == "UNKNOWN" {
        code.to_string()
    } else {
        name.to_ascii_lowercase()
    }
}

fn collect_rpc(ctx: &BrokerContext, out: &mut Families) {
    use comet_protocol::code::{RequestCode, ResponseCode};
    let mut rows: Vec<HistogramRow> = ctx
        .rpc
        .snapshot()
        .into_iter()
        .map(|(key, h)| {
            let request = RequestCode::from_code(key.request_code).name();
            let response = ResponseCode::from_code(key.response_code).name();
            let result = if key.oneway { "oneway" } else { "success" };
            HistogramRow {
                labels: vec![
                    ("protocol_type", "remoting".to_owned()),
                    ("request_code", code_label(request, key.request_code)),
                    ("response_code", code_label(response, key.response_code)),
                    ("is_long_polling", key.long_polling.to_string()),
                    ("result", result.to_owned()),
                ],
                buckets: h.buckets.iter().map(load).collect(),
                count: load(&h.count),
                sum: load(&h.sum_us) as f64 / 1000.0,
            }
        })
        .collect();
    rows.sort_by(|a, b| a.labels.cmp(&b.labels));
    let bounds: Vec<f64> = LATENCY_BUCKETS_US
        .iter()
        .map(|us| *us as f64 / 1000.0)
        .collect();
    out.histogram(
        "rocketmq_rpc_latency_milliseconds",
        "Rpc latency",
        &bounds,
        &rows,
    );
    out.counter(
        "comet_rpc_latency_dropped_total",
        "Answers not timed because their label set was beyond the bound",
        load(&ctx.rpc.dropped),
    );
}

fn collect_create_times(ctx: &BrokerContext, out: &mut Families) {
    use super::create_times::{CREATE_TIME_BUCKETS_MS, Created};
    let bounds: Vec<f64> = CREATE_TIME_BUCKETS_MS.iter().map(|b| *b as f64).collect();
    let (mut topics, mut groups) = (Vec::new(), Vec::new());
    for (key, h) in ctx.create_times.snapshot() {
        let status = if key.success { "success" } else { "failure" };
        let row = HistogramRow {
            labels: vec![
                ("invocation_status", status.to_owned()),
                ("is_system", key.is_system.to_string()),
            ],
            buckets: h.buckets.iter().map(load).collect(),
            count: load(&h.count),
            sum: load(&h.sum_ms) as f64,
        };
        match key.created {
            Created::Topic => topics.push(row),
            Created::Group => groups.push(row),
        }
    }
    out.histogram(
        "rocketmq_topic_create_execution_time_milliseconds",
        "The distribution of create topic time",
        &bounds,
        &topics,
    );
    out.histogram(
        "rocketmq_consumer_group_create_execution_time_milliseconds",
        "The distribution of create subscription time",
        &bounds,
        &groups,
    );
}

fn collect_timers(ctx: &BrokerContext, out: &mut Families) {
    let timers = ctx.traffic.timer_counts();
    let rows = |pick: fn(&(String, u64, u64)) -> u64| -> Vec<(Labels, u64)> {
        timers
            .iter()
            .map(|row| (vec![("topic", row.0.clone())], pick(row)))
            .collect()
    };
    out.counters(
        "rocketmq_timer_enqueue_total",
        "Total number of timer enqueue",
        &rows(|r| r.1),
    );
    out.counters(
        "rocketmq_timer_dequeue_total",
        "Total number of timer dequeue",
        &rows(|r| r.2),
    );
    let timing: Vec<(Labels, i64)> = timers
        .iter()
        .map(|(t, parked, delivered)| {
            let waiting = parked.saturating_sub(*delivered);
            (
                vec![("topic", t.clone())],
                i64::try_from(waiting).unwrap_or(i64::MAX),
            )
        })
        .collect();
    out.gauge(
        "rocketmq_timing_messages",
        "Current message number in timing",
        &timing,
    );
}
