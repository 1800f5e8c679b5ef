//! Batch send: several messages of one topic in one request (RocketMQ's `batch` example). A batch
//! must stay under the 4 MiB message limit.
//!
//! `cargo run -p comet-client --example batch`

use comet_client::Message;
use comet_client::producer::{DefaultMQProducer, ProducerConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    let producer = DefaultMQProducer::new(ProducerConfig::new("batch_producer_group", namesrv));
    producer.start().await?;
    let batch: Vec<Message> = (0..3)
        .map(|i| {
            Message::new("BatchTest", format!("Hello world {i}"))
                .with_tags("TagA")
                .with_keys([format!("OrderID00{i}")])
        })
        .collect();
    let result = producer.send_batch(batch).await?;
    println!(
        "{:?} msgIds={} queue={}",
        result.send_status, result.msg_id, result.message_queue
    );
    producer.shutdown().await;
    Ok(())
}
