//! # comet-remoting
//!
//! The tokio transport of the RocketMQ remoting protocol, shared by the broker, the name server
//! and the client SDK. `comet-protocol` knows the bytes; this crate knows sockets:
//!
//! - [`RemotingServer`] accepts connections and routes each request by code to a
//!   [`RequestProcessor`], answering with the request's opaque and codec.
//! - [`RemotingClient`] keeps one multiplexed connection per remote address and matches
//!   responses to requests by opaque, with per-request timeouts.
//! - [`Channel`] is one connection on either side; a server can call a client back through it.
//! - [`tls`]: a server listener can take TLS and plaintext on one port or TLS only; a client can
//!   wrap every connection in TLS ([`ClientTlsConfig`]).
//!
//! Every per-connection resource is bounded (see [`limits`]): in-flight requests (the connection
//! stops reading when the bound is reached), queued write *bytes* (a server connection whose peer
//! does not read its responses stops reading too), idle time. Refusals are counted in
//! [`TransportStats`] and logged, rate-limited. A peer that sends an oversized or undecodable
//! frame loses its own connection and nothing else; a panicking processor costs one SYSTEM_ERROR
//! response.

#![forbid(unsafe_code)]

mod channel;
mod client;
pub mod clock;
mod codec;
mod config;
mod connection;
mod detached;
mod error;
mod held;
pub mod limits;
mod overload;
mod processor;
mod server;
pub mod tls;

pub use channel::Channel;
pub use client::RemotingClient;
pub use clock::{Clock, ManualClock, SystemClock};
pub use codec::{RemotingCodec, encode_frame};
pub use config::{ClientConfig, IdleTimeout, ServerConfig, ServerConfigError};
pub use detached::Outbox;
pub use error::{RemotingError, Result};
pub use overload::{OverloadReason, TransportStats};
pub use processor::{
    ChannelEventListener, RequestObserver, RequestProcessor, ResponseFence, RpcHook, Settled,
};
pub use server::{RemotingServer, ServerHandle};
pub use tls::{ClientTlsConfig, TlsConfig, TlsMode, TrustRoots};
pub use tokio_util::sync::CancellationToken;
