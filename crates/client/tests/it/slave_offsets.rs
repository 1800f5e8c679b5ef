//! A consumer group goes on from its committed offsets while its master is down: offsets are read
//! from and committed to the slave, as Java's client does, both by a consumer that was running
//! when the master stopped and by one started afterwards.

use std::collections::HashSet;
use std::sync::Arc;

use comet_broker::BrokerHandle;
use comet_client::consumer::ConsumeConcurrentlyStatus;
use comet_client::consumer::push::DefaultMQPushConsumer;
use comet_testkit::client::*;

const QUEUES: i32 = 4;

/// The group's offsets of every queue as the slave holds them.
fn slave_offsets(slave: &BrokerHandle, group: &str, topic: &str) -> Vec<i64> {
    (0..QUEUES)
        .map(|q| {
            slave
                .context()
                .consumer_offsets
                .query_offset(group, topic, q)
        })
        .collect()
}

fn bodies(seen: &[Delivery]) -> HashSet<String> {
    seen.iter().map(|d| d.body.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_come_from_the_slave_while_the_master_is_down() {
    let mut cluster = Cluster::start().await;
    let topic = "SlaveOffsets";
    cluster.create_topic(topic, QUEUES).await;
    let slave_dir = tempfile::tempdir().expect("tempdir");
    let slave = cluster.start_slave(slave_dir.path(), |_| {}).await;
    let broker_name = cluster.broker_name();
    let producer = producer(&cluster).await;

    // Group "late" reads the first 40 messages and commits them; group "running" keeps
    // consuming, its listener held back so that messages are still to consume when the master
    // goes away.
    let first = send_bodies(&producer, topic, &broker_name, None, QUEUES, "first", 40).await;
    let (listener, mut late_rx) = reporting_listener("late");
    let late = start_consumer(
        consumer_config(&cluster, "late", &unique_instance("late")),
        topic,
        listener,
    )
    .await;
    let mut late_seen = Vec::new();
    collect_bodies(&mut late_rx, &mut late_seen, &first).await;
    late.shutdown().await;
    for q in 0..QUEUES {
        cluster.wait_committed("late", topic, q, 10).await;
    }

    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (listener, mut running_rx) =
        reporting_listener_with("running", Some(Arc::clone(&gate)), |_| {
            ConsumeConcurrentlyStatus::ConsumeSuccess
        });
    let mut running_config = consumer_config(&cluster, "running", &unique_instance("running"));
    // One message per pull and per cached queue: most of the backlog is still on the brokers
    // when the master stops, so this consumer must pull it from the slave.
    running_config.pull_batch_size = 1;
    running_config.pull_threshold_for_queue = 1;
    let running = start_consumer(running_config, topic, listener).await;
    let second = send_bodies(&producer, topic, &broker_name, None, QUEUES, "second", 40).await;
    producer.shutdown().await;

    // The slave holds every message and the group's committed offsets before the master stops.
    let master_end = cluster.broker().context().store.max_phy_offset();
    let sstore = Arc::clone(&slave.context().store);
    assert!(
        wait_until(|| {
            let done = sstore.max_phy_offset() == master_end
                && (0..QUEUES).all(|q| sstore.get_max_offset_in_queue(topic, q) == 20);
            async move { done }
        })
        .await,
        "the slave never caught up"
    );
    assert!(
        wait_until(|| {
            let offsets = slave_offsets(&slave, "late", topic);
            async move { offsets == vec![10; 4] }
        })
        .await,
        "the slave never copied the group's offsets: {:?}",
        slave_offsets(&slave, "late", topic)
    );

    let master = cluster.handle.take().expect("master running");
    master.shutdown().await.expect("master stops");

    // Started while the master is down: it starts from the offsets the slave holds, so it gets
    // exactly the messages sent after the group's last commit.
    let (listener, mut late_rx) = reporting_listener("late-again");
    let late_again = start_consumer(
        consumer_config(&cluster, "late", &unique_instance("late")),
        topic,
        listener,
    )
    .await;
    let mut again_seen = Vec::new();
    collect_bodies(&mut late_rx, &mut again_seen, &second).await;
    let again = bodies(&again_seen);
    assert!(
        first.iter().all(|b| !again.contains(b)),
        "committed messages delivered again: {again:?}"
    );

    // Already running: it goes on from the slave, and commits there.
    gate.add_permits(1_000);
    let mut running_seen = Vec::new();
    let all: Vec<String> = first.iter().chain(&second).cloned().collect();
    collect_bodies(&mut running_rx, &mut running_seen, &all).await;
    assert!(
        wait_until(|| {
            let offsets = slave_offsets(&slave, "running", topic);
            async move { offsets == vec![20; 4] }
        })
        .await,
        "the running consumer's offsets never reached the slave: {:?}",
        slave_offsets(&slave, "running", topic)
    );
    // The consumer started while the master was down committed to the slave too.
    late_again.shutdown().await;
    assert!(
        wait_until(|| {
            let offsets = slave_offsets(&slave, "late", topic);
            async move { offsets == vec![20; 4] }
        })
        .await,
        "the late consumer's offsets never reached the slave: {:?}",
        slave_offsets(&slave, "late", topic)
    );
    shutdown_all(running, slave, cluster).await;
}

async fn shutdown_all(consumer: DefaultMQPushConsumer, slave: BrokerHandle, cluster: Cluster) {
    consumer.shutdown().await;
    slave.shutdown().await.expect("slave stops");
    cluster.shutdown().await;
}
