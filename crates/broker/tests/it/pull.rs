//! Pull path end to end: send then pull back byte-identical, TAG filtering, the status → code
//! table (OFFSET_MOVED / OFFSET_OVERFLOW cases), subscription checks, commit-on-pull, long
//! polling woken by a send (with the append → answer latency reported), and key/offset queries.

use std::time::Duration;

use comet_protocol::RemotingCommand;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CommandHeaderExt, PullMessageRequestHeader, QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader, SendMessageResponseHeader, UNIQUE_KEY_QUERY,
    ViewMessageRequestHeader, pull_sys_flag, request_with_header,
};
use comet_protocol::message::MessageExt;
use comet_protocol::message::record::decode_records;
use comet_testkit::{
    TestBroker, heartbeat, send_batch, send_v1, send_v2, wait_indexed, wait_until,
};

const TOPIC: &str = "PullTopic";

/// A body and the properties it was sent with.
type SentMessage = (Vec<u8>, Vec<(&'static str, &'static str)>);

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A pull with explicit options.
struct Pull<'a> {
    group: &'a str,
    topic: &'a str,
    queue_id: i32,
    offset: i64,
    max: i32,
    subscription: Option<&'a str>,
    sub_version: i64,
    suspend_ms: Option<i64>,
    commit: Option<i64>,
}

impl<'a> Pull<'a> {
    fn new(group: &'a str, topic: &'a str, offset: i64) -> Self {
        Pull {
            group,
            topic,
            queue_id: 0,
            offset,
            max: 32,
            subscription: Some("*"),
            sub_version: 0,
            suspend_ms: None,
            commit: None,
        }
    }

    fn build(&self) -> RemotingCommand {
        let header = PullMessageRequestHeader {
            consumer_group: self.group.to_owned(),
            topic: self.topic.to_owned(),
            queue_id: self.queue_id,
            queue_offset: self.offset,
            max_msg_nums: self.max,
            sys_flag: pull_sys_flag::build(
                self.commit.is_some(),
                self.suspend_ms.is_some(),
                self.subscription.is_some(),
                false,
            ),
            commit_offset: self.commit.unwrap_or(0),
            suspend_timeout_millis: self.suspend_ms.unwrap_or(0),
            subscription: self.subscription.map(str::to_owned),
            sub_version: self.sub_version,
            expression_type: Some("TAG".to_owned()),
            ..Default::default()
        };
        request_with_header(RequestCode::PullMessage, &header)
    }
}

fn ext_i64(rsp: &RemotingCommand, key: &str) -> i64 {
    rsp.ext(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("response lacks numeric ext {key}: {rsp:?}"))
}

fn records(rsp: &RemotingCommand) -> Vec<MessageExt> {
    let body = rsp.body.clone().unwrap_or_default();
    decode_records(&body, true).expect("pull body decodes as stored records")
}

async fn wait_max_offset(broker: &TestBroker, topic: &str, queue_id: i32, at_least: i64) {
    let store = broker.store().clone();
    let topic = topic.to_owned();
    assert!(
        wait_until(|| {
            let store = store.clone();
            let topic = topic.clone();
            async move { store.get_max_offset_in_queue(&topic, queue_id) >= at_least }
        })
        .await,
        "queue {topic}:{queue_id} never reached offset {at_least}"
    );
}

async fn send_ok(broker: &TestBroker, request: RemotingCommand) -> SendMessageResponseHeader {
    let rsp = broker.invoke(request).await;
    assert_eq!(rsp.code, 0, "send failed: {rsp:?}");
    rsp.decode_header().expect("send response header")
}

#[tokio::test]
async fn send_then_pull_back_byte_identical() {
    let broker = TestBroker::start().await;
    let sent: Vec<SentMessage> = vec![
        (
            b"first body".to_vec(),
            vec![("TAGS", "TagA"), ("KEYS", "k1 k2"), ("WAIT", "true")],
        ),
        (
            (0..=255u8).collect(),
            vec![
                ("TAGS", "TagB"),
                ("custom", "v\u{e9}"),
                ("UNIQ_KEY", "AABBCC"),
            ],
        ),
        (vec![0u8; 3000], vec![("WAIT", "false")]),
    ];
    send_ok(&broker, send_v1(TOPIC, 0, &sent[0].0, &sent[0].1)).await;
    send_ok(&broker, send_v2(TOPIC, 0, &sent[1].0, &sent[1].1)).await;
    send_ok(&broker, send_v1(TOPIC, 0, &sent[2].0, &sent[2].1)).await;
    send_ok(&broker, send_batch(TOPIC, 0, &[b"b1", b"b2"], "TagBatch")).await;
    wait_max_offset(&broker, TOPIC, 0, 5).await;

    let rsp = broker
        .invoke(Pull::new("pull_group", TOPIC, 0).build())
        .await;
    assert_eq!(rsp.code, ResponseCode::Success.code(), "{rsp:?}");
    assert_eq!(rsp.remark.as_deref(), Some("FOUND"));
    assert_eq!(ext_i64(&rsp, "nextBeginOffset"), 5);
    assert_eq!(ext_i64(&rsp, "minOffset"), 0);
    assert_eq!(ext_i64(&rsp, "maxOffset"), 5);
    assert_eq!(ext_i64(&rsp, "suggestWhichBrokerId"), 0);
    let got = records(&rsp);
    assert_eq!(got.len(), 5);
    for (i, (body, props)) in sent.iter().enumerate() {
        let msg = &got[i];
        assert_eq!(msg.topic, TOPIC);
        assert_eq!(msg.queue_offset, i as i64);
        assert_eq!(&msg.body[..], &body[..], "body {i} differs");
        for (k, v) in props {
            assert_eq!(
                msg.properties.get(k),
                Some(*v),
                "property {k} of message {i}"
            );
        }
    }
    assert_eq!(got[0].tags(), Some("TagA"));
    assert_eq!(got[1].tags(), Some("TagB"));
    assert_eq!(got[2].tags(), None);
    assert_eq!(
        (&got[3].body[..], &got[4].body[..]),
        (&b"b1"[..], &b"b2"[..])
    );
    assert_eq!(got[4].tags(), Some("TagBatch"));

    // maxMsgNums bounds the batch and nextBeginOffset continues from there.
    let mut partial = Pull::new("pull_group", TOPIC, 1);
    partial.max = 2;
    let rsp = broker.invoke(partial.build()).await;
    assert_eq!(records(&rsp).len(), 2);
    assert_eq!(ext_i64(&rsp, "nextBeginOffset"), 3);
    broker.shutdown().await;
}

#[tokio::test]
async fn tag_filter_by_hash() {
    let broker = TestBroker::start().await;
    for tags in ["TagA", "TagB", "TagA", "", "TagC"] {
        let props: Vec<(&str, &str)> = if tags.is_empty() {
            vec![]
        } else {
            vec![("TAGS", tags)]
        };
        send_ok(&broker, send_v2(TOPIC, 0, tags.as_bytes(), &props)).await;
    }
    wait_max_offset(&broker, TOPIC, 0, 5).await;

    let mut only_a = Pull::new("tag_group", TOPIC, 0);
    only_a.subscription = Some("TagA");
    let rsp = broker.invoke(only_a.build()).await;
    assert_eq!(rsp.code, 0, "{rsp:?}");
    let got: Vec<i64> = records(&rsp).iter().map(|m| m.queue_offset).collect();
    assert_eq!(got, vec![0, 2]);
    assert_eq!(ext_i64(&rsp, "nextBeginOffset"), 5);

    let mut b_or_c = Pull::new("tag_group", TOPIC, 0);
    b_or_c.subscription = Some(" TagB || TagC ");
    let got: Vec<String> = records(&broker.invoke(b_or_c.build()).await)
        .iter()
        .filter_map(|m| m.tags().map(str::to_owned))
        .collect();
    assert_eq!(got, vec!["TagB", "TagC"]);

    // Nothing matches: retry immediately from past the scanned entries.
    let mut none = Pull::new("tag_group", TOPIC, 0);
    none.subscription = Some("TagZ");
    let rsp = broker.invoke(none.build()).await;
    assert_eq!(rsp.code, ResponseCode::PullRetryImmediately.code());
    assert_eq!(rsp.remark.as_deref(), Some("NO_MATCHED_MESSAGE"));
    assert_eq!(ext_i64(&rsp, "nextBeginOffset"), 5);
    broker.shutdown().await;
}

#[tokio::test]
async fn offset_moved_and_overflow_cases() {
    let broker = TestBroker::start().await;
    for i in 0..3 {
        send_ok(&broker, send_v2(TOPIC, 0, format!("m{i}").as_bytes(), &[])).await;
    }
    wait_max_offset(&broker, TOPIC, 0, 3).await;
    let g = "offset_group";

    // offset == max: nothing yet (a long-poll candidate), next stays.
    let rsp = broker.invoke(Pull::new(g, TOPIC, 3).build()).await;
    assert_eq!(rsp.code, ResponseCode::PullNotFound.code());
    assert_eq!(rsp.remark.as_deref(), Some("OFFSET_OVERFLOW_ONE"));
    assert_eq!(ext_i64(&rsp, "nextBeginOffset"), 3);

    // offset > max: moved back to max.
    let rsp = broker.invoke(Pull::new(g, TOPIC, 10).build()).await;
    assert_eq!(rsp.code, ResponseCode::PullOffsetMoved.code());
    assert_eq!(rsp.remark.as_deref(), Some("OFFSET_OVERFLOW_BADLY"));
    assert_eq!(ext_i64(&rsp, "nextBeginOffset"), 3);

    // offset < min: moved to min.
    let rsp = broker.invoke(Pull::new(g, TOPIC, -1).build()).await;
    assert_eq!(rsp.code, ResponseCode::PullOffsetMoved.code());
    assert_eq!(rsp.remark.as_deref(), Some("OFFSET_TOO_SMALL"));
    assert_eq!(ext_i64(&rsp, "nextBeginOffset"), 0);

    // An empty queue: from 0 it is "not found", from elsewhere the offset moved to 0.
    let mut empty = Pull::new(g, TOPIC, 0);
    empty.queue_id = 1;
    let rsp = broker.invoke(empty.build()).await;
    assert_eq!(rsp.code, ResponseCode::PullNotFound.code());
    assert_eq!(rsp.remark.as_deref(), Some("NO_MESSAGE_IN_QUEUE"));
    empty.offset = 7;
    let rsp = broker.invoke(empty.build()).await;
    assert_eq!(rsp.code, ResponseCode::PullOffsetMoved.code());
    assert_eq!(ext_i64(&rsp, "nextBeginOffset"), 0);
    broker.shutdown().await;
}

#[tokio::test]
async fn pull_checks_topic_queue_header_and_subscription() {
    let broker = TestBroker::start().await;
    send_ok(&broker, send_v2(TOPIC, 0, b"x", &[("TAGS", "TagA")])).await;
    wait_max_offset(&broker, TOPIC, 0, 1).await;
    let g = "check_group";

    let rsp = broker.invoke(Pull::new(g, "NoSuchTopic", 0).build()).await;
    assert_eq!(rsp.code, ResponseCode::TopicNotExist.code());

    let mut bad_queue = Pull::new(g, TOPIC, 0);
    bad_queue.queue_id = 99;
    let rsp = broker.invoke(bad_queue.build()).await;
    assert_eq!(rsp.code, ResponseCode::SystemError.code());
    assert!(
        rsp.remark
            .as_deref()
            .is_some_and(|r| r.contains("queueId[99]"))
    );

    let mut missing = Pull::new(g, TOPIC, 0).build();
    missing.ext_mut().remove("queueOffset");
    let rsp = broker.invoke(missing).await;
    assert_eq!(rsp.code, ResponseCode::SystemError.code());
    assert!(
        rsp.remark
            .as_deref()
            .is_some_and(|r| r.contains("queueOffset")),
        "{rsp:?}"
    );
    let mut malformed = Pull::new(g, TOPIC, 0).build();
    malformed.ext_mut().insert("maxMsgNums", "lots");
    let rsp = broker.invoke(malformed).await;
    assert!(
        rsp.remark
            .as_deref()
            .is_some_and(|r| r.contains("maxMsgNums")),
        "{rsp:?}"
    );

    // Without the SUBSCRIPTION bit the heartbeat's subscription is used.
    let mut from_heartbeat = Pull::new(g, TOPIC, 0);
    from_heartbeat.subscription = None;
    let rsp = broker.invoke(from_heartbeat.build()).await;
    assert_eq!(
        rsp.code,
        ResponseCode::SubscriptionNotExist.code(),
        "{rsp:?}"
    );
    let rsp = broker.invoke(heartbeat("client-1", g, TOPIC)).await;
    assert_eq!(rsp.code, 0);
    let stored = broker
        .ctx()
        .consumers
        .subscription(g, TOPIC)
        .expect("heartbeat registered the subscription");
    from_heartbeat.sub_version = stored.sub_version;
    let rsp = broker.invoke(from_heartbeat.build()).await;
    assert_eq!(rsp.code, 0, "{rsp:?}");
    assert_eq!(records(&rsp).len(), 1);
    from_heartbeat.sub_version = stored.sub_version + 1;
    let rsp = broker.invoke(from_heartbeat.build()).await;
    assert_eq!(rsp.code, ResponseCode::SubscriptionNotLatest.code());
    let mut other_topic = Pull::new(g, "%RETRY%nobody", 0);
    other_topic.subscription = None;
    let rsp = broker.invoke(other_topic.build()).await;
    assert!(
        rsp.code == ResponseCode::SubscriptionNotExist.code()
            || rsp.code == ResponseCode::TopicNotExist.code()
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn commit_bit_stores_the_offset_whatever_the_result() {
    let broker = TestBroker::start().await;
    send_ok(&broker, send_v2(TOPIC, 0, b"x", &[])).await;
    wait_max_offset(&broker, TOPIC, 0, 1).await;
    let g = "commit_group";
    let mut pull = Pull::new(g, TOPIC, 5);
    pull.commit = Some(1);
    let rsp = broker.invoke(pull.build()).await;
    assert_eq!(rsp.code, ResponseCode::PullOffsetMoved.code());
    let query = QueryConsumerOffsetRequestHeader {
        consumer_group: g.to_owned(),
        topic: TOPIC.to_owned(),
        queue_id: 0,
        set_zero_if_not_found: Some(false),
        ..Default::default()
    };
    let rsp = broker
        .invoke(request_with_header(
            RequestCode::QueryConsumerOffset,
            &query,
        ))
        .await;
    assert_eq!(rsp.code, 0, "{rsp:?}");
    assert_eq!(ext_i64(&rsp, "offset"), 1);
    broker.shutdown().await;
}

/// Holds a pull at the queue's end, waits until the broker holds it, then sends.
async fn held_pull_round(
    broker: &TestBroker,
    group: &str,
    offset: i64,
    body: &[u8],
) -> (RemotingCommand, Duration, Duration) {
    let mut pull = Pull::new(group, TOPIC, offset);
    // 30 s: only the wake-up on arrival can answer within the test's 20 s guard.
    pull.suspend_ms = Some(30_000);
    let client = broker.client.clone();
    let addr = broker.addr.clone();
    let request = pull.build();
    let before = broker.ctx().pull_hold.held_count();
    let pending = tokio::spawn(async move {
        let rsp = client.invoke(&addr, request, Duration::from_secs(20)).await;
        (rsp, tokio::time::Instant::now())
    });
    let hold = broker.ctx().pull_hold.clone();
    assert!(
        wait_until(|| {
            let hold = hold.clone();
            async move { hold.held_count() > before }
        })
        .await,
        "the pull was never held"
    );
    let sent_at = tokio::time::Instant::now();
    send_ok(broker, send_v2(TOPIC, 0, body, &[])).await;
    let acked_at = tokio::time::Instant::now();
    let (rsp, answered_at) = pending.await.expect("pull task");
    let rsp = rsp.expect("held pull answered before the 20 s guard");
    (
        rsp,
        answered_at.saturating_duration_since(sent_at),
        answered_at.saturating_duration_since(acked_at),
    )
}

#[tokio::test]
async fn long_poll_is_woken_by_a_send() {
    let broker = TestBroker::start().await;
    send_ok(&broker, send_v2(TOPIC, 0, b"seed", &[])).await;
    wait_max_offset(&broker, TOPIC, 0, 1).await;
    let (rsp, _, _) = held_pull_round(&broker, "lp_group", 1, b"wake up").await;
    assert_eq!(rsp.code, 0, "{rsp:?}");
    let got = records(&rsp);
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0].body[..], b"wake up");
    assert_eq!(broker.ctx().pull_hold.held_count(), 0);

    // Latency figure: send issued → held pull answered. Reported, not asserted.
    const ROUNDS: usize = 40;
    let mut from_send = Vec::with_capacity(ROUNDS);
    let mut from_ack = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS {
        let offset = 2 + i as i64;
        let (rsp, total, after_ack) = held_pull_round(&broker, "lp_group", offset, b"tick").await;
        assert_eq!(rsp.code, 0, "round {i}: {rsp:?}");
        assert_eq!(records(&rsp)[0].queue_offset, offset);
        from_send.push(total);
        from_ack.push(after_ack);
    }
    from_send.sort();
    from_ack.sort();
    let pct = |v: &[Duration], p: usize| v[(v.len() - 1) * p / 100];
    eprintln!(
        "long-poll wake latency over {ROUNDS} rounds: send issued -> pull answered p50 {:?} p90 {:?} max {:?}; \
         send acked -> pull answered p50 {:?} p90 {:?} max {:?}",
        pct(&from_send, 50),
        pct(&from_send, 90),
        pct(&from_send, 100),
        pct(&from_ack, 50),
        pct(&from_ack, 90),
        pct(&from_ack, 100),
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn held_pulls_are_answered_at_shutdown_and_dropped_on_close() {
    let broker = TestBroker::start().await;
    send_ok(&broker, send_v2(TOPIC, 0, b"seed", &[])).await;
    wait_max_offset(&broker, TOPIC, 0, 1).await;
    // A pull held on a connection that then closes is dropped from the table.
    let other = comet_remoting::RemotingClient::new(comet_remoting::ClientConfig::default());
    let mut pull = Pull::new("close_group", TOPIC, 1);
    pull.suspend_ms = Some(30_000);
    let (client, addr, request) = (other.clone(), broker.addr.clone(), pull.build());
    let _pending =
        tokio::spawn(async move { client.invoke(&addr, request, Duration::from_secs(20)).await });
    let hold = broker.ctx().pull_hold.clone();
    assert!(
        wait_until(|| {
            let h = hold.clone();
            async move { h.held_count() == 1 }
        })
        .await
    );
    other.close_channel(&broker.addr);
    assert!(
        wait_until(|| {
            let h = hold.clone();
            async move { h.held_count() == 0 }
        })
        .await,
        "held pull of a closed channel not dropped"
    );

    // A pull held at shutdown is answered (PULL_NOT_FOUND) instead of timing out.
    let (client, addr, request) = (broker.client.clone(), broker.addr.clone(), pull.build());
    let pending =
        tokio::spawn(async move { client.invoke(&addr, request, Duration::from_secs(20)).await });
    assert!(
        wait_until(|| {
            let h = hold.clone();
            async move { h.held_count() == 1 }
        })
        .await
    );
    let mut broker = broker;
    broker.stop_broker().await;
    let rsp = pending.await.expect("task").expect("answered at shutdown");
    assert_eq!(rsp.code, ResponseCode::PullNotFound.code());
    broker.shutdown().await;
}

#[tokio::test]
async fn query_by_key_unique_key_and_view_by_offset() {
    let broker = TestBroker::start().await;
    let begin = now_millis() - 1000;
    let sent = send_ok(
        &broker,
        send_v2(
            TOPIC,
            0,
            b"findme",
            &[
                ("KEYS", "order-42 other"),
                ("UNIQ_KEY", "7F0000010000ABCDEF0123456789ABCD"),
            ],
        ),
    )
    .await;
    wait_max_offset(&broker, TOPIC, 0, 1).await;

    let query = |key: &str, unique: bool| {
        let header = QueryMessageRequestHeader {
            topic: TOPIC.to_owned(),
            key: key.to_owned(),
            max_num: 10,
            begin_timestamp: begin,
            end_timestamp: now_millis() + 60_000,
            ..Default::default()
        };
        let mut cmd = request_with_header(RequestCode::QueryMessage, &header);
        if unique {
            cmd.ext_mut().insert(UNIQUE_KEY_QUERY, "true");
        }
        cmd
    };
    assert!(wait_indexed(broker.store(), TOPIC, "order-42").await);
    let rsp = broker.invoke(query("order-42", false)).await;
    assert_eq!(rsp.code, 0, "{rsp:?}");
    assert!(rsp.ext("indexLastUpdatePhyoffset").is_some());
    assert_eq!(&records(&rsp)[0].body[..], b"findme");
    let rsp = broker
        .invoke(query("7F0000010000ABCDEF0123456789ABCD", true))
        .await;
    assert_eq!(rsp.code, 0, "{rsp:?}");
    let rsp = broker.invoke(query("no-such-key", false)).await;
    assert_eq!(rsp.code, ResponseCode::QueryNotFound.code());

    let (_, offset) = comet_testkit::decode_msg_id(&sent.msg_id);
    let view = ViewMessageRequestHeader {
        offset,
        ..Default::default()
    };
    let rsp = broker
        .invoke(request_with_header(RequestCode::ViewMessageById, &view))
        .await;
    assert_eq!(rsp.code, 0, "{rsp:?}");
    let got = records(&rsp);
    assert_eq!((got.len(), &got[0].body[..]), (1, &b"findme"[..]));
    let bad = ViewMessageRequestHeader {
        offset: offset + 3,
        ..Default::default()
    };
    let rsp = broker
        .invoke(request_with_header(RequestCode::ViewMessageById, &bad))
        .await;
    assert_eq!(rsp.code, ResponseCode::SystemError.code());
    assert!(
        rsp.remark
            .as_deref()
            .is_some_and(|r| r.contains("can not find message by the offset"))
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn short_polling_answers_after_the_short_hold() {
    let broker = TestBroker::start_with(|c| {
        c.long_polling_enable = false;
        c.short_polling_time_ms = 200;
    })
    .await;
    send_ok(&broker, send_v2(TOPIC, 0, b"seed", &[])).await;
    wait_max_offset(&broker, TOPIC, 0, 1).await;
    let mut pull = Pull::new("short_group", TOPIC, 1);
    // Asks for 30 s; short polling holds for shortPollingTimeMills instead.
    pull.suspend_ms = Some(30_000);
    let rsp = broker
        .client
        .invoke(&broker.addr, pull.build(), Duration::from_secs(20))
        .await
        .expect("answered by the short-polling timer, well before the 20 s guard");
    assert_eq!(rsp.code, ResponseCode::PullNotFound.code());
    assert_eq!(rsp.remark.as_deref(), Some("OFFSET_OVERFLOW_ONE"));
    broker.shutdown().await;
}
