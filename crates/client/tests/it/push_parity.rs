//! Push consumer behaviours that follow the Java client's `DefaultMQPushConsumer`, against a real
//! in-process name server and broker: consume concurrency of `consume_thread_min`, the start
//! rules of every client kind, offset resets by time, per-consumer client instances, the lock and
//! idle timing settings, the delayed OFFSET_ILLEGAL fix and the heartbeat's unit mode.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use comet_client::ClientError;
use comet_client::admin::MQAdmin;
use comet_client::config::DEFAULT_INSTANCE_NAME;
use comet_client::consumer::lite::{DefaultLitePullConsumer, LitePullConsumerConfig};
use comet_client::consumer::pull::{DefaultMQPullConsumer, PullConsumerConfig};
use comet_client::consumer::push::DefaultMQPushConsumer;
use comet_client::consumer::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, ConsumeOrderlyContext,
    ConsumeOrderlyStatus, MessageExt, MessageListener, MessageListenerConcurrently,
    MessageListenerOrderly, MessageQueue,
};
use comet_client::instance::ServiceState;
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_testkit::client::*;
use futures::future::BoxFuture;
use tokio::sync::Semaphore;

/// A concurrent listener that counts the calls running at once and holds each call until the
/// test hands out a permit.
#[derive(Clone)]
struct Blocking {
    current: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    done: Arc<AtomicUsize>,
    gate: Arc<Semaphore>,
}

impl Blocking {
    fn new() -> Self {
        Blocking {
            current: Arc::default(),
            peak: Arc::default(),
            done: Arc::default(),
            gate: Arc::new(Semaphore::new(0)),
        }
    }
}

impl MessageListenerConcurrently for Blocking {
    fn consume_message<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        _ctx: &'a mut ConsumeConcurrentlyContext,
    ) -> BoxFuture<'a, ConsumeConcurrentlyStatus> {
        Box::pin(async move {
            let now = self.current.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            if let Ok(permit) = self.gate.acquire().await {
                permit.forget();
            }
            self.current.fetch_sub(1, Ordering::SeqCst);
            self.done.fetch_add(msgs.len(), Ordering::SeqCst);
            ConsumeConcurrentlyStatus::ConsumeSuccess
        })
    }
}

/// Messages cached (pulled, not yet committed) over the consumer's owned queues.
fn cached(consumer: &DefaultMQPushConsumer) -> i64 {
    consumer
        .owned_queues()
        .iter()
        .filter_map(|mq| consumer.process_queue(mq))
        .map(|pq| pq.msg_count())
        .sum()
}

/// With a backlog, exactly `consume_thread_min` listener calls run at once (Java's pool never
/// grows past its core size), and `update_core_pool_size` raises or lowers that while running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_consumption_runs_consume_thread_min_calls() {
    let cluster = Cluster::start().await;
    let topic = "ParityThreads";
    cluster.create_topic(topic, 4).await;
    let producer = producer(&cluster).await;
    let broker = cluster.broker_name();
    send_bodies(&producer, topic, &broker, None, 4, "t", 40).await;
    cluster.wait_dispatched().await;

    let listener = Blocking::new();
    let mut config = consumer_config(&cluster, "parity_threads", &unique_instance("threads"));
    config.consume_thread_min = 3;
    config.consume_thread_max = 64;
    let consumer = start_consumer(
        config,
        topic,
        MessageListener::Concurrently(Arc::new(listener.clone())),
    )
    .await;
    assert_eq!(consumer.core_pool_size(), Some(3));
    assert!(
        wait_until(|| {
            let running = listener.current.load(Ordering::SeqCst);
            let cached = cached(&consumer);
            async move { running == 3 && cached == 40 }
        })
        .await,
        "3 calls run with the whole backlog pulled (running {}, cached {})",
        listener.current.load(Ordering::SeqCst),
        cached(&consumer)
    );
    assert_eq!(
        listener.peak.load(Ordering::SeqCst),
        3,
        "never more than min"
    );

    assert!(!consumer.update_core_pool_size(0));
    assert!(!consumer.update_core_pool_size(65));
    assert!(consumer.update_core_pool_size(5));
    assert_eq!(consumer.core_pool_size(), Some(5));
    assert!(
        wait_until(|| {
            let running = listener.current.load(Ordering::SeqCst);
            async move { running == 5 }
        })
        .await,
        "a larger core size runs more calls"
    );

    // Shrinking: the workers whose calls end beyond the new size retire.
    assert!(consumer.update_core_pool_size(2));
    listener.gate.add_permits(3);
    assert!(
        wait_until(|| {
            let running = listener.current.load(Ordering::SeqCst);
            let done = listener.done.load(Ordering::SeqCst);
            async move { running == 2 && done == 3 }
        })
        .await,
        "a smaller core size runs fewer calls (running {}, done {})",
        listener.current.load(Ordering::SeqCst),
        listener.done.load(Ordering::SeqCst)
    );

    listener.gate.add_permits(1000);
    assert!(
        wait_until(|| {
            let done = listener.done.load(Ordering::SeqCst);
            async move { done >= 40 }
        })
        .await
    );
    assert!(listener.peak.load(Ordering::SeqCst) <= 5);
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

fn not_startable(result: Result<(), ClientError>, service: &str, state: &str) {
    let err = result.expect_err("start refused");
    assert!(
        matches!(&err, ClientError::NotStartable { service: s, state: st } if *s == service && st == state),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("The {service} service state not OK, maybe started once, {state}")
    );
}

/// Only CREATE_JUST starts; a start refused by the configuration check leaves START_FAILED, from
/// which a start is refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_consumer_starts_once_and_a_failed_start_stays_failed() {
    let cluster = Cluster::start().await;
    let topic = "ParityStart";
    cluster.create_topic(topic, 1).await;
    let (listener, _rx) = reporting_listener("start");
    let consumer = start_consumer(
        consumer_config(&cluster, "parity_start", &unique_instance("start")),
        topic,
        listener,
    )
    .await;
    not_startable(consumer.start().await, "PushConsumer", "RUNNING");
    assert_eq!(consumer.service_state(), ServiceState::Running);
    consumer.shutdown().await;
    not_startable(consumer.start().await, "PushConsumer", "SHUTDOWN_ALREADY");

    let mut config = consumer_config(&cluster, "parity_bad", &unique_instance("bad"));
    config.pull_batch_size = 0;
    let bad = DefaultMQPushConsumer::new(config);
    bad.subscribe(topic, "*").await.expect("subscribe");
    let (listener, _rx2) = reporting_listener("bad");
    bad.register_message_listener(listener);
    assert!(matches!(
        bad.start().await,
        Err(ClientError::IllegalArgument(_))
    ));
    assert_eq!(bad.service_state(), ServiceState::StartFailed);
    not_startable(bad.start().await, "PushConsumer", "START_FAILED");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_starts_once_and_a_failed_start_stays_failed() {
    let cluster = Cluster::start().await;
    let mut config = ProducerConfig::new("parity_producer", cluster.namesrv_addr());
    config.client.client_ip = "127.0.0.1".to_owned();
    let producer = DefaultMQProducer::new(config.clone());
    producer.start().await.expect("first start");
    not_startable(producer.start().await, "producer", "RUNNING");
    producer.shutdown().await;
    not_startable(producer.start().await, "producer", "SHUTDOWN_ALREADY");

    config.producer_group = "bad/group".to_owned();
    let bad = DefaultMQProducer::new(config);
    assert!(matches!(
        bad.start().await,
        Err(ClientError::IllegalArgument(_))
    ));
    assert_eq!(bad.service_state(), ServiceState::StartFailed);
    not_startable(bad.start().await, "producer", "START_FAILED");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_and_lite_consumers_start_once_and_a_failed_start_stays_failed() {
    let cluster = Cluster::start().await;
    let client = client_config(&cluster, &unique_instance("pull"));
    let pull = DefaultMQPullConsumer::new(PullConsumerConfig::new("parity_pull", client.clone()));
    pull.start().await.expect("first start");
    not_startable(pull.start().await, "PullConsumer", "RUNNING");
    pull.shutdown().await;
    not_startable(pull.start().await, "PullConsumer", "SHUTDOWN_ALREADY");
    let bad_pull = DefaultMQPullConsumer::new(PullConsumerConfig::new("", client.clone()));
    assert!(bad_pull.start().await.is_err());
    assert_eq!(bad_pull.service_state(), ServiceState::StartFailed);
    not_startable(bad_pull.start().await, "PullConsumer", "START_FAILED");

    let lite =
        DefaultLitePullConsumer::new(LitePullConsumerConfig::new("parity_lite", client.clone()));
    lite.start().await.expect("first start");
    not_startable(lite.start().await, "LitePullConsumer", "RUNNING");
    lite.shutdown().await;
    not_startable(lite.start().await, "LitePullConsumer", "SHUTDOWN_ALREADY");
    let bad_lite = DefaultLitePullConsumer::new(LitePullConsumerConfig::new("", client));
    assert!(bad_lite.start().await.is_err());
    assert_eq!(bad_lite.service_state(), ServiceState::StartFailed);
    not_startable(bad_lite.start().await, "LitePullConsumer", "START_FAILED");
    cluster.shutdown().await;
}

/// Sends `before` messages, picks a time after all of them, then sends `after` messages stored
/// after that time. Returns (before bodies, the time, after bodies).
async fn backlog_around_a_time(
    cluster: &Cluster,
    producer: &DefaultMQProducer,
    topic: &str,
    queues: i32,
) -> (Vec<String>, i64, Vec<String>) {
    let broker = cluster.broker_name();
    let before = send_bodies(producer, topic, &broker, None, queues, "before", 8).await;
    // Every `before` message was stored when its send returned, so at a strictly later
    // millisecond; the same holds between the middle time and the `after` messages.
    let sent = now_millis();
    assert!(wait_until(|| async move { now_millis() > sent }).await);
    let middle = now_millis();
    assert!(wait_until(|| async move { now_millis() > middle }).await);
    let after = send_bodies(producer, topic, &broker, None, queues, "after", 8).await;
    cluster.wait_dispatched().await;
    (before, middle, after)
}

/// After all deliveries of a reset were seen and the offsets are back at the end, the
/// redelivered bodies are exactly `after` (and nothing of `before`).
async fn assert_redelivered_exactly(
    consumer: &DefaultMQPushConsumer,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Delivery>,
    topic: &str,
    after: &[String],
) {
    let mut again = Vec::new();
    collect_bodies(rx, &mut again, after).await;
    let store = consumer.offset_store().expect("started");
    assert!(
        wait_until(|| {
            let t = store.clone_offset_table(topic);
            async move { t.len() == 2 && t.values().all(|o| *o == 8) }
        })
        .await,
        "offsets back at the end"
    );
    // Offsets at the end: every message pulled since the reset finished its listener call.
    while let Ok(d) = rx.try_recv() {
        again.push(d);
    }
    let got: HashSet<&str> = again.iter().map(|d| d.body.as_str()).collect();
    let want: HashSet<&str> = after.iter().map(String::as_str).collect();
    assert_eq!(
        got, want,
        "only the messages after the reset time come again"
    );
}

/// A broker-initiated reset by time (the admin's INVOKE_BROKER_TO_RESET_OFFSET, answered by
/// RESET_CONSUMER_CLIENT_OFFSET to the consumer) and the consumer's own
/// `reset_offset_by_timestamp` both restart consumption at the first message stored at or after
/// the time, in the middle of the consumed backlog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_by_time_in_the_middle_of_a_backlog_redelivers_only_what_follows() {
    let cluster = Cluster::start().await;
    let topic = "ParityResetTime";
    cluster.create_topic(topic, 2).await;
    let producer = producer(&cluster).await;
    let (before, middle, after) = backlog_around_a_time(&cluster, &producer, topic, 2).await;
    let group = "parity_reset_time";
    let (listener, mut rx) = reporting_listener("reset");
    let consumer = start_consumer(
        consumer_config(&cluster, group, &unique_instance("reset")),
        topic,
        listener,
    )
    .await;
    let all: Vec<String> = before.iter().chain(after.iter()).cloned().collect();
    let mut seen = Vec::new();
    collect_bodies(&mut rx, &mut seen, &all).await;
    let store = consumer.offset_store().expect("started");
    assert!(
        wait_until(|| {
            let t = store.clone_offset_table(topic);
            async move { t.len() == 2 && t.values().all(|o| *o == 8) }
        })
        .await
    );
    while rx.try_recv().is_ok() {}

    let admin = MQAdmin::new(client_config(&cluster, &unique_instance("admin"))).expect("admin");
    let offsets = admin
        .reset_offset_by_time(group, topic, middle, true)
        .await
        .expect("broker resets");
    assert!(
        offsets.values().all(|o| *o == 4),
        "the middle of each queue: {offsets:?}"
    );
    assert_redelivered_exactly(&consumer, &mut rx, topic, &after).await;

    consumer
        .reset_offset_by_timestamp(middle)
        .await
        .expect("consumer resets itself");
    assert_redelivered_exactly(&consumer, &mut rx, topic, &after).await;
    for q in 0..2 {
        cluster.wait_committed(group, topic, q, 8).await;
    }
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

/// Left at the default instance name, two consumers of one group in one process get client ids
/// of their own (`<pid>#<nanos>`) and so separate client instances: both start and share the
/// queues as two members.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_consumers_of_one_group_in_one_process_both_start() {
    let cluster = Cluster::start().await;
    let topic = "ParityTwoMembers";
    cluster.create_topic(topic, 4).await;
    let group = "parity_two_members";
    let mut config = consumer_config(&cluster, group, DEFAULT_INSTANCE_NAME);
    config.client.instance_name = DEFAULT_INSTANCE_NAME.to_owned();
    let (l1, _rx1) = reporting_listener("m1");
    let (l2, _rx2) = reporting_listener("m2");
    let first = start_consumer(config.clone(), topic, l1).await;
    let second = start_consumer(config, topic, l2).await;
    let (id1, id2) = (
        first.client_id().expect("started"),
        second.client_id().expect("started"),
    );
    assert_ne!(id1, id2);
    let pid = std::process::id().to_string();
    for id in [&id1, &id2] {
        let instance = id.split('@').nth(1).expect("ip@instance");
        assert_eq!(instance.split('#').next(), Some(pid.as_str()), "{id}");
    }
    assert!(
        wait_until(|| {
            // The group's retry topic may be owned too: count the subscribed topic's queues.
            let owned = |c: &DefaultMQPushConsumer| {
                c.owned_queues()
                    .iter()
                    .filter(|mq| mq.topic == topic)
                    .count()
            };
            let (a, b) = (owned(&first), owned(&second));
            async move { a == 2 && b == 2 }
        })
        .await,
        "the two members split the queues"
    );
    first.shutdown().await;
    second.shutdown().await;
    cluster.shutdown().await;
}

/// An orderly listener that records each delivery.
struct OrderlyRecorder {
    tx: tokio::sync::mpsc::UnboundedSender<String>,
}

impl MessageListenerOrderly for OrderlyRecorder {
    fn consume_message<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        _ctx: &'a mut ConsumeOrderlyContext,
    ) -> BoxFuture<'a, ConsumeOrderlyStatus> {
        Box::pin(async move {
            for m in msgs {
                let _ = self.tx.send(String::from_utf8_lossy(&m.body).into_owned());
            }
            ConsumeOrderlyStatus::Success
        })
    }
}

/// With a short `lock_max_live_ms` (and renewals far apart), an orderly consumer's lock expires:
/// a message arriving then is consumed only after the queue was locked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_orderly_lock_is_renewed_before_consuming() {
    let cluster = Cluster::start().await;
    let topic = "ParityLockLive";
    cluster.create_topic(topic, 1).await;
    let producer = producer(&cluster).await;
    let broker = cluster.broker_name();
    let mut config = consumer_config(&cluster, "parity_lock_live", &unique_instance("lock"));
    config.lock_max_live_ms = 300;
    config.lock_interval_ms = 3_600_000;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let started = now_millis();
    let consumer = start_consumer(
        config,
        topic,
        MessageListener::Orderly(Arc::new(OrderlyRecorder { tx })),
    )
    .await;
    let mq = MessageQueue::new(topic, &broker, 0);
    // Past the first periodic lock (1 s after start) and past the lock's life.
    assert!(
        wait_until(|| {
            let pq = consumer.process_queue(&mq);
            async move {
                pq.is_some_and(|pq| {
                    let now = now_millis();
                    pq.is_locked() && now > started + 1500 && now > pq.last_lock_timestamp() + 400
                })
            }
        })
        .await,
        "the queue was locked once and its lock has aged"
    );
    let sent_at = now_millis();
    send_bodies(&producer, topic, &broker, Some(0), 1, "late", 1).await;
    let body = tokio::time::timeout(WAIT_DEADLINE, rx.recv())
        .await
        .expect("consumed in time")
        .expect("listener alive");
    assert_eq!(body, "late-0");
    let relocked = consumer
        .process_queue(&mq)
        .expect("owned")
        .last_lock_timestamp();
    assert!(
        relocked >= sent_at,
        "consumed without renewing the expired lock (last lock {relocked}, sent {sent_at})"
    );
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

/// With a short `pull_max_idle_ms`, a queue whose pull is held by the broker (nothing to read)
/// counts as abandoned: rebalance drops its process queue and creates a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_pull_max_idle_expires_an_idle_queue() {
    let cluster = Cluster::start().await;
    let topic = "ParityPullIdle";
    cluster.create_topic(topic, 1).await;
    let mut config = consumer_config(&cluster, "parity_pull_idle", &unique_instance("idle"));
    config.pull_max_idle_ms = 200;
    let (listener, _rx) = reporting_listener("idle");
    let consumer = start_consumer(config, topic, listener).await;
    let mq = MessageQueue::new(topic, cluster.broker_name(), 0);
    assert!(
        wait_until(|| {
            let pq = consumer.process_queue(&mq);
            async move { pq.is_some() }
        })
        .await
    );
    let first = consumer.process_queue(&mq).expect("owned");
    assert!(
        wait_until(|| {
            let now = consumer.process_queue(&mq);
            let replaced = now.is_some_and(|pq| !Arc::ptr_eq(&pq, &first));
            let dropped = first.is_dropped();
            async move { replaced && dropped }
        })
        .await,
        "the idle queue was dropped and re-created"
    );
    consumer.shutdown().await;
    cluster.shutdown().await;
}

/// Seeds the group's committed offset of queue 0 far past the end (5 messages stored).
async fn seed_illegal_offset(
    cluster: &Cluster,
    producer: &DefaultMQProducer,
    topic: &str,
    group: &str,
) {
    let broker = cluster.broker_name();
    send_bodies(producer, topic, &broker, Some(0), 1, "old", 5).await;
    cluster.wait_dispatched().await;
    cluster
        .broker()
        .context()
        .consumer_offsets
        .commit_offset("test", group, topic, 0, 1000);
}

/// During `offset_illegal_fix_delay` the dropped queue stays as it is: rebalance neither removes
/// nor re-creates it and the bad offset is not replaced yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_illegal_waits_out_the_fix_delay() {
    let cluster = Cluster::start().await;
    let topic = "ParityIllegalWait";
    cluster.create_topic(topic, 1).await;
    let producer = producer(&cluster).await;
    let group = "parity_illegal_wait";
    seed_illegal_offset(&cluster, &producer, topic, group).await;
    let mut config = consumer_config(&cluster, group, &unique_instance("illwait"));
    config.offset_illegal_fix_delay = Duration::from_secs(3600);
    let (listener, _rx) = reporting_listener("illwait");
    let consumer = start_consumer(config, topic, listener).await;
    let mq = MessageQueue::new(topic, cluster.broker_name(), 0);
    assert!(
        wait_until(|| {
            let pq = consumer.process_queue(&mq);
            async move { pq.is_some_and(|pq| pq.is_dropped()) }
        })
        .await,
        "OFFSET_ILLEGAL drops the queue and keeps it until the fix"
    );
    let dropped = consumer.process_queue(&mq).expect("kept");
    consumer.do_rebalance().await;
    consumer.do_rebalance().await;
    let now = consumer.process_queue(&mq).expect("still kept");
    assert!(Arc::ptr_eq(&now, &dropped) && now.is_dropped());
    assert_eq!(cluster.committed_offset(group, topic, 0), 1000);
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

/// After `offset_illegal_fix_delay`, the corrected offset (the queue's max) is persisted and the
/// queue is consumed again from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_illegal_is_fixed_after_the_delay_and_consumption_resumes() {
    let cluster = Cluster::start().await;
    let topic = "ParityIllegalFix";
    cluster.create_topic(topic, 1).await;
    let producer = producer(&cluster).await;
    let broker = cluster.broker_name();
    let group = "parity_illegal_fix";
    seed_illegal_offset(&cluster, &producer, topic, group).await;
    let mut config = consumer_config(&cluster, group, &unique_instance("illfix"));
    config.offset_illegal_fix_delay = Duration::from_millis(300);
    let (listener, mut rx) = reporting_listener("illfix");
    let consumer = start_consumer(config, topic, listener).await;
    let mq = MessageQueue::new(topic, &broker, 0);
    assert!(
        wait_until(|| {
            let restarted = consumer
                .process_queue(&mq)
                .is_some_and(|pq| !pq.is_dropped());
            let committed = cluster.committed_offset(group, topic, 0);
            async move { restarted && committed == 5 }
        })
        .await,
        "corrected offset persisted and the queue re-created"
    );
    let new = send_bodies(&producer, topic, &broker, Some(0), 1, "new", 3).await;
    let mut seen = Vec::new();
    collect_bodies(&mut rx, &mut seen, &new).await;
    assert!(seen.iter().all(|d| d.body.starts_with("new-")));
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

/// The heartbeat carries the consumer's `unit_mode`; the broker then creates the group's retry
/// topic with the unit-subscription flag, as Apache's broker does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_carries_unit_mode() {
    const UNIT_SUB_FLAG: i32 = 0x2;
    let cluster = Cluster::start().await;
    let topic = "ParityUnit";
    cluster.create_topic(topic, 1).await;
    let mut consumers = Vec::new();
    for (group, unit) in [("parity_unit_on", true), ("parity_unit_off", false)] {
        let mut config = consumer_config(&cluster, group, &unique_instance(group));
        config.unit_mode = unit;
        let (listener, _rx) = reporting_listener(group);
        consumers.push(start_consumer(config, topic, listener).await);
    }
    let flag = |group: &str| {
        cluster
            .broker()
            .context()
            .topic_config
            .select(&format!("%RETRY%{group}"))
            .map(|c| c.topic_sys_flag & UNIT_SUB_FLAG)
    };
    assert_eq!(flag("parity_unit_on"), Some(UNIT_SUB_FLAG));
    assert_eq!(flag("parity_unit_off"), Some(0));
    for c in consumers {
        c.shutdown().await;
    }
    cluster.shutdown().await;
}
