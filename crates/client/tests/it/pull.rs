//! DefaultMQPullConsumer against a real name server and broker: what is sent is pulled (with tag
//! filtering), long polling answers when a message arrives, and committed offsets survive a
//! consumer restart.

use std::collections::{BTreeSet, HashMap};

use comet_client::api::PullStatus;
use comet_client::consumer::pull::{DefaultMQPullConsumer, PullConsumerConfig};
use comet_client::{Message, MessageQueue};
use comet_testkit::client::{Cluster, send};

const TOPIC: &str = "PullTopic";
const GROUP: &str = "pull_test_group";
const MESSAGES: usize = 24;

async fn start_consumer(env: &Cluster) -> DefaultMQPullConsumer {
    let consumer =
        DefaultMQPullConsumer::new(PullConsumerConfig::new(GROUP, env.default_client("pull")));
    consumer.start().await.expect("pull consumer starts");
    consumer
}

/// Pulls every queue from `start` until NO_NEW_MSG; returns the bodies and each queue's end.
async fn drain(
    consumer: &DefaultMQPullConsumer,
    queues: &[MessageQueue],
    expr: &str,
) -> (Vec<String>, HashMap<MessageQueue, i64>) {
    let mut bodies = Vec::new();
    let mut ends = HashMap::new();
    for mq in queues {
        let mut offset = 0;
        loop {
            let result = consumer
                .pull(mq, expr, offset, 8)
                .await
                .expect("pull answers");
            for m in &result.msg_found_list {
                assert_eq!(m.queue_id, mq.queue_id);
                bodies.push(String::from_utf8_lossy(&m.body).into_owned());
            }
            assert!(result.next_begin_offset >= offset);
            offset = result.next_begin_offset;
            if matches!(result.pull_status, PullStatus::NoNewMsg) {
                break;
            }
        }
        ends.insert(mq.clone(), offset);
    }
    (bodies, ends)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulls_what_was_sent_and_committed_offsets_survive_a_restart() {
    let env = Cluster::start().await;
    env.create_topic_via_admin(TOPIC, 4).await;
    let producer = env.producer("pull_test_producer").await;
    let mut sent = BTreeSet::new();
    let mut tag_a = BTreeSet::new();
    for i in 0..MESSAGES {
        let body = format!("pull-{i}");
        let tag = if i % 3 == 0 { "TagA" } else { "TagB" };
        send(
            &producer,
            Message::new(TOPIC, body.clone().into_bytes()).with_tags(tag),
        )
        .await;
        if tag == "TagA" {
            tag_a.insert(body.clone());
        }
        sent.insert(body);
    }
    // Pulls read the ConsumeQueues, which dispatch fills after the sends were acknowledged.
    env.wait_dispatched().await;

    let consumer = start_consumer(&env).await;
    let queues = consumer
        .fetch_subscribe_message_queues(TOPIC)
        .await
        .expect("queues");
    assert_eq!(queues.len(), 4);

    let (all, ends) = drain(&consumer, &queues, "*").await;
    assert_eq!(all.len(), MESSAGES, "no duplicates, nothing missing");
    assert_eq!(all.into_iter().collect::<BTreeSet<_>>(), sent);
    assert_eq!(ends.values().sum::<i64>(), MESSAGES as i64);

    let (only_a, _) = drain(&consumer, &queues, "TagA").await;
    assert_eq!(only_a.into_iter().collect::<BTreeSet<_>>(), tag_a);

    // A pull past the end answers NO_NEW_MSG at once; an illegal offset is corrected.
    let first = &queues[0];
    let end = ends[first];
    let none = consumer
        .pull(first, "*", end, 8)
        .await
        .expect("pull answers");
    assert_eq!(none.pull_status, PullStatus::NoNewMsg);
    assert_eq!(none.max_offset, end);
    let illegal = consumer
        .pull(first, "*", end + 100, 8)
        .await
        .expect("pull answers");
    assert_eq!(illegal.pull_status, PullStatus::OffsetIllegal);
    assert!(illegal.next_begin_offset <= end);

    // Long polling: the held pull answers with the message sent while it waits.
    let waiting = {
        let consumer = consumer.clone();
        let mq = first.clone();
        tokio::spawn(async move { consumer.pull_block_if_not_found(&mq, "*", end, 8).await })
    };
    producer
        .send_to_queue(Message::new(TOPIC, b"late".to_vec()), first)
        .await
        .expect("late message sent");
    let held = waiting.await.expect("task").expect("held pull answers");
    assert_eq!(held.pull_status, PullStatus::Found);
    assert_eq!(held.msg_found_list.len(), 1);
    assert_eq!(held.msg_found_list[0].body.as_ref(), b"late");

    // Commit distinct offsets per queue, restart, read them back from the broker.
    let mut committed = HashMap::new();
    for (i, mq) in queues.iter().enumerate() {
        let offset = (ends[mq] - i as i64).max(0);
        consumer
            .update_consume_offset(mq, offset)
            .expect("offset recorded");
        committed.insert(mq.clone(), offset);
    }
    consumer.shutdown().await;

    let restarted = start_consumer(&env).await;
    for (mq, offset) in &committed {
        let stored = restarted
            .fetch_consume_offset(mq, true)
            .await
            .expect("offset read");
        assert_eq!(stored, *offset, "offset of {mq}");
    }
    restarted.shutdown().await;
    producer.shutdown().await;
    env.shutdown().await;
}
