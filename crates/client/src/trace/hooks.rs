//! The hooks that turn sends, consumption and transaction ends into trace events (Java
//! `SendMessageTraceHookImpl`, `ConsumeMessageTraceHookImpl`, `EndTransactionTraceHookImpl`).

use std::sync::Arc;

use comet_protocol::message::id::UniqIdGenerator;
use comet_protocol::message::properties::keys;
use comet_protocol::time::now_millis;

use super::data::{MessageType, TraceBean, TraceContext, TraceType};
use super::dispatcher::AsyncTraceDispatcher;
use crate::consumer::push::hook::{ConsumeMessageContext, ConsumeMessageHook};
use crate::producer::hook::{
    EndTransactionContext, EndTransactionHook, SendMessageContext, SendMessageHook,
};
use crate::producer::{LocalTransactionState, SendStatus};

/// The region of a message whose broker announced none.
pub const DEFAULT_TRACE_REGION_ID: &str = "DefaultRegion";

/// Where a consume hook keeps, between before and after, the SubBefore's request id.
const PROP_REQUEST_ID: &str = "TraceRequestId";
/// Where a consume hook keeps the SubBefore's timestamp.
const PROP_TIMESTAMP: &str = "TraceTimeStamp";
/// Where a consume hook keeps the SubBefore's region.
const PROP_REGION: &str = "TraceRegionId";
/// The key under which the consume services pass the listener's return type.
const CONSUME_CONTEXT_TYPE: &str = "ConsumeContextType";

/// Milliseconds since `start`, divided over `count` messages, as an `i32`.
fn cost_since(start: i64, count: usize) -> i32 {
    let per = (now_millis() - start) / i64::try_from(count.max(1)).unwrap_or(1);
    i32::try_from(per).unwrap_or(i32::MAX)
}

/// Records a Pub event after every send the broker answered with trace on.
pub struct SendMessageTraceHook {
    dispatcher: Arc<AsyncTraceDispatcher>,
}

impl SendMessageTraceHook {
    /// A hook appending to `dispatcher`.
    pub fn new(dispatcher: Arc<AsyncTraceDispatcher>) -> Self {
        SendMessageTraceHook { dispatcher }
    }

    fn is_trace_data(&self, topic: &str) -> bool {
        topic.starts_with(self.dispatcher.trace_topic())
    }
}

impl SendMessageHook for SendMessageTraceHook {
    fn hook_name(&self) -> &str {
        "SendMessageTraceHook"
    }

    fn send_message_before(&self, ctx: &mut SendMessageContext) {
        if self.is_trace_data(&ctx.message.topic) {
            return;
        }
        let mut trace = TraceContext::new(TraceType::Pub, now_millis());
        trace.group_name.clone_from(&ctx.producer_group);
        trace.beans.push(TraceBean {
            topic: ctx.message.topic.clone(),
            tags: ctx.message.tags().map(str::to_owned),
            keys: ctx.message.property(keys::KEYS).map(str::to_owned),
            store_host: ctx.broker_addr.clone(),
            body_length: i32::try_from(ctx.message.body.len()).unwrap_or(i32::MAX),
            msg_type: ctx.msg_type,
            ..TraceBean::default()
        });
        ctx.mq_trace_context = Some(Box::new(trace));
    }

    fn send_message_after(&self, ctx: &mut SendMessageContext) {
        if self.is_trace_data(&ctx.message.topic) {
            return;
        }
        let Some(result) = ctx.send_result.as_ref().filter(|r| r.trace_on) else {
            return;
        };
        let Some(mut trace) = ctx
            .mq_trace_context
            .take()
            .and_then(|b| b.downcast::<TraceContext>().ok())
        else {
            return;
        };
        trace.cost_time = cost_since(trace.time_stamp, trace.beans.len());
        trace.success = result.send_status == SendStatus::SendOk;
        trace.region_id.clone_from(&result.region_id);
        if let Some(bean) = trace.beans.first_mut() {
            bean.msg_id.clone_from(&result.msg_id);
            bean.offset_msg_id.clone_from(&result.offset_msg_id);
            bean.store_time = trace.time_stamp + i64::from(trace.cost_time / 2);
        }
        self.dispatcher.append(*trace);
    }
}

/// Records a SubBefore event before the listener runs and a SubAfter event after it returns.
pub struct ConsumeMessageTraceHook {
    dispatcher: Arc<AsyncTraceDispatcher>,
    request_ids: UniqIdGenerator,
}

impl ConsumeMessageTraceHook {
    /// A hook appending to `dispatcher`; request ids are made like message ids of `client_ip`.
    pub fn new(dispatcher: Arc<AsyncTraceDispatcher>, client_ip: std::net::IpAddr) -> Self {
        ConsumeMessageTraceHook {
            dispatcher,
            request_ids: UniqIdGenerator::with_ip(client_ip),
        }
    }

    /// The beans of the traced messages (those whose TRACE_ON is not `false`) and the region of
    /// the last one; Java keeps the last message's region, and drops the event when it has none.
    fn beans(ctx: &ConsumeMessageContext) -> (Vec<TraceBean>, Option<String>) {
        let mut region = None;
        let mut beans = Vec::new();
        for msg in &ctx.msg_list {
            if msg.properties.get(keys::TRACE_SWITCH) == Some("false") {
                continue;
            }
            region = msg.properties.get(keys::MSG_REGION).map(str::to_owned);
            beans.push(TraceBean {
                topic: without_namespace(&msg.topic, ctx.namespace.as_deref()).to_owned(),
                msg_id: msg.msg_id(),
                tags: msg.tags().map(str::to_owned),
                keys: msg.properties.get(keys::KEYS).map(str::to_owned),
                store_time: msg.store_timestamp,
                body_length: msg.store_size,
                retry_times: msg.reconsume_times,
                ..TraceBean::default()
            });
        }
        (beans, region)
    }
}

fn without_namespace<'a>(name: &'a str, namespace: Option<&str>) -> &'a str {
    match namespace.filter(|ns| !ns.is_empty()) {
        Some(ns) => name
            .strip_prefix(ns)
            .and_then(|rest| rest.strip_prefix('%'))
            .unwrap_or(name),
        None => name,
    }
}

/// Java `ConsumeReturnType` ordinal of a return type name.
fn consume_return_code(name: &str) -> Option<i32> {
    ["SUCCESS", "TIME_OUT", "EXCEPTION", "RETURNNULL", "FAILED"]
        .iter()
        .position(|n| *n == name)
        .and_then(|i| i32::try_from(i).ok())
}

impl ConsumeMessageHook for ConsumeMessageTraceHook {
    fn hook_name(&self) -> &str {
        "ConsumeMessageTraceHook"
    }

    fn consume_message_before(&self, ctx: &mut ConsumeMessageContext) {
        let (beans, region) = Self::beans(ctx);
        if beans.is_empty() {
            return;
        }
        let mut trace = TraceContext::new(TraceType::SubBefore, now_millis());
        trace.group_name = without_namespace(&ctx.consumer_group, ctx.namespace.as_deref()).into();
        trace.request_id = self.request_ids.next_id();
        trace.beans = beans;
        ctx.props
            .insert(PROP_REQUEST_ID.to_owned(), trace.request_id.clone());
        ctx.props
            .insert(PROP_TIMESTAMP.to_owned(), trace.time_stamp.to_string());
        let Some(region) = region else {
            return;
        };
        ctx.props.insert(PROP_REGION.to_owned(), region.clone());
        trace.region_id = region;
        self.dispatcher.append(trace);
    }

    fn consume_message_after(&self, ctx: &mut ConsumeMessageContext) {
        let (beans, _) = Self::beans(ctx);
        let (Some(request_id), Some(region)) =
            (ctx.props.get(PROP_REQUEST_ID), ctx.props.get(PROP_REGION))
        else {
            return;
        };
        if beans.is_empty() {
            return;
        }
        let started = ctx
            .props
            .get(PROP_TIMESTAMP)
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(now_millis);
        let mut trace = TraceContext::new(TraceType::SubAfter, started);
        trace.group_name = without_namespace(&ctx.consumer_group, ctx.namespace.as_deref()).into();
        trace.region_id.clone_from(region);
        trace.request_id.clone_from(request_id);
        trace.success = ctx.success;
        trace.cost_time = cost_since(started, ctx.msg_list.len());
        trace.context_code = ctx
            .props
            .get(CONSUME_CONTEXT_TYPE)
            .and_then(|t| consume_return_code(t))
            .unwrap_or(0);
        trace.beans = beans;
        self.dispatcher.append(trace);
    }
}

/// Records an EndTransaction event for every transaction outcome reported.
pub struct EndTransactionTraceHook {
    dispatcher: Arc<AsyncTraceDispatcher>,
}

impl EndTransactionTraceHook {
    /// A hook appending to `dispatcher`.
    pub fn new(dispatcher: Arc<AsyncTraceDispatcher>) -> Self {
        EndTransactionTraceHook { dispatcher }
    }
}

/// The Java name of a transaction state, as EndTransaction records carry it.
pub fn transaction_state_name(state: LocalTransactionState) -> &'static str {
    match state {
        LocalTransactionState::CommitMessage => "COMMIT_MESSAGE",
        LocalTransactionState::RollbackMessage => "ROLLBACK_MESSAGE",
        LocalTransactionState::Unknown => "UNKNOW",
    }
}

impl EndTransactionHook for EndTransactionTraceHook {
    fn hook_name(&self) -> &str {
        "EndTransactionTraceHook"
    }

    fn end_transaction(&self, ctx: &EndTransactionContext) {
        if ctx.topic.starts_with(self.dispatcher.trace_topic()) {
            return;
        }
        let mut trace = TraceContext::new(TraceType::EndTransaction, now_millis());
        trace.group_name.clone_from(&ctx.producer_group);
        trace.region_id = ctx
            .region
            .clone()
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| DEFAULT_TRACE_REGION_ID.to_owned());
        trace.beans.push(TraceBean {
            topic: ctx.topic.clone(),
            msg_id: ctx.msg_id.clone(),
            tags: ctx.tags.clone(),
            keys: ctx.keys.clone(),
            store_host: ctx.broker_addr.clone(),
            msg_type: MessageType::TransMsgCommit,
            transaction_id: ctx.transaction_id.clone(),
            transaction_state: Some(transaction_state_name(ctx.transaction_state).to_owned()),
            from_transaction_check: ctx.from_transaction_check,
            ..TraceBean::default()
        });
        self.dispatcher.append(trace);
    }
}
