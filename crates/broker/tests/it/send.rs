//! Produce-side tests against a real broker over the raw protocol: the three send codes, topic
//! auto-creation, permissions, header errors, delay delivery, retry → DLQ and oneway sends.

use bytes::Bytes;
use comet_protocol::body::perm;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CommandHeaderExt, CreateTopicRequestHeader, GetRouteInfoRequestHeader,
    SendMessageResponseHeader, request_with_header,
};
use comet_protocol::message::MessageExt;
use comet_protocol::message::properties::keys;
use comet_protocol::message::record::decode_records;
use comet_store::GetMessageStatus;
use comet_testkit::*;

const SUCCESS: i32 = 0;

/// Every record of (topic, queue) currently in the store.
fn stored(broker: &TestBroker, topic: &str, queue_id: i32) -> Vec<MessageExt> {
    let result =
        broker
            .store()
            .get_message("test", topic, queue_id, 0, 1000, 64 * 1024 * 1024, None);
    if result.status != GetMessageStatus::Found {
        return Vec::new();
    }
    result
        .messages
        .iter()
        .flat_map(|b| decode_records(b, true).expect("stored record decodes"))
        .collect()
}

async fn wait_stored(broker: &TestBroker, topic: &str, queue_id: i32, n: i64) -> bool {
    wait_until(|| async { broker.store().get_max_offset_in_queue(topic, queue_id) >= n }).await
}

fn create_topic(topic: &str, queues: i32, perm: i32) -> comet_protocol::RemotingCommand {
    let header = CreateTopicRequestHeader {
        topic: topic.to_owned(),
        default_topic: "TBW102".to_owned(),
        read_queue_nums: queues,
        write_queue_nums: queues,
        perm,
        order: false,
        ..Default::default()
    };
    request_with_header(RequestCode::UpdateAndCreateTopic, &header)
}

#[tokio::test]
async fn send_v1_v2_and_batch_then_read_back() {
    let broker = TestBroker::start().await;
    let topic = "SendTopic";
    assert_eq!(broker.invoke(create_topic(topic, 4, 6)).await.code, SUCCESS);

    let rsp = broker
        .invoke(send_v1(
            topic,
            1,
            b"hello v1",
            &[
                ("TAGS", "TagA"),
                ("KEYS", "k1 k2"),
                ("UNIQ_KEY", "UNIQ-1"),
                ("WAIT", "true"),
            ],
        ))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let h: SendMessageResponseHeader = rsp.decode_header().expect("send response header");
    assert_eq!((h.queue_id, h.queue_offset), (1, 0));
    assert_eq!(h.transaction_id.as_deref(), Some("UNIQ-1"));
    assert_eq!(rsp.ext("MSG_REGION"), Some("DefaultRegion"));
    assert_eq!(rsp.ext("TRACE_ON"), Some("true"));
    let (host, offset) = decode_msg_id(&h.msg_id);
    assert_eq!(host.to_string(), broker.handle().broker_addr());
    assert_eq!(offset, 0);

    let rsp = broker
        .invoke(send_v2(topic, 1, b"hello v2", &[("TAGS", "TagB")]))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let h: SendMessageResponseHeader = rsp.decode_header().expect("header");
    assert_eq!(h.queue_offset, 1);
    // The broker made up a UNIQ_KEY for a message without one.
    assert!(h.transaction_id.as_deref().is_some_and(|id| id.len() == 32));

    let rsp = broker
        .invoke(send_batch(topic, 1, &[b"b0", b"b1", b"b2"], "TagC"))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let h: SendMessageResponseHeader = rsp.decode_header().expect("header");
    assert_eq!(h.queue_offset, 2);
    assert_eq!(h.msg_id.split(',').count(), 3);

    assert!(wait_stored(&broker, topic, 1, 5).await);
    let msgs = stored(&broker, topic, 1);
    let bodies: Vec<&[u8]> = msgs.iter().map(|m| m.body.as_ref()).collect();
    assert_eq!(
        bodies,
        vec![&b"hello v1"[..], b"hello v2", b"b0", b"b1", b"b2"]
    );
    let first = &msgs[0];
    assert_eq!(first.tags(), Some("TagA"));
    assert_eq!(first.keys().collect::<Vec<_>>(), vec!["k1", "k2"]);
    assert_eq!(first.uniq_key(), Some("UNIQ-1"));
    assert_eq!(first.properties.get(keys::CLUSTER), Some("DefaultCluster"));
    assert_eq!(first.store_host.to_string(), broker.handle().broker_addr());
    assert!(first.born_host.ip().is_loopback());
    assert!(msgs.iter().skip(2).all(|m| m.tags() == Some("TagC")));
    let offsets: Vec<i64> = msgs.iter().map(|m| m.queue_offset).collect();
    assert_eq!(offsets, vec![0, 1, 2, 3, 4]);

    // The same messages through PULL.
    let rsp = broker
        .invoke(pull("read_back_group", topic, 1, 0, 32))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let body = rsp.body.clone().unwrap_or_default();
    let pulled = decode_records(&body, true).expect("pull body decodes");
    assert_eq!(pulled.len(), 5);
    assert_eq!(pulled[1].body, Bytes::from_static(b"hello v2"));
    broker.shutdown().await;
}

#[tokio::test]
async fn unknown_topic_is_auto_created_and_routed() {
    let broker = TestBroker::start().await;
    let topic = "AutoCreated";
    let rsp = broker.invoke(send_v1(topic, -1, b"x", &[])).await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let config = broker.ctx().topic_config.select(topic).expect("created");
    // min(client defaultTopicQueueNums 4, TBW102's 8), perm of TBW102 without INHERIT.
    assert_eq!((config.read_queue_nums, config.write_queue_nums), (4, 4));
    assert_eq!(config.perm, perm::PERM_READ_WRITE);
    let h: SendMessageResponseHeader = rsp.decode_header().expect("header");
    assert!((0..4).contains(&h.queue_id));

    // The new topic reaches the name server without waiting for the 30 s period.
    let route = || async {
        let req = request_with_header(
            RequestCode::GetRouteinfoByTopic,
            &GetRouteInfoRequestHeader {
                topic: topic.to_owned(),
                ..Default::default()
            },
        );
        broker.invoke_namesrv(req).await.code == SUCCESS
    };
    assert!(wait_until(route).await, "route of {topic} never appeared");
    broker.shutdown().await;
}

#[tokio::test]
async fn unknown_topic_without_auto_create_is_refused() {
    let broker = TestBroker::start_with(|c| c.auto_create_topic_enable = false).await;
    assert!(broker.ctx().topic_config.select("TBW102").is_none());
    let rsp = broker.invoke(send_v2("NoSuchTopic", 0, b"x", &[])).await;
    assert_eq!(rsp.code, ResponseCode::TopicNotExist.code());
    let remark = rsp.remark.clone().unwrap_or_default();
    assert!(
        remark.contains("NoSuchTopic") && remark.contains("UPDATE_AND_CREATE_TOPIC"),
        "{remark}"
    );
    assert_eq!(rsp.ext("MSG_REGION"), Some("DefaultRegion"));
    broker.shutdown().await;
}

#[tokio::test]
async fn permissions_are_enforced() {
    let broker = TestBroker::start().await;
    assert_eq!(
        broker
            .invoke(create_topic("ReadOnly", 2, perm::PERM_READ))
            .await
            .code,
        SUCCESS
    );
    let rsp = broker.invoke(send_v1("ReadOnly", 0, b"x", &[])).await;
    assert_eq!(rsp.code, ResponseCode::NoPermission.code());
    assert!(rsp.remark.unwrap_or_default().contains("ReadOnly"));
    let rsp = broker
        .invoke(send_v1("SCHEDULE_TOPIC_XXXX", 0, b"x", &[]))
        .await;
    assert_eq!(rsp.code, ResponseCode::NoPermission.code());
    broker.shutdown().await;

    let broker = TestBroker::start_with(|c| c.broker_permission = perm::PERM_READ).await;
    let rsp = broker.invoke(send_v1("AnyTopic", 0, b"x", &[])).await;
    assert_eq!(rsp.code, ResponseCode::NoPermission.code());
    broker.shutdown().await;
}

#[tokio::test]
async fn bad_requests_get_errors_naming_the_field() {
    let broker = TestBroker::start_with(|c| c.max_message_size = 1024).await;
    assert_eq!(
        broker.invoke(create_topic("Checked", 2, 6)).await.code,
        SUCCESS
    );

    let mut missing = send_v1("Checked", 0, b"x", &[]);
    missing.ext_fields.as_mut().map(|e| e.remove("queueId"));
    let rsp = broker.invoke(missing).await;
    assert_eq!(rsp.code, ResponseCode::SystemError.code());
    assert!(rsp.remark.unwrap_or_default().contains("queueId"));

    let mut missing_v2 = send_v2("Checked", 0, b"x", &[]);
    missing_v2.ext_fields.as_mut().map(|e| e.remove("b"));
    let rsp = broker.invoke(missing_v2).await;
    assert_eq!(rsp.code, ResponseCode::SystemError.code());
    assert!(rsp.remark.unwrap_or_default().contains("topic"));

    let mut malformed = send_v1("Checked", 0, b"x", &[]);
    malformed.ext_mut().insert("bornTimestamp", "yesterday");
    let rsp = broker.invoke(malformed).await;
    let remark = rsp.remark.unwrap_or_default();
    assert!(
        remark.contains("bornTimestamp") && remark.contains("yesterday"),
        "{remark}"
    );

    let rsp = broker.invoke(send_v1("bad topic!", 0, b"x", &[])).await;
    assert_eq!(rsp.code, ResponseCode::InvalidParameter.code());

    let rsp = broker.invoke(send_v1("Checked", 99, b"x", &[])).await;
    assert_eq!(rsp.code, ResponseCode::InvalidParameter.code());
    assert!(rsp.remark.unwrap_or_default().contains("99"));

    let rsp = broker
        .invoke(send_v1("Checked", 0, &vec![b'z'; 2048], &[]))
        .await;
    assert_eq!(rsp.code, ResponseCode::MessageIllegal.code());
    assert!(rsp.remark.unwrap_or_default().contains("maxMessageSize"));

    let mut bad_batch = send_batch("Checked", 0, &[b"a"], "T");
    bad_batch.body = Some(Bytes::from_static(b"\x00\x00\x00\x05garbage"));
    let rsp = broker.invoke(bad_batch).await;
    assert_eq!(rsp.code, ResponseCode::MessageIllegal.code());

    // The connection survived all of it.
    let rsp = broker.invoke(send_v1("Checked", 0, b"fine", &[])).await;
    assert_eq!(rsp.code, SUCCESS);
    broker.shutdown().await;
}

#[tokio::test]
async fn delay_level_one_is_delivered_after_a_second() {
    let broker = TestBroker::start().await;
    let topic = "DelayTopic";
    assert_eq!(broker.invoke(create_topic(topic, 2, 6)).await.code, SUCCESS);
    let rsp = broker
        .invoke(send_v1(
            topic,
            1,
            b"later",
            &[("DELAY", "1"), ("TAGS", "late")],
        ))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let h: SendMessageResponseHeader = rsp.decode_header().expect("header");
    assert_eq!(h.queue_id, 1);

    // Parked in SCHEDULE_TOPIC_XXXX queue 0, with its delivery time as tags code.
    assert!(wait_stored(&broker, "SCHEDULE_TOPIC_XXXX", 0, 1).await);
    let parked = stored(&broker, "SCHEDULE_TOPIC_XXXX", 0);
    let parked = parked.last().expect("parked message");
    assert_eq!(parked.properties.get(keys::REAL_TOPIC), Some(topic));
    assert_eq!(parked.properties.get(keys::REAL_QUEUE_ID), Some("1"));

    assert!(wait_stored(&broker, topic, 1, 1).await, "never delivered");
    let delivered = stored(&broker, topic, 1);
    let delivered = delivered.first().expect("delivered message");
    assert_eq!(delivered.body, Bytes::from_static(b"later"));
    assert_eq!(delivered.tags(), Some("late"));
    assert_eq!(delivered.properties.get(keys::DELAY_TIME_LEVEL), None);
    assert!(
        delivered.store_timestamp - parked.store_timestamp >= 1000,
        "delivered {} ms after parking",
        delivered.store_timestamp - parked.store_timestamp
    );
    assert!(wait_until(|| async { broker.ctx().schedule.offset(1) == 1 }).await);
    broker.shutdown().await;
}

#[tokio::test]
async fn exhausted_retry_goes_to_dlq() {
    let broker = TestBroker::start().await;
    let group = "retry_group";
    let retry = format!("%RETRY%{group}");

    let mut within = send_v1(&retry, 0, b"again", &[]);
    within.ext_mut().insert("reconsumeTimes", "3");
    let rsp = broker.invoke(within).await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    assert!(wait_stored(&broker, &retry, 0, 1).await);

    let mut exhausted = send_v1(&retry, 0, b"dead", &[]);
    exhausted.ext_mut().insert("reconsumeTimes", "17");
    let rsp = broker.invoke(exhausted).await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let dlq = format!("%DLQ%{group}");
    assert!(wait_stored(&broker, &dlq, 0, 1).await);
    assert_eq!(
        broker
            .ctx()
            .topic_config
            .select(&dlq)
            .map(|t| t.write_queue_nums),
        Some(1)
    );

    // A header maxReconsumeTimes overrides the group's 16 for clients of version >= 121.
    let mut custom = send_v1(&retry, 0, b"dead too", &[]);
    custom.ext_mut().insert("reconsumeTimes", "3");
    custom.ext_mut().insert("maxReconsumeTimes", "2");
    let rsp = broker.invoke(custom).await;
    assert_eq!(rsp.code, SUCCESS);
    assert!(wait_stored(&broker, &dlq, 0, 2).await);

    // While the group holds an orderly queue lock, a retry goes straight to the DLQ.
    let locked: std::collections::BTreeSet<_> = [comet_protocol::body::MessageQueue::new(
        "Orderly", "broker-a", 0,
    )]
    .into();
    assert_eq!(
        broker
            .ctx()
            .rebalance_locks
            .try_lock_batch(group, &locked, "client-1"),
        locked
    );
    let mut orderly = send_v1(&retry, 0, b"orderly failure", &[]);
    orderly.ext_mut().insert("reconsumeTimes", "1");
    let rsp = broker.invoke(orderly).await;
    assert_eq!(rsp.code, SUCCESS);
    assert!(wait_stored(&broker, &dlq, 0, 3).await);
    // Dispatch follows CommitLog order: with the DLQ unit in place, anything the orderly failure
    // had put into the retry queue would be there too.
    assert_eq!(
        broker.store().get_max_offset_in_queue(&retry, 0),
        1,
        "the retry queue is unchanged"
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn oneway_send_is_stored() {
    let broker = TestBroker::start().await;
    assert_eq!(
        broker.invoke(create_topic("Oneway", 1, 6)).await.code,
        SUCCESS
    );
    broker
        .invoke_oneway(send_v2("Oneway", 0, b"fire", &[]))
        .await;
    assert!(wait_stored(&broker, "Oneway", 0, 1).await);
    broker.shutdown().await;
}

/// Sends leave their records pending until the connection commits before answering: every
/// answered send is readable by the time its answer arrives, also when many arrive together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answered_send_is_readable_when_its_answer_arrives() {
    let broker = TestBroker::start().await;
    let topic = "CommitBeforeReply";
    assert_eq!(broker.invoke(create_topic(topic, 2, 6)).await.code, SUCCESS);
    let sends = (0..64).map(|i| {
        let broker = &broker;
        async move {
            let body = format!("pipelined {i}");
            let rsp = broker
                .invoke(send_v2(topic, i % 2, body.as_bytes(), &[]))
                .await;
            assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
            let h: SendMessageResponseHeader = rsp.decode_header().expect("header");
            let (_, offset) = decode_msg_id(&h.msg_id);
            let stored = broker.store().lookup_message_by_offset(offset);
            assert_eq!(
                stored.map(|m| m.body),
                Some(Bytes::from(body)),
                "send {i} answered before its record was readable"
            );
        }
    });
    futures::future::join_all(sends).await;
    assert!(wait_stored(&broker, topic, 0, 32).await);
    assert!(wait_stored(&broker, topic, 1, 32).await);
    broker.shutdown().await;
}
