//! CONTROLLER_GET_NEXT_BROKER_ID and CONTROLLER_APPLY_BROKER_ID: how a new broker gets its id.
//! It asks for the next free id, saves it locally with a check code, then applies for it; a
//! broker that retries with the same check code keeps the id.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::{
    ApplyBrokerIdRequestHeader, ApplyBrokerIdResponseHeader, GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader, response_with_header,
};

use super::{ControllerContext, broker_id as id_of, decode, refusal, required_name};
use crate::replicas::Command;

pub(crate) async fn next_broker_id(
    ctx: &Arc<ControllerContext>,
    request: &RemotingCommand,
) -> Result<RemotingCommand, Box<RemotingCommand>> {
    let header: GetNextBrokerIdRequestHeader = decode(request)?;
    let broker_name = required_name("brokerName", header.broker_name)?;
    ctx.lead_read().await?;
    let next = ctx.read(|r| r.next_broker_id(&broker_name));
    let next = i64::try_from(next).map_err(|_| super::system_error("broker id overflow"))?;
    Ok(response_with_header(
        ResponseCode::Success,
        &GetNextBrokerIdResponseHeader {
            cluster_name: header.cluster_name,
            broker_name: Some(broker_name),
            next_broker_id: next,
        },
    ))
}

pub(crate) async fn apply_broker_id(
    ctx: &Arc<ControllerContext>,
    request: &RemotingCommand,
) -> Result<RemotingCommand, Box<RemotingCommand>> {
    let header: ApplyBrokerIdRequestHeader = decode(request)?;
    let cluster = required_name("clusterName", header.cluster_name)?;
    let broker_name = required_name("brokerName", header.broker_name)?;
    let broker_id = id_of("appliedBrokerId", header.applied_broker_id)?;
    let check_code = required_name("registerCheckCode", header.register_check_code)?;
    // The check code is `address;timestamp`: the broker's address is what precedes the `;`.
    let address = check_code
        .split_once(';')
        .map_or(check_code.as_str(), |(addr, _)| addr)
        .to_owned();
    let echo = ApplyBrokerIdResponseHeader {
        cluster_name: Some(cluster.clone()),
        broker_name: Some(broker_name.clone()),
    };
    let outcome = ctx
        .propose(Command::ApplyBrokerId {
            cluster,
            broker_name,
            broker_id,
            address,
            register_check_code: check_code,
        })
        .await?;
    match outcome {
        Ok(_) => Ok(response_with_header(ResponseCode::Success, &echo)),
        Err(refused) => {
            let mut response = refusal(refused.code, refused.remark);
            comet_protocol::headers::CommandHeaderExt::encode_header(&mut *response, &echo);
            Err(response)
        }
    }
}
