//! Hooks around sends and transaction ends, the extension points message trace plugs into.
//!
//! A [`SendMessageHook`] sees every send attempt before the request goes out and after the broker
//! answered (or the attempt failed); an [`EndTransactionHook`] sees every commit or rollback the
//! producer reports. Hooks run inline on the sending task, so they must be quick.

use std::any::Any;
use std::sync::Arc;

use super::prepare::Outgoing;
use super::{CommunicationMode, LocalTransactionState, ProducerInner, SendResult};
use crate::error::Result;
use crate::message::{Message, MessageQueue};
use crate::trace::MessageType;

/// What a [`SendMessageHook`] is told about one send attempt.
pub struct SendMessageContext {
    /// The producer group, without namespace.
    pub producer_group: String,
    /// The message as sent (topic without namespace; the body compressed if it was).
    pub message: Message,
    /// The queue the attempt goes to.
    pub mq: MessageQueue,
    /// The address of the broker the attempt goes to.
    pub broker_addr: String,
    /// The producer's client IP.
    pub born_host: String,
    /// Sync, async or oneway.
    pub communication_mode: CommunicationMode,
    /// Half of a transactional message, delayed message or an ordinary one.
    pub msg_type: MessageType,
    /// The broker's answer, set before `send_message_after` (none for a oneway send or a
    /// failed attempt).
    pub send_result: Option<SendResult>,
    /// The failure of the attempt, set before `send_message_after`.
    pub error: Option<String>,
    /// The client namespace, if any.
    pub namespace: Option<String>,
    /// Whatever a hook keeps from before to after the send.
    pub mq_trace_context: Option<Box<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for SendMessageContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendMessageContext")
            .field("producer_group", &self.producer_group)
            .field("topic", &self.message.topic)
            .field("broker_addr", &self.broker_addr)
            .field("send_result", &self.send_result)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

/// Called around every send attempt.
pub trait SendMessageHook: Send + Sync + 'static {
    /// The hook's name, for logs.
    fn hook_name(&self) -> &str;
    /// Before the request is sent.
    fn send_message_before(&self, ctx: &mut SendMessageContext);
    /// After the broker answered or the attempt failed.
    fn send_message_after(&self, ctx: &mut SendMessageContext);
}

/// What an [`EndTransactionHook`] is told about one commit or rollback.
#[derive(Debug, Clone)]
pub struct EndTransactionContext {
    /// The producer group, without namespace.
    pub producer_group: String,
    /// The broker the outcome is reported to.
    pub broker_addr: String,
    /// The transactional message's topic, without namespace.
    pub topic: String,
    /// Its TAGS property.
    pub tags: Option<String>,
    /// Its KEYS property.
    pub keys: Option<String>,
    /// Its MSG_REGION property (set by the broker on a checked message).
    pub region: Option<String>,
    /// The message id (UNIQ_KEY).
    pub msg_id: String,
    /// The broker's transaction id.
    pub transaction_id: Option<String>,
    /// The outcome reported.
    pub transaction_state: LocalTransactionState,
    /// Whether the outcome answers a broker check.
    pub from_transaction_check: bool,
}

/// Called for every transaction outcome the producer reports.
pub trait EndTransactionHook: Send + Sync + 'static {
    /// The hook's name, for logs.
    fn hook_name(&self) -> &str;
    /// Before END_TRANSACTION is sent.
    fn end_transaction(&self, ctx: &EndTransactionContext);
}

/// What a traced message is, from its properties (as the Java producer tells it).
fn msg_type_of(msg: &Message) -> MessageType {
    use comet_protocol::message::properties::keys;
    if msg.property("__STARTDELIVERTIME").is_some()
        || msg.property(keys::DELAY_TIME_LEVEL).is_some()
    {
        MessageType::DelayMsg
    } else if msg.property(keys::TRANSACTION_PREPARED) == Some("true") {
        MessageType::TransMsgHalf
    } else {
        MessageType::NormalMsg
    }
}

/// The send hooks of one attempt and the context they share.
pub(super) struct SendHookRun {
    hooks: Vec<Arc<dyn SendMessageHook>>,
    ctx: SendMessageContext,
}

impl ProducerInner {
    /// Runs the send hooks' `send_message_before` for an attempt of `outgoing` to `mq` at
    /// `broker_addr`; `None` when no hook is registered.
    pub(super) fn send_hooks_before(
        &self,
        outgoing: &Outgoing,
        mq: &MessageQueue,
        broker_addr: &str,
        mode: CommunicationMode,
    ) -> Option<SendHookRun> {
        let hooks = self.send_hooks.read().clone();
        if hooks.is_empty() {
            return None;
        }
        let mut message = outgoing.msg.clone();
        message.topic = self
            .config
            .client
            .without_namespace(&message.topic)
            .to_owned();
        let mut ctx = SendMessageContext {
            producer_group: self.config.producer_group.clone(),
            msg_type: msg_type_of(&message),
            message,
            mq: mq.clone(),
            broker_addr: broker_addr.to_owned(),
            born_host: self.config.client.client_ip.clone(),
            communication_mode: mode,
            send_result: None,
            error: None,
            namespace: self.config.client.namespace.clone(),
            mq_trace_context: None,
        };
        for hook in &hooks {
            hook.send_message_before(&mut ctx);
        }
        Some(SendHookRun { hooks, ctx })
    }

    /// Runs the send hooks' `send_message_after` with the attempt's outcome.
    pub(super) fn send_hooks_after(
        &self,
        run: Option<SendHookRun>,
        outcome: &Result<Option<SendResult>>,
    ) {
        let Some(SendHookRun { hooks, mut ctx }) = run else {
            return;
        };
        match outcome {
            Ok(result) => ctx.send_result.clone_from(result),
            Err(e) => ctx.error = Some(e.to_string()),
        }
        for hook in &hooks {
            hook.send_message_after(&mut ctx);
        }
    }

    /// Runs the end-transaction hooks for `ctx`.
    pub(super) fn end_transaction_hooks(&self, ctx: &EndTransactionContext) {
        for hook in self.end_transaction_hooks.read().iter() {
            hook.end_transaction(ctx);
        }
    }
}
