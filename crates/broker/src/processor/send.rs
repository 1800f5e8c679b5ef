//! SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320): the header and body
//! decoded into a [`ProducedMessage`], stored by [`crate::core::put::send`] (which runs
//! RocketMQ's checks in RocketMQ's order), and its outcome encoded as a Java broker answers.
//!
//! The header decides the key names (V1 for 10, V2 for 310/320) and batch or single (the
//! `batch`/`m` flag); a header that does not decode is refused with a remark naming the field
//! by its V1 name.
//!
//! The response is written only after the store acknowledged the message — under SYNC_FLUSH that
//! is after the msync — so "SEND_OK" always means "durable as configured". A oneway send is
//! stored the same way and not answered (the transport drops the response).
//!
//! An answered send leaves its record pending in the CommitLog ([`Commit::Deferred`]) and the
//! connection commits before it writes responses ([`super::fence::CommitBeforeReply`], the
//! server's [`comet_remoting::ResponseFence`]): the sends read from a connection in one go are
//! written with one `pwrite`, and still no answer leaves before its message is in the page cache.
//! A oneway send has no answer to wait for, so it commits at once. Under SYNC_FLUSH or
//! SYNC_MASTER the send does not wait on a task of its own either: its answer carries the
//! stored message's [`ResponseHold`](comet_protocol::ResponseHold), and the connection's writer
//! keeps it until the flush thread (or the slaves) report the CommitLog that far, so one group
//! commit releases its answers with one wake-up and one write.

use std::net::SocketAddr;
use std::sync::Arc;

use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{SendMessageRequestHeader, SendMessageResponseHeader};
use comet_protocol::message::Properties;
use comet_protocol::message::id::UniqIdGenerator;
use comet_protocol::{ProtocolError, RemotingCommand};
use comet_remoting::{Channel, RequestProcessor};
use comet_store::Commit;
use futures::future::BoxFuture;

use crate::context::BrokerContext;
use crate::core::put::{self, ProducedMessage, Stored, bool_text};
use crate::processor::error_response;

/// Request version from which the header's `maxReconsumeTimes` overrides the group's
/// `retryMaxTimes` (`MQVersion.V3_4_9`).
pub const MAX_RECONSUME_TIMES_MIN_VERSION: i32 = 121;

/// Handles the three send codes.
pub struct SendMessageProcessor {
    ctx: Arc<BrokerContext>,
    uniq_ids: Arc<UniqIdGenerator>,
}

impl SendMessageProcessor {
    pub fn new(ctx: Arc<BrokerContext>) -> Self {
        let uniq_ids = Arc::new(UniqIdGenerator::with_ip(ctx.store_host.ip()));
        SendMessageProcessor { ctx, uniq_ids }
    }
}

impl RequestProcessor for SendMessageProcessor {
    fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let ctx = Arc::clone(&self.ctx);
        let uniq_ids = Arc::clone(&self.uniq_ids);
        let peer = channel.remote_addr();
        Box::pin(async move {
            let mut response = handle_send(&ctx, &uniq_ids, peer, request).await;
            // The Java client reads both keys unconditionally on some codes; always send them.
            let ext = response.ext_mut();
            let live = ctx.live_config();
            if !ext.contains_key("MSG_REGION") {
                ext.insert("MSG_REGION", &live.region_id);
            }
            if !ext.contains_key("TRACE_ON") {
                ext.insert("TRACE_ON", bool_text(live.trace_on));
            }
            Some(response)
        })
    }
}

/// The V1 name of a V2 header key, for remarks a human can act on.
fn v1_field_name(key: &str) -> &str {
    match key {
        "a" => "producerGroup",
        "b" => "topic",
        "c" => "defaultTopic",
        "d" => "defaultTopicQueueNums",
        "e" => "queueId",
        "f" => "sysFlag",
        "g" => "bornTimestamp",
        "h" => "flag",
        "i" => "properties",
        "j" => "reconsumeTimes",
        "k" => "unitMode",
        "l" => "maxReconsumeTimes",
        "m" => "batch",
        "n" => "brokerName",
        other => other,
    }
}

fn header_error(code: i32, err: &ProtocolError) -> RemotingCommand {
    let v2 = code != RequestCode::SendMessage.code();
    let remark = match err {
        ProtocolError::MissingField(key) if v2 => {
            format!(
                "bad send header: field `{key}` ({}) is missing",
                v1_field_name(key)
            )
        }
        ProtocolError::MalformedField { field, value } if v2 => format!(
            "bad send header: field `{field}` ({}) has malformed value {value:?}",
            v1_field_name(field)
        ),
        other => format!("bad send header: {other}"),
    };
    error_response(ResponseCode::SystemError, remark)
}

async fn handle_send(
    ctx: &BrokerContext,
    uniq_ids: &UniqIdGenerator,
    peer: SocketAddr,
    request: RemotingCommand,
) -> RemotingCommand {
    let empty = comet_protocol::ExtFields::new();
    let ext = request.ext_fields.as_ref().unwrap_or(&empty);
    let header = match SendMessageRequestHeader::decode_for_code(request.code, ext) {
        Ok(h) => h,
        Err(e) => return header_error(request.code, &e),
    };
    // An answered send defers its commit to the response fence; a oneway one has no response.
    let commit = if request.is_oneway() {
        Commit::Now
    } else {
        Commit::Deferred
    };
    let produced = produced_message(header, request.version, peer, request.body);
    match put::send(ctx, uniq_ids, produced, commit).await {
        Ok(stored) => send_response(ctx, stored),
        Err(refusal) => error_response(refusal.code, refusal.remark),
    }
}

/// The message a send request carries.
fn produced_message(
    header: SendMessageRequestHeader,
    version: i32,
    peer: SocketAddr,
    body: Option<bytes::Bytes>,
) -> ProducedMessage {
    let batch = header.is_batch();
    let properties_len = header.properties.as_deref().map_or(0, str::len);
    let properties = header
        .properties
        .as_deref()
        .map(Properties::parse)
        .unwrap_or_default();
    let max_reconsume_times = header
        .max_reconsume_times
        .filter(|_| version >= MAX_RECONSUME_TIMES_MIN_VERSION);
    ProducedMessage {
        topic: header.topic,
        queue_id: header.queue_id,
        body: body.unwrap_or_default(),
        flag: header.flag,
        sys_flag: header.sys_flag,
        born_timestamp: header.born_timestamp,
        born_host: peer,
        properties,
        properties_len,
        reconsume_times: header.reconsume_times.unwrap_or(0),
        max_reconsume_times,
        unit_mode: header.unit_mode.unwrap_or(false),
        default_topic: header.default_topic,
        default_topic_queue_nums: header.default_topic_queue_nums,
        batch,
    }
}

/// The answer to a stored message; it waits on the connection for [`Stored::hold`].
fn send_response(ctx: &BrokerContext, stored: Stored) -> RemotingCommand {
    let mut header =
        SendMessageResponseHeader::new(stored.msg_id, stored.queue_id, stored.queue_offset);
    header.transaction_id = stored.transaction_id;
    let live = ctx.live_config();
    header.msg_region = Some(live.region_id.clone());
    header.trace_on = Some(live.trace_on);
    let mut response = comet_protocol::headers::response_with_header(stored.code, &header);
    response.remark = stored.remark.map(str::to_owned);
    response.hold = stored.hold;
    if let Some(handle) = stored.recall_handle {
        response.ext_mut().insert("recallHandle", &handle);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_keys_are_explained() {
        let rsp = header_error(310, &ProtocolError::MissingField("b"));
        let remark = rsp.remark.unwrap_or_default();
        assert!(
            remark.contains("`b`") && remark.contains("topic"),
            "{remark}"
        );
        let rsp = header_error(10, &ProtocolError::MissingField("queueId"));
        assert!(rsp.remark.unwrap_or_default().contains("queueId"));
    }
}
