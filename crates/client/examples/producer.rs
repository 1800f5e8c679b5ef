//! Producer: the four ways to send — sync, async, oneway and batch.
//!
//! `cargo run -p comet-client --example producer` (name server from `NAMESRV_ADDR`, default
//! 127.0.0.1:9876; create the topic first: `comet topic create TopicTest`).

use std::error::Error;

use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{Message, SendResult};

type BoxError = Box<dyn Error + Send + Sync>;

/// The producer group (a name for the senders; transactions are checked back per group).
pub const GROUP: &str = "example_producer_group";

/// What was sent, and how the broker answered.
#[derive(Debug)]
pub struct Sent {
    /// One result per sync send.
    pub sync: Vec<SendResult>,
    /// One result per async send.
    pub sent_async: Vec<SendResult>,
    /// How many oneway sends went out (oneway has no answer).
    pub oneway: usize,
    /// One result for the whole batch; `msg_id` lists the messages' ids, comma-separated.
    pub batch: SendResult,
}

pub async fn run(namesrv: &str, topic: &str) -> Result<Sent, BoxError> {
    let producer = DefaultMQProducer::new(ProducerConfig::new(GROUP, namesrv));
    producer.start().await?;

    // Sync: wait for the broker's answer (retried on another broker on failure).
    let mut sync = Vec::new();
    for i in 0..3 {
        let msg = Message::new(topic, format!("sync {i}"))
            .with_tags("TagA")
            .with_keys([format!("order-{i}")]);
        sync.push(producer.send(msg).await?);
    }

    // Async: `send_async` starts the send on its own task; await the results when needed.
    let pending: Vec<_> = (0..3)
        .map(|i| producer.send_async(Message::new(topic, format!("async {i}"))))
        .collect();
    let mut sent_async = Vec::new();
    for result in pending {
        sent_async.push(result.await?);
    }

    // Oneway: fire and forget (no answer, no retry).
    for i in 0..3 {
        producer
            .send_oneway(Message::new(topic, format!("oneway {i}")))
            .await?;
    }

    // Batch: several messages of one topic in one request (together under 4 MiB).
    let batch = (0..3)
        .map(|i| Message::new(topic, format!("batch {i}")))
        .collect();
    let batch = producer.send_batch(batch).await?;

    producer.shutdown().await;
    Ok(Sent {
        sync,
        sent_async,
        oneway: 3,
        batch,
    })
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    let sent = run(&namesrv, "TopicTest").await?;
    for result in sent.sync.iter().chain(&sent.sent_async) {
        println!(
            "{:?} msgId={} queue={} offset={}",
            result.send_status, result.msg_id, result.message_queue, result.queue_offset
        );
    }
    println!("{} oneway sends", sent.oneway);
    println!(
        "batch {:?} msgIds={}",
        sent.batch.send_status, sent.batch.msg_id
    );
    Ok(())
}
