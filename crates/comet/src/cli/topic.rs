//! `comet topic create|list|route|stats|delete|cluster-list|update-perm` (mqadmin `updateTopic`,
//! `topicList` (`-c` with the consuming groups), `topicRoute`, `topicStatus`, `deleteTopic`,
//! `topicClusterList`, `updateTopicPerm`).

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use comet_client::admin::topic::{DEFAULT_ADMIN_QUEUE_NUMS, default_topic_config};
use comet_client::admin::{MQAdmin, TopicTarget};
use comet_protocol::body::{TopicConfig, TopicFilterType, perm, to_standard_json};

use super::{ConnectArgs, Table, format_millis};

/// Cluster name Comet brokers register under by default.
pub const DEFAULT_CLUSTER: &str = "DefaultCluster";

#[derive(Debug, Args)]
pub struct TopicArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(subcommand)]
    pub command: TopicCommand,
}

#[derive(Debug, Subcommand)]
pub enum TopicCommand {
    /// Create or update a topic on one broker (-b) or every master of a cluster (-c).
    Create {
        /// Topic name.
        topic: String,
        /// Broker address (ip:port).
        #[arg(short = 'b', long, conflicts_with = "cluster")]
        broker: Option<String>,
        /// Cluster name (default DefaultCluster when no broker is given).
        #[arg(short = 'c', long)]
        cluster: Option<String>,
        /// Read queue count.
        #[arg(short = 'r', long, default_value_t = DEFAULT_ADMIN_QUEUE_NUMS)]
        read_queues: i32,
        /// Write queue count.
        #[arg(short = 'w', long, default_value_t = DEFAULT_ADMIN_QUEUE_NUMS)]
        write_queues: i32,
        /// Permission: 2 write, 4 read, 6 read-write.
        #[arg(short = 'p', long, default_value_t = perm::PERM_READ_WRITE)]
        perm: i32,
        /// Mark the topic as ordered.
        #[arg(short = 'o', long)]
        order: bool,
        /// The 5.x message type the topic takes (`message.type` attribute, as mqadmin
        /// `updateTopic -a +message.type=FIFO` sets it): NORMAL, FIFO, DELAY, TRANSACTION or
        /// MIXED. Left unset when not given.
        #[arg(long, value_parser = ["NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"])]
        message_type: Option<String>,
    },
    /// List every topic the name server knows; with -c, each topic's cluster and consuming
    /// groups (retry and dead-letter topics left out).
    List {
        /// Also show each topic's cluster and the groups that consume it.
        #[arg(short = 'c', long = "with-groups")]
        with_groups: bool,
    },
    /// Show a topic's route (brokers and queues).
    Route {
        /// Topic name.
        topic: String,
    },
    /// Show min/max offsets of every queue of a topic.
    #[command(alias = "status")]
    Stats {
        /// Topic name.
        topic: String,
    },
    /// Delete a topic from every master of a cluster and from the name servers.
    Delete {
        /// Topic name.
        topic: String,
        /// Cluster name.
        #[arg(short = 'c', long, default_value = DEFAULT_CLUSTER)]
        cluster: String,
    },
    /// The clusters that hold queues of a topic.
    ClusterList {
        /// Topic name.
        topic: String,
    },
    /// Set a topic's permission on every master of its route (queue counts kept).
    UpdatePerm {
        /// Topic name.
        topic: String,
        /// Permission: 2 write, 4 read, 6 read-write.
        #[arg(short = 'p', long)]
        perm: i32,
    },
}

pub async fn run(args: TopicArgs) -> Result<()> {
    let admin = args.connect.admin()?;
    let json = args.connect.json;
    let outcome = execute(&admin, args.command, json).await;
    admin.shutdown().await;
    outcome
}

async fn execute(admin: &MQAdmin, command: TopicCommand, json: bool) -> Result<()> {
    match command {
        TopicCommand::Create {
            topic,
            broker,
            cluster,
            read_queues,
            write_queues,
            perm: permission,
            order,
            message_type,
        } => {
            if read_queues <= 0 || write_queues <= 0 {
                bail!("queue counts must be positive");
            }
            let target = match (broker, cluster) {
                (Some(b), _) => TopicTarget::Broker(b),
                (None, Some(c)) => TopicTarget::Cluster(c),
                (None, None) => TopicTarget::Cluster(DEFAULT_CLUSTER.to_owned()),
            };
            let mut config = default_topic_config(topic.clone());
            config.read_queue_nums = read_queues;
            config.write_queue_nums = write_queues;
            config.perm = permission;
            config.order = order;
            config.topic_filter_type = TopicFilterType::SingleTag;
            if let Some(kind) = message_type {
                config.attributes.insert("message.type".to_owned(), kind);
            }
            create(admin, &topic, &target, &config, json).await
        }
        TopicCommand::List { with_groups: false } => list(admin, json).await,
        TopicCommand::List { with_groups: true } => {
            super::topic_more::list_with_groups(admin, json).await
        }
        TopicCommand::ClusterList { topic } => {
            super::topic_more::cluster_list(admin, &topic, json).await
        }
        TopicCommand::UpdatePerm { topic, perm } => {
            super::topic_more::update_perm(admin, &topic, perm, json).await
        }
        TopicCommand::Route { topic } => route(admin, &topic, json).await,
        TopicCommand::Stats { topic } => stats(admin, &topic, json).await,
        TopicCommand::Delete { topic, cluster } => delete(admin, &topic, &cluster, json).await,
    }
}

/// How long `topic create` waits for the name servers to route the new topic.
const ROUTE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// How often it asks them meanwhile.
const ROUTE_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// Whether the name servers route `topic` to every broker address in `brokers`.
async fn routed_to_all(admin: &MQAdmin, topic: &str, brokers: &[String]) -> bool {
    let Ok(route) = admin.topic_route(topic).await else {
        return false;
    };
    brokers.iter().all(|b| {
        route
            .broker_datas
            .iter()
            .any(|bd| bd.broker_addrs.values().any(|a| a == b))
    })
}

/// `topic create`: creates `config` on the target's brokers and names them, once the name
/// servers route the topic to all of them (a broker registers a new topic asynchronously, and
/// a producer started right after the command must find it), or after [`ROUTE_WAIT`] with a
/// warning.
async fn create(
    admin: &MQAdmin,
    topic: &str,
    target: &TopicTarget,
    config: &TopicConfig,
    json: bool,
) -> Result<()> {
    let brokers = admin.create_topic(target, config).await?;
    let deadline = tokio::time::Instant::now() + ROUTE_WAIT;
    while !routed_to_all(admin, topic, &brokers).await {
        if tokio::time::Instant::now() >= deadline {
            eprintln!(
                "warning: the name servers do not route {topic} to every broker yet ({ROUTE_WAIT:?}); producers may not find it at once"
            );
            break;
        }
        tokio::time::sleep(ROUTE_POLL).await;
    }
    if json {
        println!(
            "{}",
            serde_json::json!({"topic": topic, "brokers": brokers})
        );
    } else {
        for b in brokers {
            println!("create topic {topic} to {b} success");
        }
    }
    Ok(())
}

/// `topic list`.
async fn list(admin: &MQAdmin, json: bool) -> Result<()> {
    let topics = admin.topic_list().await?;
    if json {
        println!("{}", serde_json::json!({ "topicList": topics }));
    } else {
        for t in topics {
            println!("{t}");
        }
    }
    Ok(())
}

/// `topic route`: the brokers, then the queues.
async fn route(admin: &MQAdmin, topic: &str, json: bool) -> Result<()> {
    let route = admin.topic_route(topic).await?;
    if json {
        println!("{}", to_standard_json(&route)?);
        return Ok(());
    }
    let mut brokers = Table::new(["CLUSTER", "BROKER", "ID", "ADDRESS"]);
    for bd in &route.broker_datas {
        for (id, addr) in &bd.broker_addrs {
            brokers.row([
                bd.cluster.clone(),
                bd.broker_name.clone(),
                id.to_string(),
                addr.clone(),
            ]);
        }
    }
    brokers.print();
    println!();
    let mut queues = Table::new(["BROKER", "READ", "WRITE", "PERM"]);
    for qd in &route.queue_datas {
        queues.row([
            qd.broker_name.clone(),
            qd.read_queue_nums.to_string(),
            qd.write_queue_nums.to_string(),
            perm::to_text(qd.perm),
        ]);
    }
    queues.print();
    Ok(())
}

/// `topic stats`: every queue's offsets, in queue order.
async fn stats(admin: &MQAdmin, topic: &str, json: bool) -> Result<()> {
    let stats = admin.topic_stats(topic).await?;
    let mut rows: Vec<_> = stats.offset_table.iter().collect();
    rows.sort_by(|a, b| a.0.cmp(b.0));
    if json {
        let queues: Vec<_> = rows
            .iter()
            .map(|(mq, o)| {
                serde_json::json!({
                    "brokerName": mq.broker_name, "queueId": mq.queue_id,
                    "minOffset": o.min_offset, "maxOffset": o.max_offset,
                    "lastUpdateTimestamp": o.last_update_timestamp,
                })
            })
            .collect();
        println!("{}", serde_json::json!({"topic": topic, "queues": queues}));
        return Ok(());
    }
    let mut table = Table::new(["BROKER", "QID", "MIN_OFFSET", "MAX_OFFSET", "LAST_UPDATED"]);
    for (mq, o) in rows {
        table.row([
            mq.broker_name.clone(),
            mq.queue_id.to_string(),
            o.min_offset.to_string(),
            o.max_offset.to_string(),
            format_millis(o.last_update_timestamp),
        ]);
    }
    table.print();
    Ok(())
}

/// `topic delete`.
async fn delete(admin: &MQAdmin, topic: &str, cluster: &str, json: bool) -> Result<()> {
    // Apache's mqadmin reports success for a topic that never existed; a typo then looks like
    // a deletion. Here it is an error, and nothing is sent.
    match admin.topic_route(topic).await {
        Err(comet_client::ClientError::NoRoute {
            reason: comet_client::NoRouteReason::TopicNotExist,
            ..
        }) => bail!(
            "topic {topic} does not exist (the name servers do not know it): nothing was deleted"
        ),
        Err(e) => return Err(e).with_context(|| format!("reading the route of topic {topic}")),
        Ok(_) => {}
    }
    admin.delete_topic(topic, cluster).await?;
    if json {
        println!(
            "{}",
            serde_json::json!({"deleted": topic, "cluster": cluster})
        );
    } else {
        println!("delete topic [{topic}] from cluster [{cluster}] success");
    }
    Ok(())
}
