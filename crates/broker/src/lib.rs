//! # comet-broker
//!
//! A RocketMQ-compatible broker on top of `comet-store` and `comet-remoting`: it keeps the topic,
//! subscription-group and consumer-offset tables, answers produce, consume and admin requests
//! byte for byte as an Apache RocketMQ broker does, delivers delayed and timer messages, revives
//! POP checkpoints, checks open transactions, replicates to its slaves, serves its metrics, and
//! registers its topics with the name servers.
//!
//! [`BrokerController`] starts it and hands back a [`BrokerHandle`]. The broker's operations live
//! in [`core`], with typed arguments and results; every front end calls them: the remoting
//! processors ([`processor`]), the gRPC endpoint (the `comet-grpc` crate, over
//! [`BrokerHandle::context`]) and the broker's own services. The state they work on is one
//! [`BrokerContext`].
//!
//! What other crates see:
//! - [`config`] (every `broker.conf` key, its default and whether it changes while running),
//!   [`controller`] and [`context`];
//! - [`core`], the operations, with what their arguments and results are made of: [`pop`]'s
//!   receipt handles, [`transaction`]'s service and checks, [`client`]'s tables of connected
//!   clients (and the [`client::LocalClient`]s a front end registers), [`topic_message_type`];
//! - [`processor`], the remoting front end, for its answers' constants;
//! - [`config_tables`] and [`ha`], the on-disk tables and the replication, for tests and tools.
//!
//! Everything else (the metadata managers, the hold and delivery services, metrics) is the
//! crate's own.

pub mod client;
pub mod config;
pub mod config_tables;
pub mod context;
pub mod controller;
pub mod core;
pub mod ha;
pub mod pop;
pub mod processor;
pub mod topic_message_type;
pub mod transaction;

pub(crate) mod filter;
pub(crate) mod long_polling;
pub(crate) mod metrics;
pub(crate) mod offset_manager;
pub(crate) mod outer_api;
pub(crate) mod rebalance_lock;
pub(crate) mod registration;
pub(crate) mod runtime_info;
pub(crate) mod schedule;
pub(crate) mod subscription_group;
pub(crate) mod timer;
pub(crate) mod topic_config;
pub(crate) mod topic_journal;
pub(crate) mod topic_table;

pub use config::{BrokerConfig, ConfigError, ParsedConfig};
pub use context::BrokerContext;
pub use controller::{BrokerController, BrokerError, BrokerHandle};
