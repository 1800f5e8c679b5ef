//! Transactional messages: a message becomes visible to consumers only if the local transaction
//! commits. A transaction left undecided is checked back by the broker later, every
//! `transactionCheckInterval` (30 s by default) once the message is `transactionTimeOut` (6 s)
//! old.
//!
//! `cargo run -p comet-client --example transaction` (create the topic first:
//! `comet topic create TransactionTopic`). With the default settings the undecided message is
//! delivered 6 to 36 s after it was sent; `comet serve --set transactionCheckInterval=1000
//! --set transactionTimeOut=2000` makes that 2 to 3 s.

use std::any::Any;
use std::collections::HashSet;
use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{ConsumeConcurrentlyStatus, ConsumeFromWhere, concurrently_fn};
use comet_client::producer::ProducerConfig;
use comet_client::{
    ClientConfig, LocalTransactionState, Message, MessageExt, TransactionListener,
    TransactionProducer,
};
use tokio::sync::mpsc;

type BoxError = Box<dyn Error + Send + Sync>;

pub const GROUP: &str = "example_tx_producer_group";
pub const CONSUMER_GROUP: &str = "example_tx_consumer_group";
const DEADLINE: Duration = Duration::from_secs(90);

/// The application's side: run the local transaction, and answer the broker's checks.
#[derive(Default)]
struct Orders {
    /// Bodies of the messages the broker asked about.
    checked: Mutex<Vec<String>>,
}

impl TransactionListener for Orders {
    fn execute_local_transaction(
        &self,
        msg: &Message,
        _arg: &(dyn Any + Send + Sync),
    ) -> LocalTransactionState {
        // A real application writes to its database here; this one decides by tag.
        match msg.tags() {
            Some("commit") => LocalTransactionState::CommitMessage,
            Some("rollback") => LocalTransactionState::RollbackMessage,
            _ => LocalTransactionState::Unknown,
        }
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        // Runs on a blocking thread: look the transaction up (here: it did commit).
        let body = String::from_utf8_lossy(&msg.body).into_owned();
        if let Ok(mut checked) = self.checked.lock() {
            checked.push(body);
        }
        LocalTransactionState::CommitMessage
    }
}

/// What happened to the three transactions.
#[derive(Debug)]
pub struct Outcome {
    /// `(body, state)` returned by the local transaction of each send.
    pub executed: Vec<(String, LocalTransactionState)>,
    /// Bodies the broker checked back.
    pub checked: Vec<String>,
    /// Bodies a consumer of the topic received.
    pub received: Vec<String>,
}

pub async fn run(namesrv: &str, topic: &str) -> Result<Outcome, BoxError> {
    let mut config = PushConsumerConfig::new(CONSUMER_GROUP);
    config.client = ClientConfig::new(namesrv);
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    let consumer = DefaultMQPushConsumer::new(config);
    consumer.subscribe(topic, "*").await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    consumer.register_message_listener(concurrently_fn(move |msgs, _ctx| {
        for msg in msgs {
            let _ = tx.send(String::from_utf8_lossy(&msg.body).into_owned());
        }
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }));
    consumer.start().await?;

    let orders = Arc::new(Orders::default());
    let producer = TransactionProducer::new(
        ProducerConfig::new(GROUP, namesrv),
        Arc::clone(&orders) as _,
    );
    producer.start().await?;
    let mut executed = Vec::new();
    for (body, tag) in [
        ("order 1 paid", "commit"),
        ("order 2 cancelled", "rollback"),
        ("order 3 pending", "unknown"),
    ] {
        let msg = Message::new(topic, body).with_tags(tag);
        // The second argument reaches `execute_local_transaction` as `arg`.
        let result = producer.send_message_in_transaction(msg, &()).await?;
        executed.push((body.to_owned(), result.local_transaction_state));
    }

    // The committed message arrives at once, the checked one after the broker's check.
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
    let checked = orders.checked.lock().map(|c| c.clone()).unwrap_or_default();
    Ok(Outcome {
        executed,
        checked,
        received,
    })
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let namesrv = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".to_owned());
    let outcome = run(&namesrv, "TransactionTopic").await?;
    for (body, state) in &outcome.executed {
        println!("{body}: local transaction {state:?}");
    }
    println!("checked back by the broker: {:?}", outcome.checked);
    println!("received by the consumer: {:?}", outcome.received);
    Ok(())
}
