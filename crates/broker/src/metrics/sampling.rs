//! The sampling of the statistics windows: the broker's traffic counters read every 10 s into
//! [`StatsWindows`] (see the module docs of [`super::windows`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::windows::{
    BROKER_GET_NUMS, BROKER_PUT_NUMS, DAY, GROUP_GET_NUMS, GROUP_GET_SIZE, HOUR, MINUTE, Reading,
    TOPIC_PUT_NUMS, TOPIC_PUT_SIZE,
};
use crate::context::BrokerContext;

/// The cumulative readings of every series from the broker's traffic counters.
pub fn readings(ctx: &BrokerContext) -> Vec<((&'static str, String), Reading)> {
    let load = |n: &std::sync::atomic::AtomicU64| n.load(Ordering::Relaxed);
    let mut out = Vec::new();
    let (mut put, mut get) = (Reading::default(), Reading::default());
    for (topic, counters) in ctx.traffic.inbound() {
        let (mut nums, mut size) = (Reading::default(), Reading::default());
        for flow in &counters.by_type {
            let times = load(&flow.size_count);
            nums.times += times;
            nums.value += load(&flow.messages);
            size.times += times;
            size.value += load(&flow.bytes);
        }
        put.times += nums.times;
        put.value += nums.value;
        out.push(((TOPIC_PUT_NUMS, topic.clone()), nums));
        out.push(((TOPIC_PUT_SIZE, topic), size));
    }
    for ((topic, group), flow) in ctx.traffic.outbound() {
        let key = format!("{topic}@{group}");
        let times = load(&flow.size_count);
        let nums = Reading {
            times,
            value: load(&flow.messages),
        };
        get.times += nums.times;
        get.value += nums.value;
        out.push(((GROUP_GET_NUMS, key.clone()), nums));
        let size = Reading {
            times,
            value: load(&flow.bytes),
        };
        out.push(((GROUP_GET_SIZE, key), size));
    }
    let cluster = ctx.config.broker_cluster_name.clone();
    out.push(((BROKER_PUT_NUMS, cluster.clone()), put));
    out.push(((BROKER_GET_NUMS, cluster), get));
    out
}

/// Samples the broker's traffic into its windows until shutdown.
pub fn start(ctx: &Arc<BrokerContext>) -> tokio::task::JoinHandle<()> {
    let weak = Arc::downgrade(ctx);
    let stop = ctx.shutdown.clone();
    tokio::spawn(async move {
        let mut ticks: u64 = 0;
        let mut interval = tokio::time::interval(MINUTE.0);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = interval.tick() => {}
            }
            let Some(ctx) = weak.upgrade() else { return };
            let now = comet_protocol::time::now_millis();
            let readings = readings(&ctx);
            let windows = &ctx.stats_windows;
            // The hour and day windows take every 60th and 360th of these 10-second samples.
            if ticks.is_multiple_of(HOUR.0.as_secs() / MINUTE.0.as_secs()) {
                windows.sample_hour(now, readings.clone());
            }
            if ticks.is_multiple_of(DAY.0.as_secs() / MINUTE.0.as_secs()) {
                windows.sample_day(now, readings.clone());
            }
            windows.sample_minute(now, readings);
            ticks += 1;
        }
    })
}
