//! NotifyClientTermination: a client shutting down; its settings are dropped, so a later
//! Heartbeat under the same id is refused until it sends Settings again.

use comet_grpc_proto::v2;

use super::clients::GrpcClients;
use super::status;

/// Forgets `client_id`; always OK (an unknown client has nothing to forget).
pub fn notify_client_termination(clients: &GrpcClients, client_id: &str) -> v2::Status {
    if clients.remove(client_id) {
        tracing::debug!(client_id, "gRPC client terminated");
    }
    status::ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn termination_forgets_the_settings() {
        let clients = GrpcClients::default();
        clients.put("c1", v2::Settings::default());
        assert_eq!(
            notify_client_termination(&clients, "c1").code(),
            v2::Code::Ok
        );
        assert!(clients.get("c1").is_none());
        assert_eq!(
            notify_client_termination(&clients, "c1").code(),
            v2::Code::Ok
        );
    }
}
