//! `Channel`: a cheap-clone handle of one live connection, on either side.
//!
//! Both directions of the protocol are requests matched by `opaque`, so a client connection and a
//! server connection are the same thing: a writer queue, a table of our outstanding requests
//! (`opaque → waiting caller`), and a close signal. Processors get a `Channel` so that a broker
//! can keep it (e.g. in its consumer table) and later call the client back through it.
//!
//! The pending table and its `closed` flag sit behind one lock: once the connection is closed no
//! request can be registered any more, and every request registered before is failed at once —
//! a caller never waits for its timeout on a connection that is already gone.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use comet_protocol::RemotingCommand;
use comet_protocol::command::{FLAG_ONEWAY, FLAG_RESPONSE};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::codec::encode_frame;
use crate::error::{RemotingError, Result};
use crate::limits::WRITE_QUEUE_TIMEOUT;

/// Request ids are process-wide so that a log line's opaque identifies one request.
static NEXT_OPAQUE: AtomicI32 = AtomicI32::new(1);
static NEXT_CHANNEL_ID: AtomicU64 = AtomicU64::new(1);

fn next_opaque() -> i32 {
    // Wraps around on overflow, like the Java counter.
    NEXT_OPAQUE.fetch_add(1, Ordering::Relaxed)
}

/// Handle of one connection. Cloning is cheap; all clones refer to the same connection.
#[derive(Clone)]
pub struct Channel {
    inner: Arc<Shared>,
}

struct Shared {
    id: u64,
    remote: SocketAddr,
    local: SocketAddr,
    writer: mpsc::Sender<Bytes>,
    pending: Mutex<Pending>,
    max_pending: usize,
    close: CancellationToken,
}

#[derive(Default)]
struct Pending {
    closed: bool,
    waiting: HashMap<i32, oneshot::Sender<RemotingCommand>>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("id", &self.inner.id)
            .field("remote", &self.inner.remote)
            .field("local", &self.inner.local)
            .field("active", &self.is_active())
            .finish()
    }
}

impl PartialEq for Channel {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for Channel {}

impl Channel {
    pub(crate) fn new(
        remote: SocketAddr,
        local: SocketAddr,
        writer: mpsc::Sender<Bytes>,
        max_pending: usize,
        close: CancellationToken,
    ) -> Self {
        Self {
            inner: Arc::new(Shared {
                id: NEXT_CHANNEL_ID.fetch_add(1, Ordering::Relaxed),
                remote,
                local,
                writer,
                pending: Mutex::new(Pending::default()),
                max_pending,
                close,
            }),
        }
    }

    /// Process-unique id of this connection.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    pub fn remote_addr(&self) -> SocketAddr {
        self.inner.remote
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local
    }

    /// `false` once the connection is closed or closing.
    pub fn is_active(&self) -> bool {
        !self.inner.close.is_cancelled()
    }

    /// Number of requests sent on this connection that still wait for their response.
    pub fn pending_requests(&self) -> usize {
        self.inner.pending.lock().waiting.len()
    }

    /// Closes the connection: queued frames get a short time to flush, every outstanding request
    /// fails with `ConnectionClosed`, and the peer sees the socket close. Idempotent.
    pub fn close(&self) {
        self.inner.close.cancel();
        self.fail_pending();
    }

    /// Resolves once the connection is closed.
    pub async fn closed(&self) {
        self.inner.close.cancelled().await;
    }

    /// Marks the pending table closed and fails every waiting request (their senders are
    /// dropped, which the waiters see as `ConnectionClosed`).
    pub(crate) fn fail_pending(&self) {
        let waiting = {
            let mut pending = self.inner.pending.lock();
            pending.closed = true;
            std::mem::take(&mut pending.waiting)
        };
        drop(waiting);
    }

    pub(crate) fn close_token(&self) -> &CancellationToken {
        &self.inner.close
    }

    fn addr_string(&self) -> String {
        self.inner.remote.to_string()
    }

    /// Sends a response. It is sent as given except that the RESPONSE flag is set; the opaque
    /// must be the request's (build it with `RemotingCommand::response_to`). Used by processors
    /// that answer later, e.g. a held long-polling pull.
    pub async fn send_response(&self, mut response: RemotingCommand) -> Result<()> {
        response.flag = (response.flag | FLAG_RESPONSE) & !FLAG_ONEWAY;
        let frame = encode(&response)?;
        self.enqueue(frame, Instant::now() + WRITE_QUEUE_TIMEOUT)
            .await
    }

    /// Sends a request on this connection and waits up to `timeout` for its response. The
    /// opaque is assigned here.
    pub async fn invoke(
        &self,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        self.invoke_until(request, Instant::now() + timeout, timeout)
            .await
    }

    pub(crate) async fn invoke_until(
        &self,
        mut request: RemotingCommand,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        let opaque = next_opaque();
        request.opaque = opaque;
        request.flag &= !(FLAG_RESPONSE | FLAG_ONEWAY);
        let frame = encode(&request)?;
        let (tx, rx) = oneshot::channel();
        self.register(opaque, tx)?;
        // Removes the table entry however this call ends (response, timeout, caller dropped).
        let _entry = PendingEntry {
            channel: self,
            opaque,
        };
        let timed_out = || RemotingError::Timeout {
            addr: self.addr_string(),
            timeout,
        };
        match self.enqueue(frame, deadline).await {
            Ok(()) => {}
            Err(RemotingError::SendFailed { .. }) if Instant::now() >= deadline => {
                return Err(timed_out());
            }
            Err(e) => return Err(e),
        }
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) => Err(RemotingError::ConnectionClosed {
                addr: self.addr_string(),
            }),
            Err(_) => Err(timed_out()),
        }
    }

    /// Sends a request that must not be answered (the ONEWAY flag is set), waiting at most for
    /// room in the write queue.
    pub async fn invoke_oneway(&self, request: RemotingCommand) -> Result<()> {
        self.invoke_oneway_until(request, Instant::now() + WRITE_QUEUE_TIMEOUT)
            .await
    }

    pub(crate) async fn invoke_oneway_until(
        &self,
        mut request: RemotingCommand,
        deadline: Instant,
    ) -> Result<()> {
        request.opaque = next_opaque();
        request.flag = (request.flag | FLAG_ONEWAY) & !FLAG_RESPONSE;
        let frame = encode(&request)?;
        self.enqueue(frame, deadline).await
    }

    fn register(&self, opaque: i32, tx: oneshot::Sender<RemotingCommand>) -> Result<()> {
        let mut pending = self.inner.pending.lock();
        if pending.closed {
            return Err(RemotingError::ConnectionClosed {
                addr: self.addr_string(),
            });
        }
        if pending.waiting.len() >= self.inner.max_pending {
            return Err(RemotingError::TooManyRequests {
                addr: self.addr_string(),
                limit: self.inner.max_pending,
            });
        }
        pending.waiting.insert(opaque, tx);
        Ok(())
    }

    /// Hands a response to the request waiting for it. Returns `false` when nobody waits (the
    /// request timed out, or the peer sent a stray opaque).
    pub(crate) fn complete(&self, response: RemotingCommand) -> bool {
        let waiter = self.inner.pending.lock().waiting.remove(&response.opaque);
        match waiter {
            Some(tx) => tx.send(response).is_ok(),
            None => false,
        }
    }

    async fn enqueue(&self, frame: Bytes, deadline: Instant) -> Result<()> {
        let closed = || RemotingError::ConnectionClosed {
            addr: self.addr_string(),
        };
        if !self.is_active() {
            return Err(closed());
        }
        tokio::select! {
            biased;
            sent = self.inner.writer.send(frame) => sent.map_err(|_| closed()),
            _ = self.inner.close.cancelled() => Err(closed()),
            _ = tokio::time::sleep_until(deadline) => Err(RemotingError::SendFailed {
                addr: self.addr_string(),
                reason: "write queue stayed full".to_string(),
            }),
        }
    }
}

fn encode(cmd: &RemotingCommand) -> Result<Bytes> {
    let mut buf = BytesMut::with_capacity(cmd.body_len() + 256);
    encode_frame(cmd, &mut buf)?;
    Ok(buf.freeze())
}

struct PendingEntry<'a> {
    channel: &'a Channel,
    opaque: i32,
}

impl Drop for PendingEntry<'_> {
    fn drop(&mut self) {
        self.channel
            .inner
            .pending
            .lock()
            .waiting
            .remove(&self.opaque);
    }
}
