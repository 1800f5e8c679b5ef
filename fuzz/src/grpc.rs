//! The gRPC (`apache.rocketmq.v2`) messages the broker's gRPC endpoint decodes: every request
//! of `MessagingService` and the Telemetry commands clients stream. The first input byte picks
//! the message type; the rest is its protobuf encoding. Any input must decode or fail cleanly,
//! and an accepted message must decode again, equal, from its own encoding.

use std::fmt::Debug;

use comet_grpc_proto::v2;
use prost::Message;

/// One message type of the `grpc` target.
pub struct GrpcMessage {
    /// The protobuf message name.
    pub name: &'static str,
    /// Decodes the input as this type and checks the round trip.
    pub check: fn(&[u8]),
}

fn round_trip<M: Message + Default + PartialEq + Debug>(data: &[u8]) {
    let Ok(message) = M::decode(data) else {
        return;
    };
    let encoded = message.encode_to_vec();
    let again = M::decode(encoded.as_slice());
    assert!(
        again.is_ok(),
        "an accepted message does not decode from its own encoding"
    );
    // NaN (a float field such as a backoff multiplier) never equals itself.
    if !format!("{message:?}").contains("NaN") {
        assert_eq!(
            again.ok(),
            Some(message),
            "protobuf round trip changed the message"
        );
    }
}

macro_rules! grpc_messages {
    ($($ty:ident),* $(,)?) => {
        /// The message types of the `grpc` target; its selector byte indexes this table (modulo
        /// its length).
        pub static GRPC_MESSAGES: &[GrpcMessage] = &[$(
            GrpcMessage { name: stringify!($ty), check: round_trip::<v2::$ty> },
        )*];
    };
}

grpc_messages!(
    SendMessageRequest,
    QueryRouteRequest,
    TelemetryCommand,
    HeartbeatRequest,
    EndTransactionRequest,
    NotifyClientTerminationRequest,
    QueryAssignmentRequest,
    ReceiveMessageRequest,
    AckMessageRequest,
    ChangeInvisibleDurationRequest,
    ForwardMessageToDeadLetterQueueRequest,
    RecallMessageRequest,
);

/// Checks one gRPC message, chosen by the first byte.
pub fn grpc(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    if let Some(message) = GRPC_MESSAGES.get(usize::from(selector) % GRPC_MESSAGES.len()) {
        (message.check)(rest);
    }
}

fn resource(name: &str) -> Option<v2::Resource> {
    Some(v2::Resource {
        resource_namespace: String::new(),
        name: name.to_owned(),
    })
}

fn seed<M: Message>(name: &str, message: &M) -> Option<Vec<u8>> {
    let index = GRPC_MESSAGES.iter().position(|m| m.name == name)?;
    let mut out = vec![u8::try_from(index).ok()?];
    out.extend(message.encode_to_vec());
    Some(out)
}

/// Seeds of the `grpc` target: requests shaped as the Java 5.0.8 client sends them.
pub fn grpc_seeds() -> Vec<Vec<u8>> {
    let send = v2::SendMessageRequest {
        messages: vec![v2::Message {
            topic: resource("GoldenTopic"),
            user_properties: [("seq".to_owned(), "1".to_owned())].into(),
            system_properties: Some(v2::SystemProperties {
                tag: Some("TagA".to_owned()),
                keys: vec!["key-1".to_owned()],
                message_id: "0102FC0000000108920B25546800000003".to_owned(),
                message_type: v2::MessageType::Transaction as i32,
                message_group: Some("group-1".to_owned()),
                delivery_timestamp: Some(prost_types::Timestamp {
                    seconds: 1_700_000_000,
                    nanos: 0,
                }),
                orphaned_transaction_recovery_duration: Some(prost_types::Duration {
                    seconds: 30,
                    nanos: 0,
                }),
                ..Default::default()
            }),
            body: b"grpc-body-1".to_vec(),
        }],
    };
    let route = v2::QueryRouteRequest {
        topic: resource("GoldenTopic"),
        endpoints: Some(v2::Endpoints {
            scheme: v2::AddressScheme::IPv4 as i32,
            addresses: vec![v2::Address {
                host: "127.0.0.1".to_owned(),
                port: 8081,
            }],
        }),
    };
    let settings = v2::TelemetryCommand {
        status: None,
        command: Some(v2::telemetry_command::Command::Settings(v2::Settings {
            client_type: Some(v2::ClientType::Producer as i32),
            request_timeout: Some(prost_types::Duration {
                seconds: 3,
                nanos: 0,
            }),
            pub_sub: Some(v2::settings::PubSub::Publishing(v2::Publishing {
                topics: vec![v2::Resource {
                    resource_namespace: String::new(),
                    name: "GoldenTopic".to_owned(),
                }],
                max_body_size: 4_194_304,
                validate_message_type: true,
            })),
            backoff_policy: Some(v2::RetryPolicy {
                max_attempts: 3,
                strategy: Some(v2::retry_policy::Strategy::ExponentialBackoff(
                    v2::ExponentialBackoff {
                        initial: None,
                        max: None,
                        multiplier: 2.0,
                    },
                )),
            }),
            ..Default::default()
        })),
    };
    let heartbeat = v2::HeartbeatRequest {
        group: resource("GoldenGroup"),
        client_type: v2::ClientType::PushConsumer as i32,
    };
    let end = v2::EndTransactionRequest {
        topic: resource("GoldenTopic"),
        message_id: "0102FC0000000108920B25546800000003".to_owned(),
        transaction_id: "0102FC0000000108920B25546800000003".to_owned(),
        resolution: v2::TransactionResolution::Commit as i32,
        source: v2::TransactionSource::SourceServerCheck as i32,
        trace_context: String::new(),
    };
    [
        seed("SendMessageRequest", &send),
        seed("QueryRouteRequest", &route),
        seed("TelemetryCommand", &settings),
        seed("HeartbeatRequest", &heartbeat),
        seed("EndTransactionRequest", &end),
        seed(
            "NotifyClientTerminationRequest",
            &v2::NotifyClientTerminationRequest {
                group: resource("GoldenGroup"),
            },
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}
