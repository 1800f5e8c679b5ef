//! The gRPC endpoint (`apache.rocketmq.v2.MessagingService`) of a real broker, called with the
//! tonic client generated from Comet's own protos: routes, the Telemetry settings handshake,
//! Heartbeat and NotifyClientTermination, and sends that a remoting consumer then reads with
//! their properties.

use std::collections::HashMap;
use std::time::Duration;

use comet_grpc::send::{consistent_hash, java_string_hash};
use comet_grpc_proto::v2;
use comet_grpc_proto::v2::messaging_service_client::MessagingServiceClient;
use comet_grpc_proto::v2::settings::PubSub;
use comet_grpc_proto::v2::telemetry_command::Command;
use comet_protocol::RemotingCommand;
use comet_protocol::body::TopicConfig;
use comet_protocol::code::ResponseCode;
use comet_protocol::message::MessageExt;
use comet_protocol::message::record::decode_records;
use comet_testkit::grpc::{code, resource, start_grpc, with_client_id};
use comet_testkit::{TestBroker, pull};
use futures::StreamExt;
use tonic::transport::Channel;

const CLIENT_ID: &str = "grpc-test@1@1@abc";
/// Hang guard for one streamed answer (only a failing test waits this long).
const ANSWER_DEADLINE: Duration = Duration::from_secs(30);

async fn start() -> (TestBroker, MessagingServiceClient<Channel>) {
    start_grpc(|_| {}).await
}

fn create_topic(broker: &TestBroker, name: &str, queues: i32) {
    broker.ctx().topic_config.update(TopicConfig::with_queues(
        name,
        queues,
        queues,
        comet_protocol::body::perm::PERM_READ_WRITE,
    ));
}

fn req<T>(message: T) -> tonic::Request<T> {
    with_client_id(message, CLIENT_ID)
}

fn message(topic: &str, id: &str, body: &[u8]) -> v2::Message {
    v2::Message {
        topic: resource(topic),
        user_properties: HashMap::new(),
        system_properties: Some(v2::SystemProperties {
            message_id: id.to_owned(),
            message_type: v2::MessageType::Normal as i32,
            body_encoding: v2::Encoding::Identity as i32,
            ..Default::default()
        }),
        body: body.to_vec(),
    }
}

async fn send(
    client: &mut MessagingServiceClient<Channel>,
    message: v2::Message,
) -> v2::SendResultEntry {
    let response = client
        .send_message(req(v2::SendMessageRequest {
            messages: vec![message],
        }))
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(response.entries.len(), 1, "{response:?}");
    response.entries.into_iter().next().expect("one entry")
}

fn records(rsp: &RemotingCommand) -> Vec<MessageExt> {
    assert_eq!(rsp.code, ResponseCode::Success.code(), "{rsp:?}");
    decode_records(&rsp.body.clone().unwrap_or_default(), true).expect("stored records")
}

#[tokio::test]
async fn route_announces_the_grpc_endpoint_and_every_queue() {
    let (broker, mut client) = start().await;
    create_topic(&broker, "GrpcRoute", 4);
    let addr = broker.grpc_addr().expect("gRPC endpoint on");

    let route = client
        .query_route(req(v2::QueryRouteRequest {
            topic: resource("GrpcRoute"),
            endpoints: None,
        }))
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(code(route.status.as_ref()), v2::Code::Ok);
    let ids: Vec<i32> = route.message_queues.iter().map(|q| q.id).collect();
    assert_eq!(ids, vec![0, 1, 2, 3]);
    for queue in &route.message_queues {
        assert_eq!(queue.permission(), v2::Permission::ReadWrite);
        assert_eq!(
            queue.accept_message_types,
            vec![v2::MessageType::Normal as i32]
        );
        let broker_of = queue.broker.as_ref().expect("broker");
        assert_eq!(broker_of.name, broker.config.broker_name);
        assert_eq!(broker_of.id, 0);
        let endpoint = &broker_of.endpoints.as_ref().expect("endpoints").addresses[0];
        assert_eq!(endpoint.host, addr.ip().to_string());
        assert_eq!(endpoint.port, i32::from(addr.port()));
    }

    let missing = client
        .query_route(req(v2::QueryRouteRequest {
            topic: resource("GrpcNoSuchTopic"),
            endpoints: None,
        }))
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(code(missing.status.as_ref()), v2::Code::TopicNotFound);

    let anonymous = client
        .query_route(tonic::Request::new(v2::QueryRouteRequest {
            topic: resource("GrpcRoute"),
            endpoints: None,
        }))
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(code(anonymous.status.as_ref()), v2::Code::ClientIdRequired);
    broker.shutdown().await;
}

fn producer_settings(topic: &str) -> v2::TelemetryCommand {
    v2::TelemetryCommand {
        status: None,
        command: Some(Command::Settings(v2::Settings {
            client_type: Some(v2::ClientType::Producer as i32),
            request_timeout: Some(prost_types::Duration {
                seconds: 3,
                nanos: 0,
            }),
            pub_sub: Some(PubSub::Publishing(v2::Publishing {
                topics: vec![v2::Resource {
                    resource_namespace: String::new(),
                    name: topic.to_owned(),
                }],
                max_body_size: 0,
                validate_message_type: false,
            })),
            ..Default::default()
        })),
    }
}

async fn heartbeat(client: &mut MessagingServiceClient<Channel>) -> v2::Code {
    let response = client
        .heartbeat(req(v2::HeartbeatRequest {
            group: None,
            client_type: v2::ClientType::Producer as i32,
        }))
        .await
        .expect("gRPC OK")
        .into_inner();
    code(response.status.as_ref())
}

#[tokio::test]
async fn telemetry_answers_settings_at_once_and_heartbeats_need_them() {
    let (broker, mut client) = start().await;
    create_topic(&broker, "GrpcTelemetry", 1);
    assert_eq!(
        heartbeat(&mut client).await,
        v2::Code::UnrecognizedClientType
    );

    // The client's half stays open, as a real client's does, while the answer is awaited.
    let outbound = futures::stream::iter(vec![producer_settings("GrpcTelemetry")])
        .chain(futures::stream::pending());
    let mut inbound = client
        .telemetry(req(outbound))
        .await
        .expect("stream opens")
        .into_inner();
    let answer = tokio::time::timeout(ANSWER_DEADLINE, inbound.message())
        .await
        .expect("settings answered while the stream is open")
        .expect("gRPC OK")
        .expect("one command");
    assert_eq!(code(answer.status.as_ref()), v2::Code::Ok);
    let Some(Command::Settings(settings)) = answer.command else {
        panic!("settings expected, got {answer:?}");
    };
    let Some(PubSub::Publishing(publishing)) = &settings.pub_sub else {
        panic!("publishing expected, got {settings:?}");
    };
    assert_eq!(publishing.max_body_size, 4 * 1024 * 1024);
    assert!(publishing.validate_message_type);
    assert_eq!(publishing.topics[0].name, "GrpcTelemetry");
    let backoff = settings.backoff_policy.as_ref().expect("backoff");
    assert_eq!(backoff.max_attempts, 3);
    assert!(matches!(
        backoff.strategy,
        Some(v2::retry_policy::Strategy::ExponentialBackoff(_))
    ));

    assert_eq!(heartbeat(&mut client).await, v2::Code::Ok);
    let terminated = client
        .notify_client_termination(req(v2::NotifyClientTerminationRequest { group: None }))
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(code(terminated.status.as_ref()), v2::Code::Ok);
    assert_eq!(
        heartbeat(&mut client).await,
        v2::Code::UnrecognizedClientType
    );

    // Settings without publishing or subscription close the stream with INVALID_ARGUMENT.
    let empty = v2::TelemetryCommand {
        status: None,
        command: Some(Command::Settings(v2::Settings::default())),
    };
    let outbound = futures::stream::iter(vec![empty]).chain(futures::stream::pending());
    let mut refused = client
        .telemetry(req(outbound))
        .await
        .expect("stream opens")
        .into_inner();
    let error = tokio::time::timeout(ANSWER_DEADLINE, refused.message())
        .await
        .expect("refusal arrives")
        .expect_err("stream fails");
    assert_eq!(error.code(), tonic::Code::InvalidArgument);
    broker.shutdown().await;
}

#[tokio::test]
async fn sent_messages_carry_their_fields_as_remoting_properties() {
    let (broker, mut client) = start().await;
    create_topic(&broker, "GrpcSend", 1);

    let mut msg = message("GrpcSend", "0123456789ABCDEF", b"hello over gRPC");
    let system = msg.system_properties.as_mut().expect("set");
    system.tag = Some("TagA".to_owned());
    system.keys = vec!["k1".to_owned(), "k2".to_owned()];
    system.born_timestamp = Some(prost_types::Timestamp {
        seconds: 1_700_000_000,
        nanos: 5_000_000,
    });
    system.born_host = "producer-host".to_owned();
    msg.user_properties
        .insert("color".to_owned(), "blue".to_owned());
    let entry = send(&mut client, msg).await;
    assert_eq!(code(entry.status.as_ref()), v2::Code::Ok, "{entry:?}");
    assert_eq!(entry.message_id, "0123456789ABCDEF");
    assert_eq!(entry.transaction_id, "0123456789ABCDEF");
    assert_eq!(entry.offset, 0);

    let stored = records(&broker.invoke(pull("g", "GrpcSend", 0, 0, 32)).await);
    assert_eq!(stored.len(), 1);
    let m = &stored[0];
    assert_eq!(&m.body[..], b"hello over gRPC");
    assert_eq!(m.properties.get("UNIQ_KEY"), Some("0123456789ABCDEF"));
    assert_eq!(m.properties.get("TAGS"), Some("TagA"));
    assert_eq!(m.properties.get("KEYS"), Some("k1 k2"));
    assert_eq!(m.properties.get("color"), Some("blue"));
    assert_eq!(m.properties.get("__BORNHOST"), Some("producer-host"));
    assert_eq!(m.properties.get("BORN_TIMESTAMP"), Some("1700000000005"));
    assert_eq!(m.properties.get("PGROUP"), Some("GrpcSend"));
    assert_eq!(m.properties.get("RECONSUME_TIME"), Some("0"));
    assert_eq!(m.born_timestamp, 1_700_000_000_005);

    let mut reserved = message("GrpcSend", "ID2", b"x");
    reserved
        .user_properties
        .insert("UNIQ_KEY".to_owned(), "forged".to_owned());
    let entry = send(&mut client, reserved).await;
    assert_eq!(
        code(entry.status.as_ref()),
        v2::Code::IllegalMessagePropertyKey
    );
    let entry = send(&mut client, message("GrpcSend", "ID3", b"")).await;
    assert_eq!(code(entry.status.as_ref()), v2::Code::MessageBodyEmpty);
    let entry = send(&mut client, message("GrpcSend", " ", b"x")).await;
    assert_eq!(code(entry.status.as_ref()), v2::Code::IllegalMessageId);
    assert_eq!(
        broker.store().get_max_offset_in_queue("GrpcSend", 0),
        1,
        "refused messages are not stored"
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn each_message_of_a_request_gets_its_own_entry() {
    let (broker, mut client) = start().await;
    create_topic(&broker, "GrpcMany", 1);
    let response = client
        .send_message(req(v2::SendMessageRequest {
            messages: vec![
                message("GrpcMany", "MANY1", b"one"),
                message("GrpcMany", "MANY2", b"two"),
                message("GrpcMany", "MANY3", b""),
            ],
        }))
        .await
        .expect("gRPC OK")
        .into_inner();
    let summary: Vec<(String, v2::Code, i64)> = response
        .entries
        .iter()
        .map(|e| (e.message_id.clone(), code(e.status.as_ref()), e.offset))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("MANY1".to_owned(), v2::Code::Ok, 0),
            ("MANY2".to_owned(), v2::Code::Ok, 1),
            ("MANY3".to_owned(), v2::Code::MessageBodyEmpty, 0),
        ]
    );
    assert_eq!(code(response.status.as_ref()), v2::Code::MultipleResults);
    let stored = records(&broker.invoke(pull("g", "GrpcMany", 0, 0, 32)).await);
    let ids: Vec<_> = stored
        .iter()
        .map(|m| m.properties.get("UNIQ_KEY"))
        .collect();
    assert_eq!(ids, vec![Some("MANY1"), Some("MANY2")]);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_message_group_stays_on_the_queue_a_java_proxy_picks() {
    let (broker, mut client) = start().await;
    create_topic(&broker, "GrpcFifo", 4);
    broker.ctx().topic_config.update({
        let mut config = TopicConfig::with_queues(
            "GrpcFifo",
            4,
            4,
            comet_protocol::body::perm::PERM_READ_WRITE,
        );
        config
            .attributes
            .insert("+message.type".to_owned(), "FIFO".to_owned());
        config
    });
    let expected = consistent_hash(i64::from(java_string_hash("order-42")), 4);
    for i in 0..3 {
        let mut msg = message("GrpcFifo", &format!("FIFO{i}"), b"step");
        msg.system_properties.as_mut().expect("set").message_group = Some("order-42".to_owned());
        let entry = send(&mut client, msg).await;
        assert_eq!(code(entry.status.as_ref()), v2::Code::Ok, "{entry:?}");
        assert_eq!(entry.offset, i);
    }
    assert_eq!(
        broker.store().get_max_offset_in_queue("GrpcFifo", expected),
        3
    );
    let stored = records(&broker.invoke(pull("g", "GrpcFifo", expected, 0, 32)).await);
    assert!(
        stored
            .iter()
            .all(|m| m.properties.get("__SHARDINGKEY") == Some("order-42"))
    );

    // A FIFO topic refuses a message without a group.
    let entry = send(&mut client, message("GrpcFifo", "NOGROUP", b"x")).await;
    assert_eq!(
        code(entry.status.as_ref()),
        v2::Code::MessagePropertyConflictWithType
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn a_body_over_tonics_default_limit_is_accepted() {
    // A 6 MiB body under an 8 MiB maxMessageSize: the gRPC frame exceeds tonic's 4 MiB default.
    const MAX: usize = 8 * 1024 * 1024;
    let broker = TestBroker::start_with(|c| {
        c.enable_grpc_server = true;
        c.grpc_server_port = 0;
        c.max_message_size = MAX;
        // A record must fit in one CommitLog segment.
        c.mapped_file_size_commit_log = 4 * MAX;
    })
    .await;
    let addr = broker.grpc_addr().expect("gRPC endpoint on");
    let mut client = MessagingServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connects");
    create_topic(&broker, "GrpcLarge", 1);
    let body = vec![b'x'; 6 * 1024 * 1024];
    let entry = send(&mut client, message("GrpcLarge", "LARGE", &body)).await;
    assert_eq!(
        code(entry.status.as_ref()),
        v2::Code::Ok,
        "{:?}",
        entry.status
    );
    let entry = send(
        &mut client,
        message("GrpcLarge", "LARGER", &vec![b'y'; MAX + 1]),
    )
    .await;
    assert_eq!(code(entry.status.as_ref()), v2::Code::MessageBodyTooLarge);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_missing_topic_is_topic_not_found_without_auto_creation() {
    let broker = TestBroker::start_with(|c| {
        c.enable_grpc_server = true;
        c.grpc_server_port = 0;
        c.auto_create_topic_enable = false;
    })
    .await;
    let addr = broker.grpc_addr().expect("gRPC endpoint on");
    let mut client = MessagingServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connects");
    let entry = send(&mut client, message("GrpcNowhere", "ID", b"x")).await;
    assert_eq!(code(entry.status.as_ref()), v2::Code::TopicNotFound);
    broker.shutdown().await;
}
