//! `MQAdmin`: the operator's client (RocketMQ's `DefaultMQAdminExt`), the engine behind
//! `comet topic|group|msg` and any tool that manages a cluster instead of producing or consuming.
//!
//! Admin commands are one-off request/response exchanges, so `MQAdmin` does not start an
//! [`crate::MQClientInstance`] (no heartbeats, no rebalance, no route polling): it owns one
//! [`MQClientApi`] and asks the name server for routes and cluster membership on every call.
//! That keeps an admin tool from ever appearing as a group member, and every answer reflects the
//! cluster as it is at that moment.
//!
//! RocketMQ spreads a topic over several brokers and keeps its metadata in two places (each
//! broker's topic table, and the name server's route table that brokers register into), so the
//! cluster-wide operations fan out: creating a topic goes to every master of a cluster, deleting
//! it goes to every master and then every name server, and statistics are merged over the masters
//! of the topic's route. The operations are split by subject:
//! - [`topic`]: cluster info, topic list/route/create/delete/stats/permission, consuming groups;
//! - [`group`]: consumer progress, connections, offset reset;
//! - [`subscription`]: subscription-group create/delete/config, a broker's consume stats;
//! - [`offsets`]: offset reset that also works for offline groups, offset cloning;
//! - [`message`]: query by key/id, dead-letter queue listing and resend;
//! - [`browse`]: a message at a queue offset, the messages of a time window;
//! - [`broker`]: broker runtime info, broker and name-server settings, write permission,
//!   statistics, producer connections;
//! - [`running`]: one consumer client's running info, and direct delivery of a message to it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use comet_acl::AclClientRpcHook;
use comet_protocol::RemotingCommand;
use comet_protocol::body::{ClusterInfo, TopicRouteData};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_remoting::RemotingClient;

use crate::api::{MQClientApi, broker_error};
use crate::config::ClientConfig;
use crate::error::{ClientError, NoRouteReason, Result};

pub mod broker;
pub mod browse;
pub mod catalog;
pub mod controller;
pub mod group;
pub mod message;
pub mod offsets;
pub mod running;
pub mod subscription;
pub mod topic;
pub mod window;

pub use browse::OffsetRange;
pub use group::QueueProgress;
pub use message::{DlqResendOutcome, MessageIdKind};
pub use offsets::{RESET_TO_END, ResetOutcome};
pub use subscription::BrokerGroupConfig;
pub use topic::TopicTarget;

/// Timeout of one admin request. Admin calls scan indexes and walk queues on the broker, so they
/// get more time than the client's default 3 s.
pub const DEFAULT_ADMIN_TIMEOUT: Duration = Duration::from_secs(5);
/// The group admin tools pull as (RocketMQ's `MixAll.TOOLS_CONSUMER_GROUP`). Pulls made for
/// inspection never commit offsets, so this group never gains progress of its own.
pub const TOOLS_CONSUMER_GROUP: &str = "TOOLS_CONSUMER";
/// The producer group DLQ resends are sent as, so resent copies are recognisable in producer
/// connections and never mixed up with an application's producer group.
pub const TOOLS_PRODUCER_GROUP: &str = "TOOLS_PRODUCER";

/// The operator's client: topic, group and message administration over one connection pool.
pub struct MQAdmin {
    config: ClientConfig,
    api: MQClientApi,
    timeout: Duration,
}

impl MQAdmin {
    /// An admin client for the name servers of `config`. Fails with
    /// [`ClientError::NoNameServer`] when none is configured.
    pub fn new(config: ClientConfig) -> Result<Self> {
        let namesrv = config.namesrv_addrs();
        if namesrv.is_empty() {
            return Err(ClientError::NoNameServer);
        }
        let remoting = RemotingClient::new(config.remoting_config());
        if let Some(credentials) = &config.credentials {
            remoting.add_rpc_hook(Arc::new(AclClientRpcHook::new(credentials.clone())));
        }
        let api = MQClientApi::new(remoting, config.language, namesrv);
        Ok(MQAdmin {
            config,
            api,
            timeout: DEFAULT_ADMIN_TIMEOUT,
        })
    }

    /// Replaces the per-request timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The per-request timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The configuration this admin was built from.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The RPC layer, for calls this type does not wrap.
    pub fn api(&self) -> &MQClientApi {
        &self.api
    }

    /// Closes every connection.
    pub async fn shutdown(&self) {
        self.api.remoting().shutdown().await;
    }

    /// Sends `request` to the name servers (the first reachable one answers) and returns the
    /// response when it is SUCCESS.
    pub(crate) async fn invoke_name_server_success(
        &self,
        request: RemotingCommand,
    ) -> Result<RemotingCommand> {
        let (addr, response) = self.api.invoke_name_server(request, self.timeout).await?;
        if response.code == i32::from(ResponseCode::Success) {
            Ok(response)
        } else {
            Err(broker_error(&addr, &response))
        }
    }

    /// Sends `request` to the broker at `addr`; SUCCESS or a `Broker` error.
    pub(crate) async fn invoke_broker(
        &self,
        addr: &str,
        request: RemotingCommand,
    ) -> Result<RemotingCommand> {
        self.api.invoke_success(addr, request, self.timeout).await
    }

    /// The cluster membership the name server knows (GET_BROKER_CLUSTER_INFO).
    pub async fn cluster_info(&self) -> Result<ClusterInfo> {
        let response = self
            .invoke_name_server_success(self.api.request(RequestCode::GetBrokerClusterInfo))
            .await?;
        Ok(ClusterInfo::decode(
            response.body.as_deref().unwrap_or_default(),
        )?)
    }

    /// Master addresses of every broker of `cluster` (every cluster when `None`), sorted, with
    /// their broker names.
    pub async fn master_addrs(&self, cluster: Option<&str>) -> Result<Vec<(String, String)>> {
        let info = self.cluster_info().await?;
        let names: BTreeSet<&String> = match cluster {
            Some(c) => info
                .cluster_addr_table
                .get(c)
                .ok_or_else(|| ClientError::IllegalArgument(format!("no cluster named {c}")))?
                .iter()
                .collect(),
            None => info.broker_addr_table.keys().collect(),
        };
        Ok(names
            .into_iter()
            .filter_map(|name| {
                let data = info.broker_addr_table.get(name)?;
                Some((name.clone(), data.master_addr()?.to_owned()))
            })
            .collect())
    }

    /// The route of `topic`, or [`ClientError::NoRoute`] when the name server does not know it.
    pub async fn topic_route(&self, topic: &str) -> Result<TopicRouteData> {
        self.api
            .get_topic_route_info_from_name_server(topic, self.timeout)
            .await?
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_owned(),
                namesrv: self.config.namesrv_addr.clone(),
                reason: NoRouteReason::TopicNotExist,
            })
    }
}

/// `(broker name, master address)` of every broker of a route that has a master, sorted by name.
pub fn route_masters(route: &TopicRouteData) -> Vec<(String, String)> {
    let mut masters: Vec<(String, String)> = route
        .broker_datas
        .iter()
        .filter_map(|b| Some((b.broker_name.clone(), b.master_addr()?.to_owned())))
        .collect();
    masters.sort();
    masters.dedup();
    masters
}
