//! Cluster-wide catalogues an operator browses: every subscription group, and group deletion on
//! every master.
//!
//! Groups, like topics, live on each broker (`subscriptionGroup.json`), so the lists are the union
//! of every master's answer; a master that cannot answer is skipped with a warning, so one broken
//! broker does not hide the rest of the cluster.

use std::collections::{BTreeMap, BTreeSet};

use comet_protocol::body::from_fastjson;
use comet_protocol::code::RequestCode;
use serde::Deserialize;

use super::MQAdmin;
use crate::error::Result;

/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG's body, reduced to the group names.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SubscriptionGroupNames {
    #[serde(default)]
    subscription_group_table: BTreeMap<String, serde_json::Value>,
}

impl MQAdmin {
    /// Every subscription group known to a master of the cluster (GET_ALL_SUBSCRIPTIONGROUP_CONFIG
    /// on each master), sorted. Brokers create a group's entry at its first heartbeat when
    /// auto-creation is on, so the list includes groups that only ever connected.
    pub async fn group_list(&self) -> Result<BTreeSet<String>> {
        let mut groups = BTreeSet::new();
        let mut answered = false;
        let mut last_error = None;
        for (_, addr) in self.master_addrs(None).await? {
            let request = self
                .api()
                .request(RequestCode::GetAllSubscriptiongroupConfig);
            match self.invoke_broker(&addr, request).await {
                Ok(response) => {
                    answered = true;
                    let body = response.body.as_deref().unwrap_or_default();
                    if body.is_empty() {
                        continue;
                    }
                    let table: SubscriptionGroupNames = from_fastjson(body)?;
                    groups.extend(table.subscription_group_table.into_keys());
                }
                Err(e) => {
                    tracing::warn!(broker = %addr, error = %e, "group list refused");
                    last_error = Some(e);
                }
            }
        }
        match (answered, last_error) {
            (false, Some(e)) => Err(e),
            _ => Ok(groups),
        }
    }

    /// Deletes the subscription group `group` from every master (DELETE_SUBSCRIPTIONGROUP), its
    /// committed offsets included when `clean_offset`.
    pub async fn delete_group(&self, group: &str, clean_offset: bool) -> Result<()> {
        let addrs: Vec<String> = self
            .master_addrs(None)
            .await?
            .into_iter()
            .map(|(_, addr)| addr)
            .collect();
        self.delete_group_on(&addrs, group, clean_offset).await
    }
}
