//! A consumer group's committed offsets: where a consumer goes on from, and its commits
//! (RocketMQ's QUERY_CONSUMER_OFFSET and UPDATE_CONSUMER_OFFSET).
//!
//! A query decides where a consumer without a committed offset starts. "None" makes the client
//! apply its `consumeFromWhere`; 0 makes it read from the start. RocketMQ answers 0 only when the
//! client allows it (`setZeroIfNotFound`, absent = allowed) and the queue still holds its very
//! first message — otherwise a new group would replay a queue that retention has already cut.

use comet_protocol::code::ResponseCode;

use super::Refusal;
use crate::context::BrokerContext;

/// Where `group` goes on reading `topic`'s queue `queue_id`: its committed offset, else 0 when
/// `zero_if_not_found` and the queue still holds its first message, else `None` (the consumer
/// starts where its `consumeFromWhere` says).
pub fn query_consumer_offset(
    ctx: &BrokerContext,
    group: &str,
    topic: &str,
    queue_id: i32,
    zero_if_not_found: bool,
) -> Option<i64> {
    let stored = ctx.consumer_offsets.query_offset(group, topic, queue_id);
    if stored >= 0 {
        Some(stored)
    } else if zero_if_not_found && first_message_present(ctx, topic, queue_id) {
        Some(0)
    } else {
        None
    }
}

/// The queue still starts at offset 0 and its first message is still readable.
fn first_message_present(ctx: &BrokerContext, topic: &str, queue_id: i32) -> bool {
    let store = &ctx.store;
    store.get_min_offset_in_queue(topic, queue_id) <= 0
        && store.get_max_offset_in_queue(topic, queue_id) > 0
        && store.get_message_store_timestamp(topic, queue_id, 0) >= 0
}

/// Commits `offset` as `group`'s next offset of `topic`'s queue `queue_id`; `client` (its
/// address) is named in the broker's offset log.
pub fn commit_consumer_offset(
    ctx: &BrokerContext,
    client: &str,
    group: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
) -> Result<(), Refusal> {
    if !ctx.subscription_groups.contains(group) {
        return Err(Refusal::new(
            ResponseCode::SubscriptionGroupNotExist,
            format!("subscription group [{group}] does not exist"),
        ));
    }
    if ctx.topic_config.select(topic).is_none() {
        return Err(Refusal::new(
            ResponseCode::TopicNotExist,
            format!("topic[{topic}] not exist, apply first please!"),
        ));
    }
    ctx.consumer_offsets
        .commit_offset(client, group, topic, queue_id, offset);
    Ok(())
}
