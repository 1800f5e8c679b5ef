//! `RemotingServer`: accepts connections and serves requests by code.
//!
//! The broker and the name server are both one of these with different processors. Shutdown is
//! graceful in three steps: stop accepting and stop reading new requests, wait (bounded by
//! `shutdown_grace`) for requests already being processed so their responses go out, then close
//! every connection (each writer gets a short, bounded time to flush).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::ServerConfig;
use crate::connection::{ConnectionContext, ConnectionOptions, spawn_connection};
use crate::error::{RemotingError, Result};
use crate::limits::{ACCEPT_ERROR_BACKOFF, WRITE_DRAIN_TIMEOUT};
use crate::processor::{ChannelEventListener, Dispatcher, RequestProcessor, RpcHook};

/// A bound, not yet running, remoting server. Register processors, then [`RemotingServer::start`]
/// or [`RemotingServer::run`] it.
pub struct RemotingServer {
    config: ServerConfig,
    listener: TcpListener,
    local_addr: SocketAddr,
    dispatcher: Arc<Dispatcher>,
}

impl RemotingServer {
    /// Listens on `config.listen_addr`.
    pub async fn bind(config: ServerConfig) -> Result<Self> {
        let listener = TcpListener::bind(&config.listen_addr).await.map_err(|e| {
            RemotingError::BindFailed {
                addr: config.listen_addr.clone(),
                source: Arc::new(e),
            }
        })?;
        let local_addr = listener.local_addr()?;
        Ok(Self {
            config,
            listener,
            local_addr,
            dispatcher: Arc::new(Dispatcher::default()),
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn config(&self) -> &ServerConfig {
        &self.config
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

    /// Spawns the server on the current tokio runtime.
    pub fn start(self) -> ServerHandle {
        let shutdown = CancellationToken::new();
        let local_addr = self.local_addr;
        let task = tokio::spawn(self.run(shutdown.clone()));
        ServerHandle {
            local_addr,
            shutdown,
            task,
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
            },
            connections: TaskTracker::new(),
            requests: TaskTracker::new(),
            stop: CancellationToken::new(),
            close_all: CancellationToken::new(),
        };
        tracing::info!(addr = %self.local_addr, "remoting server listening");
        loop {
            let accepted = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                accepted = self.listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, peer)) => {
                    if let Err(e) = spawn_connection(stream, &ctx) {
                        tracing::debug!(peer = %peer, error = %e, "accepted connection unusable");
                    }
                }
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

/// A running server.
pub struct ServerHandle {
    local_addr: SocketAddr,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

impl ServerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
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
