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
//!
//! The write queue is bounded in *bytes* ([`WriteBudget`]): every queued frame counts until the
//! writer has handed it to the socket. Responses are always queued (they answer requests already
//! read; what bounds them is that a congested server connection stops reading and holds requests
//! back before processing them, see `connection.rs`). Calls the server makes to a congested client
//! fail at once with `WriteBufferFull`; a client's own requests wait (until their deadline) for
//! the connection to drain.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use comet_protocol::RemotingCommand;
use comet_protocol::command::{FLAG_ONEWAY, FLAG_RESPONSE};
use parking_lot::Mutex;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::codec::{Frame, encode_split};
use crate::error::{RemotingError, Result};
use crate::overload::{OverloadMonitor, OverloadReason};

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
    writer: mpsc::UnboundedSender<Frame>,
    budget: WriteBudget,
    overload: Arc<OverloadMonitor>,
    pending: Mutex<Pending>,
    max_pending: usize,
    close: CancellationToken,
    /// No socket behind it (see [`Channel::detached`]).
    detached: bool,
}

/// Bytes queued for a connection's writer, against its high-water mark.
#[derive(Debug)]
pub(crate) struct WriteBudget {
    queued: AtomicUsize,
    high_water: usize,
    drained: Notify,
}

impl WriteBudget {
    pub(crate) fn new(high_water: usize) -> Self {
        Self {
            queued: AtomicUsize::new(0),
            high_water: high_water.max(1),
            drained: Notify::new(),
        }
    }

    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    fn congested(&self) -> bool {
        self.queued() >= self.high_water
    }

    pub(crate) fn add(&self, bytes: usize) {
        self.queued.fetch_add(bytes, Ordering::AcqRel);
    }

    /// Called by the writer once `bytes` have been handed to the socket.
    pub(crate) fn release(&self, bytes: usize) {
        let before = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                Some(q.saturating_sub(bytes))
            })
            .unwrap_or(0);
        if before >= self.high_water && before.saturating_sub(bytes) < self.high_water {
            // One waiter at a time: the woken one passes the wake-up on while there is room
            // (see `Channel::writable`), so thousands of held requests do not all wake to find
            // the connection congested again.
            self.drained.notify_one();
        }
    }
}

/// What `enqueue` does when the connection is congested.
#[derive(Debug, Clone, Copy)]
enum Admission {
    /// Queue anyway (responses: the request was already read and processed).
    Always,
    /// Refuse with `WriteBufferFull` (server-to-client calls).
    FailFast,
    /// Wait for the writer to drain below the mark, up to the deadline (a client's requests).
    WaitUntil(Instant),
}

#[derive(Default)]
struct Pending {
    closed: bool,
    waiting: HashMap<i32, oneshot::Sender<RemotingCommand>>,
    /// Why the connection was closed, when it was for a reason the waiting requests should
    /// report (an undecodable answer) rather than a plain close.
    close_reason: Option<RemotingError>,
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
        writer: mpsc::UnboundedSender<Frame>,
        high_water: usize,
        overload: Arc<OverloadMonitor>,
        max_pending: usize,
        close: CancellationToken,
    ) -> Self {
        Self {
            inner: Arc::new(Shared {
                id: NEXT_CHANNEL_ID.fetch_add(1, Ordering::Relaxed),
                remote,
                local,
                writer,
                budget: WriteBudget::new(high_water),
                overload,
                pending: Mutex::new(Pending::default()),
                max_pending,
                close,
                detached: false,
            }),
        }
    }

    /// This channel, marked as having no socket behind it (only before it is shared).
    pub(crate) fn into_detached(mut self) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.inner) {
            shared.detached = true;
        }
        self
    }

    /// Whether no socket is behind this channel: it stands for a client of another protocol
    /// (see [`Channel::detached`]).
    pub fn is_detached(&self) -> bool {
        self.inner.detached
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

    /// Bytes queued for this connection's writer and not yet handed to the socket.
    pub fn queued_bytes(&self) -> usize {
        self.inner.budget.queued()
    }

    /// `false` while the queued bytes are at or over the write-buffer high-water mark (Netty's
    /// `isWritable`): calls to the peer are refused and a server connection stops reading.
    pub fn is_writable(&self) -> bool {
        !self.inner.budget.congested()
    }

    pub(crate) fn budget(&self) -> &WriteBudget {
        &self.inner.budget
    }

    /// Resolves once the queued bytes are under the high-water mark or the connection closed.
    pub(crate) async fn writable(&self) {
        let mut waited = false;
        loop {
            let drained = self.inner.budget.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if !self.is_active() {
                return;
            }
            if !self.inner.budget.congested() {
                if waited {
                    // Woken by a drain and there is still room: wake the next waiter.
                    self.inner.budget.drained.notify_one();
                }
                return;
            }
            tokio::select! {
                _ = &mut drained => waited = true,
                _ = self.inner.close.cancelled() => return,
            }
        }
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

    /// Records why the connection is about to close, so that the requests still waiting for
    /// their answers fail with it instead of a bare "connection closed". Returns how many are
    /// waiting (they will report the reason; with none, the caller should).
    pub(crate) fn record_close_reason(&self, reason: RemotingError) -> usize {
        let mut pending = self.inner.pending.lock();
        pending.close_reason.get_or_insert(reason);
        pending.waiting.len()
    }

    /// The error of a request whose connection closed before its answer arrived.
    fn close_error(&self) -> RemotingError {
        self.inner
            .pending
            .lock()
            .close_reason
            .clone()
            .unwrap_or_else(|| RemotingError::ConnectionClosed {
                addr: self.addr_string(),
            })
    }

    pub(crate) fn close_token(&self) -> &CancellationToken {
        &self.inner.close
    }

    fn addr_string(&self) -> String {
        self.inner.remote.to_string()
    }

    /// Sends a response. It is sent as given except that the RESPONSE flag is set; the opaque
    /// must be the request's (build it with `RemotingCommand::response_to`). Used by processors
    /// that answer later, e.g. a held long-polling pull. A response is queued even when the
    /// connection is congested: it answers a request that was already read.
    pub async fn send_response(&self, response: RemotingCommand) -> Result<()> {
        self.send_response_from(response, false).await
    }

    /// [`Channel::send_response`], with `gather` for a response of a request that waited on its
    /// own task: the writer then gathers the responses completed with it before writing.
    pub(crate) async fn send_response_from(
        &self,
        mut response: RemotingCommand,
        gather: bool,
    ) -> Result<()> {
        response.flag = (response.flag | FLAG_RESPONSE) & !FLAG_ONEWAY;
        let mut frame = encode_split(response)?;
        frame.gather = gather;
        self.enqueue(frame, Admission::Always).await
    }

    /// Sends a request on this connection and waits up to `timeout` for its response. The
    /// opaque is assigned here. Fails at once with `WriteBufferFull` when the connection is not
    /// writable (the peer does not read): a call must never queue behind a stalled peer.
    pub async fn invoke(
        &self,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        self.invoke_admitted(
            request,
            Instant::now() + timeout,
            timeout,
            Admission::FailFast,
            false,
        )
        .await
    }

    /// Like [`Channel::invoke`], but waits (up to the deadline) for a congested connection to
    /// drain: a client's own requests.
    /// With `gather`, the writer waits one turn of the scheduler for requests queued with it.
    pub(crate) async fn invoke_until(
        &self,
        request: RemotingCommand,
        deadline: Instant,
        timeout: Duration,
        gather: bool,
    ) -> Result<RemotingCommand> {
        self.invoke_admitted(
            request,
            deadline,
            timeout,
            Admission::WaitUntil(deadline),
            gather,
        )
        .await
    }

    async fn invoke_admitted(
        &self,
        mut request: RemotingCommand,
        deadline: Instant,
        timeout: Duration,
        admission: Admission,
        gather: bool,
    ) -> Result<RemotingCommand> {
        let opaque = next_opaque();
        request.opaque = opaque;
        request.flag &= !(FLAG_RESPONSE | FLAG_ONEWAY);
        // Holds are for a server's responses.
        request.hold = None;
        let mut frame = encode_split(request)?;
        frame.gather = gather;
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
        match self.enqueue(frame, admission).await {
            Ok(()) => {}
            Err(RemotingError::SendFailed { .. }) if Instant::now() >= deadline => {
                return Err(timed_out());
            }
            Err(e) => return Err(e),
        }
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) => Err(self.close_error()),
            Err(_) => Err(timed_out()),
        }
    }

    /// Sends a request that must not be answered (the ONEWAY flag is set). Fails at once with
    /// `WriteBufferFull` when the connection is not writable.
    pub async fn invoke_oneway(&self, request: RemotingCommand) -> Result<()> {
        self.invoke_oneway_admitted(request, Admission::FailFast)
            .await
    }

    /// Like [`Channel::invoke_oneway`], but waits up to `deadline` for a congested connection
    /// to drain: a client's own oneway requests.
    pub(crate) async fn invoke_oneway_until(
        &self,
        request: RemotingCommand,
        deadline: Instant,
    ) -> Result<()> {
        self.invoke_oneway_admitted(request, Admission::WaitUntil(deadline))
            .await
    }

    async fn invoke_oneway_admitted(
        &self,
        mut request: RemotingCommand,
        admission: Admission,
    ) -> Result<()> {
        request.opaque = next_opaque();
        request.flag = (request.flag | FLAG_ONEWAY) & !FLAG_RESPONSE;
        request.hold = None;
        let frame = encode_split(request)?;
        self.enqueue(frame, admission).await
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

    async fn enqueue(&self, frame: Frame, admission: Admission) -> Result<()> {
        let closed = || RemotingError::ConnectionClosed {
            addr: self.addr_string(),
        };
        if !self.is_active() {
            return Err(closed());
        }
        let budget = &self.inner.budget;
        match admission {
            Admission::Always => {}
            Admission::FailFast => {
                if budget.congested() {
                    let queued = budget.queued();
                    self.inner.overload.report(
                        OverloadReason::WriteBufferFull,
                        self.inner.remote,
                        &format!("{queued} bytes queued, limit {}", budget.high_water),
                    );
                    return Err(RemotingError::WriteBufferFull {
                        addr: self.addr_string(),
                        queued,
                        limit: budget.high_water,
                    });
                }
            }
            Admission::WaitUntil(deadline) => {
                if budget.congested() {
                    tokio::select! {
                        _ = self.writable() => {}
                        _ = tokio::time::sleep_until(deadline) => {
                            return Err(RemotingError::SendFailed {
                                addr: self.addr_string(),
                                reason: format!(
                                    "write buffer stayed over its {} byte high-water mark",
                                    budget.high_water
                                ),
                            });
                        }
                    }
                    if !self.is_active() {
                        return Err(closed());
                    }
                }
            }
        }
        let len = frame.len();
        budget.add(len);
        if self.inner.writer.send(frame).is_err() {
            budget.release(len);
            return Err(closed());
        }
        Ok(())
    }
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
