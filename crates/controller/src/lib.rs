//! # comet-controller
//!
//! The controller of RocketMQ 5.x controller mode: a small replicated registry that hands out
//! broker ids, keeps each broker group's master, master epoch and SyncStateSet, and elects a
//! new master from the in-sync replicas when the old one dies. Brokers in controller mode
//! (`enableControllerMode=true`) talk to it with Apache's controller request codes.
//!
//! The quorum runs [openraft](https://docs.rs/openraft); its log, vote and snapshots live in a
//! redb database under `controllerStorePath`.

#![forbid(unsafe_code)]

pub mod config;
pub mod liveness;
mod processor;
pub mod raft;
pub mod replicas;
mod tasks;

pub use config::{ConfigError, ControllerConfig, Peer};
pub use tasks::{Controller, ControllerHandle};

use thiserror::Error;

/// Why a controller could not start or serve.
#[derive(Debug, Error)]
pub enum ControllerError {
    #[error("invalid controller configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("controller storage: {0}")]
    Storage(#[source] std::io::Error),
    #[error("raft: {0}")]
    Raft(String),
    #[error("starting the controller listener failed: {0}")]
    Remoting(#[from] comet_remoting::RemotingError),
}
