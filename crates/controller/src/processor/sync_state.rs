//! CONTROLLER_ALTER_SYNC_STATE_SET (the master reports which replicas keep up),
//! CONTROLLER_GET_REPLICA_INFO (every broker polls its group's master and set) and
//! CONTROLLER_GET_SYNC_STATE_DATA (admin tools).

use std::collections::BTreeMap;
use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::body::controller::{
    BrokerReplicasInfo, ReplicaIdentity, ReplicasInfo, SyncStateSet,
};
use comet_protocol::body::lenient::from_fastjson;
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::{
    AlterSyncStateSetRequestHeader, AlterSyncStateSetResponseHeader, CommandHeaderExt,
    GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader,
};

use super::register::sync_state_set;
use super::{
    ControllerContext, broker_id, decode, json_body, refusal, required_name, system_error,
};
use crate::replicas::{Command, Reply};

pub(crate) async fn alter(
    ctx: &Arc<ControllerContext>,
    request: &RemotingCommand,
) -> Result<RemotingCommand, Box<RemotingCommand>> {
    let header: AlterSyncStateSetRequestHeader = decode(request)?;
    let broker_name = required_name("brokerName", header.broker_name)?;
    let master = broker_id("masterBrokerId", header.master_broker_id)?;
    let body = request.body_bytes().unwrap_or_default();
    let proposed: SyncStateSet = from_fastjson(&body)
        .map_err(|e| system_error(format!("the SyncStateSet body does not parse: {e}")))?;
    let new_set = proposed
        .sync_state_set
        .iter()
        .map(|id| u64::try_from(*id))
        .collect::<Result<_, _>>()
        .map_err(|_| {
            refusal(
                ResponseCode::ControllerInvalidReplicas.code(),
                "negative broker id",
            )
        })?;
    let alive = ctx.liveness.alive_ids(&broker_name, ctx.now());
    let outcome = ctx
        .propose(Command::AlterSyncStateSet {
            broker_name,
            master,
            master_epoch: header.master_epoch.unwrap_or(-1),
            sync_state_set_epoch: proposed.sync_state_set_epoch,
            new_set,
            alive,
        })
        .await?;
    match outcome {
        Ok(Reply::Group(view)) => {
            let body = json_body(&sync_state_set(
                &view.sync_state_set,
                view.sync_state_set_epoch,
            ))?;
            let mut response = super::success().with_body(body);
            response.encode_header(&AlterSyncStateSetResponseHeader {
                new_sync_state_set_epoch: view.sync_state_set_epoch,
            });
            Ok(response)
        }
        Ok(Reply::Done) => Err(system_error("SyncStateSet change gave no group")),
        Err(refused) => Err(refusal(refused.code, refused.remark)),
    }
}

pub(crate) async fn replica_info(
    ctx: &Arc<ControllerContext>,
    request: &RemotingCommand,
) -> Result<RemotingCommand, Box<RemotingCommand>> {
    let header: GetReplicaInfoRequestHeader = decode(request)?;
    let broker_name = required_name("brokerName", header.broker_name)?;
    ctx.lead_read().await?;
    let Some(view) = ctx.read(|r| r.group(&broker_name).map(|g| g.view())) else {
        return Err(refusal(
            ResponseCode::ControllerBrokerMetadataNotExist.code(),
            "Broker metadata is not existed",
        ));
    };
    let body = json_body(&sync_state_set(
        &view.sync_state_set,
        view.sync_state_set_epoch,
    ))?;
    let mut response = super::success().with_body(body);
    response.encode_header(&GetReplicaInfoResponseHeader {
        master_broker_id: view.master.and_then(|m| i64::try_from(m).ok()),
        master_address: view.master_address.clone(),
        master_epoch: view.master_epoch,
    });
    Ok(response)
}

pub(crate) async fn sync_state_data(
    ctx: &Arc<ControllerContext>,
    request: &RemotingCommand,
) -> Result<RemotingCommand, Box<RemotingCommand>> {
    let body = request.body_bytes().unwrap_or_default();
    if body.is_empty() {
        return Err(system_error("not set any response code"));
    }
    let names: Vec<String> = from_fastjson(&body)
        .map_err(|e| system_error(format!("the broker names do not parse: {e}")))?;
    ctx.lead_read().await?;
    let now = ctx.now();
    let mut table = BTreeMap::new();
    for name in names {
        let Some(view) = ctx.read(|r| r.group(&name).map(|g| g.view())) else {
            continue;
        };
        let mut in_sync = Vec::new();
        let mut not_in_sync = Vec::new();
        for (id, address) in &view.addresses {
            let replica = ReplicaIdentity {
                broker_name: name.clone(),
                broker_id: i64::try_from(*id).unwrap_or(i64::MAX),
                broker_address: address.clone(),
                alive: ctx.liveness.is_alive(&name, *id, now),
            };
            if view.sync_state_set.contains(id) {
                in_sync.push(replica);
            } else {
                not_in_sync.push(replica);
            }
        }
        table.insert(
            name,
            ReplicasInfo {
                master_broker_id: view.master.and_then(|m| i64::try_from(m).ok()),
                master_address: view.master_address.clone(),
                master_epoch: view.master_epoch,
                sync_state_set_epoch: view.sync_state_set_epoch,
                in_sync_replicas: in_sync,
                not_in_sync_replicas: not_in_sync,
            },
        );
    }
    let info = BrokerReplicasInfo {
        replicas_info_table: table,
    };
    Ok(super::success().with_body(json_body(&info)?))
}
