//! Consumer-side client management end to end: heartbeat → consumer list → notification of
//! membership changes (by heartbeat, unregister and connection close), consumer offsets
//! (commit/query, QUERY_NOT_FOUND, oneway and answered updates, unknown group), queue offset
//! lookups, queue locks, and CHECK_CLIENT_CONFIG.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use comet_protocol::RemotingCommand;
use comet_protocol::body::{
    GetConsumerListByGroupResponseBody, LockBatchRequestBody, LockBatchResponseBody, MessageQueue,
    SubscriptionData, UnlockBatchRequestBody, from_fastjson, to_fastjson_bytes,
};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    GetConsumerListByGroupRequestHeader, GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader, QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader, UnregisterClientRequestHeader, UpdateConsumerOffsetRequestHeader,
    request_with_header,
};
use comet_remoting::{Channel, ClientConfig, RemotingClient, RequestProcessor};
use comet_testkit::{TestBroker, heartbeat, send_v2, wait_until};
use futures::future::BoxFuture;
use tokio::sync::mpsc;

const TOPIC: &str = "ConsumerTopic";
const GROUP: &str = "consumer_group";

/// Records the consumerGroup of every NOTIFY_CONSUMER_IDS_CHANGED a client receives.
struct NotifyRecorder(mpsc::UnboundedSender<String>);

impl RequestProcessor for NotifyRecorder {
    fn process(
        &self,
        _channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let _ = self
            .0
            .send(request.ext("consumerGroup").unwrap_or_default().to_owned());
        Box::pin(async { None })
    }
}

fn listening_client() -> (RemotingClient, mpsc::UnboundedReceiver<String>) {
    let client = RemotingClient::new(ClientConfig::default());
    let (tx, rx) = mpsc::unbounded_channel();
    client.register(
        RequestCode::NotifyConsumerIdsChanged.code(),
        Arc::new(NotifyRecorder(tx)),
    );
    (client, rx)
}

async fn next_notify(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(comet_testkit::WAIT_DEADLINE, rx.recv())
        .await
        .expect("NOTIFY_CONSUMER_IDS_CHANGED within the deadline")
        .expect("recorder alive")
}

async fn consumer_list(broker: &TestBroker, group: &str) -> RemotingCommand {
    let header = GetConsumerListByGroupRequestHeader {
        consumer_group: group.to_owned(),
        ..Default::default()
    };
    broker
        .invoke(request_with_header(
            RequestCode::GetConsumerListByGroup,
            &header,
        ))
        .await
}

fn ids(rsp: &RemotingCommand) -> Vec<String> {
    let body: GetConsumerListByGroupResponseBody =
        from_fastjson(rsp.body.as_deref().unwrap_or_default()).expect("consumer list body");
    let mut ids = body.consumer_id_list;
    ids.sort();
    ids
}

#[tokio::test]
async fn heartbeat_list_notify_unregister_and_close() {
    let broker = TestBroker::start().await;
    let rsp = consumer_list(&broker, GROUP).await;
    assert_eq!(rsp.code, ResponseCode::SystemError.code());
    assert_eq!(
        rsp.remark.as_deref(),
        Some("no consumer for this group, consumer_group")
    );

    let (a, mut a_notes) = listening_client();
    let rsp = a
        .invoke(
            &broker.addr,
            heartbeat("10.0.0.1@a", GROUP, TOPIC),
            comet_testkit::RPC_TIMEOUT,
        )
        .await
        .expect("hb");
    assert_eq!(rsp.code, 0);
    assert_eq!(
        rsp.version,
        comet_protocol::command::COMET_VERSION,
        "our version is announced"
    );
    assert_eq!(next_notify(&mut a_notes).await, GROUP);
    assert_eq!(
        ids(&consumer_list(&broker, GROUP).await),
        vec!["10.0.0.1@a"]
    );
    // The heartbeat created the group's retry topic.
    assert!(
        broker
            .ctx()
            .topic_config
            .select("%RETRY%consumer_group")
            .is_some()
    );

    // The same heartbeat again changes nothing: no notification.
    a.invoke(
        &broker.addr,
        heartbeat("10.0.0.1@a", GROUP, TOPIC),
        comet_testkit::RPC_TIMEOUT,
    )
    .await
    .expect("hb");

    let (b, _b_notes) = listening_client();
    b.invoke(
        &broker.addr,
        heartbeat("10.0.0.2@b", GROUP, TOPIC),
        comet_testkit::RPC_TIMEOUT,
    )
    .await
    .expect("hb");
    assert_eq!(
        next_notify(&mut a_notes).await,
        GROUP,
        "a second member is announced"
    );
    assert!(
        a_notes.try_recv().is_err(),
        "the repeated heartbeat notified nobody"
    );
    assert_eq!(
        ids(&consumer_list(&broker, GROUP).await),
        vec!["10.0.0.1@a", "10.0.0.2@b"]
    );

    // B leaves by closing its connection.
    b.close_channel(&broker.addr);
    assert_eq!(
        next_notify(&mut a_notes).await,
        GROUP,
        "a departure is announced"
    );
    assert_eq!(
        ids(&consumer_list(&broker, GROUP).await),
        vec!["10.0.0.1@a"]
    );

    // A unregisters: the group disappears.
    let header = UnregisterClientRequestHeader {
        client_id: "10.0.0.1@a".to_owned(),
        consumer_group: Some(GROUP.to_owned()),
        producer_group: Some(comet_testkit::PRODUCER_GROUP.to_owned()),
        ..Default::default()
    };
    let rsp = a
        .invoke(
            &broker.addr,
            request_with_header(RequestCode::UnregisterClient, &header),
            comet_testkit::RPC_TIMEOUT,
        )
        .await
        .expect("unregister");
    assert_eq!(rsp.code, 0);
    assert_eq!(
        consumer_list(&broker, GROUP).await.code,
        ResponseCode::SystemError.code()
    );
    assert!(
        broker
            .ctx()
            .producers
            .group_channels(comet_testkit::PRODUCER_GROUP)
            .is_empty()
    );

    // A heartbeat without a body is refused, naming what is missing.
    let rsp = broker
        .invoke(RemotingCommand::request(RequestCode::HeartBeat))
        .await;
    assert_eq!(rsp.code, ResponseCode::SystemError.code());
    assert!(
        rsp.remark
            .as_deref()
            .is_some_and(|r| r.contains("HeartbeatData"))
    );
    let rsp = broker
        .invoke(RemotingCommand::request(RequestCode::HeartBeat).with_body(&b"{not json"[..]))
        .await;
    assert_eq!(rsp.code, ResponseCode::SystemError.code());
    a.shutdown().await;
    b.shutdown().await;
    broker.shutdown().await;
}

fn query_offset(group: &str, queue_id: i32, zero: Option<bool>) -> RemotingCommand {
    let header = QueryConsumerOffsetRequestHeader {
        consumer_group: group.to_owned(),
        topic: TOPIC.to_owned(),
        queue_id,
        set_zero_if_not_found: zero,
        ..Default::default()
    };
    request_with_header(RequestCode::QueryConsumerOffset, &header)
}

fn update_offset(group: &str, topic: &str, queue_id: i32, offset: i64) -> RemotingCommand {
    let header = UpdateConsumerOffsetRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id,
        commit_offset: offset,
        ..Default::default()
    };
    request_with_header(RequestCode::UpdateConsumerOffset, &header)
}

fn offset_of(rsp: &RemotingCommand) -> i64 {
    rsp.ext("offset")
        .or_else(|| rsp.ext("timestamp"))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no offset in {rsp:?}"))
}

#[tokio::test]
async fn consumer_offsets_commit_query_and_not_found() {
    let broker = TestBroker::start().await;
    for i in 0..3 {
        let rsp = broker
            .invoke(send_v2(TOPIC, 0, format!("m{i}").as_bytes(), &[]))
            .await;
        assert_eq!(rsp.code, 0);
    }
    let store = broker.store().clone();
    assert!(
        wait_until(|| {
            let s = store.clone();
            async move { s.get_max_offset_in_queue(TOPIC, 0) == 3 }
        })
        .await
    );

    // A new group: not found when zero is refused, or on an empty queue; 0 when allowed and the
    // queue still holds its first message.
    let rsp = broker
        .invoke(query_offset("new_group", 0, Some(false)))
        .await;
    assert_eq!(rsp.code, ResponseCode::QueryNotFound.code());
    let rsp = broker.invoke(query_offset("new_group", 1, None)).await;
    assert_eq!(rsp.code, ResponseCode::QueryNotFound.code());
    let rsp = broker.invoke(query_offset("new_group", 0, None)).await;
    assert_eq!((rsp.code, offset_of(&rsp)), (0, 0));

    // Updates need a known group (5.x): unknown → SUBSCRIPTION_GROUP_NOT_EXIST.
    let rsp = broker
        .invoke(update_offset("never_seen", TOPIC, 0, 2))
        .await;
    assert_eq!(rsp.code, ResponseCode::SubscriptionGroupNotExist.code());
    broker.invoke(heartbeat("10.0.0.1@a", GROUP, TOPIC)).await;
    let rsp = broker
        .invoke(update_offset(GROUP, "NoSuchTopic", 0, 2))
        .await;
    assert_eq!(rsp.code, ResponseCode::TopicNotExist.code());

    // An answered update (Go sends it with flag 0) and then a lower one, which replaces it.
    let rsp = broker.invoke(update_offset(GROUP, TOPIC, 0, 3)).await;
    assert_eq!(rsp.code, 0, "{rsp:?}");
    assert_eq!(
        offset_of(&broker.invoke(query_offset(GROUP, 0, Some(false))).await),
        3
    );
    broker
        .invoke_oneway(update_offset(GROUP, TOPIC, 0, 1))
        .await;
    let offsets = broker.ctx().consumer_offsets.clone();
    assert!(
        wait_until(|| {
            let o = offsets.clone();
            async move { o.query_offset(GROUP, TOPIC, 0) == 1 }
        })
        .await,
        "oneway update applied"
    );

    // Missing header fields are named.
    let mut bad = query_offset(GROUP, 0, None);
    bad.ext_mut().remove("topic");
    let rsp = broker.invoke(bad).await;
    assert_eq!(rsp.code, ResponseCode::SystemError.code());
    assert!(rsp.remark.as_deref().is_some_and(|r| r.contains("topic")));
    broker.shutdown().await;
}

#[tokio::test]
async fn queue_offset_lookups() {
    let broker = TestBroker::start().await;
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    for i in 0..4 {
        assert_eq!(
            broker
                .invoke(send_v2(TOPIC, 0, format!("m{i}").as_bytes(), &[]))
                .await
                .code,
            0
        );
    }
    let store = broker.store().clone();
    assert!(
        wait_until(|| {
            let s = store.clone();
            async move { s.get_max_offset_in_queue(TOPIC, 0) == 4 }
        })
        .await
    );

    let max = GetMaxOffsetRequestHeader {
        topic: TOPIC.to_owned(),
        queue_id: 0,
        ..Default::default()
    };
    assert_eq!(
        offset_of(
            &broker
                .invoke(request_with_header(RequestCode::GetMaxOffset, &max))
                .await
        ),
        4
    );
    let min = GetMinOffsetRequestHeader {
        topic: TOPIC.to_owned(),
        queue_id: 0,
        ..Default::default()
    };
    assert_eq!(
        offset_of(
            &broker
                .invoke(request_with_header(RequestCode::GetMinOffset, &min))
                .await
        ),
        0
    );
    let earliest = GetEarliestMsgStoretimeRequestHeader {
        topic: TOPIC.to_owned(),
        queue_id: 0,
        ..Default::default()
    };
    let first_time = offset_of(
        &broker
            .invoke(request_with_header(
                RequestCode::GetEarliestMsgStoretime,
                &earliest,
            ))
            .await,
    );
    assert!(
        first_time >= before,
        "earliest store time {first_time} precedes the first send {before}"
    );

    let search = |timestamp: i64, upper: bool| {
        let header = SearchOffsetRequestHeader {
            topic: TOPIC.to_owned(),
            queue_id: 0,
            timestamp,
            boundary_type: upper.then_some(comet_protocol::headers::BoundaryType::Upper),
            ..Default::default()
        };
        request_with_header(RequestCode::SearchOffsetByTimestamp, &header)
    };
    assert_eq!(
        offset_of(&broker.invoke(search(before - 60_000, false)).await),
        0
    );
    let far_future = first_time + 3_600_000;
    assert_eq!(
        offset_of(&broker.invoke(search(far_future, true)).await),
        3,
        "upper: the last stored before"
    );

    let broker_offset = broker
        .invoke(RemotingCommand::request(RequestCode::QueryBrokerOffset))
        .await;
    assert_eq!(offset_of(&broker_offset), broker.store().max_phy_offset());
    let all = broker
        .invoke(RemotingCommand::request(RequestCode::GetAllConsumerOffset))
        .await;
    assert_eq!(all.code, 0, "{all:?}");
    assert!(all.body.is_some());
    broker.shutdown().await;
}

fn lock_request(code: RequestCode, client: &str, queues: &[i32]) -> RemotingCommand {
    let mq_set: BTreeSet<MessageQueue> = queues
        .iter()
        .map(|q| MessageQueue::new(TOPIC, "broker-a", *q))
        .collect();
    let body = match code {
        RequestCode::LockBatchMq => to_fastjson_bytes(&LockBatchRequestBody {
            consumer_group: GROUP.to_owned(),
            client_id: client.to_owned(),
            only_this_broker: false,
            mq_set,
        }),
        _ => to_fastjson_bytes(&UnlockBatchRequestBody {
            consumer_group: GROUP.to_owned(),
            client_id: client.to_owned(),
            only_this_broker: false,
            mq_set,
        }),
    }
    .expect("lock body encodes");
    RemotingCommand::request(code).with_body(body)
}

async fn locked(broker: &TestBroker, client: &str, queues: &[i32]) -> Vec<i32> {
    let rsp = broker
        .invoke(lock_request(RequestCode::LockBatchMq, client, queues))
        .await;
    assert_eq!(rsp.code, 0, "{rsp:?}");
    let body: LockBatchResponseBody =
        from_fastjson(rsp.body.as_deref().unwrap_or(b"{}")).expect("lock response");
    body.lock_ok_mq_set.iter().map(|mq| mq.queue_id).collect()
}

#[tokio::test]
async fn lock_and_unlock_batches() {
    let broker = TestBroker::start().await;
    assert_eq!(locked(&broker, "c1", &[0, 1]).await, vec![0, 1]);
    assert_eq!(
        locked(&broker, "c2", &[1, 2]).await,
        vec![2],
        "queue 1 belongs to c1"
    );
    assert_eq!(
        locked(&broker, "c1", &[0, 1]).await,
        vec![0, 1],
        "relock refreshes"
    );
    // Only the holder can release.
    let rsp = broker
        .invoke(lock_request(RequestCode::UnlockBatchMq, "c2", &[1]))
        .await;
    assert_eq!(rsp.code, 0);
    assert_eq!(locked(&broker, "c2", &[1]).await, Vec::<i32>::new());
    broker
        .invoke(lock_request(RequestCode::UnlockBatchMq, "c1", &[1]))
        .await;
    assert_eq!(locked(&broker, "c2", &[1]).await, vec![1]);
    // Broken bodies are refused with the reason.
    let rsp = broker
        .invoke(RemotingCommand::request(RequestCode::LockBatchMq))
        .await;
    assert_eq!(rsp.code, ResponseCode::SystemError.code());
    let rsp = broker
        .invoke(RemotingCommand::request(RequestCode::LockBatchMq).with_body(&b"[1,2]"[..]))
        .await;
    assert_eq!(rsp.code, ResponseCode::SystemError.code());
    assert!(
        rsp.remark
            .as_deref()
            .is_some_and(|r| r.contains("LockBatchRequestBody"))
    );
    broker.shutdown().await;
}

/// `rocketmq.broker.rebalance.lockMaxLiveTime` reaches the lock table: a lock nobody refreshes
/// passes to another client once that time is over, and not before.
#[tokio::test]
async fn an_unrefreshed_lock_passes_on_after_the_configured_live_time() {
    const LIVE: Duration = Duration::from_millis(300);
    let broker = TestBroker::start_with(|c| {
        c.rebalance_lock_max_live_time_ms = u64::try_from(LIVE.as_millis()).expect("small")
    })
    .await;
    let locked_at = std::time::Instant::now();
    assert_eq!(locked(&broker, "c1", &[0]).await, vec![0]);
    // Failure guard only: with the 60 s default the loop would run into it.
    let guard = locked_at + Duration::from_secs(20);
    loop {
        if locked(&broker, "c2", &[0]).await == vec![0] {
            break;
        }
        assert!(std::time::Instant::now() < guard, "the lock never expired");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        locked_at.elapsed() >= LIVE,
        "taken over after {:?}, before the live time",
        locked_at.elapsed()
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn check_client_config_accepts_tag_only() {
    let broker = TestBroker::start().await;
    let check = |expression_type: &str| {
        let mut sub = SubscriptionData::from_tag_expression(TOPIC, "TagA", 1);
        sub.expression_type = expression_type.to_owned();
        let body = serde_json::json!({"clientId": "c", "group": GROUP, "subscriptionData": sub});
        RemotingCommand::request(RequestCode::CheckClientConfig)
            .with_body(body.to_string().into_bytes())
    };
    assert_eq!(broker.invoke(check("TAG")).await.code, 0);
    let rsp = broker.invoke(check("SQL92")).await;
    assert_eq!(rsp.code, ResponseCode::SystemError.code());
    assert!(rsp.remark.as_deref().is_some_and(|r| r.contains("SQL92")));
    broker.shutdown().await;
}
