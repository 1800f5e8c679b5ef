//! Subscription-group administration: create or update a group's configuration on brokers
//! (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP), delete it (DELETE_SUBSCRIPTIONGROUP, optionally with its
//! retry and dead-letter topics), read it back (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), and every
//! group's progress on one broker at once (GET_BROKER_CONSUME_STATS).
//!
//! Like topics, groups exist per broker: a change targets one broker address or every master of
//! a cluster, and reading a group's configuration asks every master of every cluster.

use comet_protocol::body::{
    ConsumeStatsList, SubscriptionGroupConfig, SubscriptionGroupWrapper, from_fastjson,
    to_fastjson_bytes,
};
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{
    DeleteSubscriptionGroupRequestHeader, GetConsumeStatsInBrokerHeader,
};
use comet_protocol::naming::{dlq_topic, retry_topic};

use super::{MQAdmin, TopicTarget};
use crate::error::{ClientError, Result};

/// One broker's copy of a group's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerGroupConfig {
    /// Name of the broker.
    pub broker_name: String,
    /// Address of the broker (its master).
    pub broker_addr: String,
    /// The configuration that broker holds.
    pub config: SubscriptionGroupConfig,
}

impl MQAdmin {
    /// The master addresses a [`TopicTarget`] names: the one address, or every master of the
    /// cluster. Fails when the cluster has no master.
    pub async fn target_addrs(&self, target: &TopicTarget) -> Result<Vec<String>> {
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
        Ok(addrs)
    }

    /// Creates or replaces `config` on the target's brokers (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP);
    /// returns the addresses that accepted it.
    pub async fn update_subscription_group(
        &self,
        target: &TopicTarget,
        config: &SubscriptionGroupConfig,
    ) -> Result<Vec<String>> {
        if config.group_name.is_empty() {
            return Err(ClientError::IllegalArgument(
                "the group name is empty".to_owned(),
            ));
        }
        let body = to_fastjson_bytes(config)?;
        let addrs = self.target_addrs(target).await?;
        for addr in &addrs {
            let request = self
                .api()
                .request(RequestCode::UpdateAndCreateSubscriptiongroup)
                .with_body(body.clone());
            self.invoke_broker(addr, request).await?;
        }
        Ok(addrs)
    }

    /// Deletes `group`'s subscription config (and, with `clean_offset`, its offsets) on each
    /// broker of `addrs` (DELETE_SUBSCRIPTIONGROUP).
    pub(crate) async fn delete_group_on(
        &self,
        addrs: &[String],
        group: &str,
        clean_offset: bool,
    ) -> Result<()> {
        let header = DeleteSubscriptionGroupRequestHeader {
            group_name: group.to_owned(),
            clean_offset: Some(clean_offset),
            ..Default::default()
        };
        for addr in addrs {
            let request = self
                .api()
                .request_with(RequestCode::DeleteSubscriptiongroup, &header);
            self.invoke_broker(addr, request).await?;
        }
        Ok(())
    }

    /// Deletes `group` from the target's brokers (DELETE_SUBSCRIPTIONGROUP; with `clean_offset`
    /// its committed offsets go too). With `with_topics` the group's retry and dead-letter topics
    /// are then deleted from those brokers and every name server, as mqadmin `deleteSubGroup`
    /// does for a cluster. Returns the broker addresses.
    pub async fn delete_subscription_group(
        &self,
        target: &TopicTarget,
        group: &str,
        clean_offset: bool,
        with_topics: bool,
    ) -> Result<Vec<String>> {
        let addrs = self.target_addrs(target).await?;
        self.delete_group_on(&addrs, group, clean_offset).await?;
        if with_topics {
            let cluster = match target {
                TopicTarget::Cluster(c) => Some(c.as_str()),
                TopicTarget::Broker(_) => None,
            };
            for topic in [retry_topic(group), dlq_topic(group)] {
                self.delete_topic_on(&addrs, &topic, cluster).await?;
            }
        }
        Ok(addrs)
    }

    /// Every master's copy of `group`'s configuration (GET_ALL_SUBSCRIPTIONGROUP_CONFIG on each
    /// master of every cluster), by broker name; empty when no broker knows the group.
    pub async fn subscription_group_configs(&self, group: &str) -> Result<Vec<BrokerGroupConfig>> {
        let mut found = Vec::new();
        for (broker_name, addr) in self.master_addrs(None).await? {
            let request = self
                .api()
                .request(RequestCode::GetAllSubscriptiongroupConfig);
            let response = self.invoke_broker(&addr, request).await?;
            let wrapper: SubscriptionGroupWrapper =
                from_fastjson(response.body.as_deref().unwrap_or_default())?;
            if let Some(config) = wrapper.subscription_group_table.get(group) {
                found.push(BrokerGroupConfig {
                    broker_name,
                    broker_addr: addr,
                    config: config.clone(),
                });
            }
        }
        Ok(found)
    }

    /// Every subscription group's consume stats on the broker at `addr`
    /// (GET_BROKER_CONSUME_STATS); with `is_order`, only orderly topics.
    pub async fn broker_consume_stats(
        &self,
        addr: &str,
        is_order: bool,
    ) -> Result<ConsumeStatsList> {
        let header = GetConsumeStatsInBrokerHeader {
            is_order,
            ..Default::default()
        };
        let request = self
            .api()
            .request_with(RequestCode::GetBrokerConsumeStats, &header);
        let response = self.invoke_broker(addr, request).await?;
        Ok(from_fastjson(response.body.as_deref().unwrap_or_default())?)
    }
}
