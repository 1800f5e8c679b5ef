//! Topic administration: list, route, create, delete, statistics.
//!
//! A topic exists per broker (each master has its own queue count and permission for it) and the
//! name server only learns of it when the broker registers, so creation targets brokers — one
//! address, or every master of a cluster (mqadmin's `-b` / `-c`) — and deletion must clear both the
//! brokers and every name server, or the route would come back at the next registration.

use std::collections::BTreeSet;

use comet_protocol::body::{
    GroupList, TopicConfig, TopicFilterType, TopicList, TopicStatsTable, from_fastjson,
};
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{
    CreateTopicRequestHeader, DeleteTopicFromNamesrvRequestHeader, DeleteTopicRequestHeader,
    GetTopicStatsInfoRequestHeader, QueryTopicConsumeByWhoRequestHeader,
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
            attributes: attribute_changes(&config.attributes),
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

    /// Creates (or updates) every topic of `configs` on the broker at `addr` with one
    /// UPDATE_AND_CREATE_TOPIC_LIST (RocketMQ 5.x brokers). Attributes are sent as changes
    /// (`+key` → value), as the broker expects them in a list.
    pub async fn create_topics(&self, addr: &str, configs: &[TopicConfig]) -> Result<()> {
        if configs.is_empty() {
            return Err(ClientError::IllegalArgument(
                "the topic list is empty".to_owned(),
            ));
        }
        let list: Vec<TopicConfig> = configs
            .iter()
            .map(|c| {
                let mut c = c.clone();
                c.attributes = c
                    .attributes
                    .into_iter()
                    .map(|(k, v)| (format!("+{k}"), v))
                    .collect();
                c
            })
            .collect();
        let body = serde_json::json!({ "topicConfigList": list });
        let body = serde_json::to_vec(&body)
            .map_err(|e| ClientError::IllegalArgument(format!("encoding the topic list: {e}")))?;
        let request = self
            .api()
            .request(RequestCode::UpdateAndCreateTopicList)
            .with_body(bytes::Bytes::from(body));
        self.invoke_broker(addr, request).await.map(|_| ())
    }

    /// Deletes `topic` from every master of `cluster` (DELETE_TOPIC_IN_BROKER), then from every
    /// name server (DELETE_TOPIC_IN_NAMESRV).
    pub async fn delete_topic(&self, topic: &str, cluster: &str) -> Result<()> {
        let addrs: Vec<String> = self
            .master_addrs(Some(cluster))
            .await?
            .into_iter()
            .map(|(_, addr)| addr)
            .collect();
        self.delete_topic_on(&addrs, topic, Some(cluster)).await
    }

    /// Deletes `topic` from the brokers at `addrs` (DELETE_TOPIC_IN_BROKER), then from every name
    /// server (DELETE_TOPIC_IN_NAMESRV, for `cluster` only when given).
    pub async fn delete_topic_on(
        &self,
        addrs: &[String],
        topic: &str,
        cluster: Option<&str>,
    ) -> Result<()> {
        let header = DeleteTopicRequestHeader {
            topic: topic.to_owned(),
            ..Default::default()
        };
        for addr in addrs {
            let request = self
                .api()
                .request_with(RequestCode::DeleteTopicInBroker, &header);
            self.invoke_broker(addr, request).await?;
        }
        let header = DeleteTopicFromNamesrvRequestHeader {
            topic: topic.to_owned(),
            cluster_name: cluster.map(str::to_owned),
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

    /// The clusters that hold queues of `topic`: its route's brokers, looked up in the cluster
    /// table (mqadmin `topicClusterList`).
    pub async fn topic_cluster_list(&self, topic: &str) -> Result<BTreeSet<String>> {
        let route = self.topic_route(topic).await?;
        let info = self.cluster_info().await?;
        Ok(info
            .cluster_addr_table
            .iter()
            .filter(|(_, brokers)| {
                brokers
                    .iter()
                    .any(|b| route.broker_datas.iter().any(|bd| &bd.broker_name == b))
            })
            .map(|(cluster, _)| cluster.clone())
            .collect())
    }

    /// Sets the permission of `topic` on every master of its route, keeping each broker's queue
    /// counts (from the route) — mqadmin `updateTopicPerm` with UPDATE_AND_CREATE_TOPIC. Returns
    /// the broker addresses changed.
    pub async fn update_topic_perm(&self, topic: &str, perm: i32) -> Result<Vec<String>> {
        if !matches!(perm, 2 | 4 | 6) {
            return Err(ClientError::IllegalArgument(format!(
                "permission {perm} is not 2 (write), 4 (read) or 6 (read-write)"
            )));
        }
        let route = self.topic_route(topic).await?;
        let mut changed = Vec::new();
        for (name, addr) in route_masters(&route) {
            let Some(queues) = route.queue_datas.iter().find(|q| q.broker_name == name) else {
                continue;
            };
            let mut config = default_topic_config(topic);
            config.read_queue_nums = queues.read_queue_nums;
            config.write_queue_nums = queues.write_queue_nums;
            config.topic_sys_flag = queues.topic_sys_flag;
            config.perm = perm;
            self.create_topic(&TopicTarget::Broker(addr.clone()), &config)
                .await?;
            changed.push(addr);
        }
        Ok(changed)
    }

    /// The groups that consume `topic` (QUERY_TOPIC_CONSUME_BY_WHO on every master of its
    /// route): groups with an online subscriber and groups with committed offsets.
    pub async fn topic_consumer_groups(&self, topic: &str) -> Result<BTreeSet<String>> {
        let route = self.topic_route(topic).await?;
        let header = QueryTopicConsumeByWhoRequestHeader {
            topic: topic.to_owned(),
            ..Default::default()
        };
        let mut groups = BTreeSet::new();
        for (_, addr) in route_masters(&route) {
            let request = self
                .api()
                .request_with(RequestCode::QueryTopicConsumeByWho, &header);
            let response = self.invoke_broker(&addr, request).await?;
            let body = response.body.as_deref().unwrap_or_default();
            if body.is_empty() {
                continue;
            }
            let list: GroupList = from_fastjson(body)?;
            groups.extend(list.group_list);
        }
        Ok(groups)
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

/// The `attributes` field of UPDATE_AND_CREATE_TOPIC setting `attributes`: `+key=value` changes,
/// comma-separated and sorted by key (mqadmin `updateTopic -a` sends the same form); `None` when
/// there is nothing to set.
pub fn attribute_changes(attributes: &std::collections::HashMap<String, String>) -> Option<String> {
    if attributes.is_empty() {
        return None;
    }
    let mut pairs: Vec<_> = attributes.iter().collect();
    pairs.sort();
    Some(
        pairs
            .into_iter()
            .map(|(k, v)| format!("+{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_sent_as_mqadmin_changes() {
        let mut config = default_topic_config("T");
        assert_eq!(attribute_changes(&config.attributes), None);
        config
            .attributes
            .insert("message.type".to_owned(), "FIFO".to_owned());
        assert_eq!(
            attribute_changes(&config.attributes).as_deref(),
            Some("+message.type=FIFO")
        );
        config.attributes.insert("a".to_owned(), "1".to_owned());
        assert_eq!(
            attribute_changes(&config.attributes).as_deref(),
            Some("+a=1,+message.type=FIFO")
        );
    }
}
