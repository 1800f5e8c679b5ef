//! Admin: create a topic on every broker of a cluster, read its route and queue offsets, and
//! delete it (what `comet topic create|route|stats|delete` do).
//!
//! `cargo run -p comet-client --example admin`

use std::error::Error;
use std::time::Duration;

use comet_client::admin::topic::default_topic_config;
use comet_client::admin::{MQAdmin, TopicTarget};
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{ClientConfig, Message};

type BoxError = Box<dyn Error + Send + Sync>;

/// The cluster `comet serve` registers its broker in (`brokerClusterName`).
pub const CLUSTER: &str = "DefaultCluster";
const DEADLINE: Duration = Duration::from_secs(60);

/// What the admin calls reported.
#[derive(Debug)]
pub struct Report {
    /// Brokers that created the topic.
    pub created_on: Vec<String>,
    /// Write queues of the topic in its route.
    pub write_queues: i32,
    /// Whether the name server's topic list had the topic.
    pub listed: bool,
    /// Messages stored in the topic's queues (sum of max - min offsets).
    pub stored: i64,
}

/// Creates `topic` with `queues` queues, sends `count` messages, reads the stats, deletes it.
pub async fn run(namesrv: &str, topic: &str, queues: i32, count: i64) -> Result<Report, BoxError> {
    let admin = MQAdmin::new(ClientConfig::new(namesrv))?;
    let mut config = default_topic_config(topic);
    config.read_queue_nums = queues;
    config.write_queue_nums = queues;
    let created_on = admin
        .create_topic(&TopicTarget::Cluster(CLUSTER.to_owned()), &config)
        .await?;

    // The broker registers the new topic with the name server right after creating it.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let route = loop {
        match admin.topic_route(topic).await {
            Ok(route) => break route,
            Err(e) if tokio::time::Instant::now() >= deadline => return Err(e.into()),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    let write_queues = route.queue_datas.iter().map(|q| q.write_queue_nums).sum();
    let listed = admin.topic_list().await?.contains(topic);

    let producer = DefaultMQProducer::new(ProducerConfig::new("example_admin_producer", namesrv));
    producer.start().await?;
    for i in 0..count {
        producer
            .send(Message::new(topic, format!("admin {i}")))
            .await?;
    }
    producer.shutdown().await;

    // Queue offsets follow a send within milliseconds (the broker indexes asynchronously).
    let stored = loop {
        let stats = admin.topic_stats(topic).await?;
        let stored: i64 = stats
            .offset_table
            .values()
            .map(|o| o.max_offset - o.min_offset)
            .sum();
        if stored >= count || tokio::time::Instant::now() >= deadline {
            break stored;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    admin.delete_topic(topic, CLUSTER).await?;
    admin.shutdown().await;
    Ok(Report {
        created_on,
        write_queues,
        listed,
        stored,
    })
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    let report = run(&namesrv, "AdminExampleTopic", 4, 10).await?;
    println!("{report:#?}");
    Ok(())
}
