//! Ordered messages, consumer side: an orderly listener gets each queue's messages one batch at
//! a time, in queue order (the queue is locked on the broker). Stops on Ctrl-C.
//!
//! `cargo run -p comet-client --example orderly_consumer`

use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{ConsumeFromWhere, ConsumeOrderlyStatus, orderly_fn};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = PushConsumerConfig::new("orderly_consumer_group");
    config.client.namesrv_addr =
        std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    let consumer = DefaultMQPushConsumer::new(config);
    consumer.subscribe("TopicOrder", "*").await?;
    consumer.register_message_listener(orderly_fn(|msgs, ctx| {
        for msg in msgs {
            println!(
                "{} offset={} {}",
                ctx.message_queue,
                msg.queue_offset,
                String::from_utf8_lossy(&msg.body)
            );
        }
        ConsumeOrderlyStatus::Success
    }));
    consumer.start().await?;
    tokio::signal::ctrl_c().await?;
    consumer.shutdown().await;
    Ok(())
}
