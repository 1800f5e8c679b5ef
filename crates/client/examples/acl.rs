//! ACL: against a broker with `aclEnable=true`, every request is signed with an access key and
//! secret key from the broker's `plain_acl.yml` (RocketMQ's ACL 1.0, `AclClientRPCHook`).
//!
//! `cargo run -p comet-client --example acl` against
//! `comet serve --set aclEnable=true --set aclFile=plain_acl.yml` with the guide's
//! `plain_acl.yml` (credentials from `ACCESS_KEY` and `SECRET_KEY`, default RocketMQ/12345678).

use std::collections::HashSet;
use std::error::Error;
use std::time::Duration;

use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{ConsumeConcurrentlyStatus, ConsumeFromWhere, concurrently_fn};
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{ClientConfig, Message, SessionCredentials};
use tokio::sync::mpsc;

type BoxError = Box<dyn Error + Send + Sync>;

pub const GROUP: &str = "example_acl_group";
const DEADLINE: Duration = Duration::from_secs(60);

/// Sends `count` signed messages and returns the bodies a signed consumer received.
pub async fn run(
    namesrv: &str,
    topic: &str,
    credentials: SessionCredentials,
    count: usize,
) -> Result<Vec<String>, BoxError> {
    // Every producer and consumer of this client signs its requests.
    let mut client = ClientConfig::new(namesrv);
    client.credentials = Some(credentials);

    let mut config = PushConsumerConfig::new(GROUP);
    config.client = client.clone();
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    let consumer = DefaultMQPushConsumer::new(config);
    consumer.subscribe(topic, "*").await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    consumer.register_message_listener(concurrently_fn(move |msgs, _ctx| {
        for msg in msgs {
            let _ = tx.send(String::from_utf8_lossy(&msg.body).into_owned());
        }
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }));
    consumer.start().await?;

    let mut config = ProducerConfig::new("example_acl_producer", namesrv);
    config.client = client;
    let producer = DefaultMQProducer::new(config);
    producer.start().await?;
    let mut expected = HashSet::new();
    for i in 0..count {
        let body = format!("signed {i}");
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
    consumer.shutdown().await;
    if !expected.is_empty() {
        return Err(format!("{} messages not received in {DEADLINE:?}", expected.len()).into());
    }
    Ok(received)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    let access_key = std::env::var("ACCESS_KEY").unwrap_or_else(|_| "RocketMQ".to_owned());
    let secret_key = std::env::var("SECRET_KEY").unwrap_or_else(|_| "12345678".to_owned());
    let credentials = SessionCredentials::new(access_key, secret_key);
    let received = run(&namesrv, "AclTopic", credentials, 5).await?;
    println!("received: {received:?}");
    Ok(())
}
