//! Request processors: one per family of request codes, each a
//! [`comet_remoting::RequestProcessor`] built from an `Arc<BrokerContext>`.
//!
//! Produce side (`send`) and administration (`admin`) are registered by the controller directly;
//! the consume side registers itself through [`consume::register`]. Every processor answers a
//! request it cannot decode with an error response naming the offending field and keeps the
//! connection open — a malformed request from one client must cost exactly one response.

pub mod admin;
pub mod send;

pub mod client_manage;
pub mod consume;
pub mod consumer_manage;
pub mod end_transaction;
pub mod lock;
pub mod offset;
pub mod pull;
pub mod query;
pub mod send_back;

use comet_protocol::code::ResponseCode;
use comet_protocol::{ProtocolError, RemotingCommand};

/// An early error answer of a check, boxed so `Result<_, Rejection>` stays small.
pub type Rejection = Box<RemotingCommand>;

/// An error response with `code` and `remark`.
pub fn error_response(code: ResponseCode, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response(code, Some(remark.into()))
}

/// [`error_response`] as a [`Rejection`].
pub fn reject(code: ResponseCode, remark: impl Into<String>) -> Rejection {
    Box::new(error_response(code, remark))
}

/// The answer to a request whose header cannot be decoded: SYSTEM_ERROR (what a Java broker
/// answers when header decoding throws) with a remark naming the field.
pub fn header_error_response(err: &ProtocolError) -> RemotingCommand {
    error_response(
        ResponseCode::SystemError,
        format!("bad request header: {err}"),
    )
}
