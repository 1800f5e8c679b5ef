//! Push consumer, concurrently: the consumer pulls in the background and calls a listener with
//! each message; messages of one queue may be processed in parallel.
//!
//! `cargo run -p comet-client --example push_concurrently` (create the topic first:
//! `comet topic create PushTopic`).

use std::collections::HashSet;
use std::error::Error;
use std::time::Duration;

use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{ConsumeConcurrentlyStatus, ConsumeFromWhere, concurrently_fn};
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{ClientConfig, Message};
use tokio::sync::mpsc;

type BoxError = Box<dyn Error + Send + Sync>;

pub const GROUP: &str = "example_push_group";
/// How long to wait for the messages before giving up.
const DEADLINE: Duration = Duration::from_secs(60);

/// Sends `count` messages and returns the bodies the listener received, in arrival order.
pub async fn run(namesrv: &str, topic: &str, count: usize) -> Result<Vec<String>, BoxError> {
    let mut config = PushConsumerConfig::new(GROUP);
    config.client = ClientConfig::new(namesrv);
    // A group without a committed offset starts at the first stored message.
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    let consumer = DefaultMQPushConsumer::new(config);
    consumer.subscribe(topic, "*").await?;

    let (tx, mut rx) = mpsc::unbounded_channel();
    consumer.register_message_listener(concurrently_fn(move |msgs, _ctx| {
        for msg in msgs {
            let _ = tx.send(String::from_utf8_lossy(&msg.body).into_owned());
        }
        // ReconsumeLater would have the broker deliver these messages again later.
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }));
    consumer.start().await?;

    let producer = DefaultMQProducer::new(ProducerConfig::new("example_push_producer", namesrv));
    producer.start().await?;
    let mut expected = HashSet::new();
    for i in 0..count {
        let body = format!("Hello Comet {i}");
        producer.send(Message::new(topic, body.clone())).await?;
        expected.insert(body);
    }
    producer.shutdown().await;

    let mut received = Vec::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !expected.is_empty() {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(body)) => {
                expected.remove(&body);
                received.push(body);
            }
            _ => break,
        }
    }
    // Shutdown commits the consumed offsets to the broker and leaves the group.
    consumer.shutdown().await;
    if !expected.is_empty() {
        return Err(format!("{} messages not received in {DEADLINE:?}", expected.len()).into());
    }
    Ok(received)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    for body in run(&namesrv, "PushTopic", 10).await? {
        println!("received: {body}");
    }
    Ok(())
}
