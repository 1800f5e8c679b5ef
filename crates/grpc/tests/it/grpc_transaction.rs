//! Transactional messages on the gRPC endpoint: a TRANSACTION send stores a half that consumers
//! do not see, and EndTransaction (naming the topic and the transaction id of the send's entry)
//! commits it into the topic or rolls it back, through the broker's transaction service.

use std::collections::HashMap;

use comet_grpc_proto::v2;
use comet_grpc_proto::v2::messaging_service_client::MessagingServiceClient;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{CreateTopicRequestHeader, request_with_header};
use comet_protocol::message::record::decode_records;
use comet_testkit::grpc::{resource, start_grpc, with_client_id};
use comet_testkit::{TestBroker, pull, wait_until};
use tonic::transport::Channel;

const CLIENT_ID: &str = "grpc-tx@1@1@abc";
const TOPIC: &str = "GrpcTx";

async fn start() -> (TestBroker, MessagingServiceClient<Channel>) {
    let (broker, client) = start_grpc(|_| {}).await;
    let created = broker
        .invoke(request_with_header(
            RequestCode::UpdateAndCreateTopic,
            &CreateTopicRequestHeader {
                topic: TOPIC.to_owned(),
                default_topic: "TBW102".to_owned(),
                read_queue_nums: 1,
                write_queue_nums: 1,
                perm: 6,
                attributes: Some("+message.type=TRANSACTION".to_owned()),
                ..Default::default()
            },
        ))
        .await;
    assert_eq!(created.code, ResponseCode::Success.code(), "{created:?}");
    (broker, client)
}

fn req<T>(message: T) -> tonic::Request<T> {
    with_client_id(message, CLIENT_ID)
}

fn topic() -> Option<v2::Resource> {
    resource(TOPIC)
}

fn transactional(id: &str, recovery_secs: Option<i64>) -> v2::Message {
    v2::Message {
        topic: topic(),
        user_properties: HashMap::new(),
        system_properties: Some(v2::SystemProperties {
            message_id: id.to_owned(),
            message_type: v2::MessageType::Transaction as i32,
            orphaned_transaction_recovery_duration: recovery_secs
                .map(|seconds| prost_types::Duration { seconds, nanos: 0 }),
            ..Default::default()
        }),
        body: id.as_bytes().to_vec(),
    }
}

async fn send(
    client: &mut MessagingServiceClient<Channel>,
    msg: v2::Message,
) -> v2::SendResultEntry {
    client
        .send_message(req(v2::SendMessageRequest {
            messages: vec![msg],
        }))
        .await
        .expect("gRPC OK")
        .into_inner()
        .entries
        .into_iter()
        .next()
        .expect("one entry")
}

async fn end(
    client: &mut MessagingServiceClient<Channel>,
    entry: &v2::SendResultEntry,
    resolution: v2::TransactionResolution,
) -> v2::Code {
    client
        .end_transaction(req(v2::EndTransactionRequest {
            topic: topic(),
            message_id: entry.message_id.clone(),
            transaction_id: entry.transaction_id.clone(),
            resolution: resolution as i32,
            source: v2::TransactionSource::SourceClient as i32,
            trace_context: String::new(),
        }))
        .await
        .expect("gRPC OK")
        .into_inner()
        .status
        .map_or(v2::Code::Unspecified, |s| s.code())
}

fn code(entry: &v2::SendResultEntry) -> v2::Code {
    entry
        .status
        .as_ref()
        .map_or(v2::Code::Unspecified, v2::Status::code)
}

#[tokio::test]
async fn a_committed_half_reaches_the_topic_and_a_rolled_back_one_never_does() {
    let (broker, mut client) = start().await;
    let first = send(&mut client, transactional("TX1", Some(60))).await;
    assert_eq!(code(&first), v2::Code::Ok, "{first:?}");
    assert!(!first.transaction_id.is_empty());
    let second = send(&mut client, transactional("TX2", None)).await;
    assert_eq!(code(&second), v2::Code::Ok, "{second:?}");
    assert_eq!(
        broker.store().get_max_offset_in_queue(TOPIC, 0),
        0,
        "halves are not in the topic"
    );

    assert_eq!(
        end(&mut client, &second, v2::TransactionResolution::Rollback).await,
        v2::Code::Ok
    );
    assert_eq!(
        end(&mut client, &first, v2::TransactionResolution::Commit).await,
        v2::Code::Ok
    );
    let store = broker.store().clone();
    assert!(
        wait_until(|| {
            let store = store.clone();
            async move { store.get_max_offset_in_queue(TOPIC, 0) == 1 }
        })
        .await,
        "the commit reaches the topic"
    );
    let rsp = broker.invoke(pull("g", TOPIC, 0, 0, 32)).await;
    let stored = decode_records(&rsp.body.clone().unwrap_or_default(), true).expect("records");
    let ids: Vec<_> = stored
        .iter()
        .map(|m| m.properties.get("UNIQ_KEY"))
        .collect();
    assert_eq!(ids, vec![Some("TX1")], "only the committed message");
    assert_eq!(
        stored[0].properties.get("CHECK_IMMUNITY_TIME_IN_SECONDS"),
        Some("60")
    );

    // Ended transactions are forgotten; unknown ones are an internal error, as on Apache's proxy.
    assert_eq!(
        end(&mut client, &first, v2::TransactionResolution::Commit).await,
        v2::Code::InternalServerError
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn an_unknown_resolution_leaves_the_half_to_the_check() {
    let (broker, mut client) = start().await;
    let entry = send(&mut client, transactional("TX3", None)).await;
    assert_eq!(code(&entry), v2::Code::Ok);
    assert_eq!(
        end(&mut client, &entry, v2::TransactionResolution::Unspecified).await,
        v2::Code::Ok
    );
    assert_eq!(broker.store().get_max_offset_in_queue(TOPIC, 0), 0);
    broker.shutdown().await;
}

#[tokio::test]
async fn transactional_sends_are_checked() {
    let (broker, mut client) = start().await;
    let long = send(&mut client, transactional("TXLONG", Some(3601))).await;
    assert_eq!(code(&long), v2::Code::BadRequest, "{long:?}");
    let blank = client
        .end_transaction(req(v2::EndTransactionRequest {
            topic: topic(),
            message_id: "X".to_owned(),
            transaction_id: " ".to_owned(),
            resolution: v2::TransactionResolution::Commit as i32,
            source: v2::TransactionSource::SourceClient as i32,
            trace_context: String::new(),
        }))
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(
        blank.status.map(|s| s.code()),
        Some(v2::Code::InvalidTransactionId)
    );
    // A NORMAL topic takes no transactional message.
    broker
        .ctx()
        .topic_config
        .update(comet_protocol::body::TopicConfig::with_queues(
            "GrpcPlain",
            1,
            1,
            6,
        ));
    let mut msg = transactional("TXN", None);
    msg.topic = Some(v2::Resource {
        resource_namespace: String::new(),
        name: "GrpcPlain".to_owned(),
    });
    assert_eq!(
        code(&send(&mut client, msg).await),
        v2::Code::MessagePropertyConflictWithType
    );
    broker.shutdown().await;
}
