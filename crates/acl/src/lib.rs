//! # comet-acl
//!
//! RocketMQ's ACL 1.0 ("plain ACL"), wire-compatible with the Java and Go clients:
//!
//! - [`AclClientRpcHook`] signs every request a client sends: `AccessKey` plus a `Signature` that
//!   is Base64(HmacSHA1(secretKey, sorted ext field values + body)) ([`signature`]).
//! - [`PlainAccessValidator`] is the broker's server hook: it recomputes the signature, checks
//!   the account's white list, admin flag and per-topic / per-group permissions from
//!   `plain_acl.yml` ([`config`]), refuses with NO_PERMISSION and a remark naming the rule, and
//!   hot-reloads the file.
//!
//! ACL is authentication by a shared secret per account plus coarse authorization; it does not
//! encrypt anything — pair it with TLS (`comet_remoting` TLS listener) on untrusted networks.

#![forbid(unsafe_code)]

pub mod client_hook;
pub mod config;
pub mod error;
pub mod permission;
pub mod remote_address;
pub mod signature;
pub mod validator;

pub use client_hook::{AclClientRpcHook, SessionCredentials};
pub use config::{Account, AclTable};
pub use error::{AccessDenied, AclError};
pub use remote_address::AddressPattern;
pub use validator::{DEFAULT_WATCH_INTERVAL, GrpcCredentials, PlainAccessValidator};
