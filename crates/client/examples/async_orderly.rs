//! Ordered messages with an async listener: every step of an order goes to the queue its order id
//! hashes to, and the orderly listener, a closure returning a future, applies each queue's
//! messages one at a time, in queue order, to a shared order book it awaits a lock on.
//!
//! `cargo run -p comet-client --example async_orderly` (create the topic first:
//! `comet topic create AsyncOrderTopic`).

use std::collections::BTreeMap;
use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use comet_client::prelude::*;
use tokio::sync::Mutex;

type BoxError = Box<dyn Error + Send + Sync>;

pub const GROUP: &str = "example_async_orderly_group";
pub const STEPS: [&str; 3] = ["created", "paid", "shipped"];
const DEADLINE: Duration = Duration::from_secs(60);

/// Order id → the steps applied to it, in the order the listener applied them.
pub type OrderBook = BTreeMap<i32, Vec<String>>;

/// Sends the steps of `orders` orders and returns the order book the listener built.
pub async fn run(namesrv: &str, topic: &str, orders: i32) -> Result<OrderBook, BoxError> {
    let book = Arc::new(Mutex::new(OrderBook::new()));
    let shared = Arc::clone(&book);
    let consumer = DefaultMQPushConsumer::builder(GROUP)
        .namesrv(namesrv)
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .listener(MessageListener::orderly_async(move |msgs, _ctx| {
            let book = Arc::clone(&shared);
            async move {
                let mut book = book.lock().await;
                for msg in &msgs {
                    let body = String::from_utf8_lossy(&msg.body);
                    // Bodies read "<order id>:<step>".
                    let Some((order, step)) = body.split_once(':') else {
                        continue;
                    };
                    let Ok(order) = order.parse::<i32>() else {
                        continue;
                    };
                    book.entry(order).or_default().push(step.to_owned());
                }
                ConsumeOrderlyStatus::Success
            }
        }))
        .start()
        .await?;

    let producer = DefaultMQProducer::builder("example_async_orderly_producer")
        .namesrv(namesrv)
        .start()
        .await?;
    for step in STEPS {
        for order_id in 0..orders {
            let msg = Message::new(topic, format!("{order_id}:{step}"));
            // Same order id, same queue.
            producer
                .send_with_selector(msg, &SelectMessageQueueByHash, &order_id)
                .await?;
        }
    }
    producer.shutdown().await;

    let expected = STEPS.len() * usize::try_from(orders)?;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let done = loop {
        let applied: usize = book.lock().await.values().map(Vec::len).sum();
        if applied >= expected || tokio::time::Instant::now() >= deadline {
            break applied >= expected;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    consumer.shutdown().await;
    if !done {
        return Err(format!("not every step applied in {DEADLINE:?}").into());
    }
    let book = book.lock().await.clone();
    Ok(book)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    for (order, steps) in run(&namesrv, "AsyncOrderTopic", 5).await? {
        println!("order {order}: {}", steps.join(" -> "));
    }
    Ok(())
}
