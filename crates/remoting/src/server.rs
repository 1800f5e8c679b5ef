//! `RemotingServer`: accepts connections and serves requests by code.
//!
//! The broker and the name server are both one of these with different processors. Shutdown is
//! graceful in three steps: stop accepting and stop reading new requests, wait (bounded by
//! `shutdown_grace`) for requests already being processed so their responses go out, then close
//! every connection (each writer gets a short, bounded time to flush).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{IdleTimeout, ServerConfig};
use crate::connection::{ConnectionContext, ConnectionOptions, spawn_connection, spawn_stream};
use crate::error::{RemotingError, Result};
use crate::limits::{
    ACCEPT_ERROR_BACKOFF, READER_YIELD_AFTER_WAITING_REQUESTS, WRITE_DRAIN_TIMEOUT,
};
use crate::overload::TransportStats;
use crate::processor::{
    ChannelEventListener, Dispatcher, RequestObserver, RequestProcessor, ResponseFence, RpcHook,
};
use crate::tls::{
    ServerTls, TLS_HANDSHAKE_RECORD_TYPE, TLS_HANDSHAKE_TIMEOUT, TlsMode, load_server_tls,
};

/// A bound, not yet running, remoting server. Register processors, then [`RemotingServer::start`]
/// or [`RemotingServer::run`] it.
pub struct RemotingServer {
    config: ServerConfig,
    listener: TcpListener,
    local_addr: SocketAddr,
    dispatcher: Arc<Dispatcher>,
    tls: Option<ServerTls>,
    /// The idle timeout of the connections accepted from now on (`config.idle_timeout` at
    /// first).
    idle_timeout: IdleTimeout,
}

impl RemotingServer {
    /// Listens on `config.listen_addr`. With `config.tls` enabled, the certificate and key are
    /// loaded here, so a bad TLS setup fails start-up instead of every handshake.
    pub async fn bind(config: ServerConfig) -> Result<Self> {
        let tls = match &config.tls {
            Some(tls) => load_server_tls(tls)?,
            None => None,
        };
        let listener = TcpListener::bind(&config.listen_addr).await.map_err(|e| {
            RemotingError::BindFailed {
                addr: config.listen_addr.clone(),
                source: Arc::new(e),
            }
        })?;
        let local_addr = listener.local_addr()?;
        let idle_timeout = IdleTimeout::new(config.idle_timeout);
        Ok(Self {
            idle_timeout,
            config,
            listener,
            local_addr,
            dispatcher: Arc::new(Dispatcher::default()),
            tls,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The idle timeout of the connections this server accepts: setting it while the server
    /// runs applies to the connections accepted from then on.
    pub fn idle_timeout(&self) -> &IdleTimeout {
        &self.idle_timeout
    }

    /// Takes the idle timeout of its connections from `idle_timeout` (shared with another
    /// server, say) instead of its own.
    pub fn share_idle_timeout(&mut self, idle_timeout: &IdleTimeout) {
        self.idle_timeout = idle_timeout.clone();
    }

    /// Overload counters of this server (SYSTEM_BUSY answers, refused calls, paused reads).
    pub fn stats(&self) -> Arc<TransportStats> {
        self.dispatcher.stats()
    }

    /// Routes requests with `code` to `processor` (replacing any earlier one).
    pub fn register(&self, code: i32, processor: Arc<dyn RequestProcessor>) {
        self.dispatcher.register(code, processor);
    }

    /// Handles every code without a registered processor (instead of REQUEST_CODE_NOT_SUPPORTED).
    pub fn set_default_processor(&self, processor: Arc<dyn RequestProcessor>) {
        self.dispatcher.set_default_processor(processor);
    }

    /// Runs `hook` around every request, in registration order.
    pub fn add_rpc_hook(&self, hook: Arc<dyn RpcHook>) {
        self.dispatcher.add_rpc_hook(hook);
    }

    pub fn set_channel_event_listener(&self, listener: Arc<dyn ChannelEventListener>) {
        self.dispatcher.set_listener(listener);
    }

    /// Tells `observer` of every request answered, with how long it took (see
    /// [`RequestObserver`]). One observer per server: `false` when one was set already (it
    /// stays).
    pub fn set_request_observer(&self, observer: Arc<dyn RequestObserver>) -> bool {
        self.dispatcher.set_observer(observer)
    }

    /// Runs `fence` before every write of responses on every connection (see [`ResponseFence`]).
    pub fn set_response_fence(&self, fence: Arc<dyn ResponseFence>) {
        self.dispatcher.set_fence(fence);
    }

    /// Spawns the server on the current tokio runtime.
    pub fn start(self) -> ServerHandle {
        let shutdown = CancellationToken::new();
        let local_addr = self.local_addr;
        let stats = self.stats();
        let task = tokio::spawn(self.run(shutdown.clone()));
        ServerHandle {
            local_addr,
            shutdown,
            task,
            stats,
        }
    }

    /// Serves until `shutdown` is cancelled, then shuts down gracefully and returns.
    pub async fn run(self, shutdown: CancellationToken) {
        let ctx = ConnectionContext {
            dispatcher: Arc::clone(&self.dispatcher),
            options: ConnectionOptions {
                idle_timeout: self.config.idle_timeout,
                max_in_flight: self.config.max_in_flight_per_connection,
                max_pending_invokes: self.config.max_pending_invokes_per_connection,
                write_high_water: self.config.write_buffer_high_water_mark,
                pause_reads_when_congested: true,
                run_requests_inline: true,
                gather_waited_responses: true,
                yield_after_waiting_requests: READER_YIELD_AFTER_WAITING_REQUESTS,
            },
            connections: TaskTracker::new(),
            requests: TaskTracker::new(),
            stop: CancellationToken::new(),
            close_all: CancellationToken::new(),
        };
        let tls_mode = self.tls.as_ref().map_or(TlsMode::Disabled, |t| t.mode);
        tracing::info!(addr = %self.local_addr, tls = tls_mode.name(), "remoting server listening");
        loop {
            let accepted = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                accepted = self.listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, peer)) => match &self.tls {
                    None => {
                        let conn_ctx = ctx.accepting(self.idle_timeout.get());
                        if let Err(e) = spawn_connection(stream, &conn_ctx) {
                            tracing::debug!(peer = %peer, error = %e, "accepted connection unusable");
                        }
                    }
                    Some(tls) => {
                        let task_ctx = ctx.accepting(self.idle_timeout.get());
                        let tls = tls.clone();
                        ctx.connections.spawn(async move {
                            let stop = task_ctx.stop.clone();
                            tokio::select! {
                                _ = stop.cancelled() => {}
                                _ = start_tls_or_plain(stream, peer, tls, &task_ctx) => {}
                            }
                        });
                    }
                },
                Err(e) => {
                    tracing::warn!(addr = %self.local_addr, error = %e, "accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
                }
            }
        }
        drop(self.listener);
        tracing::info!(addr = %self.local_addr, "remoting server shutting down");
        ctx.stop.cancel();
        ctx.requests.close();
        if tokio::time::timeout(self.config.shutdown_grace, ctx.requests.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                addr = %self.local_addr,
                still_running = ctx.requests.len(),
                "requests still running after the shutdown grace period; closing their connections"
            );
        }
        ctx.close_all.cancel();
        ctx.connections.close();
        // Writers bound their own flush by WRITE_DRAIN_TIMEOUT; this only guards against a bug.
        let _ = tokio::time::timeout(WRITE_DRAIN_TIMEOUT * 2, ctx.connections.wait()).await;
        tracing::info!(addr = %self.local_addr, "remoting server stopped");
    }
}

/// Decides by the first byte whether `stream` speaks TLS (see [`crate::tls`]) and starts the
/// connection accordingly. Runs on its own task: the peek and the handshake are bounded by
/// [`TLS_HANDSHAKE_TIMEOUT`].
async fn start_tls_or_plain(
    stream: TcpStream,
    peer: SocketAddr,
    tls: ServerTls,
    ctx: &ConnectionContext,
) {
    let mut first = [0u8; 1];
    let peeked = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, stream.peek(&mut first)).await;
    match peeked {
        Ok(Ok(1)) => {}
        Ok(Ok(_)) => {
            tracing::debug!(peer = %peer, "connection closed before sending anything");
            return;
        }
        Ok(Err(e)) => {
            tracing::debug!(peer = %peer, error = %e, "reading the first byte failed");
            return;
        }
        Err(_) => {
            tracing::info!(peer = %peer, timeout = ?TLS_HANDSHAKE_TIMEOUT,
                "closing connection that sent nothing");
            return;
        }
    }
    if first[0] != TLS_HANDSHAKE_RECORD_TYPE {
        if tls.mode == TlsMode::Enforcing {
            tracing::warn!(peer = %peer, "plaintext connection refused: TLS mode is enforcing");
            return;
        }
        if let Err(e) = spawn_connection(stream, ctx) {
            tracing::debug!(peer = %peer, error = %e, "accepted connection unusable");
        }
        return;
    }
    let local = match stream.local_addr() {
        Ok(local) => local,
        Err(e) => {
            tracing::debug!(peer = %peer, error = %e, "accepted connection unusable");
            return;
        }
    };
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(peer = %peer, error = %e, "cannot set TCP_NODELAY");
    }
    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, tls.acceptor.accept(stream)).await {
        Ok(Ok(session)) => {
            tracing::debug!(peer = %peer, "TLS session established");
            spawn_stream(session, peer, local, ctx);
        }
        Ok(Err(e)) => tracing::warn!(peer = %peer, error = %e, "TLS handshake failed"),
        Err(_) => {
            tracing::warn!(peer = %peer, timeout = ?TLS_HANDSHAKE_TIMEOUT, "TLS handshake timed out")
        }
    }
}

/// A running server.
pub struct ServerHandle {
    local_addr: SocketAddr,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
    stats: Arc<TransportStats>,
}

impl ServerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Overload counters of this server (SYSTEM_BUSY answers, refused calls, paused reads).
    pub fn stats(&self) -> Arc<TransportStats> {
        Arc::clone(&self.stats)
    }

    /// Starts shutting down without waiting: the server stops accepting connections and reading
    /// new requests as soon as its task observes the signal. Dropping a `ServerHandle` without
    /// shutting down leaves the server running.
    pub fn begin_shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Shuts down gracefully and waits until the server has stopped.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "remoting server task failed");
        }
    }
}
