//! Quickstart push consumer: prints every message of `TopicTest` (RocketMQ's quickstart
//! `Consumer`). Stops on Ctrl-C.
//!
//! `cargo run -p comet-client --example push_consumer`

use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{ConsumeConcurrentlyStatus, ConsumeFromWhere, concurrently_fn};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = PushConsumerConfig::new("please_rename_unique_group_name_4");
    config.client.namesrv_addr =
        std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    let consumer = DefaultMQPushConsumer::new(config);
    consumer.subscribe("TopicTest", "*").await?;
    consumer.register_message_listener(concurrently_fn(|msgs, _ctx| {
        for msg in msgs {
            println!(
                "Receive New Message: {} {}",
                msg.msg_id(),
                String::from_utf8_lossy(&msg.body)
            );
        }
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }));
    consumer.start().await?;
    println!("Consumer Started.");
    tokio::signal::ctrl_c().await?;
    consumer.shutdown().await;
    Ok(())
}
