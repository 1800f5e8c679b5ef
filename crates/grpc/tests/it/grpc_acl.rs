//! ACL on the gRPC endpoint: under `aclEnable` the endpoint is served and every call needs the
//! `authorization` header of a `plain_acl.yml` account; refusals are UNAUTHORIZED in-band.

use std::collections::HashMap;

use comet_acl::signature::grpc_signature;
use comet_grpc_proto::v2;
use comet_grpc_proto::v2::messaging_service_client::MessagingServiceClient;
use comet_testkit::TestBroker;
use tonic::transport::Channel;

const ACL_FILE: &str = r#"
accounts:
  - accessKey: grpcUser
    secretKey: grpcSecret123
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - GrpcAclOpen=PUB
      - GrpcAclRead=SUB
"#;
const DATE_TIME: &str = "20261205T071500Z";

async fn start() -> (
    TestBroker,
    MessagingServiceClient<Channel>,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("plain_acl.yml");
    std::fs::write(&path, ACL_FILE).expect("ACL file written");
    let broker = TestBroker::start_with(|c| {
        c.enable_grpc_server = true;
        c.grpc_server_port = 0;
        c.acl_enable = true;
        c.acl_file = Some(path);
    })
    .await;
    for topic in ["GrpcAclOpen", "GrpcAclRead", "GrpcAclClosed"] {
        broker
            .ctx()
            .topic_config
            .update(comet_protocol::body::TopicConfig::with_queues(
                topic, 1, 1, 6,
            ));
    }
    let addr = broker
        .grpc_addr()
        .expect("gRPC endpoint served under aclEnable");
    let client = MessagingServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connects");
    (broker, client, dir)
}

fn signed<T>(message: T, access_key: &str, secret_key: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    let metadata = request.metadata_mut();
    metadata.insert("x-mq-client-id", "acl@1@1@abc".parse().expect("ASCII"));
    metadata.insert("x-mq-date-time", DATE_TIME.parse().expect("ASCII"));
    let authorization = format!(
        "MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, Signature={}",
        grpc_signature(DATE_TIME, secret_key)
    );
    metadata.insert("authorization", authorization.parse().expect("ASCII"));
    request
}

fn unsigned<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("x-mq-client-id", "acl@1@1@abc".parse().expect("ASCII"));
    request
}

fn send_request(topic: &str) -> v2::SendMessageRequest {
    v2::SendMessageRequest {
        messages: vec![v2::Message {
            topic: Some(v2::Resource {
                resource_namespace: String::new(),
                name: topic.to_owned(),
            }),
            user_properties: HashMap::new(),
            system_properties: Some(v2::SystemProperties {
                message_id: format!("ACL-{topic}"),
                ..Default::default()
            }),
            body: b"acl".to_vec(),
        }],
    }
}

async fn send(
    client: &mut MessagingServiceClient<Channel>,
    request: tonic::Request<v2::SendMessageRequest>,
) -> v2::Code {
    client
        .send_message(request)
        .await
        .expect("gRPC OK")
        .into_inner()
        .status
        .map_or(v2::Code::Unspecified, |s| s.code())
}

async fn route(
    client: &mut MessagingServiceClient<Channel>,
    request: tonic::Request<v2::QueryRouteRequest>,
) -> v2::Code {
    client
        .query_route(request)
        .await
        .expect("gRPC OK")
        .into_inner()
        .status
        .map_or(v2::Code::Unspecified, |s| s.code())
}

fn route_request(topic: &str) -> v2::QueryRouteRequest {
    v2::QueryRouteRequest {
        topic: Some(v2::Resource {
            resource_namespace: String::new(),
            name: topic.to_owned(),
        }),
        endpoints: None,
    }
}

#[tokio::test]
async fn calls_need_a_valid_signature_and_the_permission() {
    let (broker, mut client, _dir) = start().await;
    let ok = |topic| signed(send_request(topic), "grpcUser", "grpcSecret123");
    assert_eq!(send(&mut client, ok("GrpcAclOpen")).await, v2::Code::Ok);
    assert_eq!(
        send(&mut client, unsigned(send_request("GrpcAclOpen"))).await,
        v2::Code::Unauthorized,
        "no authorization header"
    );
    assert_eq!(
        send(
            &mut client,
            signed(send_request("GrpcAclOpen"), "grpcUser", "wrong")
        )
        .await,
        v2::Code::Unauthorized,
        "wrong signature"
    );
    assert_eq!(
        send(
            &mut client,
            signed(send_request("GrpcAclOpen"), "nobody", "grpcSecret123")
        )
        .await,
        v2::Code::Unauthorized,
        "unknown account"
    );
    assert_eq!(
        send(&mut client, ok("GrpcAclRead")).await,
        v2::Code::Unauthorized,
        "SUB only: no PUB"
    );
    assert_eq!(
        send(&mut client, ok("GrpcAclClosed")).await,
        v2::Code::Unauthorized,
        "default DENY"
    );
    assert_eq!(
        broker.store().get_max_offset_in_queue("GrpcAclOpen", 0),
        1,
        "only the signed, permitted send was stored"
    );

    let signed_route = |topic| signed(route_request(topic), "grpcUser", "grpcSecret123");
    assert_eq!(
        route(&mut client, signed_route("GrpcAclRead")).await,
        v2::Code::Ok
    );
    assert_eq!(
        route(&mut client, signed_route("GrpcAclOpen")).await,
        v2::Code::Ok
    );
    assert_eq!(
        route(&mut client, signed_route("GrpcAclClosed")).await,
        v2::Code::Unauthorized
    );
    assert_eq!(
        route(&mut client, unsigned(route_request("GrpcAclRead"))).await,
        v2::Code::Unauthorized
    );
    let heartbeat = client
        .heartbeat(unsigned(v2::HeartbeatRequest {
            group: None,
            client_type: v2::ClientType::Producer as i32,
        }))
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(
        heartbeat.status.map(|s| s.code()),
        Some(v2::Code::Unauthorized)
    );
    broker.shutdown().await;
}

fn receive_request(topic: &str) -> v2::ReceiveMessageRequest {
    v2::ReceiveMessageRequest {
        group: Some(v2::Resource {
            resource_namespace: String::new(),
            name: "GrpcAclGroup".to_owned(),
        }),
        message_queue: Some(v2::MessageQueue {
            topic: Some(v2::Resource {
                resource_namespace: String::new(),
                name: topic.to_owned(),
            }),
            id: -1,
            ..Default::default()
        }),
        batch_size: 1,
        invisible_duration: Some(prost_types::Duration {
            seconds: 30,
            nanos: 0,
        }),
        long_polling_timeout: Some(prost_types::Duration {
            seconds: 0,
            nanos: 0,
        }),
        ..Default::default()
    }
}

/// The status a receive starts its stream with.
async fn receive(
    client: &mut MessagingServiceClient<Channel>,
    request: tonic::Request<v2::ReceiveMessageRequest>,
) -> v2::Code {
    use futures::StreamExt;
    let mut stream = client
        .receive_message(request)
        .await
        .expect("gRPC OK")
        .into_inner();
    match stream.next().await {
        Some(Ok(v2::ReceiveMessageResponse {
            content: Some(v2::receive_message_response::Content::Status(status)),
        })) => status.code(),
        other => panic!("the stream starts with a status: {other:?}"),
    }
}

#[tokio::test]
async fn consumer_calls_need_a_signature_and_a_permission_on_the_topic() {
    let (broker, mut client, _dir) = start().await;
    let ok = |topic| signed(receive_request(topic), "grpcUser", "grpcSecret123");
    // Nothing to receive: the call itself was let through.
    assert_eq!(
        receive(&mut client, ok("GrpcAclRead")).await,
        v2::Code::MessageNotFound
    );
    assert_eq!(
        receive(&mut client, unsigned(receive_request("GrpcAclRead"))).await,
        v2::Code::Unauthorized
    );
    assert_eq!(
        receive(&mut client, ok("GrpcAclClosed")).await,
        v2::Code::Unauthorized
    );
    let assignment = client
        .query_assignment(unsigned(v2::QueryAssignmentRequest {
            topic: receive_request("GrpcAclRead")
                .message_queue
                .and_then(|q| q.topic),
            group: receive_request("GrpcAclRead").group,
            endpoints: None,
        }))
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(
        assignment.status.map(|s| s.code()),
        Some(v2::Code::Unauthorized)
    );
    broker.shutdown().await;
}
