//! Pull consumer: the application picks the queues and offsets, pulls, and records its progress
//! (RocketMQ's `DefaultMQPullConsumer`).
//!
//! `cargo run -p comet-client --example pull` (create the topic first:
//! `comet topic create PullTopic`).

use std::collections::HashMap;
use std::error::Error;
use std::time::Duration;

use comet_client::consumer::pull::{DefaultMQPullConsumer, PullConsumerConfig};
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{ClientConfig, Message, MessageQueue, PullStatus};

type BoxError = Box<dyn Error + Send + Sync>;

pub const GROUP: &str = "example_pull_group";
const DEADLINE: Duration = Duration::from_secs(60);

/// Sends `count` messages, pulls them back, and returns the bodies pulled (in pull order) and
/// the next offset of each queue, which is also committed to the broker.
pub async fn run(
    namesrv: &str,
    topic: &str,
    count: usize,
) -> Result<(Vec<String>, HashMap<MessageQueue, i64>), BoxError> {
    let producer = DefaultMQProducer::new(ProducerConfig::new("example_pull_producer", namesrv));
    producer.start().await?;
    for i in 0..count {
        producer
            .send(Message::new(topic, format!("pull {i}")))
            .await?;
    }
    producer.shutdown().await;

    let consumer =
        DefaultMQPullConsumer::new(PullConsumerConfig::new(GROUP, ClientConfig::new(namesrv)));
    consumer.start().await?;
    let queues = consumer.fetch_subscribe_message_queues(topic).await?;
    // Start where the group left off (-1 when it never committed: start at 0).
    let mut offsets = HashMap::new();
    for mq in &queues {
        let committed = consumer.fetch_consume_offset(mq, true).await?;
        offsets.insert(mq.clone(), committed.max(0));
    }

    let mut bodies = Vec::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while bodies.len() < count && tokio::time::Instant::now() < deadline {
        let mut found = false;
        for mq in &queues {
            let offset = offsets[mq];
            let result = consumer.pull(mq, "*", offset, 32).await?;
            if result.pull_status == PullStatus::Found {
                found = true;
                for msg in &result.msg_found_list {
                    bodies.push(String::from_utf8_lossy(&msg.body).into_owned());
                }
            }
            // NO_NEW_MSG and OFFSET_ILLEGAL also say where to pull next.
            offsets.insert(mq.clone(), result.next_begin_offset);
            consumer.update_consume_offset(mq, result.next_begin_offset)?;
        }
        if !found {
            // Nothing new anywhere: wait a little before the next round.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    for mq in &queues {
        consumer.persist_consume_offset(mq).await?;
    }
    consumer.shutdown().await;
    if bodies.len() < count {
        return Err(format!("pulled {} of {count} messages", bodies.len()).into());
    }
    Ok((bodies, offsets))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    let (bodies, next) = run(&namesrv, "PullTopic", 8).await?;
    println!("pulled {bodies:?}");
    for (mq, offset) in next {
        println!("{mq}: next offset {offset}");
    }
    Ok(())
}
