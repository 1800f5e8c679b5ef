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
    pub consumer_group: String,
    pub message_queue: MessageQueue,
    pub msg_list: Vec<MessageExt>,
    /// Set before `consume_message_after`.
    pub success: bool,
    /// The listener's status name (`CONSUME_SUCCESS`, `RECONSUME_LATER`, `SUCCESS`, ...).
    pub status: String,
    /// Free-form properties hooks may pass from before to after (e.g. `ConsumeContextType`).
    pub props: HashMap<String, String>,
    pub namespace: Option<String>,
}

/// Called around every listener invocation.
pub trait ConsumeMessageHook: Send + Sync + 'static {
    fn hook_name(&self) -> &str;
    fn consume_message_before(&self, ctx: &mut ConsumeMessageContext);
    fn consume_message_after(&self, ctx: &mut ConsumeMessageContext);
}

/// What a [`FilterMessageHook`] is told about one pull result.
#[derive(Debug)]
pub struct FilterMessageContext<'a> {
    pub consumer_group: &'a str,
    pub message_queue: &'a MessageQueue,
    /// The messages found; the hook may remove some.
    pub msg_list: &'a mut Vec<MessageExt>,
    pub unit_mode: bool,
}

/// Called on every pull result after the client-side tag filter.
pub trait FilterMessageHook: Send + Sync + 'static {
    fn hook_name(&self) -> &str;
    fn filter_message(&self, ctx: &mut FilterMessageContext<'_>);
}
