//! What the gRPC tests share: a broker with its gRPC endpoint on an ephemeral port and a
//! tonic client generated from Comet's own protos, and the small builders every call needs.

use comet_broker::BrokerConfig;
use comet_grpc_proto::v2;
use comet_grpc_proto::v2::messaging_service_client::MessagingServiceClient;
use tonic::transport::Channel;

use crate::cluster::TestBroker;

/// Largest answer the test client accepts (bodies over tonic's 4 MiB default are tested).
pub const MAX_DECODING_BYTES: usize = 64 * 1024 * 1024;

/// A broker serving gRPC on an ephemeral port, with `tweak` applied to its configuration, and a
/// plaintext client connected to it.
pub async fn start_grpc(
    tweak: impl FnOnce(&mut BrokerConfig),
) -> (TestBroker, MessagingServiceClient<Channel>) {
    let broker = TestBroker::start_with(|c| {
        c.enable_grpc_server = true;
        c.grpc_server_port = 0;
        tweak(c);
    })
    .await;
    let addr = broker.grpc_addr().expect("gRPC endpoint on");
    let client = MessagingServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connects")
        .max_decoding_message_size(MAX_DECODING_BYTES);
    (broker, client)
}

/// `message` as a call of the client `client_id` (`x-mq-client-id`).
pub fn with_client_id<T>(message: T, client_id: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("x-mq-client-id", client_id.parse().expect("ASCII"));
    request
}

/// A topic or group by name, in the default namespace.
pub fn resource(name: &str) -> Option<v2::Resource> {
    Some(v2::Resource {
        resource_namespace: String::new(),
        name: name.to_owned(),
    })
}

/// The code of an answer's status (`Unspecified` when it has none).
pub fn code(status: Option<&v2::Status>) -> v2::Code {
    status.map_or(v2::Code::Unspecified, v2::Status::code)
}
