//! GET_BROKER_CLUSTER_INFO: the cluster layout (`mqadmin clusterList`, and clients looking for
//! a broker of a cluster). The body is always fastjson's legacy form with bare broker-id keys,
//! as the Java name server writes it.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_remoting::{Channel, RequestProcessor};
use futures::future::BoxFuture;

use super::{NamesrvContext, Reply, failure, not_supported, respond, success};

pub(crate) const CODES: &[RequestCode] = &[RequestCode::GetBrokerClusterInfo];

pub(crate) struct ClusterProcessor {
    ctx: Arc<NamesrvContext>,
}

impl ClusterProcessor {
    pub(crate) fn new(ctx: &Arc<NamesrvContext>) -> Self {
        Self {
            ctx: Arc::clone(ctx),
        }
    }
}

impl RequestProcessor for ClusterProcessor {
    fn process(
        &self,
        _channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        respond(match RequestCode::from(request.code) {
            RequestCode::GetBrokerClusterInfo => cluster_info(&self.ctx),
            _ => Err(not_supported(request.code)),
        })
    }
}

fn cluster_info(ctx: &NamesrvContext) -> Reply {
    let body = ctx.route.cluster_info().encode().map_err(|e| {
        failure(
            ResponseCode::SystemError,
            format!("encoding the cluster info failed: {e}"),
        )
    })?;
    Ok(success().with_body(body))
}
