//! `comet group consume-stats` (mqadmin `brokerConsumeStats`): every subscription group's lag on
//! one broker, or on every master.

use anyhow::Result;
use comet_client::admin::MQAdmin;

use super::Table;

/// One (group, topic) line of a broker's consume stats.
struct Line {
    broker: String,
    group: String,
    topic: String,
    queues: usize,
    diff: i64,
}

/// `group consume-stats`.
pub async fn consume_stats(
    admin: &MQAdmin,
    broker: Option<String>,
    order: bool,
    json: bool,
) -> Result<()> {
    let addrs: Vec<String> = match broker {
        Some(b) => vec![b],
        None => admin
            .master_addrs(None)
            .await?
            .into_iter()
            .map(|(_, a)| a)
            .collect(),
    };
    let mut lines = Vec::new();
    let mut totals = serde_json::Map::new();
    for addr in addrs {
        let list = admin.broker_consume_stats(&addr, order).await?;
        totals.insert(addr.clone(), serde_json::json!(list.total_diff));
        for by_group in &list.consume_stats_list {
            for (group, stats) in by_group {
                for s in stats {
                    let mut topics: Vec<&str> =
                        s.offset_table.keys().map(|q| q.topic.as_str()).collect();
                    topics.sort_unstable();
                    topics.dedup();
                    for topic in topics {
                        let queues: Vec<_> = s
                            .offset_table
                            .iter()
                            .filter(|(q, _)| q.topic == topic)
                            .collect();
                        lines.push(Line {
                            broker: addr.clone(),
                            group: group.clone(),
                            topic: topic.to_owned(),
                            queues: queues.len(),
                            diff: queues
                                .iter()
                                .map(|(_, o)| o.broker_offset.saturating_sub(o.consumer_offset))
                                .sum(),
                        });
                    }
                }
            }
        }
    }
    lines.sort_by(|a, b| (&a.broker, &a.group, &a.topic).cmp(&(&b.broker, &b.group, &b.topic)));
    if json {
        let rows: Vec<_> = lines
            .iter()
            .map(|l| {
                serde_json::json!({
                    "brokerAddr": l.broker, "group": l.group, "topic": l.topic,
                    "queues": l.queues, "diff": l.diff,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"totalDiff": totals, "groups": rows})
        );
        return Ok(());
    }
    let mut table = Table::new(["BROKER", "GROUP", "TOPIC", "QUEUES", "DIFF"]);
    for l in &lines {
        table.row([
            l.broker.clone(),
            l.group.clone(),
            l.topic.clone(),
            l.queues.to_string(),
            l.diff.to_string(),
        ]);
    }
    table.print();
    for (addr, total) in totals {
        println!("\n{addr} Diff Total: {total}");
    }
    Ok(())
}
