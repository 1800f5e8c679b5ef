//! The controller quorum on openraft: type configuration, storage, network and start-up.
//!
//! Every change of the registry ([`crate::replicas::Command`]) is a Raft log entry; a controller
//! answers a broker only after its command was committed by a majority and applied, so what a
//! broker was told survives the loss of any minority of controllers.

pub(crate) mod log_store;
pub(crate) mod network;
pub(crate) mod state_machine;

use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::Arc;
use std::time::Duration;

use comet_remoting::RemotingClient;
use openraft::error::InitializeError;
use openraft::{BasicNode, ChangeMembers, Config, RaftMetrics, SnapshotPolicy};
use redb::Database;

use crate::replicas::{Command, CommandResult};

openraft::declare_raft_types!(
    /// Types of Comet's controller quorum.
    pub TypeConfig:
        D = Command,
        R = CommandResult,
        NodeId = u64,
        Node = BasicNode,
        SnapshotData = Cursor<Vec<u8>>,
);

pub(crate) type NodeId = u64;
pub(crate) type Entry = openraft::Entry<TypeConfig>;
/// One controller's Raft instance.
pub type Raft = openraft::Raft<TypeConfig>;

/// Timing of the quorum. Heartbeats every 100 ms and an election after 0.6–1.2 s without one:
/// a dead leader is replaced within about a second and a half, while a box busy enough to delay
/// a heartbeat by half a second does not start needless elections.
pub(crate) fn raft_config(cluster_name: &str) -> Result<Config, String> {
    Config {
        cluster_name: cluster_name.to_owned(),
        heartbeat_interval: 100,
        election_timeout_min: 600,
        election_timeout_max: 1200,
        install_snapshot_timeout: 2000,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(2000),
        max_in_snapshot_log_to_keep: 500,
        ..Default::default()
    }
    .validate()
    .map_err(|e| e.to_string())
}

/// A started Raft instance and the state its processors read.
pub(crate) struct Quorum {
    pub(crate) raft: Raft,
    pub(crate) state: Arc<parking_lot::RwLock<state_machine::AppliedState>>,
}

/// Starts this controller's Raft instance over `db`, talking to the others through `client`.
pub(crate) async fn start(
    node_id: NodeId,
    group: &str,
    db: Arc<Database>,
    client: Arc<RemotingClient>,
) -> Result<Quorum, crate::ControllerError> {
    let config =
        Arc::new(raft_config(group).map_err(|e| crate::ControllerError::Raft(e.to_string()))?);
    let log = log_store::LogStore::new(Arc::clone(&db));
    let machine =
        state_machine::StateMachineStore::open(db).map_err(crate::ControllerError::Storage)?;
    let state = machine.state();
    let raft = Raft::new(node_id, config, network::Network::new(client), log, machine)
        .await
        .map_err(|e| crate::ControllerError::Raft(e.to_string()))?;
    Ok(Quorum { raft, state })
}

/// Makes `peers` the first membership of a new quorum. Every controller of a new quorum calls
/// this with the same peers: the first call to reach a node wins there, and a node that already
/// has a log (an initialized or restarted quorum) ignores it.
pub(crate) async fn initialize(
    raft: &Raft,
    peers: &BTreeMap<NodeId, String>,
) -> Result<(), crate::ControllerError> {
    let members: BTreeMap<NodeId, BasicNode> = peers
        .iter()
        .map(|(id, addr)| (*id, BasicNode::new(addr.clone())))
        .collect();
    match raft.initialize(members).await {
        Ok(()) => Ok(()),
        Err(openraft::error::RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
        Err(e) => Err(crate::ControllerError::Raft(e.to_string())),
    }
}

/// Adds `node` (a new controller at `addr`) as a voter: first as a learner that catches up,
/// then promoted. Runs on the leader.
pub async fn add_voter(raft: &Raft, node: NodeId, addr: String) -> Result<(), String> {
    raft.add_learner(node, BasicNode::new(addr), true)
        .await
        .map_err(|e| e.to_string())?;
    raft.change_membership(ChangeMembers::AddVoterIds([node].into()), false)
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Removes `node` from the voters (and from the quorum). Runs on the leader.
pub async fn remove_voter(raft: &Raft, node: NodeId) -> Result<(), String> {
    raft.change_membership(ChangeMembers::RemoveVoters([node].into()), false)
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The current leader's id and address, as this controller knows them.
pub(crate) fn leader(metrics: &RaftMetrics<NodeId, BasicNode>) -> Option<(NodeId, String)> {
    let id = metrics.current_leader?;
    let addr = metrics
        .membership_config
        .membership()
        .get_node(&id)
        .map(|n| n.addr.clone())?;
    Some((id, addr))
}

/// How long a write may wait for the quorum before the broker is told it failed.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(3);
