//! Server and client settings. Defaults mirror the RocketMQ Java defaults where one exists.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use comet_protocol::SerializeType;

use crate::limits::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION,
    DEFAULT_MAX_PENDING_INVOKES_PER_CONNECTION, DEFAULT_ONEWAY_TIMEOUT, DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK, MAX_IDLE_TIMEOUT, MAX_WRITE_BUFFER_HIGH_WATER_MARK,
    MIN_WRITE_BUFFER_HIGH_WATER_MARK,
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

    /// Checks the settings a deployment may configure (RocketMQ's
    /// `serverChannelMaxIdleTimeSeconds` and `writeBufferHighWaterMark`) against the transport's
    /// limits. The broker and the name server both validate their listeners with this.
    pub fn validate(&self) -> Result<(), ServerConfigError> {
        if let Some(idle) = self.idle_timeout
            && idle > MAX_IDLE_TIMEOUT
        {
            return Err(ServerConfigError::IdleTimeoutTooLong(idle));
        }
        if !(MIN_WRITE_BUFFER_HIGH_WATER_MARK..=MAX_WRITE_BUFFER_HIGH_WATER_MARK)
            .contains(&self.write_buffer_high_water_mark)
        {
            return Err(ServerConfigError::WriteBufferHighWaterMarkOutOfRange(
                self.write_buffer_high_water_mark,
            ));
        }
        Ok(())
    }
}

/// A listener setting outside the transport's limits ([`ServerConfig::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerConfigError {
    #[error(
        "idle timeout {0:?} is longer than the maximum {MAX_IDLE_TIMEOUT:?} (0 disables the idle check)"
    )]
    IdleTimeoutTooLong(Duration),
    #[error(
        "write buffer high-water mark {0} must be within {MIN_WRITE_BUFFER_HIGH_WATER_MARK}..={MAX_WRITE_BUFFER_HIGH_WATER_MARK} bytes"
    )]
    WriteBufferHighWaterMarkOutOfRange(usize),
}

impl ServerConfigError {
    /// The configuration key (broker.conf / namesrv.properties) the error is about.
    pub fn key(&self) -> &'static str {
        match self {
            ServerConfigError::IdleTimeoutTooLong(_) => "serverChannelMaxIdleTimeSeconds",
            ServerConfigError::WriteBufferHighWaterMarkOutOfRange(_) => "writeBufferHighWaterMark",
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self::new("0.0.0.0:0")
    }
}

/// The idle timeout a [`crate::RemotingServer`] gives each connection it accepts, changeable while
/// it runs: a change applies to the connections accepted from then on (as RocketMQ reads
/// `serverChannelMaxIdleTimeSeconds` for each connection it accepts). Clones share the value,
/// so one handle may serve several servers.
#[derive(Debug, Clone)]
pub struct IdleTimeout(Arc<AtomicU64>);

impl IdleTimeout {
    /// `timeout` (`None`: connections are never closed for idleness).
    pub fn new(timeout: Option<Duration>) -> Self {
        IdleTimeout(Arc::new(AtomicU64::new(Self::encode(timeout))))
    }

    /// The timeout in force.
    pub fn get(&self) -> Option<Duration> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// Puts `timeout` in force for the connections accepted from now on.
    pub fn set(&self, timeout: Option<Duration>) {
        self.0.store(Self::encode(timeout), Ordering::Relaxed);
    }

    /// Milliseconds, at least 1; 0 for none.
    fn encode(timeout: Option<Duration>) -> u64 {
        timeout.map_or(0, |t| {
            u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1)
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_timeout_is_shared_by_its_clones_and_may_be_none() {
        let idle = IdleTimeout::new(Some(Duration::from_secs(120)));
        let shared = idle.clone();
        assert_eq!(shared.get(), Some(Duration::from_secs(120)));
        idle.set(None);
        assert_eq!(shared.get(), None);
        idle.set(Some(Duration::from_micros(10)));
        assert_eq!(
            shared.get(),
            Some(Duration::from_millis(1)),
            "rounded up, never none"
        );
        shared.set(Some(Duration::from_secs(1)));
        assert_eq!(idle.get(), Some(Duration::from_secs(1)));
    }
}
