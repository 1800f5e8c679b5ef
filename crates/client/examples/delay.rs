//! Scheduled (delayed) messages: a message with a delay level is delivered once its delay has
//! passed. The levels are the broker's `messageDelayLevel`, by default
//! `1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h` (level 1 = 1 s).
//!
//! `cargo run -p comet-client --example delay` (create the topic first:
//! `comet topic create DelayTopic`).

use std::error::Error;
use std::time::Duration;

use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{ConsumeConcurrentlyStatus, ConsumeFromWhere, concurrently_fn};
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{ClientConfig, Message};
use tokio::sync::mpsc;

type BoxError = Box<dyn Error + Send + Sync>;

pub const GROUP: &str = "example_delay_group";
/// Level 2: 5 seconds with the default levels.
pub const DELAY_LEVEL: i32 = 2;
const DEADLINE: Duration = Duration::from_secs(60);

/// Sends `count` delayed messages and returns, for each received one, its body and how long
/// after it was sent it was stored in the topic (milliseconds).
pub async fn run(namesrv: &str, topic: &str, count: usize) -> Result<Vec<(String, i64)>, BoxError> {
    let mut config = PushConsumerConfig::new(GROUP);
    config.client = ClientConfig::new(namesrv);
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    let consumer = DefaultMQPushConsumer::new(config);
    consumer.subscribe(topic, "*").await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    consumer.register_message_listener(concurrently_fn(move |msgs, _ctx| {
        for msg in msgs {
            let body = String::from_utf8_lossy(&msg.body).into_owned();
            let _ = tx.send((body, msg.store_timestamp - msg.born_timestamp));
        }
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }));
    consumer.start().await?;

    let producer = DefaultMQProducer::new(ProducerConfig::new("example_delay_producer", namesrv));
    producer.start().await?;
    for i in 0..count {
        let msg = Message::new(topic, format!("delayed {i}")).with_delay_level(DELAY_LEVEL);
        producer.send(msg).await?;
    }
    producer.shutdown().await;

    let mut received = Vec::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while received.len() < count {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(delivery)) => received.push(delivery),
            _ => break,
        }
    }
    consumer.shutdown().await;
    if received.len() < count {
        return Err(format!("{} of {count} delayed messages received", received.len()).into());
    }
    Ok(received)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    for (body, delay_ms) in run(&namesrv, "DelayTopic", 3).await? {
        println!("{body}: stored {delay_ms} ms after it was sent");
    }
    Ok(())
}
