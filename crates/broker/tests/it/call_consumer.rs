//! GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY relayed by the broker to the consumer
//! client they name: a stand-in client on its own connection records what it is asked and
//! answers, and the admin's connection gets that answer back, or the broker's error when the
//! client is not connected, too old, or the message does not exist.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CommandHeaderExt, ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader, SendMessageResponseHeader, request_with_header,
};
use comet_protocol::message::record;
use comet_remoting::{Channel, ClientConfig, RemotingClient, RequestProcessor};
use comet_testkit::*;
use futures::future::BoxFuture;
use parking_lot::Mutex;

const SUCCESS: i32 = 0;

/// Records every request and answers SUCCESS with the body `answer <code>`.
#[derive(Default)]
struct StandIn {
    seen: Mutex<Vec<RemotingCommand>>,
}

impl RequestProcessor for StandIn {
    fn process(
        &self,
        _channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let body = format!("answer {}", request.code).into_bytes();
        self.seen.lock().push(request);
        Box::pin(async move {
            Some(RemotingCommand::response(ResponseCode::Success, None).with_body(body))
        })
    }
}

/// A client connection that announced itself as `client_id` of `group` with `version`.
async fn stand_in(
    broker: &TestBroker,
    client_id: &str,
    group: &str,
    version: i32,
) -> (RemotingClient, Arc<StandIn>) {
    let client = RemotingClient::new(ClientConfig::default());
    let processor = Arc::new(StandIn::default());
    for code in [
        RequestCode::GetConsumerRunningInfo,
        RequestCode::ConsumeMessageDirectly,
    ] {
        client.register(
            code.into(),
            Arc::clone(&processor) as Arc<dyn RequestProcessor>,
        );
    }
    let mut hb = heartbeat(client_id, group, "T");
    hb.version = version;
    let rsp = client
        .invoke(&broker.addr, hb, RPC_TIMEOUT)
        .await
        .expect("heartbeat answered");
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    (client, processor)
}

fn running_info(group: &str, client_id: &str) -> RemotingCommand {
    request_with_header(
        RequestCode::GetConsumerRunningInfo,
        &GetConsumerRunningInfoRequestHeader {
            consumer_group: group.to_owned(),
            client_id: client_id.to_owned(),
            jstack_enable: Some(true),
            ..Default::default()
        },
    )
}

fn consume_directly(group: &str, client_id: &str, msg_id: &str) -> RemotingCommand {
    request_with_header(
        RequestCode::ConsumeMessageDirectly,
        &ConsumeMessageDirectlyResultRequestHeader {
            consumer_group: group.to_owned(),
            client_id: Some(client_id.to_owned()),
            msg_id: Some(msg_id.to_owned()),
            topic: Some("T".to_owned()),
            ..Default::default()
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_reach_the_named_client_and_its_answer_comes_back() {
    let broker = TestBroker::start().await;
    let (_client, seen) = stand_in(&broker, "127.0.0.1@standin", "cg", 479).await;

    let rsp = broker.invoke(running_info("cg", "127.0.0.1@standin")).await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    assert_eq!(rsp.body.as_deref(), Some(&b"answer 307"[..]));
    {
        let seen = seen.seen.lock();
        let asked = seen.last().expect("the client was asked");
        assert_eq!(asked.code, i32::from(RequestCode::GetConsumerRunningInfo));
        assert_eq!(asked.ext("consumerGroup"), Some("cg"));
        assert_eq!(asked.ext("clientId"), Some("127.0.0.1@standin"));
        assert_eq!(asked.ext("jstackEnable"), Some("true"));
    }

    let sent = broker.invoke(send_v2("T", 0, b"relayed", &[])).await;
    assert_eq!(sent.code, SUCCESS, "{:?}", sent.remark);
    let h: SendMessageResponseHeader = sent.decode_header().expect("send response header");
    let rsp = broker
        .invoke(consume_directly("cg", "127.0.0.1@standin", &h.msg_id))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    assert_eq!(rsp.body.as_deref(), Some(&b"answer 309"[..]));
    let seen = seen.seen.lock();
    let asked = seen.last().expect("the client was asked");
    assert_eq!(asked.code, i32::from(RequestCode::ConsumeMessageDirectly));
    assert_eq!(
        asked.ext("brokerName"),
        Some(broker.config.broker_name.as_str())
    );
    assert_eq!(asked.ext("topicSysFlag"), Some("0"));
    assert_eq!(asked.ext("msgId"), Some(h.msg_id.as_str()));
    let body = asked
        .body
        .as_deref()
        .expect("the stored message is the body");
    let msg = record::decode_records_with(&bytes::Bytes::copy_from_slice(body), false, "")
        .expect("a stored record")
        .pop()
        .expect("one message");
    assert_eq!(
        (msg.topic.as_str(), msg.body.as_ref()),
        ("T", &b"relayed"[..])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_clients_old_clients_and_unknown_messages_are_refused() {
    let broker = TestBroker::start().await;
    let (_old, old_seen) = stand_in(&broker, "127.0.0.1@old", "cg", 10).await;

    let rsp = broker.invoke(running_info("cg", "127.0.0.1@nobody")).await;
    assert_eq!(rsp.code, i32::from(ResponseCode::SystemError));
    assert_eq!(
        rsp.remark.as_deref(),
        Some("The Consumer <cg> <127.0.0.1@nobody> not online")
    );
    let rsp = broker.invoke(running_info("other", "127.0.0.1@old")).await;
    assert_eq!(rsp.code, i32::from(ResponseCode::SystemError));

    let rsp = broker.invoke(running_info("cg", "127.0.0.1@old")).await;
    assert_eq!(rsp.code, i32::from(ResponseCode::SystemError));
    assert!(
        rsp.remark.as_deref().is_some_and(|r| r.contains("too low")),
        "{:?}",
        rsp.remark
    );
    assert!(
        old_seen.seen.lock().is_empty(),
        "a too old client is not asked"
    );

    let (_client, seen) = stand_in(&broker, "127.0.0.1@standin", "cg", 479).await;
    let bogus = "7F00000100002A9F00000000FFFFFF00";
    let rsp = broker
        .invoke(consume_directly("cg", "127.0.0.1@standin", bogus))
        .await;
    assert_eq!(rsp.code, i32::from(ResponseCode::SystemError));
    assert_eq!(
        rsp.remark,
        Some(format!("can not find message by the msgId <{bogus}>"))
    );
    assert!(seen.seen.lock().is_empty(), "nothing to relay");
}
