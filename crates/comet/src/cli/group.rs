//! `comet group progress|connections|status|reset-offset` (mqadmin `consumerProgress`,
//! `consumerConnection`, `consumerStatus`, `resetOffsetByTime`).

use anyhow::Result;
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
    /// Reset the group's offsets of a topic to the first message stored at or after a time.
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
        } => reset_offset(admin, &group, &topic, &timestamp, force, json).await,
    }
}

/// `group progress`: per-queue offsets and lag, and the total lag.
async fn progress(admin: &MQAdmin, group: &str, topic: Option<&str>, json: bool) -> Result<()> {
    let lines = admin.consumer_progress(group, topic).await?;
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
            serde_json::json!({"group": group, "diffTotal": total, "queues": queues})
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
    println!("\nDiff Total: {total}");
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

/// `group reset-offset`: moves the group's offsets of `topic` to `timestamp` (`now`: the end).
async fn reset_offset(
    admin: &MQAdmin,
    group: &str,
    topic: &str,
    timestamp: &str,
    force: bool,
    json: bool,
) -> Result<()> {
    let ts = if timestamp.trim().eq_ignore_ascii_case("now") {
        comet_protocol::time::now_millis()
    } else {
        parse_time(timestamp)?
    };
    let offsets = admin.reset_offset_by_time(group, topic, ts, force).await?;
    let mut rows: Vec<_> = offsets.into_iter().collect();
    rows.sort();
    if json {
        let queues: Vec<_> = rows
            .iter()
            .map(|(mq, o)| {
                serde_json::json!({"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": o})
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"group": group, "topic": topic, "timestamp": ts, "queues": queues})
        );
        return Ok(());
    }
    let mut table = Table::new(["BROKER", "QID", "OFFSET"]);
    for (mq, offset) in rows {
        table.row([mq.broker_name, mq.queue_id.to_string(), offset.to_string()]);
    }
    table.print();
    Ok(())
}
