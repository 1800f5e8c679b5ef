//! `comet stats-all` (mqadmin `statsAll`): for every topic (retry and dead-letter topics left
//! out), each consuming group's backlog, and the topic's and group's message rates and counts
//! from the brokers' statistics (VIEW_BROKER_STATS_DATA).
//!
//! A broker without a statistic (nothing counted yet; on Comet, the metrics endpoint off) counts
//! as 0, as mqadmin counts it. Comet's broker keeps counts since it started, not sampled windows,
//! so its rates read 0 and its 24-hour counts are the counts since start.

use anyhow::Result;
use clap::Args;
use comet_client::admin::MQAdmin;
use comet_protocol::body::BrokerStatsData;
use comet_protocol::body::stats::{STATS_GROUP_GET_NUMS, STATS_TOPIC_PUT_NUMS};
use comet_protocol::naming::{DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX};

use super::{ConnectArgs, Table};

/// Arguments of `comet stats-all`.
#[derive(Debug, Args)]
pub struct StatsAllArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Only this topic.
    #[arg(short = 't', long)]
    pub topic: Option<String>,
    /// Only topics with messages in or out in the last day.
    #[arg(short = 'a', long = "active")]
    pub active: bool,
}

/// One line of the report: a topic and one of its groups (or none).
struct Line {
    topic: String,
    group: Option<String>,
    accumulation: i64,
    in_tps: f64,
    out_tps: f64,
    in_day: i64,
    out_day: i64,
}

/// Runs `comet stats-all`.
pub async fn run(args: StatsAllArgs) -> Result<()> {
    let admin = args.connect.admin()?;
    let outcome = execute(&admin, &args).await;
    admin.shutdown().await;
    let lines = outcome?;
    print(&lines, args.connect.json);
    Ok(())
}

/// The day's count of a statistic: the longest window that counted anything.
fn day_sum(data: &BrokerStatsData) -> i64 {
    [&data.stats_day, &data.stats_hour, &data.stats_minute]
        .into_iter()
        .map(|w| w.sum)
        .find(|s| *s != 0)
        .unwrap_or(0)
}

/// The summed minute rate and day count of one statistic over `masters`.
async fn stat(admin: &MQAdmin, masters: &[String], name: &str, key: &str) -> (f64, i64) {
    let mut tps = 0.0;
    let mut day = 0;
    for addr in masters {
        if let Ok(data) = admin.view_broker_stats(addr, name, key).await {
            tps += data.stats_minute.tps;
            day += day_sum(&data);
        }
    }
    (tps, day)
}

async fn execute(admin: &MQAdmin, args: &StatsAllArgs) -> Result<Vec<Line>> {
    let mut lines = Vec::new();
    for topic in admin.topic_list().await? {
        if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
            || topic.starts_with(DLQ_GROUP_TOPIC_PREFIX)
            || args.topic.as_ref().is_some_and(|t| *t != topic)
        {
            continue;
        }
        let Ok(route) = admin.topic_route(&topic).await else {
            continue;
        };
        let masters: Vec<String> = comet_client::admin::route_masters(&route)
            .into_iter()
            .map(|(_, a)| a)
            .collect();
        let groups = admin
            .topic_consumer_groups(&topic)
            .await
            .unwrap_or_default();
        let (in_tps, in_day) = stat(admin, &masters, STATS_TOPIC_PUT_NUMS, &topic).await;
        if groups.is_empty() && (!args.active || in_day > 0) {
            lines.push(Line {
                topic: topic.clone(),
                group: None,
                accumulation: 0,
                in_tps,
                out_tps: 0.0,
                in_day,
                out_day: 0,
            });
        }
        for group in groups {
            let key = format!("{topic}@{group}");
            let (out_tps, out_day) = stat(admin, &masters, STATS_GROUP_GET_NUMS, &key).await;
            let accumulation = admin
                .consume_stats(&group, Some(&topic))
                .await
                .map(|s| s.diff_total().max(0))
                .unwrap_or(0);
            if !args.active || in_day > 0 || out_day > 0 {
                lines.push(Line {
                    topic: topic.clone(),
                    group: Some(group),
                    accumulation,
                    in_tps,
                    out_tps,
                    in_day,
                    out_day,
                });
            }
        }
    }
    Ok(lines)
}

fn print(lines: &[Line], json: bool) {
    if json {
        let rows: Vec<_> = lines
            .iter()
            .map(|l| {
                serde_json::json!({
                    "topic": l.topic, "group": l.group, "accumulation": l.accumulation,
                    "inTps": l.in_tps, "outTps": l.out_tps,
                    "inMsg24Hour": l.in_day, "outMsg24Hour": l.out_day,
                })
            })
            .collect();
        println!("{}", serde_json::json!({ "rows": rows }));
        return;
    }
    let mut table = Table::new([
        "TOPIC",
        "CONSUMER_GROUP",
        "ACCUMULATION",
        "IN_TPS",
        "OUT_TPS",
        "IN_MSG_24H",
        "OUT_MSG_24H",
    ]);
    for l in lines {
        let (group, out_tps, out_day) = match &l.group {
            Some(g) => (
                g.clone(),
                format!("{:.2}", l.out_tps),
                l.out_day.to_string(),
            ),
            None => (String::new(), String::new(), "NO_CONSUMER".to_owned()),
        };
        table.row([
            l.topic.clone(),
            group,
            l.accumulation.to_string(),
            format!("{:.2}", l.in_tps),
            out_tps,
            l.in_day.to_string(),
            out_day,
        ]);
    }
    table.print();
}
