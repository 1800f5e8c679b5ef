//! `comet group reset-offset|skip-backlog|clone-offset|create|delete|config`: the commands that
//! change or read a group's offsets and its subscription-group configuration.

use std::collections::HashMap;

use anyhow::{Result, bail};
use clap::Args;
use comet_client::admin::{MQAdmin, TopicTarget};
use comet_protocol::body::{MessageQueue, SubscriptionGroupConfig};
use comet_protocol::naming::{dlq_topic, retry_topic};

use super::Table;
use super::topic::DEFAULT_CLUSTER;

/// Options of `group create` (mqadmin `updateSubGroup`): the group is written with RocketMQ's
/// defaults for every option not given.
#[derive(Debug, Args)]
pub struct GroupConfigArgs {
    /// Consumer group.
    pub group: String,
    /// Broker address (ip:port).
    #[arg(short = 'b', long, conflicts_with = "cluster")]
    pub broker: Option<String>,
    /// Cluster name (default DefaultCluster when no broker is given).
    #[arg(short = 'c', long)]
    pub cluster: Option<String>,
    /// Whether the group may consume.
    #[arg(short = 's', long, action = clap::ArgAction::Set)]
    pub consume_enable: Option<bool>,
    /// Whether a new group starts from the queue's minimum offset.
    #[arg(short = 'm', long, action = clap::ArgAction::Set)]
    pub consume_from_min_enable: Option<bool>,
    /// Whether broadcast consumption is allowed.
    #[arg(short = 'd', long, action = clap::ArgAction::Set)]
    pub consume_broadcast_enable: Option<bool>,
    /// Whether the group consumes orderly.
    #[arg(short = 'o', long, action = clap::ArgAction::Set)]
    pub consume_message_orderly: Option<bool>,
    /// Retry queue count.
    #[arg(short = 'q', long)]
    pub retry_queue_nums: Option<i32>,
    /// Most redeliveries before a message goes to the dead-letter queue.
    #[arg(short = 'r', long)]
    pub retry_max_times: Option<i32>,
    /// Broker id the group reads from (0 = master).
    #[arg(short = 'i', long)]
    pub broker_id: Option<i64>,
    /// Broker id the group is sent to when it consumes slowly.
    #[arg(short = 'w', long)]
    pub which_broker_when_consume_slowly: Option<i64>,
    /// Whether clients are told when the group's membership changes.
    #[arg(short = 'a', long, action = clap::ArgAction::Set)]
    pub notify_consumer_ids_changed_enable: Option<bool>,
}

impl GroupConfigArgs {
    /// The configuration these options describe.
    fn config(&self) -> SubscriptionGroupConfig {
        let mut c = SubscriptionGroupConfig::new(self.group.clone());
        let flags = [
            (self.consume_enable, &mut c.consume_enable),
            (self.consume_from_min_enable, &mut c.consume_from_min_enable),
            (
                self.consume_broadcast_enable,
                &mut c.consume_broadcast_enable,
            ),
            (self.consume_message_orderly, &mut c.consume_message_orderly),
            (
                self.notify_consumer_ids_changed_enable,
                &mut c.notify_consumer_ids_changed_enable,
            ),
        ];
        for (given, field) in flags {
            if let Some(v) = given {
                *field = v;
            }
        }
        if let Some(v) = self.retry_queue_nums {
            c.retry_queue_nums = v;
        }
        if let Some(v) = self.retry_max_times {
            c.retry_max_times = v;
        }
        if let Some(v) = self.broker_id {
            c.broker_id = v;
        }
        if let Some(v) = self.which_broker_when_consume_slowly {
            c.which_broker_when_consume_slowly = v;
        }
        c
    }
}

/// The brokers `-b` / `-c` name (the default cluster when neither is given).
pub fn target(broker: Option<String>, cluster: Option<String>) -> TopicTarget {
    match (broker, cluster) {
        (Some(b), _) => TopicTarget::Broker(b),
        (None, Some(c)) => TopicTarget::Cluster(c),
        (None, None) => TopicTarget::Cluster(DEFAULT_CLUSTER.to_owned()),
    }
}

/// Prints per-queue offsets, sorted, as a table or in `queues` of a JSON object.
fn print_offsets(
    offsets: HashMap<MessageQueue, i64>,
    mut head: serde_json::Value,
    json: bool,
) -> Result<()> {
    let mut rows: Vec<_> = offsets.into_iter().collect();
    rows.sort();
    if json {
        let queues: Vec<_> = rows
            .iter()
            .map(|(mq, o)| {
                serde_json::json!({"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": o})
            })
            .collect();
        head["queues"] = serde_json::Value::Array(queues);
        println!("{head}");
        return Ok(());
    }
    let mut table = Table::new(["BROKER", "QID", "OFFSET"]);
    for (mq, offset) in rows {
        table.row([mq.broker_name, mq.queue_id.to_string(), offset.to_string()]);
    }
    table.print();
    Ok(())
}

/// `group reset-offset` and `group skip-backlog`: moves the group's offsets of `topic` to
/// `timestamp` (`RESET_TO_END` for the end), online or offline.
pub async fn reset(
    admin: &MQAdmin,
    group: &str,
    topic: &str,
    timestamp: i64,
    force: bool,
    json: bool,
) -> Result<()> {
    let outcome = admin.reset_offset(group, topic, timestamp, force).await?;
    if !json && outcome.offline {
        println!("the group is offline: offsets committed queue by queue");
    }
    let head = serde_json::json!({
        "group": group, "topic": topic, "timestamp": timestamp, "offline": outcome.offline,
    });
    print_offsets(outcome.offsets, head, json)
}

/// `group clone-offset`.
pub async fn clone_offset(
    admin: &MQAdmin,
    source: &str,
    dest: &str,
    topic: &str,
    json: bool,
) -> Result<()> {
    let copied = admin.clone_group_offset(source, dest, topic).await?;
    let head = serde_json::json!({"source": source, "dest": dest, "topic": topic});
    print_offsets(copied, head, json)
}

/// `group create`.
pub async fn create(admin: &MQAdmin, args: GroupConfigArgs, json: bool) -> Result<()> {
    let config = args.config();
    if config.retry_queue_nums < 0 || config.retry_max_times < -1 {
        bail!("retry queue count and retry times must not be negative");
    }
    let target = target(args.broker, args.cluster);
    let brokers = admin.update_subscription_group(&target, &config).await?;
    if json {
        println!(
            "{}",
            serde_json::json!({"group": config.group_name, "brokers": brokers, "config": config})
        );
    } else {
        for b in brokers {
            println!(
                "create subscription group {} to {b} success",
                config.group_name
            );
        }
    }
    Ok(())
}

/// `group delete`.
pub async fn delete(
    admin: &MQAdmin,
    group: &str,
    target: &TopicTarget,
    clean_offset: bool,
    with_topics: bool,
    json: bool,
) -> Result<()> {
    let brokers = admin
        .delete_subscription_group(target, group, clean_offset, with_topics)
        .await?;
    let topics: Vec<String> = if with_topics {
        vec![retry_topic(group), dlq_topic(group)]
    } else {
        Vec::new()
    };
    if json {
        println!(
            "{}",
            serde_json::json!({"deleted": group, "brokers": brokers, "topicsDeleted": topics})
        );
    } else {
        for b in &brokers {
            println!("delete subscription group {group} from {b} success");
        }
        for t in &topics {
            println!("delete topic {t} success");
        }
    }
    Ok(())
}

/// `group config`: every master's copy of the group's configuration.
pub async fn config(admin: &MQAdmin, group: &str, json: bool) -> Result<()> {
    let found = admin.subscription_group_configs(group).await?;
    if found.is_empty() {
        bail!("no broker knows subscription group {group}");
    }
    if json {
        let brokers: Vec<_> = found
            .iter()
            .map(|f| {
                serde_json::json!({
                    "brokerName": f.broker_name, "brokerAddr": f.broker_addr, "config": f.config,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"group": group, "brokers": brokers})
        );
        return Ok(());
    }
    let mut table = Table::new(["BROKER", "KEY", "VALUE"]);
    for f in &found {
        let value = serde_json::to_value(&f.config)?;
        if let serde_json::Value::Object(fields) = value {
            for (key, v) in fields {
                let text = match v {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                };
                table.row([f.broker_name.clone(), key, text]);
            }
        }
    }
    table.print();
    Ok(())
}
