//! Lite pull consumer: the application polls (RocketMQ's `LitePullConsumerSubscribe`), with
//! offsets auto-committed every 5 s. Stops after 30 s without a message, or on Ctrl-C.
//!
//! `cargo run -p comet-client --example lite_pull`

use std::time::Duration;

use comet_client::ClientConfig;
use comet_client::consumer::ConsumeFromWhere;
use comet_client::consumer::lite::{DefaultLitePullConsumer, LitePullConsumerConfig};

/// How long to keep polling without a message.
const IDLE_LIMIT: Duration = Duration::from_secs(30);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    let mut config =
        LitePullConsumerConfig::new("lite_pull_consumer_test", ClientConfig::new(namesrv));
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    let consumer = DefaultLitePullConsumer::new(config);
    consumer.subscribe("TopicTest", "*").await?;
    consumer.start().await?;
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            polled = consumer.poll(IDLE_LIMIT) => {
                let msgs = polled?;
                if msgs.is_empty() {
                    break;
                }
                for msg in &msgs {
                    println!("{} offset={} {}", msg.topic, msg.queue_offset, String::from_utf8_lossy(&msg.body));
                }
            }
        }
    }
    consumer.shutdown().await;
    Ok(())
}
