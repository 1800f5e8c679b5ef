//! Push consumer against a real in-process name server and broker: consumption from each start
//! point, broadcasting with its local offset file, retry and dead-lettering, flow control,
//! OFFSET_ILLEGAL recovery, lifecycle rules and offset persistence at shutdown.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use comet_client::ClientError;
use comet_client::consumer::offset_store::{OffsetStore, ReadOffsetType};
use comet_client::consumer::push::{
    ConsumeMessageContext, ConsumeMessageHook, DefaultMQPushConsumer, FilterMessageContext,
    FilterMessageHook,
};
use comet_client::consumer::{
    ConsumeConcurrentlyStatus, ConsumeFromWhere, MessageModel, MessageQueue,
};
use comet_client::instance::ServiceState;
use comet_client::message::Message;
use comet_testkit::client::*;
use futures::future::BoxFuture;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clustering_consumer_gets_every_message_and_shutdown_persists_offsets() {
    let cluster = Cluster::start().await;
    let topic = "PushBasic";
    cluster.create_topic(topic, 4).await;
    let producer = producer(&cluster).await;
    let bodies = send_bodies(&producer, topic, &cluster.broker_name(), None, 4, "m", 40).await;

    let (listener, mut rx) = reporting_listener("c1");
    let group = "push_basic_group";
    let consumer = start_consumer(
        consumer_config(&cluster, group, &unique_instance("basic")),
        topic,
        listener,
    )
    .await;
    assert_eq!(consumer.service_state(), ServiceState::Running);
    // Starting a running consumer is refused, as in Java.
    assert!(matches!(
        consumer.start().await,
        Err(ClientError::NotStartable { .. })
    ));

    let mut seen = Vec::new();
    collect_bodies(&mut rx, &mut seen, &bodies).await;
    let got: HashSet<&String> = seen.iter().map(|d| &d.body).collect();
    assert_eq!(got.len(), 40);
    assert!(
        seen.iter()
            .all(|d| d.topic == topic && d.reconsume_times == 0)
    );

    // Wait until the in-memory offsets have caught up, then shut down: offsets reach the broker.
    let store = consumer.offset_store().expect("started");
    assert!(
        wait_until(|| {
            let table = store.clone_offset_table(topic);
            async move { table.len() == 4 && table.values().all(|o| *o == 10) }
        })
        .await,
        "in-memory offsets reach the end of every queue"
    );
    consumer.shutdown().await;
    assert_eq!(consumer.service_state(), ServiceState::ShutdownAlready);
    // Shutdown persists the offsets with oneway updates: the broker applies them shortly after.
    for q in 0..4 {
        cluster.wait_committed(group, topic, q, 10).await;
    }
    // A shut down consumer cannot be restarted.
    assert!(matches!(
        consumer.start().await,
        Err(ClientError::NotStartable { .. })
    ));
    producer.shutdown().await;
    cluster.shutdown().await;
}

/// An offset store whose persistent side never has an offset, so every new queue starts where
/// ConsumeFromWhere says (the broker itself answers QUERY_CONSUMER_OFFSET of an unknown group with
/// 0 instead of QUERY_NOT_FOUND while a queue's first message is still present, which would hide
/// the difference).
#[derive(Default)]
struct NothingStored {
    table: parking_lot::Mutex<HashMap<MessageQueue, i64>>,
}

impl OffsetStore for NothingStored {
    fn load(&self) -> Result<(), ClientError> {
        Ok(())
    }
    fn update_offset(&self, mq: &MessageQueue, offset: i64, _increase_only: bool) {
        self.table.lock().insert(mq.clone(), offset);
    }
    fn read_offset<'a>(
        &'a self,
        mq: &'a MessageQueue,
        read_type: ReadOffsetType,
    ) -> BoxFuture<'a, Result<Option<i64>, ClientError>> {
        let memory = self.table.lock().get(mq).copied();
        Box::pin(async move {
            Ok(match read_type {
                ReadOffsetType::ReadFromStore => None,
                _ => memory,
            })
        })
    }
    fn persist_all<'a>(&'a self, _mqs: &'a HashSet<MessageQueue>) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
    fn persist<'a>(&'a self, _mq: &'a MessageQueue) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
    fn remove_offset(&self, mq: &MessageQueue) {
        self.table.lock().remove(mq);
    }
    fn clone_offset_table(&self, topic: &str) -> HashMap<MessageQueue, i64> {
        self.table
            .lock()
            .iter()
            .filter(|(mq, _)| mq.topic == topic)
            .map(|(mq, o)| (mq.clone(), *o))
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_from_first_last_and_timestamp() {
    let cluster = Cluster::start().await;
    let topic = "PushStartPoints";
    cluster.create_topic(topic, 2).await;
    let producer = producer(&cluster).await;
    let broker = cluster.broker_name();
    let old = send_bodies(&producer, topic, &broker, None, 2, "old", 10).await;
    // LAST_OFFSET and TIMESTAMP start from the ConsumeQueues: every old message must be in them
    // before a consumer computes its start, or an undispatched one would count as new.
    cluster.wait_dispatched().await;
    // A timestamp strictly after every old message and before every new one.
    let boundary = now_millis() + 1;
    while now_millis() <= boundary {
        tokio::task::yield_now().await;
    }

    let start = |group: &str, from: ConsumeFromWhere, timestamp: Option<i64>, fresh_store: bool| {
        let mut config = consumer_config(&cluster, group, &unique_instance(group));
        config.consume_from_where = from;
        config.consume_timestamp = timestamp;
        if fresh_store {
            config.offset_store = Some(Arc::new(NothingStored::default()));
        }
        let (listener, rx) = reporting_listener(group);
        (config, listener, rx)
    };
    let (cfg, l, mut first_rx) = start(
        "g_first",
        ConsumeFromWhere::ConsumeFromFirstOffset,
        None,
        false,
    );
    let first = start_consumer(cfg, topic, l).await;
    // A new group on a queue whose first message is still stored: the broker answers offset 0
    // (not QUERY_NOT_FOUND), so LAST_OFFSET starts at the beginning exactly as Java does.
    let (cfg, l, mut young_rx) = start(
        "g_last_young",
        ConsumeFromWhere::ConsumeFromLastOffset,
        None,
        false,
    );
    let young = start_consumer(cfg, topic, l).await;
    let (cfg, l, mut last_rx) = start(
        "g_last",
        ConsumeFromWhere::ConsumeFromLastOffset,
        None,
        true,
    );
    let last = start_consumer(cfg, topic, l).await;
    let (cfg, l, mut ts_rx) = start(
        "g_timestamp",
        ConsumeFromWhere::ConsumeFromTimestamp,
        Some(boundary),
        true,
    );
    let by_time = start_consumer(cfg, topic, l).await;

    // The new messages must be sent only after every consumer fixed its start offsets.
    for c in [&first, &young, &last, &by_time] {
        assert!(
            wait_until(|| {
                let n = c.owned_queues().iter().filter(|q| q.topic == topic).count();
                async move { n == 2 }
            })
            .await
        );
    }
    let new = send_bodies(&producer, topic, &broker, None, 2, "new", 6).await;

    let all: Vec<String> = old.iter().chain(new.iter()).cloned().collect();
    for rx in [&mut first_rx, &mut young_rx] {
        let mut seen = Vec::new();
        collect_bodies(rx, &mut seen, &all).await;
    }
    for rx in [&mut last_rx, &mut ts_rx] {
        let mut seen = Vec::new();
        collect_bodies(rx, &mut seen, &new).await;
        let got: HashSet<String> = seen.iter().map(|d| d.body.clone()).collect();
        assert!(
            got.iter().all(|b| b.starts_with("new-")),
            "only new messages, got {got:?}"
        );
    }
    // Nothing old arrives later either: the queues' offsets are past the new messages.
    for (c, rx) in [(&last, &mut last_rx), (&by_time, &mut ts_rx)] {
        assert!(
            wait_until(|| {
                let t = c.offset_store().expect("started").clone_offset_table(topic);
                async move { t.len() == 2 && t.values().all(|o| *o == 8) }
            })
            .await
        );
        assert!(rx.try_recv().is_err());
    }

    for c in [first, young, last, by_time] {
        c.shutdown().await;
    }
    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcasting_delivers_everything_to_every_member_and_writes_offsets_json() {
    let cluster = Cluster::start().await;
    let topic = "PushBroadcast";
    cluster.create_topic(topic, 3).await;
    let producer = producer(&cluster).await;
    let bodies = send_bodies(&producer, topic, &cluster.broker_name(), None, 3, "b", 30).await;
    let offsets_dir = tempfile::tempdir().expect("tempdir");

    let mut members = Vec::new();
    for name in ["bc1", "bc2"] {
        let mut config = consumer_config(&cluster, "broadcast_group", &unique_instance(name));
        config.message_model = MessageModel::Broadcasting;
        config.local_offset_store_dir = Some(offsets_dir.path().to_path_buf());
        let (listener, rx) = reporting_listener(name);
        members.push((start_consumer(config, topic, listener).await, rx));
    }
    for (consumer, rx) in &mut members {
        let mut seen = Vec::new();
        collect_bodies(rx, &mut seen, &bodies).await;
        // Broadcasting has no retry topic subscription.
        assert_eq!(consumer.owned_queues().len(), 3);
        assert!(consumer.owned_queues().iter().all(|q| q.topic == topic));
    }

    for (consumer, _) in &members {
        let client_id = consumer.client_id().expect("started");
        let store = consumer.offset_store().expect("started");
        assert!(
            wait_until(|| {
                let table = store.clone_offset_table(topic);
                async move { table.len() == 3 && table.values().all(|o| *o == 10) }
            })
            .await
        );
        // Persist twice: the second write keeps the first as offsets.json.bak.
        consumer.persist_consumer_offset().await;
        consumer.persist_consumer_offset().await;
        let path = offsets_dir
            .path()
            .join(&client_id)
            .join("broadcast_group")
            .join("offsets.json");
        let content = std::fs::read(&path).expect("offsets.json written");
        let bak = std::fs::read(path.with_extension("json.bak")).expect("offsets.json.bak written");
        assert_eq!(content, bak);
        let parsed: serde_json::Value = serde_json::from_slice(
            &comet_protocol::body::normalize(&content)
                .expect("fastjson")
                .into_bytes(),
        )
        .expect("json");
        let table = parsed["offsetTable"].as_object().expect("offsetTable");
        assert_eq!(table.len(), 3);
        assert!(table.values().all(|v| v.as_i64() == Some(10)), "{table:?}");
    }
    for (consumer, _) in members {
        consumer.shutdown().await;
    }
    // Nothing was committed on the broker for a broadcasting group.
    assert_eq!(cluster.committed_offset("broadcast_group", topic, 0), -1);
    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconsume_later_is_retried_then_dead_lettered() {
    let cluster =
        Cluster::start_with(|c| c.message_delay_level = FAST_DELAY_LEVELS.to_owned()).await;
    let topic = "PushRetry";
    cluster.create_topic(topic, 1).await;
    let producer = producer(&cluster).await;
    let group = "push_retry_group";
    let max_reconsume = 2;

    let mut config = consumer_config(&cluster, group, &unique_instance("retry"));
    config.max_reconsume_times = max_reconsume;
    // Fail "bad", accept everything else.
    let (listener, mut rx) = reporting_listener_with("r", None, |msg| {
        if msg.body.as_ref() == b"bad" {
            ConsumeConcurrentlyStatus::ReconsumeLater
        } else {
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    });
    let consumer = start_consumer(config, topic, listener).await;
    let mq = MessageQueue::new(topic, cluster.broker_name(), 0);
    producer
        .send_to_queue(Message::new(topic, b"bad".to_vec()), &mq)
        .await
        .expect("send");
    producer
        .send_to_queue(Message::new(topic, b"good".to_vec()), &mq)
        .await
        .expect("send");

    let mut seen = Vec::new();
    collect_until(&mut rx, &mut seen, |s| {
        s.iter().filter(|d| d.body == "bad").count() == 3 && s.iter().any(|d| d.body == "good")
    })
    .await;
    let bad: Vec<_> = seen.iter().filter(|d| d.body == "bad").collect();
    // First delivery from the topic, then two redeliveries from the retry topic, each with the
    // original topic restored and the reconsume count raised.
    assert_eq!(
        bad.iter().map(|d| d.reconsume_times).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    assert!(bad.iter().all(|d| d.topic == topic));
    assert_eq!(bad[0].queue_id, 0);

    let dlq = format!("%DLQ%{group}");
    assert!(
        wait_until(|| {
            let n = cluster.max_offset(&dlq, 0);
            async move { n == 1 }
        })
        .await,
        "the message reached the DLQ"
    );
    // The topic's offset moved past both messages despite the failure.
    assert!(
        wait_until(|| {
            let store = consumer.offset_store().expect("started");
            let offset = store.clone_offset_table(topic).get(&mq).copied();
            async move { offset == Some(2) }
        })
        .await
    );
    // No fourth delivery.
    assert!(rx.try_recv().map(|d| d.body != "bad").unwrap_or(true));
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flow_control_engages_at_count_span_and_size_thresholds() {
    let cluster = Cluster::start().await;
    let topic = "PushFlow";
    cluster.create_topic(topic, 1).await;
    let producer = producer(&cluster).await;
    let broker = cluster.broker_name();
    let bodies = send_bodies(&producer, topic, &broker, Some(0), 1, "f", 10).await;
    // The count phase expects the first pull to return a full batch of 2.
    cluster.wait_dispatched().await;

    // Count: more than one cached message stops pulling while the listener is held.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let mut config = consumer_config(&cluster, "flow_count", &unique_instance("flow"));
    config.pull_threshold_for_queue = 1;
    config.pull_batch_size = 2;
    let (listener, mut rx) = reporting_listener_with("fc", Some(Arc::clone(&gate)), |_| {
        ConsumeConcurrentlyStatus::ConsumeSuccess
    });
    let counted = start_consumer(config, topic, listener).await;
    assert!(
        wait_until(|| {
            let t = counted.flow_control_times();
            async move { t.cached_count > 0 }
        })
        .await,
        "count flow control engaged"
    );
    let pq = counted
        .process_queue(&MessageQueue::new(topic, &broker, 0))
        .expect("owned");
    assert_eq!(
        pq.msg_count(),
        2,
        "pulling stopped right above the threshold"
    );
    assert_eq!(counted.flow_control_times().max_span, 0);
    gate.add_permits(1000);
    let mut seen = Vec::new();
    collect_bodies(&mut rx, &mut seen, &bodies).await;
    counted.shutdown().await;

    // Span: cached offsets spread over more than one stop pulling.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let mut config = consumer_config(&cluster, "flow_span", &unique_instance("flow"));
    config.consume_concurrently_max_span = 1;
    config.pull_batch_size = 3;
    let (listener, mut rx) = reporting_listener_with("fs", Some(Arc::clone(&gate)), |_| {
        ConsumeConcurrentlyStatus::ConsumeSuccess
    });
    let spanned = start_consumer(config, topic, listener).await;
    assert!(
        wait_until(|| {
            let t = spanned.flow_control_times();
            async move { t.max_span > 0 }
        })
        .await,
        "span flow control engaged"
    );
    assert_eq!(spanned.flow_control_times().cached_count, 0);
    gate.add_permits(1000);
    let mut seen = Vec::new();
    collect_bodies(&mut rx, &mut seen, &bodies).await;
    spanned.shutdown().await;

    // Size: the smallest threshold Java accepts, 1 MiB, engages once two whole MiB are cached
    // (the cached size is compared in whole MiB).
    let big_topic = "PushFlowSize";
    cluster.create_topic(big_topic, 1).await;
    let mut big = Vec::new();
    for i in 0..5u8 {
        // Incompressible bodies, so the cached size is what was sent.
        let mut state = 0x9E37_79B9_u32 ^ u32::from(i);
        let body: Vec<u8> = (0..450 * 1024)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state.to_le_bytes()[0]
            })
            .collect();
        producer
            .send_to_queue(
                Message::new(big_topic, body),
                &MessageQueue::new(big_topic, &broker, 0),
            )
            .await
            .expect("send big");
        big.push(i);
    }
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let mut config = consumer_config(&cluster, "flow_size", &unique_instance("flow"));
    config.pull_threshold_size_for_queue = 1;
    let (listener, mut rx) = reporting_listener_with("fz", Some(Arc::clone(&gate)), |_| {
        ConsumeConcurrentlyStatus::ConsumeSuccess
    });
    let sized = start_consumer(config, big_topic, listener).await;
    assert!(
        wait_until(|| {
            let t = sized.flow_control_times();
            async move { t.cached_size > 0 }
        })
        .await,
        "size flow control engaged"
    );
    let pq = sized
        .process_queue(&MessageQueue::new(big_topic, &broker, 0))
        .expect("owned");
    assert!(pq.msg_size() >= 2 * 1024 * 1024);
    gate.add_permits(1000);
    let mut seen = Vec::new();
    collect_until(&mut rx, &mut seen, |s| s.len() >= 5).await;
    sized.shutdown().await;

    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_beyond_the_log_recovers_through_offset_illegal() {
    let cluster = Cluster::start().await;
    let topic = "PushIllegal";
    cluster.create_topic(topic, 1).await;
    let producer = producer(&cluster).await;
    let broker = cluster.broker_name();
    let group = "push_illegal_group";
    let _old = send_bodies(&producer, topic, &broker, Some(0), 1, "old", 5).await;
    // The corrected offset is the queue's max when the pull is answered: all 5 dispatched.
    cluster.wait_dispatched().await;
    // The group's stored offset points far past the end of the queue.
    cluster
        .broker()
        .context()
        .consumer_offsets
        .commit_offset("test", group, topic, 0, 1000);

    let (listener, mut rx) = reporting_listener("ill");
    let consumer = start_consumer(
        consumer_config(&cluster, group, &unique_instance("illegal")),
        topic,
        listener,
    )
    .await;
    let mq = MessageQueue::new(topic, &broker, 0);
    // OFFSET_ILLEGAL drops the queue, fixes the offset to the queue's max (5) after 10 s, and the
    // next rebalance restarts it from there.
    let store = consumer.offset_store().expect("started");
    assert!(
        wait_until(|| {
            let restarted = consumer
                .process_queue(&mq)
                .is_some_and(|pq| !pq.is_dropped());
            let committed = cluster.committed_offset(group, topic, 0);
            async move { restarted && committed == 5 }
        })
        .await,
        "queue restarted from the corrected offset"
    );
    let new = send_bodies(&producer, topic, &broker, Some(0), 1, "new", 3).await;
    let mut seen = Vec::new();
    collect_bodies(&mut rx, &mut seen, &new).await;
    assert!(
        seen.iter().all(|d| d.body.starts_with("new-")),
        "messages before the corrected offset are not redelivered: {:?}",
        seen.iter().map(|d| &d.body).collect::<Vec<_>>()
    );
    assert!(
        wait_until(|| {
            let o = store.clone_offset_table(topic).get(&mq).copied();
            async move { o == Some(8) }
        })
        .await
    );
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_group_in_one_instance_is_rejected() {
    let cluster = Cluster::start().await;
    let topic = "PushDup";
    cluster.create_topic(topic, 2).await;
    let instance = unique_instance("dup");
    let (listener, _rx) = reporting_listener("d1");
    let first = start_consumer(
        consumer_config(&cluster, "dup_group", &instance),
        topic,
        listener,
    )
    .await;

    let second = DefaultMQPushConsumer::new(consumer_config(&cluster, "dup_group", &instance));
    second.subscribe(topic, "*").await.expect("subscribe");
    let (listener, _rx2) = reporting_listener("d2");
    second.register_message_listener(listener);
    let err = second
        .start()
        .await
        .expect_err("same group, same client id");
    assert!(
        matches!(err, ClientError::DuplicateGroup(ref g) if g == "dup_group"),
        "{err}"
    );
    // A failed registration returns the consumer to CREATE_JUST.
    assert_eq!(second.service_state(), ServiceState::CreateJust);
    assert_eq!(first.service_state(), ServiceState::Running);

    // Without a listener, the configuration check fails the start, which stays START_FAILED.
    let no_listener = DefaultMQPushConsumer::new(consumer_config(&cluster, "other", &instance));
    assert!(no_listener.start().await.is_err());
    assert_eq!(no_listener.service_state(), ServiceState::StartFailed);

    first.shutdown().await;
    cluster.shutdown().await;
}

#[derive(Default)]
struct CountingHook {
    before: AtomicUsize,
    after_ok: AtomicUsize,
}

impl ConsumeMessageHook for CountingHook {
    fn hook_name(&self) -> &str {
        "counting"
    }
    fn consume_message_before(&self, _ctx: &mut ConsumeMessageContext) {
        self.before.fetch_add(1, Ordering::SeqCst);
    }
    fn consume_message_after(&self, ctx: &mut ConsumeMessageContext) {
        if ctx.success && ctx.status == "CONSUME_SUCCESS" {
            self.after_ok.fetch_add(1, Ordering::SeqCst);
        }
    }
}

struct DropBody(&'static str);

impl FilterMessageHook for DropBody {
    fn hook_name(&self) -> &str {
        "drop-body"
    }
    fn filter_message(&self, ctx: &mut FilterMessageContext<'_>) {
        ctx.msg_list
            .retain(|m| m.body.as_ref() != self.0.as_bytes());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_subscription_filters_on_the_client_too() {
    let cluster = Cluster::start().await;
    let topic = "PushTags";
    cluster.create_topic(topic, 1).await;
    let producer = producer(&cluster).await;
    let mq = MessageQueue::new(topic, cluster.broker_name(), 0);
    for (i, tag) in ["TagA", "TagB", "TagC", "TagA"].iter().enumerate() {
        producer
            .send_to_queue(
                Message::new(topic, format!("{tag}-{i}").into_bytes()).with_tags(*tag),
                &mq,
            )
            .await
            .expect("send");
    }
    let consumer = DefaultMQPushConsumer::new(consumer_config(
        &cluster,
        "tag_group",
        &unique_instance("tags"),
    ));
    consumer
        .subscribe(topic, "TagA || TagC")
        .await
        .expect("subscribe");
    let hook = Arc::new(CountingHook::default());
    consumer.register_consume_message_hook(Arc::clone(&hook) as Arc<dyn ConsumeMessageHook>);
    consumer.register_filter_message_hook(Arc::new(DropBody("TagC-2")));
    let (listener, mut rx) = reporting_listener("t");
    consumer.register_message_listener(listener);
    consumer.start().await.expect("start");
    let mut seen = Vec::new();
    collect_until(&mut rx, &mut seen, |s| s.len() >= 2).await;
    let mut bodies: Vec<String> = seen.iter().map(|d| d.body.clone()).collect();
    bodies.sort();
    // TagB is filtered by tag, TagC-2 by the filter hook.
    assert_eq!(bodies, vec!["TagA-0", "TagA-3"]);
    assert!(
        wait_until(|| {
            let (b, a) = (
                hook.before.load(Ordering::SeqCst),
                hook.after_ok.load(Ordering::SeqCst),
            );
            async move { b == 2 && a == 2 }
        })
        .await,
        "the consume hook saw both batches before and after"
    );
    // The offset still moves past the filtered message.
    assert!(
        wait_until(|| {
            let o = consumer
                .offset_store()
                .and_then(|s| s.clone_offset_table(topic).get(&mq).copied());
            async move { o == Some(4) }
        })
        .await
    );
    let stats = consumer.stats().consume_status(topic);
    assert_eq!(stats.consume_failed_msgs, 0);
    let info = consumer.running_info();
    assert_eq!(info.property("consumerGroup"), Some("tag_group"));
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_stops_pulling_until_resume() {
    let cluster = Cluster::start().await;
    let topic = "PushSuspend";
    cluster.create_topic(topic, 1).await;
    let producer = producer(&cluster).await;
    let broker = cluster.broker_name();
    let mq = MessageQueue::new(topic, &broker, 0);
    let (listener, mut rx) = reporting_listener("s");
    let consumer = start_consumer(
        consumer_config(&cluster, "suspend_group", &unique_instance("suspend")),
        topic,
        listener,
    )
    .await;
    let first = send_bodies(&producer, topic, &broker, Some(0), 1, "before", 2).await;
    let mut seen = Vec::new();
    collect_bodies(&mut rx, &mut seen, &first).await;

    consumer.suspend();
    assert!(consumer.is_paused());
    // At suspension a long poll may be in flight, or the loop may not have issued its next pull
    // yet (a slow box can deliver the batch before the pull task runs again) and so finds the
    // pause first. The probe completes a pull in flight; either way, once the loop has turned
    // after the probe was sent, every turn finds the consumer paused and only re-queues itself
    // (stamping the pull time), so no pull is in flight any more.
    let pq = consumer.process_queue(&mq).expect("owned");
    let turns_after = |stamp: i64, turns: usize| {
        let pq = Arc::clone(&pq);
        async move {
            let mut last = stamp;
            for _ in 0..turns {
                assert!(
                    wait_until(|| {
                        let now = pq.last_pull_timestamp();
                        async move { now > last }
                    })
                    .await,
                    "the pull loop keeps turning while paused"
                );
                last = pq.last_pull_timestamp();
            }
            last
        }
    };
    let before_probe = pq.last_pull_timestamp();
    let probe = send_bodies(&producer, topic, &broker, Some(0), 1, "probe", 1).await;
    let stamp = turns_after(before_probe, 2).await;
    // A probe taken by the in-flight pull leaves the cache once delivered.
    assert!(
        wait_until(|| {
            let cached = pq.msg_count();
            async move { cached == 0 }
        })
        .await,
        "the probe taken by the in-flight pull is consumed"
    );
    let mut during_pause = Vec::new();
    while let Ok(d) = rx.try_recv() {
        during_pause.push(d.body);
    }
    let later = send_bodies(&producer, topic, &broker, Some(0), 1, "after", 2).await;
    turns_after(stamp, 2).await;
    assert_eq!(pq.msg_count(), 0, "nothing is pulled while suspended");
    while let Ok(d) = rx.try_recv() {
        assert!(
            !d.body.starts_with("after"),
            "{} was pulled while suspended",
            d.body
        );
        during_pause.push(d.body);
    }

    consumer.resume();
    // The probe, unless the pull in flight at suspension took it, comes after the resume.
    let mut expected = later;
    expected.extend(probe.into_iter().filter(|p| !during_pause.contains(p)));
    let mut after_seen = Vec::new();
    collect_bodies(&mut rx, &mut after_seen, &expected).await;
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_reset_offset_makes_the_consumer_start_over() {
    let cluster = Cluster::start().await;
    let topic = "PushReset";
    cluster.create_topic(topic, 2).await;
    let producer = producer(&cluster).await;
    let broker = cluster.broker_name();
    let group = "push_reset_group";
    let bodies = send_bodies(&producer, topic, &broker, None, 2, "r", 8).await;
    let (listener, mut rx) = reporting_listener("reset");
    let consumer = start_consumer(
        consumer_config(&cluster, group, &unique_instance("reset")),
        topic,
        listener,
    )
    .await;
    let mut seen = Vec::new();
    collect_bodies(&mut rx, &mut seen, &bodies).await;
    let store = consumer.offset_store().expect("started");
    assert!(
        wait_until(|| {
            let t = store.clone_offset_table(topic);
            async move { t.len() == 2 && t.values().all(|o| *o == 4) }
        })
        .await
    );

    // INVOKE_BROKER_TO_RESET_OFFSET: the broker stores offset 0 and tells the consumer
    // (RESET_CONSUMER_CLIENT_OFFSET), which restarts its queues from there.
    let request = comet_protocol::headers::request_with_header(
        comet_protocol::code::RequestCode::InvokeBrokerToResetOffset,
        &comet_protocol::headers::ResetOffsetRequestHeader {
            group: group.to_owned(),
            topic: topic.to_owned(),
            queue_id: None,
            offset: Some(0),
            timestamp: 0,
            is_force: true,
            rpc: Default::default(),
        },
    );
    let response = cluster
        .client
        .invoke(&cluster.broker_addr(), request, RPC_TIMEOUT)
        .await
        .expect("broker answers");
    assert_eq!(response.code, 0, "{:?}", response.remark);
    let mut again = Vec::new();
    collect_bodies(&mut rx, &mut again, &bodies).await;
    assert!(
        wait_until(|| {
            let t = store.clone_offset_table(topic);
            async move { t.len() == 2 && t.values().all(|o| *o == 4) }
        })
        .await
    );
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}
