//! Lite pull consumer: the application polls, and here also assigns its queue, seeks and commits
//! by hand (RocketMQ's `DefaultLitePullConsumer`; `subscribe` instead of `assign` lets the group
//! share the queues out).
//!
//! `cargo run -p comet-client --example lite_pull` (create the topic first:
//! `comet topic create LitePullTopic`).

use std::error::Error;
use std::time::Duration;

use comet_client::consumer::lite::{DefaultLitePullConsumer, LitePullConsumerConfig};
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{ClientConfig, Message};

type BoxError = Box<dyn Error + Send + Sync>;

pub const GROUP: &str = "example_lite_pull_group";
const DEADLINE: Duration = Duration::from_secs(60);

/// What the consumer read.
#[derive(Debug)]
pub struct Polled {
    /// `(queue offset, body)` of the messages sent by this run, read from the first of them.
    pub first_pass: Vec<(i64, String)>,
    /// The group's committed offset of the queue after `commit_sync`.
    pub committed: i64,
    /// `(queue offset, body)` read again after seeking back to the fourth message.
    pub replayed: Vec<(i64, String)>,
}

/// Sends six messages to one queue, reads them, commits, then seeks back and reads the last
/// three again.
pub async fn run(namesrv: &str, topic: &str) -> Result<Polled, BoxError> {
    let producer = DefaultMQProducer::new(ProducerConfig::new("example_lite_producer", namesrv));
    producer.start().await?;
    let queue = producer
        .fetch_publish_message_queues(topic)
        .await?
        .into_iter()
        .next()
        .ok_or("the topic has no queue")?;
    let mut first_offset = None;
    for i in 0..6 {
        let msg = Message::new(topic, format!("lite {i}"));
        let result = producer.send_to_queue(msg, &queue).await?;
        first_offset.get_or_insert(result.queue_offset);
    }
    producer.shutdown().await;
    let first = first_offset.ok_or("nothing sent")?;
    let end = first + 6;

    let mut config = LitePullConsumerConfig::new(GROUP, ClientConfig::new(namesrv));
    config.auto_commit = false; // commit explicitly below
    let consumer = DefaultLitePullConsumer::new(config);
    consumer.assign(vec![queue.clone()]).await?;
    consumer.start().await?;

    consumer.seek(&queue, first).await?;
    let first_pass = poll_until(&consumer, end).await?;
    consumer.commit_sync().await?;
    let committed = consumer.committed(&queue).await?;

    consumer.seek(&queue, first + 3).await?;
    let replayed = poll_until(&consumer, end).await?;

    consumer.shutdown().await;
    Ok(Polled {
        first_pass,
        committed,
        replayed,
    })
}

/// Polls until the message before queue offset `end` has been read.
async fn poll_until(
    consumer: &DefaultLitePullConsumer,
    end: i64,
) -> Result<Vec<(i64, String)>, BoxError> {
    let mut read = Vec::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while read.last().is_none_or(|(offset, _)| offset + 1 < end) {
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("offset {end} not reached in {DEADLINE:?}").into());
        }
        for msg in consumer.poll(Duration::from_secs(1)).await? {
            read.push((
                msg.queue_offset,
                String::from_utf8_lossy(&msg.body).into_owned(),
            ));
        }
    }
    Ok(read)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    let polled = run(&namesrv, "LitePullTopic").await?;
    println!("read: {:?}", polled.first_pass);
    println!("committed offset: {}", polled.committed);
    println!("read again after seek: {:?}", polled.replayed);
    Ok(())
}
