//! Rebalance against a real broker: members join and leave a clustering group, every message is
//! consumed, each member owns exactly what the allocation strategy assigns it over the sorted
//! client ids, and a membership change is acted on through NOTIFY_CONSUMER_IDS_CHANGED long
//! before the (here 60 s) periodic rebalance would.
//!
//! Two tests hold a rebalance at a chosen point to show what owned sets mean mid-rebalance: a
//! member still applying a rebalance computed before another member joined consumes alongside
//! the new owner (as the Java client does), and `do_rebalance` on every member leaves no such
//! rebalance in effect.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use comet_client::ClientError;
use comet_client::consumer::MessageQueue;
use comet_client::consumer::offset_store::{OffsetStore, ReadOffsetType, RemoteBrokerOffsetStore};
use comet_client::consumer::push::DefaultMQPushConsumer;
use comet_client::consumer::rebalance::{
    AllocateMessageQueueAveragely, AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy, java_queue_order,
};
use comet_client::instance::MQClientManager;
use comet_testkit::client::*;
use futures::future::BoxFuture;
use tokio::sync::{Semaphore, mpsc};

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
    let deadline = tokio::time::Instant::now() + WAIT_DEADLINE;
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

// ---- a rebalance computed from an older membership ------------------------------------------

/// The broker offset store, except that its first read from the broker of queue 2 or 3 of
/// `topic` is held until [`Hold::release`]: the owner's rebalance then stops with queues 0 and 1
/// in its table (rebalance visits new queues sorted by topic, broker and queue id).
struct HeldOffsetRead {
    topic: String,
    broker: RemoteBrokerOffsetStore,
    hold: Hold,
}

/// One hold: [`Hold::enter`] signals [`Hold::entered`] and waits for [`Hold::release`]; only the
/// first caller is held.
#[derive(Clone)]
struct Hold {
    taken: Arc<AtomicBool>,
    entered: Arc<Semaphore>,
    released: Arc<Semaphore>,
}

impl Hold {
    fn new() -> Self {
        Hold {
            taken: Arc::new(AtomicBool::new(false)),
            entered: Arc::new(Semaphore::new(0)),
            released: Arc::new(Semaphore::new(0)),
        }
    }

    /// Whether this call is the one to hold (the first).
    fn take(&self) -> bool {
        !self.taken.swap(true, Ordering::SeqCst)
    }

    async fn enter(&self) {
        self.entered.add_permits(1);
        let _ = self.released.acquire().await;
    }

    /// Waits until the hold was entered.
    async fn entered(&self, what: &str) {
        let entered = tokio::time::timeout(WAIT_DEADLINE, self.entered.acquire()).await;
        assert!(
            entered.is_ok_and(|permit| permit.is_ok()),
            "{what} never reached"
        );
    }

    fn release(&self) {
        self.released.add_permits(1);
    }
}

impl OffsetStore for HeldOffsetRead {
    fn load(&self) -> Result<(), ClientError> {
        self.broker.load()
    }
    fn update_offset(&self, mq: &MessageQueue, offset: i64, increase_only: bool) {
        self.broker.update_offset(mq, offset, increase_only);
    }
    fn read_offset<'a>(
        &'a self,
        mq: &'a MessageQueue,
        read_type: ReadOffsetType,
    ) -> BoxFuture<'a, Result<Option<i64>, ClientError>> {
        Box::pin(async move {
            if read_type == ReadOffsetType::ReadFromStore
                && mq.topic == self.topic
                && mq.queue_id >= 2
                && self.hold.take()
            {
                self.hold.enter().await;
            }
            self.broker.read_offset(mq, read_type).await
        })
    }
    fn persist_all<'a>(&'a self, mqs: &'a HashSet<MessageQueue>) -> BoxFuture<'a, ()> {
        self.broker.persist_all(mqs)
    }
    fn persist<'a>(&'a self, mq: &'a MessageQueue) -> BoxFuture<'a, ()> {
        self.broker.persist(mq)
    }
    fn remove_offset(&self, mq: &MessageQueue) {
        self.broker.remove_offset(mq);
    }
    fn clone_offset_table(&self, topic: &str) -> HashMap<MessageQueue, i64> {
        self.broker.clone_offset_table(topic)
    }
}

/// AVG, except that the first allocation of `topic` over two members is held until released
/// (the strategy is synchronous, so the hold blocks its thread in place).
struct HeldAllocation {
    topic: String,
    hold: Hold,
}

impl AllocateMessageQueueStrategy for HeldAllocation {
    fn allocate(
        &self,
        consumer_group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue> {
        let of_topic = mq_all.first().is_some_and(|mq| mq.topic == self.topic);
        if of_topic && cid_all.len() == 2 && self.hold.take() {
            let hold = self.hold.clone();
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(hold.enter());
            });
        }
        AllocateMessageQueueAveragely.allocate(consumer_group, current_cid, mq_all, cid_all)
    }

    fn name(&self) -> &'static str {
        "AVG"
    }
}

fn queue_ids(owned: &HashSet<MessageQueue>) -> Vec<i32> {
    let mut ids: Vec<i32> = owned.iter().map(|q| q.queue_id).collect();
    ids.sort_unstable();
    ids
}

/// Member "a" (sorting first, so its share of 4 queues is 0-1 once "b" is in) started alone, its
/// first rebalance (computed over itself only) held in the start-offset read of queue 2; then
/// member "b" joined and owns 2-3. Returns both with the offset hold.
async fn split_that_only_looks_settled(
    cluster: &Cluster,
    topic: &str,
    group: &str,
    allocation: Option<Arc<HeldAllocation>>,
) -> (Member, Member, Hold) {
    cluster.create_topic(topic, 4).await;
    let hold = Hold::new();
    let mut config = consumer_config(cluster, group, &unique_instance("a-member"));
    config.client.rebalance_interval = LONG_REBALANCE_INTERVAL;
    // The store of the instance the consumer will run in (instances are shared per client id).
    let instance = MQClientManager::get_or_create_instance(&config.client);
    config.offset_store = Some(Arc::new(HeldOffsetRead {
        topic: topic.to_owned(),
        broker: RemoteBrokerOffsetStore::new(instance, group),
        hold: hold.clone(),
    }));
    if let Some(allocation) = allocation {
        config.allocate_message_queue_strategy = allocation;
    }
    let (listener, rx) = reporting_listener("a-member");
    let a = Member {
        consumer: start_consumer(config, topic, listener).await,
        rx,
    };
    hold.entered("a's start-offset read of queue 2").await;
    let b = join(
        cluster,
        group,
        topic,
        "b-member",
        Arc::new(AllocateMessageQueueAveragely),
    )
    .await;
    let b_owns_its_share = wait_until(|| {
        let owned = queue_ids(&owned_of_topic(&b, topic));
        async move { owned == [2, 3] }
    })
    .await;
    assert!(b_owns_its_share, "b never took queues 2 and 3");
    // What a look at the owned sets shows: both own queues, disjoint, together all four.
    assert_eq!(queue_ids(&owned_of_topic(&a, topic)), [0, 1]);
    (a, b, hold)
}

/// Sends one message to queue 2 of `topic`; returns its body.
async fn send_to_queue_2(cluster: &Cluster, topic: &str, body: &str) -> String {
    let producer = producer(cluster).await;
    let sent = send_bodies(
        &producer,
        topic,
        &cluster.broker_name(),
        Some(2),
        4,
        body,
        1,
    )
    .await;
    producer.shutdown().await;
    sent.into_iter().next().expect("one body sent")
}

/// A member still applying a rebalance computed before another member joined owns, for that
/// moment, queues the new member owns too, and both consume what arrives there. Owned sets
/// looked at mid-rebalance (a: 0-1, b: 2-3) therefore say nothing about whether the split is
/// final. The official Java client behaves the same: its rebalance also adds the queues of an
/// allocation one by one and gives up the extra ones only at its next rebalance, so clustering
/// consumption is at-least-once while a queue changes owners.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_on_an_older_membership_consumes_alongside_the_new_owner() {
    let cluster = Cluster::start().await;
    let (topic, group) = ("RebalanceOldMembership", "rebalance_old_membership_group");
    let allocation = Arc::new(HeldAllocation {
        topic: topic.to_owned(),
        hold: Hold::new(),
    });
    let (mut a, mut b, offset_hold) =
        split_that_only_looks_settled(&cluster, topic, group, Some(Arc::clone(&allocation))).await;
    // a's first rebalance goes on to take queues 2 and 3; its next one (over both members,
    // woken by the broker's notice of b's arrival) is held in the allocation.
    offset_hold.release();
    allocation
        .hold
        .entered("a's rebalance over both members")
        .await;
    assert_eq!(queue_ids(&owned_of_topic(&a, topic)), [0, 1, 2, 3]);
    assert_eq!(queue_ids(&owned_of_topic(&b, topic)), [2, 3]);

    let body = send_to_queue_2(&cluster, topic, "overlap").await;
    let from_a = tokio::time::timeout(WAIT_DEADLINE, a.rx.recv()).await;
    let from_b = tokio::time::timeout(WAIT_DEADLINE, b.rx.recv()).await;
    for (who, got) in [("a", from_a), ("b", from_b)] {
        let d = got
            .unwrap_or_else(|_| panic!("{who} never received the message"))
            .expect("listener channel open");
        assert_eq!(
            (d.body.as_str(), d.queue_id, d.queue_offset),
            (body.as_str(), 2, 0)
        );
    }

    // a's next rebalance ends the overlap.
    allocation.hold.release();
    let a_gave_up = wait_until(|| {
        let owned = queue_ids(&owned_of_topic(&a, topic));
        async move { owned == [0, 1] }
    })
    .await;
    assert!(a_gave_up, "a never gave up queues 2 and 3");
    a.consumer.shutdown().await;
    b.consumer.shutdown().await;
    cluster.shutdown().await;
}

/// `do_rebalance` waits for a rebalance already running in the member, then applies the
/// membership the broker reports: once it has returned on every member, no rebalance computed
/// from an older membership is left, the owned sets are final, and what is sent afterwards
/// reaches the group once. The interop scenarios settle a split this way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn do_rebalance_on_every_member_leaves_no_older_membership_in_effect() {
    let cluster = Cluster::start().await;
    let (topic, group) = ("RebalanceSettled", "rebalance_settled_group");
    let (mut a, mut b, offset_hold) =
        split_that_only_looks_settled(&cluster, topic, group, None).await;
    let settle = {
        let (a, b) = (a.consumer.clone(), b.consumer.clone());
        tokio::spawn(async move {
            a.do_rebalance().await;
            b.do_rebalance().await;
        })
    };
    offset_hold.release();
    tokio::time::timeout(WAIT_DEADLINE, settle)
        .await
        .expect("do_rebalance returned")
        .expect("settle task");
    assert_eq!(queue_ids(&owned_of_topic(&a, topic)), [0, 1]);
    assert_eq!(queue_ids(&owned_of_topic(&b, topic)), [2, 3]);

    let producer = producer(&cluster).await;
    let bodies = send_bodies(
        &producer,
        topic,
        &cluster.broker_name(),
        None,
        4,
        "once",
        16,
    )
    .await;
    producer.shutdown().await;
    let mut seen = Vec::new();
    let expected: HashSet<&String> = bodies.iter().collect();
    let deadline = tokio::time::Instant::now() + WAIT_DEADLINE;
    while !expected
        .iter()
        .all(|body| seen.iter().any(|d: &Delivery| d.body == **body))
    {
        tokio::select! {
            Some(d) = a.rx.recv() => seen.push(d),
            Some(d) = b.rx.recv() => seen.push(d),
            () = tokio::time::sleep_until(deadline) => panic!("only {} deliveries", seen.len()),
        }
    }
    // Every delivery either member made before it stopped counts. Suspended members no longer
    // rebalance, so the one shut down last does not take over (and re-read) the other's queues.
    a.consumer.suspend();
    b.consumer.suspend();
    a.consumer.shutdown().await;
    b.consumer.shutdown().await;
    while let Ok(d) = a.rx.try_recv() {
        seen.push(d);
    }
    while let Ok(d) = b.rx.try_recv() {
        seen.push(d);
    }
    let mut per_record: HashMap<(i32, i64), Vec<&str>> = HashMap::new();
    for d in &seen {
        per_record
            .entry((d.queue_id, d.queue_offset))
            .or_default()
            .push(d.consumer.as_str());
    }
    assert_eq!(per_record.len(), 16);
    for ((queue, offset), who) in &per_record {
        let owner = if *queue < 2 { "a-member" } else { "b-member" };
        assert_eq!(who, &[owner], "queue {queue} offset {offset}");
    }
    cluster.shutdown().await;
}
