//! Reading a topic's stored messages by position: the one message at a queue offset (mqadmin
//! `queryMsgByOffset`) and every message of a time window (mqadmin `printMsg`).
//!
//! Both pull as [`TOOLS_CONSUMER_GROUP`] and commit nothing. A time window becomes an offset range
//! per queue with SEARCH_OFFSET_BY_TIMESTAMP (the queue's min and max offsets when a bound is
//! absent).

use comet_protocol::body::MessageQueue;
use comet_protocol::body::TopicRouteData;
use comet_protocol::body::heartbeat::{EXPRESSION_TYPE_TAG, SUB_ALL};
use comet_protocol::headers::{PullMessageRequestHeader, pull_sys_flag};
use comet_protocol::message::MessageExt;

use super::{MQAdmin, TOOLS_CONSUMER_GROUP, route_masters};
use crate::api::PullStatus;
use crate::error::{ClientError, Result};

/// Messages asked for per pull when reading a range.
pub const BROWSE_PULL_BATCH: i32 = 32;

/// A queue's messages between two offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetRange {
    /// First offset to read.
    pub from: i64,
    /// Offset to stop before.
    pub to: i64,
}

/// The master address of `broker_name` in `route`.
fn master_of(route: &TopicRouteData, broker_name: &str) -> Result<String> {
    route_masters(route)
        .into_iter()
        .find(|(name, _)| name == broker_name)
        .map(|(_, addr)| addr)
        .ok_or_else(|| {
            ClientError::IllegalArgument(format!(
                "no master of broker {broker_name} serves the topic"
            ))
        })
}

impl MQAdmin {
    /// The message stored at `offset` of queue `queue_id` of `topic` on broker `broker_name`;
    /// `None` when the queue has no message there.
    pub async fn message_at_offset(
        &self,
        topic: &str,
        broker_name: &str,
        queue_id: i32,
        offset: i64,
    ) -> Result<Option<MessageExt>> {
        let route = self.topic_route(topic).await?;
        let addr = master_of(&route, broker_name)?;
        let mut out = Vec::new();
        let range = OffsetRange {
            from: offset,
            to: offset.saturating_add(1),
        };
        self.pull_range(&addr, topic, queue_id, range, 1, &mut out)
            .await?;
        Ok(out.into_iter().find(|m| m.queue_offset == offset))
    }

    /// The offset range of each readable queue of `topic` that holds the messages stored from
    /// `begin` (ms, inclusive; the queue's start when `None`) to `end` (ms; the queue's end when
    /// `None`), with the master address that serves it, in queue order.
    pub async fn offset_ranges(
        &self,
        topic: &str,
        begin: Option<i64>,
        end: Option<i64>,
    ) -> Result<Vec<(MessageQueue, String, OffsetRange)>> {
        let route = self.topic_route(topic).await?;
        let mut ranges = Vec::new();
        for (name, addr) in route_masters(&route) {
            let Some(queues) = route
                .queue_datas
                .iter()
                .find(|q| q.broker_name == name && q.is_readable())
            else {
                continue;
            };
            for queue_id in 0..queues.read_queue_nums {
                let api = self.api();
                let from = match begin {
                    Some(t) => {
                        api.search_offset(&addr, topic, queue_id, t, self.timeout())
                            .await?
                    }
                    None => {
                        api.get_min_offset(&addr, topic, queue_id, self.timeout())
                            .await?
                    }
                };
                let to = match end {
                    Some(t) => {
                        api.search_offset(&addr, topic, queue_id, t, self.timeout())
                            .await?
                    }
                    None => {
                        api.get_max_offset(&addr, topic, queue_id, self.timeout())
                            .await?
                    }
                };
                ranges.push((
                    MessageQueue::new(topic, name.clone(), queue_id),
                    addr.clone(),
                    OffsetRange { from, to },
                ));
            }
        }
        Ok(ranges)
    }

    /// Up to `max` messages of `topic` stored between `begin` and `end` (see
    /// [`MQAdmin::offset_ranges`]), queue by queue in offset order, then filtered to the window
    /// by store time (a time search lands on the nearest offset, not an exact one).
    pub async fn messages_in_window(
        &self,
        topic: &str,
        begin: Option<i64>,
        end: Option<i64>,
        max: usize,
    ) -> Result<Vec<MessageExt>> {
        let mut out = Vec::new();
        for (queue, addr, range) in self.offset_ranges(topic, begin, end).await? {
            if out.len() >= max {
                break;
            }
            // The end search lands on the first message at or after `end`, which may be inside
            // the window: read one past it and let the time filter decide.
            let range = OffsetRange {
                from: range.from,
                to: if end.is_some() {
                    range.to.saturating_add(1)
                } else {
                    range.to
                },
            };
            let mut found = Vec::new();
            self.pull_range(
                &addr,
                topic,
                queue.queue_id,
                range,
                max - out.len(),
                &mut found,
            )
            .await?;
            found.retain(|m| {
                begin.is_none_or(|b| m.store_timestamp >= b)
                    && end.is_none_or(|e| m.store_timestamp < e)
            });
            out.append(&mut found);
        }
        Ok(out)
    }

    /// Appends the messages of one queue from `range.from` up to `range.to` (exclusive), at most
    /// `limit`, to `out`.
    pub async fn pull_range(
        &self,
        addr: &str,
        topic: &str,
        queue_id: i32,
        range: OffsetRange,
        limit: usize,
        out: &mut Vec<MessageExt>,
    ) -> Result<()> {
        let mut offset = range.from.max(0);
        let mut taken = 0;
        while offset < range.to && taken < limit {
            let wanted = (range.to - offset).min(i64::from(BROWSE_PULL_BATCH));
            let header = PullMessageRequestHeader {
                consumer_group: TOOLS_CONSUMER_GROUP.to_owned(),
                topic: topic.to_owned(),
                queue_id,
                queue_offset: offset,
                max_msg_nums: i32::try_from(wanted).unwrap_or(BROWSE_PULL_BATCH),
                sys_flag: pull_sys_flag::build(false, false, true, false),
                commit_offset: 0,
                suspend_timeout_millis: 0,
                subscription: Some(SUB_ALL.to_owned()),
                sub_version: 0,
                expression_type: Some(EXPRESSION_TYPE_TAG.to_owned()),
                ..Default::default()
            };
            let result = self
                .api()
                .pull_message(addr, header, self.timeout())
                .await?;
            if result.next_begin_offset <= offset && result.msg_found_list.is_empty() {
                break;
            }
            offset = result.next_begin_offset;
            if result.pull_status == PullStatus::Found {
                for msg in result.msg_found_list {
                    if taken >= limit || msg.queue_offset >= range.to {
                        break;
                    }
                    out.push(msg);
                    taken += 1;
                }
            }
        }
        Ok(())
    }
}
