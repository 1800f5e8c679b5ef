//! Broadcasting: every member of the group reads every message (offsets are kept in a local file
//! per member instead of on the broker). Start it twice and both print everything.
//!
//! `cargo run -p comet-client --example broadcast_consumer`

use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{
    ConsumeConcurrentlyStatus, ConsumeFromWhere, MessageModel, concurrently_fn,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = PushConsumerConfig::new("broadcast_consumer_group");
    config.client.namesrv_addr =
        std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    config.message_model = MessageModel::Broadcasting;
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    let consumer = DefaultMQPushConsumer::new(config);
    consumer
        .subscribe("TopicTest", "TagA || TagC || TagD")
        .await?;
    consumer.register_message_listener(concurrently_fn(|msgs, _ctx| {
        for msg in msgs {
            println!(
                "broadcast: {} {}",
                msg.msg_id(),
                String::from_utf8_lossy(&msg.body)
            );
        }
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }));
    consumer.start().await?;
    tokio::signal::ctrl_c().await?;
    consumer.shutdown().await;
    Ok(())
}
