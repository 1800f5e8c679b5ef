//! Topic administration: list, route, create, delete, statistics.
//!
//! A topic exists per broker (each master has its own queue count and permission for it) and the
//! name server only learns of it when the broker registers, so creation targets brokers — one
//! address, or every master of a cluster (mqadmin's `-b` / `-c`) — and deletion must clear both the
//! brokers and every name server, or the route would come back at the next registration.

use std::collections::BTreeSet;

use comet_protocol::body::{
    TopicConfig, TopicFilterType, TopicList, TopicStatsTable, from_fastjson,
};
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{
    CreateTopicRequestHeader, DeleteTopicFromNamesrvRequestHeader, DeleteTopicRequestHeader,
    GetTopicStatsInfoRequestHeader,
};

use super::{MQAdmin, route_masters};
use crate::error::{ClientError, Result};

/// The template topic a created topic names as `defaultTopic` (RocketMQ's `TBW102`).
pub use comet_protocol::naming::AUTO_CREATE_TOPIC_KEY_TOPIC as DEFAULT_TOPIC_TEMPLATE;

/// Where a topic is created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicTarget {
    /// One broker, by address (`ip:port`).
    Broker(String),
    /// Every master broker of the named cluster.
    Cluster(String),
}

impl MQAdmin {
    /// Every topic the name server knows (GET_ALL_TOPIC_LIST_FROM_NAMESERVER), sorted.
    pub async fn topic_list(&self) -> Result<BTreeSet<String>> {
        let response = self
            .invoke_name_server_success(
                self.api()
                    .request(RequestCode::GetAllTopicListFromNameserver),
            )
            .await?;
        let body = response.body.as_deref().unwrap_or_default();
        if body.is_empty() {
            return Ok(BTreeSet::new());
        }
        let list: TopicList = from_fastjson(body)?;
        Ok(list.topic_list)
    }

    /// Creates (or updates) `config.topic_name` on the target brokers with UPDATE_AND_CREATE_TOPIC;
    /// returns the broker addresses that accepted it. Every broker is tried; the first refusal
    /// is returned after the others were attempted.
    pub async fn create_topic(
        &self,
        target: &TopicTarget,
        config: &TopicConfig,
    ) -> Result<Vec<String>> {
        if config.topic_name.is_empty() {
            return Err(ClientError::IllegalArgument(
                "the topic name is empty".to_owned(),
            ));
        }
        let addrs: Vec<String> = match target {
            TopicTarget::Broker(addr) => vec![addr.clone()],
            TopicTarget::Cluster(cluster) => self
                .master_addrs(Some(cluster))
                .await?
                .into_iter()
                .map(|(_, addr)| addr)
                .collect(),
        };
        if addrs.is_empty() {
            return Err(ClientError::IllegalArgument(format!(
                "{target:?} has no master broker"
            )));
        }
        let header = CreateTopicRequestHeader {
            topic: config.topic_name.clone(),
            default_topic: DEFAULT_TOPIC_TEMPLATE.to_owned(),
            read_queue_nums: config.read_queue_nums,
            write_queue_nums: config.write_queue_nums,
            perm: config.perm,
            topic_filter_type: config.topic_filter_type,
            topic_sys_flag: Some(config.topic_sys_flag),
            order: config.order,
            ..Default::default()
        };
        let mut created = Vec::new();
        let mut first_error = None;
        for addr in addrs {
            let request = self
                .api()
                .request_with(RequestCode::UpdateAndCreateTopic, &header);
            match self.invoke_broker(&addr, request).await {
                Ok(_) => created.push(addr),
                Err(e) => {
                    tracing::warn!(broker = %addr, error = %e, "topic creation refused");
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(created),
        }
    }

    /// Deletes `topic` from every master of `cluster` (DELETE_TOPIC_IN_BROKER), then from every
    /// name server (DELETE_TOPIC_IN_NAMESRV).
    pub async fn delete_topic(&self, topic: &str, cluster: &str) -> Result<()> {
        let header = DeleteTopicRequestHeader {
            topic: topic.to_owned(),
            ..Default::default()
        };
        for (_, addr) in self.master_addrs(Some(cluster)).await? {
            let request = self
                .api()
                .request_with(RequestCode::DeleteTopicInBroker, &header);
            self.invoke_broker(&addr, request).await?;
        }
        let header = DeleteTopicFromNamesrvRequestHeader {
            topic: topic.to_owned(),
            cluster_name: Some(cluster.to_owned()),
            ..Default::default()
        };
        for namesrv in self.api().name_server_address_list() {
            let request = self
                .api()
                .request_with(RequestCode::DeleteTopicInNamesrv, &header);
            self.invoke_broker(&namesrv, request).await?;
        }
        Ok(())
    }

    /// Min/max offsets of every queue of `topic`, merged over the masters of its route
    /// (GET_TOPIC_STATS_INFO). `topic_put_tps` is the sum over brokers that report one.
    pub async fn topic_stats(&self, topic: &str) -> Result<TopicStatsTable> {
        let route = self.topic_route(topic).await?;
        let header = GetTopicStatsInfoRequestHeader {
            topic: topic.to_owned(),
            ..Default::default()
        };
        let mut merged = TopicStatsTable::default();
        for (_, addr) in route_masters(&route) {
            let request = self
                .api()
                .request_with(RequestCode::GetTopicStatsInfo, &header);
            let response = self.invoke_broker(&addr, request).await?;
            let table: TopicStatsTable =
                from_fastjson(response.body.as_deref().unwrap_or_default())?;
            merged.offset_table.extend(table.offset_table);
            if let Some(tps) = table.topic_put_tps {
                merged.topic_put_tps = Some(merged.topic_put_tps.unwrap_or(0.0) + tps);
            }
        }
        Ok(merged)
    }
}

/// A topic configuration with mqadmin `updateTopic`'s defaults: 8 read and 8 write queues,
/// read-write, single tag, not ordered.
pub fn default_topic_config(topic: impl Into<String>) -> TopicConfig {
    TopicConfig {
        read_queue_nums: DEFAULT_ADMIN_QUEUE_NUMS,
        write_queue_nums: DEFAULT_ADMIN_QUEUE_NUMS,
        topic_filter_type: TopicFilterType::SingleTag,
        ..TopicConfig::new(topic)
    }
}

/// Queue count mqadmin `updateTopic` uses when none is given.
pub const DEFAULT_ADMIN_QUEUE_NUMS: i32 = 8;
