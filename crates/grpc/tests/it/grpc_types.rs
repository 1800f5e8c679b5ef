//! Timer sends and topic message types on the gRPC endpoint: `delivery_timestamp` parks a
//! message on the timer wheel, topics take only the message type their `message.type` attribute
//! names (set with UPDATE_AND_CREATE_TOPIC as mqadmin `updateTopic -a` sends it), and routes
//! announce that type.

use std::collections::HashMap;
use std::time::Duration;

use comet_grpc_proto::v2;
use comet_grpc_proto::v2::messaging_service_client::MessagingServiceClient;
use comet_protocol::RemotingCommand;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{CreateTopicRequestHeader, request_with_header};
use comet_protocol::message::record::decode_records;
use comet_testkit::grpc::{start_grpc, with_client_id};
use comet_testkit::{TestBroker, pull, wait_until};
use tonic::transport::Channel;

const CLIENT_ID: &str = "grpc-types@1@1@abc";

async fn start_with(
    tweak: impl FnOnce(&mut comet_broker::config::BrokerConfig),
) -> (TestBroker, MessagingServiceClient<Channel>) {
    start_grpc(tweak).await
}

async fn start() -> (TestBroker, MessagingServiceClient<Channel>) {
    start_with(|_| {}).await
}

/// UPDATE_AND_CREATE_TOPIC with one queue and `attributes` as mqadmin `updateTopic -a` sends them.
fn create_topic(topic: &str, attributes: Option<&str>) -> RemotingCommand {
    request_with_header(
        RequestCode::UpdateAndCreateTopic,
        &CreateTopicRequestHeader {
            topic: topic.to_owned(),
            default_topic: "TBW102".to_owned(),
            read_queue_nums: 1,
            write_queue_nums: 1,
            perm: 6,
            attributes: attributes.map(str::to_owned),
            ..Default::default()
        },
    )
}

fn req<T>(message: T) -> tonic::Request<T> {
    with_client_id(message, CLIENT_ID)
}

fn message(topic: &str, id: &str) -> v2::Message {
    v2::Message {
        topic: Some(v2::Resource {
            resource_namespace: String::new(),
            name: topic.to_owned(),
        }),
        user_properties: HashMap::new(),
        system_properties: Some(v2::SystemProperties {
            message_id: id.to_owned(),
            message_type: v2::MessageType::Normal as i32,
            ..Default::default()
        }),
        body: b"body".to_vec(),
    }
}

fn timed(topic: &str, id: &str, deliver_at_ms: i64) -> v2::Message {
    let mut msg = message(topic, id);
    let system = msg.system_properties.as_mut().expect("set");
    system.message_type = v2::MessageType::Delay as i32;
    system.delivery_timestamp = Some(prost_types::Timestamp {
        seconds: deliver_at_ms / 1000,
        nanos: i32::try_from(deliver_at_ms % 1000).expect("under 1000") * 1_000_000,
    });
    msg
}

async fn send(
    client: &mut MessagingServiceClient<Channel>,
    msg: v2::Message,
) -> v2::SendResultEntry {
    let response = client
        .send_message(req(v2::SendMessageRequest {
            messages: vec![msg],
        }))
        .await
        .expect("gRPC OK")
        .into_inner();
    response.entries.into_iter().next().expect("one entry")
}

fn code(entry: &v2::SendResultEntry) -> v2::Code {
    entry
        .status
        .as_ref()
        .map_or(v2::Code::Unspecified, v2::Status::code)
}

fn now_ms() -> i64 {
    comet_protocol::time::now_millis()
}

#[tokio::test]
async fn a_delivery_timestamp_parks_the_message_until_then() {
    let (broker, mut client) = start().await;
    let created = broker
        .invoke(create_topic("GrpcDelay", Some("+message.type=DELAY")))
        .await;
    assert_eq!(created.code, ResponseCode::Success.code(), "{created:?}");

    let deliver_at = now_ms() + 1500;
    let entry = send(&mut client, timed("GrpcDelay", "TIMED1", deliver_at)).await;
    assert_eq!(code(&entry), v2::Code::Ok, "{entry:?}");
    assert_eq!(entry.message_id, "TIMED1");
    assert!(
        !entry.recall_handle.is_empty(),
        "a parked message has a recall handle"
    );
    let store = broker.store().clone();
    let delivered = wait_until(|| {
        let store = store.clone();
        async move { store.get_max_offset_in_queue("GrpcDelay", 0) == 1 }
    })
    .await;
    assert!(delivered, "the timer delivers the message");
    let rsp = broker.invoke(pull("g", "GrpcDelay", 0, 0, 32)).await;
    let stored =
        decode_records(&rsp.body.clone().unwrap_or_default(), true).expect("stored records");
    assert_eq!(stored.len(), 1);
    let first = &stored[0];
    assert_eq!(first.properties.get("UNIQ_KEY"), Some("TIMED1"));
    assert_eq!(
        first.properties.get("TIMER_DELIVER_MS"),
        Some(deliver_at.to_string().as_str())
    );
    assert!(
        first.store_timestamp >= deliver_at - 1000,
        "stored by the timer, not at send time"
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn a_delivery_time_more_than_a_day_ahead_is_illegal() {
    let (broker, mut client) = start().await;
    broker
        .invoke(create_topic("GrpcFar", Some("+message.type=DELAY")))
        .await;
    let day = 24 * 60 * 60 * 1000;
    let far = send(
        &mut client,
        timed("GrpcFar", "FAR", now_ms() + day + 60_000),
    )
    .await;
    assert_eq!(code(&far), v2::Code::IllegalDeliveryTime, "{far:?}");
    let near = send(
        &mut client,
        timed("GrpcFar", "NEAR", now_ms() + day - 60_000),
    )
    .await;
    assert_eq!(code(&near), v2::Code::Ok, "{near:?}");
    broker.shutdown().await;
}

#[tokio::test]
async fn a_message_type_the_topic_does_not_take_conflicts() {
    let (broker, mut client) = start().await;
    broker.invoke(create_topic("GrpcNormal", None)).await;
    broker
        .invoke(create_topic("GrpcDelayOnly", Some("+message.type=DELAY")))
        .await;

    // The type comes from the stored properties: a timer message is DELAY whatever it declares.
    let mut declared_normal = timed("GrpcNormal", "T1", now_ms() + 60_000);
    declared_normal
        .system_properties
        .as_mut()
        .expect("set")
        .message_type = v2::MessageType::Normal as i32;
    let entry = send(&mut client, declared_normal).await;
    assert_eq!(code(&entry), v2::Code::MessagePropertyConflictWithType);
    let entry = send(&mut client, message("GrpcDelayOnly", "N1")).await;
    assert_eq!(code(&entry), v2::Code::MessagePropertyConflictWithType);
    // A DELAY message with a group is DELAY, not FIFO.
    let mut grouped = timed("GrpcDelayOnly", "D1", now_ms() + 60_000);
    grouped
        .system_properties
        .as_mut()
        .expect("set")
        .message_group = Some("g".to_owned());
    assert_eq!(code(&send(&mut client, grouped).await), v2::Code::Ok);
    assert_eq!(
        code(&send(&mut client, message("GrpcNormal", "N2")).await),
        v2::Code::Ok
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn the_type_check_can_be_switched_off() {
    let (broker, mut client) = start_with(|c| c.enable_topic_message_type_check = false).await;
    broker.invoke(create_topic("GrpcLoose", None)).await;
    let entry = send(&mut client, timed("GrpcLoose", "T1", now_ms() + 60_000)).await;
    assert_eq!(code(&entry), v2::Code::Ok, "{entry:?}");
    broker.shutdown().await;
}

#[tokio::test]
async fn route_types_follow_the_attribute_set_by_update_topic() {
    let (broker, mut client) = start().await;
    let created = broker
        .invoke(create_topic("GrpcTyped", Some("+message.type=FIFO")))
        .await;
    assert_eq!(created.code, ResponseCode::Success.code(), "{created:?}");
    let route = |client: &mut MessagingServiceClient<Channel>| {
        let mut client = client.clone();
        async move {
            client
                .query_route(req(v2::QueryRouteRequest {
                    topic: Some(v2::Resource {
                        resource_namespace: String::new(),
                        name: "GrpcTyped".to_owned(),
                    }),
                    endpoints: None,
                }))
                .await
                .expect("gRPC OK")
                .into_inner()
                .message_queues[0]
                .accept_message_types
                .clone()
        }
    };
    assert_eq!(route(&mut client).await, vec![v2::MessageType::Fifo as i32]);
    let changed = broker
        .invoke(create_topic("GrpcTyped", Some("+message.type=TRANSACTION")))
        .await;
    assert_eq!(changed.code, ResponseCode::Success.code());
    assert_eq!(
        route(&mut client).await,
        vec![v2::MessageType::Transaction as i32]
    );

    // MIXED needs enableMixedMessageType; an unknown type is refused.
    let mixed = broker
        .invoke(create_topic("GrpcTyped", Some("+message.type=MIXED")))
        .await;
    assert_eq!(mixed.code, ResponseCode::InvalidParameter.code());
    let unknown = broker
        .invoke(create_topic("GrpcTyped", Some("+message.type=PRIORITY")))
        .await;
    assert_eq!(unknown.code, ResponseCode::SystemError.code());
    assert_eq!(
        route(&mut client).await,
        vec![v2::MessageType::Transaction as i32]
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn mixed_topics_take_every_type_when_enabled() {
    let (broker, mut client) = start_with(|c| c.enable_mixed_message_type = true).await;
    let created = broker
        .invoke(create_topic("GrpcMixed", Some("+message.type=MIXED")))
        .await;
    assert_eq!(created.code, ResponseCode::Success.code(), "{created:?}");
    let mut fifo = message("GrpcMixed", "F1");
    fifo.system_properties.as_mut().expect("set").message_group = Some("g".to_owned());
    for msg in [
        message("GrpcMixed", "N1"),
        fifo,
        timed("GrpcMixed", "D1", now_ms() + 60_000),
    ] {
        let entry = send(&mut client, msg).await;
        assert_eq!(code(&entry), v2::Code::Ok, "{entry:?}");
    }
    tokio::time::timeout(Duration::from_secs(30), broker.shutdown())
        .await
        .expect("shuts down");
}
