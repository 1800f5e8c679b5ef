//! openraft's messages between controllers, carried as remoting commands on the controller's
//! one port (the port brokers talk to as well).
//!
//! Each Raft RPC is a request with one of Comet's own codes ([`RequestCode::CometRaftAppend`],
//! [`RequestCode::CometRaftVote`], [`RequestCode::CometRaftSnapshot`]) whose body is the JSON of
//! openraft's request; the answer is SUCCESS with the JSON of `Result<response, RaftError>` as
//! its body. A refused connection is reported to openraft as `Unreachable` (it backs off), any
//! other transport failure as a network error (it retries on its next heartbeat).

use std::sync::Arc;
use std::time::Duration;

use comet_protocol::RemotingCommand;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_remoting::{RemotingClient, RemotingError};
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{AnyError, BasicNode};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{NodeId, TypeConfig};

/// Longest a Raft RPC may wait when openraft gives no deadline of its own.
const DEFAULT_RPC_TIMEOUT: Duration = Duration::from_secs(2);

/// Opens [`PeerLink`]s over one shared remoting client.
#[derive(Clone)]
pub(crate) struct Network {
    client: Arc<RemotingClient>,
}

impl Network {
    pub(crate) fn new(client: Arc<RemotingClient>) -> Self {
        Network { client }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerLink;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerLink {
        PeerLink {
            client: Arc::clone(&self.client),
            target,
            addr: node.addr.clone(),
        }
    }
}

/// The way to one other controller.
pub(crate) struct PeerLink {
    client: Arc<RemotingClient>,
    target: NodeId,
    addr: String,
}

type RpcResult<T, E> = Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl PeerLink {
    async fn call<Req, Resp, E>(
        &self,
        code: RequestCode,
        request: &Req,
        option: &RPCOption,
    ) -> RpcResult<Resp, E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let body =
            serde_json::to_vec(request).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let timeout = match option.hard_ttl() {
            ttl if ttl.is_zero() => DEFAULT_RPC_TIMEOUT,
            ttl => ttl,
        };
        let command = RemotingCommand::request(code).with_body(body);
        let response = self
            .client
            .invoke(&self.addr, command, timeout)
            .await
            .map_err(transport_error)?;
        if response.code != ResponseCode::Success.code() {
            let remark = response.remark.unwrap_or_default();
            return Err(RPCError::Network(NetworkError::new(&AnyError::error(
                format!(
                    "controller {} answered code {}: {remark}",
                    self.addr, response.code
                ),
            ))));
        }
        let bytes = response.body_bytes().unwrap_or_default();
        let outcome: Result<Resp, RaftError<NodeId, E>> =
            serde_json::from_slice(&bytes).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        outcome.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

fn transport_error<E: std::error::Error>(
    e: RemotingError,
) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
    match e {
        RemotingError::ConnectFailed { .. } => RPCError::Unreachable(Unreachable::new(&e)),
        other => RPCError::Network(NetworkError::new(&other)),
    }
}

impl RaftNetwork<TypeConfig> for PeerLink {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, openraft::error::Infallible> {
        self.call(RequestCode::CometRaftAppend, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        self.call(RequestCode::CometRaftSnapshot, &rpc, &option)
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, openraft::error::Infallible> {
        self.call(RequestCode::CometRaftVote, &rpc, &option).await
    }
}
