//! TransactionProducer against a real in-process name server and broker: a committed local
//! transaction delivers its message, a rolled-back one never does, and an unknown one is resolved
//! by the broker's check calling `check_local_transaction` — so a reader of the topic sees exactly
//! the committed messages.
//!
//! The broker checks every 200 ms here; nothing sleeps to synchronize, reads poll with a deadline.

use std::any::Any;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use comet_client::api::PullStatus;
use comet_client::producer::ProducerConfig;
use comet_client::{
    LocalTransactionState, Message, MessageExt, SendStatus, TransactionListener,
    TransactionProducer,
};
use comet_protocol::headers::{PullMessageRequestHeader, pull_sys_flag};
use comet_protocol::message::properties::keys;
use comet_testkit::{TestBroker, wait_until};
use parking_lot::Mutex;

const RPC_TIMEOUT: Duration = Duration::from_secs(5);
const TOPIC: &str = "ClientTxTopic";
const GROUP: &str = "client_tx_group";
const PULL_GROUP: &str = "client_tx_reader";

/// Decides by tag: `commit`, `rollback`, or `unknown` (which the check later commits).
#[derive(Default)]
struct TagListener {
    executed: Mutex<HashMap<String, LocalTransactionState>>,
    checks: AtomicUsize,
    checked_ids: Mutex<Vec<String>>,
}

impl TransactionListener for TagListener {
    fn execute_local_transaction(
        &self,
        msg: &Message,
        arg: &(dyn Any + Send + Sync),
    ) -> LocalTransactionState {
        assert_eq!(
            arg.downcast_ref::<u32>(),
            Some(&7),
            "the argument is passed through"
        );
        assert!(msg.transaction_id.is_some(), "the transaction id is set");
        let state = match msg.tags() {
            Some("commit") => LocalTransactionState::CommitMessage,
            Some("rollback") => LocalTransactionState::RollbackMessage,
            _ => LocalTransactionState::Unknown,
        };
        self.executed
            .lock()
            .insert(String::from_utf8_lossy(&msg.body).into_owned(), state);
        state
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        self.checks.fetch_add(1, Ordering::SeqCst);
        self.checked_ids
            .lock()
            .push(msg.uniq_key().unwrap_or_default().to_string());
        match msg.tags() {
            Some("rollback") => LocalTransactionState::RollbackMessage,
            _ => LocalTransactionState::CommitMessage,
        }
    }
}

/// Every body in the topic, read with raw pulls over all of its queues.
async fn topic_bodies(producer: &TransactionProducer) -> BTreeSet<String> {
    let instance = producer.producer().client_instance().expect("started");
    let mut bodies = BTreeSet::new();
    let Ok(queues) = producer
        .producer()
        .fetch_publish_message_queues(TOPIC)
        .await
    else {
        return bodies;
    };
    for mq in queues {
        let Some(addr) = instance.find_broker_address_in_publish(&mq.broker_name) else {
            continue;
        };
        let header = PullMessageRequestHeader {
            consumer_group: PULL_GROUP.to_string(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            queue_offset: 0,
            max_msg_nums: 32,
            sys_flag: pull_sys_flag::build(false, false, true, false),
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: Some("*".to_string()),
            sub_version: 0,
            expression_type: Some("TAG".to_string()),
            ..Default::default()
        };
        let result = instance
            .api()
            .pull_message(&addr, header, RPC_TIMEOUT)
            .await
            .expect("pull answered");
        if result.pull_status == PullStatus::Found {
            for msg in result.msg_found_list {
                // The broker keeps TRAN_MSG=true on committed records, as Apache 5.3.3 does.
                assert_eq!(msg.properties.get(keys::TRANSACTION_PREPARED), Some("true"));
                bodies.insert(String::from_utf8_lossy(&msg.body).into_owned());
            }
        }
    }
    bodies
}

#[tokio::test]
async fn commit_rollback_and_checked_unknown() {
    // The broker checks unknown transactions every 200 ms, those older than 500 ms.
    let cluster = TestBroker::start_with(|c| {
        c.transaction_check_interval_ms = 200;
        c.transaction_timeout_ms = 500;
    })
    .await;
    let mut config = ProducerConfig::new(GROUP, cluster.namesrv_addr());
    config.client.instance_name = "client-tx-test".to_string();
    let listener = Arc::new(TagListener::default());
    let producer = TransactionProducer::new(config, Arc::clone(&listener) as _);
    producer.start().await.expect("producer starts");

    let mut results = Vec::new();
    for (body, tag) in [
        ("committed", "commit"),
        ("rolled back", "rollback"),
        ("decided later", "unknown"),
    ] {
        let msg = Message::new(TOPIC, body.as_bytes().to_vec()).with_tags(tag);
        let result = producer
            .send_message_in_transaction(msg, &7_u32)
            .await
            .expect("transactional send");
        assert_eq!(result.send_result.send_status, SendStatus::SendOk);
        results.push(result);
    }
    assert_eq!(
        results
            .iter()
            .map(|r| r.local_transaction_state)
            .collect::<Vec<_>>(),
        vec![
            LocalTransactionState::CommitMessage,
            LocalTransactionState::RollbackMessage,
            LocalTransactionState::Unknown
        ]
    );

    let expected: BTreeSet<String> = ["committed", "decided later"]
        .into_iter()
        .map(str::to_string)
        .collect();
    let settled = wait_until(|| async {
        let bodies = topic_bodies(&producer).await;
        assert!(
            !bodies.contains("rolled back"),
            "a rolled-back message is never visible"
        );
        bodies == expected
    })
    .await;
    assert!(
        settled,
        "timed out; the topic holds {:?}",
        topic_bodies(&producer).await
    );
    assert!(listener.checks.load(Ordering::SeqCst) >= 1);
    let unknown_id = results[2].send_result.msg_id.clone();
    assert!(
        listener.checked_ids.lock().contains(&unknown_id),
        "the unknown transaction was checked"
    );
    // The check's commit is final: later rounds leave the topic as it is.
    assert_eq!(topic_bodies(&producer).await, expected);

    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn an_unstarted_producer_refuses() {
    let listener: Arc<dyn TransactionListener> = Arc::new(TagListener::default());
    let producer = TransactionProducer::new(
        ProducerConfig::new("client_tx_unstarted", "127.0.0.1:1"),
        listener,
    );
    let err = producer
        .send_message_in_transaction(Message::new(TOPIC, b"x".to_vec()), &7_u32)
        .await;
    assert!(err.is_err());
}
