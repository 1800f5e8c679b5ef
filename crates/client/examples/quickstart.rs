//! Quick start: a producer and a push consumer made with builders, and an async listener.
//!
//! The listener is a closure returning a future: it may await (here it hands each body to a
//! channel with room for only a few, waiting while the channel is full) and it captures state
//! cloned into it (the channel's sender and a counter shared with `run`).
//!
//! `cargo run -p comet-client --example quickstart` (create the topic first:
//! `comet topic create QuickstartTopic`).

use std::collections::HashSet;
use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use comet_client::prelude::*;
use tokio::sync::mpsc;

type BoxError = Box<dyn Error + Send + Sync>;

pub const GROUP: &str = "example_quickstart_group";
/// How long to wait for the messages before giving up.
const DEADLINE: Duration = Duration::from_secs(60);

/// What the consumer saw.
#[derive(Debug)]
pub struct Received {
    /// The bodies, in arrival order.
    pub bodies: Vec<String>,
    /// How many listener calls ran.
    pub calls: usize,
}

/// Sends `count` messages and returns what the listener received.
pub async fn run(namesrv: &str, topic: &str, count: usize) -> Result<Received, BoxError> {
    let (tx, mut rx) = mpsc::channel::<String>(4);
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let consumer = DefaultMQPushConsumer::builder(GROUP)
        .namesrv(namesrv)
        .subscribe(topic, "*")
        // A group without a committed offset starts at the first stored message.
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .listener(MessageListener::concurrently_async(move |msgs, _ctx| {
            // Each call gets its own clones of the captured state.
            let tx = tx.clone();
            let calls = Arc::clone(&counted);
            async move {
                calls.fetch_add(1, Ordering::Relaxed);
                for msg in &msgs {
                    let body = String::from_utf8_lossy(&msg.body).into_owned();
                    if tx.send(body).await.is_err() {
                        // Nobody reads any more: let the broker deliver these again later.
                        return ConsumeConcurrentlyStatus::ReconsumeLater;
                    }
                }
                ConsumeConcurrentlyStatus::ConsumeSuccess
            }
        }))
        .start()
        .await?;

    let producer = DefaultMQProducer::builder("example_quickstart_producer")
        .namesrv(namesrv)
        .start()
        .await?;
    let mut expected = HashSet::new();
    for i in 0..count {
        let body = format!("quickstart {i}");
        producer.send(Message::new(topic, body.clone())).await?;
        expected.insert(body);
    }
    producer.shutdown().await;

    let mut bodies = Vec::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !expected.is_empty() {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(body)) => {
                expected.remove(&body);
                bodies.push(body);
            }
            _ => break,
        }
    }
    // Shutdown commits the consumed offsets to the broker and leaves the group.
    consumer.shutdown().await;
    if !expected.is_empty() {
        return Err(format!("{} messages not received in {DEADLINE:?}", expected.len()).into());
    }
    let calls = calls.load(Ordering::Relaxed);
    Ok(Received { bodies, calls })
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    let received = run(&namesrv, "QuickstartTopic", 10).await?;
    for body in received.bodies {
        println!("received: {body}");
    }
    Ok(())
}
