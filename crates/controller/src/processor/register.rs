//! CONTROLLER_REGISTER_BROKER and BROKER_HEARTBEAT: a broker with an id announces itself, then
//! keeps itself alive.
//!
//! Registration answers the group's master only while that master is alive here, so a broker
//! is never sent to follow a dead master; without one it asks for an election next. A changed
//! address is committed through the quorum, an unchanged one is answered from the registry.

use std::sync::Arc;
use std::time::Duration;

use comet_protocol::RemotingCommand;
use comet_protocol::body::controller::SyncStateSet;
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::{
    BrokerHeartbeatRequestHeader, CommandHeaderExt, RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
};

use super::{ControllerContext, broker_id, decode, json_body, refusal, required_name};
use crate::config::DEFAULT_BROKER_HEARTBEAT_TIMEOUT;
use crate::liveness::Heartbeat;
use crate::replicas::Command;

/// Longest heartbeat timeout a broker may announce: past it a dead broker would hold its
/// group's mastership for too long.
const MAX_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(600);

pub(crate) async fn register_broker(
    ctx: &Arc<ControllerContext>,
    request: &RemotingCommand,
) -> Result<RemotingCommand, Box<RemotingCommand>> {
    let header: RegisterBrokerToControllerRequestHeader = decode(request)?;
    let cluster = required_name("clusterName", header.cluster_name)?;
    let broker_name = required_name("brokerName", header.broker_name)?;
    let id = broker_id("brokerId", header.broker_id)?;
    let address = required_name("brokerAddress", header.broker_address)?;
    ctx.lead_read().await?;
    let known = ctx.read(|r| {
        r.group(&broker_name)
            .and_then(|g| g.replicas.get(&id))
            .map(|replica| replica.address.clone())
    });
    match known {
        None => {
            return Err(refusal(
                ResponseCode::ControllerBrokerNeedToBeRegistered.code(),
                format!("Broker-set: {broker_name} hasn't been registered in controller"),
            ));
        }
        Some(stored) if stored != address => {
            let outcome = ctx
                .propose(Command::RegisterBroker {
                    cluster: cluster.clone(),
                    broker_name: broker_name.clone(),
                    broker_id: id,
                    address,
                })
                .await?;
            if let Err(refused) = outcome {
                return Err(refusal(refused.code, refused.remark));
            }
        }
        Some(_) => {}
    }
    let Some(group) = ctx.read(|r| r.group(&broker_name).map(|g| g.view())) else {
        return Err(refusal(
            ResponseCode::ControllerBrokerNeedToBeRegistered.code(),
            format!("Broker-set: {broker_name} hasn't been registered in controller"),
        ));
    };
    let now = ctx.now();
    let live_master = group
        .master
        .filter(|m| ctx.liveness.is_alive(&broker_name, *m, now));
    let mut header = RegisterBrokerToControllerResponseHeader {
        cluster_name: Some(cluster),
        broker_name: Some(broker_name),
        ..Default::default()
    };
    if let Some(master) = live_master {
        header.master_broker_id = i64::try_from(master).ok();
        header.master_address = group.master_address.clone();
        header.master_epoch = Some(group.master_epoch);
        header.sync_state_set_epoch = Some(group.sync_state_set_epoch);
    }
    let body = json_body(&sync_state_set(
        &group.sync_state_set,
        group.sync_state_set_epoch,
    ))?;
    let mut response = super::success().with_body(body);
    response.encode_header(&header);
    Ok(response)
}

/// The wire form of a SyncStateSet.
pub(crate) fn sync_state_set(ids: &std::collections::BTreeSet<u64>, epoch: i32) -> SyncStateSet {
    SyncStateSet {
        sync_state_set: ids
            .iter()
            .filter_map(|id| i64::try_from(*id).ok())
            .collect(),
        sync_state_set_epoch: epoch,
    }
}

/// BROKER_HEARTBEAT, answered by every controller (each keeps its own table).
pub(crate) fn heartbeat(
    ctx: &Arc<ControllerContext>,
    channel: u64,
    request: &RemotingCommand,
) -> Result<RemotingCommand, Box<RemotingCommand>> {
    let header: BrokerHeartbeatRequestHeader = decode(request)?;
    let Some(id) = header.broker_id.and_then(|id| u64::try_from(id).ok()) else {
        return Err(refusal(
            ResponseCode::ControllerInvalidRequest.code(),
            "Heart beat with empty brokerId",
        ));
    };
    let broker_name = required_name("brokerName", header.broker_name)?;
    let timeout = header
        .heartbeat_timeout_mills
        .and_then(|ms| u64::try_from(ms).ok())
        .filter(|ms| *ms > 0)
        .map_or(DEFAULT_BROKER_HEARTBEAT_TIMEOUT, Duration::from_millis)
        .min(MAX_HEARTBEAT_TIMEOUT);
    ctx.liveness.heartbeat(
        Heartbeat {
            cluster: header.cluster_name.unwrap_or_default(),
            broker_name,
            broker_id: id,
            address: header.broker_addr.unwrap_or_default(),
            epoch: header.epoch.unwrap_or(-1),
            max_offset: header.max_offset.unwrap_or(-1),
            confirm_offset: header.confirm_offset.unwrap_or(-1),
            timeout,
            priority: header.election_priority.unwrap_or(i32::MAX),
        },
        channel,
        ctx.now(),
    );
    Ok(RemotingCommand::response(
        ResponseCode::Success,
        Some("Heart beat success".to_owned()),
    ))
}
