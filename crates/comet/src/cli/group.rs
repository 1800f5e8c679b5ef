//! `comet group progress|connections|status|reset-offset|skip-backlog|clone-offset|create|
//! delete|config|consume-stats` (mqadmin `consumerProgress`, `consumerConnection`,
//! `consumerStatus`, `resetOffsetByTime`, `skipAccumulatedMessage`, `cloneGroupOffset`,
//! `updateSubGroup`, `deleteSubGroup`, `getConsumerConfig`, `brokerConsumeStats`).

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use comet_client::admin::MQAdmin;

use super::{ConnectArgs, Table, format_millis, parse_time};

#[derive(Debug, Args)]
pub struct GroupArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(subcommand)]
    pub command: GroupCommand,
}

#[derive(Debug, Subcommand)]
pub enum GroupCommand {
    /// Per-queue broker offset, consumer offset and lag of a consumer group.
    Progress {
        /// Consumer group.
        group: String,
        /// Only this topic.
        #[arg(short = 't', long)]
        topic: Option<String>,
    },
    /// The group's online clients and subscriptions.
    Connections {
        /// Consumer group.
        group: String,
    },
    /// What each online client of the group reports: queues, subscriptions, statistics.
    Status {
        /// Consumer group.
        group: String,
        /// Only this client (its client id), with its full report.
        #[arg(short = 'i', long = "client")]
        client: Option<String>,
        /// Ask for the client's task dump too.
        #[arg(short = 's', long)]
        jstack: bool,
    },
    /// Reset the group's offsets of a topic to the first message stored at or after a time
    /// (an offline group's offsets are committed queue by queue).
    ResetOffset {
        /// Consumer group.
        group: String,
        /// Topic.
        topic: String,
        /// Epoch milliseconds, yyyyMMddHHmmss or "YYYY-MM-DD HH:MM:SS" (UTC); `now` for the end.
        #[arg(short = 's', long)]
        timestamp: String,
        /// Also move queues whose committed offset is already before the target.
        #[arg(short = 'f', long, default_value_t = true, action = clap::ArgAction::Set)]
        force: bool,
    },
    /// Move the group's offsets of a topic to the end of every queue (skip the backlog).
    SkipBacklog {
        /// Consumer group.
        group: String,
        /// Topic.
        topic: String,
    },
    /// Copy one group's committed offsets of a topic to another group.
    CloneOffset {
        /// Group to copy from.
        #[arg(short = 's', long = "source")]
        source: String,
        /// Group to copy to.
        #[arg(short = 'd', long = "dest")]
        dest: String,
        /// Topic.
        #[arg(short = 't', long)]
        topic: String,
    },
    /// Create or update a subscription group on one broker (-b) or every master of a cluster.
    Create(super::group_admin::GroupConfigArgs),
    /// Delete a subscription group from one broker (-b) or every master of a cluster.
    Delete {
        /// Consumer group.
        group: String,
        /// Broker address (ip:port).
        #[arg(short = 'b', long, conflicts_with = "cluster")]
        broker: Option<String>,
        /// Cluster name (default DefaultCluster when no broker is given).
        #[arg(short = 'c', long)]
        cluster: Option<String>,
        /// Also delete the group's committed offsets.
        #[arg(long)]
        clean_offset: bool,
        /// Also delete the group's %RETRY% and %DLQ% topics.
        #[arg(short = 'r', long)]
        with_topics: bool,
    },
    /// The group's configuration on every master that has it.
    Config {
        /// Consumer group.
        group: String,
    },
    /// Every group's lag on one broker (every master when -b is absent).
    ConsumeStats {
        /// Broker address (ip:port).
        #[arg(short = 'b', long)]
        broker: Option<String>,
        /// Only orderly topics.
        #[arg(short = 'o', long)]
        order: bool,
    },
}

pub async fn run(args: GroupArgs) -> Result<()> {
    let admin = args.connect.admin()?;
    let json = args.connect.json;
    let outcome = execute(&admin, args.command, json).await;
    admin.shutdown().await;
    outcome
}

async fn execute(admin: &MQAdmin, command: GroupCommand, json: bool) -> Result<()> {
    match command {
        GroupCommand::Progress { group, topic } => {
            progress(admin, &group, topic.as_deref(), json).await
        }
        GroupCommand::Connections { group } => connections(admin, &group, json).await,
        GroupCommand::Status {
            group,
            client,
            jstack,
        } => super::group_status::status(admin, &group, client.as_deref(), jstack, json).await,
        GroupCommand::ResetOffset {
            group,
            topic,
            timestamp,
            force,
        } => {
            let ts = if timestamp.trim().eq_ignore_ascii_case("now") {
                comet_protocol::time::now_millis()
            } else {
                parse_time(&timestamp)?
            };
            super::group_admin::reset(admin, &group, &topic, ts, force, json).await
        }
        GroupCommand::SkipBacklog { group, topic } => {
            let end = comet_client::admin::RESET_TO_END;
            super::group_admin::reset(admin, &group, &topic, end, true, json).await
        }
        GroupCommand::CloneOffset {
            source,
            dest,
            topic,
        } => super::group_admin::clone_offset(admin, &source, &dest, &topic, json).await,
        GroupCommand::Create(config) => super::group_admin::create(admin, config, json).await,
        GroupCommand::Delete {
            group,
            broker,
            cluster,
            clean_offset,
            with_topics,
        } => {
            let target = super::group_admin::target(broker, cluster);
            super::group_admin::delete(admin, &group, &target, clean_offset, with_topics, json)
                .await
        }
        GroupCommand::Config { group } => super::group_admin::config(admin, &group, json).await,
        GroupCommand::ConsumeStats { broker, order } => {
            super::group_stats::consume_stats(admin, broker, order, json).await
        }
    }
}

/// `group progress`: per-queue offsets and lag, and the total lag.
async fn progress(admin: &MQAdmin, group: &str, topic: Option<&str>, json: bool) -> Result<()> {
    let stats = admin.consume_stats(group, topic).await?;
    let consume_tps = stats.consume_tps;
    let lines = comet_client::admin::group::progress_lines(stats);
    if lines.is_empty() {
        // As Apache's mqadmin consumerProgress: an empty offset table is an error, not an
        // empty report.
        let on = topic.map(|t| format!(" on topic {t}")).unwrap_or_default();
        bail!(
            "group {group} has no consume progress{on}: no broker holds an offset of it (the group \
             does not exist, or has not committed an offset yet)"
        );
    }
    let total: i64 = lines.iter().map(|l| l.lag()).sum();
    if json {
        let queues: Vec<_> = lines
            .iter()
            .map(|l| {
                serde_json::json!({
                    "topic": l.queue.topic, "brokerName": l.queue.broker_name,
                    "queueId": l.queue.queue_id, "brokerOffset": l.broker_offset,
                    "consumerOffset": l.consumer_offset, "diff": l.lag(),
                    "lastTimestamp": l.last_timestamp,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"group": group, "consumeTps": consume_tps, "diffTotal": total,
                "queues": queues})
        );
        return Ok(());
    }
    let mut table = Table::new([
        "TOPIC",
        "BROKER",
        "QID",
        "BROKER_OFFSET",
        "CONSUMER_OFFSET",
        "DIFF",
        "LAST_TIME",
    ]);
    for l in &lines {
        table.row([
            l.queue.topic.clone(),
            l.queue.broker_name.clone(),
            l.queue.queue_id.to_string(),
            l.broker_offset.to_string(),
            l.consumer_offset.to_string(),
            l.lag().to_string(),
            format_millis(l.last_timestamp),
        ]);
    }
    table.print();
    println!("\nConsume TPS: {consume_tps:.2}");
    println!("Diff Total: {total}");
    Ok(())
}

/// `group connections`: the online clients, then the subscriptions.
async fn connections(admin: &MQAdmin, group: &str, json: bool) -> Result<()> {
    let conn = admin.consumer_connections(group).await?;
    if json {
        println!("{}", serde_json::to_string(&conn)?);
        return Ok(());
    }
    let mut clients = Table::new(["CLIENT_ID", "ADDRESS", "LANGUAGE", "VERSION"]);
    for c in &conn.connection_set {
        clients.row([
            c.client_id.clone(),
            c.client_addr.clone(),
            c.language.clone(),
            c.version.to_string(),
        ]);
    }
    clients.print();
    println!();
    let mut subs = Table::new(["TOPIC", "SUBSCRIPTION"]);
    let mut entries: Vec<_> = conn.subscription_table.values().collect();
    entries.sort_by(|a, b| a.topic.cmp(&b.topic));
    for s in entries {
        subs.row([s.topic.clone(), s.sub_string.clone()]);
    }
    subs.print();
    if let Some(model) = conn.message_model {
        println!("\nMessageModel: {model:?}");
    }
    if let Some(kind) = conn.consume_type {
        println!("ConsumeType: {kind:?}");
    }
    Ok(())
}
