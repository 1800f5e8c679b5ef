//! Ordered messages, producer side: every order's steps go to the same queue (selected by the
//! order id's hash), so an orderly consumer sees them in sequence (RocketMQ's `ordermessage`).
//!
//! `cargo run -p comet-client --example orderly_producer`

use comet_client::Message;
use comet_client::producer::selector::SelectMessageQueueByHash;
use comet_client::producer::{DefaultMQProducer, ProducerConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    let producer = DefaultMQProducer::new(ProducerConfig::new("orderly_producer_group", namesrv));
    producer.start().await?;
    for step in ["create", "pay", "ship", "done"] {
        for order_id in 0..5_i32 {
            let msg = Message::new("TopicOrder", format!("order {order_id}: {step}"))
                .with_tags(step)
                .with_keys([format!("order-{order_id}")]);
            let result = producer
                .send_with_selector(msg, &SelectMessageQueueByHash, &order_id)
                .await?;
            println!("order {order_id} {step} -> {}", result.message_queue);
        }
    }
    producer.shutdown().await;
    Ok(())
}
