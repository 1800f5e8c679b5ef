//! What the transport calls into: request processors, RPC hooks and channel event listeners, and
//! the [`Dispatcher`] that routes one incoming request to them.
//!
//! The dispatcher is shared by the server and the client (a broker may send requests to a client,
//! e.g. NOTIFY_CONSUMER_IDS_CHANGED), so both sides answer requests with identical rules:
//! unknown codes get REQUEST_CODE_NOT_SUPPORTED, a rejecting processor gets SYSTEM_BUSY, a
//! panicking processor gets SYSTEM_ERROR — and the connection keeps serving in every case.
//!
//! A SYSTEM_BUSY refusal is counted and logged (rate-limited, see [`crate::overload`]). A oneway
//! request is never refused: it cannot be answered, so refusing it would drop it silently. It was
//! read off the connection, so it is processed; back-pressure for oneway floods comes from the
//! connection's in-flight bound, which stops reading.

use std::any::Any;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::code::ResponseCode;
use comet_protocol::command::{FLAG_ONEWAY, FLAG_RESPONSE};
use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::RwLock;

use crate::channel::Channel;
use crate::error::RemotingError;
use crate::overload::{OverloadMonitor, OverloadReason, TransportStats};

/// Handles the requests of one or more request codes.
pub trait RequestProcessor: Send + Sync + 'static {
    /// Processes `request` received on `channel`. Return `Some(response)` to answer — build it
    /// with `RemotingCommand::response(..)`; the transport sets the opaque, the RESPONSE flag and
    /// the request's serialize type. Return `None` to answer later through
    /// [`Channel::send_response`] (long polling) or not at all. Oneway requests are never answered.
    fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>>;

    /// `true` makes the transport answer SYSTEM_BUSY without calling `process` (flow control).
    fn reject(&self) -> bool {
        false
    }
}

/// Runs around every request a server (or a client, for server-initiated requests) processes,
/// and around every request a client sends.
pub trait RpcHook: Send + Sync + 'static {
    /// Called before processing (server) or before sending (client). `Err(response)` refuses the
    /// request: a server answers with that response, a client fails the call with `Rejected`.
    fn before_request(
        &self,
        remote: SocketAddr,
        request: &mut RemotingCommand,
    ) -> Result<(), Box<RemotingCommand>>;

    /// Called with every response the server is about to send, or the client has received.
    fn after_response(
        &self,
        remote: SocketAddr,
        request: &RemotingCommand,
        response: &mut RemotingCommand,
    );
}

/// Work a server connection does before it writes responses: the broker commits the CommitLog
/// appends it deferred (`comet_store::Commit::Deferred`), so the sends answered in one write
/// cost one `pwrite` and no answer leaves before its message is in the page cache.
pub trait ResponseFence: Send + Sync + 'static {
    /// Called by a server connection's writer before each write of queued responses. On
    /// `Err(reason)` those responses are not written and the connection is closed (the peer's
    /// calls time out and it may retry), because they could claim what did not happen.
    fn settle(&self) -> Result<Settled, String>;

    /// The position held responses wait for ([`comet_protocol::ResponseHold::until`]; the broker:
    /// how far the CommitLog is flushed), or `None` when this fence releases nothing. A server
    /// connection writes a held response once the value reaches its `until`; without a fence
    /// that releases, a held response leaves at once with its expired code.
    fn released(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }

    /// Called by the writer after `settle`, before it takes the held responses that may leave;
    /// `held` says whether some of its responses wait for a position [`ResponseFence::released`]
    /// has not reached. The fence sees that the position moves on for what `settle` did (the
    /// broker: under SYNC_FLUSH, the flush of the records it wrote). For a writer whose
    /// answers wait it may do that work on the calling thread, and they leave in this write.
    fn release(&self, _held: bool) {}

    /// How long a response may be held before it leaves with its expired code. Asked each time
    /// a writer holds responses, so a change applies to those held from then on; keep it cheap.
    fn hold_timeout(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }

    /// Called once for each held response that timed out, just before it is answered with its
    /// expired code (the broker counts and logs a flush timeout).
    fn on_hold_expired(&self, _until: u64) {}
}

/// Told of every request a server answered, with how long the answer took: the broker's
/// `rocketmq_rpc_latency` histogram. Called on the processing task right after the processor
/// returned its answer (before the answer is written); keep it to a few counter updates.
pub trait RequestObserver: Send + Sync + 'static {
    /// `request_code` was answered with `response_code` after `elapsed`. `oneway` requests are
    /// reported with the answer the processor gave, which is not sent. A processor that answers
    /// later by itself (a held pull) is not reported here; it reports its own answer.
    fn answered(
        &self,
        request_code: i32,
        response_code: i32,
        oneway: bool,
        elapsed: std::time::Duration,
    );
}

/// What settling did, as far as the writer cares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settled {
    /// Settling woke work that is about to queue responses of its own (the broker: pulls held
    /// for the messages just committed). The writer lets it run once before writing, so that a
    /// producer's answer and its own consumer's pull response leave in one write, and the peer
    /// is woken once for both.
    pub woke_responders: bool,
}

/// Connection lifecycle notifications. Called on the connection's own task: keep them short.
pub trait ChannelEventListener: Send + Sync + 'static {
    fn on_connect(&self, _channel: &Channel) {}
    fn on_close(&self, _channel: &Channel) {}
    /// The connection was idle past the idle timeout; it is closed right after this call.
    fn on_idle(&self, _channel: &Channel) {}
    /// A read or write failed, or a frame could not be decoded; the connection is closed.
    fn on_exception(&self, _channel: &Channel, _error: &RemotingError) {}
}

/// Routes incoming requests to processors. One per server or client, shared by its connections.
#[derive(Default)]
pub(crate) struct Dispatcher {
    processors: RwLock<HashMap<i32, Arc<dyn RequestProcessor>>>,
    default_processor: RwLock<Option<Arc<dyn RequestProcessor>>>,
    hooks: RwLock<Vec<Arc<dyn RpcHook>>>,
    listener: RwLock<Option<Arc<dyn ChannelEventListener>>>,
    fence: RwLock<Option<Arc<dyn ResponseFence>>>,
    /// Set once, before serving: read on every request without a lock or a reference count.
    observer: std::sync::OnceLock<Arc<dyn RequestObserver>>,
    overload: Arc<OverloadMonitor>,
}

impl Dispatcher {
    pub(crate) fn register(&self, code: i32, processor: Arc<dyn RequestProcessor>) {
        self.processors.write().insert(code, processor);
    }

    pub(crate) fn set_default_processor(&self, processor: Arc<dyn RequestProcessor>) {
        *self.default_processor.write() = Some(processor);
    }

    pub(crate) fn add_rpc_hook(&self, hook: Arc<dyn RpcHook>) {
        self.hooks.write().push(hook);
    }

    pub(crate) fn set_listener(&self, listener: Arc<dyn ChannelEventListener>) {
        *self.listener.write() = Some(listener);
    }

    pub(crate) fn listener(&self) -> Option<Arc<dyn ChannelEventListener>> {
        self.listener.read().clone()
    }

    pub(crate) fn set_fence(&self, fence: Arc<dyn ResponseFence>) {
        *self.fence.write() = Some(fence);
    }

    pub(crate) fn fence(&self) -> Option<Arc<dyn ResponseFence>> {
        self.fence.read().clone()
    }

    /// Installs `observer`; `false` when one was installed already (the first one stays).
    pub(crate) fn set_observer(&self, observer: Arc<dyn RequestObserver>) -> bool {
        self.observer.set(observer).is_ok()
    }

    /// The overload counters and log of this endpoint, shared with its connections.
    pub(crate) fn overload(&self) -> &Arc<OverloadMonitor> {
        &self.overload
    }

    pub(crate) fn stats(&self) -> Arc<TransportStats> {
        self.overload.stats()
    }

    fn processor(&self, code: i32) -> Option<Arc<dyn RequestProcessor>> {
        if let Some(p) = self.processors.read().get(&code) {
            return Some(Arc::clone(p));
        }
        self.default_processor.read().clone()
    }

    /// Processes one request and returns the response to send, already addressed to the request
    /// (opaque, flag, serialize type). `None` when nothing must be sent: oneway requests, or a
    /// processor that answers later by itself.
    pub(crate) async fn dispatch(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> Option<RemotingCommand> {
        let oneway = request.is_oneway();
        let opaque = request.opaque;
        let serialize_type = request.serialize_type;
        let code = request.code;
        let observer = self.observer.get();
        let started = observer.map(|_| std::time::Instant::now());
        let outcome = AssertUnwindSafe(self.run(channel, request))
            .catch_unwind()
            .await;
        let mut response = match outcome {
            Ok(response) => response?,
            Err(panic) => {
                let reason = panic_message(panic.as_ref());
                tracing::error!(peer = %channel.remote_addr(), code, %reason, "request processor panicked");
                RemotingCommand::response(
                    ResponseCode::SystemError,
                    Some(format!("request processor panicked: {reason}")),
                )
            }
        };
        if let (Some(observer), Some(started)) = (observer, started) {
            observer.answered(code, response.code, oneway, started.elapsed());
        }
        if oneway {
            return None;
        }
        response.opaque = opaque;
        response.flag = (response.flag | FLAG_RESPONSE) & !FLAG_ONEWAY;
        response.serialize_type = serialize_type;
        Some(response)
    }

    async fn run(
        &self,
        channel: &Channel,
        mut request: RemotingCommand,
    ) -> Option<RemotingCommand> {
        let remote = channel.remote_addr();
        let hooks = self.hooks.read().clone();
        for hook in &hooks {
            if let Err(mut refusal) = hook.before_request(remote, &mut request) {
                for h in &hooks {
                    h.after_response(remote, &request, &mut refusal);
                }
                return Some(*refusal);
            }
        }
        let code = request.code;
        let Some(processor) = self.processor(code) else {
            tracing::debug!(peer = %remote, code, "request code not supported");
            return Some(RemotingCommand::response(
                ResponseCode::RequestCodeNotSupported,
                Some(format!("request type {code} not supported")),
            ));
        };
        if !request.is_oneway() && processor.reject() {
            self.overload.report(
                OverloadReason::ProcessorBusy,
                remote,
                &format!("request code {code}"),
            );
            return Some(RemotingCommand::response(
                ResponseCode::SystemBusy,
                Some(format!(
                    "[REJECTREQUEST]system busy, start flow control for a while (request code {code})"
                )),
            ));
        }
        // Hooks see the request after processing; keep a copy only when someone will look at it
        // (the body is reference-counted, so the copy is the header only).
        let kept = if hooks.is_empty() {
            None
        } else {
            Some(request.clone())
        };
        let mut response = processor.process(channel, request).await?;
        if let Some(request) = &kept {
            for hook in &hooks {
                hook.after_response(remote, request, &mut response);
            }
        }
        Some(response)
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}
