//! # comet-protocol
//!
//! Apache RocketMQ's "remoting" protocol as plain data: frames, the two header codecs (JSON and
//! ROCKETMQ binary), request/response codes, typed headers, JSON bodies and the message codec.
//! Nothing here does I/O; every decoder takes untrusted bytes and returns a [`ProtocolError`]
//! instead of panicking, bounded by the constants in [`limits`].

#![forbid(unsafe_code)]

pub mod body;
pub mod code;
pub mod command;
pub mod error;
pub mod frame;
pub mod header;
pub mod headers;
pub mod limits;
pub mod message;
pub mod naming;
pub mod time;
pub mod version;

pub use command::{ExtFields, LanguageCode, RemotingCommand, ResponseHold, SerializeType};
pub use error::ProtocolError;
