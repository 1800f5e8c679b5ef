//! Transactional messages with an async listener: the local transaction and the broker's check
//! are `async fn`s that await a (here simulated) payment service, and the producer and consumer
//! are made with builders.
//!
//! `cargo run -p comet-client --example async_transaction` (create the topic first:
//! `comet topic create AsyncTransactionTopic`).

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use comet_client::prelude::*;
use tokio::sync::{Mutex, mpsc};

type BoxError = Box<dyn Error + Send + Sync>;

pub const GROUP: &str = "example_async_tx_producer_group";
pub const CONSUMER_GROUP: &str = "example_async_tx_consumer_group";
const DEADLINE: Duration = Duration::from_secs(90);

/// A payment service: order id → paid (`None` while the payment is on its way).
#[derive(Default)]
struct Payments {
    orders: Mutex<HashMap<String, Option<bool>>>,
}

/// The application's side of the transactions.
struct Checkout {
    payments: Arc<Payments>,
    /// Order ids the broker asked about.
    checked: Arc<Mutex<Vec<String>>>,
}

impl AsyncTransactionListener for Checkout {
    async fn execute_local_transaction(
        &self,
        msg: &Message,
        _arg: &(dyn Any + Send + Sync),
    ) -> LocalTransactionState {
        let order = msg.keys().first().copied().unwrap_or_default().to_owned();
        let paid = *self.payments.orders.lock().await.entry(order).or_default();
        match paid {
            Some(true) => LocalTransactionState::CommitMessage,
            Some(false) => LocalTransactionState::RollbackMessage,
            // Not decided yet: the broker will ask again.
            None => LocalTransactionState::Unknown,
        }
    }

    async fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        let order = msg.keys().next().unwrap_or_default().to_owned();
        self.checked.lock().await.push(order.clone());
        match self.payments.orders.lock().await.get(&order) {
            Some(Some(true)) => LocalTransactionState::CommitMessage,
            Some(Some(false)) => LocalTransactionState::RollbackMessage,
            _ => LocalTransactionState::Unknown,
        }
    }
}

/// What happened to the three transactions.
#[derive(Debug)]
pub struct Outcome {
    /// `(order id, state)` returned by the local transaction of each send.
    pub executed: Vec<(String, LocalTransactionState)>,
    /// Order ids the broker checked back.
    pub checked: Vec<String>,
    /// Bodies a consumer of the topic received.
    pub received: Vec<String>,
}

pub async fn run(namesrv: &str, topic: &str) -> Result<Outcome, BoxError> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let consumer = DefaultMQPushConsumer::builder(CONSUMER_GROUP)
        .namesrv(namesrv)
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .listener(MessageListener::concurrently_fn(move |msgs, _ctx| {
            for msg in msgs {
                let _ = tx.send(String::from_utf8_lossy(&msg.body).into_owned());
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }))
        .start()
        .await?;

    let payments = Arc::new(Payments::default());
    {
        let mut orders = payments.orders.lock().await;
        orders.insert("order-1".to_owned(), Some(true));
        orders.insert("order-2".to_owned(), Some(false));
    }
    let checked = Arc::new(Mutex::new(Vec::new()));
    let producer = TransactionProducer::builder(GROUP)
        .namesrv(namesrv)
        .async_listener(Checkout {
            payments: Arc::clone(&payments),
            checked: Arc::clone(&checked),
        })
        .start()
        .await?;
    let mut executed = Vec::new();
    for (order, body) in [
        ("order-1", "order 1 paid"),
        ("order-2", "order 2 cancelled"),
        ("order-3", "order 3 pending"),
    ] {
        let msg = Message::new(topic, body).with_keys([order]);
        let result = producer.send_message_in_transaction(msg, &()).await?;
        executed.push((order.to_owned(), result.local_transaction_state));
    }
    // The payment of order 3 arrives later; the broker's check finds it.
    payments
        .orders
        .lock()
        .await
        .insert("order-3".to_owned(), Some(true));

    let mut expected: HashSet<&str> = HashSet::from(["order 1 paid", "order 3 pending"]);
    let mut received = Vec::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !expected.is_empty() {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(body)) => {
                expected.remove(body.as_str());
                received.push(body);
            }
            _ => break,
        }
    }
    producer.shutdown().await;
    consumer.shutdown().await;
    if !expected.is_empty() {
        return Err(format!("not received in {DEADLINE:?}: {expected:?}").into());
    }
    let checked = checked.lock().await.clone();
    Ok(Outcome {
        executed,
        checked,
        received,
    })
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    let outcome = run(&namesrv, "AsyncTransactionTopic").await?;
    for (order, state) in &outcome.executed {
        println!("{order}: local transaction {state:?}");
    }
    println!("checked back by the broker: {:?}", outcome.checked);
    println!("received by the consumer: {:?}", outcome.received);
    Ok(())
}
