//! Scheduled (delayed) messages: level 3 delivers 10 s after the send (RocketMQ's `schedule`
//! example; levels are 1s 5s 10s 30s 1m 2m ... 2h).
//!
//! `cargo run -p comet-client --example delay`

use comet_client::Message;
use comet_client::producer::{DefaultMQProducer, ProducerConfig};

/// Delay level 3 = 10 seconds.
const DELAY_LEVEL_10S: i32 = 3;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    let producer = DefaultMQProducer::new(ProducerConfig::new("delay_producer_group", namesrv));
    producer.start().await?;
    for i in 0..5 {
        let msg = Message::new("TestTopicDelay", format!("Hello scheduled message {i}"))
            .with_delay_level(DELAY_LEVEL_10S);
        let result = producer.send(msg).await?;
        println!("sent {} (delivered in ~10 s)", result.msg_id);
    }
    producer.shutdown().await;
    Ok(())
}
