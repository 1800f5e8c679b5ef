//! Heartbeat: a client proves it is alive every 10 s. A client that has not sent its Settings
//! over Telemetry yet is answered UNRECOGNIZED_CLIENT_TYPE, as Apache's proxy does.

use comet_grpc_proto::v2;

use super::clients::GrpcClients;
use super::status;

/// The status answering `request` from `client_id`.
pub fn heartbeat(
    clients: &GrpcClients,
    client_id: &str,
    request: &v2::HeartbeatRequest,
) -> v2::Status {
    match clients.get(client_id) {
        Some(_) => status::ok(),
        None => status::of(
            v2::Code::UnrecognizedClientType,
            format!(
                "client {client_id} ({:?}) sent no settings over Telemetry yet",
                request.client_type()
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_only_after_settings() {
        let clients = GrpcClients::default();
        let request = v2::HeartbeatRequest {
            group: None,
            client_type: v2::ClientType::Producer as i32,
        };
        let before = heartbeat(&clients, "c1", &request);
        assert_eq!(before.code(), v2::Code::UnrecognizedClientType);
        clients.put("c1", v2::Settings::default());
        assert_eq!(heartbeat(&clients, "c1", &request).code(), v2::Code::Ok);
        assert_eq!(
            heartbeat(&clients, "c2", &request).code(),
            v2::Code::UnrecognizedClientType
        );
    }
}
