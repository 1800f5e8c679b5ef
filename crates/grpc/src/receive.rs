//! ReceiveMessage: a POP of the broker's own queues, answered as a stream of one `status`, the
//! messages found, and one `delivery_timestamp`.
//!
//! The request is checked as Apache's proxy checks it, then popped by the broker's POP operation
//! ([`comet_broker::core::pop::pop`]): every queue of the topic (queue id -1), the
//! group's POP retry topic included, with a new group starting at the end of the queues
//! (`initMode` MAX, except a backlog still whole, see the POP processor).
//!
//! - **Long polling:** the pop waits for messages up to the request's `long_polling_timeout`
//!   (else the call's remaining time less half the client's request timeout), clamped between
//!   `grpcClientConsumerMinLongPollingTimeoutMillis` (5 s) and 20 s, and never past the call's
//!   deadline (`grpc-timeout`, less a moment to write the answer): with less than the minimum
//!   left the answer is ILLEGAL_POLLING_TIME (BAD_REQUEST for clients before 5.0.3). Nothing
//!   found is MESSAGE_NOT_FOUND; too many held pops is TOO_MANY_REQUESTS.
//! - **Invisible time:** `invisible_duration` must lie within `minInvisibleTimeMillsForRecv`
//!   (10 s) and 12 h, else ILLEGAL_INVISIBLE_TIME. A push consumer asks for `auto_renew`; its
//!   messages are popped with `defaultInvisibleTimeMills` (60 s) instead, and the broker renews
//!   them until the client acks them ([`super::renew`]).
//! - **Batch:** at most 32 messages, at least one.
//! - **Filter:** TAG expressions as the POP processor filters them; SQL is passed on as SQL92,
//!   which the POP processor refuses (INTERNAL_SERVER_ERROR, as Apache's broker answers without
//!   `enablePropertyFilter`).
//! - **FIFO:** a group consuming orderly pops in order (`order=true`) with the request's
//!   `attempt_id`, so a retried request gets the same batch.
//!
//! Each message is mapped as [`super::message_view::to_v2`] maps it, with its receipt handle
//! (see [`super::consumer`]); `delivery_attempt` is the reconsume count plus one.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use comet_grpc_proto::v2;
use comet_grpc_proto::v2::receive_message_response::Content;
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::{POP_INIT_MODE_MAX, POP_MAX_MSG_NUMS, PopMessageRequestHeader};
use comet_protocol::message::MessageExt;
use comet_protocol::message::properties::keys;
use comet_protocol::message::record::decode_record;
use comet_protocol::time::now_millis;

use super::consumer::{GrpcReceipt, MAX_INVISIBLE, check_names, is_fifo_group, name_of};
use super::message_type::type_of;
use super::message_view::to_v2;
use super::renew::Renewals;
use super::status;
use comet_broker::context::BrokerContext;
use comet_broker::core::pop::{Popped, pop as pop_messages};
use comet_broker::pop::handle::ReceiptHandle;

/// Longest long poll.
pub const MAX_POLLING: Duration = Duration::from_secs(20);
/// The request timeout assumed for a client whose settings are unknown.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// Time kept back from the call's deadline to write the answer.
pub const ANSWER_MARGIN: Duration = Duration::from_millis(200);
/// First client version that knows ILLEGAL_POLLING_TIME.
const ILLEGAL_POLLING_TIME_SINCE: &str = "5.0.3";

/// Facts about the call a receive needs besides its request.
#[derive(Debug, Clone, Default)]
pub struct CallInfo {
    /// The client's `x-mq-client-id`.
    pub client_id: String,
    /// The client's address.
    pub peer: String,
    /// Time left before the call's deadline, when it has one.
    pub remaining: Option<Duration>,
    /// The client's request timeout (from its settings).
    pub request_timeout: Option<Duration>,
    /// The `x-mq-client-version` header.
    pub client_version: Option<String>,
}

/// The whole answer to a receive: status, messages, delivery timestamp.
pub async fn receive(
    ctx: &Arc<BrokerContext>,
    renewals: &Renewals,
    call: &CallInfo,
    request: &v2::ReceiveMessageRequest,
) -> Vec<v2::ReceiveMessageResponse> {
    match pop(ctx, call, request).await {
        Ok(messages) => {
            if request.auto_renew {
                hold(renewals, call, request, &messages);
            }
            let mut out = Vec::with_capacity(messages.len() + 2);
            out.push(content(Content::Status(status::ok())));
            out.extend(messages.into_iter().map(|m| content(Content::Message(m))));
            with_delivery_timestamp(out)
        }
        Err(status) => refused(status),
    }
}

/// Starts renewing the handles of `messages` (see [`super::renew`]).
fn hold(
    renewals: &Renewals,
    call: &CallInfo,
    request: &v2::ReceiveMessageRequest,
    messages: &[v2::Message],
) {
    let group = name_of(request.group.as_ref());
    for message in messages {
        let topic = name_of(message.topic.as_ref());
        let Some(system) = message.system_properties.as_ref() else {
            continue;
        };
        let receipt = system
            .receipt_handle
            .as_deref()
            .and_then(|h| GrpcReceipt::decode(h).ok());
        if let Some(receipt) = receipt {
            let reconsume_times = system.delivery_attempt.unwrap_or(1).saturating_sub(1);
            renewals.hold(
                (&call.client_id, group, topic),
                &system.message_id,
                receipt,
                reconsume_times,
            );
        }
    }
}

/// The answer to a receive refused with `status`: the status, then the delivery timestamp.
pub fn refused(status: v2::Status) -> Vec<v2::ReceiveMessageResponse> {
    with_delivery_timestamp(vec![content(Content::Status(status))])
}

fn with_delivery_timestamp(
    mut out: Vec<v2::ReceiveMessageResponse>,
) -> Vec<v2::ReceiveMessageResponse> {
    let now = now_millis();
    out.push(content(Content::DeliveryTimestamp(
        prost_types::Timestamp {
            seconds: now.div_euclid(1000),
            nanos: i32::try_from(now.rem_euclid(1000) * 1_000_000).unwrap_or(0),
        },
    )));
    out
}

fn content(content: Content) -> v2::ReceiveMessageResponse {
    v2::ReceiveMessageResponse {
        content: Some(content),
    }
}

fn millis(d: &prost_types::Duration) -> i64 {
    d.seconds
        .saturating_mul(1000)
        .saturating_add(i64::from(d.nanos / 1_000_000))
}

fn as_millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// How long the pop may wait for messages (ms), or the status refusing the request.
pub fn polling_time(
    call: &CallInfo,
    request: &v2::ReceiveMessageRequest,
    min_polling: Duration,
) -> Result<i64, v2::Status> {
    let min = as_millis(min_polling).min(as_millis(MAX_POLLING));
    let remaining = call
        .remaining
        .map(|r| as_millis(r.saturating_sub(ANSWER_MARGIN)));
    let wanted = match (&request.long_polling_timeout, remaining) {
        (Some(timeout), _) => millis(timeout),
        (None, Some(left)) => {
            left - as_millis(call.request_timeout.unwrap_or(DEFAULT_REQUEST_TIMEOUT)) / 2
        }
        (None, None) => as_millis(MAX_POLLING),
    };
    let poll = wanted.clamp(min, as_millis(MAX_POLLING));
    match remaining {
        Some(left) if poll > left && left >= min => Ok(left),
        Some(left) if poll > left => {
            let knows_code = call
                .client_version
                .as_deref()
                .is_some_and(|v| v >= ILLEGAL_POLLING_TIME_SINCE);
            let code = if knows_code {
                v2::Code::IllegalPollingTime
            } else {
                v2::Code::BadRequest
            };
            Err(status::of(
                code,
                "The deadline time remaining is not enough for polling, please check network \
                 condition",
            ))
        }
        _ => Ok(poll),
    }
}

/// The invisible time of the popped messages (ms), or ILLEGAL_INVISIBLE_TIME.
pub fn invisible_time(
    ctx: &BrokerContext,
    request: &v2::ReceiveMessageRequest,
) -> Result<i64, v2::Status> {
    if request.auto_renew {
        return Ok(
            i64::try_from(ctx.live_config().default_invisible_time_mills).unwrap_or(i64::MAX),
        );
    }
    let asked = request.invisible_duration.as_ref().map_or(0, millis);
    let min =
        i64::try_from(ctx.live_config().min_invisible_time_mills_for_recv).unwrap_or(i64::MAX);
    if asked < min {
        return Err(status::of(
            v2::Code::IllegalInvisibleTime,
            format!("the invisibleTime is too small. min is {min}"),
        ));
    }
    let max = as_millis(MAX_INVISIBLE);
    if asked > max {
        return Err(status::of(
            v2::Code::IllegalInvisibleTime,
            format!("the invisibleTime is too large. max is {max}"),
        ));
    }
    Ok(asked)
}

/// The pop of a checked receive.
fn pop_header(
    ctx: &BrokerContext,
    request: &v2::ReceiveMessageRequest,
    invisible: i64,
    poll: i64,
) -> PopMessageRequestHeader {
    let queue = request.message_queue.as_ref();
    let topic = name_of(queue.and_then(|q| q.topic.as_ref()));
    let group = name_of(request.group.as_ref());
    let filter = request.filter_expression.as_ref();
    let exp_type = match filter.map(v2::FilterExpression::r#type) {
        Some(v2::FilterType::Sql) => "SQL92",
        _ => "TAG",
    };
    let exp = filter
        .map(|f| f.expression.trim())
        .filter(|e| !e.is_empty())
        .unwrap_or("*");
    let order = is_fifo_group(ctx, group);
    PopMessageRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id: -1,
        max_msg_nums: request.batch_size.clamp(1, POP_MAX_MSG_NUMS),
        invisible_time: invisible,
        poll_time: poll,
        born_time: now_millis(),
        init_mode: POP_INIT_MODE_MAX,
        exp_type: Some(exp_type.to_owned()),
        exp: Some(exp.to_owned()),
        order: Some(order),
        attempt_id: if order {
            request.attempt_id.clone()
        } else {
            None
        },
        rpc: Default::default(),
    }
}

/// Checks and runs the pop; the messages found, or the status to answer.
async fn pop(
    ctx: &Arc<BrokerContext>,
    call: &CallInfo,
    request: &v2::ReceiveMessageRequest,
) -> Result<Vec<v2::Message>, v2::Status> {
    let min_polling = Duration::from_millis(
        ctx.live_config()
            .grpc_client_consumer_min_long_polling_timeout_millis,
    );
    let poll = polling_time(call, request, min_polling)?;
    let topic = name_of(
        request
            .message_queue
            .as_ref()
            .and_then(|q| q.topic.as_ref()),
    );
    check_names(name_of(request.group.as_ref()), topic)?;
    let invisible = invisible_time(ctx, request)?;
    let header = pop_header(ctx, request, invisible, poll);
    let popped = pop_messages(ctx, &call.peer, header)
        .await
        .map_err(|refusal| match refusal.code {
            ResponseCode::PollingTimeout | ResponseCode::NoMessage => {
                status::of(v2::Code::MessageNotFound, "no new message")
            }
            code => status::of(status::code_of(code), refusal.remark),
        })?;
    let batch = match popped {
        Popped::Batch(result) => result.batch,
        Popped::PollingFull => {
            return Err(status::of(v2::Code::TooManyRequests, "polling full"));
        }
    };
    if batch.records.is_empty() {
        return Err(status::of(v2::Code::MessageNotFound, "no new message"));
    }
    let messages: Vec<v2::Message> = records(&batch.records)
        .into_iter()
        .filter_map(to_message)
        .collect();
    if messages.is_empty() {
        return Err(status::of(v2::Code::MessageNotFound, "no match message"));
    }
    Ok(messages)
}

/// The messages of popped records; records that do not decode are logged and skipped.
fn records(records: &[Bytes]) -> Vec<MessageExt> {
    records
        .iter()
        .filter_map(|record| match decode_record(record, false) {
            Ok(msg) => Some(msg),
            Err(e) => {
                tracing::warn!(error = %e, "popped record does not decode; skipped");
                None
            }
        })
        .collect()
}

/// One popped message as a v2 message with its receipt handle; `None` when it carries no
/// handle.
fn to_message(mut msg: MessageExt) -> Option<v2::Message> {
    let handle = msg
        .properties
        .get(keys::POP_CK)
        .and_then(|text| ReceiptHandle::decode(text).ok())?;
    msg.properties.remove(keys::POP_CK);
    let receipt = GrpcReceipt::new(handle, msg.queue_offset, msg.commit_log_offset);
    let mut message = to_v2(&msg, type_of(&msg.properties));
    if let Some(system) = message.system_properties.as_mut() {
        system.receipt_handle = Some(receipt.encode());
    }
    Some(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: i64) -> prost_types::Duration {
        prost_types::Duration {
            seconds: s,
            nanos: 0,
        }
    }

    fn call(remaining: Option<u64>, version: &str) -> CallInfo {
        CallInfo {
            remaining: remaining.map(Duration::from_secs),
            client_version: Some(version.to_owned()),
            ..CallInfo::default()
        }
    }

    fn polling_time_5s(
        call: &CallInfo,
        request: &v2::ReceiveMessageRequest,
    ) -> Result<i64, v2::Status> {
        polling_time(call, request, Duration::from_secs(5))
    }

    #[test]
    fn the_polling_time_is_clamped_and_bounded_by_the_deadline() {
        let mut request = v2::ReceiveMessageRequest {
            long_polling_timeout: Some(secs(30)),
            ..Default::default()
        };
        assert_eq!(
            polling_time_5s(&call(Some(60), "5.0.8"), &request),
            Ok(20_000)
        );
        request.long_polling_timeout = Some(secs(1));
        assert_eq!(
            polling_time_5s(&call(Some(60), "5.0.8"), &request),
            Ok(5_000)
        );
        request.long_polling_timeout = Some(secs(15));
        assert_eq!(
            polling_time_5s(&call(Some(10), "5.0.8"), &request),
            Ok(10_000 - 200)
        );
        let short = polling_time_5s(&call(Some(3), "5.0.8"), &request).unwrap_err();
        assert_eq!(short.code(), v2::Code::IllegalPollingTime);
        let old = polling_time_5s(&call(Some(3), "5.0.2"), &request).unwrap_err();
        assert_eq!(old.code(), v2::Code::BadRequest);
        request.long_polling_timeout = None;
        // 30 s left, 3 s request timeout: 30 - 0.2 - 1.5 s.
        assert_eq!(
            polling_time_5s(&call(Some(30), "5.0.8"), &request),
            Ok(20_000)
        );
        assert_eq!(
            polling_time_5s(&call(Some(12), "5.0.8"), &request),
            Ok(12_000 - 200 - 1_500)
        );
    }
}
