//! CLEAN_BROKER_DATA: an operator removes brokers (or a whole group) the registry should
//! forget. Living brokers are kept unless the request says to clean them too.

use std::collections::BTreeSet;
use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::CleanControllerBrokerDataRequestHeader;

use super::{ControllerContext, decode, refusal, required_name};
use crate::replicas::Command;

pub(crate) async fn clean_broker_data(
    ctx: &Arc<ControllerContext>,
    request: &RemotingCommand,
) -> Result<RemotingCommand, Box<RemotingCommand>> {
    let header: CleanControllerBrokerDataRequestHeader = decode(request)?;
    let broker_name = required_name("brokerName", header.broker_name)?;
    let mut broker_ids = BTreeSet::new();
    for part in header
        .broker_controller_ids_to_clean
        .as_deref()
        .unwrap_or_default()
        .split(';')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let id = part.parse::<u64>().map_err(|_| {
            refusal(
                ResponseCode::ControllerInvalidCleanBrokerMetadata.code(),
                format!("broker id {part:?} is not a number"),
            )
        })?;
        broker_ids.insert(id);
    }
    let alive = ctx.liveness.alive_ids(&broker_name, ctx.now());
    let outcome = ctx
        .propose(Command::CleanBrokerData {
            broker_name,
            broker_ids,
            clean_living: header.is_clean_living_broker.unwrap_or(false),
            alive,
        })
        .await?;
    match outcome {
        Ok(_) => Ok(super::success()),
        Err(refused) => Err(refusal(refused.code, refused.remark)),
    }
}
