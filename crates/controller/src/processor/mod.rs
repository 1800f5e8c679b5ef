//! Request processors, one small module per command family:
//!
//! | module | commands |
//! |---|---|
//! | [`broker_id`] | CONTROLLER_GET_NEXT_BROKER_ID, CONTROLLER_APPLY_BROKER_ID |
//! | [`register`] | CONTROLLER_REGISTER_BROKER, BROKER_HEARTBEAT |
//! | [`elect`] | CONTROLLER_ELECT_MASTER, and the elections the controller runs by itself |
//! | [`sync_state`] | CONTROLLER_ALTER_SYNC_STATE_SET, CONTROLLER_GET_REPLICA_INFO, CONTROLLER_GET_SYNC_STATE_DATA |
//! | [`metadata`] | CONTROLLER_GET_METADATA_INFO, GET/UPDATE_CONTROLLER_CONFIG |
//! | [`clean`] | CLEAN_BROKER_DATA |
//! | [`raft`] | the quorum's own Raft messages |
//!
//! Only the Raft leader answers the registry's commands, reads included; any other controller
//! answers CONTROLLER_NOT_LEADER, and brokers find the leader with CONTROLLER_GET_METADATA_INFO.
//! A write is answered after the quorum committed and applied it.

pub(crate) mod broker_id;
pub(crate) mod clean;
pub(crate) mod elect;
pub(crate) mod metadata;
pub(crate) mod raft;
pub(crate) mod register;
pub(crate) mod sync_state;

use std::sync::Arc;
use std::time::Instant;

use comet_protocol::RemotingCommand;
use comet_protocol::body::to_fastjson_bytes;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{CommandHeader, CommandHeaderExt};
use comet_remoting::{Channel, RemotingClient, RemotingServer, RequestProcessor};
use futures::FutureExt;
use futures::future::BoxFuture;
use openraft::error::{ClientWriteError, RaftError};
use parking_lot::RwLock;
use serde::Serialize;

use crate::config::{ControllerConfig, Peer};
use crate::liveness::Liveness;
use crate::raft::state_machine::AppliedState;
use crate::raft::{NodeId, Raft, WRITE_TIMEOUT};
use crate::replicas::{Command, CommandResult, Replicas};

/// What every processor works on.
pub(crate) struct ControllerContext {
    pub(crate) config: ControllerConfig,
    pub(crate) node_id: NodeId,
    pub(crate) peers: Vec<Peer>,
    pub(crate) raft: Raft,
    pub(crate) state: Arc<RwLock<AppliedState>>,
    pub(crate) liveness: Liveness,
    /// Sends NOTIFY_BROKER_ROLE_CHANGED to brokers.
    pub(crate) client: Arc<RemotingClient>,
}

/// The remark Apache's controller answers CONTROLLER_NOT_LEADER with.
pub(crate) const NOT_LEADER_REMARK: &str = "The controller is not in leader state";

impl ControllerContext {
    /// Runs `f` over the registry as applied here.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Replicas) -> T) -> T {
        f(&self.state.read().replicas)
    }

    /// Succeeds when this controller is the leader and has applied everything committed before
    /// now, so a read of the registry is current.
    pub(crate) async fn lead_read(&self) -> Result<(), Box<RemotingCommand>> {
        match tokio::time::timeout(WRITE_TIMEOUT, self.raft.ensure_linearizable()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(RaftError::APIError(_))) => Err(not_leader()),
            Ok(Err(e)) => Err(system_error(format!("controller quorum: {e}"))),
            Err(_) => Err(system_error("controller quorum did not answer in time")),
        }
    }

    /// Commits `command` through the quorum and returns what applying it gave.
    pub(crate) async fn propose(
        &self,
        command: Command,
    ) -> Result<CommandResult, Box<RemotingCommand>> {
        match tokio::time::timeout(WRITE_TIMEOUT, self.raft.client_write(command)).await {
            Ok(Ok(written)) => Ok(written.data),
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => Err(not_leader()),
            Ok(Err(e)) => Err(system_error(format!("controller quorum: {e}"))),
            Err(_) => Err(system_error("controller quorum did not commit in time")),
        }
    }

    /// Whether this controller is the quorum's leader now (cheap; for background work).
    pub(crate) fn is_leader(&self) -> bool {
        self.raft.metrics().borrow().current_leader == Some(self.node_id)
    }

    pub(crate) fn now(&self) -> Instant {
        Instant::now()
    }
}

pub(crate) fn not_leader() -> Box<RemotingCommand> {
    boxed(
        ResponseCode::ControllerNotLeader,
        Some(NOT_LEADER_REMARK.to_owned()),
    )
}

pub(crate) fn system_error(remark: impl Into<String>) -> Box<RemotingCommand> {
    boxed(ResponseCode::SystemError, Some(remark.into()))
}

pub(crate) fn refusal(code: i32, remark: impl Into<String>) -> Box<RemotingCommand> {
    boxed(code, Some(remark.into()))
}

/// An error answer. Boxed: answers are large and most calls succeed.
fn boxed(code: impl Into<i32>, remark: Option<String>) -> Box<RemotingCommand> {
    Box::new(RemotingCommand::response(code, remark))
}

pub(crate) fn success() -> RemotingCommand {
    RemotingCommand::response(ResponseCode::Success, None)
}

/// `value` as a fastjson body.
pub(crate) fn json_body<T: Serialize>(value: &T) -> Result<Vec<u8>, Box<RemotingCommand>> {
    to_fastjson_bytes(value).map_err(|e| system_error(format!("encoding the body failed: {e}")))
}

/// Decodes the request header; a malformed field becomes SYSTEM_ERROR naming it.
pub(crate) fn decode<H: CommandHeader>(
    request: &RemotingCommand,
) -> Result<H, Box<RemotingCommand>> {
    request
        .decode_header::<H>()
        .map_err(|e| system_error(format!("{}: {e}", RequestCode::from(request.code).name())))
}

/// A required name (broker or cluster) that is present and not blank.
pub(crate) fn required_name(
    field: &'static str,
    value: Option<String>,
) -> Result<String, Box<RemotingCommand>> {
    match value {
        Some(v) if !v.trim().is_empty() => Ok(v),
        _ => Err(refusal(
            ResponseCode::ControllerInvalidRequest.code(),
            format!("header field `{field}` must not be empty"),
        )),
    }
}

/// A broker id from a header: present and not negative.
pub(crate) fn broker_id(
    field: &'static str,
    value: Option<i64>,
) -> Result<u64, Box<RemotingCommand>> {
    value.and_then(|v| u64::try_from(v).ok()).ok_or_else(|| {
        refusal(
            ResponseCode::ControllerInvalidRequest.code(),
            format!("header field `{field}` must be a broker id"),
        )
    })
}

/// Every request code this controller answers.
const CODES: &[RequestCode] = &[
    RequestCode::ControllerGetNextBrokerId,
    RequestCode::ControllerApplyBrokerId,
    RequestCode::ControllerRegisterBroker,
    RequestCode::BrokerHeartbeat,
    RequestCode::ControllerElectMaster,
    RequestCode::ControllerAlterSyncStateSet,
    RequestCode::ControllerGetReplicaInfo,
    RequestCode::ControllerGetSyncStateData,
    RequestCode::ControllerGetMetadataInfo,
    RequestCode::GetControllerConfig,
    RequestCode::UpdateControllerConfig,
    RequestCode::CleanBrokerData,
    RequestCode::CometRaftAppend,
    RequestCode::CometRaftVote,
    RequestCode::CometRaftSnapshot,
];

/// Answers every controller request code.
pub(crate) struct ControllerProcessor {
    ctx: Arc<ControllerContext>,
}

/// Registers the controller's processor on `server`.
pub(crate) fn register_processors(server: &RemotingServer, ctx: &Arc<ControllerContext>) {
    let processor: Arc<dyn RequestProcessor> = Arc::new(ControllerProcessor {
        ctx: Arc::clone(ctx),
    });
    for code in CODES {
        server.register(code.code(), Arc::clone(&processor));
    }
}

impl RequestProcessor for ControllerProcessor {
    fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let ctx = Arc::clone(&self.ctx);
        let channel_id = channel.id();
        async move {
            let answer = dispatch(&ctx, channel_id, request).await;
            Some(answer.unwrap_or_else(|refused| *refused))
        }
        .boxed()
    }
}

async fn dispatch(
    ctx: &Arc<ControllerContext>,
    channel: u64,
    request: RemotingCommand,
) -> Result<RemotingCommand, Box<RemotingCommand>> {
    match RequestCode::from(request.code) {
        RequestCode::ControllerGetNextBrokerId => broker_id::next_broker_id(ctx, &request).await,
        RequestCode::ControllerApplyBrokerId => broker_id::apply_broker_id(ctx, &request).await,
        RequestCode::ControllerRegisterBroker => register::register_broker(ctx, &request).await,
        RequestCode::BrokerHeartbeat => register::heartbeat(ctx, channel, &request),
        RequestCode::ControllerElectMaster => elect::elect_master(ctx, &request).await,
        RequestCode::ControllerAlterSyncStateSet => sync_state::alter(ctx, &request).await,
        RequestCode::ControllerGetReplicaInfo => sync_state::replica_info(ctx, &request).await,
        RequestCode::ControllerGetSyncStateData => sync_state::sync_state_data(ctx, &request).await,
        RequestCode::ControllerGetMetadataInfo => Ok(metadata::metadata(ctx)),
        RequestCode::GetControllerConfig => Ok(metadata::config(ctx)),
        RequestCode::UpdateControllerConfig => Ok(metadata::update_config()),
        RequestCode::CleanBrokerData => clean::clean_broker_data(ctx, &request).await,
        RequestCode::CometRaftAppend => raft::append(ctx, &request).await,
        RequestCode::CometRaftVote => raft::vote(ctx, &request).await,
        RequestCode::CometRaftSnapshot => raft::snapshot(ctx, &request).await,
        _ => Err(refusal(
            ResponseCode::RequestCodeNotSupported.code(),
            format!(" request type {} not supported", request.code),
        )),
    }
}
