//! # comet-broker
//!
//! A RocketMQ-compatible broker on top of `comet-store` and `comet-remoting`: it keeps the topic,
//! subscription-group and consumer-offset tables, answers produce, consume and admin requests
//! byte for byte as an Apache RocketMQ broker does, delivers delayed and timer messages, and registers its
//! topics with the name servers.
//!
//! [`controller::BrokerController`] wires everything together; request processors reach the
//! shared state through one [`context::BrokerContext`].

pub mod config;
pub mod config_tables;
pub mod context;
pub mod controller;
pub mod core;
pub mod offset_manager;
pub mod outer_api;
pub mod pop;
pub mod processor;
pub mod schedule;
pub mod subscription_group;
pub mod timer;
pub mod topic_config;
pub mod topic_message_type;
pub mod transaction;

pub mod client;
pub mod filter;
pub mod ha;
pub mod long_polling;
pub mod metrics;
pub mod rebalance_lock;
pub mod runtime_info;

pub use config::{BrokerConfig, ConfigError, ParsedConfig};
pub use context::BrokerContext;
pub use controller::{BrokerController, BrokerError, BrokerHandle};
