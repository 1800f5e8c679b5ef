//! Request processors: one per family of request codes, each a
//! [`comet_remoting::RequestProcessor`] built from an `Arc<BrokerContext>`.
//!
//! [`routes`] binds every code to its processor. Every processor answers a request it cannot
//! decode with an error response naming the offending field and keeps the connection open — a
//! malformed request from one client must cost exactly one response. The helpers below are the
//! ones every processor shares for that.

mod acl_listing;
pub mod admin;
mod admin_clients;
mod admin_topics;
pub mod broker_config;
pub mod call_consumer;
pub mod client_manage;
pub mod consumer_manage;
pub mod end_transaction;
pub mod fence;
pub mod lock;
pub mod offset;
pub mod pop;
pub mod pull;
pub mod query;
pub mod routes;
pub mod send;
pub mod send_back;

use comet_protocol::code::ResponseCode;
use comet_protocol::headers::{CommandHeader, CommandHeaderExt};
use comet_protocol::{ProtocolError, RemotingCommand};

/// An early error answer of a check, boxed so `Result<_, Rejection>` stays small.
pub type Rejection = Box<RemotingCommand>;

/// What a handler answers: its response, or an early error answer (a header that does not
/// decode, a failed check). [`answer`] turns either into the response to write.
pub type Answer = Result<RemotingCommand, Rejection>;

/// An error response with `code` and `remark`.
pub fn error_response(code: ResponseCode, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response(code, Some(remark.into()))
}

/// A SUCCESS response whose body is `value` in fastjson's layout (SYSTEM_ERROR if it cannot be
/// encoded).
pub fn json_body<T: serde::Serialize>(value: &T) -> RemotingCommand {
    match comet_protocol::body::to_fastjson_bytes(value) {
        Ok(body) => RemotingCommand::response(ResponseCode::Success, None).with_body(body),
        Err(e) => error_response(
            ResponseCode::SystemError,
            format!("encoding the body failed: {e}"),
        ),
    }
}

/// [`error_response`] as a [`Rejection`].
pub fn reject(code: ResponseCode, remark: impl Into<String>) -> Rejection {
    Box::new(error_response(code, remark))
}

/// The answer to a request whose header cannot be decoded: SYSTEM_ERROR (what a Java broker
/// answers when header decoding throws) with a remark naming the field.
pub fn bad_request(err: &ProtocolError) -> RemotingCommand {
    error_response(
        ResponseCode::SystemError,
        format!("bad request header: {err}"),
    )
}

/// The request's typed header, or the [`bad_request`] answer when it does not decode.
pub fn decode_header<H: CommandHeader>(request: &RemotingCommand) -> Result<H, Rejection> {
    request
        .decode_header::<H>()
        .map_err(|e| Box::new(bad_request(&e)))
}

/// The response an [`Answer`] stands for.
pub fn answer(answer: Answer) -> RemotingCommand {
    answer.unwrap_or_else(|rejection| *rejection)
}

/// The remote address as RocketMQ prints it (`ip:port`).
pub fn client_host(channel: &comet_remoting::Channel) -> String {
    channel.remote_addr().to_string()
}

/// A small uniform random number below `bound` (queue selection); `0` when `bound <= 1`.
pub fn random_below(bound: i32) -> i32 {
    use std::hash::{BuildHasher, Hasher};
    if bound <= 1 {
        return 0;
    }
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    );
    let r = hasher.finish() % u64::from(bound.unsigned_abs());
    i32::try_from(r).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_request_names_the_field() {
        let rsp = bad_request(&ProtocolError::MissingField("queueId"));
        assert_eq!(rsp.code, ResponseCode::SystemError.code());
        assert!(rsp.remark.as_deref().is_some_and(|r| r.contains("queueId")));
    }

    #[test]
    fn random_below_stays_in_range() {
        for bound in [-3, 0, 1, 2, 7] {
            for _ in 0..50 {
                let r = random_below(bound);
                assert!(r >= 0 && r < bound.max(1));
            }
        }
    }
}
