//! The push consumer's less travelled paths, watched on the wire: every connection to the broker
//! passes a recording relay ([`wiretap`]), so the tests see what each pull carries and when it
//! was sent. Covered: `pull_interval`, `post_subscription_when_pull`, the exception delay after a
//! refused pull and after a pull that finds no subscription, pulling from the slave the broker
//! suggests, the default start time of CONSUME_FROM_TIMESTAMP, the local retry when a message
//! cannot be sent back, the sweep of messages stuck in the listener, a group on several topics,
//! and the defaults of a new consumer.
//!
//! Waits in these tests are lower bounds the consumer must respect ("not before 3 s"), read from
//! the relay's clock; nothing asserts that anything was fast.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use comet_broker::BrokerConfig;
use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, ConsumeFromWhere, MessageListener,
    MessageListenerConcurrently, MessageModel,
};
use comet_client::message::MessageExt;
use comet_protocol::body::topic::SubscriptionGroupConfig;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_testkit::client::*;
use comet_testkit::wiretap::{RELAY_IP, Seen, Wiretap};
use futures::future::BoxFuture;

/// Java's `FLAG_SUBSCRIPTION` bit of a pull's `sysFlag`.
const FLAG_SUBSCRIPTION: i64 = 1 << 2;

fn relay_ip() -> IpAddr {
    RELAY_IP.parse().expect("literal IP")
}

/// A cluster whose broker is reached only through a relay.
async fn relayed_cluster(tweak: impl FnOnce(&mut BrokerConfig)) -> (Cluster, Wiretap) {
    let cluster = Cluster::start_with(|c| {
        c.broker_ip1 = Some(relay_ip());
        tweak(c);
    })
    .await;
    let bound = cluster.broker().local_addr();
    let tap = Wiretap::start(SocketAddr::new(relay_ip(), bound.port()), bound).await;
    (cluster, tap)
}

/// The pulls of `group` for `topic`, in the order the relay saw them.
fn pulls(tap: &Wiretap, group: &str, topic: &str) -> Vec<Seen> {
    tap.requests(RequestCode::PullMessage)
        .into_iter()
        .filter(|p| p.field("consumerGroup") == Some(group) && p.field("topic") == Some(topic))
        .collect()
}

/// Waits until the relay has seen at least `n` pulls of `group` for `topic`.
async fn await_pulls(tap: &Wiretap, group: &str, topic: &str, n: usize) -> Vec<Seen> {
    let seen = wait_until(|| {
        let count = pulls(tap, group, topic).len();
        async move { count >= n }
    })
    .await;
    assert!(seen, "fewer than {n} pulls of {group} on {topic}");
    pulls(tap, group, topic)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_subscription_when_pull_sends_the_expression_with_every_pull() {
    let (cluster, tap) = relayed_cluster(|_| {}).await;
    let topic = "PathsPostSub";
    cluster.create_topic(topic, 1).await;
    let producer = producer(&cluster).await;
    let bodies = send_bodies(&producer, topic, &cluster.broker_name(), Some(0), 1, "m", 5).await;

    let mut consumers = Vec::new();
    for (group, post) in [("paths_post_on", true), ("paths_post_off", false)] {
        let mut config = consumer_config(&cluster, group, &unique_instance(group));
        config.post_subscription_when_pull = post;
        let (listener, mut rx) = reporting_listener(group);
        let consumer = DefaultMQPushConsumer::new(config);
        consumer
            .subscribe(topic, "TagA || TagB")
            .await
            .expect("subscribe");
        consumer.register_message_listener(listener);
        consumer.start().await.expect("consumer starts");
        let mut seen = Vec::new();
        collect_bodies(&mut rx, &mut seen, &bodies).await;
        consumers.push(consumer);
    }

    for p in pulls(&tap, "paths_post_on", topic) {
        assert_eq!(p.field("subscription"), Some("TagA || TagB"), "{p:?}");
        assert_ne!(p.int("sysFlag") & FLAG_SUBSCRIPTION, 0, "{p:?}");
    }
    let off = pulls(&tap, "paths_post_off", topic);
    assert!(!off.is_empty());
    for p in off {
        assert_eq!(p.field("subscription"), None, "{p:?}");
        assert_eq!(p.int("sysFlag") & FLAG_SUBSCRIPTION, 0, "{p:?}");
    }
    for consumer in consumers {
        consumer.shutdown().await;
    }
    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_interval_spaces_the_pulls_that_found_messages() {
    let (cluster, tap) = relayed_cluster(|_| {}).await;
    let topic = "PathsInterval";
    let group = "paths_interval";
    cluster.create_topic(topic, 1).await;
    let producer = producer(&cluster).await;
    let bodies = send_bodies(&producer, topic, &cluster.broker_name(), Some(0), 1, "m", 4).await;
    cluster.wait_dispatched().await;

    let interval = Duration::from_millis(1200);
    let mut config = consumer_config(&cluster, group, &unique_instance(group));
    config.pull_interval = interval;
    config.pull_batch_size = 1;
    let (listener, mut rx) = reporting_listener(group);
    let consumer = start_consumer(config, topic, listener).await;
    let mut seen = Vec::new();
    collect_bodies(&mut rx, &mut seen, &bodies).await;

    // Each pull that found a message is followed by the next pull no sooner than the interval.
    let all = await_pulls(&tap, group, topic, 4).await;
    let mut spaced = 0;
    for pair in all.windows(2) {
        let response = tap
            .response_to(&pair[0])
            .expect("answered before the next pull");
        if response.code == i32::from(ResponseCode::Success) {
            let gap = pair[1].at.duration_since(response.at);
            assert!(
                gap >= interval,
                "pulled again {gap:?} after a found message"
            );
            spaced += 1;
        }
    }
    assert!(spaced >= 3, "only {spaced} pulls found a message");
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_pull_is_retried_after_the_exception_delay() {
    let (cluster, tap) = relayed_cluster(|_| {}).await;
    let topic = "PathsRefused";
    let group = "paths_refused";
    cluster.create_topic(topic, 1).await;
    let producer = producer(&cluster).await;
    let bodies = send_bodies(&producer, topic, &cluster.broker_name(), Some(0), 1, "m", 3).await;

    tap.refuse_topic(
        RequestCode::PullMessage,
        topic,
        2,
        ResponseCode::SystemError,
    );
    let mut config = consumer_config(&cluster, group, &unique_instance(group));
    // The default, which the common test config shortens.
    config.pull_time_delay_when_exception =
        PushConsumerConfig::new(group).pull_time_delay_when_exception;
    let delay = config.pull_time_delay_when_exception;
    assert_eq!(delay, Duration::from_millis(3000));
    let (listener, mut rx) = reporting_listener(group);
    let consumer = start_consumer(config, topic, listener).await;
    let mut seen = Vec::new();
    collect_bodies(&mut rx, &mut seen, &bodies).await;

    let all = await_pulls(&tap, group, topic, 3).await;
    for pair in all.windows(2).take(2) {
        let refused = tap.response_to(&pair[0]).expect("answered");
        assert_eq!(refused.code, i32::from(ResponseCode::SystemError));
        let gap = pair[1].at.duration_since(refused.at);
        assert!(gap >= delay, "a refused pull was retried after {gap:?}");
    }
    assert_eq!(tap.refusals_left(), 0);
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_without_subscription_waits_the_exception_delay() {
    let topic = "PathsNoSub";
    let missing_subscription = watch_warning("find the consumer's subscription failed", topic);
    let (cluster, tap) = relayed_cluster(|_| {}).await;
    let group = "paths_no_sub";
    cluster.create_topic(topic, 1).await;
    // The broker's consumer-ids-changed notice would start a rebalance; one landing after the
    // unsubscribe below drops the queue and the held pull's message with it.
    let mut quiet = SubscriptionGroupConfig::new(group);
    quiet.notify_consumer_ids_changed_enable = false;
    cluster.broker().context().subscription_groups.update(quiet);
    let producer = producer(&cluster).await;

    let mut config = consumer_config(&cluster, group, &unique_instance(group));
    config.pull_time_delay_when_exception = Duration::from_millis(2500);
    // No periodic rebalance or heartbeat in the window: the queue's pull request stays in place.
    config.client.rebalance_interval = Duration::from_secs(600);
    config.client.heartbeat_broker_interval = Duration::from_secs(600);
    let (listener, mut rx) = reporting_listener(group);
    let consumer = start_consumer(config, topic, listener).await;
    // The first pull is held by the broker until a message arrives.
    let before = await_pulls(&tap, group, topic, 1).await.len();

    consumer.unsubscribe(topic);
    let bodies = send_bodies(&producer, topic, &cluster.broker_name(), Some(0), 1, "m", 1).await;
    let mut seen = Vec::new();
    collect_bodies(&mut rx, &mut seen, &bodies).await;
    let found = pulls(&tap, group, topic)
        .into_iter()
        .filter_map(|p| tap.response_to(&p))
        .find(|r| r.code == i32::from(ResponseCode::Success))
        .expect("the held pull found the message");
    // Subscribe again only once the queue's next turn has met the missing subscription; the
    // consumer says so in a warning, the one sign of a pull it did not send.
    let missed = tokio::time::timeout(WAIT_DEADLINE, missing_subscription.notified()).await;
    assert!(missed.is_ok(), "no pull turn met the missing subscription");
    consumer
        .subscribe(topic, "*")
        .await
        .expect("subscribe again");

    let all = await_pulls(&tap, group, topic, before + 1).await;
    let next = &all[before];
    let gap = next.at.duration_since(found.at);
    assert!(
        gap >= Duration::from_millis(2500),
        "pulled again after {gap:?} without subscription"
    );
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

/// Signals every warning of the client whose message is `text` about a queue of `topic`.
/// Installed as the process-wide subscriber, which a process has once: one test of this binary
/// uses it. It sees warnings only, and only those naming `topic`, so the tests running beside it
/// in this binary neither trigger it nor pay for it.
fn watch_warning(text: &'static str, topic: &'static str) -> Arc<tokio::sync::Notify> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::LevelFilter;
    use tracing_subscriber::layer::SubscriberExt;

    struct Watch {
        text: &'static str,
        topic: &'static str,
        seen: Arc<tokio::sync::Notify>,
    }
    #[derive(Default)]
    struct Fields {
        message: String,
        mq: String,
    }
    impl tracing::field::Visit for Fields {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            match field.name() {
                "message" => self.message = format!("{value:?}"),
                "mq" => self.mq = format!("{value:?}"),
                _ => {}
            }
        }
    }
    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Watch {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            if *event.metadata().level() != tracing::Level::WARN {
                return;
            }
            let mut fields = Fields::default();
            event.record(&mut fields);
            if fields.message == self.text && fields.mq.contains(self.topic) {
                self.seen.notify_one();
            }
        }
    }
    let seen = Arc::new(tokio::sync::Notify::new());
    let layer = Watch {
        text,
        topic,
        seen: seen.clone(),
    };
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(layer.with_filter(LevelFilter::WARN)),
    )
    .expect("no other subscriber in this test binary");
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consumer_pulls_from_the_node_the_broker_suggests() {
    let cluster = Cluster::start_with(|c| c.slave_read_enable = true).await;
    let topic = "PathsSlave";
    let group = "paths_slave";
    cluster.create_topic(topic, 1).await;
    // The group reads from broker id 1 (the slave) whenever the master may suggest it.
    let mut group_config = cluster
        .broker()
        .context()
        .subscription_groups
        .find_or_create(group)
        .expect("auto-created group");
    group_config.broker_id = 1;
    cluster
        .broker()
        .context()
        .subscription_groups
        .update(group_config);

    let slave_dir = tempfile::tempdir().expect("tempdir");
    let slave = cluster
        .start_slave(slave_dir.path(), |c| c.broker_ip1 = Some(relay_ip()))
        .await;
    let bound = slave.local_addr();
    let tap = Wiretap::start(SocketAddr::new(relay_ip(), bound.port()), bound).await;
    let producer = producer(&cluster).await;
    let bodies = send_bodies(
        &producer,
        topic,
        &cluster.broker_name(),
        Some(0),
        1,
        "m",
        20,
    )
    .await;

    let mut config = consumer_config(&cluster, group, &unique_instance(group));
    config.pull_batch_size = 4;
    let (listener, mut rx) = reporting_listener(group);
    let consumer = start_consumer(config, topic, listener).await;
    let mut seen = Vec::new();
    collect_bodies(&mut rx, &mut seen, &bodies).await;

    // The first pull goes to the master, which names the slave; later ones find their
    // messages there.
    let on_slave = await_pulls(&tap, group, topic, 1).await;
    let found_on_slave = on_slave
        .iter()
        .filter_map(|p| tap.response_to(p))
        .filter(|r| r.code == i32::from(ResponseCode::Success))
        .count();
    assert!(found_on_slave >= 1, "no pull found messages on the slave");
    consumer.shutdown().await;
    producer.shutdown().await;
    slave.shutdown().await.expect("slave shuts down");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_from_timestamp_defaults_to_half_an_hour_before_start() {
    let (cluster, tap) = relayed_cluster(|_| {}).await;
    let topic = "PathsTimestamp";
    let group = "paths_timestamp";
    cluster.create_topic(topic, 1).await;
    let producer = producer(&cluster).await;
    let bodies = send_bodies(&producer, topic, &cluster.broker_name(), Some(0), 1, "m", 3).await;

    // A broker answers QUERY_NOT_FOUND for a group without offset once the queue's first
    // message has left memory (while it is still cached it answers 0, and the consumer starts
    // there without searching); the relay gives that answer.
    tap.refuse_topic(
        RequestCode::QueryConsumerOffset,
        topic,
        1,
        ResponseCode::QueryNotFound,
    );
    let half_hour_ms = 30 * 60 * 1000;
    let earliest = now_millis() - half_hour_ms;
    let mut config = consumer_config(&cluster, group, &unique_instance(group));
    config.consume_from_where = ConsumeFromWhere::ConsumeFromTimestamp;
    assert_eq!(config.consume_timestamp, None);
    let (listener, mut rx) = reporting_listener(group);
    let consumer = start_consumer(config, topic, listener).await;
    let latest = now_millis() - half_hour_ms;
    // Every message is younger than half an hour, so the group starts at the first one.
    let mut seen = Vec::new();
    collect_bodies(&mut rx, &mut seen, &bodies).await;

    let searches: Vec<Seen> = tap
        .requests(RequestCode::SearchOffsetByTimestamp)
        .into_iter()
        .filter(|s| s.field("topic") == Some(topic))
        .collect();
    assert_eq!(searches.len(), 1, "{searches:?}");
    let asked = searches[0].int("timestamp");
    // Whole seconds, as Java's yyyyMMddHHmmss form of the default keeps it.
    assert!(
        (earliest - 1000..=latest).contains(&asked),
        "searched {asked}, expected between {earliest} and {latest}"
    );
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_cannot_be_sent_back_is_consumed_again_locally_after_5_s() {
    let (cluster, tap) = relayed_cluster(|_| {}).await;
    let topic = "PathsLocalRetry";
    let group = "paths_local_retry";
    cluster.create_topic(topic, 1).await;
    let producer = producer(&cluster).await;
    let bodies = send_bodies(&producer, topic, &cluster.broker_name(), Some(0), 1, "m", 1).await;

    // Neither CONSUMER_SEND_MSG_BACK nor the fallback send to the retry topic gets through.
    tap.refuse(
        RequestCode::ConsumerSendMsgBack,
        100,
        ResponseCode::SystemError,
    );
    tap.refuse(RequestCode::SendMessage, 100, ResponseCode::SystemError);
    tap.refuse(RequestCode::SendMessageV2, 100, ResponseCode::SystemError);
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let (listener, mut rx) = reporting_listener_with(group, None, move |_| {
        if counted.fetch_add(1, Ordering::SeqCst) == 0 {
            ConsumeConcurrentlyStatus::ReconsumeLater
        } else {
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    });
    let config = consumer_config(&cluster, group, &unique_instance(group));
    let consumer = start_consumer(config, topic, listener).await;

    let mut seen = Vec::new();
    collect_bodies(&mut rx, &mut seen, &bodies).await;
    let first_returned = Instant::now();
    collect_until(&mut rx, &mut seen, |s| s.len() >= 2).await;
    let again = Instant::now();
    assert!(again.duration_since(first_returned) >= Duration::from_millis(5000));
    assert_eq!(seen[1].body, seen[0].body);
    assert_eq!(
        seen[1].topic, topic,
        "consumed from the original queue, not a retry topic"
    );
    assert_eq!(seen[1].queue_offset, seen[0].queue_offset);
    assert_eq!(seen[1].reconsume_times, seen[0].reconsume_times + 1);
    assert!(!tap.requests(RequestCode::ConsumerSendMsgBack).is_empty());
    // Consumed at last: the offset moves past it.
    cluster.wait_committed(group, topic, 0, 1).await;
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_stuck_in_the_listener_is_swept_back_and_redelivered() {
    let (cluster, tap) =
        relayed_cluster(|c| c.message_delay_level = FAST_DELAY_LEVELS.to_owned()).await;
    let topic = "PathsSweep";
    let group = "paths_sweep";
    cluster.create_topic(topic, 1).await;
    let producer = producer(&cluster).await;
    let bodies = send_bodies(&producer, topic, &cluster.broker_name(), Some(0), 1, "m", 1).await;

    // The first call never returns before the sweep; later calls return at once.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let listener = MessageListener::Concurrently(Arc::new(HoldFirst {
        calls: AtomicUsize::new(0),
        gate: Arc::clone(&gate),
        tx,
    }));
    let config = consume_config_with_timeout(&cluster, group);
    let consumer = start_consumer(config, topic, listener).await;

    let (_, first_topic, first_times, body) = recv(&mut rx).await;
    assert_eq!(first_topic, topic);
    assert_eq!(first_times, 0);
    assert_eq!(body, bodies[0].as_bytes().to_vec());
    let (call, _, times, again) = recv(&mut rx).await;
    assert_eq!(call, 1);
    assert_eq!(again, body);
    assert_eq!(times, 1, "redelivered through the retry topic");
    let back = tap.requests(RequestCode::ConsumerSendMsgBack);
    assert_eq!(back.len(), 1, "{back:?}");
    assert_eq!(back[0].int("delayLevel"), 3);
    gate.add_permits(1);
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

/// A listener whose first call waits for the gate; every call reports (call index, topic,
/// reconsume times, body).
struct HoldFirst {
    calls: AtomicUsize,
    gate: Arc<tokio::sync::Semaphore>,
    tx: tokio::sync::mpsc::UnboundedSender<(usize, String, i32, Vec<u8>)>,
}

impl MessageListenerConcurrently for HoldFirst {
    fn consume_message<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        _ctx: &'a mut ConsumeConcurrentlyContext,
    ) -> BoxFuture<'a, ConsumeConcurrentlyStatus> {
        Box::pin(async move {
            let call = self.calls.fetch_add(1, Ordering::SeqCst);
            for m in msgs {
                let _ = self
                    .tx
                    .send((call, m.topic.clone(), m.reconsume_times, m.body.to_vec()));
            }
            if call == 0 {
                let _ = self.gate.acquire().await;
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        })
    }
}

fn consume_config_with_timeout(cluster: &Cluster, group: &str) -> PushConsumerConfig {
    let mut config = consumer_config(cluster, group, &unique_instance(group));
    config.consume_timeout = Duration::from_secs(2);
    config
}

async fn recv<T>(rx: &mut tokio::sync::mpsc::UnboundedReceiver<T>) -> T {
    tokio::time::timeout(WAIT_DEADLINE, rx.recv())
        .await
        .expect("delivered before the deadline")
        .expect("listener alive")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_group_consumes_several_topics() {
    let cluster = Cluster::start().await;
    let group = "paths_several";
    let (a, b) = ("PathsSeveralA", "PathsSeveralB");
    cluster.create_topic(a, 2).await;
    cluster.create_topic(b, 3).await;
    let producer = producer(&cluster).await;
    let mut bodies = send_bodies(&producer, a, &cluster.broker_name(), None, 2, "a", 10).await;
    bodies.extend(send_bodies(&producer, b, &cluster.broker_name(), None, 3, "b", 12).await);

    let config = consumer_config(&cluster, group, &unique_instance(group));
    let (listener, mut rx) = reporting_listener(group);
    let consumer = DefaultMQPushConsumer::new(config);
    consumer.subscribe(a, "*").await.expect("subscribe a");
    consumer.subscribe(b, "TagA").await.expect("subscribe b");
    consumer.register_message_listener(listener);
    consumer.start().await.expect("consumer starts");
    let mut seen = Vec::new();
    collect_bodies(&mut rx, &mut seen, &bodies).await;
    assert!(seen.iter().all(|d| d.topic == a || d.topic == b));
    for q in 0..2 {
        cluster.wait_committed(group, a, q, 5).await;
    }
    for q in 0..3 {
        cluster.wait_committed(group, b, q, 4).await;
    }
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

#[test]
fn a_new_consumer_has_java_s_defaults() {
    let config = PushConsumerConfig::new("defaults");
    assert_eq!(config.message_model, MessageModel::Clustering);
    assert_eq!(
        config.consume_from_where,
        ConsumeFromWhere::ConsumeFromLastOffset
    );
    assert_eq!(config.client.rebalance_interval, Duration::from_secs(20));
    assert_eq!(
        config.pull_time_delay_when_exception,
        Duration::from_millis(3000)
    );
    assert_eq!(config.consume_timeout, Duration::from_secs(15 * 60));
    assert_eq!(config.pull_interval, Duration::ZERO);
    assert!(!config.post_subscription_when_pull);
    assert_eq!(config.consume_timestamp, None);
    assert_eq!(config.pull_batch_size, 32);
    assert_eq!(config.consume_message_batch_max_size, 1);
    assert_eq!(config.max_reconsume_times, -1);
}
