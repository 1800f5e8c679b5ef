//! The sampling rounds behind the charts (see [`crate::history`] for what is kept).
//!
//! A round asks the name servers for the cluster, every broker for its runtime figures, every
//! watched topic for its queues' ends and every watched group for its consume stats, and
//! records one point per series. A round whose name-server request fails records nothing but
//! the failure, so the charts show a gap for an outage.
//!
//! Broker rates: brokers report them in their runtime info (`putTps`, and `getTransferredTps`
//! or, in older versions, `getTransferedTps`; the first number is the rate over the last 10 s).
//! When a broker reports no rate (in its first 10 s, or an old broker that reports only
//! counters), the rate is the change of its counter (`putMessageTimesTotal` or
//! `msgPutTotalTodayNow`, `getTransferedTimes` or `msgGetTotalTodayNow`) since the previous
//! reading, kept per broker.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use comet_protocol::body::ClusterInfo;
use comet_protocol::time::now_millis;
use futures::future::join_all;
use tokio::time::MissedTickBehavior;

use crate::history::{Point, Watched};
use crate::state::{AppState, CounterSample};

/// Watched topics (or groups) asked at once.
const SAMPLE_CONCURRENCY: usize = 4;

/// The first number of a rate figure ("12.5 10.1 9.8" → 12.5).
fn first_rate(text: Option<&String>) -> Option<f64> {
    text?.split_whitespace().next()?.parse().ok()
}

fn counter(info: &BTreeMap<String, String>, key: &str) -> Option<u64> {
    info.get(key)?.trim().parse().ok()
}

/// The first counter of `keys` the broker reports.
fn any_counter(info: &BTreeMap<String, String>, keys: &[&str]) -> Option<u64> {
    keys.iter().find_map(|k| counter(info, k))
}

/// `(in, out)` messages per second of the broker at `addr`, from its runtime figures `info`:
/// the rate it reports, else the change of its counter since the previous reading.
pub fn broker_rates(
    state: &AppState,
    addr: &str,
    info: &BTreeMap<String, String>,
) -> (Option<f64>, Option<f64>) {
    let put = first_rate(info.get("putTps"));
    let get = first_rate(
        info.get("getTransferredTps")
            .or_else(|| info.get("getTransferedTps")),
    );
    let now = CounterSample {
        at: Instant::now(),
        put: any_counter(info, &["putMessageTimesTotal", "msgPutTotalTodayNow"]),
        get: any_counter(info, &["getTransferedTimes", "msgGetTotalTodayNow"]),
    };
    let previous = state.samples.lock().insert(addr.to_owned(), now);
    let secs = previous.map_or(0.0, |p| now.at.duration_since(p.at).as_secs_f64());
    let rate = |now: Option<u64>, then: Option<u64>| -> Option<f64> {
        (secs > 0.0).then_some(())?;
        Some(now?.saturating_sub(then?) as f64 / secs)
    };
    (
        put.or_else(|| rate(now.put, previous.and_then(|p| p.put))),
        get.or_else(|| rate(now.get, previous.and_then(|p| p.get))),
    )
}

/// Every broker of `info`: `(cluster, broker name, id, address)`, sorted.
pub fn brokers_of(info: &ClusterInfo) -> Vec<(String, String, i64, String)> {
    let mut brokers = Vec::new();
    for (name, data) in &info.broker_addr_table {
        for (id, addr) in &data.broker_addrs {
            brokers.push((data.cluster.clone(), name.clone(), *id, addr.clone()));
        }
    }
    brokers.sort();
    brokers
}

/// One round: see the module docs.
pub async fn sample_once(state: &AppState) {
    let info = match state.admin.cluster_info().await {
        Ok(info) => {
            state.health.reached(now_millis());
            info
        }
        Err(e) => {
            state.health.failed(now_millis(), e.to_string());
            return;
        }
    };
    sample_brokers(state, &info).await;
    for topics in state
        .history
        .watched(Watched::Topic)
        .chunks(SAMPLE_CONCURRENCY)
    {
        join_all(topics.iter().map(|t| sample_topic(state, t))).await;
    }
    for groups in state
        .history
        .watched(Watched::Group)
        .chunks(SAMPLE_CONCURRENCY)
    {
        join_all(groups.iter().map(|g| sample_group(state, g))).await;
    }
    state.history.prune(now_millis());
}

async fn sample_brokers(state: &AppState, info: &ClusterInfo) {
    let brokers = brokers_of(info);
    let answers = join_all(
        brokers
            .iter()
            .map(|(_, _, _, addr)| state.admin.broker_runtime_info(addr)),
    )
    .await;
    let now = now_millis();
    let (mut total_in, mut total_out) = (0.0, 0.0);
    for ((_, name, id, addr), answer) in brokers.iter().zip(answers) {
        let Ok(runtime) = answer else { continue };
        let (put, get) = broker_rates(state, addr, &runtime);
        let label = format!("{name}/{id}");
        if let Some(put) = put {
            total_in += put;
            state
                .history
                .record(&format!("broker/{addr}/in"), &label, Point(now, put));
        }
        if let Some(get) = get {
            total_out += get;
            state
                .history
                .record(&format!("broker/{addr}/out"), &label, Point(now, get));
        }
    }
    state
        .history
        .record("cluster/in", "in", Point(now, total_in));
    state
        .history
        .record("cluster/out", "out", Point(now, total_out));
}

/// Samples `topic`'s rate of messages in (nothing at its first sample, which sets the base).
pub async fn sample_topic(state: &AppState, topic: &str) {
    let Ok(stats) = state.admin.topic_stats(topic).await else {
        return;
    };
    let ends: i64 = stats.offset_table.values().map(|o| o.max_offset).sum();
    let now = now_millis();
    if let Some(rate) = state
        .history
        .counter_rate(&format!("topic/{topic}"), now, ends)
    {
        state
            .history
            .record(&format!("topic/{topic}/in"), "in", Point(now, rate));
    }
}

/// Samples `group`'s lag, and its consume rate: the change of its committed offsets (brokers
/// that report no consume rate of their own, Comet's among them, are measured the same way).
pub async fn sample_group(state: &AppState, group: &str) {
    let Ok(stats) = state.admin.consume_stats(group, None).await else {
        return;
    };
    let now = now_millis();
    state.history.record(
        &format!("group/{group}/lag"),
        "lag",
        Point(now, stats.diff_total() as f64),
    );
    let committed: i64 = stats
        .offset_table
        .values()
        .map(|o| o.consumer_offset.max(0))
        .sum();
    if let Some(rate) = state
        .history
        .counter_rate(&format!("group/{group}"), now, committed)
    {
        state.history.record(
            &format!("group/{group}/tps"),
            "consumed/s",
            Point(now, rate),
        );
    }
}

/// Samples every interval, the first time at once, until the task is aborted.
pub async fn run(state: Arc<AppState>) {
    let mut tick = tokio::time::interval(state.history.interval());
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        sample_once(&state).await;
    }
}
