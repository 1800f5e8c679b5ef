//! Server and client settings. Defaults mirror the RocketMQ Java defaults where one exists.

use std::time::Duration;

use comet_protocol::SerializeType;

use crate::limits::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION,
    DEFAULT_MAX_PENDING_INVOKES_PER_CONNECTION, DEFAULT_ONEWAY_TIMEOUT, DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK,
};
use crate::tls::{ClientTlsConfig, TlsConfig};

/// Settings of a [`crate::RemotingServer`].
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on, e.g. `0.0.0.0:10911`, or `127.0.0.1:0` for an ephemeral port.
    pub listen_addr: String,
    /// Close connections that send nothing for this long; `None` disables the check.
    pub idle_timeout: Option<Duration>,
    /// Requests of one connection processed concurrently before the connection stops reading.
    pub max_in_flight_per_connection: usize,
    /// Server-to-client requests ([`crate::Channel::invoke`]) outstanding on one connection.
    pub max_pending_invokes_per_connection: usize,
    /// Unsent bytes of one connection at which it stops reading requests and refuses
    /// server-to-client calls (RocketMQ `writeBufferHighWaterMark`).
    pub write_buffer_high_water_mark: usize,
    /// How long graceful shutdown waits for in-flight requests.
    pub shutdown_grace: Duration,
    /// TLS on the listener; `None` (or mode `Disabled`) serves plaintext only.
    pub tls: Option<TlsConfig>,
}

impl ServerConfig {
    pub fn new(listen_addr: impl Into<String>) -> Self {
        Self {
            listen_addr: listen_addr.into(),
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            max_in_flight_per_connection: DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION,
            max_pending_invokes_per_connection: DEFAULT_MAX_PENDING_INVOKES_PER_CONNECTION,
            write_buffer_high_water_mark: DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            tls: None,
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self::new("0.0.0.0:0")
    }
}

/// Settings of a [`crate::RemotingClient`].
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// How long establishing a connection may take.
    pub connect_timeout: Duration,
    /// Close connections on which nothing arrives for this long while no request is outstanding;
    /// `None` keeps idle connections open.
    pub idle_timeout: Option<Duration>,
    /// Header codec of outgoing requests. JSON is what every RocketMQ peer expects by default.
    pub serialize_type: SerializeType,
    /// Requests outstanding on one connection before `invoke` fails with `TooManyRequests`.
    pub max_pending_invokes_per_connection: usize,
    /// Server-initiated requests processed concurrently per connection.
    pub max_in_flight_per_connection: usize,
    /// How long `invoke_oneway` may wait for a connection and for room in the write queue.
    pub oneway_timeout: Duration,
    /// Unsent bytes of one connection above which new requests wait for the writer to drain.
    pub write_buffer_high_water_mark: usize,
    /// TLS for every connection this client makes; `None` connects in plaintext.
    pub tls: Option<ClientTlsConfig>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            serialize_type: SerializeType::Json,
            max_pending_invokes_per_connection: DEFAULT_MAX_PENDING_INVOKES_PER_CONNECTION,
            max_in_flight_per_connection: DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION,
            oneway_timeout: DEFAULT_ONEWAY_TIMEOUT,
            write_buffer_high_water_mark: DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK,
            tls: None,
        }
    }
}
