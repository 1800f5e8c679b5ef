//! UPDATE_BROKER_CONFIG (`mqadmin updateBrokerConfig`) against a real broker: `brokerPermission`
//! changes while running (sends, pulls, GET_BROKER_CONFIG and the registered routes follow it),
//! and every other update is refused whole with the key named.

mod common;

use comet_protocol::RemotingCommand;
use comet_protocol::body::{TopicRouteData, from_fastjson, perm};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    ConsumerSendMsgBackRequestHeader, CreateTopicRequestHeader, GetRouteInfoRequestHeader,
    request_with_header,
};
use common::*;

const SUCCESS: i32 = 0;
const TOPIC: &str = "PermTopic";

fn update(body: &str) -> RemotingCommand {
    RemotingCommand::request(RequestCode::UpdateBrokerConfig).with_body(body.as_bytes().to_vec())
}

fn create_topic(topic: &str) -> RemotingCommand {
    request_with_header(
        RequestCode::UpdateAndCreateTopic,
        &CreateTopicRequestHeader {
            topic: topic.to_owned(),
            default_topic: "TBW102".to_owned(),
            read_queue_nums: 2,
            write_queue_nums: 2,
            perm: perm::PERM_READ_WRITE,
            ..Default::default()
        },
    )
}

/// CONSUMER_SEND_MSG_BACK of the message at commit-log offset 0.
fn send_back() -> RemotingCommand {
    let header = ConsumerSendMsgBackRequestHeader {
        offset: 0,
        group: "PermGroup".to_owned(),
        origin_topic: Some(TOPIC.to_owned()),
        ..Default::default()
    };
    request_with_header(RequestCode::ConsumerSendMsgBack, &header)
}

/// The `brokerPermission` line of GET_BROKER_CONFIG.
async fn listed_permission(broker: &TestBroker) -> String {
    let rsp = broker
        .invoke(RemotingCommand::request(RequestCode::GetBrokerConfig))
        .await;
    assert_eq!(rsp.code, SUCCESS);
    let text = String::from_utf8(rsp.body.clone().unwrap_or_default().to_vec()).expect("utf8");
    text.lines()
        .find_map(|l| l.strip_prefix("brokerPermission="))
        .expect("brokerPermission listed")
        .to_owned()
}

/// The perm the name server's route of [`TOPIC`] carries.
async fn route_perm(broker: &TestBroker) -> Option<i32> {
    let request = request_with_header(
        RequestCode::GetRouteinfoByTopic,
        &GetRouteInfoRequestHeader {
            topic: TOPIC.to_owned(),
            ..Default::default()
        },
    );
    let rsp = broker.invoke_namesrv(request).await;
    if rsp.code != SUCCESS {
        return None;
    }
    from_fastjson::<TopicRouteData>(&rsp.body.clone().unwrap_or_default())
        .ok()
        .and_then(|r| r.queue_datas.first().map(|q| q.perm))
}

#[tokio::test]
async fn broker_permission_changes_while_running() {
    let broker = TestBroker::start().await;
    assert_eq!(broker.invoke(create_topic(TOPIC)).await.code, SUCCESS);
    assert!(wait_until(|| async { route_perm(&broker).await == Some(6) }).await);
    assert_eq!(
        broker.invoke(send_v1(TOPIC, 0, b"x", &[])).await.code,
        SUCCESS
    );

    // Read only: sends and send-backs are refused, pulls served, the routes lose WRITE.
    let rsp = broker
        .invoke(update("# from a tool\nbrokerPermission = 4\n"))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    assert_eq!(broker.ctx().broker_permission(), perm::PERM_READ);
    assert_eq!(listed_permission(&broker).await, "4");
    let rsp = broker.invoke(send_v1(TOPIC, 0, b"x", &[])).await;
    assert_eq!(rsp.code, ResponseCode::NoPermission.code());
    assert!(
        rsp.remark
            .unwrap_or_default()
            .contains("brokerPermission=4")
    );
    let rsp = broker.invoke(send_back()).await;
    assert_eq!(
        rsp.code,
        ResponseCode::NoPermission.code(),
        "{:?}",
        rsp.remark
    );
    assert_eq!(
        broker.invoke(pull("PermGroup", TOPIC, 0, 0, 1)).await.code,
        SUCCESS
    );
    assert!(
        wait_until(|| async { route_perm(&broker).await == Some(perm::PERM_READ) }).await,
        "the re-registered route never lost WRITE"
    );

    // Write only: pulls are refused.
    assert_eq!(
        broker.invoke(update("brokerPermission=2")).await.code,
        SUCCESS
    );
    let rsp = broker.invoke(pull("PermGroup", TOPIC, 0, 0, 1)).await;
    assert_eq!(rsp.code, ResponseCode::NoPermission.code());

    // Back to read-write: everything is served and the routes are whole again.
    assert_eq!(
        broker.invoke(update("brokerPermission:6")).await.code,
        SUCCESS
    );
    assert_eq!(listed_permission(&broker).await, "6");
    assert_eq!(
        broker.invoke(send_v1(TOPIC, 0, b"x", &[])).await.code,
        SUCCESS
    );
    let rsp = broker.invoke(send_back()).await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    assert!(
        wait_until(|| async { route_perm(&broker).await == Some(6) }).await,
        "the re-registered route never got WRITE back"
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn refused_updates_change_nothing() {
    let broker = TestBroker::start().await;
    let cases = [
        (
            "rocketmqHome=/tmp\nbrokerPermission=4",
            ResponseCode::NoPermission,
            "black list",
        ),
        (
            "brokerConfigPath=/tmp/b.conf",
            ResponseCode::NoPermission,
            "black list",
        ),
        ("configBlackList=", ResponseCode::NoPermission, "black list"),
        (
            "brokerPermission=4\nlistenPort=1",
            ResponseCode::InvalidParameter,
            "listenPort",
        ),
        (
            "brokerPermission=4\nnoSuchKey=1",
            ResponseCode::InvalidParameter,
            "noSuchKey",
        ),
        (
            "brokerPermission=8",
            ResponseCode::InvalidParameter,
            "brokerPermission",
        ),
        (
            "brokerPermission=rw",
            ResponseCode::InvalidParameter,
            "brokerPermission",
        ),
    ];
    for (body, code, named) in cases {
        let rsp = broker.invoke(update(body)).await;
        assert_eq!(rsp.code, code.code(), "{body}: {:?}", rsp.remark);
        let remark = rsp.remark.unwrap_or_default();
        assert!(remark.contains(named), "{body}: {remark}");
        assert_eq!(broker.ctx().broker_permission(), 6, "{body} changed it");
    }
    let rsp = broker
        .invoke(update("listenPort=1"))
        .await
        .remark
        .unwrap_or_default();
    assert!(rsp.contains("only when the broker starts"), "{rsp}");
    let not_utf8 =
        RemotingCommand::request(RequestCode::UpdateBrokerConfig).with_body(vec![0xff, 0xfe]);
    assert_eq!(
        broker.invoke(not_utf8).await.code,
        ResponseCode::SystemError.code()
    );
    assert_eq!(listed_permission(&broker).await, "6");
    broker.shutdown().await;
}
