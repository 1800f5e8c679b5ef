//! PEEK_MESSAGE (200052), NOTIFICATION (200054) and POLLING_INFO (200055): looking at what a
//! pop would find without popping it.
//!
//! A peek reads the topic's queues and the group's POP retry topic from the group's offsets,
//! writing no checkpoint and moving no offset: SUCCESS with the records, else PULL_NOT_FOUND.
//! A notification answers `hasMsg` — whether any of those queues holds messages past the
//! group's offset (a group that never popped a queue counts its whole backlog) — waiting up to
//! `pollTime` for one to arrive. POLLING_INFO tells how many requests the broker holds.

use std::sync::Arc;
use std::time::Duration;

use comet_protocol::RemotingCommand;
use comet_protocol::body::{TopicConfig, perm};
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::{
    CommandHeaderExt, NotificationRequestHeader, NotificationResponseHeader,
    PeekMessageRequestHeader, PollingInfoRequestHeader, PollingInfoResponseHeader,
    PopMessageResponseHeader,
};
use comet_protocol::time::now_millis;
use comet_store::message_store::MAX_PULL_MSG_SIZE;
use tokio::time::Instant;

use crate::context::BrokerContext;
use crate::pop::arrivals::{HELD_RECHECK, MAX_HELD_POPS};
use crate::pop::handle::pop_retry_topic;
use crate::processor::{Answer, Rejection, decode_header, reject};

/// The checks a peek or notification shares with a pop: broker and topic readable, queue id
/// within the topic, group present and enabled.
fn check_read(
    ctx: &BrokerContext,
    topic: &str,
    queue_id: i32,
    group: &str,
) -> Result<TopicConfig, Rejection> {
    if !perm::is_readable(ctx.broker_permission()) {
        return Err(reject(
            ResponseCode::NoPermission,
            format!(
                "the broker[{}] peeking message is forbidden",
                ctx.store_host.ip()
            ),
        ));
    }
    let Some(config) = ctx.topic_config.select(topic) else {
        return Err(reject(
            ResponseCode::TopicNotExist,
            format!("topic[{topic}] not exist, apply first please!"),
        ));
    };
    if !perm::is_readable(config.perm) {
        return Err(reject(
            ResponseCode::NoPermission,
            format!("the topic[{topic}] peeking message is forbidden"),
        ));
    }
    if queue_id >= config.read_queue_nums {
        return Err(reject(
            ResponseCode::InvalidParameter,
            format!(
                "queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}]",
                config.read_queue_nums
            ),
        ));
    }
    match ctx.subscription_groups.find_or_create(group) {
        None => Err(reject(
            ResponseCode::SubscriptionGroupNotExist,
            format!("subscription group [{group}] does not exist"),
        )),
        Some(g) if !g.consume_enable => Err(reject(
            ResponseCode::NoPermission,
            format!("subscription group no permission, {group}"),
        )),
        Some(_) => Ok(config),
    }
}

/// The (topic, queue) pairs a pop of `queue_id` reads, retry topic last.
fn queues_read(
    ctx: &BrokerContext,
    config: &TopicConfig,
    queue_id: i32,
    group: &str,
) -> Vec<(String, i32)> {
    let mut queues: Vec<(String, i32)> = if queue_id < 0 {
        (0..config.read_queue_nums)
            .map(|q| (config.topic_name.clone(), q))
            .collect()
    } else {
        vec![(config.topic_name.clone(), queue_id)]
    };
    if let Some(retry) = ctx
        .topic_config
        .select(&pop_retry_topic(group, &config.topic_name))
    {
        queues.extend((0..retry.read_queue_nums).map(|q| (retry.topic_name.clone(), q)));
    }
    queues
}

/// Where the group would read the queue next, without committing anything.
fn read_offset(ctx: &BrokerContext, group: &str, topic: &str, queue_id: i32) -> i64 {
    let committed = ctx.consumer_offsets.query_offset(group, topic, queue_id);
    if committed >= 0 {
        committed
    } else {
        ctx.store.get_min_offset_in_queue(topic, queue_id).max(0)
    }
}

/// PEEK_MESSAGE.
pub fn peek(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let header: PeekMessageRequestHeader = decode_header(request)?;
    let group = header.consumer_group.as_str();
    let config = check_read(ctx, &header.topic, header.queue_id, group)?;
    let wanted = usize::try_from(header.max_msg_nums).unwrap_or(0);
    let mut records = Vec::new();
    let mut rest_num = 0;
    for (topic, queue_id) in queues_read(ctx, &config, header.queue_id, group) {
        let offset = read_offset(ctx, group, &topic, queue_id);
        let room = wanted.saturating_sub(records.len());
        if room == 0 {
            rest_num += (ctx.store.get_max_offset_in_queue(&topic, queue_id) - offset).max(0);
            continue;
        }
        let result = ctx.store.get_message(
            group,
            &topic,
            queue_id,
            offset,
            room,
            MAX_PULL_MSG_SIZE,
            None,
        );
        rest_num += (result.max_offset - result.next_begin_offset).max(0);
        records.extend(result.messages);
    }
    let found = !records.is_empty();
    let (code, remark) = if found {
        (ResponseCode::Success, "FOUND")
    } else {
        (ResponseCode::PullNotFound, "NO_MESSAGE_IN_QUEUE")
    };
    let mut response = RemotingCommand::response(code, Some(remark.to_owned()));
    response.encode_header(&PopMessageResponseHeader {
        pop_time: now_millis(),
        invisible_time: 0,
        revive_qid: 0,
        rest_num,
        ..Default::default()
    });
    response.body_parts = records;
    Ok(response)
}

/// Whether a pop of the request's queues would find something.
fn has_msg(ctx: &BrokerContext, config: &TopicConfig, queue_id: i32, group: &str) -> bool {
    queues_read(ctx, config, queue_id, group)
        .iter()
        .any(|(topic, q)| {
            ctx.store.get_max_offset_in_queue(topic, *q) > read_offset(ctx, group, topic, *q)
        })
}

/// NOTIFICATION, held up to its poll time while nothing waits.
pub async fn notification(ctx: &Arc<BrokerContext>, request: &RemotingCommand) -> Answer {
    let header: NotificationRequestHeader = decode_header(request)?;
    let group = header.consumer_group.as_str();
    let config = check_read(ctx, &header.topic, header.queue_id, group)?;
    let deadline =
        Instant::now() + Duration::from_millis(u64::try_from(header.poll_time).unwrap_or(0));
    let pop = &ctx.pop;
    let retry_topic = pop_retry_topic(group, &header.topic);
    let (found, full) = loop {
        let arrival = pop.arrivals.watch(&[&header.topic, &retry_topic]);
        if has_msg(ctx, &config, header.queue_id, group) {
            break (true, false);
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() || ctx.is_shutting_down() {
            break (false, false);
        }
        // The count includes this request's own watch.
        if pop.held_count() > MAX_HELD_POPS {
            break (false, true);
        }
        arrival.wait(remaining.min(HELD_RECHECK)).await;
    };
    let mut response = RemotingCommand::response(ResponseCode::Success, None);
    response.encode_header(&NotificationResponseHeader {
        has_msg: found,
        polling_full: full,
    });
    Ok(response)
}

/// POLLING_INFO.
pub fn polling_info(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let header: PollingInfoRequestHeader = decode_header(request)?;
    check_read(ctx, &header.topic, header.queue_id, &header.consumer_group)?;
    let mut response = RemotingCommand::response(ResponseCode::Success, None);
    response.encode_header(&PollingInfoResponseHeader {
        polling_num: i32::try_from(ctx.pop.held_count()).unwrap_or(i32::MAX),
    });
    Ok(response)
}
