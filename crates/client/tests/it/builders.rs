//! The builders and the async listeners, end to end against an in-process name server and
//! broker: every builder starts a working client, the builders refuse what a start refuses
//! before touching the network, and listeners written as closures returning futures (or as
//! `async fn`s, for transactions) consume, retry, suspend and answer checks like their
//! synchronous counterparts.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use comet_client::prelude::*;
use comet_client::{ClientError, ServiceState};
use comet_testkit::client::{
    Cluster, FAST_DELAY_LEVELS, WAIT_DEADLINE, client_config, send_bodies, unique_instance,
};
use tokio::sync::{Mutex, mpsc};

const QUEUES: i32 = 4;

/// Receives `count` items or fails after [`WAIT_DEADLINE`].
async fn receive<T>(rx: &mut mpsc::UnboundedReceiver<T>, count: usize) -> Vec<T> {
    let mut got = Vec::with_capacity(count);
    let deadline = tokio::time::Instant::now() + WAIT_DEADLINE;
    while got.len() < count {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(item)) => got.push(item),
            _ => panic!("received {} of {count} in {WAIT_DEADLINE:?}", got.len()),
        }
    }
    got
}

/// Polls until `count` messages came back or [`WAIT_DEADLINE`] passed.
async fn poll_all(consumer: &DefaultLitePullConsumer, count: usize) -> Vec<String> {
    let mut polled = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT_DEADLINE;
    while polled.len() < count && tokio::time::Instant::now() < deadline {
        for msg in consumer
            .poll(Duration::from_millis(200))
            .await
            .expect("poll")
        {
            polled.push(body_of(&msg));
        }
    }
    polled
}

fn body_of(msg: &MessageExt) -> String {
    String::from_utf8_lossy(&msg.body).into_owned()
}

async fn builder_producer(cluster: &Cluster) -> DefaultMQProducer {
    DefaultMQProducer::builder(format!("builder_pg_{}", unique_instance("p")))
        .client_config(client_config(cluster, &unique_instance("builder-producer")))
        .start()
        .await
        .expect("producer starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_builder_with_an_async_listener_consumes_retries_and_commits() {
    let cluster =
        Cluster::start_with(|c| c.message_delay_level = FAST_DELAY_LEVELS.to_owned()).await;
    let topic = "BuilderAsyncPush";
    let group = "builder_async_push";
    cluster.create_topic(topic, QUEUES).await;
    let producer = builder_producer(&cluster).await;
    let bodies = send_bodies(
        &producer,
        topic,
        &cluster.broker_name(),
        None,
        QUEUES,
        "m",
        8,
    )
    .await;

    // State shared by every call, captured by clone: attempts per body, and a channel.
    let attempts: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let shared = Arc::clone(&attempts);
    let consumer = DefaultMQPushConsumer::builder(group)
        .client_config(client_config(&cluster, &unique_instance("builder-push")))
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .listener(MessageListener::concurrently_async(move |msgs, ctx| {
            let attempts = Arc::clone(&shared);
            let tx = tx.clone();
            async move {
                tokio::task::yield_now().await;
                let mut attempts = attempts.lock().await;
                let mut retry = false;
                for msg in &msgs {
                    let body = body_of(msg);
                    let n = attempts.entry(body.clone()).or_insert(0);
                    *n += 1;
                    // "m-3" fails on its first delivery.
                    retry |= body == "m-3" && *n == 1;
                    let _ = tx.send((body, msg.reconsume_times, ctx.message_queue.queue_id));
                }
                if retry {
                    ConsumeConcurrentlyStatus::ReconsumeLater
                } else {
                    ConsumeConcurrentlyStatus::ConsumeSuccess
                }
            }
        }))
        .start()
        .await
        .expect("consumer starts");
    assert_eq!(consumer.service_state(), ServiceState::Running);

    let got = receive(&mut rx, bodies.len() + 1).await;
    let retried: Vec<i32> = got
        .iter()
        .filter(|(b, _, _)| b == "m-3")
        .map(|(_, times, _)| *times)
        .collect();
    assert_eq!(retried, [0, 1], "m-3 redelivered once after ReconsumeLater");
    let mut seen: Vec<String> = got.iter().map(|(b, _, _)| b.clone()).collect();
    seen.sort();
    seen.dedup();
    let mut expected = bodies.clone();
    expected.sort();
    assert_eq!(seen, expected);
    consumer.shutdown().await;
    for queue in 0..QUEUES {
        cluster.wait_committed(group, topic, queue, 2).await;
    }
    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_async_listener_suspends_and_keeps_queue_order() {
    let cluster = Cluster::start().await;
    let topic = "BuilderAsyncOrderly";
    cluster.create_topic(topic, QUEUES).await;
    let producer = builder_producer(&cluster).await;
    let bodies = send_bodies(
        &producer,
        topic,
        &cluster.broker_name(),
        Some(1),
        QUEUES,
        "o",
        6,
    )
    .await;

    let suspended = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let once = Arc::clone(&suspended);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let consumer = DefaultMQPushConsumer::builder("builder_async_orderly")
        .client_config(client_config(&cluster, &unique_instance("builder-orderly")))
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .listener(MessageListener::orderly_async(move |msgs, mut ctx| {
            let once = Arc::clone(&once);
            let tx = tx.clone();
            async move {
                tokio::task::yield_now().await;
                for msg in &msgs {
                    let _ = tx.send((body_of(msg), msg.queue_offset));
                }
                if !once.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    // The first batch asks for a short pause and comes back again.
                    ctx.suspend_current_queue_time_millis = Some(100);
                    return (ConsumeOrderlyStatus::SuspendCurrentQueueAMoment, ctx);
                }
                (ConsumeOrderlyStatus::Success, ctx)
            }
        }))
        .start()
        .await
        .expect("consumer starts");

    let got = receive(&mut rx, bodies.len() + 1).await;
    let offsets: Vec<i64> = got.iter().map(|(_, o)| *o).collect();
    assert_eq!(
        offsets[..2],
        [0, 0],
        "the suspended batch came back first: {got:?}"
    );
    assert!(
        offsets[1..].windows(2).all(|w| w[0] < w[1]),
        "queue order after the retry: {offsets:?}"
    );
    let delivered: Vec<String> = got[1..].iter().map(|(b, _)| b.clone()).collect();
    assert_eq!(delivered, bodies);
    consumer.shutdown().await;
    cluster
        .wait_committed("builder_async_orderly", topic, 1, 6)
        .await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builders_refuse_invalid_settings_before_starting() {
    // Nothing listens on this address: a builder that reached the network would fail differently.
    let nowhere = "127.0.0.1:1";
    let bad_batch = DefaultMQPushConsumer::builder("builder_bad")
        .namesrv(nowhere)
        .pull_batch_size(0)
        .build()
        .await;
    assert!(
        matches!(bad_batch, Err(ClientError::IllegalArgument(ref m)) if m.contains("pullBatchSize")),
        "{bad_batch:?}"
    );
    let reserved = DefaultMQPushConsumer::builder("DEFAULT_CONSUMER")
        .namesrv(nowhere)
        .build()
        .await;
    assert!(matches!(reserved, Err(ClientError::IllegalArgument(_))));
    let no_listener = DefaultMQPushConsumer::builder("builder_no_listener")
        .namesrv(nowhere)
        .start()
        .await;
    assert!(
        matches!(no_listener, Err(ClientError::IllegalArgument(ref m)) if m.contains("messageListener")),
        "{no_listener:?}"
    );
    let producer = DefaultMQProducer::builder("DEFAULT_PRODUCER")
        .namesrv(nowhere)
        .build();
    assert!(matches!(producer, Err(ClientError::IllegalArgument(_))));
    let no_tx_listener = TransactionProducer::builder("builder_tx")
        .namesrv(nowhere)
        .build();
    assert!(matches!(
        no_tx_listener,
        Err(ClientError::IllegalArgument(ref m)) if m.contains("listener")
    ));
    let built = DefaultMQProducer::builder("builder_ok")
        .namesrv(nowhere)
        .instance_name("builder-ok")
        .namespace("ns")
        .send_msg_timeout(Duration::from_secs(7))
        .retry_times_when_send_failed(5)
        .build()
        .expect("valid settings");
    assert_eq!(built.config().client.namesrv_addr, nowhere);
    assert_eq!(built.config().client.instance_name, "builder-ok");
    assert_eq!(built.config().client.namespace.as_deref(), Some("ns"));
    assert_eq!(built.config().send_msg_timeout, Duration::from_secs(7));
    assert_eq!(built.config().retry_times_when_send_failed, 5);
    assert_eq!(built.service_state(), ServiceState::CreateJust);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_and_lite_builders_start_working_consumers() {
    let cluster = Cluster::start().await;
    let topic = "BuilderPull";
    cluster.create_topic(topic, QUEUES).await;
    let producer = builder_producer(&cluster).await;
    let bodies = send_bodies(
        &producer,
        topic,
        &cluster.broker_name(),
        Some(0),
        QUEUES,
        "p",
        5,
    )
    .await;
    cluster.wait_dispatched().await;

    let pull = DefaultMQPullConsumer::builder("builder_pull")
        .client_config(client_config(&cluster, &unique_instance("builder-pull")))
        .register_topic(topic)
        .consumer_pull_timeout(Duration::from_secs(5))
        .start()
        .await
        .expect("pull consumer starts");
    let mq = MessageQueue::new(topic, cluster.broker_name(), 0);
    let result = pull.pull(&mq, "*", 0, 32).await.expect("pull");
    assert_eq!(result.pull_status, PullStatus::Found);
    let pulled: Vec<String> = result.msg_found_list.iter().map(body_of).collect();
    assert_eq!(pulled, bodies);
    pull.update_consume_offset(&mq, result.next_begin_offset)
        .expect("offset");
    pull.persist_consume_offset(&mq).await.expect("persist");
    cluster.wait_committed("builder_pull", topic, 0, 5).await;
    pull.shutdown().await;

    let subscribed = DefaultLitePullConsumer::builder("builder_lite_sub")
        .client_config(client_config(&cluster, &unique_instance("builder-lite")))
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .pull_batch_size(2)
        .start()
        .await
        .expect("lite consumer starts");
    assert_eq!(poll_all(&subscribed, bodies.len()).await, bodies);
    subscribed.shutdown().await;
    cluster
        .wait_committed("builder_lite_sub", topic, 0, 5)
        .await;

    let assigned = DefaultLitePullConsumer::builder("builder_lite_assign")
        .client_config(client_config(&cluster, &unique_instance("builder-assign")))
        .assign([mq.clone()])
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .auto_commit(false)
        .start()
        .await
        .expect("lite consumer starts");
    assert_eq!(assigned.assignment(), [mq]);
    assert_eq!(poll_all(&assigned, bodies.len()).await, bodies);
    assigned.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

/// Decides transactions by body, awaiting a lock as a database call would.
struct AsyncBook {
    /// Bodies the broker checked back.
    checked: Arc<Mutex<Vec<String>>>,
}

impl AsyncTransactionListener for AsyncBook {
    async fn execute_local_transaction(
        &self,
        msg: &Message,
        arg: &(dyn std::any::Any + Send + Sync),
    ) -> LocalTransactionState {
        tokio::task::yield_now().await;
        assert_eq!(arg.downcast_ref::<u32>(), Some(&7), "the sender's argument");
        match &msg.body[..] {
            b"commit" => LocalTransactionState::CommitMessage,
            b"rollback" => LocalTransactionState::RollbackMessage,
            b"panic" => panic!("the local transaction fails"),
            _ => LocalTransactionState::Unknown,
        }
    }

    async fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        self.checked.lock().await.push(body_of(msg));
        LocalTransactionState::CommitMessage
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_builder_runs_an_async_listener_and_answers_checks() {
    let cluster = Cluster::start_with(|c| {
        c.transaction_check_interval_ms = 200;
        c.transaction_timeout_ms = 500;
    })
    .await;
    let topic = "BuilderTransaction";
    cluster.create_topic(topic, QUEUES).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let consumer = DefaultMQPushConsumer::builder("builder_tx_consumer")
        .client_config(client_config(&cluster, &unique_instance("builder-txc")))
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .listener(MessageListener::concurrently_fn(move |msgs, _ctx| {
            for msg in msgs {
                let _ = tx.send(body_of(msg));
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }))
        .start()
        .await
        .expect("consumer starts");

    let checked = Arc::new(Mutex::new(Vec::new()));
    let producer = TransactionProducer::builder("builder_tx_producer")
        .client_config(client_config(&cluster, &unique_instance("builder-txp")))
        .async_listener(AsyncBook {
            checked: Arc::clone(&checked),
        })
        .start()
        .await
        .expect("transaction producer starts");
    let mut states = Vec::new();
    for body in ["commit", "rollback", "unknown", "panic"] {
        let result = producer
            .send_message_in_transaction(Message::new(topic, body), &7u32)
            .await
            .expect("half sent");
        states.push(result.local_transaction_state);
    }
    assert_eq!(
        states,
        [
            LocalTransactionState::CommitMessage,
            LocalTransactionState::RollbackMessage,
            LocalTransactionState::Unknown,
            LocalTransactionState::Unknown,
        ],
        "a panicking local transaction is unknown until checked"
    );

    let mut got = receive(&mut rx, 3).await;
    got.sort();
    assert_eq!(got, ["commit", "panic", "unknown"]);
    let checked = checked.lock().await.clone();
    assert!(
        checked.iter().all(|b| b == "unknown" || b == "panic") && checked.len() >= 2,
        "only undecided transactions are checked: {checked:?}"
    );
    producer.shutdown().await;
    consumer.shutdown().await;
    cluster.shutdown().await;
}
