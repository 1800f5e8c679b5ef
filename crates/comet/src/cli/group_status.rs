//! `comet group status GROUP [--client ID] [--jstack]` (mqadmin `consumerStatus`): the running
//! info each online client of a group reports, relayed by a broker.
//!
//! Without `--client` every client of the group is asked and one summary line is printed per
//! client; with it, that client's full report: properties, subscriptions, per-queue state,
//! per-topic statistics and, with `--jstack`, its task dump.

use std::collections::BTreeMap;

use anyhow::Result;
use comet_client::admin::MQAdmin;
use comet_protocol::body::running::{PROP_CLIENT_VERSION, PROP_CONSUME_ORDERLY, PROP_CONSUME_TYPE};
use comet_protocol::body::{ConsumerRunningInfo, to_standard_json};

use super::{Table, format_millis};

/// Prints the running info of one client, or a summary of every client of the group.
pub async fn status(
    admin: &MQAdmin,
    group: &str,
    client: Option<&str>,
    jstack: bool,
    json: bool,
) -> Result<()> {
    if let Some(client) = client {
        let info = admin.consumer_running_info(group, client, jstack).await?;
        if json {
            println!("{}", to_standard_json(&info)?);
        } else {
            print_detail(&info);
        }
        return Ok(());
    }
    let conn = admin.consumer_connections(group).await?;
    let mut ids: Vec<String> = conn
        .connection_set
        .iter()
        .map(|c| c.client_id.clone())
        .collect();
    ids.sort();
    ids.dedup();
    let mut infos = BTreeMap::new();
    let mut errors = BTreeMap::new();
    for id in ids {
        match admin.consumer_running_info(group, &id, jstack).await {
            Ok(info) => {
                infos.insert(id, info);
            }
            Err(e) => {
                errors.insert(id, e.to_string());
            }
        }
    }
    if json {
        let clients: BTreeMap<&String, serde_json::Value> = infos
            .iter()
            .map(|(id, info)| {
                let text = to_standard_json(info)?;
                Ok((id, serde_json::from_str(&text)?))
            })
            .collect::<Result<_>>()?;
        println!(
            "{}",
            serde_json::json!({"group": group, "clients": clients, "errors": errors})
        );
        return Ok(());
    }
    let mut table = Table::new([
        "CLIENT_ID",
        "VERSION",
        "CONSUME_TYPE",
        "ORDERLY",
        "QUEUES",
        "CACHED_MSGS",
        "SUBSCRIPTIONS",
    ]);
    for (id, info) in &infos {
        table.row([
            id.clone(),
            info.property(PROP_CLIENT_VERSION).unwrap_or("").to_owned(),
            info.property(PROP_CONSUME_TYPE).unwrap_or("").to_owned(),
            info.property(PROP_CONSUME_ORDERLY).unwrap_or("").to_owned(),
            info.mq_table.len().to_string(),
            info.mq_table
                .values()
                .map(|q| i64::from(q.cached_msg_count))
                .sum::<i64>()
                .to_string(),
            info.subscription_set
                .iter()
                .map(|s| format!("{}:{}", s.topic, s.sub_string))
                .collect::<Vec<_>>()
                .join(" "),
        ]);
    }
    table.print();
    for (id, error) in &errors {
        println!("{id}: {error}");
    }
    Ok(())
}

/// One client's report, section by section.
fn print_detail(info: &ConsumerRunningInfo) {
    let mut props = Table::new(["PROPERTY", "VALUE"]);
    for (k, v) in &info.properties {
        props.row([k.clone(), v.clone()]);
    }
    props.print();
    println!();
    let mut subs = Table::new(["TOPIC", "SUBSCRIPTION", "VERSION"]);
    for s in &info.subscription_set {
        subs.row([
            s.topic.clone(),
            s.sub_string.clone(),
            s.sub_version.to_string(),
        ]);
    }
    subs.print();
    println!();
    let mut queues = Table::new([
        "TOPIC",
        "BROKER",
        "QID",
        "COMMIT_OFFSET",
        "CACHED",
        "CACHED_MIN",
        "CACHED_MAX",
        "LOCKED",
        "DROPPED",
        "LAST_PULL",
        "LAST_CONSUME",
    ]);
    for (mq, q) in &info.mq_table {
        queues.row([
            mq.topic.clone(),
            mq.broker_name.clone(),
            mq.queue_id.to_string(),
            q.commit_offset.to_string(),
            q.cached_msg_count.to_string(),
            q.cached_msg_min_offset.to_string(),
            q.cached_msg_max_offset.to_string(),
            q.locked.to_string(),
            q.droped.to_string(),
            format_millis(q.last_pull_timestamp),
            format_millis(q.last_consume_timestamp),
        ]);
    }
    queues.print();
    println!();
    let mut stats = Table::new([
        "TOPIC",
        "PULL_RT",
        "PULL_TPS",
        "CONSUME_RT",
        "OK_TPS",
        "FAILED_TPS",
        "FAILED_MSGS",
    ]);
    for (topic, s) in &info.status_table {
        stats.row([
            topic.clone(),
            format!("{:.2}", s.pull_rt),
            format!("{:.2}", s.pull_tps),
            format!("{:.2}", s.consume_rt),
            format!("{:.2}", s.consume_ok_tps),
            format!("{:.2}", s.consume_failed_tps),
            s.consume_failed_msgs.to_string(),
        ]);
    }
    stats.print();
    if let Some(jstack) = &info.jstack {
        println!("\n{jstack}");
    }
}
