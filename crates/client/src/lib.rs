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
//!
//! Everything an application usually imports is re-exported at the crate root and in
//! [`prelude`] (`use comet_client::prelude::*;`).
//!
//! ## Quick start
//!
//! Producers and consumers are made with builders (`DefaultMQProducer::builder(group)`,
//! `DefaultMQPushConsumer::builder(group)`, ...) that take the common client options (name
//! servers, instance name, namespace, ACL credentials, TLS) and the settings of their kind, and
//! either `build()` the client or `start()` it at once. A push consumer hands messages to a
//! listener; [`MessageListener::concurrently_async`] makes one from a closure returning a future,
//! so the listener can await (a database, another service) and capture state cloned into it.
//!
//! This program (`examples/quickstart.rs`, run by the test suite against an in-process broker)
//! sends messages and receives them with such a listener:
//!
//! ```no_run
#![doc = include_str!("../examples/quickstart.rs")]
//! ```
//!
//! ## Concepts
//!
//! **Client instance.** Producers and consumers of one process whose settings give the same
//! client id (`ip@instanceName`) share one [`MQClientInstance`]: its connections, its route
//! table (refreshed from the name servers every 30 s), its heartbeats to every broker (which is
//! how a broker knows the members of a group) and its rebalance service. A clustering consumer
//! whose instance name is left at its default gets the process id instead, so that two
//! processes on one host are two members. Set an explicit instance name (`.instance_name(..)`
//! on any builder) to run several members of one group in one process.
//!
//! **Producers.** [`DefaultMQProducer`] sends synchronously (with retries on another broker),
//! asynchronously, one-way, in batches, to a chosen queue or through a
//! [`MessageQueueSelector`]. [`TransactionProducer`] (Java
//! `TransactionMQProducer`) sends half messages and runs a local transaction, blocking
//! ([`TransactionListener`]) or async ([`AsyncTransactionListener`]); the broker checks
//! undecided transactions back.
//!
//! **Consumers.** Three front ends read topics for a consumer group:
//! [`DefaultMQPushConsumer`] pulls in the background (long polling) and calls a listener;
//! [`DefaultLitePullConsumer`] buffers in the background and the application polls;
//! [`DefaultMQPullConsumer`] leaves the queues, the offsets and the pace to the application.
//!
//! **Listeners.** A push consumer's [`MessageListener`] is either *concurrent* (Java
//! `MessageListenerConcurrently`: batches of a queue may run in parallel; a failed batch,
//! [`ConsumeConcurrentlyStatus::ReconsumeLater`], goes back to the broker and is delivered again
//! later, up to `max_reconsume_times`, then to the group's dead-letter queue) or *orderly* (Java
//! `MessageListenerOrderly`: one batch at a time per queue, in queue order;
//! [`ConsumeOrderlyStatus::SuspendCurrentQueueAMoment`] retries the same batch after a pause).
//! Each can be built from a synchronous closure (`concurrently_fn`, `orderly_fn`), from a closure
//! returning a future (`concurrently_async`, `orderly_async`), or from a type implementing the
//! listener trait.
//!
//! **Offsets.** A group's progress in a queue is its consume offset: the push consumer commits
//! an offset once every message before it is consumed, the lite pull consumer commits what was
//! polled (periodically or on `commit_sync`), the pull consumer commits what the application
//! says. Where offsets live depends on the message model; where a group with no offset starts is
//! [`ConsumeFromWhere`].
//!
//! **Clustering and broadcasting.** In [`MessageModel::Clustering`] (the default) the group's
//! queues are shared out among its members (averagely, by default) and offsets are kept by the
//! broker; in [`MessageModel::Broadcasting`] every member reads every queue and keeps its
//! offsets in a local file (`examples/broadcasting.rs`).
//!
//! **Ordering.** RocketMQ orders messages per queue. Send related messages to one queue (a
//! selector hashing a business key, [`SelectMessageQueueByHash`])
//! and consume with an orderly listener, which locks each queue on the broker so that one member
//! at a time reads it. This program (`examples/async_orderly.rs`) does both, with an async
//! orderly listener:
//!
//! ```no_run
#![doc = include_str!("../examples/async_orderly.rs")]
//! ```
//!
//! **Pull-style consumers.** Built the same way (`examples/pull_builders.rs`):
//!
//! ```no_run
#![doc = include_str!("../examples/pull_builders.rs")]
//! ```
//!
//! **Transactions.** An async transaction listener (`examples/async_transaction.rs`):
//!
//! ```no_run
#![doc = include_str!("../examples/async_transaction.rs")]
//! ```
//!
//! **ACL.** Brokers with `aclEnable=true` refuse unsigned requests. Give every client the
//! account's [`SessionCredentials`] (`.credentials(..)` on a builder, or
//! [`ClientConfig::credentials`]) and each request is signed as RocketMQ's `AclClientRPCHook`
//! signs it (`examples/acl.rs`).
//!
//! **TLS.** `.tls(ClientTls { .. })` on a builder (or [`ClientConfig::tls`]) connects to the
//! name servers and brokers over TLS ([`ClientTls`]: the server name, the trust roots, and
//! RocketMQ's test mode for self-signed certificates).
//!
//! The user guide, `docs/client-sdk.md`, walks through these and the other programs of
//! `examples/`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admin;
pub mod api;
mod builder;
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
pub use consumer::lite::{
    DefaultLitePullConsumer, LitePullBatch, LitePullConsumerBuilder, LitePullConsumerConfig,
};
pub use consumer::pull::{
    DefaultMQPullConsumer, PullConsumerBuilder, PullConsumerConfig, PullResult,
};
pub use consumer::push::{DefaultMQPushConsumer, PushConsumerBuilder, PushConsumerConfig};
pub use consumer::{
    ConcurrentlyReply, ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, ConsumeFromWhere,
    ConsumeOrderlyContext, ConsumeOrderlyStatus, MessageListener, MessageListenerConcurrently,
    MessageListenerOrderly, MessageModel, OrderlyReply, concurrently_async_fn, concurrently_fn,
    orderly_async_fn, orderly_fn,
};
pub use error::{ClientError, NoRouteReason, Result};
pub use instance::{
    FindBrokerResult, MQClientInstance, MQClientManager, MQConsumerInner, MQProducerInner,
    ServiceState,
};
pub use message::{Message, MessageExt, MessageQueue};
pub use producer::{
    AsyncTransactionListener, DefaultMQProducer, LocalTransactionState, MessageQueueSelector,
    ProducerBuilder, ProducerConfig, SelectMessageQueueByHash, SelectMessageQueueByRandom,
    TransactionListener, TransactionProducer, TransactionProducerBuilder, TransactionSendResult,
};
pub use route::TopicPublishInfo;

/// The names an application uses, for `use comet_client::prelude::*;`: the producers and
/// consumers, their listeners and statuses, messages, and the client settings and errors.
pub mod prelude {
    pub use crate::{
        AsyncTransactionListener, ClientConfig, ClientError, ConsumeConcurrentlyContext,
        ConsumeConcurrentlyStatus, ConsumeFromWhere, ConsumeOrderlyContext, ConsumeOrderlyStatus,
        DefaultLitePullConsumer, DefaultMQProducer, DefaultMQPullConsumer, DefaultMQPushConsumer,
        LocalTransactionState, Message, MessageExt, MessageListener, MessageListenerConcurrently,
        MessageListenerOrderly, MessageModel, MessageQueue, MessageQueueSelector, PullStatus,
        SelectMessageQueueByHash, SendResult, SendStatus, SessionCredentials, TransactionListener,
        TransactionProducer,
    };
}

/// The SDK page of the user guide, `docs/client-sdk.md`: its ```` ```rust,no_run ```` blocks are
/// the programs of `examples/`, compiled here as doc tests (`cargo test -p comet-client --doc`).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/client-sdk.md")]
pub struct ClientSdkGuide;
