//! Consumer side of the client: the types every consumer kind shares.
//!
//! RocketMQ has three consumer front ends (push, pull, lite pull) over one set of concepts: a group
//! reads a topic either in *clustering* (queues are shared out among the group's members) or
//! *broadcasting* (every member reads every queue) model, starts where [`ConsumeFromWhere`] says
//! when the broker has no stored offset, and reports progress through an offset store. The enums
//! travel in the HEART_BEAT body, so they are the protocol crate's types, re-exported here under the
//! names a RocketMQ user looks for.
//!
//! The push consumer hands messages to a *listener*. Java has listener interfaces; here they are
//! traits whose `consume_message` returns a boxed future, so a listener may await (call a database,
//! produce to another topic) without blocking a runtime worker. A listener that does not need to
//! await can be built from a plain closure with [`concurrently_fn`] / [`orderly_fn`].
//! One that awaits can be built from a closure returning a future with
//! [`MessageListener::concurrently_async`] / [`MessageListener::orderly_async`] ([`listener_fn`]).
//!
//! Shared by the consumer kinds: [`process_queue`] (what a consumer caches of one queue),
//! [`pull_request`] (one queue's turn in a pull loop, created by [`rebalance`]) and
//! [`flow_control`] (the admission check run before each pull of the push and lite pull
//! consumers).

pub mod flow_control;
pub mod listener_fn;
pub mod lite;
pub mod offset_store;
pub mod process_queue;
pub mod pull;
pub mod pull_request;
pub mod push;
pub mod rebalance;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

pub use comet_protocol::body::heartbeat::{SUB_ALL, parse_tags};
pub use comet_protocol::body::{
    ConsumeFromWhere, ConsumeType, MessageModel, MessageQueue, SubscriptionData,
};
pub use comet_protocol::message::MessageExt;

pub use listener_fn::{ConcurrentlyReply, OrderlyReply, concurrently_async_fn, orderly_async_fn};

/// What a concurrently consuming listener says about a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsumeConcurrentlyStatus {
    /// The messages up to and including `ConsumeConcurrentlyContext::ack_index` are done.
    ConsumeSuccess,
    /// Every message of the batch failed and must be redelivered later (sent back to the
    /// broker's retry topic in clustering).
    ReconsumeLater,
}

/// Per-call context of [`MessageListenerConcurrently`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumeConcurrentlyContext {
    /// The queue the batch came from.
    pub message_queue: MessageQueue,
    /// Delay level of the send-back: 0 lets the broker choose (3 + reconsume times), a positive
    /// value forces that level, a negative value sends the message straight to the DLQ.
    pub delay_level_when_next_consume: i32,
    /// Index of the last message that succeeded when the status is `ConsumeSuccess`; messages
    /// after it are treated as failed. Defaults to "all of them" (`i32::MAX`).
    pub ack_index: i32,
}

impl ConsumeConcurrentlyContext {
    /// A fresh context for a batch from `message_queue`.
    pub fn new(message_queue: MessageQueue) -> Self {
        ConsumeConcurrentlyContext {
            message_queue,
            delay_level_when_next_consume: 0,
            ack_index: i32::MAX,
        }
    }
}

/// What an orderly listener says about a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsumeOrderlyStatus {
    /// The batch is done (committed now or on the next commit, see `auto_commit`).
    Success,
    /// Stop the queue for `suspend_current_queue_time_millis` and retry the same batch.
    SuspendCurrentQueueAMoment,
}

/// Per-call context of [`MessageListenerOrderly`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumeOrderlyContext {
    /// The queue the batch came from.
    pub message_queue: MessageQueue,
    /// Commit the offset as soon as the listener returns `Success` (the default).
    pub auto_commit: bool,
    /// How long to suspend the queue on `SuspendCurrentQueueAMoment`; `None` (or a non-positive
    /// value) uses the consumer's `suspend_current_queue_time_millis`.
    pub suspend_current_queue_time_millis: Option<i64>,
}

impl ConsumeOrderlyContext {
    /// A fresh context for a batch from `message_queue`.
    pub fn new(message_queue: MessageQueue) -> Self {
        ConsumeOrderlyContext {
            message_queue,
            auto_commit: true,
            suspend_current_queue_time_millis: None,
        }
    }

    /// The suspend time the listener asked for, if any.
    pub fn suspend_time(&self) -> Option<Duration> {
        self.suspend_current_queue_time_millis
            .filter(|ms| *ms > 0)
            .and_then(|ms| u64::try_from(ms).ok())
            .map(Duration::from_millis)
    }
}

/// A listener that may consume messages of one queue in parallel batches.
///
/// The returned future runs on the consumer's bounded set of consume tasks; it must not assume
/// any ordering between batches.
pub trait MessageListenerConcurrently: Send + Sync + 'static {
    /// Consumes a batch of one queue; `ctx` may be changed to acknowledge part of it (`ack_index`)
    /// or pick the retry delay (Java `consumeMessage`).
    fn consume_message<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        ctx: &'a mut ConsumeConcurrentlyContext,
    ) -> BoxFuture<'a, ConsumeConcurrentlyStatus>;
}

/// A listener that receives the messages of each queue strictly in queue order, one batch at a
/// time per queue (the queue is locked on the broker in clustering).
pub trait MessageListenerOrderly: Send + Sync + 'static {
    /// Consumes a batch of one queue, in order; `ctx` may turn off auto-commit or set the suspend
    /// time (Java `consumeMessage`).
    fn consume_message<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        ctx: &'a mut ConsumeOrderlyContext,
    ) -> BoxFuture<'a, ConsumeOrderlyStatus>;
}

/// The listener a push consumer was given; it decides which consume service runs.
#[derive(Clone)]
pub enum MessageListener {
    /// Any order, parallel batches (Java `MessageListenerConcurrently`).
    Concurrently(Arc<dyn MessageListenerConcurrently>),
    /// Queue order, one batch at a time per queue (Java `MessageListenerOrderly`).
    Orderly(Arc<dyn MessageListenerOrderly>),
}

impl std::fmt::Debug for MessageListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MessageListener::Concurrently(_) => f.write_str("MessageListener::Concurrently"),
            MessageListener::Orderly(_) => f.write_str("MessageListener::Orderly"),
        }
    }
}

struct ConcurrentlyFn<F>(F);

impl<F> MessageListenerConcurrently for ConcurrentlyFn<F>
where
    F: Fn(&[MessageExt], &mut ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus
        + Send
        + Sync
        + 'static,
{
    fn consume_message<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        ctx: &'a mut ConsumeConcurrentlyContext,
    ) -> BoxFuture<'a, ConsumeConcurrentlyStatus> {
        let status = (self.0)(msgs, ctx);
        Box::pin(std::future::ready(status))
    }
}

struct OrderlyFn<F>(F);

impl<F> MessageListenerOrderly for OrderlyFn<F>
where
    F: Fn(&[MessageExt], &mut ConsumeOrderlyContext) -> ConsumeOrderlyStatus
        + Send
        + Sync
        + 'static,
{
    fn consume_message<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        ctx: &'a mut ConsumeOrderlyContext,
    ) -> BoxFuture<'a, ConsumeOrderlyStatus> {
        let status = (self.0)(msgs, ctx);
        Box::pin(std::future::ready(status))
    }
}

/// A concurrent listener from a synchronous closure.
pub fn concurrently_fn<F>(f: F) -> MessageListener
where
    F: Fn(&[MessageExt], &mut ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus
        + Send
        + Sync
        + 'static,
{
    MessageListener::Concurrently(Arc::new(ConcurrentlyFn(f)))
}

/// An orderly listener from a synchronous closure.
pub fn orderly_fn<F>(f: F) -> MessageListener
where
    F: Fn(&[MessageExt], &mut ConsumeOrderlyContext) -> ConsumeOrderlyStatus
        + Send
        + Sync
        + 'static,
{
    MessageListener::Orderly(Arc::new(OrderlyFn(f)))
}

/// Wall-clock milliseconds since the Unix epoch, the unit RocketMQ uses for every timestamp it
/// compares.
pub(crate) use comet_protocol::time::now_millis;

/// Milliseconds of a duration as RocketMQ's i64, saturating.
pub(crate) fn duration_millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A group's retry topic (`%RETRY%<group>`), its prefix and its test.
pub use comet_protocol::naming::{RETRY_GROUP_TOPIC_PREFIX, is_retry_topic, retry_topic};
