//! CONTROLLER_ELECT_MASTER, the elections the controller runs by itself when a master dies,
//! and the NOTIFY_BROKER_ROLE_CHANGED that tells a group's brokers of a new master.

use std::sync::Arc;
use std::time::Duration;

use comet_protocol::RemotingCommand;
use comet_protocol::body::controller::{BrokerMemberGroup, ElectMasterResponseBody};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CommandHeaderExt, ElectMasterRequestHeader, ElectMasterResponseHeader,
    NotifyBrokerRoleChangedRequestHeader, request_with_header,
};

use super::register::sync_state_set;
use super::{ControllerContext, decode, json_body, refusal, required_name};
use crate::replicas::{Command, GroupView, Reply};

/// How many times the controller tries to elect a master for a group whose master died.
const CONTROLLER_ELECT_ATTEMPTS: usize = 3;
/// Pause between two of those tries.
const CONTROLLER_ELECT_RETRY: Duration = Duration::from_millis(500);
/// How long a role-change notice may wait to be handed to a broker's connection.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(3);

fn ids(view: &GroupView) -> std::collections::BTreeSet<i64> {
    view.sync_state_set
        .iter()
        .filter_map(|id| i64::try_from(*id).ok())
        .collect()
}

fn master_header(view: &GroupView) -> ElectMasterResponseHeader {
    ElectMasterResponseHeader {
        master_broker_id: view.master.and_then(|m| i64::try_from(m).ok()),
        master_address: view.master_address.clone(),
        master_epoch: Some(view.master_epoch),
        sync_state_set_epoch: Some(view.sync_state_set_epoch),
    }
}

/// Runs one election through the quorum. `requester` is the asking broker (`None`: the
/// controller's own election).
async fn run_election(
    ctx: &Arc<ControllerContext>,
    broker_name: &str,
    requester: Option<u64>,
    designated: bool,
) -> Result<crate::replicas::CommandResult, Box<RemotingCommand>> {
    let alive = ctx.liveness.candidates(broker_name, ctx.now());
    ctx.propose(Command::ElectMaster {
        broker_name: broker_name.to_owned(),
        requester,
        designated,
        alive,
        allow_unclean: ctx.config.elect_unclean_master,
    })
    .await
}

pub(crate) async fn elect_master(
    ctx: &Arc<ControllerContext>,
    request: &RemotingCommand,
) -> Result<RemotingCommand, Box<RemotingCommand>> {
    let header: ElectMasterRequestHeader = decode(request)?;
    let broker_name = required_name("brokerName", header.broker_name)?;
    // -1 (or nothing) is the controller's own kind of election.
    let requester = header.broker_id.and_then(|id| u64::try_from(id).ok());
    let designated = header.designate_elect.unwrap_or(false);
    match run_election(ctx, &broker_name, requester, designated).await? {
        Ok(Reply::Group(view)) => {
            notify_role_changed(ctx, &view);
            let body = ElectMasterResponseBody {
                broker_member_group: Some(member_group(&view)),
                sync_state_set: ids(&view),
            };
            let mut response = super::success().with_body(json_body(&body)?);
            response.encode_header(&master_header(&view));
            Ok(response)
        }
        Ok(Reply::Done) => Err(super::system_error("election gave no group")),
        Err(refused) => {
            let mut response = refusal(refused.code, refused.remark);
            if let Some(view) = refused
                .group
                .filter(|_| refused.code == ResponseCode::ControllerMasterStillExist.code())
            {
                response.encode_header(&master_header(&view));
                let body = ElectMasterResponseBody {
                    broker_member_group: None,
                    sync_state_set: ids(&view),
                };
                response.body = Some(json_body(&body)?.into());
            }
            Err(response)
        }
    }
}

fn member_group(view: &GroupView) -> BrokerMemberGroup {
    BrokerMemberGroup {
        cluster: view.cluster.clone(),
        broker_name: view.broker_name.clone(),
        broker_addrs: view
            .addresses
            .iter()
            .filter_map(|(id, addr)| Some((i64::try_from(*id).ok()?, addr.clone())))
            .collect(),
    }
}

/// The controller's own election for `broker_name`, whose master is gone: a few tries, each
/// with the liveness known at that moment. Runs on the leader only.
pub(crate) async fn elect_for_dead_master(ctx: &Arc<ControllerContext>, broker_name: &str) {
    for attempt in 1..=CONTROLLER_ELECT_ATTEMPTS {
        if !ctx.is_leader() {
            return;
        }
        match run_election(ctx, broker_name, None, false).await {
            Ok(Ok(Reply::Group(view))) => {
                tracing::info!(
                    broker = %broker_name,
                    master = ?view.master,
                    epoch = view.master_epoch,
                    "elected a new master"
                );
                notify_role_changed(ctx, &view);
                return;
            }
            Ok(Err(refused)) if refused.code == ResponseCode::ControllerMasterStillExist.code() => {
                return;
            }
            Ok(other) => {
                tracing::warn!(broker = %broker_name, attempt, outcome = ?other, "no master elected");
            }
            Err(response) => {
                tracing::warn!(
                    broker = %broker_name,
                    attempt,
                    code = response.code,
                    remark = ?response.remark,
                    "election not committed"
                );
            }
        }
        tokio::time::sleep(CONTROLLER_ELECT_RETRY).await;
    }
}

/// Sends NOTIFY_BROKER_ROLE_CHANGED, oneway, to every living broker of the group.
pub(crate) fn notify_role_changed(ctx: &Arc<ControllerContext>, view: &GroupView) {
    if !ctx.config.notify_broker_role_changed {
        return;
    }
    let header = NotifyBrokerRoleChangedRequestHeader {
        master_address: view.master_address.clone(),
        master_epoch: Some(view.master_epoch),
        sync_state_set_epoch: Some(view.sync_state_set_epoch),
        master_broker_id: view.master.and_then(|m| i64::try_from(m).ok()),
    };
    let body = match json_body(&sync_state_set(
        &view.sync_state_set,
        view.sync_state_set_epoch,
    )) {
        Ok(body) => body,
        Err(_) => return,
    };
    let now = ctx.now();
    for (id, address) in &view.addresses {
        if !ctx.liveness.is_alive(&view.broker_name, *id, now) {
            continue;
        }
        let request = request_with_header(RequestCode::NotifyBrokerRoleChanged, &header)
            .with_body(body.clone());
        let client = Arc::clone(&ctx.client);
        let address = address.clone();
        tokio::spawn(async move {
            let sent =
                tokio::time::timeout(NOTIFY_TIMEOUT, client.invoke_oneway(&address, request)).await;
            if !matches!(sent, Ok(Ok(()))) {
                tracing::warn!(broker = %address, "role change notice not delivered");
            }
        });
    }
}
