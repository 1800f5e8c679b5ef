//! Controller administration (RocketMQ 5.x controller mode): which controller leads, each
//! broker group's master, epochs and SyncStateSet, and a forced election — what `mqadmin
//! getControllerMetaData`, `getSyncStateSet` and `electMaster` do.
//!
//! A controller quorum is reached at its peer addresses; the registry's reads and the election
//! go to the leader, which any controller names.

use std::time::Duration;

use comet_protocol::RemotingCommand;
use comet_protocol::body::controller::{BrokerReplicasInfo, ElectMasterResponseBody};
use comet_protocol::body::lenient::from_fastjson;
use comet_protocol::body::to_fastjson_bytes;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CommandHeaderExt, ElectMasterRequestHeader, ElectMasterResponseHeader,
    GetMetaDataResponseHeader, request_with_header,
};
use comet_remoting::RemotingClient;

use crate::api::broker_error;
use crate::error::{ClientError, Result};

/// One controller's view of the quorum (CONTROLLER_GET_METADATA_INFO).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerMetadata {
    /// The controller asked.
    pub addr: String,
    /// The quorum's name (`controllerDLegerGroup`).
    pub group: Option<String>,
    /// The leader's name in the peers list (`n0`), when one is known.
    pub leader_id: Option<String>,
    /// The leader's address, when one is known.
    pub leader_addr: Option<String>,
    /// Whether the controller asked is the leader.
    pub is_leader: bool,
    /// `id:addr;` for every controller.
    pub peers: Option<String>,
}

/// A group's master after an election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectedMaster {
    /// The master's id (the controller's id of the broker, not 0).
    pub master_broker_id: Option<i64>,
    /// The master's address.
    pub master_address: Option<String>,
    /// The new master epoch.
    pub master_epoch: Option<i32>,
    /// The new SyncStateSet epoch.
    pub sync_state_set_epoch: Option<i32>,
    /// The group's replicas and the new SyncStateSet.
    pub body: ElectMasterResponseBody,
}

/// A client of a controller quorum.
pub struct ControllerAdmin {
    remoting: RemotingClient,
    controllers: Vec<String>,
    timeout: Duration,
}

impl ControllerAdmin {
    /// An admin client for the controllers at `addrs` (`;`-separated, as `controllerAddr`).
    pub fn new(addrs: &str, timeout: Duration) -> Result<Self> {
        let controllers: Vec<String> = addrs
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect();
        if controllers.is_empty() {
            return Err(ClientError::IllegalArgument(
                "no controller address given".to_owned(),
            ));
        }
        Ok(ControllerAdmin {
            remoting: RemotingClient::new(comet_remoting::ClientConfig::default()),
            controllers,
            timeout,
        })
    }

    /// The controllers this client asks.
    pub fn controllers(&self) -> &[String] {
        &self.controllers
    }

    async fn call(&self, addr: &str, request: RemotingCommand) -> Result<RemotingCommand> {
        let response = self.remoting.invoke(addr, request, self.timeout).await?;
        if response.code == ResponseCode::Success.code() {
            Ok(response)
        } else {
            Err(broker_error(addr, &response))
        }
    }

    /// CONTROLLER_GET_METADATA_INFO of the controller at `addr`.
    pub async fn metadata(&self, addr: &str) -> Result<ControllerMetadata> {
        let response = self
            .call(
                addr,
                RemotingCommand::request(RequestCode::ControllerGetMetadataInfo),
            )
            .await?;
        let header: GetMetaDataResponseHeader = response.decode_header()?;
        Ok(ControllerMetadata {
            addr: addr.to_owned(),
            group: header.group,
            leader_id: header.controller_leader_id,
            leader_addr: header.controller_leader_address,
            is_leader: header.is_leader,
            peers: header.peers,
        })
    }

    /// The leader's address, as the first controller that knows one names it.
    pub async fn leader(&self) -> Result<String> {
        let mut last_error = None;
        for addr in &self.controllers {
            match self.metadata(addr).await {
                Ok(ControllerMetadata {
                    leader_addr: Some(leader),
                    ..
                }) => return Ok(leader),
                Ok(_) => {}
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| {
            ClientError::IllegalArgument(format!(
                "no controller of {} names a leader (no quorum?)",
                self.controllers.join(";")
            ))
        }))
    }

    /// Each group's master, epochs and replicas (CONTROLLER_GET_SYNC_STATE_DATA at the leader).
    pub async fn sync_state(&self, broker_names: &[String]) -> Result<BrokerReplicasInfo> {
        let leader = self.leader().await?;
        let body = to_fastjson_bytes(broker_names)?;
        let request =
            RemotingCommand::request(RequestCode::ControllerGetSyncStateData).with_body(body);
        let response = self.call(&leader, request).await?;
        Ok(from_fastjson(&response.body_bytes().unwrap_or_default())?)
    }

    /// Makes broker `broker_id` of `broker_name` the master (CONTROLLER_ELECT_MASTER with
    /// `designateElect`); it must be alive and in the SyncStateSet.
    pub async fn elect_master(
        &self,
        cluster: &str,
        broker_name: &str,
        broker_id: i64,
    ) -> Result<ElectedMaster> {
        let leader = self.leader().await?;
        let request = request_with_header(
            RequestCode::ControllerElectMaster,
            &ElectMasterRequestHeader {
                cluster_name: Some(cluster.to_owned()),
                broker_name: Some(broker_name.to_owned()),
                broker_id: Some(broker_id),
                designate_elect: Some(true),
                invoke_time: None,
            },
        );
        let response = self.call(&leader, request).await?;
        let header: ElectMasterResponseHeader = response.decode_header()?;
        Ok(ElectedMaster {
            master_broker_id: header.master_broker_id,
            master_address: header.master_address,
            master_epoch: header.master_epoch,
            sync_state_set_epoch: header.sync_state_set_epoch,
            body: from_fastjson(&response.body_bytes().unwrap_or_default())?,
        })
    }

    /// Closes every connection.
    pub async fn shutdown(&self) {
        self.remoting.shutdown().await;
    }
}
