//! DefaultLitePullConsumer against a real name server and broker: assign + seek (to the begin,
//! to an offset, by timestamp), subscribe mode receiving every message exactly once, and a
//! manual commit that survives a restart.

use std::collections::BTreeSet;
use std::time::Duration;

use comet_client::consumer::ConsumeFromWhere;
use comet_client::consumer::lite::{DefaultLitePullConsumer, LitePullConsumerConfig};
use comet_client::{Message, MessageExt, MessageQueue};
use comet_testkit::client::{Cluster, WAIT_DEADLINE, now_millis, wait_until};

const POLL: Duration = Duration::from_secs(5);

fn lite(env: &Cluster, group: &str, auto_commit: bool) -> DefaultLitePullConsumer {
    let mut config = LitePullConsumerConfig::new(group, env.default_client("lite"));
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    config.auto_commit = auto_commit;
    DefaultLitePullConsumer::new(config)
}

/// Polls until `n` messages arrived (or the deadline passes).
async fn poll_n(consumer: &DefaultLitePullConsumer, n: usize) -> Vec<MessageExt> {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT_DEADLINE;
    while got.len() < n && tokio::time::Instant::now() < deadline {
        got.extend(consumer.poll(POLL).await.expect("poll"));
    }
    got
}

/// The first message of the next batch.
async fn next_offset(consumer: &DefaultLitePullConsumer) -> i64 {
    poll_n(consumer, 1)
        .await
        .first()
        .map(|m| m.queue_offset)
        .expect("a message after seek")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assign_and_seek() {
    let env = Cluster::start().await;
    let topic = "LiteAssignTopic";
    env.create_topic_via_admin(topic, 2).await;
    let producer = env.producer("lite_assign_producer").await;
    let mq = MessageQueue::new(topic, producer_broker(&producer, topic).await, 0);
    for i in 0..5 {
        producer
            .send_to_queue(Message::new(topic, format!("a{i}").into_bytes()), &mq)
            .await
            .expect("sent");
    }
    // Make sure the second phase is stored strictly later than the first.
    let first_phase_end = now_millis();
    assert!(wait_until(|| async { now_millis() > first_phase_end + 1 }).await);
    let boundary = now_millis();
    for i in 5..10 {
        producer
            .send_to_queue(Message::new(topic, format!("a{i}").into_bytes()), &mq)
            .await
            .expect("sent");
    }

    let consumer = lite(&env, "lite_assign_group", true);
    consumer.assign(vec![mq.clone()]).await.expect("assigned");
    consumer.start().await.expect("starts");
    assert_eq!(consumer.assignment(), vec![mq.clone()]);

    let all = poll_n(&consumer, 10).await;
    let offsets: Vec<i64> = all.iter().map(|m| m.queue_offset).collect();
    assert_eq!(offsets, (0..10).collect::<Vec<_>>());

    consumer.seek_to_begin(&mq).await.expect("seek to begin");
    assert_eq!(next_offset(&consumer).await, 0);

    consumer.seek(&mq, 6).await.expect("seek");
    assert_eq!(next_offset(&consumer).await, 6);

    let by_time = consumer
        .offset_for_timestamp(&mq, boundary)
        .await
        .expect("search");
    assert_eq!(
        by_time, 5,
        "the first message stored at or after the boundary"
    );
    consumer.seek(&mq, by_time).await.expect("seek by time");
    let after = poll_n(&consumer, 1).await;
    assert_eq!(after[0].queue_offset, 5);
    assert!(after[0].store_timestamp >= boundary);

    consumer.seek_to_end(&mq).await.expect("seek to end");
    assert!(
        consumer
            .poll(Duration::from_millis(300))
            .await
            .expect("poll")
            .is_empty()
    );
    assert!(consumer.seek(&mq, 11).await.is_err(), "beyond max offset");
    let other = MessageQueue::new(topic, mq.broker_name.clone(), 1);
    assert!(consumer.seek(&other, 0).await.is_err(), "not assigned");

    // Paused queues deliver nothing until resumed.
    consumer.seek_to_begin(&mq).await.expect("seek to begin");
    consumer.pause(std::slice::from_ref(&mq));
    assert!(
        consumer
            .poll(Duration::from_millis(300))
            .await
            .expect("poll")
            .is_empty()
    );
    consumer.resume(std::slice::from_ref(&mq));
    assert_eq!(next_offset(&consumer).await, 0);

    consumer.shutdown().await;
    producer.shutdown().await;
    env.shutdown().await;
}

async fn producer_broker(
    producer: &comet_client::producer::DefaultMQProducer,
    topic: &str,
) -> String {
    let queues = producer
        .fetch_publish_message_queues(topic)
        .await
        .expect("publish queues");
    queues
        .first()
        .map(|q| q.broker_name.clone())
        .expect("a queue")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_receives_everything_once() {
    let env = Cluster::start().await;
    let topic = "LiteSubscribeTopic";
    env.create_topic_via_admin(topic, 4).await;
    let producer = env.producer("lite_sub_producer").await;
    let consumer = lite(&env, "lite_sub_group", true);
    consumer.subscribe(topic, "*").await.expect("subscribed");
    consumer.start().await.expect("starts");
    assert!(
        wait_until(|| async { consumer.assignment().len() == 4 }).await,
        "the only member owns every queue"
    );
    let mut sent = BTreeSet::new();
    for i in 0..40 {
        let body = format!("s{i}");
        producer
            .send(Message::new(topic, body.clone().into_bytes()))
            .await
            .expect("sent");
        sent.insert(body);
    }
    let got = poll_n(&consumer, 40).await;
    let bodies: Vec<String> = got
        .iter()
        .map(|m| String::from_utf8_lossy(&m.body).into_owned())
        .collect();
    assert_eq!(bodies.len(), 40, "nothing twice");
    assert_eq!(bodies.into_iter().collect::<BTreeSet<_>>(), sent);
    consumer.shutdown().await;
    producer.shutdown().await;
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_commit_is_persisted() {
    let env = Cluster::start().await;
    let topic = "LiteCommitTopic";
    env.create_topic_via_admin(topic, 1).await;
    let producer = env.producer("lite_commit_producer").await;
    for i in 0..8 {
        producer
            .send(Message::new(topic, format!("c{i}").into_bytes()))
            .await
            .expect("sent");
    }
    let mq = MessageQueue::new(topic, producer_broker(&producer, topic).await, 0);
    let group = "lite_commit_group";

    let consumer = lite(&env, group, false);
    consumer.assign(vec![mq.clone()]).await.expect("assigned");
    consumer.start().await.expect("starts");
    let got = poll_n(&consumer, 8).await;
    assert_eq!(got.len(), 8);
    // Nothing committed yet: manual mode.
    assert!(consumer.committed(&mq).await.expect("committed") <= 0);
    consumer.commit_sync().await.expect("commit");
    assert_eq!(consumer.committed(&mq).await.expect("committed"), 8);
    consumer.shutdown().await;

    // A new consumer of the group starts where the commit left off.
    let restarted = lite(&env, group, false);
    restarted.assign(vec![mq.clone()]).await.expect("assigned");
    restarted.start().await.expect("starts");
    assert_eq!(restarted.committed(&mq).await.expect("committed"), 8);
    producer
        .send(Message::new(topic, b"c8".to_vec()))
        .await
        .expect("sent");
    let next = poll_n(&restarted, 1).await;
    assert_eq!(next[0].queue_offset, 8);
    assert_eq!(next[0].body.as_ref(), b"c8");
    restarted.shutdown().await;
    producer.shutdown().await;
    env.shutdown().await;
}
