//! What the consumer RPCs share: the checks of the group and topic they name, the receipt handle
//! gRPC clients hold, and QueryAssignment.
//!
//! A gRPC receipt handle is the broker's POP handle (the POP_CK property, see
//! [`comet_broker::pop::handle`]) followed by the message's commit-log offset, the nine fields Apache's
//! proxy hands out. The commit-log offset is what ForwardMessageToDeadLetterQueue needs to find
//! the message again. A handle whose invisible time has ended (`popTime + invisibleTime <= now`)
//! is refused with INVALID_RECEIPT_HANDLE, as Apache's proxy refuses it; so is one that does not
//! parse.
//!
//! QueryAssignment answers, for a topic readable on this broker, one queue with id -1 (POP from
//! every queue) for an ordinary group, and one queue per read queue for a group that consumes
//! orderly (`consumeMessageOrderly`, a FIFO group). A topic this broker cannot read is FORBIDDEN.

use std::net::SocketAddr;

use comet_grpc_proto::v2;
use comet_protocol::body::perm;
use comet_protocol::naming::{validate_group, validate_topic};

use super::route::endpoints_of;
use super::status;
use comet_broker::context::BrokerContext;
use comet_broker::pop::handle::ReceiptHandle;

/// Longest invisible time a receive or a change may ask for.
pub const MAX_INVISIBLE: std::time::Duration = std::time::Duration::from_secs(12 * 60 * 60);

/// The name of an optional resource, empty when absent.
pub fn name_of(resource: Option<&v2::Resource>) -> &str {
    resource.map_or("", |r| r.name.as_str())
}

/// Checks the group and topic a consumer RPC names: ILLEGAL_TOPIC or ILLEGAL_CONSUMER_GROUP
/// when a name is blank, too long or holds characters names may not hold.
pub fn check_names(group: &str, topic: &str) -> Result<(), v2::Status> {
    validate_topic(topic)
        .map_err(|e| status::of(v2::Code::IllegalTopic, format!("topic {topic:?}: {e}")))?;
    validate_group(group).map_err(|e| {
        status::of(
            v2::Code::IllegalConsumerGroup,
            format!("group {group:?}: {e}"),
        )
    })
}

/// Whether `group` consumes orderly (a FIFO group).
pub fn is_fifo_group(ctx: &BrokerContext, group: &str) -> bool {
    ctx.subscription_groups
        .find(group)
        .is_some_and(|g| g.consume_message_orderly)
}

/// The receipt handle of a message received over gRPC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcReceipt {
    /// The broker's POP handle.
    pub handle: ReceiptHandle,
    /// The message's queue offset.
    pub queue_offset: i64,
    /// The message's commit-log offset; -1 when the handle does not carry it.
    pub commit_log_offset: i64,
}

impl GrpcReceipt {
    /// The handle of a message popped with `handle`, stored at `commit_log_offset`.
    pub fn new(handle: ReceiptHandle, queue_offset: i64, commit_log_offset: i64) -> Self {
        GrpcReceipt {
            handle: ReceiptHandle {
                queue_offset: Some(queue_offset),
                ..handle
            },
            queue_offset,
            commit_log_offset,
        }
    }

    /// The handle's text: the POP handle, a space, the commit-log offset.
    pub fn encode(&self) -> String {
        format!("{} {}", self.handle.encode(), self.commit_log_offset)
    }

    /// Parses a handle; INVALID_RECEIPT_HANDLE when it does not parse or lacks the queue
    /// offset.
    pub fn decode(text: &str) -> Result<Self, v2::Status> {
        let invalid =
            |why: String| status::of(v2::Code::InvalidReceiptHandle, format!("{text:?}: {why}"));
        let handle = ReceiptHandle::decode(text).map_err(|e| invalid(e.to_string()))?;
        let Some(queue_offset) = handle.queue_offset else {
            return Err(invalid("the handle carries no queue offset".to_owned()));
        };
        let commit_log_offset = match text.split(' ').nth(8) {
            Some(v) => v
                .parse()
                .map_err(|_| invalid(format!("commit-log offset {v:?} is not a number")))?,
            None => -1,
        };
        Ok(GrpcReceipt {
            handle,
            queue_offset,
            commit_log_offset,
        })
    }

    /// Parses a handle and refuses it when its invisible time has ended at `now` (ms).
    pub fn decode_live(text: &str, now: i64) -> Result<Self, v2::Status> {
        let receipt = Self::decode(text)?;
        let until = receipt
            .handle
            .pop_time
            .saturating_add(receipt.handle.invisible_time);
        if until <= now {
            return Err(status::of(
                v2::Code::InvalidReceiptHandle,
                "the receipt handle has expired",
            ));
        }
        Ok(receipt)
    }
}

/// The v2 permission of a broker permission.
fn permission_of(p: i32) -> v2::Permission {
    match (perm::is_readable(p), perm::is_writeable(p)) {
        (true, true) => v2::Permission::ReadWrite,
        (true, false) => v2::Permission::Read,
        (false, true) => v2::Permission::Write,
        (false, false) => v2::Permission::None,
    }
}

/// QueryAssignment: see the module docs.
pub fn query_assignment(
    ctx: &BrokerContext,
    endpoint: SocketAddr,
    request: &v2::QueryAssignmentRequest,
) -> v2::QueryAssignmentResponse {
    let refuse = |status| v2::QueryAssignmentResponse {
        status: Some(status),
        assignments: Vec::new(),
    };
    let topic = name_of(request.topic.as_ref());
    let group = name_of(request.group.as_ref());
    if let Err(status) = check_names(group, topic) {
        return refuse(status);
    }
    let Some(config) = ctx.topic_config.select(topic) else {
        return refuse(status::of(
            v2::Code::TopicNotFound,
            format!(
                "topic {topic} does not exist on broker {}",
                ctx.config.broker_name
            ),
        ));
    };
    let p = config.perm & ctx.broker_permission();
    if !perm::is_readable(p) || config.read_queue_nums <= 0 {
        return refuse(status::of(
            v2::Code::Forbidden,
            format!("no readable queue of topic {topic}"),
        ));
    }
    let broker = v2::Broker {
        name: ctx.config.broker_name.clone(),
        id: 0,
        endpoints: Some(endpoints_of(endpoint)),
    };
    let queue = |id| v2::Assignment {
        message_queue: Some(v2::MessageQueue {
            topic: request.topic.clone(),
            id,
            permission: permission_of(p) as i32,
            broker: Some(broker.clone()),
            accept_message_types: Vec::new(),
        }),
    };
    let assignments = if is_fifo_group(ctx, group) {
        (0..config.read_queue_nums).map(queue).collect()
    } else {
        vec![queue(-1)]
    };
    v2::QueryAssignmentResponse {
        status: Some(status::ok()),
        assignments,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_handle_carries_the_commit_log_offset_after_the_pop_handle() {
        let handle = ReceiptHandle::decode("0 1796411285967 30000 0 0 broker-a 1 2").unwrap();
        let receipt = GrpcReceipt::new(handle, 2, 972);
        assert_eq!(
            receipt.encode(),
            "0 1796411285967 30000 0 0 broker-a 1 2 972"
        );
        assert_eq!(GrpcReceipt::decode(&receipt.encode()).unwrap(), receipt);
        let without = GrpcReceipt::decode("0 1796411285967 30000 0 0 broker-a 1 2").unwrap();
        assert_eq!(without.commit_log_offset, -1);
        let bad = GrpcReceipt::decode("garbage").unwrap_err();
        assert_eq!(bad.code(), v2::Code::InvalidReceiptHandle);
        let no_offset = GrpcReceipt::decode("0 1 2 0 0 b 1").unwrap_err();
        assert_eq!(no_offset.code(), v2::Code::InvalidReceiptHandle);
    }

    #[test]
    fn an_expired_receipt_handle_is_refused() {
        let text = "0 1000 500 0 0 broker-a 1 2 972";
        assert!(GrpcReceipt::decode_live(text, 1499).is_ok());
        let expired = GrpcReceipt::decode_live(text, 1500).unwrap_err();
        assert_eq!(expired.code(), v2::Code::InvalidReceiptHandle);
    }

    #[test]
    fn names_are_checked_as_apaches_proxy_checks_them() {
        assert!(check_names("G", "T").is_ok());
        assert_eq!(
            check_names("G", "").unwrap_err().code(),
            v2::Code::IllegalTopic
        );
        assert_eq!(
            check_names("bad group", "T").unwrap_err().code(),
            v2::Code::IllegalConsumerGroup
        );
    }
}
