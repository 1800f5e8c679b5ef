//! AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue: what a gRPC
//! consumer does with a message it received, run by the broker's POP operations
//! ([`comet_broker::core::ack`], [`comet_broker::core::send_back`]).
//!
//! Each takes the receipt handle of [`super::consumer`] and acts on the topic the message was
//! read from (the group's POP retry topic for a redelivery, named by the handle's retry flag).
//! A handle that does not parse or whose invisible time has ended is INVALID_RECEIPT_HANDLE. For
//! a message the broker renews for the client ([`super::renew`]) the broker's current handle is
//! used, whatever handle the client sends, and the renewal stops.
//!
//! - **AckMessage** checks each entry on its own and acks the entries of one received batch
//!   with one record ([`comet_broker::core::ack::ack_many`]); every entry gets its status, and
//!   the answer's status is theirs when they agree, else MULTIPLE_RESULTS.
//! - **ChangeInvisibleDuration** (at most 12 h) answers a new receipt handle, which later acks
//!   and changes must use. For a FIFO handle the new handle keeps the batch's pop time (the
//!   key of the queue's batch) and stretches its invisible time to end at the new moment.
//! - **ForwardMessageToDeadLetterQueue** sends the message back straight to the group's
//!   dead-letter topic `%DLQ%<group>` (a send-back with a negative delay level), then acks it.
//!   The OK status's message is the SUCCESS response code, `0`, as Apache's proxy answers.

use std::collections::HashSet;

use comet_grpc_proto::v2;
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::ConsumerSendMsgBackRequestHeader;
use comet_protocol::time::now_millis;

use super::consumer::{GrpcReceipt, MAX_INVISIBLE, check_names, name_of};
use super::invisible::change;
use super::renew::Renewals;
use super::status;
use comet_broker::context::BrokerContext;
use comet_broker::core::Refusal;
use comet_broker::core::ack::{AckTarget, ack_many};
use comet_broker::pop::handle::real_topic;

/// The handle to act on: the one the broker holds for a message it renews (given back, so the
/// renewal stops), else the client's, refused when it does not parse or has expired.
async fn held_or_given(
    renewals: &Renewals,
    client_id: &str,
    group: &str,
    message_id: &str,
    given: &str,
) -> Result<GrpcReceipt, v2::Status> {
    match renewals.release(client_id, group, message_id).await {
        Some(held) => Ok(held),
        None => GrpcReceipt::decode_live(given, now_millis()),
    }
}

/// What acking the message of `receipt`, read by `group` from `topic`, acts on.
fn target_of(topic: &str, group: &str, receipt: &GrpcReceipt) -> AckTarget {
    AckTarget {
        topic: real_topic(topic, group, &receipt.handle.retry_flag),
        queue_id: receipt.handle.queue_id,
        offset: receipt.queue_offset,
        handle: receipt.handle.clone(),
    }
}

/// Acks the message of `receipt` for `group` reading `topic`.
async fn ack_one(
    ctx: &BrokerContext,
    group: &str,
    topic: &str,
    receipt: &GrpcReceipt,
) -> Result<(), Refusal> {
    let target = target_of(topic, group, receipt);
    ack_many(ctx, group, &[target])
        .await
        .into_iter()
        .next()
        .unwrap_or_else(|| Err(Refusal::new(ResponseCode::SystemError, "no ack outcome")))
}

/// AckMessage.
pub async fn ack_message(
    ctx: &BrokerContext,
    renewals: &Renewals,
    client_id: &str,
    request: &v2::AckMessageRequest,
) -> v2::AckMessageResponse {
    let group = name_of(request.group.as_ref());
    let topic = name_of(request.topic.as_ref());
    if let Err(status) = check_names(group, topic) {
        return v2::AckMessageResponse {
            status: Some(status),
            entries: Vec::new(),
        };
    }
    // Every handle first, then one ack for all of them: the messages of one received batch
    // are acked with one record.
    let mut receipts = Vec::with_capacity(request.entries.len());
    for entry in &request.entries {
        receipts.push(
            held_or_given(
                renewals,
                client_id,
                group,
                &entry.message_id,
                &entry.receipt_handle,
            )
            .await,
        );
    }
    let targets: Vec<AckTarget> = receipts
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|receipt| target_of(topic, group, receipt))
        .collect();
    let mut acked = ack_many(ctx, group, &targets).await.into_iter();
    let mut entries = Vec::with_capacity(request.entries.len());
    for (entry, receipt) in request.entries.iter().zip(receipts) {
        let status = match receipt {
            Ok(_) => match acked.next() {
                Some(Ok(())) => status::ok(),
                Some(Err(refusal)) => status::refused(&refusal),
                None => status::of(v2::Code::InternalServerError, "ack outcome missing"),
            },
            Err(status) => status,
        };
        entries.push(v2::AckMessageResultEntry {
            message_id: entry.message_id.clone(),
            receipt_handle: entry.receipt_handle.clone(),
            status: Some(status),
        });
    }
    let codes: HashSet<i32> = entries
        .iter()
        .map(|e| e.status.as_ref().map_or(0, |s| s.code))
        .collect();
    let status = match (codes.len(), entries.first()) {
        (1, Some(first)) => {
            let code = first
                .status
                .as_ref()
                .map_or(v2::Code::Unspecified, |s| s.code());
            status::of(code, code.as_str_name())
        }
        (0, _) | (_, None) => {
            status::of(v2::Code::InternalServerError, "ack message result is empty")
        }
        _ => status::of(
            v2::Code::MultipleResults,
            v2::Code::MultipleResults.as_str_name(),
        ),
    };
    v2::AckMessageResponse {
        status: Some(status),
        entries,
    }
}

/// ChangeInvisibleDuration.
pub async fn change_invisible_duration(
    ctx: &BrokerContext,
    renewals: &Renewals,
    client_id: &str,
    request: &v2::ChangeInvisibleDurationRequest,
) -> v2::ChangeInvisibleDurationResponse {
    let refuse = |status| v2::ChangeInvisibleDurationResponse {
        status: Some(status),
        receipt_handle: String::new(),
    };
    let group = name_of(request.group.as_ref());
    let topic = name_of(request.topic.as_ref());
    if let Err(status) = check_names(group, topic) {
        return refuse(status);
    }
    let invisible = request.invisible_duration.as_ref().map_or(0, |d| {
        d.seconds
            .saturating_mul(1000)
            .saturating_add(i64::from(d.nanos / 1_000_000))
    });
    let max = i64::try_from(MAX_INVISIBLE.as_millis()).unwrap_or(i64::MAX);
    if !(0..=max).contains(&invisible) {
        return refuse(status::of(
            v2::Code::IllegalInvisibleTime,
            format!("the invisibleTime must lie within 0 and {max} ms"),
        ));
    }
    let receipt = match held_or_given(
        renewals,
        client_id,
        group,
        &request.message_id,
        &request.receipt_handle,
    )
    .await
    {
        Ok(receipt) => receipt,
        Err(status) => return refuse(status),
    };
    match change(ctx, group, topic, &receipt, invisible).await {
        Ok(renewed) => v2::ChangeInvisibleDurationResponse {
            status: Some(status::ok()),
            receipt_handle: renewed.encode(),
        },
        Err(status) => refuse(status),
    }
}

/// ForwardMessageToDeadLetterQueue.
pub async fn forward_to_dead_letter_queue(
    ctx: &BrokerContext,
    renewals: &Renewals,
    client_id: &str,
    request: &v2::ForwardMessageToDeadLetterQueueRequest,
) -> v2::Status {
    let group = name_of(request.group.as_ref());
    let topic = name_of(request.topic.as_ref());
    if let Err(status) = check_names(group, topic) {
        return status;
    }
    let receipt = match held_or_given(
        renewals,
        client_id,
        group,
        &request.message_id,
        &request.receipt_handle,
    )
    .await
    {
        Ok(receipt) => receipt,
        Err(status) => return status,
    };
    if receipt.commit_log_offset < 0 {
        return status::of(
            v2::Code::InvalidReceiptHandle,
            "the receipt handle carries no commit-log offset",
        );
    }
    let header = ConsumerSendMsgBackRequestHeader {
        offset: receipt.commit_log_offset,
        group: group.to_owned(),
        delay_level: -1,
        origin_msg_id: Some(request.message_id.clone()),
        origin_topic: Some(topic.to_owned()),
        unit_mode: None,
        max_reconsume_times: None,
        rpc: Default::default(),
    };
    if let Err(refusal) = comet_broker::core::send_back::send_back(ctx, &header, true).await {
        return status::refused(&refusal);
    }
    if let Err(refusal) = ack_one(ctx, group, topic, &receipt).await {
        return status::refused(&refusal);
    }
    status::of(v2::Code::Ok, ResponseCode::Success.code().to_string())
}
