//! Consumer-group administration: progress (lag), connections, offset reset.
//!
//! A group's offsets live on each broker that holds queues of its topics, so progress is the
//! union of every master's GET_CONSUME_STATS answer, and a reset must be sent to each master of the
//! topic's route (each broker resets its own queues and notifies the group's online clients).

use std::collections::HashMap;

use comet_protocol::body::{
    ConsumeStats, ConsumerConnection, MessageQueue, ResetOffsetBody, from_fastjson,
};
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{
    GetConsumeStatsRequestHeader, GetConsumerConnectionListRequestHeader, ResetOffsetRequestHeader,
};

use super::{MQAdmin, route_masters};
use crate::error::{ClientError, Result};

/// One queue's line of a group's progress (mqadmin `consumerProgress`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueProgress {
    /// The queue.
    pub queue: MessageQueue,
    /// Next offset the broker will write.
    pub broker_offset: i64,
    /// The group's committed offset.
    pub consumer_offset: i64,
    /// Store time (ms) of the last consumed message, 0 when unknown.
    pub last_timestamp: i64,
}

impl QueueProgress {
    /// Messages written but not yet consumed (never negative).
    pub fn lag(&self) -> i64 {
        self.broker_offset
            .saturating_sub(self.consumer_offset)
            .max(0)
    }
}

/// The per-queue lines of consume stats, sorted by queue.
pub fn progress_lines(stats: ConsumeStats) -> Vec<QueueProgress> {
    let mut lines: Vec<QueueProgress> = stats
        .offset_table
        .into_iter()
        .map(|(queue, o)| QueueProgress {
            queue,
            broker_offset: o.broker_offset,
            consumer_offset: o.consumer_offset,
            last_timestamp: o.last_timestamp,
        })
        .collect();
    lines.sort_by(|a, b| a.queue.cmp(&b.queue));
    lines
}

impl MQAdmin {
    /// The group's offsets on every master (of `topic`'s route when given, else of every
    /// cluster), merged (GET_CONSUME_STATS). `diff_total()` of the result is the group's lag.
    pub async fn consume_stats(&self, group: &str, topic: Option<&str>) -> Result<ConsumeStats> {
        let masters = match topic {
            Some(t) => route_masters(&self.topic_route(t).await?),
            None => self.master_addrs(None).await?,
        };
        let header = GetConsumeStatsRequestHeader {
            consumer_group: group.to_owned(),
            topic: topic.map(str::to_owned),
            ..Default::default()
        };
        let mut merged = ConsumeStats::default();
        for (_, addr) in masters {
            let request = self
                .api()
                .request_with(RequestCode::GetConsumeStats, &header);
            let response = self.invoke_broker(&addr, request).await?;
            let body = response.body.as_deref().unwrap_or_default();
            if body.is_empty() {
                continue;
            }
            let stats: ConsumeStats = from_fastjson(body)?;
            merged.offset_table.extend(stats.offset_table);
            merged.consume_tps += stats.consume_tps;
        }
        Ok(merged)
    }

    /// The group's progress as sorted per-queue lines (see [`QueueProgress`]).
    pub async fn consumer_progress(
        &self,
        group: &str,
        topic: Option<&str>,
    ) -> Result<Vec<QueueProgress>> {
        let stats = self.consume_stats(group, topic).await?;
        Ok(progress_lines(stats))
    }

    /// The group's online clients and their subscriptions (GET_CONSUMER_CONNECTION_LIST), merged
    /// over every master. Fails with the broker's CONSUMER_NOT_ONLINE (206) when no broker knows
    /// a member of the group.
    pub async fn consumer_connections(&self, group: &str) -> Result<ConsumerConnection> {
        let header = GetConsumerConnectionListRequestHeader {
            consumer_group: group.to_owned(),
            ..Default::default()
        };
        let mut merged: Option<ConsumerConnection> = None;
        let mut last_error = None;
        for (_, addr) in self.master_addrs(None).await? {
            let request = self
                .api()
                .request_with(RequestCode::GetConsumerConnectionList, &header);
            match self.invoke_broker(&addr, request).await {
                Ok(response) => {
                    let conn: ConsumerConnection =
                        from_fastjson(response.body.as_deref().unwrap_or_default())?;
                    match merged.as_mut() {
                        None => merged = Some(conn),
                        Some(m) => {
                            m.connection_set.extend(conn.connection_set);
                            m.subscription_table.extend(conn.subscription_table);
                        }
                    }
                }
                Err(e) => last_error = Some(e),
            }
        }
        merged.ok_or_else(|| {
            last_error.unwrap_or_else(|| {
                ClientError::Client(format!("no broker knows consumer group {group}"))
            })
        })
    }

    /// Resets the group's offsets of `topic` to the first message stored at or after `timestamp`
    /// (ms) on every master of the topic's route (INVOKE_BROKER_TO_RESET_OFFSET). Without
    /// `force`, a queue whose committed offset is already below the target keeps it. Returns the
    /// offsets the brokers set.
    pub async fn reset_offset_by_time(
        &self,
        group: &str,
        topic: &str,
        timestamp: i64,
        force: bool,
    ) -> Result<HashMap<MessageQueue, i64>> {
        let route = self.topic_route(topic).await?;
        let header = ResetOffsetRequestHeader {
            group: group.to_owned(),
            topic: topic.to_owned(),
            queue_id: None,
            offset: None,
            timestamp,
            is_force: force,
            ..Default::default()
        };
        let mut offsets = HashMap::new();
        for (_, addr) in route_masters(&route) {
            let request = self
                .api()
                .request_with(RequestCode::InvokeBrokerToResetOffset, &header);
            let response = self.invoke_broker(&addr, request).await?;
            let body = response.body.as_deref().unwrap_or_default();
            if body.is_empty() {
                continue;
            }
            let table: ResetOffsetBody = from_fastjson(body)?;
            offsets.extend(table.offset_table);
        }
        Ok(offsets)
    }
}
