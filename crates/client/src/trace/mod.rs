//! Message trace, compatible with the Java client's (`org.apache.rocketmq.client.trace`).
//!
//! With `enable_msg_trace` on a [`ProducerConfig`](crate::producer::ProducerConfig), a
//! [`PushConsumerConfig`](crate::consumer::push::PushConsumerConfig) or a
//! [`LitePullConsumerConfig`](crate::consumer::lite::LitePullConsumerConfig), the client records:
//!
//! - a **Pub** event after every send the broker answered (sync, async, batch; a oneway send has
//!   no answer and so no event): group, topic, msgId, offset msgId, tags, keys, broker, body
//!   length, cost, message type, success;
//! - an **EndTransaction** event for every commit or rollback a transaction producer reports;
//! - a **SubBefore** event before the listener gets a batch and a **SubAfter** event after it
//!   returns (cost, success, the listener's return type as a context code); a lite pull consumer
//!   records both when `poll` hands a batch out.
//!
//! Events go through an [`AsyncTraceDispatcher`] to the trace topic ([`RMQ_SYS_TRACE_TOPIC`], or
//! `custom_trace_topic`) in the records format of [`data`], indexed under the traced message's
//! msgId and keys. [`query_traces`] reads them back, as mqadmin's `queryMsgTraceById` does; Java
//! tools read records written here and the other way round.

pub mod data;
mod dispatcher;
mod hooks;

pub use data::{
    CONTENT_SPLITOR, FIELD_SPLITOR, MessageType, TraceBean, TraceContext, TraceDecodeError,
    TraceTransferBean, TraceType, decode, encode,
};
pub use dispatcher::{
    AsyncTraceDispatcher, TRACE_BATCH_NUM, TRACE_MAX_MSG_SIZE, TRACE_QUEUE_CAPACITY,
    TRACE_SEND_TIMEOUT, TRACE_SHUTDOWN_WAIT, TraceDispatcherType, trace_messages,
};
pub use hooks::{
    ConsumeMessageTraceHook, DEFAULT_TRACE_REGION_ID, EndTransactionTraceHook,
    SendMessageTraceHook, transaction_state_name,
};

use crate::admin::MQAdmin;
use crate::error::{ClientError, Result};

/// The default trace topic.
pub const RMQ_SYS_TRACE_TOPIC: &str = comet_protocol::naming::TRACE_TOPIC;
/// Prefix of the internal trace producers' groups.
pub const GROUP_NAME_PREFIX: &str = "_INNER_TRACE_PRODUCER";
/// Prefix of the internal trace producers' instance names.
pub const TRACE_INSTANCE_NAME: &str = "PID_CLIENT_INNER_TRACE_PRODUCER";
/// Most trace messages one query reads (mqadmin's `queryMsgTraceById` reads as many).
pub const TRACE_QUERY_MAX_NUM: i32 = 64;

/// The trace events of the message `msg_id` stored in `trace_topic`, found by querying the topic
/// by key and decoding the trace messages; events of other messages that share a trace message
/// are left out. Ordered as stored.
pub async fn query_traces(
    admin: &MQAdmin,
    trace_topic: &str,
    msg_id: &str,
) -> Result<Vec<TraceContext>> {
    let found = admin
        .query_message_by_key(trace_topic, msg_id, TRACE_QUERY_MAX_NUM, 0, i64::MAX)
        .await?;
    let mut out = Vec::new();
    for msg in found {
        let body = String::from_utf8_lossy(&msg.body);
        let events = decode(&body).map_err(|e| {
            ClientError::Client(format!("trace message {} undecodable: {e}", msg.msg_id()))
        })?;
        out.extend(
            events
                .into_iter()
                .filter(|e| e.beans.first().is_some_and(|b| b.msg_id == msg_id)),
        );
    }
    Ok(out)
}

/// One trace event as a JSON object with every field of the record (the first message's fields
/// for a consumed batch): what `comet msg trace --json` prints and the web console shows.
pub fn record_json(record: &TraceContext) -> serde_json::Value {
    let bean = record.beans.first().cloned().unwrap_or_default();
    serde_json::json!({
        "type": record.trace_type.name(),
        "timestamp": record.time_stamp,
        "regionId": record.region_id,
        "group": record.group_name,
        "requestId": record.request_id,
        "costTime": record.cost_time,
        "success": record.success,
        "contextCode": record.context_code,
        "topic": bean.topic,
        "msgId": bean.msg_id,
        "offsetMsgId": bean.offset_msg_id,
        "tags": bean.tags,
        "keys": bean.keys,
        "storeHost": bean.store_host,
        "clientHost": bean.client_host,
        "bodyLength": bean.body_length,
        "retryTimes": bean.retry_times,
        "msgType": bean.msg_type.java_name(),
        "transactionId": bean.transaction_id,
        "transactionState": bean.transaction_state,
        "fromTransactionCheck": bean.from_transaction_check,
    })
}
