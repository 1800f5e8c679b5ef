//! Message trace: a traced producer and a traced push consumer record a Pub event per send and a
//! SubBefore and a SubAfter event per consumed message in the trace topic (RMQ_SYS_TRACE_TOPIC),
//! in the Java client's format, indexed under the message id; `trace::query_traces` reads them.
//!
//! `cargo run -p comet-client --example trace` (create the topic first:
//! `comet topic create TraceTopic`; the broker creates the trace topic on the first trace
//! message when topic auto-creation is on, or at start with `traceTopicEnable=true`).

use std::error::Error;
use std::time::Duration;

use comet_client::admin::MQAdmin;
use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{ConsumeConcurrentlyStatus, ConsumeFromWhere, concurrently_fn};
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::trace::{self, RMQ_SYS_TRACE_TOPIC, TraceContext, TraceType};
use comet_client::{ClientConfig, Message};
use tokio::sync::mpsc;

type BoxError = Box<dyn Error + Send + Sync>;

const DEADLINE: Duration = Duration::from_secs(60);

/// Sends one traced message, consumes it with tracing on, and returns the message id and its
/// trace records once Pub, SubBefore and SubAfter are all stored.
pub async fn run(namesrv: &str, topic: &str) -> Result<(String, Vec<TraceContext>), BoxError> {
    let mut config = PushConsumerConfig::new("example_trace_group");
    config.client = ClientConfig::new(namesrv);
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    config.enable_msg_trace = true;
    let consumer = DefaultMQPushConsumer::new(config);
    consumer.subscribe(topic, "*").await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    consumer.register_message_listener(concurrently_fn(move |msgs, _ctx| {
        for msg in msgs {
            let _ = tx.send(msg.msg_id());
        }
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }));
    consumer.start().await?;

    let mut config = ProducerConfig::new("example_trace_producer", namesrv);
    config.enable_msg_trace = true;
    let producer = DefaultMQProducer::new(config);
    producer.start().await?;
    let msg = Message::new(topic, "traced").with_keys(["order-42"]);
    let msg_id = producer.send(msg).await?.msg_id;
    // Shutting down sends the trace events still queued.
    producer.shutdown().await;
    while tokio::time::timeout(DEADLINE, rx.recv()).await?.as_ref() != Some(&msg_id) {}
    consumer.shutdown().await;

    let admin = MQAdmin::new(ClientConfig::new(namesrv))?;
    let wanted = [TraceType::Pub, TraceType::SubBefore, TraceType::SubAfter];
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let records = loop {
        // The broker indexes the trace messages shortly after storing them.
        let records = trace::query_traces(&admin, RMQ_SYS_TRACE_TOPIC, &msg_id)
            .await
            .unwrap_or_default();
        let complete = wanted
            .iter()
            .all(|t| records.iter().any(|r| r.trace_type == *t));
        if complete || tokio::time::Instant::now() >= deadline {
            break records;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    admin.shutdown().await;
    Ok((msg_id, records))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    let (msg_id, records) = run(&namesrv, "TraceTopic").await?;
    println!("trace of {msg_id}:");
    for r in records {
        println!(
            "{:<10} group={} cost={}ms success={}",
            r.trace_type, r.group_name, r.cost_time, r.success
        );
    }
    Ok(())
}
