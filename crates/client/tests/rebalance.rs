//! Rebalance against a real broker: members join and leave a clustering group, every message is
//! consumed, each member owns exactly what the allocation strategy assigns it over the sorted
//! client ids, and a membership change is acted on through NOTIFY_CONSUMER_IDS_CHANGED long
//! before the (here 60 s) periodic rebalance would.

mod push_common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use comet_client::consumer::MessageQueue;
use comet_client::consumer::push::DefaultMQPushConsumer;
use comet_client::consumer::rebalance::{
    AllocateMessageQueueAveragely, AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy, java_queue_order,
};
use push_common::*;
use tokio::sync::mpsc;

/// Far longer than the test: only notifications can trigger a rebalance.
const LONG_REBALANCE_INTERVAL: Duration = Duration::from_secs(60);
/// A membership change must be acted on through the notification: well before the periodic
/// rebalance above could (half its interval leaves a loaded CI box ample room).
const REBALANCE_LATENCY_BOUND: Duration = Duration::from_secs(30);
const QUEUES: i32 = 8;

struct Member {
    consumer: DefaultMQPushConsumer,
    rx: mpsc::UnboundedReceiver<Delivery>,
}

async fn join(
    cluster: &Cluster,
    group: &str,
    topic: &str,
    name: &str,
    strategy: Arc<dyn AllocateMessageQueueStrategy>,
) -> Member {
    let mut config = consumer_config(cluster, group, &unique_instance(name));
    config.client.rebalance_interval = LONG_REBALANCE_INTERVAL;
    config.allocate_message_queue_strategy = strategy;
    let (listener, rx) = reporting_listener(name);
    Member {
        consumer: start_consumer(config, topic, listener).await,
        rx,
    }
}

/// What `strategy` gives each member over the topic's sorted queues and sorted client ids.
fn expected_allocation(
    strategy: &dyn AllocateMessageQueueStrategy,
    members: &[&Member],
    topic: &str,
    broker: &str,
) -> Vec<HashSet<MessageQueue>> {
    let mut mq_all: Vec<MessageQueue> = (0..QUEUES)
        .map(|q| MessageQueue::new(topic, broker, q))
        .collect();
    mq_all.sort_by(java_queue_order);
    let mut cid_all: Vec<String> = members
        .iter()
        .map(|m| m.consumer.client_id().expect("started"))
        .collect();
    cid_all.sort();
    members
        .iter()
        .map(|m| {
            let cid = m.consumer.client_id().expect("started");
            strategy
                .allocate("g", &cid, &mq_all, &cid_all)
                .into_iter()
                .collect()
        })
        .collect()
}

fn owned_of_topic(m: &Member, topic: &str) -> HashSet<MessageQueue> {
    m.consumer
        .owned_queues()
        .into_iter()
        .filter(|q| q.topic == topic)
        .collect()
}

/// Waits until every member owns exactly its expected share; returns how long it took.
async fn await_allocation(
    strategy: &dyn AllocateMessageQueueStrategy,
    members: &[&Member],
    topic: &str,
    broker: &str,
) -> Duration {
    let begin = Instant::now();
    let expected = expected_allocation(strategy, members, topic, broker);
    let ok = wait_until(|| {
        let all_match = members
            .iter()
            .zip(&expected)
            .all(|(m, e)| owned_of_topic(m, topic) == *e);
        async move { all_match }
    })
    .await;
    assert!(
        ok,
        "allocation never matched: expected {:?}, owned {:?}",
        expected
            .iter()
            .map(|e| e.iter().map(|q| q.queue_id).collect::<Vec<_>>())
            .collect::<Vec<_>>(),
        members
            .iter()
            .map(|m| owned_of_topic(m, topic)
                .iter()
                .map(|q| q.queue_id)
                .collect::<Vec<_>>())
            .collect::<Vec<_>>()
    );
    begin.elapsed()
}

/// Receives from every member until every body in `bodies` was delivered somewhere; returns
/// every body received meanwhile (redeliveries included).
async fn all_consumed(members: &mut [&mut Member], bodies: &[String]) -> Vec<String> {
    let mut missing: HashSet<String> = bodies.iter().cloned().collect();
    let mut received = Vec::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !missing.is_empty() {
        let mut progressed = false;
        for m in members.iter_mut() {
            while let Ok(d) = m.rx.try_recv() {
                missing.remove(&d.body);
                received.push(d.body);
                progressed = true;
            }
        }
        if !progressed {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} messages never consumed",
                missing.len()
            );
            tokio::time::sleep(POLL).await;
        }
    }
    received
}

async fn run_join_and_leave(
    strategy: Arc<dyn AllocateMessageQueueStrategy>,
    topic: &str,
    group: &str,
) {
    let cluster = Cluster::start().await;
    cluster.create_topic(topic, QUEUES).await;
    let producer = producer(&cluster).await;
    let broker = cluster.broker_name();

    let mut m1 = join(&cluster, group, topic, "m1", Arc::clone(&strategy)).await;
    await_allocation(strategy.as_ref(), &[&m1], topic, &broker).await;
    let batch = send_bodies(&producer, topic, &broker, None, QUEUES, "one", 32).await;
    let received = all_consumed(&mut [&mut m1], &batch).await;
    assert_eq!(received.len(), 32, "one member, no duplicates");

    let joined = Instant::now();
    let mut m2 = join(&cluster, group, topic, "m2", Arc::clone(&strategy)).await;
    await_allocation(strategy.as_ref(), &[&m1, &m2], topic, &broker).await;
    let took = joined.elapsed();
    eprintln!(
        "{}: 1→2 members settled {took:?} after the join began",
        strategy.name()
    );
    assert!(
        took < REBALANCE_LATENCY_BOUND,
        "1→2 rebalance took {took:?}"
    );
    let batch = send_bodies(&producer, topic, &broker, None, QUEUES, "two", 32).await;
    all_consumed(&mut [&mut m1, &mut m2], &batch).await;

    let joined = Instant::now();
    let mut m3 = join(&cluster, group, topic, "m3", Arc::clone(&strategy)).await;
    await_allocation(strategy.as_ref(), &[&m1, &m2, &m3], topic, &broker).await;
    let took = joined.elapsed();
    eprintln!(
        "{}: 2→3 members settled {took:?} after the join began",
        strategy.name()
    );
    assert!(
        took < REBALANCE_LATENCY_BOUND,
        "2→3 rebalance took {took:?}"
    );
    let batch = send_bodies(&producer, topic, &broker, None, QUEUES, "three", 48).await;
    all_consumed(&mut [&mut m1, &mut m2, &mut m3], &batch).await;

    // m2 leaves: its queues go back to the others, with its offsets persisted on the broker so
    // nothing it consumed is redelivered from the start.
    let left = Instant::now();
    m2.consumer.shutdown().await;
    await_allocation(strategy.as_ref(), &[&m1, &m3], topic, &broker).await;
    eprintln!(
        "{}: 3→2 members settled {:?} after the leave began",
        strategy.name(),
        left.elapsed()
    );
    assert!(
        left.elapsed() < REBALANCE_LATENCY_BOUND,
        "3→2 rebalance took {:?}",
        left.elapsed()
    );
    let batch = send_bodies(&producer, topic, &broker, None, QUEUES, "four", 32).await;
    let received = all_consumed(&mut [&mut m1, &mut m3], &batch).await;
    let redelivered_old = received.iter().filter(|b| b.starts_with("one-")).count();
    assert_eq!(redelivered_old, 0, "the first batch was committed long ago");

    m1.consumer.shutdown().await;
    m3.consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_join_and_leave_with_average_allocation() {
    run_join_and_leave(
        Arc::new(AllocateMessageQueueAveragely),
        "RebalanceAvg",
        "rebalance_avg_group",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_join_and_leave_with_consistent_hash_allocation() {
    run_join_and_leave(
        Arc::new(AllocateMessageQueueConsistentHash::default()),
        "RebalanceHash",
        "rebalance_hash_group",
    )
    .await;
}
