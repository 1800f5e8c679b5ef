//! MQAdmin against a real name server and broker: topic create/route/list/stats, consumer
//! progress (lag), query by key and by both kinds of id, and reset offset by time.

use std::collections::HashMap;

use comet_client::Message;
use comet_client::admin::MessageIdKind;
use comet_client::consumer::pull::{DefaultMQPullConsumer, PullConsumerConfig};
use comet_testkit::client::{Cluster, now_millis, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_group_and_message_administration() {
    let env = Cluster::start().await;
    let topic = "AdminTopic";
    let group = "admin_test_group";
    env.create_topic_via_admin(topic, 3).await;
    let admin = env.admin();

    let route = admin.topic_route(topic).await.expect("route");
    assert_eq!(route.queue_datas.len(), 1);
    assert_eq!(route.queue_datas[0].read_queue_nums, 3);
    assert_eq!(
        route.broker_datas[0].master_addr(),
        Some(env.broker_addr().as_str())
    );
    assert!(admin.topic_list().await.expect("list").contains(topic));
    assert!(admin.topic_route("NoSuchTopic").await.is_err());

    // Two phases of messages with keys, separated in store time.
    let producer = env.producer("admin_test_producer").await;
    let mut results = Vec::new();
    for i in 0..6 {
        let msg = Message::new(topic, format!("m{i}").into_bytes()).with_keys([format!("key-{i}")]);
        results.push(producer.send(msg).await.expect("sent"));
    }
    let first_end = now_millis();
    assert!(wait_until(|| async { now_millis() > first_end + 1 }).await);
    let boundary = now_millis();
    for i in 6..9 {
        let msg = Message::new(topic, format!("m{i}").into_bytes()).with_keys([format!("key-{i}")]);
        results.push(producer.send(msg).await.expect("sent"));
    }

    // A send is acknowledged once it is in the CommitLog; the ConsumeQueues (which the stats
    // read) follow by asynchronous dispatch, so wait for all 9 to be dispatched.
    let stored_in_queues = || async {
        let stats = admin.topic_stats(topic).await.expect("stats");
        assert_eq!(stats.offset_table.len(), 3);
        stats
            .offset_table
            .values()
            .map(|o| o.max_offset - o.min_offset)
            .sum::<i64>()
    };
    assert!(wait_until(|| async { stored_in_queues().await == 9 }).await);
    assert_eq!(stored_in_queues().await, 9);

    // Consumer progress: commit the end of every queue but leave 2 messages of queue 0
    // unconsumed; the expected lag is computed from the broker's max offsets.
    let client = env.default_client("admin-pull");
    let consumer = DefaultMQPullConsumer::new(PullConsumerConfig::new(group, client));
    consumer.start().await.expect("consumer starts");
    let queues = consumer
        .fetch_subscribe_message_queues(topic)
        .await
        .expect("queues");
    let mut expected_lag = 0;
    for mq in &queues {
        let max = consumer.max_offset(mq).await.expect("max offset");
        let committed = if mq.queue_id == 0 {
            (max - 2).max(0)
        } else {
            max
        };
        expected_lag += max - committed;
        consumer
            .update_consume_offset(mq, committed)
            .expect("recorded");
        consumer
            .persist_consume_offset(mq)
            .await
            .expect("persisted");
    }
    let consume_stats = admin
        .consume_stats(group, Some(topic))
        .await
        .expect("consume stats");
    assert_eq!(consume_stats.diff_total(), expected_lag);
    let progress = admin
        .consumer_progress(group, Some(topic))
        .await
        .expect("progress");
    assert_eq!(progress.iter().map(|p| p.lag()).sum::<i64>(), expected_lag);
    let connections = admin
        .consumer_connections(group)
        .await
        .expect("connections");
    assert_eq!(connections.connection_set.len(), 1);

    // Query by key (the index is built asynchronously).
    let indexed = wait_until(|| async {
        admin
            .query_message_by_key(topic, "key-4", 32, 0, i64::MAX)
            .await
            .is_ok_and(|f| !f.is_empty())
    })
    .await;
    assert!(indexed, "key-4 indexed");
    let found = admin
        .query_message_by_key(topic, "key-4", 32, 0, i64::MAX)
        .await
        .expect("query by key");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].body.as_ref(), b"m4");

    // By offset msgId and by unique id.
    let sent = &results[7];
    let (kind, by_offset) = admin
        .view_message(&sent.offset_msg_id, None)
        .await
        .expect("by offset id");
    assert_eq!(kind, MessageIdKind::Offset);
    assert_eq!(by_offset.body.as_ref(), b"m7");
    let (kind, by_uniq) = admin
        .view_message(&sent.msg_id, Some(topic))
        .await
        .expect("by unique id");
    assert_eq!(kind, MessageIdKind::Unique);
    assert_eq!(by_uniq.body.as_ref(), b"m7");

    // Reset by time: every queue goes to its first message stored at or after the boundary.
    let mut first_after: HashMap<i32, i64> = HashMap::new();
    let mut max_of: HashMap<i32, i64> = HashMap::new();
    for r in &results {
        let q = r.message_queue.queue_id;
        let e = max_of.entry(q).or_insert(0);
        *e = (*e).max(r.queue_offset + 1);
    }
    for r in results.iter().skip(6) {
        let e = first_after
            .entry(r.message_queue.queue_id)
            .or_insert(i64::MAX);
        *e = (*e).min(r.queue_offset);
    }
    let reset = admin
        .reset_offset_by_time(group, topic, boundary, true)
        .await
        .expect("reset");
    assert_eq!(reset.len(), 3);
    for (mq, offset) in &reset {
        let expected = first_after
            .get(&mq.queue_id)
            .copied()
            .unwrap_or_else(|| max_of.get(&mq.queue_id).copied().unwrap_or(0));
        assert_eq!(*offset, expected, "reset offset of {mq}");
        assert_eq!(
            consumer
                .fetch_consume_offset(mq, true)
                .await
                .expect("offset"),
            expected
        );
    }

    // Dead-letter queue: a message sent back with a negative delay level goes straight to
    // %DLQ%<group>; the admin lists it and resends it to the original topic.
    assert!(
        admin
            .dlq_messages(group, 10)
            .await
            .expect("no DLQ yet")
            .is_empty()
    );
    let broker_name = route.broker_datas[0].broker_name.clone();
    consumer
        .send_message_back(&by_offset, -1, Some(&broker_name))
        .await
        .expect("sent back");
    // The send-back is acknowledged once stored; the DLQ's ConsumeQueue is built asynchronously.
    let mut dead = Vec::new();
    assert!(
        wait_until(|| {
            let admin = &admin;
            async move {
                admin
                    .dlq_messages(group, 10)
                    .await
                    .map(|d| d.len())
                    .unwrap_or(0)
                    == 1
            }
        })
        .await,
        "the sent-back message never reached the DLQ"
    );
    dead.extend(admin.dlq_messages(group, 10).await.expect("DLQ listed"));
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].body.as_ref(), b"m7");
    let before = messages_in_queues(&admin, topic).await;
    let outcomes = admin
        .resend_dlq_messages(group, 10, &producer)
        .await
        .expect("resent");
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].topic, topic);
    assert_eq!(outcomes[0].error, None);
    // The resend is acknowledged once appended; the topic's ConsumeQueue follows by dispatch.
    let resent_in_queues = wait_until(|| {
        let admin = &admin;
        async move { messages_in_queues(admin, topic).await == before + 1 }
    })
    .await;
    assert!(
        resent_in_queues,
        "the resent message reached the topic's queues"
    );

    consumer.shutdown().await;
    producer.shutdown().await;
    admin.shutdown().await;
    env.shutdown().await;
}

/// Sum of the topic's queue max offsets (its message count while nothing was deleted).
async fn messages_in_queues(admin: &comet_client::admin::MQAdmin, topic: &str) -> i64 {
    admin
        .topic_stats(topic)
        .await
        .expect("stats")
        .offset_table
        .values()
        .map(|o| o.max_offset)
        .sum()
}

/// UPDATE_AND_CREATE_TOPIC_LIST: every topic of a list is created with its queues and
/// attributes and routed; a list holding one refused topic creates none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_list_is_created_whole_or_not_at_all() {
    use comet_client::admin::topic::default_topic_config;
    let env = Cluster::start().await;
    let admin = env.admin();
    let mut fifo = default_topic_config("ListFifo");
    fifo.read_queue_nums = 2;
    fifo.write_queue_nums = 2;
    fifo.attributes
        .insert("message.type".to_owned(), "FIFO".to_owned());
    let plain = default_topic_config("ListPlain");
    admin
        .create_topics(&env.broker_addr(), &[fifo, plain])
        .await
        .expect("list created");
    for (topic, queues) in [("ListFifo", 2), ("ListPlain", 8)] {
        let routed = || async { admin.topic_route(topic).await.is_ok() };
        assert!(wait_until(routed).await, "{topic} routed");
        let route = admin.topic_route(topic).await.expect("route");
        assert_eq!(route.queue_datas[0].read_queue_nums, queues, "{topic}");
    }
    assert_eq!(
        broker_topic(&env, "ListFifo")
            .await
            .and_then(|c| c.attributes.get("message.type").cloned())
            .as_deref(),
        Some("FIFO")
    );

    let refused = admin
        .create_topics(
            &env.broker_addr(),
            &[
                default_topic_config("ListNever"),
                default_topic_config("bad name!"),
            ],
        )
        .await;
    assert!(refused.is_err(), "a bad name refuses the list");
    assert!(broker_topic(&env, "ListNever").await.is_none());
}

/// The broker's configuration of `topic` (GET_ALL_TOPIC_CONFIG).
async fn broker_topic(env: &Cluster, topic: &str) -> Option<comet_protocol::body::TopicConfig> {
    use comet_protocol::RemotingCommand;
    use comet_protocol::body::{TopicConfigSerializeWrapper, from_fastjson};
    use comet_protocol::code::RequestCode;
    let rsp = env
        .0
        .invoke(RemotingCommand::request(RequestCode::GetAllTopicConfig))
        .await;
    let table: TopicConfigSerializeWrapper =
        from_fastjson(rsp.body.as_deref().unwrap_or_default()).expect("topic table");
    table.topic_config_table.get(topic).cloned()
}
