//! Ordered messages: the producer sends every step of an order to the same queue (chosen by a
//! hash of the order id), and an orderly listener receives each queue's messages one at a time,
//! in queue order (the consumer locks its queues on the broker).
//!
//! `cargo run -p comet-client --example push_orderly` (create the topic first:
//! `comet topic create OrderTopic`).

use std::error::Error;
use std::time::Duration;

use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{ConsumeFromWhere, ConsumeOrderlyStatus, orderly_fn};
use comet_client::producer::{DefaultMQProducer, ProducerConfig, SelectMessageQueueByHash};
use comet_client::{ClientConfig, Message};
use tokio::sync::mpsc;

type BoxError = Box<dyn Error + Send + Sync>;

pub const GROUP: &str = "example_orderly_group";
pub const STEPS: [&str; 4] = ["created", "paid", "shipped", "done"];
const DEADLINE: Duration = Duration::from_secs(60);

/// One message as the listener saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub queue_id: i32,
    pub queue_offset: i64,
    pub body: String,
}

/// Sends the steps of `orders` orders, and returns the queue each order was sent to (indexed by
/// order id) and the deliveries in the order the listener got them.
pub async fn run(
    namesrv: &str,
    topic: &str,
    orders: i32,
) -> Result<(Vec<i32>, Vec<Delivery>), BoxError> {
    let mut config = PushConsumerConfig::new(GROUP);
    config.client = ClientConfig::new(namesrv);
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    let consumer = DefaultMQPushConsumer::new(config);
    consumer.subscribe(topic, "*").await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    consumer.register_message_listener(orderly_fn(move |msgs, _ctx| {
        for msg in msgs {
            let _ = tx.send(Delivery {
                queue_id: msg.queue_id,
                queue_offset: msg.queue_offset,
                body: String::from_utf8_lossy(&msg.body).into_owned(),
            });
        }
        ConsumeOrderlyStatus::Success
    }));
    consumer.start().await?;

    let producer = DefaultMQProducer::new(ProducerConfig::new("example_orderly_producer", namesrv));
    producer.start().await?;
    let mut queue_of_order = vec![0; usize::try_from(orders)?];
    for step in STEPS {
        for order_id in 0..orders {
            let msg = Message::new(topic, format!("order {order_id}: {step}"))
                .with_keys([format!("order-{order_id}")]);
            // Same order id, same queue: the selector hashes the argument like Java's.
            let result = producer
                .send_with_selector(msg, &SelectMessageQueueByHash, &order_id)
                .await?;
            queue_of_order[usize::try_from(order_id)?] = result.message_queue.queue_id;
        }
    }
    producer.shutdown().await;

    let expected = STEPS.len() * queue_of_order.len();
    let mut received = Vec::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while received.len() < expected {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(delivery)) => received.push(delivery),
            _ => break,
        }
    }
    consumer.shutdown().await;
    if received.len() < expected {
        return Err(format!("{} of {expected} messages received", received.len()).into());
    }
    Ok((queue_of_order, received))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    let (_, received) = run(&namesrv, "OrderTopic", 5).await?;
    for d in received {
        println!("queue {} offset {}: {}", d.queue_id, d.queue_offset, d.body);
    }
    Ok(())
}
