//! Errors of the client SDK.
//!
//! Callers need to tell apart the three ways a call fails, because each one is handled
//! differently by the retry logic and by applications:
//! - the broker/name server answered with a non-success code (`Broker`, RocketMQ's
//!   `MQBrokerException`): the request reached a server and was refused;
//! - the transport failed (`Remoting`): the request may not have reached anybody, so a producer
//!   may retry it on another broker;
//! - the client refused to act (`Client`, RocketMQ's `MQClientException`): bad arguments, no
//!   route, wrong service state.

use comet_protocol::ProtocolError;
use comet_remoting::RemotingError;
use thiserror::Error;

#[derive(Debug, Clone, Error)]
/// Why a client call failed.
pub enum ClientError {
    /// The server answered with response code `code`.
    #[error("broker/name server at {addr} answered code {code}: {remark}")]
    Broker {
        /// Address of the server that answered.
        addr: String,
        /// The response code (RocketMQ `ResponseCode`).
        code: i32,
        /// The server's remark.
        remark: String,
    },
    /// The request could not be delivered or answered (connect failure, timeout, closed channel).
    #[error(transparent)]
    Remoting(#[from] RemotingError),
    /// A response or a message could not be decoded.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// A producer or consumer with this group is already registered in this client instance.
    #[error(
        "the group {0} is already registered in this client instance; \
         each producer/consumer group may be used once per client id \
         (set a different instance name to run two of them in one process)"
    )]
    DuplicateGroup(String),
    /// No route is known for the topic, neither on the name server nor via TBW102 auto-creation,
    /// or its route has no queue to write to.
    #[error("No route info of this topic: {topic}: {}", reason.explain(topic, namesrv))]
    NoRoute {
        /// The topic without a route.
        topic: String,
        /// The name server addresses asked.
        namesrv: String,
        /// Why there is no route to use.
        reason: NoRouteReason,
    },
    /// No name server address is configured.
    #[error(
        "no name server address: set ClientConfig::namesrv_addr or the NAMESRV_ADDR environment variable"
    )]
    NoNameServer,
    /// The operation needs a started (or not yet started) service.
    #[error("service state is {state}, the operation needs {needed}")]
    ServiceState {
        /// The state the service is in.
        state: String,
        /// The state the operation needs.
        needed: String,
    },
    /// An argument was refused before anything was sent (empty topic, oversized body, ...).
    #[error("illegal argument: {0}")]
    IllegalArgument(String),
    /// Every attempt of a send failed; `last` is the final failure.
    #[error("send to topic {topic} failed after {attempts} attempt(s): {last}")]
    SendFailed {
        /// The topic of the send.
        topic: String,
        /// Attempts made.
        attempts: u32,
        /// The failure of the last attempt.
        last: Box<ClientError>,
    },
    /// The client-side deadline of an operation spanning several attempts elapsed.
    #[error("{operation} timed out after {timeout:?}")]
    Timeout {
        /// What timed out.
        operation: String,
        /// The deadline that elapsed.
        timeout: std::time::Duration,
    },
    /// Any other client-side failure.
    #[error("{0}")]
    Client(String),
    /// `start` of a producer or consumer that is not in CREATE_JUST: it is running, an earlier
    /// start of it failed (START_FAILED), or it was shut down. The Java client refuses these
    /// starts with the same words.
    #[error("The {service} service state not OK, maybe started once, {state}")]
    NotStartable {
        /// Which kind of client refused: `PushConsumer`, `producer`, `PullConsumer`, ...
        service: &'static str,
        /// The state it was in (`RUNNING`, `START_FAILED`, `SHUTDOWN_ALREADY`).
        state: String,
    },
}

/// Why a topic has no route a client can use: each has its own remedy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoRouteReason {
    /// The name servers answered that they do not know the topic (and no broker creates topics
    /// on first use).
    TopicNotExist,
    /// The name servers know the topic, but none of its queues is on a master that takes
    /// writes: the broker's or the topic's permission lacks write.
    NotWritable,
    /// The name servers could not be asked; the text is why.
    NameServerUnreachable(String),
}

impl NoRouteReason {
    /// The reason in words, with what to do about it.
    fn explain(&self, topic: &str, namesrv: &str) -> String {
        match self {
            NoRouteReason::TopicNotExist => format!(
                "the topic does not exist (the name servers {namesrv} do not know it); create it \
                 (`comet topic create {topic}`, mqadmin updateTopic) or turn \
                 autoCreateTopicEnable on"
            ),
            NoRouteReason::NotWritable => "no broker of its route takes writes: the broker's or \
                 the topic's permission lacks write (`comet topic route` shows them)"
                .to_owned(),
            NoRouteReason::NameServerUnreachable(why) => {
                format!("the name servers {namesrv} could not be asked: {why}")
            }
        }
    }
}

impl ClientError {
    /// The broker response code, when the server answered with one.
    pub fn response_code(&self) -> Option<i32> {
        match self {
            ClientError::Broker { code, .. } => Some(*code),
            ClientError::SendFailed { last, .. } => last.response_code(),
            _ => None,
        }
    }

    /// `true` for failures of the transport (connect, timeout, closed connection).
    pub fn is_remoting(&self) -> bool {
        matches!(self, ClientError::Remoting(_))
    }
}

/// A result whose error is a [`ClientError`].
pub type Result<T, E = ClientError> = std::result::Result<T, E>;
