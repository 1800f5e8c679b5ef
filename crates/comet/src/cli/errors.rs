//! Hints for the mistakes a client command's error most likely comes from: a name server address
//! that is a broker's, an HTTP port (console, metrics, gRPC) given as a RocketMQ one, a server
//! that is not running.

use comet_client::{ClientError, NoRouteReason};
use comet_protocol::ProtocolError;
use comet_protocol::code::ResponseCode;
use comet_remoting::RemotingError;

/// Where each kind of server listens by default, for hints.
const DEFAULT_PORTS: &str = "name server 9876, broker 10911, gRPC 8081, web console 8080, \
                             metrics 5557";

/// A hint for `e`, when its causes point to a likely mistake.
pub fn hint(e: &anyhow::Error) -> Option<String> {
    e.chain().find_map(|cause| {
        if let Some(client) = cause.downcast_ref::<ClientError>() {
            return client_hint(client);
        }
        if let Some(remoting) = cause.downcast_ref::<RemotingError>() {
            return remoting_hint(remoting);
        }
        cause
            .downcast_ref::<ProtocolError>()
            .and_then(protocol_hint)
    })
}

fn client_hint(e: &ClientError) -> Option<String> {
    match e {
        ClientError::Broker { addr, code, .. }
            if *code == i32::from(ResponseCode::RequestCodeNotSupported) =>
        {
            Some(format!(
                "{addr} does not serve this request: -n takes a name server's address and -b a \
                 broker's; is {addr} the other kind? (default ports: {DEFAULT_PORTS})"
            ))
        }
        ClientError::NoRoute {
            reason: NoRouteReason::NameServerUnreachable(_),
            namesrv,
            ..
        } => Some(format!(
            "is a name server running at {namesrv}? `-n` (or NAMESRV_ADDR) names it (default \
             ports: {DEFAULT_PORTS})"
        )),
        ClientError::SendFailed { last, .. } => client_hint(last),
        ClientError::Remoting(e) => remoting_hint(e),
        ClientError::Protocol(e) => protocol_hint(e),
        _ => None,
    }
}

fn remoting_hint(e: &RemotingError) -> Option<String> {
    match e {
        RemotingError::ConnectFailed { addr, .. } => Some(format!(
            "nothing accepts connections at {addr}: is the server running, and is this its \
             address? (`comet serve` listens on 127.0.0.1; default ports: {DEFAULT_PORTS})"
        )),
        RemotingError::ConnectionClosed { addr } => Some(format!(
            "{addr} closed the connection without an answer: is it a RocketMQ name server or \
             broker? A gRPC endpoint, for one, closes such connections (default ports: \
             {DEFAULT_PORTS})"
        )),
        RemotingError::Protocol(e) => protocol_hint(e),
        _ => None,
    }
}

fn protocol_hint(e: &ProtocolError) -> Option<String> {
    match e {
        ProtocolError::HttpPeer => Some(format!(
            "the address is an HTTP port (a web console, metrics or gRPC endpoint); RocketMQ \
             clients and tools use the name server's port with -n (default ports: \
             {DEFAULT_PORTS})"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_a_server_does_not_serve_points_at_the_other_kind_of_server() {
        let e = anyhow::Error::new(ClientError::Broker {
            addr: "127.0.0.1:10911".to_owned(),
            code: 3,
            remark: "request type 206 not supported".to_owned(),
        })
        .context("listing topics");
        let hint = hint(&e).expect("a hint");
        assert!(hint.contains("-n takes a name server's address"), "{hint}");
        assert!(hint.contains("name server 9876"), "{hint}");
    }

    #[test]
    fn an_http_answer_names_the_http_ports() {
        let e = anyhow::Error::new(ClientError::Remoting(RemotingError::Protocol(
            ProtocolError::HttpPeer,
        )));
        let hint = hint(&e).expect("a hint");
        assert!(hint.contains("HTTP port"), "{hint}");
    }

    #[test]
    fn other_errors_get_no_hint() {
        let e = anyhow::Error::new(ClientError::Broker {
            addr: "a".to_owned(),
            code: 17,
            remark: "topic not exist".to_owned(),
        });
        assert!(hint(&e).is_none());
    }
}
