//! Quickstart producer: sends 10 messages to `TopicTest` (RocketMQ's quickstart `Producer`).
//!
//! Run against `comet serve`: `cargo run -p comet-client --example producer`
//! (name server from `NAMESRV_ADDR`, default 127.0.0.1:9876).

use comet_client::Message;
use comet_client::producer::{DefaultMQProducer, ProducerConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    let producer = DefaultMQProducer::new(ProducerConfig::new(
        "please_rename_unique_group_name",
        namesrv,
    ));
    producer.start().await?;
    for i in 0..10 {
        let msg = Message::new("TopicTest", format!("Hello RocketMQ {i}")).with_tags("TagA");
        let result = producer.send(msg).await?;
        println!(
            "{:?} msgId={} queue={} offset={}",
            result.send_status, result.msg_id, result.message_queue, result.queue_offset
        );
    }
    producer.shutdown().await;
    Ok(())
}
