//! Offset administration that also works for groups with nobody online: moving a group's offsets
//! to a time or to the end, and copying one group's offsets to another.
//!
//! A broker resets a group's offsets itself (INVOKE_BROKER_TO_RESET_OFFSET) and tells the group's
//! online clients. An Apache broker that leaves the reset to the clients (4.x, or 5.x with
//! `useServerSideResetOffset=false`) refuses that request with CONSUMER_NOT_ONLINE when no client
//! of the group is connected. The offline path does what mqadmin's fallback does: read the
//! group's committed queues (GET_CONSUME_STATS, or the topic's queues from GET_TOPIC_STATS_INFO
//! when it has none), find each queue's target offset (SEARCH_OFFSET_BY_TIMESTAMP, or
//! GET_MAX_OFFSET for the end) and commit it (UPDATE_CONSUMER_OFFSET).

use std::collections::HashMap;

use comet_protocol::body::{ConsumeStats, MessageQueue, TopicStatsTable, from_fastjson};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    GetConsumeStatsRequestHeader, GetTopicStatsInfoRequestHeader, UpdateConsumerOffsetRequestHeader,
};

use super::{MQAdmin, route_masters};
use crate::error::{ClientError, Result};

/// The timestamp that means "the end of every queue" in a reset (mqadmin `skipAccumulatedMessage`).
pub const RESET_TO_END: i64 = -1;

/// What a reset set on one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetOutcome {
    /// The offsets set, by queue.
    pub offsets: HashMap<MessageQueue, i64>,
    /// Whether the offline path set them (nobody of the group was online on some broker).
    pub offline: bool,
}

impl MQAdmin {
    /// Resets the group's offsets of `topic` to `timestamp` (ms; [`RESET_TO_END`] for the end of
    /// each queue): through the brokers when the group is online, else, when a broker answers
    /// CONSUMER_NOT_ONLINE, through [`MQAdmin::reset_offset_offline`]. Without `force`, a queue
    /// whose committed offset is already below the target keeps it.
    pub async fn reset_offset(
        &self,
        group: &str,
        topic: &str,
        timestamp: i64,
        force: bool,
    ) -> Result<ResetOutcome> {
        match self
            .reset_offset_by_time(group, topic, timestamp, force)
            .await
        {
            Ok(offsets) => Ok(ResetOutcome {
                offsets,
                offline: false,
            }),
            Err(e) if e.response_code() == Some(ResponseCode::ConsumerNotOnline.code()) => {
                let offsets = self
                    .reset_offset_offline(group, topic, timestamp, force)
                    .await?;
                Ok(ResetOutcome {
                    offsets,
                    offline: true,
                })
            }
            Err(e) => Err(e),
        }
    }

    /// Resets the group's offsets of `topic` by committing them queue by queue on every master
    /// of the topic's route (see the module docs); the clients of the group, if any, are not
    /// told. Returns the offsets set.
    pub async fn reset_offset_offline(
        &self,
        group: &str,
        topic: &str,
        timestamp: i64,
        force: bool,
    ) -> Result<HashMap<MessageQueue, i64>> {
        let route = self.topic_route(topic).await?;
        let mut set = HashMap::new();
        for (name, addr) in route_masters(&route) {
            let mut queues = self.group_queues(&addr, group, topic).await?;
            if queues.is_empty() {
                queues = self.topic_queues(&addr, topic, &name).await?;
            }
            for (queue, committed) in queues {
                let target = if timestamp == RESET_TO_END {
                    self.api()
                        .get_max_offset(&addr, topic, queue.queue_id, self.timeout())
                        .await?
                } else {
                    self.api()
                        .search_offset(&addr, topic, queue.queue_id, timestamp, self.timeout())
                        .await?
                };
                if force || target <= committed {
                    self.commit_offset(&addr, group, &queue, target).await?;
                    set.insert(queue, target);
                } else {
                    set.insert(queue, committed);
                }
            }
        }
        Ok(set)
    }

    /// Copies `source`'s committed offsets of `topic` to `dest` (GET_CONSUME_STATS of the source,
    /// UPDATE_CONSUMER_OFFSET of the destination on each master), as mqadmin `cloneGroupOffset`
    /// does. Returns the offsets copied.
    pub async fn clone_group_offset(
        &self,
        source: &str,
        dest: &str,
        topic: &str,
    ) -> Result<HashMap<MessageQueue, i64>> {
        let route = self.topic_route(topic).await?;
        let mut copied = HashMap::new();
        for (_, addr) in route_masters(&route) {
            for (queue, offset) in self.group_queues(&addr, source, topic).await? {
                self.commit_offset(&addr, dest, &queue, offset).await?;
                copied.insert(queue, offset);
            }
        }
        if copied.is_empty() {
            return Err(ClientError::IllegalArgument(format!(
                "group {source} has no committed offset on {topic}"
            )));
        }
        Ok(copied)
    }

    /// The group's committed offset of every queue of `topic` the broker at `addr` knows.
    async fn group_queues(
        &self,
        addr: &str,
        group: &str,
        topic: &str,
    ) -> Result<Vec<(MessageQueue, i64)>> {
        let header = GetConsumeStatsRequestHeader {
            consumer_group: group.to_owned(),
            topic: Some(topic.to_owned()),
            ..Default::default()
        };
        let request = self
            .api()
            .request_with(RequestCode::GetConsumeStats, &header);
        let stats: ConsumeStats = match self.invoke_broker(addr, request).await {
            Ok(response) => from_fastjson(response.body.as_deref().unwrap_or_default())?,
            // A broker that never saw the group answers with an error rather than an empty table.
            Err(ClientError::Broker { .. }) => ConsumeStats::default(),
            Err(e) => return Err(e),
        };
        let mut queues: Vec<(MessageQueue, i64)> = stats
            .offset_table
            .into_iter()
            .filter(|(q, _)| q.topic == topic)
            .map(|(q, o)| (q, o.consumer_offset))
            .collect();
        queues.sort();
        Ok(queues)
    }

    /// Every queue of `topic` on the broker at `addr`, with its min offset as the committed
    /// offset (a group that never committed starts there).
    async fn topic_queues(
        &self,
        addr: &str,
        topic: &str,
        broker_name: &str,
    ) -> Result<Vec<(MessageQueue, i64)>> {
        let header = GetTopicStatsInfoRequestHeader {
            topic: topic.to_owned(),
            ..Default::default()
        };
        let request = self
            .api()
            .request_with(RequestCode::GetTopicStatsInfo, &header);
        let response = self.invoke_broker(addr, request).await?;
        let table: TopicStatsTable = from_fastjson(response.body.as_deref().unwrap_or_default())?;
        let mut queues: Vec<(MessageQueue, i64)> = table
            .offset_table
            .into_iter()
            .filter(|(q, _)| q.broker_name == broker_name)
            .map(|(q, o)| (q, o.min_offset))
            .collect();
        queues.sort();
        Ok(queues)
    }

    /// Commits `offset` for `group` on `queue` at the broker at `addr`.
    async fn commit_offset(
        &self,
        addr: &str,
        group: &str,
        queue: &MessageQueue,
        offset: i64,
    ) -> Result<()> {
        let header = UpdateConsumerOffsetRequestHeader {
            consumer_group: group.to_owned(),
            topic: queue.topic.clone(),
            queue_id: queue.queue_id,
            commit_offset: offset,
            ..Default::default()
        };
        self.api()
            .update_consumer_offset(addr, header, self.timeout())
            .await
    }
}
