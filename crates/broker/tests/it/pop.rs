//! POP consumption over real sockets: pop + ack consumes each message once, an un-acked message
//! comes back through the POP retry topic after its invisible time, CHANGE_MESSAGE_INVISIBLETIME
//! moves that time, BATCH_ACK_MESSAGE acks a bitset, retries end in the DLQ, un-acked messages
//! survive a broker restart, and a held pop is woken by a new message.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use base64::Engine;
use comet_protocol::RemotingCommand;
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
    CommandHeaderExt, POP_INIT_MODE_MIN, PopMessageRequestHeader, PopMessageResponseHeader,
    request_with_header,
};
use comet_protocol::message::MessageExt;
use comet_protocol::message::properties::keys;
use comet_protocol::message::record::decode_records;
use comet_protocol::naming::dlq_topic;
use comet_testkit::*;

/// Re-runs `$body` (which may mutate captured state) every [`POLL`] until it yields true;
/// fails the test with `$msg` after [`WAIT_DEADLINE`].
macro_rules! eventually {
    ($msg:literal, $body:block) => {{
        let deadline = tokio::time::Instant::now() + WAIT_DEADLINE;
        loop {
            if $body {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, $msg);
            tokio::time::sleep(POLL).await;
        }
    }};
}

const SUCCESS: i32 = 0;
const INVALID_PARAMETER: i32 = 29;
const POLLING_TIMEOUT: i32 = 210;

fn now_ms() -> i64 {
    comet_protocol::time::now_millis()
}

/// A broker whose timer wheel has 100 ms slots, so short invisible times end promptly.
async fn start() -> TestBroker {
    TestBroker::start_with(|c| c.timer_precision_ms = 100).await
}

fn pop_request(
    group: &str,
    topic: &str,
    queue_id: i32,
    invisible_ms: i64,
    poll_ms: i64,
) -> RemotingCommand {
    let header = PopMessageRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id,
        max_msg_nums: 32,
        invisible_time: invisible_ms,
        poll_time: poll_ms,
        born_time: now_ms(),
        init_mode: POP_INIT_MODE_MIN,
        exp_type: Some("TAG".to_owned()),
        exp: Some("*".to_owned()),
        order: Some(false),
        attempt_id: None,
        rpc: Default::default(),
    };
    request_with_header(RequestCode::PopMessage, &header)
}

/// One pop; the messages it returned (none on POLLING_TIMEOUT).
async fn pop(broker: &TestBroker, group: &str, topic: &str, invisible_ms: i64) -> Vec<MessageExt> {
    let rsp = broker
        .invoke(pop_request(group, topic, -1, invisible_ms, 0))
        .await;
    decode_pop(&rsp)
}

fn decode_pop(rsp: &RemotingCommand) -> Vec<MessageExt> {
    if rsp.code != SUCCESS {
        assert_eq!(rsp.code, POLLING_TIMEOUT, "pop failed: {:?}", rsp.remark);
        return Vec::new();
    }
    let header: PopMessageResponseHeader = rsp.decode_header().expect("pop response header");
    assert!(header.pop_time > 0);
    decode_records(&rsp.body.clone().unwrap_or_default(), true).expect("records decode")
}

fn handle(m: &MessageExt) -> Vec<String> {
    m.properties
        .get("POP_CK")
        .expect("popped message carries POP_CK")
        .split(' ')
        .map(str::to_owned)
        .collect()
}

/// Sends CHANGE_MESSAGE_INVISIBLETIME for the message at `offset` whose receipt handle fields are
/// `h` (as [`handle`] splits them), asking for `invisible_ms` more.
async fn change_invisible(
    broker: &TestBroker,
    (group, topic): (&str, &str),
    h: &[String],
    offset: i64,
    invisible_ms: i64,
) -> RemotingCommand {
    let header = ChangeInvisibleTimeRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id: h[6].parse().expect("queue id"),
        extra_info: h.join(" "),
        offset,
        invisible_time: invisible_ms,
        rpc: Default::default(),
    };
    broker
        .invoke(request_with_header(
            RequestCode::ChangeMessageInvisibletime,
            &header,
        ))
        .await
}

/// The topic a popped message must be acked under (the retry topic for a redelivery).
fn ack_topic(group: &str, m: &MessageExt) -> String {
    match handle(m)[4].as_str() {
        "1" => format!("%RETRY%{group}_{}", m.topic),
        _ => m.topic.clone(),
    }
}

async fn ack(broker: &TestBroker, group: &str, m: &MessageExt) -> i32 {
    let h = handle(m);
    let header = AckMessageRequestHeader {
        consumer_group: group.to_owned(),
        topic: ack_topic(group, m),
        queue_id: h[6].parse().expect("queue id"),
        extra_info: h.join(" "),
        offset: m.queue_offset,
        rpc: Default::default(),
    };
    broker
        .invoke(request_with_header(RequestCode::AckMessage, &header))
        .await
        .code
}

fn body(m: &MessageExt) -> String {
    String::from_utf8_lossy(&m.body).into_owned()
}

async fn send_n(broker: &TestBroker, topic: &str, n: usize, tag: &str) {
    for i in 0..n {
        let rsp = broker
            .invoke(send_v2(
                topic,
                (i % 4) as i32,
                format!("m{i}").as_bytes(),
                &[("TAGS", tag)],
            ))
            .await;
        assert_eq!(rsp.code, SUCCESS);
    }
    broker.wait_dispatched().await;
}

/// Waits until the revive service has settled every checkpoint written so far.
async fn all_settled(broker: &TestBroker) -> bool {
    let stats = &broker.ctx().pop.stats;
    wait_until(|| async {
        let written = stats.checkpoints_written.load(Ordering::Relaxed);
        written > 0 && stats.checkpoints_settled.load(Ordering::Relaxed) >= written
    })
    .await
}

#[tokio::test]
async fn pop_and_ack_consume_each_message_once() {
    let broker = start().await;
    let (topic, group) = ("PopTopicA", "pop_group_a");
    send_n(&broker, topic, 8, "A").await;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    eventually!("condition never held", {
        for m in pop(&broker, group, topic, 1000).await {
            assert_eq!(m.reconsume_times, 0);
            assert_eq!(handle(&m).len(), 8, "handle has Apache's eight fields");
            assert_eq!(ack(&broker, group, &m).await, SUCCESS);
            *seen.entry(body(&m)).or_default() += 1;
        }
        seen.len() == 8
    });
    assert!(all_settled(&broker).await);
    assert_eq!(broker.ctx().pop.stats.revived.load(Ordering::Relaxed), 0);
    assert!(pop(&broker, group, topic, 1000).await.is_empty());
    assert!(
        seen.values().all(|n| *n == 1),
        "each message once: {seen:?}"
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn an_unacked_message_comes_back_through_the_retry_topic() {
    let broker = start().await;
    let (topic, group) = ("PopTopicB", "pop_group_b");
    send_n(&broker, topic, 1, "A").await;
    let first = pop(&broker, group, topic, 300).await;
    assert_eq!(first.len(), 1);
    assert_eq!(handle(&first[0])[4], "0");
    let mut again = Vec::new();
    eventually!("the un-acked message never came back", {
        again.extend(pop(&broker, group, topic, 60_000).await);
        !again.is_empty()
    });
    let m = &again[0];
    assert_eq!(body(m), "m0");
    assert_eq!(m.reconsume_times, 1);
    assert_eq!(m.topic, topic, "returned under the requested topic");
    assert_eq!(handle(m)[4], "1", "read from the POP retry topic");
    assert!(m.properties.get("1ST_POP_TIME").is_some());
    assert_eq!(ack(&broker, group, m).await, SUCCESS);
    broker.shutdown().await;
}

#[tokio::test]
async fn changing_the_invisible_time_brings_a_message_back_sooner() {
    let broker = start().await;
    let (topic, group) = ("PopTopicC", "pop_group_c");
    send_n(&broker, topic, 1, "A").await;
    let first = pop(&broker, group, topic, 600_000).await;
    assert_eq!(first.len(), 1);
    let m = &first[0];
    let h = handle(m);
    let rsp = change_invisible(&broker, (group, topic), &h, m.queue_offset, 200).await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let changed: ChangeInvisibleTimeResponseHeader = rsp.decode_header().unwrap();
    assert_eq!(changed.invisible_time, 200);
    assert_eq!(changed.revive_qid.to_string(), h[3]);
    let mut again = Vec::new();
    eventually!(
        "the message stayed invisible for its first invisible time",
        {
            again.extend(pop(&broker, group, topic, 60_000).await);
            !again.is_empty()
        }
    );
    assert_eq!(body(&again[0]), "m0");
    assert_eq!(again[0].reconsume_times, 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_batch_ack_acks_every_offset_of_its_bitset() {
    let broker = start().await;
    let (topic, group) = ("PopTopicD", "pop_group_d");
    for i in 0..3 {
        let rsp = broker
            .invoke(send_v2(topic, 0, format!("m{i}").as_bytes(), &[]))
            .await;
        assert_eq!(rsp.code, SUCCESS);
    }
    broker.wait_dispatched().await;
    let rsp = broker.invoke(pop_request(group, topic, 0, 300, 0)).await;
    let header: PopMessageResponseHeader = rsp.decode_header().unwrap();
    let msgs = decode_pop(&rsp);
    assert_eq!(msgs.len(), 3);
    assert_eq!(header.start_offset_info.as_deref(), Some("0 0 0"));
    assert_eq!(header.msg_offset_info.as_deref(), Some("0 0 0,1,2"));
    // BitSet {0, 1, 2} as Java serializes it.
    let bits = base64::engine::general_purpose::STANDARD.encode([0b111u8]);
    let body = format!(
        r#"{{"brokerName":"{}","acks":[{{"c":"{group}","t":"{topic}","r":"0","so":0,"q":0,"rq":{},"pt":{},"it":300,"b":"{bits}"}}]}}"#,
        broker.config.broker_name, header.revive_qid, header.pop_time
    );
    let rsp = broker
        .invoke(RemotingCommand::request(RequestCode::BatchAckMessage).with_body(body.into_bytes()))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    assert!(all_settled(&broker).await);
    assert_eq!(broker.ctx().pop.stats.revived.load(Ordering::Relaxed), 0);
    assert!(pop(&broker, group, topic, 300).await.is_empty());
    broker.shutdown().await;
}

#[tokio::test]
async fn a_message_goes_to_the_dlq_after_retry_max_times() {
    let broker = start().await;
    let (topic, group) = ("PopTopicE", "pop_group_e");
    let mut config = broker
        .ctx()
        .subscription_groups
        .find_or_create(group)
        .unwrap();
    config.retry_max_times = 1;
    broker.ctx().subscription_groups.update(config);
    send_n(&broker, topic, 1, "A").await;
    let dlq = dlq_topic(group);
    let mut deliveries = Vec::new();
    eventually!("never dead-lettered; deliveries {deliveries:?}", {
        for m in pop(&broker, group, topic, 100).await {
            deliveries.push(m.reconsume_times);
        }
        broker.store().get_max_offset_in_queue(&dlq, 0) > 0
    });
    assert_eq!(deliveries, vec![0, 1]);
    let rsp = broker.invoke(pull("reader", &dlq, 0, 0, 32)).await;
    let dead = decode_records(&rsp.body.unwrap_or_default(), true).unwrap();
    assert_eq!(body(&dead[0]), "m0");
    // Stored as Apache's proxy dead-letters a POP message: a send-back of the copy revived into
    // the POP retry topic, so one reconsume more than that copy, and the send-back's properties.
    assert_eq!(dead[0].reconsume_times, 3);
    let retry = format!("%RETRY%{group}_{topic}");
    assert_eq!(
        dead[0].properties.get(keys::RETRY_TOPIC),
        Some(retry.as_str())
    );
    assert!(dead[0].properties.get(keys::ORIGIN_MESSAGE_ID).is_some());
    assert_eq!(
        dead[0].properties.get(keys::WAIT_STORE_MSG_OK),
        Some("false")
    );
    assert_eq!(dead[0].properties.get(keys::DELAY_TIME_LEVEL), Some("0"));
    broker.shutdown().await;
}

#[tokio::test]
async fn unacked_messages_come_back_after_a_restart() {
    let mut broker = start().await;
    let (topic, group) = ("PopTopicF", "pop_group_f");
    send_n(&broker, topic, 4, "A").await;
    let mut popped = Vec::new();
    eventually!("condition never held", {
        popped.extend(pop(&broker, group, topic, 1500).await);
        popped.len() == 4
    });
    // Two are acked; the other two must come back after the restart.
    for m in &popped[..2] {
        assert_eq!(ack(&broker, group, m).await, SUCCESS);
    }
    let expected: Vec<String> = popped[2..].iter().map(body).collect();
    broker.restart_broker().await;
    let mut back: Vec<String> = Vec::new();
    eventually!(
        "lost across the restart: expected {expected:?}, got {back:?}",
        {
            for m in pop(&broker, group, topic, 60_000).await {
                assert_eq!(m.reconsume_times, 1);
                back.push(body(&m));
            }
            expected.iter().all(|b| back.contains(b))
        }
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn a_held_pop_is_woken_by_a_new_message() {
    let broker = start().await;
    let (topic, group) = ("PopTopicG", "pop_group_g");
    send_n(&broker, topic, 1, "A").await;
    let first = pop(&broker, group, topic, 60_000).await;
    assert_eq!(first.len(), 1);
    let held = broker.invoke(pop_request(group, topic, -1, 60_000, 8_000));
    let send = async {
        assert!(wait_until(|| async { broker.ctx().pop.held_count() > 0 }).await);
        let rsp = broker.invoke(send_v2(topic, 1, b"late", &[])).await;
        assert_eq!(rsp.code, SUCCESS);
    };
    let (rsp, ()) = tokio::join!(held, send);
    let msgs = decode_pop(&rsp);
    assert_eq!(msgs.iter().map(body).collect::<Vec<_>>(), vec!["late"]);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_pop_of_more_than_32_messages_is_refused() {
    let broker = start().await;
    send_n(&broker, "PopTopicH", 1, "A").await;
    let mut req = pop_request("pop_group_h", "PopTopicH", -1, 1000, 0);
    req.ext_fields
        .as_mut()
        .expect("header")
        .insert("maxMsgNums", "33");
    assert_eq!(broker.invoke(req).await.code, INVALID_PARAMETER);
    broker.shutdown().await;
}

#[tokio::test]
async fn peek_reads_without_popping_and_notification_tells_when_messages_wait() {
    use comet_protocol::headers::{
        NotificationRequestHeader, NotificationResponseHeader, PeekMessageRequestHeader,
        PollingInfoRequestHeader, PollingInfoResponseHeader,
    };
    let broker = start().await;
    let (topic, group) = ("PopTopicI", "pop_group_i");
    send_n(&broker, topic, 2, "A").await;
    let peek = PeekMessageRequestHeader {
        topic: topic.to_owned(),
        queue_id: -1,
        max_msg_nums: 32,
        consumer_group: group.to_owned(),
        rpc: Default::default(),
    };
    for _ in 0..2 {
        let rsp = broker
            .invoke(request_with_header(RequestCode::PeekMessage, &peek))
            .await;
        assert_eq!(rsp.code, SUCCESS);
        let peeked = decode_records(&rsp.body.unwrap_or_default(), true).unwrap();
        assert_eq!(peeked.len(), 2, "a peek leaves the messages where they are");
    }
    let notification = |poll_time: i64| NotificationRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id: -1,
        poll_time,
        born_time: now_ms(),
        order: Some(false),
        attempt_id: None,
        rpc: Default::default(),
    };
    let has_msg = |rsp: RemotingCommand| {
        assert_eq!(rsp.code, SUCCESS);
        rsp.decode_header::<NotificationResponseHeader>()
            .unwrap()
            .has_msg
    };
    let rsp = broker
        .invoke(request_with_header(
            RequestCode::Notification,
            &notification(0),
        ))
        .await;
    assert!(has_msg(rsp));
    let mut popped = Vec::new();
    eventually!("the two messages were never popped", {
        popped.extend(pop(&broker, group, topic, 60_000).await);
        popped.len() == 2
    });
    let rsp = broker
        .invoke(request_with_header(
            RequestCode::Notification,
            &notification(0),
        ))
        .await;
    assert!(!has_msg(rsp), "everything was popped");
    // A held notification is answered when a message arrives.
    let held = broker.invoke(request_with_header(
        RequestCode::Notification,
        &notification(8_000),
    ));
    let send = async {
        assert!(wait_until(|| async { broker.ctx().pop.held_count() > 0 }).await);
        let info = PollingInfoRequestHeader {
            consumer_group: group.to_owned(),
            topic: topic.to_owned(),
            queue_id: 0,
            rpc: Default::default(),
        };
        let rsp = broker
            .invoke(request_with_header(RequestCode::PollingInfo, &info))
            .await;
        let info: PollingInfoResponseHeader = rsp.decode_header().unwrap();
        assert_eq!(info.polling_num, 1);
        let rsp = broker.invoke(send_v2(topic, 0, b"late", &[])).await;
        assert_eq!(rsp.code, SUCCESS);
    };
    let (rsp, ()) = tokio::join!(held, send);
    assert!(has_msg(rsp));
    broker.shutdown().await;
}

#[tokio::test]
async fn a_group_switched_to_pop_is_assigned_every_queue_and_the_mode_survives_a_restart() {
    let mut broker = start().await;
    let (topic, group) = ("PopTopicJ", "pop_group_j");
    send_n(&broker, topic, 1, "A").await;
    let mode = format!(
        r#"{{"topic":"{topic}","consumerGroup":"{group}","mode":"POP","popShareQueueNum":8}}"#
    );
    let rsp = broker
        .invoke(
            RemotingCommand::request(RequestCode::SetMessageRequestMode)
                .with_body(mode.into_bytes()),
        )
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    broker.restart_broker().await;
    let rsp = broker
        .invoke(RemotingCommand::request(
            RequestCode::GetAllMessageRequestMode,
        ))
        .await;
    let all: serde_json::Value = serde_json::from_slice(&rsp.body.unwrap()).unwrap();
    assert_eq!(
        all["messageRequestModeMap"][topic][group]["mode"],
        serde_json::json!("POP")
    );
    assert_eq!(
        broker
            .invoke(heartbeat("client-1", group, topic))
            .await
            .code,
        SUCCESS
    );
    let query = format!(
        r#"{{"topic":"{topic}","consumerGroup":"{group}","clientId":"client-1","strategyName":"AVG","messageModel":"CLUSTERING"}}"#
    );
    let rsp = broker
        .invoke(
            RemotingCommand::request(RequestCode::QueryAssignment).with_body(query.into_bytes()),
        )
        .await;
    assert_eq!(rsp.code, SUCCESS);
    let body: serde_json::Value = serde_json::from_slice(&rsp.body.unwrap()).unwrap();
    let assignments = body["messageQueueAssignments"].as_array().unwrap().clone();
    assert_eq!(assignments.len(), 1, "{body}");
    assert_eq!(assignments[0]["mode"], serde_json::json!("POP"));
    assert_eq!(
        assignments[0]["messageQueue"]["queueId"],
        serde_json::json!(-1)
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn a_tag_filter_pops_only_matching_messages_and_sql92_is_refused() {
    let broker = start().await;
    let (topic, group) = ("PopTopicK", "pop_group_k");
    for (i, tag) in ["A", "B", "A", "B"].iter().enumerate() {
        let rsp = broker
            .invoke(send_v2(
                topic,
                0,
                format!("m{i}").as_bytes(),
                &[("TAGS", tag)],
            ))
            .await;
        assert_eq!(rsp.code, SUCCESS);
    }
    broker.wait_dispatched().await;
    let filtered = |exp_type: &str| {
        let mut req = pop_request(group, topic, 0, 60_000, 0);
        let ext = req.ext_fields.as_mut().expect("header");
        ext.insert("exp", "A");
        ext.insert("expType", exp_type);
        req
    };
    let sql = broker.invoke(filtered("SQL92")).await;
    assert_eq!(sql.code, 1, "SQL92 refused: {:?}", sql.remark);
    let msgs = decode_pop(&broker.invoke(filtered("TAG")).await);
    assert_eq!(msgs.iter().map(body).collect::<Vec<_>>(), vec!["m0", "m2"]);
    assert!(decode_pop(&broker.invoke(filtered("TAG")).await).is_empty());
    broker.shutdown().await;
}

/// A FIFO pop (`order=true`) of queue 0 with a 60 s invisible time and `attempt` as its id.
fn fifo_pop(group: &str, topic: &str, attempt: &str) -> RemotingCommand {
    let mut req = pop_request(group, topic, 0, 60_000, 0);
    let ext = req.ext_fields.as_mut().expect("header");
    ext.insert("order", "true");
    ext.insert("attemptId", attempt);
    req
}

#[tokio::test]
async fn a_fifo_pop_blocks_its_queue_until_the_batch_is_acked() {
    let broker = start().await;
    let (topic, group) = ("PopTopicL", "pop_group_l");
    for i in 0..3 {
        let rsp = broker
            .invoke(send_v2(topic, 0, format!("m{i}").as_bytes(), &[]))
            .await;
        assert_eq!(rsp.code, SUCCESS);
    }
    broker.wait_dispatched().await;
    let fifo = |attempt: &str| fifo_pop(group, topic, attempt);
    let rsp = broker.invoke(fifo("a1")).await;
    let header: PopMessageResponseHeader = rsp.decode_header().unwrap();
    assert_eq!(header.revive_qid, 999);
    assert_eq!(
        header.order_count_info.as_deref(),
        Some("0 qo0%0 0;0 qo0%1 0;0 qo0%2 0;0 0 0")
    );
    let batch = decode_pop(&rsp);
    assert_eq!(
        batch.iter().map(body).collect::<Vec<_>>(),
        vec!["m0", "m1", "m2"]
    );
    assert_eq!(handle(&batch[0])[3], "999");
    assert!(
        decode_pop(&broker.invoke(fifo("a2")).await).is_empty(),
        "queue blocked"
    );
    // The repeated attempt below must get a pop time of its own, or the first delivery's
    // handles would still match it.
    eventually!("the clock never passed the first pop time", {
        now_ms() > header.pop_time
    });
    let again = decode_pop(&broker.invoke(fifo("a1")).await);
    assert_eq!(again.len(), 3, "the same attempt gets its batch again");
    // Handles of the superseded delivery no longer count; the latest ones do.
    assert_eq!(ack(&broker, group, &batch[0]).await, SUCCESS);
    assert_eq!(
        broker.ctx().consumer_offsets.query_offset(group, topic, 0),
        0
    );
    for m in &again[..2] {
        assert_eq!(ack(&broker, group, m).await, SUCCESS);
    }
    assert_eq!(
        broker.ctx().consumer_offsets.query_offset(group, topic, 0),
        2
    );
    assert!(
        decode_pop(&broker.invoke(fifo("a2")).await).is_empty(),
        "m2 still un-acked"
    );
    let h = handle(&again[2]);
    let rsp = change_invisible(&broker, (group, topic), &h, 2, 100).await;
    assert_eq!(rsp.code, SUCCESS);
    let mut redelivered = Vec::new();
    let mut counts = None;
    eventually!("m2 never came back", {
        let rsp = broker.invoke(fifo("a3")).await;
        if rsp.code == SUCCESS {
            let header: PopMessageResponseHeader = rsp.decode_header().unwrap();
            counts = header.order_count_info;
        }
        redelivered.extend(decode_pop(&rsp));
        !redelivered.is_empty()
    });
    assert_eq!(redelivered.iter().map(body).collect::<Vec<_>>(), vec!["m2"]);
    assert_eq!(counts.as_deref(), Some("0 qo0%2 1;0 0 1"));
    assert_eq!(ack(&broker, group, &redelivered[0]).await, SUCCESS);
    assert_eq!(
        broker.ctx().consumer_offsets.query_offset(group, topic, 0),
        3
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn a_changed_invisible_time_gets_a_pop_time_after_the_old_handles() {
    // The old handle's ack and the new checkpoint must not share a pop time, even when the
    // change arrives within the millisecond of the pop (here: a handle from the future).
    let broker = start().await;
    let (topic, group) = ("PopTopicM", "pop_group_m");
    send_n(&broker, topic, 1, "A").await;
    let popped = pop(&broker, group, topic, 600_000).await;
    let m = &popped[0];
    let mut h = handle(m);
    let future_pop_time = now_ms() + 60_000;
    h[1] = future_pop_time.to_string();
    let rsp = change_invisible(&broker, (group, topic), &h, m.queue_offset, 1000).await;
    assert_eq!(rsp.code, SUCCESS);
    let changed: ChangeInvisibleTimeResponseHeader = rsp.decode_header().unwrap();
    assert!(changed.pop_time > future_pop_time);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_fifo_batch_stays_invisible_across_a_restart() {
    let mut broker = start().await;
    let (topic, group) = ("PopTopicFifoRestart", "pop_group_fifo_restart");
    for i in 0..2 {
        let rsp = broker
            .invoke(send_v2(topic, 0, format!("m{i}").as_bytes(), &[]))
            .await;
        assert_eq!(rsp.code, SUCCESS);
    }
    broker.wait_dispatched().await;
    let fifo = |attempt: &str| fifo_pop(group, topic, attempt);
    let batch = decode_pop(&broker.invoke(fifo("a1")).await);
    assert_eq!(batch.len(), 2);

    broker.restart_broker().await;
    assert!(
        decode_pop(&broker.invoke(fifo("a2")).await).is_empty(),
        "the batch's invisible time outlived the restart"
    );
    // The handles from before the restart still ack the batch and move the offset.
    for m in &batch {
        assert_eq!(ack(&broker, group, m).await, SUCCESS);
    }
    assert_eq!(
        broker.ctx().consumer_offsets.query_offset(group, topic, 0),
        2
    );
    let rsp = broker.invoke(send_v2(topic, 0, b"m2", &[])).await;
    assert_eq!(rsp.code, SUCCESS);
    broker.wait_dispatched().await;
    let next = decode_pop(&broker.invoke(fifo("a3")).await);
    assert_eq!(next.iter().map(body).collect::<Vec<_>>(), vec!["m2"]);
    broker.shutdown().await;
}

/// The targets [`comet_broker::core::ack::ack_many`] acks for popped `msgs`.
fn ack_targets(group: &str, msgs: &[MessageExt]) -> Vec<comet_broker::core::ack::AckTarget> {
    msgs.iter()
        .map(|m| {
            let handle = comet_broker::pop::handle::ReceiptHandle::decode(&handle(m).join(" "))
                .expect("handle decodes");
            comet_broker::core::ack::AckTarget {
                topic: ack_topic(group, m),
                queue_id: handle.queue_id,
                offset: m.queue_offset,
                handle,
            }
        })
        .collect()
}

/// Records in the revive queues (acks are written there at once; checkpoints when due).
async fn revive_records(broker: &TestBroker) -> i64 {
    broker.wait_dispatched().await;
    let topic = comet_broker::pop::revive_topic(&broker.config.broker_cluster_name);
    (0..broker.ctx().pop.revive_queue_num())
        .map(|q| broker.store().get_max_offset_in_queue(&topic, q))
        .sum()
}

/// Acking several messages of one popped batch together writes one record; a target that does
/// not exist is refused alone.
#[tokio::test]
async fn acking_a_popped_batch_together_writes_one_record() {
    let broker = start().await;
    let (topic, group) = ("PopTopicMany", "pop_group_many");
    for i in 0..3 {
        let rsp = broker
            .invoke(send_v2(topic, 0, format!("m{i}").as_bytes(), &[]))
            .await;
        assert_eq!(rsp.code, SUCCESS);
    }
    broker.wait_dispatched().await;
    let msgs = decode_pop(&broker.invoke(pop_request(group, topic, 0, 60_000, 0)).await);
    assert_eq!(msgs.len(), 3);
    let mut targets = ack_targets(group, &msgs);
    let mut bogus = targets[0].clone();
    bogus.offset = 1_000;
    targets.push(bogus);
    let before = revive_records(&broker).await;
    let outcomes = comet_broker::core::ack::ack_many(broker.ctx(), group, &targets).await;
    assert!(outcomes[..3].iter().all(Result::is_ok), "{outcomes:?}");
    assert!(outcomes[3].is_err(), "an offset past the queue is refused");
    assert_eq!(revive_records(&broker).await - before, 1, "one bAck record");
    broker.shutdown().await;
}

/// Messages acked together are not delivered again once their invisible time is over.
#[tokio::test]
async fn messages_acked_together_do_not_come_back() {
    let broker = start().await;
    let (topic, group) = ("PopTopicTogether", "pop_group_together");
    send_n(&broker, topic, 8, "A").await;
    let mut acked = 0;
    eventually!("the messages were never all popped", {
        let msgs = pop(&broker, group, topic, 300).await;
        let outcomes =
            comet_broker::core::ack::ack_many(broker.ctx(), group, &ack_targets(group, &msgs))
                .await;
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        acked += msgs.len();
        acked == 8
    });
    assert!(all_settled(&broker).await);
    assert_eq!(broker.ctx().pop.stats.revived.load(Ordering::Relaxed), 0);
    assert!(pop(&broker, group, topic, 300).await.is_empty());
    broker.shutdown().await;
}
