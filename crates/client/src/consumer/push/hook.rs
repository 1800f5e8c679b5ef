//! Hooks around consumption, the extension points tracing and auditing plug into.
//!
//! A [`ConsumeMessageHook`] sees every batch before the listener runs and after it returns (with
//! the status), a [`FilterMessageHook`] sees every pull result and may remove messages before
//! they are cached. Hooks run inline on the consume/pull task, so they must be quick.

use std::collections::HashMap;

use crate::consumer::{MessageExt, MessageQueue};

/// What a [`ConsumeMessageHook`] is told about one batch.
#[derive(Debug, Clone)]
pub struct ConsumeMessageContext {
    /// The consumer group.
    pub consumer_group: String,
    /// The queue the batch came from.
    pub message_queue: MessageQueue,
    /// The messages of the batch.
    pub msg_list: Vec<MessageExt>,
    /// Set before `consume_message_after`.
    pub success: bool,
    /// The listener's status name (`CONSUME_SUCCESS`, `RECONSUME_LATER`, `SUCCESS`, ...).
    pub status: String,
    /// Free-form properties hooks may pass from before to after (e.g. `ConsumeContextType`).
    pub props: HashMap<String, String>,
    /// The consumer's namespace, if any.
    pub namespace: Option<String>,
}

/// Called around every listener invocation.
pub trait ConsumeMessageHook: Send + Sync + 'static {
    /// A name for logs.
    fn hook_name(&self) -> &str;
    /// Called before the listener runs.
    fn consume_message_before(&self, ctx: &mut ConsumeMessageContext);
    /// Called after the listener returned, with `success` and `status` set.
    fn consume_message_after(&self, ctx: &mut ConsumeMessageContext);
}

/// What a [`FilterMessageHook`] is told about one pull result.
#[derive(Debug)]
pub struct FilterMessageContext<'a> {
    /// The consumer group.
    pub consumer_group: &'a str,
    /// The queue pulled.
    pub message_queue: &'a MessageQueue,
    /// The messages found; the hook may remove some.
    pub msg_list: &'a mut Vec<MessageExt>,
    /// Unit mode of the consumer.
    pub unit_mode: bool,
}

/// Called on every pull result after the client-side tag filter.
pub trait FilterMessageHook: Send + Sync + 'static {
    /// A name for logs.
    fn hook_name(&self) -> &str;
    /// Looks at (and may remove) the messages of one pull result.
    fn filter_message(&self, ctx: &mut FilterMessageContext<'_>);
}
