//! GET_BROKER_RUNTIME_INFO: the broker's running figures under the keys Apache's broker uses, so
//! that mqadmin (`brokerStatus`, `clusterList`), rocketmq-exporter and dashboards read them, plus
//! Comet's own (replication lag, counts).
//!
//! Rates (`putTps`, `getFoundTps`, ...) are Apache's: three numbers, over the last 10, 60 and 600
//! seconds, from the store's counters sampled once a second ([`RuntimeSampler`]); a window not
//! yet covered by samples is left empty, as Apache leaves it. The daily totals
//! (`msgPutTotalTodayMorning`, ...) are the counters as they stood at the last two midnights
//! (UTC) the broker was running through; before the first, 0.
//!
//! Comet runs requests as tasks, not on thread pools with queues: the thread-pool queue figures
//! Apache reports (sizes, capacities, head wait times) are 0. It has no transient store pool, so
//! `remainTransientStoreBufferNumbs` is Java's `Integer.MAX_VALUE`, as Apache reports it with the
//! pool off, and it does not track how long the CommitLog's write lock is held
//! (`pageCacheLockTimeMills` is 0).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use comet_protocol::body::KvTable;
use comet_protocol::time::now_millis;

use crate::context::BrokerContext;

pub mod sampler;

pub use sampler::{Counters, RuntimeSampler};

/// Labels of Apache's put-time distribution, one per bucket of `comet_store::PUT_TIME_BUCKETS_MS`
/// plus the unbounded last.
const PUT_TIME_LABELS: [&str; 13] = [
    "[<=0ms]",
    "[0~10ms]",
    "[10~50ms]",
    "[50~100ms]",
    "[100~200ms]",
    "[200~500ms]",
    "[500ms~1s]",
    "[1~2s]",
    "[2~3s]",
    "[3~4s]",
    "[4~5s]",
    "[5~10s]",
    "[10s~]",
];

/// Samples the store's counters once a second until shutdown.
pub fn start(ctx: &Arc<BrokerContext>) -> tokio::task::JoinHandle<()> {
    let weak = Arc::downgrade(ctx);
    let stop = ctx.shutdown.clone();
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = interval.tick() => {}
            }
            let Some(ctx) = weak.upgrade() else { return };
            ctx.runtime_sampler.sample(counters(&ctx));
        }
    })
}

fn counters(ctx: &BrokerContext) -> Counters {
    let s = ctx.store.stats();
    Counters {
        at_ms: now_millis(),
        puts: s.put_message_times_total,
        gets_found: s.get_message_times_found,
        gets_missed: s.get_message_times_miss,
        transferred: s.get_message_transferred_msg_count,
    }
}

/// Java's `MixAll.humanReadableByteCount(bytes, false)`: `512 B`, `1.5 KiB`, `20.0 GiB`.
pub fn human_readable_bytes(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let exp = ((bytes as f64).ln() / 1024f64.ln()) as i32;
    let unit = "KMGTPE"
        .chars()
        .nth(usize::try_from(exp - 1).unwrap_or(0))
        .unwrap_or('E');
    format!("{:.1} {unit}iB", bytes as f64 / 1024f64.powi(exp))
}

/// Java's `[ d days, h hours, m minutes, s seconds ]` of a duration in milliseconds.
fn format_runtime(ms: i64) -> String {
    let secs = ms.max(0) / 1000;
    format!(
        "[ {} days, {} hours, {} minutes, {} seconds ]",
        secs / 86_400,
        secs % 86_400 / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// The runtime table.
pub fn runtime_table(ctx: &BrokerContext, boot_timestamp: i64) -> KvTable {
    let s = ctx.store.stats();
    let now = now_millis();
    let mut table: HashMap<String, String> = HashMap::new();
    let mut put = |k: &str, v: String| {
        table.insert(k.to_owned(), v);
    };
    put("bootTimestamp", boot_timestamp.to_string());
    put(
        "runtime",
        format_runtime(now.saturating_sub(boot_timestamp)),
    );
    put(
        "putMessageTimesTotal",
        s.put_message_times_total.to_string(),
    );
    put("putMessageSizeTotal", s.put_message_size_total.to_string());
    put(
        "putMessageFailedTimes",
        s.put_message_failed_times.to_string(),
    );
    let average = s.put_message_size_total as f64 / s.put_message_times_total.max(1) as f64;
    put("putMessageAverageSize", format!("{average:?}"));
    put("putMessageEntireTimeMax", s.put_time_max_ms.to_string());
    put("getMessageEntireTimeMax", s.get_time_max_ms.to_string());
    let distribution = PUT_TIME_LABELS
        .iter()
        .zip(s.put_time_buckets)
        .map(|(label, n)| format!("{label}:{n}"))
        .collect::<Vec<_>>()
        .join(" ");
    put("putMessageDistributeTime", distribution);
    put("dispatchMaxBuffer", "0".to_owned());
    let sampler = &ctx.runtime_sampler;
    put("putTps", sampler.rates(|c| c.puts));
    put("getFoundTps", sampler.rates(|c| c.gets_found));
    put("getMissTps", sampler.rates(|c| c.gets_missed));
    put(
        "getTotalTps",
        sampler.rates(|c| c.gets_found + c.gets_missed),
    );
    put("getTransferredTps", sampler.rates(|c| c.transferred));
    {
        let days = sampler.days.lock();
        put(
            "msgPutTotalYesterdayMorning",
            days.put_yesterday_morning.to_string(),
        );
        put(
            "msgPutTotalTodayMorning",
            days.put_today_morning.to_string(),
        );
        put(
            "msgGetTotalYesterdayMorning",
            days.get_yesterday_morning.to_string(),
        );
        put(
            "msgGetTotalTodayMorning",
            days.get_today_morning.to_string(),
        );
    }
    put("msgPutTotalTodayNow", s.put_message_times_total.to_string());
    put(
        "msgGetTotalTodayNow",
        s.get_message_transferred_msg_count.to_string(),
    );
    put("commitLogMinOffset", s.commit_log_min_offset.to_string());
    put("commitLogMaxOffset", s.commit_log_max_offset.to_string());
    put("dispatchBehindBytes", s.dispatch_behind_bytes.to_string());
    let unflushed = s
        .commit_log_max_offset
        .saturating_sub(s.commit_log_flushed_offset);
    put(
        "remainHowManyDataToFlush",
        human_readable_bytes(u64::try_from(unflushed).unwrap_or(0)),
    );
    put("pageCacheLockTimeMills", "0".to_owned());
    put(
        "earliestMessageTimeStamp",
        ctx.store.earliest_message_time().to_string(),
    );
    put("startAcceptSendRequestTimeStamp", "0".to_owned());
    put("remainTransientStoreBufferNumbs", i32::MAX.to_string());
    let root = &ctx.config.store_path_root_dir;
    let usage = comet_store::cleanup::disk_usage(root).ok();
    let ratio = usage.and_then(|u| u.used_ratio()).unwrap_or(-1.0);
    put("commitLogDiskRatio", format!("{ratio:?}"));
    put("consumeQueueDiskRatio", format!("{ratio:?}"));
    if let Some(u) = usage {
        put(
            "commitLogDirCapacity",
            format!(
                "Total : {}, Free : {}.",
                human_readable_bytes(u.total_bytes),
                human_readable_bytes(u.free_bytes)
            ),
        );
    }
    for pool in ["send", "pull", "litePull", "query", "ack"] {
        put(&format!("{pool}ThreadPoolQueueSize"), "0".to_owned());
        put(&format!("{pool}ThreadPoolQueueCapacity"), "0".to_owned());
        put(
            &format!("{pool}ThreadPoolQueueHeadWaitTimeMills"),
            "0".to_owned(),
        );
    }
    put("EndTransactionQueueSize", "0".to_owned());
    put("EndTransactionThreadPoolQueueCapacity", "0".to_owned());
    KvTable { table }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_and_runtimes_read_as_java_prints_them() {
        assert_eq!(human_readable_bytes(512), "512 B");
        assert_eq!(human_readable_bytes(1536), "1.5 KiB");
        assert_eq!(human_readable_bytes(20 * 1024 * 1024 * 1024), "20.0 GiB");
        assert_eq!(
            format_runtime(90_061_000),
            "[ 1 days, 1 hours, 1 minutes, 1 seconds ]"
        );
    }
}
