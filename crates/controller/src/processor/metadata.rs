//! CONTROLLER_GET_METADATA_INFO (which controller leads: brokers ask every controller and send
//! the registry's commands to the leader named), GET_CONTROLLER_CONFIG and
//! UPDATE_CONTROLLER_CONFIG. Every controller answers these, leader or not.

use std::fmt::Write as _;
use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::{CommandHeaderExt, GetMetaDataResponseHeader};

use super::{ControllerContext, refusal};
use crate::raft::leader;

pub(crate) fn metadata(ctx: &Arc<ControllerContext>) -> RemotingCommand {
    let leader = leader(&ctx.raft.metrics().borrow());
    let leader_name = leader.as_ref().and_then(|(id, _)| {
        ctx.peers
            .iter()
            .find(|p| p.node_id == *id)
            .map(|p| p.name.clone())
    });
    let mut peers = String::new();
    for peer in &ctx.peers {
        let _ = write!(peers, "{}:{};", peer.name, peer.addr);
    }
    let mut response = super::success();
    response.encode_header(&GetMetaDataResponseHeader {
        group: Some(ctx.config.group.clone()),
        controller_leader_id: leader_name,
        controller_leader_address: leader.map(|(_, addr)| addr),
        is_leader: ctx.is_leader(),
        peers: Some(peers),
    });
    response
}

/// Every setting, as sorted `key=value` lines.
pub(crate) fn config(ctx: &Arc<ControllerContext>) -> RemotingCommand {
    let c = &ctx.config;
    let mut lines = [
        format!("controllerDLegerGroup={}", c.group),
        format!("controllerDLegerPeers={}", c.peers),
        format!("controllerDLegerSelfId={}", c.self_id),
        format!("controllerStorePath={}", c.store_path.display()),
        "controllerType=DLedger".to_owned(),
        format!("enableElectUncleanMaster={}", c.elect_unclean_master),
        format!("notifyBrokerRoleChanged={}", c.notify_broker_role_changed),
        format!(
            "scanNotActiveBrokerInterval={}",
            c.scan_interval.as_millis()
        ),
    ];
    lines.sort();
    let mut body = lines.join("\n");
    body.push('\n');
    super::success().with_body(body.into_bytes())
}

/// Comet's controller reads its settings at start only; a change is refused, naming how to
/// make it.
pub(crate) fn update_config() -> RemotingCommand {
    *refusal(
        ResponseCode::NoPermission.code(),
        "the controller's settings are read at start: change controller.conf and restart it",
    )
}
