//! # comet-client
//!
//! The client SDK of Comet, speaking Apache RocketMQ's remoting protocol so that it works against
//! a Comet broker and an Apache RocketMQ broker alike.
//!
//! The structure follows the Java client, because its behaviour is what brokers and other clients
//! depend on (queue selection, rebalance, heartbeats):
//!
//! - [`ClientConfig`] names the name servers and identifies the process (`ip@instance`).
//! - [`MQClientInstance`] is the shared engine behind every producer and consumer with the same
//!   client id: one connection pool, one route table, one heartbeat, one rebalance loop. The
//!   process-wide [`MQClientManager`] hands out one instance per client id.
//! - [`MQClientApi`] is one async function per RPC, mapping responses to typed results.
//! - [`producer::DefaultMQProducer`] and the consumers in [`consumer`] sit on top.

#![forbid(unsafe_code)]

pub mod admin;
pub mod api;
pub mod config;
pub mod consumer;
pub mod error;
pub mod instance;
pub mod message;
pub mod producer;
pub mod route;
pub mod trace;

pub use api::{CommunicationMode, MQClientApi, PullResultExt, PullStatus, SendResult, SendStatus};
pub use comet_acl::SessionCredentials;
pub use config::{ClientConfig, ClientTls, TrustRoots};
pub use error::{ClientError, Result};
pub use instance::{
    FindBrokerResult, MQClientInstance, MQClientManager, MQConsumerInner, MQProducerInner,
};
pub use message::{Message, MessageExt, MessageQueue};
pub use producer::{
    LocalTransactionState, TransactionListener, TransactionProducer, TransactionSendResult,
};
pub use route::TopicPublishInfo;

/// The SDK page of the user guide, `docs/client-sdk.md`: its ```` ```rust,no_run ```` blocks are
/// the programs of `examples/`, compiled here as doc tests (`cargo test -p comet-client --doc`).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/client-sdk.md")]
pub struct ClientSdkGuide;
