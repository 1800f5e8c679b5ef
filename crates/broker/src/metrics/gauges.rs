//! Figures read at scrape time: metadata counts, connections, consumer lag from the stored
//! offsets, storage, and the store's own running counters.
//!
//! Lag differs from Apache's in two ways a user sees. It is computed for every subscription group
//! on every topic it has an online subscription to *or* a committed offset on, so it keeps
//! growing while the group's consumers are offline (Apache's stops at the last value the online
//! consumers left). And the lag latency is the age of the oldest unconsumed message over the
//! queues that have one; a queue already caught up does not pull it to zero.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};

use comet_protocol::body::{ConsumeType, perm};
use comet_protocol::naming::is_retry_topic;
use comet_protocol::time::now_millis;
use comet_protocol::version::version_name;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;

use super::families::{Families, Labels};

use super::system::{is_system_group, is_system_topic};
use crate::context::BrokerContext;

/// The collector behind `/metrics`. Holds the broker weakly: a scrape after shutdown finds
/// nothing to report.
#[derive(Debug)]
pub struct BrokerCollector {
    ctx: Weak<BrokerContext>,
    transport: Vec<Arc<comet_remoting::TransportStats>>,
}

impl BrokerCollector {
    /// Reports the broker behind `ctx` and the back-pressure counters of its listeners.
    pub fn new(
        ctx: Weak<BrokerContext>,
        transport: Vec<Arc<comet_remoting::TransportStats>>,
    ) -> Self {
        BrokerCollector { ctx, transport }
    }
}

impl Collector for BrokerCollector {
    /// The families change with the broker's topics and groups, so none is declared up front.
    fn desc(&self) -> Vec<&Desc> {
        Vec::new()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Some(ctx) = self.ctx.upgrade() else {
            return Vec::new();
        };
        let mut out = Families::default();
        collect_metadata(&ctx, &mut out);
        collect_connections(&ctx, &mut out);
        collect_lag(&ctx, &mut out);
        collect_storage(&ctx, &mut out);
        collect_timer(&ctx, &mut out);
        collect_comet(&ctx, &mut out);
        super::internals::collect_flush(&ctx, &mut out);
        super::internals::collect_transport(&self.transport, &mut out);
        super::traffic_families::collect(&ctx, &mut out);
        out.into_inner()
    }
}

fn one(value: i64) -> [(Labels, i64); 1] {
    [(Vec::new(), value)]
}

/// A client's version as Apache labels it (`v4_9_8`).
fn version_label(ordinal: i32) -> String {
    version_name(ordinal).map_or_else(|| ordinal.to_string(), str::to_ascii_lowercase)
}

fn collect_metadata(ctx: &BrokerContext, out: &mut Families) {
    out.gauge(
        "rocketmq_broker_permission",
        "Broker permission",
        &one(i64::from(ctx.broker_permission())),
    );
    out.gauge(
        "rocketmq_topic_number",
        "Active topic number",
        &one(ctx.topic_config.len() as i64),
    );
    out.gauge(
        "rocketmq_consumer_group_number",
        "Active subscription group number",
        &one(ctx.subscription_groups.all().len() as i64),
    );
}

/// The `protocol_type` of a client connection: `grpc` for the 5.x gRPC clients (whose channels
/// stand in for a gRPC stream, see [`crate::grpc::registry`]), else `remoting`.
fn protocol_type(channel: &comet_remoting::Channel) -> &'static str {
    if channel.is_detached() {
        "grpc"
    } else {
        "remoting"
    }
}

fn collect_connections(ctx: &BrokerContext, out: &mut Families) {
    let mut producers: BTreeMap<(String, String, &'static str), i64> = BTreeMap::new();
    for group in ctx.producers.groups() {
        for info in ctx.producers.group_channels(&group) {
            let key = (
                info.language.name().to_ascii_lowercase(),
                version_label(info.version),
                protocol_type(&info.channel),
            );
            *producers.entry(key).or_default() += 1;
        }
    }
    let rows: Vec<(Labels, i64)> = producers
        .into_iter()
        .map(|((language, version, protocol), n)| {
            let labels = vec![
                ("language", language),
                ("version", version),
                ("protocol_type", protocol.to_owned()),
            ];
            (labels, n)
        })
        .collect();
    out.gauge(
        "rocketmq_producer_connections",
        "Producer connections",
        &rows,
    );

    let mut consumers: BTreeMap<(String, String, String, &'static str, &'static str), i64> =
        BTreeMap::new();
    for group in ctx.consumers.groups() {
        let Some(info) = ctx.consumers.group_info(&group) else {
            continue;
        };
        let mode = match info.consume_type {
            ConsumeType::ConsumeActively => "pull",
            ConsumeType::ConsumePassively => "push",
            ConsumeType::ConsumePop => "pop",
        };
        for c in info.channels() {
            let key = (
                group.clone(),
                c.language.name().to_ascii_lowercase(),
                version_label(c.version),
                mode,
                protocol_type(&c.channel),
            );
            *consumers.entry(key).or_default() += 1;
        }
    }
    let rows: Vec<(Labels, i64)> = consumers
        .into_iter()
        .map(|((group, language, version, mode, protocol), n)| {
            let system = is_system_group(&group).to_string();
            let labels = vec![
                ("consumer_group", group),
                ("language", language),
                ("version", version),
                ("consume_mode", mode.to_owned()),
                ("protocol_type", protocol.to_owned()),
                ("is_system", system),
            ];
            (labels, n)
        })
        .collect();
    out.gauge(
        "rocketmq_consumer_connections",
        "Consumer connections",
        &rows,
    );
}

/// One group's backlog on one topic: messages not yet consumed, and the store time of the oldest
/// of them (0 when there is none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lag {
    pub messages: i64,
    pub oldest_store_timestamp_ms: i64,
}

/// The backlog of `group` on `topic` from the committed offsets: per queue, the queue's end
/// minus the committed offset (a queue without one counts as caught up, as a new group starts at
/// the end).
pub fn lag_of(ctx: &BrokerContext, group: &str, topic: &str, queues: i32) -> Lag {
    let mut lag = Lag::default();
    for queue_id in 0..queues {
        let end = ctx.store.get_max_offset_in_queue(topic, queue_id).max(0);
        let committed = ctx.consumer_offsets.query_offset(group, topic, queue_id);
        let committed = if committed < 0 {
            end
        } else {
            committed.min(end)
        };
        let behind = end - committed;
        if behind <= 0 {
            continue;
        }
        lag.messages += behind;
        let stored = ctx
            .store
            .get_message_store_timestamp(topic, queue_id, committed);
        if stored > 0
            && (lag.oldest_store_timestamp_ms == 0 || stored < lag.oldest_store_timestamp_ms)
        {
            lag.oldest_store_timestamp_ms = stored;
        }
    }
    lag
}

/// What a group has fetched of a topic and not committed (in flight), what is stored and not
/// yet fetched (ready), and the store time of the oldest message not yet fetched (0 when there is
/// none). A queue the group has not pulled since the broker started counts from its committed
/// offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    pub inflight: i64,
    pub ready: i64,
    pub oldest_unpulled_timestamp_ms: i64,
}

/// [`Progress`] of `group` on `topic`'s first `queues` queues.
pub fn progress_of(ctx: &BrokerContext, group: &str, topic: &str, queues: i32) -> Progress {
    let offsets = &ctx.consumer_offsets;
    let mut progress = Progress::default();
    for queue_id in 0..queues {
        let end = ctx.store.get_max_offset_in_queue(topic, queue_id).max(0);
        let pulled = offsets.query_pull_offset(group, topic, queue_id);
        let pulled = if pulled < 0 { end } else { pulled.min(end) };
        let committed = offsets.query_offset(group, topic, queue_id);
        let committed = if committed < 0 {
            pulled
        } else {
            committed.min(pulled)
        };
        progress.inflight += pulled - committed;
        progress.ready += end - pulled;
        if end > pulled {
            let stored = ctx
                .store
                .get_message_store_timestamp(topic, queue_id, pulled);
            if stored > 0
                && (progress.oldest_unpulled_timestamp_ms == 0
                    || stored < progress.oldest_unpulled_timestamp_ms)
            {
                progress.oldest_unpulled_timestamp_ms = stored;
            }
        }
    }
    progress
}

/// The topics whose lag is reported for `group`: its online subscriptions and the topics it has
/// offsets on, without retry topics.
fn lag_topics(ctx: &BrokerContext, group: &str) -> BTreeSet<String> {
    let mut topics: BTreeSet<String> = ctx
        .consumer_offsets
        .topics_of_group(group)
        .into_iter()
        .collect();
    if let Some(info) = ctx.consumers.group_info(group) {
        topics.extend(info.subscriptions().keys().cloned());
    }
    topics.retain(|t| !is_retry_topic(t));
    topics
}

fn collect_lag(ctx: &BrokerContext, out: &mut Families) {
    let now = now_millis();
    let broker_perm = ctx.broker_permission();
    let mut messages = Vec::new();
    let mut latency = Vec::new();
    let (mut inflight, mut ready, mut queueing) = (Vec::new(), Vec::new(), Vec::new());
    for group in ctx
        .subscription_groups
        .all()
        .into_iter()
        .map(|g| g.group_name)
    {
        for topic in lag_topics(ctx, &group) {
            let Some(config) = ctx.topic_config.select(&topic) else {
                continue;
            };
            let topic_perm = config.perm & broker_perm;
            if !perm::is_readable(topic_perm) && !perm::is_writeable(topic_perm) {
                continue;
            }
            let lag = lag_of(ctx, &group, &topic, config.write_queue_nums);
            let progress = progress_of(ctx, &group, &topic, config.write_queue_nums);
            let system = (is_system_group(&group) || is_system_topic(ctx, &topic)).to_string();
            let labels: Labels = vec![
                ("consumer_group", group.clone()),
                ("topic", topic),
                ("is_retry", "false".to_owned()),
                ("is_system", system),
            ];
            let age = |stored_ms: i64| {
                if stored_ms > 0 {
                    (now - stored_ms).max(0)
                } else {
                    0
                }
            };
            messages.push((labels.clone(), lag.messages));
            latency.push((labels.clone(), age(lag.oldest_store_timestamp_ms)));
            inflight.push((labels.clone(), progress.inflight));
            ready.push((labels.clone(), progress.ready));
            queueing.push((labels, age(progress.oldest_unpulled_timestamp_ms)));
        }
    }
    out.gauge(
        "rocketmq_consumer_lag_messages",
        "Consumer lag messages",
        &messages,
    );
    out.gauge(
        "rocketmq_consumer_lag_latency_milliseconds",
        "Consumer lag time",
        &latency,
    );
    out.gauge(
        "rocketmq_consumer_inflight_messages",
        "Consumer inflight messages",
        &inflight,
    );
    out.gauge(
        "rocketmq_consumer_queueing_latency_milliseconds",
        "Consumer queueing time",
        &queueing,
    );
    out.gauge(
        "rocketmq_consumer_ready_messages",
        "Consumer ready messages",
        &ready,
    );
}

fn collect_storage(ctx: &BrokerContext, out: &mut Families) {
    let storage: Labels = vec![
        ("storage_type", "local".to_owned()),
        ("storage_medium", "disk".to_owned()),
    ];
    let stats = ctx.store.stats();
    let used = comet_store::cleanup::disk_usage(&ctx.config.store_path_root_dir)
        .map(|d| d.total_bytes.saturating_sub(d.free_bytes))
        .ok();
    let size_rows: Vec<(Labels, i64)> = used
        .map(|u| (storage.clone(), i64::try_from(u).unwrap_or(i64::MAX)))
        .into_iter()
        .collect();
    out.gauge(
        "rocketmq_storage_size_bytes",
        "Broker storage size",
        &size_rows,
    );
    let flush_behind = (stats.commit_log_max_offset - stats.commit_log_flushed_offset).max(0);
    out.gauge(
        "rocketmq_storage_flush_behind_bytes",
        "Broker flush behind bytes",
        &[(storage.clone(), flush_behind)],
    );
    out.gauge(
        "rocketmq_storage_dispatch_behind_bytes",
        "Broker dispatch behind bytes",
        &[(storage.clone(), stats.dispatch_behind_bytes.max(0))],
    );
    let oldest = ctx
        .store
        .lookup_message_by_offset(stats.commit_log_min_offset)
        .map(|m| m.store_timestamp)
        .filter(|t| *t > 0);
    let reserve: Vec<(Labels, i64)> = oldest
        .map(|t| (storage, (now_millis() - t).max(0)))
        .into_iter()
        .collect();
    out.gauge(
        "rocketmq_storage_message_reserve_time_milliseconds",
        "Broker message reserve time",
        &reserve,
    );
}

/// The timer wheel's progress, with the storage labels Apache puts on them. The latencies are in
/// milliseconds (Apache's dequeue latency records seconds under a millisecond unit).
fn collect_timer(ctx: &BrokerContext, out: &mut Families) {
    let Some(stats) = ctx.timer.stats() else {
        return;
    };
    let storage: Labels = vec![
        ("storage_type", "local".to_owned()),
        ("storage_medium", "disk".to_owned()),
    ];
    let now = now_millis();
    let topic = comet_protocol::naming::TIMER_TOPIC;
    let max = ctx.store.get_max_offset_in_queue(topic, 0);
    let enqueue_lag = (max - stats.enqueue_offset).max(0);
    let enqueue_latency = if enqueue_lag > 0 {
        let stored = ctx
            .store
            .get_message_store_timestamp(topic, 0, stats.enqueue_offset);
        if stored > 0 { (now - stored).max(0) } else { 0 }
    } else {
        0
    };
    let parked = i64::try_from(stats.parked).unwrap_or(i64::MAX);
    for (name, help, value) in [
        (
            "rocketmq_timer_enqueue_lag",
            "Timer enqueue messages lag",
            enqueue_lag,
        ),
        (
            "rocketmq_timer_enqueue_latency_milliseconds",
            "Timer enqueue latency",
            enqueue_latency,
        ),
        (
            "rocketmq_timer_dequeue_lag",
            "Timer dequeue messages lag",
            parked,
        ),
        (
            "rocketmq_timer_dequeue_latency_milliseconds",
            "Timer dequeue latency",
            (now - stats.collect_ms).max(0),
        ),
    ] {
        out.gauge(name, help, &[(storage.clone(), value)]);
    }
}

fn collect_comet(ctx: &Arc<BrokerContext>, out: &mut Families) {
    let s = ctx.store.stats();
    let counters = [
        (
            "comet_store_put_messages_total",
            "Messages appended to the CommitLog",
            s.put_message_times_total,
        ),
        (
            "comet_store_put_bytes_total",
            "Bytes appended to the CommitLog",
            s.put_message_size_total,
        ),
        (
            "comet_store_put_failures_total",
            "Appends refused by the store",
            s.put_message_failed_times,
        ),
        (
            "comet_store_flush_timeouts_total",
            "SYNC_FLUSH appends answered before their flush completed",
            s.put_message_flush_timeouts,
        ),
        (
            "comet_store_get_found_total",
            "Reads that found messages",
            s.get_message_times_found,
        ),
        (
            "comet_store_get_miss_total",
            "Reads that found none",
            s.get_message_times_miss,
        ),
        (
            "comet_store_dispatched_records_total",
            "Records dispatched to ConsumeQueues and the index",
            s.dispatched_records,
        ),
    ];
    for (name, help, value) in counters {
        out.counter(name, help, value);
    }
    out.gauge(
        "comet_pull_held_requests",
        "Pulls held by long polling",
        &one(ctx.pull_hold.held_count() as i64),
    );
    out.gauge(
        "comet_ha_slaves",
        "Slaves replicating from this broker",
        &one(ctx.replication.master.slaves().len() as i64),
    );
}
