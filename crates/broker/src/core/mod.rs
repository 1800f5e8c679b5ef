//! The broker's operations, one module per operation, with typed arguments and domain results.
//!
//! Every front end reaches the broker through here: the remoting processors decode a request,
//! call an operation and encode its result; the gRPC endpoint converts its protobuf messages to
//! the same arguments; the broker's own services (delay and timer delivery, POP revive,
//! transaction checks) call the operations directly. No operation takes or returns a
//! `RemotingCommand`, so no caller has to dress up as a remoting client to reach its own broker.
//!
//! - [`put`]: storing a message (a producer's send, single or batch, half messages, the delay and
//!   timer rewrites) and the broker's own re-puts.
//! - [`send_back`]: a consumer giving back a message it failed to process (retry topic or DLQ).
//! - [`pull`]: a consumer's pull of a queue.
//! - [`offsets`]: a consumer group's committed offsets, queried and committed.
//! - [`pop`]: a POP consumer's read, with long polling.
//! - [`ack`]: acks of popped messages and changes of their invisible time.
//! - [`end_transaction`]: a transaction's verdict (commit or rollback of its half message).
//!
//! A refused operation returns a [`Refusal`]: the RocketMQ response code and the remark a Java
//! broker gives, which each front end renders its own way (a remoting response, a gRPC status).

pub mod ack;
pub mod end_transaction;
pub mod offsets;
pub mod pop;
pub mod pull;
pub mod put;
pub mod send_back;

use comet_protocol::body::{TopicConfig, perm};
use comet_protocol::code::ResponseCode;

use crate::context::BrokerContext;

/// Why an operation was refused: RocketMQ's response code and a remark for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: ResponseCode,
    pub remark: String,
}

impl Refusal {
    /// A refusal with `code` and `remark`.
    pub fn new(code: ResponseCode, remark: impl Into<String>) -> Self {
        Refusal {
            code,
            remark: remark.into(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.code.name(),
            self.code.code(),
            self.remark
        )
    }
}

impl std::error::Error for Refusal {}

/// The configuration of `topic` for a read: TOPIC_NOT_EXIST when the broker does not have it,
/// NO_PERMISSION ("the topic[..] `reading` message is forbidden", RocketMQ's words) when it is
/// not readable.
pub(crate) fn readable_topic(
    ctx: &BrokerContext,
    topic: &str,
    reading: &str,
) -> Result<TopicConfig, Refusal> {
    let Some(topic_config) = ctx.topic_config.select(topic) else {
        return Err(Refusal::new(
            ResponseCode::TopicNotExist,
            format!("topic[{topic}] not exist, apply first please!"),
        ));
    };
    if !perm::is_readable(topic_config.perm) {
        return Err(Refusal::new(
            ResponseCode::NoPermission,
            format!("the topic[{topic}] {reading} message is forbidden"),
        ));
    }
    Ok(topic_config)
}
