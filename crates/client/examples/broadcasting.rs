//! Broadcasting: every member of the group receives every message. Offsets are kept by each
//! member in a local file instead of on the broker.
//!
//! `cargo run -p comet-client --example broadcasting` (create the topic first:
//! `comet topic create BroadcastTopic`).

use std::collections::HashSet;
use std::error::Error;
use std::path::Path;
use std::time::Duration;

use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{
    ConsumeConcurrentlyStatus, ConsumeFromWhere, MessageModel, concurrently_fn,
};
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{ClientConfig, Message};
use tokio::sync::mpsc;

type BoxError = Box<dyn Error + Send + Sync>;

pub const GROUP: &str = "example_broadcast_group";
const MEMBERS: [&str; 2] = ["member-a", "member-b"];
const DEADLINE: Duration = Duration::from_secs(60);

/// Starts two members of one broadcasting group, sends `count` messages, and returns the bodies
/// each member received. Offsets are stored under `offset_dir`.
pub async fn run(
    namesrv: &str,
    topic: &str,
    count: usize,
    offset_dir: &Path,
) -> Result<Vec<Vec<String>>, BoxError> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut consumers = Vec::new();
    for (member, name) in MEMBERS.iter().enumerate() {
        let mut config = PushConsumerConfig::new(GROUP);
        config.client = ClientConfig::new(namesrv);
        // Two members in one process need two client instances (one per instance name).
        config.client.instance_name = (*name).to_owned();
        config.message_model = MessageModel::Broadcasting;
        config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
        config.local_offset_store_dir = Some(offset_dir.to_path_buf());
        let consumer = DefaultMQPushConsumer::new(config);
        consumer.subscribe(topic, "*").await?;
        let tx = tx.clone();
        consumer.register_message_listener(concurrently_fn(move |msgs, _ctx| {
            for msg in msgs {
                let _ = tx.send((member, String::from_utf8_lossy(&msg.body).into_owned()));
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }));
        consumer.start().await?;
        consumers.push(consumer);
    }

    let producer =
        DefaultMQProducer::new(ProducerConfig::new("example_broadcast_producer", namesrv));
    producer.start().await?;
    let mut expected = HashSet::new();
    for i in 0..count {
        let body = format!("broadcast {i}");
        producer.send(Message::new(topic, body.clone())).await?;
        expected.insert(body);
    }
    producer.shutdown().await;

    let mut received = vec![Vec::new(); MEMBERS.len()];
    let mut missing = vec![expected; MEMBERS.len()];
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while missing.iter().any(|m| !m.is_empty()) {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some((member, body))) => {
                missing[member].remove(&body);
                received[member].push(body);
            }
            _ => break,
        }
    }
    for consumer in &consumers {
        consumer.shutdown().await;
    }
    if missing.iter().any(|m| !m.is_empty()) {
        return Err(format!("not every member received everything in {DEADLINE:?}").into());
    }
    Ok(received)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    let offsets = std::env::temp_dir().join("comet-broadcasting-example");
    let received = run(&namesrv, "BroadcastTopic", 5, &offsets).await?;
    for (name, bodies) in MEMBERS.iter().zip(received) {
        println!("{name} received {bodies:?}");
    }
    Ok(())
}
