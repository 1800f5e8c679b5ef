//! The two tasks behind every [`Channel`]: a reader that owns framing and dispatch, and a writer
//! that owns the socket's write half.
//!
//! Reader: takes a permit of the per-connection in-flight semaphore *before* reading each frame,
//! so when `max_in_flight` requests are being processed it stops reading and TCP flow control
//! slows the peer down — memory stays bounded without refusing anyone. Responses complete the
//! matching pending request. On a server connection a request is first run on the reader itself
//! up to its first wait; one that has to wait continues on its own task, so requests still
//! overlap. On a client connection (requests from the broker run application code) every request
//! gets its own task.
//!
//! Unsent responses are bounded in bytes, not frames: a peer that pipelines pulls and never
//! reads would otherwise make the broker hold `in-flight × response size` (hundreds of MiB).
//! Two gates use the channel's write budget
//! ([`crate::limits::DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK`]):
//! a server reader stops taking new frames while the queued bytes are over the mark (so TCP
//! pushes back on the peer), and a two-way request already read waits *before* it is processed
//! until the writer drains — a response that is never produced costs no memory. Oneway requests
//! produce nothing and are not held. A reader paused this long without any drain (the idle
//! timeout) closes the connection, as Netty's all-idle handler does. A paused reader reads nothing,
//! answers to the server's own calls included; new calls are refused while congested anyway,
//! and one issued before times out like any unanswered call. Client connections never
//! pause reading: their peer's responses must keep flowing or both sides could wait on each
//! other.
//!
//! Writer: drains the write queue in batches, copying small frames into one buffer so a burst of
//! responses costs a few syscalls instead of one per frame; large bodies are written straight from
//! their own buffer. Before each write it runs the server's [`crate::ResponseFence`], if any (the
//! broker commits the appends of the sends being answered); when the fence reports that it woke
//! tasks about to answer too (the broker: pulls held for those messages), the writer lets them
//! run once, takes what they queued into the same write and runs the fence again, so that a
//! producer's answer and its consumer's pull response reach the peer together (a producer and a
//! push consumer in one process: one `sendto` per message instead of two). Before writing a batch holding a frame
//! marked [`Frame::gather`] (a server's response to a request that waited, a client's gathered
//! request) it lets the other ready tasks run once, so frames produced together leave together
//! (see [`write_loop`]). A response marked with a [`comet_protocol::ResponseHold`] (the broker's
//! answer to a SYNC_FLUSH send) is kept back, after the fence ran, until the fence releases its
//! position or its hold times out (see [`crate::held`]); the others leave without it. Queued
//! bytes are released once handed to the socket.
//!
//! Either task ending closes the channel, which stops the other one; the reader then fires
//! `on_close`. On server shutdown (`stop`), readers stop taking new requests but keep the
//! connection open until the server closes it, so in-flight responses can still be written.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::channel::Channel;
use crate::codec::Frame;
use crate::error::RemotingError;
use crate::held::HeldResponses;
use crate::limits::{
    WRITE_BATCH_MAX_FRAMES, WRITE_COALESCE_BYTES, WRITE_DIRECT_THRESHOLD, WRITE_DRAIN_TIMEOUT,
    WRITE_MAX_PARTS,
};
use crate::processor::Dispatcher;

mod reader;

use reader::read_loop;

/// Per-connection settings, derived from the server or client config.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionOptions {
    pub idle_timeout: Option<Duration>,
    pub max_in_flight: usize,
    pub max_pending_invokes: usize,
    /// Queued bytes at which the connection counts as congested.
    pub write_high_water: usize,
    /// Stop reading while congested (server connections only, see the module docs).
    pub pause_reads_when_congested: bool,
    /// Run each request on the reader up to its first wait (server connections). A client's
    /// processors run application code (a transaction check, a direct consume) that may block;
    /// on a client connection that would hold up every response the reader has yet to deliver,
    /// so there every request gets its own task at once.
    pub run_requests_inline: bool,
    /// Mark the responses of requests that waited as worth gathering ([`Frame::gather`]), so
    /// that responses completed together reach the same write (server connections; see
    /// [`write_loop`]). On a client connection every request runs on its own task, so all its
    /// (rare) responses would count as such.
    pub gather_waited_responses: bool,
    /// The reader yields once after this many requests of a read had to wait (server
    /// connections: [`crate::limits::READER_YIELD_AFTER_WAITING_REQUESTS`]; `usize::MAX` never). A client
    /// with many requests in flight on one connection sends them together; when they have to
    /// wait (a call to another peer, a held pull), letting the first few start their wait
    /// before the rest of the read is processed overlaps the waits with the reading. (SYNC_FLUSH
    /// sends, for which this was made, no longer wait on a task: their answers are held by the
    /// writer, see `crate::held`.)
    pub yield_after_waiting_requests: usize,
}

/// Where a connection's tasks are spawned and what stops them.
#[derive(Clone)]
pub(crate) struct ConnectionContext {
    pub dispatcher: Arc<Dispatcher>,
    pub options: ConnectionOptions,
    /// Reader and writer tasks.
    pub connections: TaskTracker,
    /// Request-processing tasks (awaited by graceful shutdown).
    pub requests: TaskTracker,
    /// Cancelled when the endpoint stops taking new requests.
    pub stop: CancellationToken,
    /// Parent of every channel's close token: cancelling it closes all connections.
    pub close_all: CancellationToken,
}

impl ConnectionContext {
    /// This context for a connection accepted now, with the idle timeout in force.
    pub fn accepting(&self, idle_timeout: Option<Duration>) -> ConnectionContext {
        let mut ctx = self.clone();
        ctx.options.idle_timeout = idle_timeout;
        ctx
    }
}

/// Wraps an established stream in a [`Channel`] and spawns its reader and writer.
pub(crate) fn spawn_connection(
    stream: TcpStream,
    ctx: &ConnectionContext,
) -> std::io::Result<Channel> {
    let remote = stream.peer_addr()?;
    let local = stream.local_addr()?;
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(peer = %remote, error = %e, "cannot set TCP_NODELAY");
    }
    let (read_half, write_half) = stream.into_split();
    Ok(spawn_halves(read_half, write_half, remote, local, ctx))
}

/// Like [`spawn_connection`] for any byte stream (a TLS session over TCP): the caller has
/// already read the addresses and set socket options on the underlying TCP stream.
pub(crate) fn spawn_stream<S>(
    stream: S,
    remote: std::net::SocketAddr,
    local: std::net::SocketAddr,
    ctx: &ConnectionContext,
) -> Channel
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (read_half, write_half) = tokio::io::split(stream);
    spawn_halves(read_half, write_half, remote, local, ctx)
}

fn spawn_halves<R, W>(
    read_half: R,
    write_half: W,
    remote: std::net::SocketAddr,
    local: std::net::SocketAddr,
    ctx: &ConnectionContext,
) -> Channel
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    // Unbounded in frames: the channel's write budget bounds it in bytes.
    let (tx, rx) = mpsc::unbounded_channel();
    let channel = Channel::new(
        remote,
        local,
        tx,
        ctx.options.write_high_water,
        Arc::clone(ctx.dispatcher.overload()),
        ctx.options.max_pending_invokes,
        ctx.close_all.child_token(),
    );
    if let Some(listener) = ctx.dispatcher.listener() {
        listener.on_connect(&channel);
    }
    ctx.connections.spawn(write_loop(
        channel.clone(),
        write_half,
        rx,
        Arc::clone(&ctx.dispatcher),
    ));
    ctx.connections
        .spawn(read_loop(channel.clone(), read_half, ctx.clone()));
    channel
}

/// The writer task.
///
/// A batch that is not full and holds a frame marked [`Frame::gather`] waits for one turn of
/// the scheduler before it is written, and meanwhile takes what the other ready tasks queued.
/// Such frames are produced together: a SYNC_FLUSH group commit answers every send it covered,
/// a new message wakes many held pulls, a batch of responses wakes a producer's senders, each
/// of which sends its next message. The first frame queued wakes this writer, which tokio runs
/// next (its LIFO slot), so without the turn each went out in its own `send`. With 32
/// concurrent synchronous 1 KiB sends under SYNC_FLUSH, gathering on the server side took
/// 32.7–35.0 k msg/s to 41.6–42.6 k and broker CPU per send from 25–27 to 20 µs. Unmarked frames
/// are written at once: responses produced on the reader itself (a send under ASYNC_FLUSH) are
/// already written in batches, and gathering those too only delayed them (4 % fewer of those
/// sends per second); a consumer's pull request waiting for the consumer's other tasks made a
/// consumer catching up on a backlog 15–20 % slower (see
/// [`crate::RemotingClient::invoke_gathered`] for the client side).
async fn write_loop<W: AsyncWrite + Unpin>(
    channel: Channel,
    mut socket: W,
    mut queue: mpsc::UnboundedReceiver<Frame>,
    dispatcher: Arc<Dispatcher>,
) {
    let close = channel.close_token().clone();
    // Set before the server starts (`RemotingServer::start` consumes the server), so once.
    let fence = dispatcher.fence();
    let mut held = HeldResponses::of_fence(fence.as_ref());
    let on_expired = |until: u64| {
        if let Some(f) = &fence {
            f.on_hold_expired(until);
        }
    };
    // Bounds how long writes may continue once the connection is closing (peer not reading).
    let drain_deadline = async {
        close.cancelled().await;
        tokio::time::sleep(WRITE_DRAIN_TIMEOUT).await;
    };
    tokio::pin!(drain_deadline);
    // Both grow with use (a busy connection keeps its largest batch, under WRITE_COALESCE_BYTES
    // plus one frame); an idle connection keeps what its few frames needed.
    let mut batch = Vec::new();
    let mut buf = BytesMut::new();
    loop {
        // Queued frames first: a closing connection still flushes what was queued before, and
        // the responses it holds once released or expired (within the drain deadline).
        let received = tokio::select! {
            biased;
            n = queue.recv_many(&mut batch, WRITE_BATCH_MAX_FRAMES) => n,
            () = held.ready() => usize::MAX,
            _ = close.cancelled(), if held.is_empty() => 0,
            _ = &mut drain_deadline => 0,
        };
        if received == 0 {
            break;
        }
        if batch.len() < WRITE_BATCH_MAX_FRAMES && batch.iter().any(|f| f.gather) {
            gather_ready(&mut queue, &mut batch).await;
        }
        let settled = match settle(fence.as_deref()) {
            Ok(settled) => settled,
            Err(reason) => {
                fail_unsettled(&channel, &reason, &mut batch);
                break;
            }
        };
        if settled.woke_responders && batch.len() < WRITE_BATCH_MAX_FRAMES {
            // What they queue joins this write; frames that came with it may answer work done
            // after the settle, so the fence runs once more before anything leaves.
            gather_ready(&mut queue, &mut batch).await;
            if let Err(reason) = settle(fence.as_deref()) {
                fail_unsettled(&channel, &reason, &mut batch);
                break;
            }
        }
        // Settled first: the fence's commit is what lets a held answer's flush start.
        held.admit(&mut batch, channel.budget(), on_expired);
        if let Some(f) = &fence {
            f.release(!held.is_empty());
        }
        held.take_ready(
            &mut batch,
            WRITE_BATCH_MAX_FRAMES,
            channel.budget(),
            on_expired,
        );
        if batch.is_empty() {
            continue;
        }
        let batch_bytes: usize = batch.iter().map(Frame::len).sum();
        let result = tokio::select! {
            r = write_batch(&mut socket, &mut batch, &mut buf) => r,
            _ = &mut drain_deadline => break,
        };
        channel.budget().release(batch_bytes);
        if let Err(e) = result {
            tracing::debug!(peer = %channel.remote_addr(), error = %e, "write failed, closing connection");
            let error = RemotingError::from(e);
            if let Some(listener) = dispatcher.listener() {
                listener.on_exception(&channel, &error);
            }
            break;
        }
    }
    channel.close();
    let _ = tokio::time::timeout(WRITE_DRAIN_TIMEOUT, socket.shutdown()).await;
}

/// Lets the other ready tasks run once, then adds what they queued to `batch` (up to
/// [`WRITE_BATCH_MAX_FRAMES`]).
async fn gather_ready(queue: &mut mpsc::UnboundedReceiver<Frame>, batch: &mut Vec<Frame>) {
    tokio::task::yield_now().await;
    while batch.len() < WRITE_BATCH_MAX_FRAMES {
        match queue.try_recv() {
            Ok(frame) => batch.push(frame),
            Err(_) => break,
        }
    }
}

/// Runs the server's fence, if any (see [`crate::ResponseFence`]).
fn settle(fence: Option<&dyn crate::ResponseFence>) -> Result<crate::Settled, String> {
    fence.map_or(Ok(crate::Settled::default()), |f| f.settle())
}

/// Drops the responses a failed fence kept from leaving (the connection closes next).
fn fail_unsettled(channel: &Channel, reason: &str, batch: &mut Vec<Frame>) {
    tracing::error!(peer = %channel.remote_addr(), %reason,
        "closing connection: the work its responses depend on failed");
    channel
        .budget()
        .release(batch.iter().map(Frame::len).sum::<usize>());
    batch.clear();
}

/// Writes `batch` (emptying it) with vectored writes. Small frames and the heads of large ones
/// are copied into `buf`; a body buffer of at least [`WRITE_DIRECT_THRESHOLD`] bytes is a part
/// of the write of its own, so a pull response's records (slices of the mapped CommitLog) reach
/// the socket without another copy. A write covers up to [`WRITE_COALESCE_BYTES`] of frames.
async fn write_batch<W: AsyncWrite + Unpin>(
    socket: &mut W,
    batch: &mut Vec<Frame>,
    buf: &mut BytesMut,
) -> std::io::Result<()> {
    let mut parts = Vec::new();
    let mut pending = 0;
    for frame in batch.iter() {
        let start = buf.len();
        buf.extend_from_slice(&frame.head);
        push_copied(&mut parts, start..buf.len());
        for body in frame.bodies() {
            if body.len() >= WRITE_DIRECT_THRESHOLD {
                parts.push(WritePart::Shared(body.clone()));
            } else {
                let start = buf.len();
                buf.extend_from_slice(body);
                push_copied(&mut parts, start..buf.len());
            }
        }
        pending += frame.len();
        if pending >= WRITE_COALESCE_BYTES || parts.len() >= WRITE_MAX_PARTS {
            write_parts(socket, &parts, buf).await?;
            parts.clear();
            buf.clear();
            pending = 0;
        }
    }
    if !parts.is_empty() {
        write_parts(socket, &parts, buf).await?;
    }
    buf.clear();
    batch.clear();
    Ok(())
}

/// One part of a vectored write: bytes copied into the writer's buffer, or a body buffer written
/// from where it is.
enum WritePart {
    Copied(std::ops::Range<usize>),
    Shared(bytes::Bytes),
}

/// Adds `range` of the buffer to `parts`, joining it to the part before when they touch.
fn push_copied(parts: &mut Vec<WritePart>, range: std::ops::Range<usize>) {
    if range.is_empty() {
        return;
    }
    if let Some(WritePart::Copied(last)) = parts.last_mut()
        && last.end == range.start
    {
        last.end = range.end;
        return;
    }
    parts.push(WritePart::Copied(range));
}

/// Writes every part, in order, with as few vectored writes as the socket takes, each of at most
/// [`WRITE_MAX_PARTS`] buffers (one frame may bring more: a pull of many records).
async fn write_parts<W: AsyncWrite + Unpin>(
    socket: &mut W,
    parts: &[WritePart],
    buf: &[u8],
) -> std::io::Result<()> {
    let mut slices: Vec<std::io::IoSlice<'_>> = parts
        .iter()
        .map(|part| match part {
            WritePart::Copied(range) => buf.get(range.clone()).unwrap_or_default(),
            WritePart::Shared(bytes) => bytes.as_ref(),
        })
        .filter(|bytes| !bytes.is_empty())
        .map(std::io::IoSlice::new)
        .collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        let take = rest.len().min(WRITE_MAX_PARTS);
        let written = socket.write_vectored(&rest[..take]).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        std::io::IoSlice::advance_slices(&mut rest, written);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use bytes::Bytes;
    use comet_protocol::RemotingCommand;

    use parking_lot::Mutex;
    use tokio::sync::oneshot;

    use super::*;

    /// A socket write half that records the size of every write.
    #[derive(Clone, Default)]
    struct Writes(Arc<Mutex<Vec<usize>>>);

    impl AsyncWrite for Writes {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            self.0.lock().push(buf.len());
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// The writes that carry two requests on a client connection when the first one, once
    /// queued, wakes the task that sends the second (a response waking the next sender).
    async fn writes_of_two_requests(gather: bool) -> Vec<usize> {
        let ctx = crate::client::client_context(&crate::ClientConfig::default());
        // The peer never answers: the read half stays pending while `_peer` lives.
        let (read_half, _peer) = tokio::io::duplex(64);
        let writes = Writes::default();
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 9876));
        let channel = spawn_halves(read_half, writes.clone(), addr, addr, &ctx);
        let timeout = Duration::from_secs(30);
        let invoke = move |channel: Channel| async move {
            let request = RemotingCommand::request(10);
            let deadline = tokio::time::Instant::now() + timeout;
            channel
                .invoke_until(request, deadline, timeout, gather)
                .await
        };
        let (wake_second, woken) = oneshot::channel::<()>();
        let second = tokio::spawn({
            let channel = channel.clone();
            async move {
                let _ = woken.await;
                invoke(channel).await
            }
        });
        let mut first = Box::pin(invoke(channel.clone()));
        // Polled once, the first request is queued (the writer is woken) and waits for its
        // response; only then is the second sender woken.
        assert!(futures::poll!(first.as_mut()).is_pending());
        let _ = wake_second.send(());
        // Single-threaded: a few turns let every task run to its wait; nothing else happens.
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        let seen = writes.0.lock().clone();
        second.abort();
        ctx.close_all.cancel();
        seen
    }

    /// A fence whose settle wakes a "responder": a task that queues a response of its own on the
    /// channel, as a held pull answered by the appends being committed does.
    struct WakesResponder {
        channel: Mutex<Option<Channel>>,
        reports_it: bool,
    }

    impl crate::ResponseFence for WakesResponder {
        fn settle(&self) -> Result<crate::Settled, String> {
            let Some(channel) = self.channel.lock().take() else {
                return Ok(crate::Settled::default());
            };
            tokio::spawn(async move {
                let mut pulled = RemotingCommand::response(0, None);
                pulled.opaque = 2;
                let _ = channel.send_response(pulled).await;
            });
            Ok(crate::Settled {
                woke_responders: self.reports_it,
            })
        }
    }

    /// The writes that carry one response and the response of the responder its settle woke.
    async fn writes_of_a_response_and_the_one_it_woke(reports_it: bool) -> Vec<usize> {
        let mut ctx = crate::client::client_context(&crate::ClientConfig::default());
        let fence = Arc::new(WakesResponder {
            channel: Mutex::new(None),
            reports_it,
        });
        let dispatcher = Dispatcher::default();
        dispatcher.set_fence(Arc::clone(&fence) as Arc<dyn crate::ResponseFence>);
        ctx.dispatcher = Arc::new(dispatcher);
        let (read_half, _peer) = tokio::io::duplex(64);
        let writes = Writes::default();
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 10911));
        let channel = spawn_halves(read_half, writes.clone(), addr, addr, &ctx);
        *fence.channel.lock() = Some(channel.clone());
        let mut sent = RemotingCommand::response(0, None);
        sent.opaque = 1;
        channel
            .send_response(sent)
            .await
            .unwrap_or_else(|e| panic!("queue: {e}"));
        // Single-threaded: a few turns let every task run to its wait; nothing else happens.
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        let seen = writes.0.lock().clone();
        ctx.close_all.cancel();
        seen
    }

    /// A socket write half that takes at most `limit` bytes per vectored write and records the
    /// bytes, the address of every buffer it was handed and the most buffers of one write.
    struct Vectored {
        limit: usize,
        bytes: Vec<u8>,
        buffers: Vec<usize>,
        most_buffers: usize,
    }

    impl AsyncWrite for Vectored {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            self.poll_write_vectored(cx, &[std::io::IoSlice::new(buf)])
        }

        fn poll_write_vectored(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[std::io::IoSlice<'_>],
        ) -> Poll<std::io::Result<usize>> {
            let me = self.get_mut();
            me.most_buffers = me.most_buffers.max(bufs.len());
            let mut taken = 0;
            for b in bufs {
                me.buffers.push(b.as_ptr() as usize);
                let n = b.len().min(me.limit - taken);
                me.bytes.extend_from_slice(&b[..n]);
                taken += n;
                if taken == me.limit {
                    break;
                }
            }
            Poll::Ready(Ok(taken))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_batch_goes_out_in_order_with_large_bodies_written_where_they_are() {
        let frame = |head: u8, body: Option<usize>| Frame {
            head: Bytes::from(vec![head; 40]),
            body: body.map(|n| Bytes::from(vec![head.wrapping_add(1); n])),
            body_parts: vec![Bytes::from(vec![head; 5]), Bytes::from(vec![head; 5000])],
            gather: false,
            hold: None,
        };
        let mut batch = vec![
            frame(1, None),
            frame(3, Some(100)),
            frame(5, Some(WRITE_DIRECT_THRESHOLD * 9)),
            frame(7, None),
            frame(9, Some(WRITE_DIRECT_THRESHOLD)),
            frame(11, Some(WRITE_COALESCE_BYTES)),
            frame(13, Some(10)),
        ];
        // A frame of more large parts than one write may carry.
        let mut many = frame(15, None);
        many.body_parts = vec![Bytes::from(vec![15; WRITE_DIRECT_THRESHOLD]); WRITE_MAX_PARTS + 88];
        batch.push(many);
        let expected: Vec<u8> = batch
            .iter()
            .flat_map(|f| {
                let mut bytes = f.head.to_vec();
                f.bodies().for_each(|b| bytes.extend_from_slice(b));
                bytes
            })
            .collect();
        let large: Vec<usize> = batch
            .iter()
            .flat_map(Frame::bodies)
            .filter(|b| b.len() >= WRITE_DIRECT_THRESHOLD)
            .map(|b| b.as_ptr() as usize)
            .collect();
        let mut socket = Vectored {
            limit: 3 * WRITE_DIRECT_THRESHOLD,
            bytes: Vec::new(),
            buffers: Vec::new(),
            most_buffers: 0,
        };
        let mut buf = BytesMut::new();
        write_batch(&mut socket, &mut batch, &mut buf)
            .await
            .unwrap_or_else(|e| panic!("write: {e}"));
        assert!(batch.is_empty() && buf.is_empty());
        assert_eq!(socket.bytes.len(), expected.len());
        assert!(socket.bytes == expected, "the frames' bytes, in order");
        assert!(
            socket.most_buffers <= WRITE_MAX_PARTS,
            "{}",
            socket.most_buffers
        );
        for body in large {
            assert!(
                socket.buffers.contains(&body),
                "a large body is handed to the socket from its own buffer"
            );
        }
    }

    /// Records when each request starts and when it resumes after its one wait.
    struct WaitsOnce(Arc<Mutex<Vec<(&'static str, i32)>>>);

    impl crate::RequestProcessor for WaitsOnce {
        fn process(
            &self,
            _: &Channel,
            request: RemotingCommand,
        ) -> futures::future::BoxFuture<'static, Option<RemotingCommand>> {
            let log = Arc::clone(&self.0);
            Box::pin(async move {
                log.lock().push(("start", request.opaque));
                tokio::task::yield_now().await;
                log.lock().push(("resumed", request.opaque));
                Some(RemotingCommand::response(0, None))
            })
        }
    }

    /// The order in which eight requests read together start and resume, on a server
    /// connection whose reader yields after `yield_after` waiting requests.
    async fn starts_and_resumes(yield_after: usize) -> Vec<(&'static str, i32)> {
        let mut ctx = crate::client::client_context(&crate::ClientConfig::default());
        ctx.options.run_requests_inline = true;
        ctx.options.yield_after_waiting_requests = yield_after;
        let log = Arc::new(Mutex::new(Vec::new()));
        let dispatcher = Dispatcher::default();
        dispatcher.register(10, Arc::new(WaitsOnce(Arc::clone(&log))));
        ctx.dispatcher = Arc::new(dispatcher);
        let (read_half, mut peer) = tokio::io::duplex(64 * 1024);
        let mut frames = BytesMut::new();
        for opaque in 1..=8 {
            let mut request = RemotingCommand::request(10);
            request.opaque = opaque;
            crate::codec::encode_frame(&request, &mut frames)
                .unwrap_or_else(|e| panic!("encode: {e}"));
        }
        peer.write_all(&frames)
            .await
            .unwrap_or_else(|e| panic!("write: {e}"));
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 10911));
        let _channel = spawn_halves(read_half, Writes::default(), addr, addr, &ctx);
        // Single-threaded: a few turns let every task run to its end; nothing else happens.
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        let seen = log.lock().clone();
        ctx.close_all.cancel();
        seen
    }

    #[tokio::test]
    async fn the_reader_lets_every_few_waiting_requests_run_before_reading_on() {
        let position = |log: &[(&str, i32)], event: (&str, i32)| {
            log.iter()
                .position(|e| *e == event)
                .unwrap_or_else(|| panic!("{event:?} missing from {log:?}"))
        };
        let yielding = starts_and_resumes(4).await;
        assert_eq!(yielding.len(), 16, "{yielding:?}");
        assert!(
            position(&yielding, ("resumed", 1)) < position(&yielding, ("start", 5)),
            "the first four waited while the rest was read: {yielding:?}"
        );
        let reading_on = starts_and_resumes(usize::MAX).await;
        assert_eq!(reading_on.len(), 16, "{reading_on:?}");
        assert!(
            position(&reading_on, ("start", 8)) < position(&reading_on, ("resumed", 1)),
            "without the yield every request starts first: {reading_on:?}"
        );
    }

    /// Answers at once, recording each request it ran.
    struct Answers(Arc<Mutex<Vec<(&'static str, i32)>>>);

    impl crate::RequestProcessor for Answers {
        fn process(
            &self,
            _: &Channel,
            request: RemotingCommand,
        ) -> futures::future::BoxFuture<'static, Option<RemotingCommand>> {
            self.0.lock().push(("ran", request.opaque));
            Box::pin(std::future::ready(Some(RemotingCommand::response(0, None))))
        }
    }

    /// A reader whose buffer holds many requests that all run inline never waits for the
    /// socket, so only the cooperative budget makes it give the thread up: another task must
    /// get to run before the last of them.
    #[tokio::test]
    async fn a_reader_with_a_full_buffer_of_inline_requests_lets_other_tasks_run() {
        const REQUESTS: i32 = 1_000;
        let mut ctx = crate::client::client_context(&crate::ClientConfig::default());
        ctx.options.run_requests_inline = true;
        let log = Arc::new(Mutex::new(Vec::new()));
        let dispatcher = Dispatcher::default();
        dispatcher.register(10, Arc::new(Answers(Arc::clone(&log))));
        ctx.dispatcher = Arc::new(dispatcher);
        let mut frames = BytesMut::new();
        for opaque in 1..=REQUESTS {
            let mut request = RemotingCommand::request(10);
            request.opaque = opaque;
            crate::codec::encode_frame(&request, &mut frames)
                .unwrap_or_else(|e| panic!("encode: {e}"));
        }
        let (read_half, mut peer) = tokio::io::duplex(frames.len() + 1);
        peer.write_all(&frames)
            .await
            .unwrap_or_else(|e| panic!("write: {e}"));
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 10911));
        let _channel = spawn_halves(read_half, Writes::default(), addr, addr, &ctx);
        let other = Arc::clone(&log);
        tokio::spawn(async move { other.lock().push(("other task", 0)) });
        let done = ("ran", REQUESTS);
        for _ in 0..1_000 {
            if log.lock().contains(&done) {
                break;
            }
            tokio::task::yield_now().await;
        }
        let seen = log.lock().clone();
        ctx.close_all.cancel();
        let at = |event| seen.iter().position(|e| *e == event);
        let (Some(other), Some(last)) = (at(("other task", 0)), at(done)) else {
            panic!(
                "every request and the other task run: {} events",
                seen.len()
            );
        };
        assert!(
            other < last,
            "the other task ran after all {REQUESTS} requests"
        );
    }

    #[tokio::test]
    async fn responses_of_work_the_fence_woke_join_the_write() {
        let together = writes_of_a_response_and_the_one_it_woke(true).await;
        assert_eq!(together.len(), 1, "{together:?}");
        let apart = writes_of_a_response_and_the_one_it_woke(false).await;
        assert_eq!(apart.len(), 2, "{apart:?}");
        assert_eq!(together[0], apart.iter().sum::<usize>(), "the same bytes");
    }

    #[tokio::test]
    async fn gathered_requests_sent_together_share_a_write() {
        let mut one = BytesMut::new();
        crate::codec::encode_frame(&RemotingCommand::request(10), &mut one)
            .unwrap_or_else(|e| panic!("encode: {e}"));
        let gathered = writes_of_two_requests(true).await;
        assert_eq!(gathered.len(), 1, "{gathered:?}");
        assert!(gathered[0] >= 2 * one.len(), "{gathered:?}");
        let plain = writes_of_two_requests(false).await;
        assert_eq!(plain.len(), 2, "{plain:?}");
    }
}
