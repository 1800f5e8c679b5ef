//! The two pull-style consumers made with builders: a lite pull consumer that subscribes and
//! polls (the group's rebalance gives it the queues, auto-commit records its progress), and a
//! pull consumer that reads every queue of the topic from the start, at offsets it keeps itself.
//!
//! `cargo run -p comet-client --example pull_builders` (create the topic first:
//! `comet topic create PullBuildersTopic`).

use std::error::Error;
use std::time::Duration;

use comet_client::prelude::*;

type BoxError = Box<dyn Error + Send + Sync>;

pub const LITE_GROUP: &str = "example_lite_builder_group";
pub const PULL_GROUP: &str = "example_pull_builder_group";
const DEADLINE: Duration = Duration::from_secs(60);

/// The bodies each consumer read.
#[derive(Debug)]
pub struct Read {
    /// What the lite pull consumer polled.
    pub polled: Vec<String>,
    /// What the pull consumer pulled.
    pub pulled: Vec<String>,
}

/// Sends `count` messages and reads them with both consumers.
pub async fn run(namesrv: &str, topic: &str, count: usize) -> Result<Read, BoxError> {
    let producer = DefaultMQProducer::builder("example_pull_builders_producer")
        .namesrv(namesrv)
        .start()
        .await?;
    for i in 0..count {
        producer
            .send(Message::new(topic, format!("pulled {i}")))
            .await?;
    }
    producer.shutdown().await;

    let lite = DefaultLitePullConsumer::builder(LITE_GROUP)
        .namesrv(namesrv)
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .start()
        .await?;
    let mut polled = Vec::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while polled.len() < count && tokio::time::Instant::now() < deadline {
        for msg in lite.poll(Duration::from_secs(1)).await? {
            polled.push(String::from_utf8_lossy(&msg.body).into_owned());
        }
    }
    // Shutdown commits what was polled.
    lite.shutdown().await;

    let pull = DefaultMQPullConsumer::builder(PULL_GROUP)
        .namesrv(namesrv)
        .register_topic(topic)
        .start()
        .await?;
    let mut pulled = Vec::new();
    for mq in pull.fetch_subscribe_message_queues(topic).await? {
        let mut offset = 0;
        loop {
            let result = pull.pull(&mq, "*", offset, 32).await?;
            if result.pull_status != PullStatus::Found {
                break;
            }
            for msg in &result.msg_found_list {
                pulled.push(String::from_utf8_lossy(&msg.body).into_owned());
            }
            offset = result.next_begin_offset;
        }
        pull.update_consume_offset(&mq, offset)?;
    }
    pull.shutdown().await;
    Ok(Read { polled, pulled })
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    let read = run(&namesrv, "PullBuildersTopic", 10).await?;
    println!("polled: {:?}", read.polled);
    println!("pulled: {:?}", read.pulled);
    Ok(())
}
