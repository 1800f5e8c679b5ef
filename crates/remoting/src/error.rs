//! Errors of the transport.
//!
//! Callers (producer retry logic, broker-to-client calls) need to tell *why* a call failed: a
//! broker that cannot be reached is skipped, a timeout may be retried elsewhere, a dead connection
//! is re-dialed on the next call. Each of those outcomes is therefore its own variant rather than
//! a string. I/O sources are kept behind an `Arc` so that the error is `Clone`: one failed connect
//! is reported to every caller that was waiting on it.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use comet_protocol::ProtocolError;
use thiserror::Error;

#[derive(Debug, Clone, Error)]
pub enum RemotingError {
    /// The TCP connection to `addr` could not be established (refused, unreachable, timed out).
    #[error("connect to {addr} failed: {source}")]
    ConnectFailed {
        addr: String,
        #[source]
        source: Arc<io::Error>,
    },
    /// No response arrived within the caller's timeout; the request is forgotten.
    #[error("request to {addr} timed out after {timeout:?}")]
    Timeout { addr: String, timeout: Duration },
    /// The connection closed (by either side) before the response arrived.
    #[error("connection to {addr} closed")]
    ConnectionClosed { addr: String },
    /// The frame could not be handed to the connection (its write queue stayed full).
    #[error("send to {addr} failed: {reason}")]
    SendFailed { addr: String, reason: String },
    /// The connection's unsent bytes are over its write-buffer high-water mark (the peer does
    /// not read fast enough), so a server-to-client call was refused instead of queued.
    #[error("write buffer to {addr} is full: {queued} bytes queued, high-water mark {limit}")]
    WriteBufferFull {
        addr: String,
        queued: usize,
        limit: usize,
    },
    /// The connection already carries the maximum number of outstanding requests.
    #[error("too many outstanding requests to {addr} (limit {limit})")]
    TooManyRequests { addr: String, limit: usize },
    /// A client RPC hook refused to send the request.
    #[error("request to {addr} rejected by an RPC hook: code {code}, remark {remark:?}")]
    Rejected {
        addr: String,
        code: i32,
        remark: Option<String>,
    },
    /// The server could not listen on its address.
    #[error("bind {addr} failed: {source}")]
    BindFailed {
        addr: String,
        #[source]
        source: Arc<io::Error>,
    },
    /// The TLS certificate or key cannot be loaded or used.
    #[error("TLS setup failed: {reason}")]
    Tls { reason: String },
    /// The client or server has been shut down.
    #[error("remoting endpoint is shut down")]
    Shutdown,
    /// A frame could not be encoded or decoded.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// A socket read or write failed.
    #[error("i/o error: {0}")]
    Io(#[source] Arc<io::Error>),
}

impl From<io::Error> for RemotingError {
    fn from(e: io::Error) -> Self {
        RemotingError::Io(Arc::new(e))
    }
}

pub type Result<T, E = RemotingError> = std::result::Result<T, E>;
