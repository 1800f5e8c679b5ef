//! The traffic counters ([`super::traffic`]) as Apache 5.x's families: messages and bytes in by
//! topic and message type with the message-size histogram, messages and bytes out by topic and
//! consumer group, messages sent to a DLQ, and transaction outcomes.

use std::sync::atomic::{AtomicU64, Ordering};

use super::families::{Families, HistogramRow, Labels};
use super::gauges::{is_system_group, is_system_topic};
use super::traffic::{MESSAGE_SIZE_BUCKETS_BYTES, MessageType};
use crate::context::BrokerContext;

fn load(n: &AtomicU64) -> u64 {
    n.load(Ordering::Relaxed)
}

pub(super) fn collect(ctx: &BrokerContext, out: &mut Families) {
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
