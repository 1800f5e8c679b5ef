//! DefaultMQProducer against a real in-process name server and broker: every send mode, read
//! back through a raw pull; compression; TBW102 auto-creation; and the typed errors users see.
//!
//! Each test runs its own name server and broker on ephemeral ports in a temporary directory and
//! its own client instance name (the process-wide instance table is keyed by client id). Nothing
//! sleeps to synchronize: reads poll with a deadline and fail loudly when it passes.

use std::collections::HashSet;
use std::time::Duration;

use bytes::Bytes;
use comet_client::api::{PullStatus, RETRY_GROUP_TOPIC_PREFIX};
use comet_client::producer::{DefaultMQProducer, SelectMessageQueueByHash};
use comet_client::{ClientError, Message, MessageExt, MessageQueue, NoRouteReason, SendStatus};
use comet_protocol::body::TopicConfig;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::command::COMET_VERSION;
use comet_protocol::headers::{PullMessageRequestHeader, pull_sys_flag};
use comet_protocol::message::id::decode_offset_msg_id;
use comet_protocol::message::properties::keys;
use comet_protocol::message::{record, sysflag};
use comet_testkit::{TestBroker, wait_for};

/// Timeout of the raw RPCs tests make.
const RPC_TIMEOUT: Duration = Duration::from_secs(5);
/// Consumer group used for raw pulls.
const PULL_GROUP: &str = "producer_test_reader";

fn pull_header(mq: &MessageQueue, offset: i64, max: i32) -> PullMessageRequestHeader {
    PullMessageRequestHeader {
        consumer_group: PULL_GROUP.to_string(),
        topic: mq.topic.clone(),
        queue_id: mq.queue_id,
        queue_offset: offset,
        max_msg_nums: max,
        sys_flag: pull_sys_flag::build(false, false, true, false),
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".to_string()),
        sub_version: 0,
        expression_type: Some("TAG".to_string()),
        ..Default::default()
    }
}

/// Pulls `count` messages of `mq` starting at `offset` through `MQClientApi::pull_message`.
async fn pull_messages(
    producer: &DefaultMQProducer,
    mq: &MessageQueue,
    offset: i64,
    count: usize,
) -> Vec<MessageExt> {
    let instance = producer.client_instance().expect("started");
    let addr = instance
        .find_broker_address_in_publish(&mq.broker_name)
        .expect("broker address known");
    let max = i32::try_from(count).expect("small count");
    wait_for("messages to be pullable", || {
        let instance = instance.clone();
        let addr = addr.clone();
        let header = pull_header(mq, offset, max);
        async move {
            let result = instance
                .api()
                .pull_message(&addr, header, RPC_TIMEOUT)
                .await
                .expect("pull answered");
            (result.pull_status == PullStatus::Found && result.msg_found_list.len() >= count)
                .then_some(result.msg_found_list)
        }
    })
    .await
}

async fn pull_one(producer: &DefaultMQProducer, mq: &MessageQueue, offset: i64) -> MessageExt {
    pull_messages(producer, mq, offset, 1)
        .await
        .into_iter()
        .next()
        .expect("one message")
}

#[tokio::test]
async fn sync_send_auto_creates_the_topic_and_reads_back_intact() {
    let cluster = TestBroker::start().await;
    let producer = cluster.producer("pg_sync").await;
    let topic = "ProducerSyncTopic";
    let instance = producer.client_instance().expect("started");
    assert!(
        instance
            .api()
            .get_topic_route_info_from_name_server(topic, RPC_TIMEOUT)
            .await
            .expect("name server answers")
            .is_none(),
        "the topic does not exist before the first send"
    );

    let mut msg = Message::new(topic, "hello comet")
        .with_tags("TagA")
        .with_keys(["order-1", "user-7"]);
    msg.put_user_property("color", "red")
        .expect("user property");
    msg.flag = 7;
    let result = producer.send(msg).await.expect("send succeeds");
    assert_eq!(result.send_status, SendStatus::SendOk);
    assert_eq!(result.message_queue.topic, topic);
    assert_eq!(result.msg_id.len(), 32, "UNIQ_KEY is 32 hex characters");
    let (store_host, _) = decode_offset_msg_id(&result.offset_msg_id).expect("offset msg id");
    let broker_addr = instance
        .find_broker_address_in_publish(&result.message_queue.broker_name)
        .expect("broker known");
    assert_eq!(store_host.to_string(), broker_addr);
    instance.send_heartbeat_to_all_brokers().await;
    assert_eq!(
        instance.broker_version(&broker_addr),
        Some(COMET_VERSION),
        "the broker version is learned from the heartbeat response"
    );

    let route = wait_for("the auto-created topic to be registered", || {
        let instance = instance.clone();
        async move {
            instance
                .api()
                .get_topic_route_info_from_name_server(topic, RPC_TIMEOUT)
                .await
                .expect("name server answers")
        }
    })
    .await;
    let queues: i32 = route.queue_datas.iter().map(|q| q.write_queue_nums).sum();
    assert_eq!(
        queues, 4,
        "auto-created with the producer's defaultTopicQueueNums"
    );

    let got = pull_one(&producer, &result.message_queue, result.queue_offset).await;
    assert_eq!(got.body.as_ref(), b"hello comet");
    assert_eq!(got.tags(), Some("TagA"));
    assert_eq!(got.keys().collect::<Vec<_>>(), vec!["order-1", "user-7"]);
    assert_eq!(got.properties.get("color"), Some("red"));
    assert_eq!(got.flag, 7);
    assert_eq!(got.msg_id(), result.msg_id);
    assert_eq!(got.offset_msg_id(), result.offset_msg_id);
    assert!(got.properties.get(keys::MAX_OFFSET).is_some());

    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn async_callback_and_oneway_sends_arrive() {
    let cluster = TestBroker::start().await;
    let producer = cluster.producer("pg_async").await;
    let topic = "ProducerAsyncTopic";

    let result = producer
        .send_async(Message::new(topic, "via future").with_tags("A"))
        .await
        .expect("async send succeeds");
    let got = pull_one(&producer, &result.message_queue, result.queue_offset).await;
    assert_eq!(got.body.as_ref(), b"via future");

    let (tx, rx) = tokio::sync::oneshot::channel();
    producer.send_with_callback(Message::new(topic, "via callback"), move |outcome| {
        let _ = tx.send(outcome);
    });
    let result = rx
        .await
        .expect("callback called")
        .expect("callback send succeeds");
    let got = pull_one(&producer, &result.message_queue, result.queue_offset).await;
    assert_eq!(got.body.as_ref(), b"via callback");
    assert_eq!(got.msg_id(), result.msg_id);

    // Oneway: no result, so find the message by scanning every queue of the topic.
    let mut oneway = Message::new(topic, "via oneway");
    oneway
        .put_user_property("kind", "oneway")
        .expect("property");
    producer.send_oneway(oneway).await.expect("oneway sent");
    let queues = producer
        .fetch_publish_message_queues(topic)
        .await
        .expect("queues");
    let found = wait_for("the oneway message", || {
        let producer = producer.clone();
        let queues = queues.clone();
        async move {
            let instance = producer.client_instance()?;
            for mq in &queues {
                let addr = instance.find_broker_address_in_publish(&mq.broker_name)?;
                let result = instance
                    .api()
                    .pull_message(&addr, pull_header(mq, 0, 32), RPC_TIMEOUT)
                    .await
                    .ok()?;
                if let Some(msg) = result
                    .msg_found_list
                    .into_iter()
                    .find(|m| m.properties.get("kind") == Some("oneway"))
                {
                    return Some(msg);
                }
            }
            None
        }
    })
    .await;
    assert_eq!(found.body.as_ref(), b"via oneway");

    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn batch_send_stores_each_message() {
    let cluster = TestBroker::start().await;
    let producer = cluster.producer("pg_batch").await;
    let topic = "ProducerBatchTopic";
    let msgs: Vec<Message> = (0..3)
        .map(|i| {
            Message::new(topic, format!("batch-{i}"))
                .with_tags(format!("T{i}"))
                .with_keys([format!("k{i}")])
        })
        .collect();
    let result = producer.send_batch(msgs).await.expect("batch send");
    let ids: Vec<&str> = result.msg_id.split(',').collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 3, "distinct ids");
    assert_eq!(result.offset_msg_id.split(',').count(), 3);

    let got = pull_messages(&producer, &result.message_queue, result.queue_offset, 3).await;
    for (i, msg) in got.iter().take(3).enumerate() {
        assert_eq!(msg.body.as_ref(), format!("batch-{i}").as_bytes());
        assert_eq!(msg.tags(), Some(format!("T{i}").as_str()));
        assert_eq!(msg.keys().collect::<Vec<_>>(), vec![format!("k{i}")]);
        assert_eq!(msg.msg_id(), ids[i]);
        assert_eq!(msg.queue_offset, result.queue_offset + i as i64);
    }

    let mixed = vec![Message::new(topic, "a"), Message::new("OtherTopic", "b")];
    assert!(matches!(
        producer.send_batch(mixed).await,
        Err(ClientError::IllegalArgument(_))
    ));
    let delayed = vec![Message::new(topic, "a").with_delay_level(2)];
    assert!(matches!(
        producer.send_batch(delayed).await,
        Err(ClientError::IllegalArgument(_))
    ));
    let retry = vec![Message::new(format!("{RETRY_GROUP_TOPIC_PREFIX}g"), "a")];
    assert!(matches!(
        producer.send_batch(retry).await,
        Err(ClientError::IllegalArgument(_))
    ));

    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn selector_and_explicit_queue_sends_keep_order() {
    let cluster = TestBroker::start().await;
    let producer = cluster.producer("pg_order").await;
    let topic = "ProducerOrderTopic";
    let mut results = Vec::new();
    for i in 0..6 {
        let msg = Message::new(topic, format!("step-{i}")).with_tags("order");
        results.push(
            producer
                .send_with_selector(msg, &SelectMessageQueueByHash, "order-1")
                .await
                .expect("selector send"),
        );
    }
    let mq = results[0].message_queue.clone();
    assert!(
        results.iter().all(|r| r.message_queue == mq),
        "same key, same queue"
    );
    let offsets: Vec<i64> = results.iter().map(|r| r.queue_offset).collect();
    assert!(
        offsets.windows(2).all(|w| w[1] == w[0] + 1),
        "consecutive offsets"
    );
    let got = pull_messages(&producer, &mq, offsets[0], 6).await;
    let bodies: Vec<String> = got
        .iter()
        .take(6)
        .map(|m| String::from_utf8_lossy(&m.body).into_owned())
        .collect();
    assert_eq!(
        bodies,
        (0..6).map(|i| format!("step-{i}")).collect::<Vec<_>>()
    );

    let queues = producer
        .fetch_publish_message_queues(topic)
        .await
        .expect("queues");
    let target = queues.last().expect("a queue").clone();
    let result = producer
        .send_to_queue(Message::new(topic, "pinned"), &target)
        .await
        .expect("send to queue");
    assert_eq!(result.message_queue, target);
    let got = pull_one(&producer, &target, result.queue_offset).await;
    assert_eq!(got.body.as_ref(), b"pinned");

    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn large_bodies_are_compressed_on_the_wire_and_restored() {
    let cluster = TestBroker::start().await;
    let producer = cluster.producer("pg_zip").await;
    let topic = "ProducerZipTopic";
    let body: Vec<u8> = (0..20_000u32).map(|i| (i % 7) as u8 + b'a').collect();
    let result = producer
        .send(Message::new(topic, Bytes::from(body.clone())))
        .await
        .expect("send");
    let got = pull_one(&producer, &result.message_queue, result.queue_offset).await;
    assert_eq!(got.body.as_ref(), body.as_slice());
    assert!(
        !sysflag::is_compressed(got.sys_flag),
        "flag cleared after inflating"
    );

    // The stored record itself is compressed: read it raw, without the client's restoring.
    let instance = producer.client_instance().expect("started");
    let addr = instance
        .find_broker_address_in_publish(&result.message_queue.broker_name)
        .expect("broker");
    let request = instance.api().request_with(
        RequestCode::PullMessage,
        &pull_header(&result.message_queue, result.queue_offset, 1),
    );
    let response = instance
        .api()
        .remoting()
        .invoke(&addr, request, RPC_TIMEOUT)
        .await
        .expect("raw pull");
    assert_eq!(response.code, i32::from(ResponseCode::Success));
    let raw = record::decode_records(&response.body.expect("body"), false).expect("records");
    let stored = raw.first().expect("one record");
    assert!(sysflag::is_compressed(stored.sys_flag));
    assert!(stored.body.len() < body.len() / 4, "zlib shrinks the body");

    // Small bodies are not compressed.
    let small = producer
        .send(Message::new(topic, "tiny"))
        .await
        .expect("send");
    let request = instance.api().request_with(
        RequestCode::PullMessage,
        &pull_header(&small.message_queue, small.queue_offset, 1),
    );
    let response = wait_for("the small message", || {
        let instance = instance.clone();
        let addr = addr.clone();
        let request = request.clone();
        async move {
            let response = instance
                .api()
                .remoting()
                .invoke(&addr, request, RPC_TIMEOUT)
                .await
                .ok()?;
            (response.code == i32::from(ResponseCode::Success)).then_some(response)
        }
    })
    .await;
    let raw = record::decode_records(&response.body.expect("body"), false).expect("records");
    assert!(!sysflag::is_compressed(
        raw.first().expect("record").sys_flag
    ));

    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn each_reason_for_no_route_says_what_to_do() {
    let cluster = TestBroker::start_with(|c| c.auto_create_topic_enable = false).await;
    let producer = cluster.producer("pg_noroute").await;
    // Unknown to the name server, and brokers do not create topics on first use.
    let err = producer
        .send(Message::new("NoSuchTopic", "x"))
        .await
        .expect_err("no route");
    assert!(
        matches!(&err, ClientError::NoRoute { topic, reason: NoRouteReason::TopicNotExist, .. }
            if topic == "NoSuchTopic"),
        "got {err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("No route info of this topic: NoSuchTopic"),
        "{text}"
    );
    assert!(text.contains("does not exist"), "{text}");
    assert!(text.contains(&cluster.namesrv_addr()), "{text}");

    // Known, but read-only: creating it would not help.
    let broker = cluster.broker();
    broker.context().topic_config.update(TopicConfig {
        topic_name: "ReadOnly".to_owned(),
        perm: 4,
        ..TopicConfig::default()
    });
    broker.register_now().await;
    let err = producer
        .send(Message::new("ReadOnly", "x"))
        .await
        .expect_err("not writable");
    assert!(
        matches!(
            &err,
            ClientError::NoRoute {
                reason: NoRouteReason::NotWritable,
                ..
            }
        ),
        "got {err:?}"
    );
    assert!(err.to_string().contains("takes writes"), "{err}");
    producer.shutdown().await;

    // No name server answers.
    let mut config = cluster.producer_config("pg_nonamesrv");
    config.client.namesrv_addr = "127.0.0.1:1".to_owned();
    let lost = DefaultMQProducer::new(config);
    lost.start().await.expect("producer starts");
    let err = lost
        .send(Message::new("AnyTopic", "x"))
        .await
        .expect_err("no name server");
    assert!(
        matches!(
            &err,
            ClientError::NoRoute {
                reason: NoRouteReason::NameServerUnreachable(_),
                ..
            }
        ),
        "got {err:?}"
    );
    assert!(err.to_string().contains("could not be asked"), "{err}");
    lost.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn duplicate_producer_group_in_one_instance_is_refused() {
    let cluster = TestBroker::start().await;
    let config = cluster.producer_config("pg_dup");
    let first = DefaultMQProducer::new(config.clone());
    first.start().await.expect("first starts");
    let second = DefaultMQProducer::new(config.clone());
    let err = second.start().await.expect_err("duplicate group");
    assert!(
        matches!(&err, ClientError::DuplicateGroup(g) if g == "pg_dup"),
        "{err:?}"
    );
    // The first producer is unaffected.
    first
        .send(Message::new("ProducerDupTopic", "still works"))
        .await
        .expect("first still sends");
    // After the first leaves, the group is free again (a new instance is created).
    first.shutdown().await;
    let third = DefaultMQProducer::new(config);
    third.start().await.expect("group free again");
    let instance = third.client_instance().expect("started");
    assert_eq!(
        instance.client_id(),
        format!(
            "{}@{}",
            third.config().client.client_ip,
            third.config().client.instance_name
        )
    );
    third.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn unreachable_broker_and_exhausted_deadline_are_typed_errors() {
    let mut cluster = TestBroker::start().await;
    let producer = cluster.producer("pg_down").await;
    let topic = "ProducerDownTopic";
    producer
        .send(Message::new(topic, "before"))
        .await
        .expect("send while the broker is up");

    let err = producer
        .send_with_timeout(Message::new(topic, "no time"), Duration::ZERO)
        .await
        .expect_err("deadline already passed");
    assert!(matches!(err, ClientError::Timeout { .. }), "{err:?}");

    cluster.stop_broker().await;
    let err = producer
        .send(Message::new(topic, "after"))
        .await
        .expect_err("broker is gone");
    match &err {
        ClientError::SendFailed { attempts, last, .. } => {
            assert!(*attempts >= 1);
            assert!(
                last.is_remoting(),
                "transport failure expected, got {last:?}"
            );
        }
        other => panic!("expected SendFailed, got {other:?}"),
    }
    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn oversized_and_empty_bodies_are_refused_client_side() {
    let cluster = TestBroker::start().await;
    let producer = cluster.producer("pg_size").await;
    let limit = producer.config().max_message_size;
    let err = producer
        .send(Message::new("ProducerSizeTopic", vec![b'x'; limit + 1]))
        .await
        .expect_err("too large");
    assert!(matches!(err, ClientError::IllegalArgument(_)), "{err:?}");
    let err = producer
        .send(Message::new("ProducerSizeTopic", Bytes::new()))
        .await
        .expect_err("empty");
    assert!(matches!(err, ClientError::IllegalArgument(_)), "{err:?}");
    let err = producer
        .send(Message::new("bad topic", "x"))
        .await
        .expect_err("bad topic");
    assert!(matches!(err, ClientError::IllegalArgument(_)), "{err:?}");
    producer.shutdown().await;
    cluster.shutdown().await;
}
