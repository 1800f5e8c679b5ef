//! Listeners made from closures, synchronous or async.
//!
//! The listener traits hand the listener borrowed messages and a borrowed context and expect a
//! boxed future back, which is the most general shape but awkward to write by hand. The
//! constructors here cover the usual cases:
//!
//! - [`MessageListener::concurrently_fn`] / [`MessageListener::orderly_fn`] take a synchronous
//!   closure over `(&[MessageExt], &mut Context)`;
//! - [`MessageListener::concurrently_async`] / [`MessageListener::orderly_async`] take a closure
//!   returning a future (`|msgs, ctx| async move { .. }`). Such a future must own what it uses,
//!   so the closure receives the batch as a `Vec<MessageExt>` (a copy of the cached messages;
//!   bodies are reference-counted, so the copy does not duplicate them) and the context by
//!   value. The future resolves to a status, or to `(status, context)` when the listener changed
//!   the context (an ack index, a delay level, a suspend time).
//!
//! The closure is called once per batch; state it shares across batches is captured by clone
//! (an `Arc`, a channel sender, a client handle), as with any `Fn` closure.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, ConsumeOrderlyContext,
    ConsumeOrderlyStatus, MessageExt, MessageListener, MessageListenerConcurrently,
    MessageListenerOrderly, concurrently_fn, orderly_fn,
};

/// What the future of an async concurrent listener may resolve to: a bare
/// [`ConsumeConcurrentlyStatus`], or the status with the context the listener changed.
pub trait ConcurrentlyReply: Send + 'static {
    /// The status, after copying the listener's context changes (if any) into `ctx`.
    fn into_status(self, ctx: &mut ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus;
}

impl ConcurrentlyReply for ConsumeConcurrentlyStatus {
    fn into_status(self, _ctx: &mut ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus {
        self
    }
}

impl ConcurrentlyReply for (ConsumeConcurrentlyStatus, ConsumeConcurrentlyContext) {
    fn into_status(self, ctx: &mut ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus {
        *ctx = self.1;
        self.0
    }
}

/// What the future of an async orderly listener may resolve to: a bare [`ConsumeOrderlyStatus`],
/// or the status with the context the listener changed.
pub trait OrderlyReply: Send + 'static {
    /// The status, after copying the listener's context changes (if any) into `ctx`.
    fn into_status(self, ctx: &mut ConsumeOrderlyContext) -> ConsumeOrderlyStatus;
}

impl OrderlyReply for ConsumeOrderlyStatus {
    fn into_status(self, _ctx: &mut ConsumeOrderlyContext) -> ConsumeOrderlyStatus {
        self
    }
}

impl OrderlyReply for (ConsumeOrderlyStatus, ConsumeOrderlyContext) {
    fn into_status(self, ctx: &mut ConsumeOrderlyContext) -> ConsumeOrderlyStatus {
        *ctx = self.1;
        self.0
    }
}

struct ConcurrentlyAsyncFn<F>(F);

impl<F, Fut> MessageListenerConcurrently for ConcurrentlyAsyncFn<F>
where
    F: Fn(Vec<MessageExt>, ConsumeConcurrentlyContext) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: ConcurrentlyReply,
{
    fn consume_message<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        ctx: &'a mut ConsumeConcurrentlyContext,
    ) -> BoxFuture<'a, ConsumeConcurrentlyStatus> {
        let reply = (self.0)(msgs.to_vec(), ctx.clone());
        Box::pin(async move { reply.await.into_status(ctx) })
    }
}

struct OrderlyAsyncFn<F>(F);

impl<F, Fut> MessageListenerOrderly for OrderlyAsyncFn<F>
where
    F: Fn(Vec<MessageExt>, ConsumeOrderlyContext) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: OrderlyReply,
{
    fn consume_message<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        ctx: &'a mut ConsumeOrderlyContext,
    ) -> BoxFuture<'a, ConsumeOrderlyStatus> {
        let reply = (self.0)(msgs.to_vec(), ctx.clone());
        Box::pin(async move { reply.await.into_status(ctx) })
    }
}

/// A concurrent listener from a closure returning a future (see the module docs).
pub fn concurrently_async_fn<F, Fut>(f: F) -> MessageListener
where
    F: Fn(Vec<MessageExt>, ConsumeConcurrentlyContext) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: ConcurrentlyReply,
{
    MessageListener::Concurrently(Arc::new(ConcurrentlyAsyncFn(f)))
}

/// An orderly listener from a closure returning a future (see the module docs).
pub fn orderly_async_fn<F, Fut>(f: F) -> MessageListener
where
    F: Fn(Vec<MessageExt>, ConsumeOrderlyContext) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: OrderlyReply,
{
    MessageListener::Orderly(Arc::new(OrderlyAsyncFn(f)))
}

impl MessageListener {
    /// A concurrent listener (Java `MessageListenerConcurrently`) from a synchronous closure;
    /// the same as [`concurrently_fn`].
    pub fn concurrently_fn<F>(f: F) -> MessageListener
    where
        F: Fn(&[MessageExt], &mut ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus
            + Send
            + Sync
            + 'static,
    {
        concurrently_fn(f)
    }

    /// An orderly listener (Java `MessageListenerOrderly`) from a synchronous closure; the same
    /// as [`orderly_fn`].
    pub fn orderly_fn<F>(f: F) -> MessageListener
    where
        F: Fn(&[MessageExt], &mut ConsumeOrderlyContext) -> ConsumeOrderlyStatus
            + Send
            + Sync
            + 'static,
    {
        orderly_fn(f)
    }

    /// A concurrent listener from a closure returning a future:
    /// `MessageListener::concurrently_async(|msgs, ctx| async move { .. })`. The future owns
    /// the batch and a copy of the context, and resolves to a [`ConsumeConcurrentlyStatus`] or
    /// to `(status, context)`.
    pub fn concurrently_async<F, Fut>(f: F) -> MessageListener
    where
        F: Fn(Vec<MessageExt>, ConsumeConcurrentlyContext) -> Fut + Send + Sync + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: ConcurrentlyReply,
    {
        concurrently_async_fn(f)
    }

    /// An orderly listener from a closure returning a future:
    /// `MessageListener::orderly_async(|msgs, ctx| async move { .. })`. The future owns the
    /// batch and a copy of the context, and resolves to a [`ConsumeOrderlyStatus`] or to
    /// `(status, context)`.
    pub fn orderly_async<F, Fut>(f: F) -> MessageListener
    where
        F: Fn(Vec<MessageExt>, ConsumeOrderlyContext) -> Fut + Send + Sync + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: OrderlyReply,
    {
        orderly_async_fn(f)
    }

    /// A concurrent listener from a value implementing the trait.
    pub fn concurrently(listener: impl MessageListenerConcurrently) -> MessageListener {
        MessageListener::Concurrently(Arc::new(listener))
    }

    /// An orderly listener from a value implementing the trait.
    pub fn orderly(listener: impl MessageListenerOrderly) -> MessageListener {
        MessageListener::Orderly(Arc::new(listener))
    }

    /// Whether this listener consumes each queue in order.
    pub fn is_orderly(&self) -> bool {
        matches!(self, MessageListener::Orderly(_))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::consumer::MessageQueue;

    fn batch(bodies: &[&str]) -> Vec<MessageExt> {
        bodies
            .iter()
            .map(|b| MessageExt::new("T", bytes::Bytes::copy_from_slice(b.as_bytes())))
            .collect()
    }

    fn queue() -> MessageQueue {
        MessageQueue::new("T", "broker-a", 1)
    }

    async fn consume_concurrently(
        listener: &MessageListener,
        msgs: &[MessageExt],
        ctx: &mut ConsumeConcurrentlyContext,
    ) -> ConsumeConcurrentlyStatus {
        let MessageListener::Concurrently(l) = listener else {
            panic!("a concurrent listener");
        };
        l.consume_message(msgs, ctx).await
    }

    async fn consume_orderly(
        listener: &MessageListener,
        msgs: &[MessageExt],
        ctx: &mut ConsumeOrderlyContext,
    ) -> ConsumeOrderlyStatus {
        let MessageListener::Orderly(l) = listener else {
            panic!("an orderly listener");
        };
        l.consume_message(msgs, ctx).await
    }

    #[tokio::test]
    async fn an_async_concurrent_closure_sees_the_batch_and_shares_captured_state() {
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&seen);
        let listener = MessageListener::concurrently_async(move |msgs, ctx| {
            let counter = Arc::clone(&counter);
            async move {
                tokio::task::yield_now().await;
                assert_eq!(ctx.message_queue.queue_id, 1);
                counter.fetch_add(msgs.len(), Ordering::SeqCst);
                if msgs.iter().any(|m| &m.body[..] == b"bad") {
                    ConsumeConcurrentlyStatus::ReconsumeLater
                } else {
                    ConsumeConcurrentlyStatus::ConsumeSuccess
                }
            }
        });
        assert!(!listener.is_orderly());
        let mut ctx = ConsumeConcurrentlyContext::new(queue());
        let ok = consume_concurrently(&listener, &batch(&["a", "b"]), &mut ctx).await;
        let bad = consume_concurrently(&listener, &batch(&["bad"]), &mut ctx).await;
        assert_eq!(ok, ConsumeConcurrentlyStatus::ConsumeSuccess);
        assert_eq!(bad, ConsumeConcurrentlyStatus::ReconsumeLater);
        assert_eq!(seen.load(Ordering::SeqCst), 3);
        assert_eq!(
            ctx.ack_index,
            i32::MAX,
            "a bare status leaves the context alone"
        );
    }

    #[tokio::test]
    async fn an_async_concurrent_closure_can_change_the_context() {
        let listener = MessageListener::concurrently_async(|_msgs, mut ctx| async move {
            ctx.ack_index = 0;
            ctx.delay_level_when_next_consume = 5;
            (ConsumeConcurrentlyStatus::ConsumeSuccess, ctx)
        });
        let mut ctx = ConsumeConcurrentlyContext::new(queue());
        let status = consume_concurrently(&listener, &batch(&["a", "b"]), &mut ctx).await;
        assert_eq!(status, ConsumeConcurrentlyStatus::ConsumeSuccess);
        assert_eq!(ctx.ack_index, 0);
        assert_eq!(ctx.delay_level_when_next_consume, 5);
    }

    #[tokio::test]
    async fn an_async_orderly_closure_reports_status_and_context() {
        let listener = MessageListener::orderly_async(|msgs, mut ctx| async move {
            tokio::task::yield_now().await;
            if msgs.len() > 1 {
                ctx.suspend_current_queue_time_millis = Some(250);
                ctx.auto_commit = false;
                (ConsumeOrderlyStatus::SuspendCurrentQueueAMoment, ctx)
            } else {
                (ConsumeOrderlyStatus::Success, ctx)
            }
        });
        assert!(listener.is_orderly());
        let mut ctx = ConsumeOrderlyContext::new(queue());
        let one = consume_orderly(&listener, &batch(&["a"]), &mut ctx).await;
        assert_eq!(one, ConsumeOrderlyStatus::Success);
        assert!(ctx.auto_commit);
        let two = consume_orderly(&listener, &batch(&["a", "b"]), &mut ctx).await;
        assert_eq!(two, ConsumeOrderlyStatus::SuspendCurrentQueueAMoment);
        assert_eq!(
            ctx.suspend_time(),
            Some(std::time::Duration::from_millis(250))
        );
        assert!(!ctx.auto_commit);
        let bare =
            MessageListener::orderly_async(|_msgs, _ctx| async { ConsumeOrderlyStatus::Success });
        let mut ctx = ConsumeOrderlyContext::new(queue());
        assert_eq!(
            consume_orderly(&bare, &batch(&["a"]), &mut ctx).await,
            ConsumeOrderlyStatus::Success
        );
    }

    #[tokio::test]
    async fn synchronous_closures_have_associated_constructors_too() {
        let concurrent = MessageListener::concurrently_fn(|msgs, ctx| {
            ctx.ack_index = i32::try_from(msgs.len()).unwrap_or(i32::MAX) - 1;
            ConsumeConcurrentlyStatus::ConsumeSuccess
        });
        let mut ctx = ConsumeConcurrentlyContext::new(queue());
        consume_concurrently(&concurrent, &batch(&["a", "b", "c"]), &mut ctx).await;
        assert_eq!(ctx.ack_index, 2);
        let orderly = MessageListener::orderly_fn(|_, _| ConsumeOrderlyStatus::Success);
        assert!(orderly.is_orderly());
    }
}
