//! The reader task of a connection: takes a permit, reads a frame, completes a response or runs
//! a request (inline up to its first wait, or on its own task), and pauses while the peer does not
//! read its responses (see the parent module's docs).

use std::convert::Infallible;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use comet_protocol::RemotingCommand;
use comet_protocol::code::ResponseCode;
use futures::StreamExt;
use tokio::io::AsyncRead;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

use super::ConnectionContext;
use crate::channel::Channel;
use crate::codec::RemotingCodec;
use crate::error::RemotingError;
use crate::limits::READ_BUFFER_CAPACITY;
use crate::overload::OverloadReason;
use crate::processor::Dispatcher;

enum ReadEvent {
    Frame(RemotingCommand),
    Idle,
    Eof,
    Failed(RemotingError),
}

/// Waits for the next frame, for at most `idle` when given.
async fn wait_for_event<R: AsyncRead + Unpin>(
    reader: &mut FramedRead<R, RemotingCodec>,
    idle: Option<Duration>,
) -> ReadEvent {
    let next = match idle {
        Some(idle) => match tokio::time::timeout(idle, reader.next()).await {
            Ok(next) => next,
            Err(_) => return ReadEvent::Idle,
        },
        None => reader.next().await,
    };
    ReadEvent::from(next)
}

impl From<Option<Result<RemotingCommand, RemotingError>>> for ReadEvent {
    fn from(next: Option<Result<RemotingCommand, RemotingError>>) -> Self {
        match next {
            Some(Ok(cmd)) => ReadEvent::Frame(cmd),
            Some(Err(e)) => ReadEvent::Failed(e),
            None => ReadEvent::Eof,
        }
    }
}

/// Why a connection's reader stopped reading.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Exit {
    /// The connection closed or is being closed (by either side, idleness or a bad frame).
    Closed,
    /// The endpoint stopped taking new requests: keep the connection until it is closed so the
    /// responses of requests still in flight can be written.
    Stopped,
}

/// The reader task of a connection (see the module docs); closes the channel when it ends.
pub(super) async fn read_loop<R: AsyncRead + Unpin>(
    channel: Channel,
    read_half: R,
    ctx: ConnectionContext,
) {
    let mut frames =
        FramedRead::with_capacity(read_half, RemotingCodec::new(), READ_BUFFER_CAPACITY);
    let mut reader = Reader::new(channel, ctx);
    let Err(exit) = reader.read_frames(&mut frames).await;
    if exit == Exit::Stopped {
        // Shutting down: take no more requests, but keep the connection until it is closed so
        // the responses of requests still in flight can be written.
        reader.close.cancelled().await;
    }
    reader.channel.close();
    if let Some(listener) = reader.ctx.dispatcher.listener() {
        listener.on_close(&reader.channel);
    }
}

/// A connection's reader: the in-flight permits that bound its frames, and what stops it.
struct Reader {
    channel: Channel,
    ctx: ConnectionContext,
    max_in_flight: usize,
    permits: Arc<Semaphore>,
    close: CancellationToken,
    peer: std::net::SocketAddr,
    /// Requests run here inline produce their responses on this task (see `process_request`).
    /// A response made anywhere else comes from a request that waited (see `write_loop`).
    gather_from: Waited,
    /// Requests spawned (they had to wait) since the reader last let them run.
    waiting_since_yield: usize,
}

impl Reader {
    fn new(channel: Channel, ctx: ConnectionContext) -> Self {
        let max_in_flight = ctx.options.max_in_flight.max(1);
        let permits = Arc::new(Semaphore::new(max_in_flight));
        let close = channel.close_token().clone();
        let peer = channel.remote_addr();
        let gather_from = Waited {
            reader: tokio::task::try_id(),
            gather: ctx.options.gather_waited_responses,
        };
        Reader {
            channel,
            ctx,
            max_in_flight,
            permits,
            close,
            peer,
            gather_from,
            waiting_since_yield: 0,
        }
    }

    /// Reads and handles frames until the connection closes or the endpoint stops.
    async fn read_frames<R: AsyncRead + Unpin>(
        &mut self,
        frames: &mut FramedRead<R, RemotingCodec>,
    ) -> Result<Infallible, Exit> {
        loop {
            if self.ctx.options.pause_reads_when_congested && !self.channel.is_writable() {
                self.wait_until_drained().await?;
                continue;
            }
            // The common case first, without waiting: a permit is free and the next frame is
            // already read. Only a real wait goes through `select!` with the close and stop
            // tokens, whose `cancelled()` futures each take their token's lock to register a
            // waiter and again to remove it: four lock round trips per request, on both sides of
            // every connection.
            self.check_cancelled()?;
            let permit = self.acquire_permit().await?;
            match self.read_event(frames).await? {
                ReadEvent::Frame(cmd) if cmd.is_response() => self.complete_response(cmd),
                ReadEvent::Frame(cmd) => self.handle_request(cmd, permit).await,
                ReadEvent::Idle => self.on_idle()?,
                ReadEvent::Eof => {
                    tracing::debug!(peer = %self.peer, "connection closed by peer");
                    return Err(Exit::Closed);
                }
                ReadEvent::Failed(error) => {
                    self.on_read_failed(&error);
                    return Err(Exit::Closed);
                }
            }
        }
    }

    /// Back-pressure: the peer does not read its responses, so read nothing until the writer
    /// drains them. Not draining within the idle timeout closes the connection.
    async fn wait_until_drained(&self) -> Result<(), Exit> {
        let channel = &self.channel;
        let queued = channel.queued_bytes();
        self.ctx.dispatcher.overload().report(
            OverloadReason::ReadsPaused,
            self.peer,
            &format!("{queued} bytes of responses unsent"),
        );
        let drained = async {
            match self.ctx.options.idle_timeout {
                Some(idle) => tokio::time::timeout(idle, channel.writable()).await.is_ok(),
                None => {
                    channel.writable().await;
                    true
                }
            }
        };
        let drained = tokio::select! {
            biased;
            _ = self.close.cancelled() => return Err(Exit::Closed),
            _ = self.ctx.stop.cancelled() => return Err(Exit::Stopped),
            drained = drained => drained,
        };
        if !drained {
            tracing::warn!(peer = %self.peer, queued = channel.queued_bytes(),
                "closing connection: its responses did not drain within the idle timeout");
            if let Some(listener) = self.ctx.dispatcher.listener() {
                listener.on_idle(channel);
            }
            return Err(Exit::Closed);
        }
        Ok(())
    }

    /// Whether the connection was closed or the endpoint stopped, checked without waiting.
    #[inline]
    fn check_cancelled(&self) -> Result<(), Exit> {
        if self.close.is_cancelled() {
            return Err(Exit::Closed);
        }
        if self.ctx.stop.is_cancelled() {
            return Err(Exit::Stopped);
        }
        Ok(())
    }

    /// A permit of the in-flight semaphore, taken before reading each frame: while
    /// `max_in_flight` requests are being processed, nothing is read.
    async fn acquire_permit(&self) -> Result<OwnedSemaphorePermit, Exit> {
        // The semaphore's `acquire` counted against the task's cooperative budget; the fast
        // path must too, or a reader with a full buffer of inline requests would never yield.
        tokio::task::consume_budget().await;
        match Arc::clone(&self.permits).try_acquire_owned() {
            Ok(permit) => Ok(permit),
            Err(TryAcquireError::Closed) => Err(Exit::Closed),
            Err(TryAcquireError::NoPermits) => tokio::select! {
                biased;
                _ = self.close.cancelled() => Err(Exit::Closed),
                _ = self.ctx.stop.cancelled() => Err(Exit::Stopped),
                permit = Arc::clone(&self.permits).acquire_owned() => match permit {
                    Ok(permit) => Ok(permit),
                    Err(_) => Err(Exit::Closed),
                },
            },
        }
    }

    /// The next frame (or idleness, end of stream, a read error), without waiting when one is
    /// already buffered.
    async fn read_event<R: AsyncRead + Unpin>(
        &self,
        frames: &mut FramedRead<R, RemotingCodec>,
    ) -> Result<ReadEvent, Exit> {
        // Polling the reader once is safe to repeat: a frame is either returned or stays
        // buffered, and a pending poll only registers the waker the `select!` registers again.
        let ready = std::future::poll_fn(|cx| Poll::Ready(frames.poll_next_unpin(cx))).await;
        match ready {
            Poll::Ready(next) => Ok(ReadEvent::from(next)),
            Poll::Pending => tokio::select! {
                biased;
                _ = self.close.cancelled() => Err(Exit::Closed),
                _ = self.ctx.stop.cancelled() => Err(Exit::Stopped),
                event = wait_for_event(frames, self.ctx.options.idle_timeout) => Ok(event),
            },
        }
    }

    /// A response completes the matching pending request.
    #[inline]
    fn complete_response(&self, cmd: RemotingCommand) {
        if !self.channel.complete(cmd) {
            tracing::debug!(peer = %self.peer, "response for a request nobody waits for (timed out?)");
        }
    }

    /// Runs a request here up to its first wait (server connections), or on its own task.
    async fn handle_request(&mut self, cmd: RemotingCommand, permit: OwnedSemaphorePermit) {
        let dispatcher = Arc::clone(&self.ctx.dispatcher);
        let channel = self.channel.clone();
        let gather_from = self.gather_from;
        let mut request = Box::pin(async move {
            let _permit = permit;
            // A response not yet produced costs nothing: hold two-way requests back while the
            // peer is not reading. If the connection closes meanwhile, the request is not
            // processed: its caller sees the close, and since nothing was done, retrying it is
            // safe.
            if !cmd.is_oneway() && !channel.is_writable() {
                channel.writable().await;
                if !channel.is_active() {
                    tracing::debug!(peer = %channel.remote_addr(), code = cmd.code,
                        "connection closed while the request was held; not processed");
                    return;
                }
            }
            process_request(&dispatcher, &channel, cmd, gather_from).await;
        });
        // Run the request here as far as it goes without waiting (a send under ASYNC_FLUSH, a
        // heartbeat, a pull that finds messages: all of it). Only a request that has to wait (a
        // flush, a held pull, a call to another peer) becomes a task of its own. This saves a
        // task spawn and, on a multi-threaded runtime, the wake-up of another worker thread per
        // request, which cost more than the work itself.
        let finished = self.ctx.options.run_requests_inline
            && std::future::poll_fn(|cx| Poll::Ready(request.as_mut().poll(cx).is_ready())).await;
        if !finished {
            self.ctx.requests.spawn(request);
            self.yield_to_waiting_requests().await;
        }
    }

    /// Lets every few waiting requests start their wait before reading on: sends under
    /// SYNC_FLUSH then write their records and ask for the group commit while the rest of the
    /// read is still being appended, so the flush overlaps the reading instead of following it
    /// (see `ConnectionOptions`).
    async fn yield_to_waiting_requests(&mut self) {
        self.waiting_since_yield += 1;
        if self.waiting_since_yield >= self.ctx.options.yield_after_waiting_requests {
            self.waiting_since_yield = 0;
            tokio::task::yield_now().await;
        }
    }

    /// No frame within the idle timeout: close the connection unless requests are still being
    /// processed or awaiting their responses.
    fn on_idle(&self) -> Result<(), Exit> {
        // Our own permit is held while reading; anything else missing is being processed.
        let processing = self.permits.available_permits() + 1 < self.max_in_flight;
        if processing || self.channel.pending_requests() > 0 {
            return Ok(());
        }
        tracing::info!(peer = %self.peer, "closing idle connection");
        if let Some(listener) = self.ctx.dispatcher.listener() {
            listener.on_idle(&self.channel);
        }
        Err(Exit::Closed)
    }

    /// A read error or an undecodable frame: the connection closes.
    fn on_read_failed(&self, error: &RemotingError) {
        match error {
            RemotingError::Io(e) => {
                tracing::debug!(peer = %self.peer, error = %e, "read failed")
            }
            other => {
                // Requests waiting on this connection fail with the reason, and their callers
                // report it; logged here only when nobody waits.
                if self.channel.record_close_reason(other.clone()) > 0 {
                    tracing::debug!(peer = %self.peer, reason = %other, "undecodable frame, closing connection")
                } else {
                    tracing::warn!(peer = %self.peer, reason = %other, "undecodable frame, closing connection")
                }
            }
        }
        if let Some(listener) = self.ctx.dispatcher.listener() {
            listener.on_exception(&self.channel, error);
        }
    }
}

/// How a response tells that its request had to wait: it is produced on another task than the
/// connection's reader.
#[derive(Clone, Copy)]
struct Waited {
    reader: Option<tokio::task::Id>,
    /// Whether such responses are marked [`crate::codec::Frame::gather`].
    gather: bool,
}

/// Runs one request and queues its response.
async fn process_request(
    dispatcher: &Dispatcher,
    channel: &Channel,
    request: RemotingCommand,
    waited: Waited,
) {
    let code = request.code;
    let Some(response) = dispatcher.dispatch(channel, request).await else {
        return;
    };
    let opaque = response.opaque;
    let serialize_type = response.serialize_type;
    let gather = waited.gather && tokio::task::try_id() != waited.reader;
    match channel.send_response_from(response, gather).await {
        Ok(()) => {}
        Err(RemotingError::Protocol(e)) => {
            tracing::error!(peer = %channel.remote_addr(), code, error = %e, "response cannot be encoded");
            let mut fallback = RemotingCommand::response(
                ResponseCode::SystemError,
                Some(format!("response cannot be encoded: {e}")),
            );
            fallback.opaque = opaque;
            fallback.serialize_type = serialize_type;
            if let Err(e) = channel.send_response(fallback).await {
                tracing::debug!(peer = %channel.remote_addr(), error = %e, "error response not sent");
            }
        }
        Err(e) => {
            tracing::debug!(peer = %channel.remote_addr(), code, error = %e, "response not sent")
        }
    }
}
