//! The quorum's own messages (openraft's append-entries, vote and install-snapshot), as the
//! peers' [`crate::raft::network`] sends them: JSON in, `Result` JSON out.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{ControllerContext, system_error};

fn parse<T: DeserializeOwned>(request: &RemotingCommand) -> Result<T, Box<RemotingCommand>> {
    let body = request.body_bytes().unwrap_or_default();
    serde_json::from_slice(&body)
        .map_err(|e| system_error(format!("raft message does not parse: {e}")))
}

fn answer<T: Serialize, E: Serialize>(
    result: &Result<T, E>,
) -> Result<RemotingCommand, Box<RemotingCommand>> {
    let body = serde_json::to_vec(result).map_err(|e| system_error(format!("raft answer: {e}")))?;
    Ok(super::success().with_body(body))
}

pub(crate) async fn append(
    ctx: &Arc<ControllerContext>,
    request: &RemotingCommand,
) -> Result<RemotingCommand, Box<RemotingCommand>> {
    let rpc = parse(request)?;
    answer(&ctx.raft.append_entries(rpc).await)
}

pub(crate) async fn vote(
    ctx: &Arc<ControllerContext>,
    request: &RemotingCommand,
) -> Result<RemotingCommand, Box<RemotingCommand>> {
    let rpc = parse(request)?;
    answer(&ctx.raft.vote(rpc).await)
}

pub(crate) async fn snapshot(
    ctx: &Arc<ControllerContext>,
    request: &RemotingCommand,
) -> Result<RemotingCommand, Box<RemotingCommand>> {
    let rpc = parse(request)?;
    answer(&ctx.raft.install_snapshot(rpc).await)
}
