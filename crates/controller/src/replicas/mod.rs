//! The registry the controller quorum replicates: for every broker group (one `brokerName`),
//! the ids it handed out with their addresses, the master, the master epoch and the
//! SyncStateSet with its epoch.
//!
//! [`Replicas::apply`] is the only way it changes, one [`Command`] at a time, in log order, on
//! every controller; it is deterministic (no clock, no liveness lookups — the leader puts what
//! it knows of the brokers' liveness into the command), so every controller computes the same
//! state and the same answer. A command that fails its checks changes nothing and answers a
//! [`Refusal`] with Apache's response code.

mod elect;

use std::collections::{BTreeMap, BTreeSet};

use comet_protocol::code::ResponseCode;
use serde::{Deserialize, Serialize};

pub use elect::{Candidate, elect};

/// Broker ids start here: id 0 means "master" in routes, so a controller never assigns it.
pub const FIRST_BROKER_ID: u64 = 1;

/// One registered replica of a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replica {
    /// `ip:port` of its main listener.
    pub address: String,
    /// What the broker sent when it applied for its id (`address;timestamp`): a broker that
    /// restarts with the same code gets the same id back.
    pub register_check_code: String,
}

/// What the quorum knows of one broker group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerGroup {
    pub cluster: String,
    pub broker_name: String,
    pub replicas: BTreeMap<u64, Replica>,
    pub master: Option<u64>,
    pub master_epoch: i32,
    pub sync_state_set: BTreeSet<u64>,
    pub sync_state_set_epoch: i32,
    /// The id the next broker is given: one more for every id handed out, never lowered (a
    /// cleaned id is not reused).
    pub next_broker_id: u64,
}

impl BrokerGroup {
    fn new(cluster: &str, broker_name: &str) -> Self {
        BrokerGroup {
            cluster: cluster.to_owned(),
            broker_name: broker_name.to_owned(),
            next_broker_id: FIRST_BROKER_ID,
            replicas: BTreeMap::new(),
            master: None,
            master_epoch: 0,
            sync_state_set: BTreeSet::new(),
            sync_state_set_epoch: 0,
        }
    }

    /// The master's address, if there is a master.
    pub fn master_address(&self) -> Option<&str> {
        let id = self.master?;
        self.replicas.get(&id).map(|r| r.address.as_str())
    }

    /// The group as the answers to brokers describe it.
    pub fn view(&self) -> GroupView {
        GroupView {
            cluster: self.cluster.clone(),
            broker_name: self.broker_name.clone(),
            master: self.master,
            master_address: self.master_address().map(str::to_owned),
            master_epoch: self.master_epoch,
            sync_state_set: self.sync_state_set.clone(),
            sync_state_set_epoch: self.sync_state_set_epoch,
            addresses: self
                .replicas
                .iter()
                .map(|(id, r)| (*id, r.address.clone()))
                .collect(),
        }
    }
}

/// A group's master and SyncStateSet as of one moment, for an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupView {
    pub cluster: String,
    pub broker_name: String,
    pub master: Option<u64>,
    pub master_address: Option<String>,
    pub master_epoch: i32,
    pub sync_state_set: BTreeSet<u64>,
    pub sync_state_set_epoch: i32,
    pub addresses: BTreeMap<u64, String>,
}

/// A change of the registry, as proposed by the leader controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// A broker takes `broker_id` in its group (CONTROLLER_APPLY_BROKER_ID).
    ApplyBrokerId {
        cluster: String,
        broker_name: String,
        broker_id: u64,
        address: String,
        register_check_code: String,
    },
    /// A registered broker reports its address (CONTROLLER_REGISTER_BROKER); a changed address
    /// is recorded.
    RegisterBroker {
        cluster: String,
        broker_name: String,
        broker_id: u64,
        address: String,
    },
    /// Elect a master for the group among `alive` (CONTROLLER_ELECT_MASTER, or the controller
    /// itself after the master died). `requester` is the broker asking (`None` when the
    /// controller elects by itself); with `designated` it is the operator's choice
    /// (electMaster). A group's first election makes the requester master.
    ElectMaster {
        broker_name: String,
        requester: Option<u64>,
        designated: bool,
        alive: Vec<Candidate>,
        allow_unclean: bool,
    },
    /// The master replaces the SyncStateSet (CONTROLLER_ALTER_SYNC_STATE_SET).
    AlterSyncStateSet {
        broker_name: String,
        master: u64,
        master_epoch: i32,
        sync_state_set_epoch: i32,
        new_set: BTreeSet<u64>,
        alive: BTreeSet<u64>,
    },
    /// Forget brokers of a group (CLEAN_BROKER_DATA): `broker_ids` or, when empty, the whole
    /// group. Living brokers are kept unless `clean_living`.
    CleanBrokerData {
        broker_name: String,
        broker_ids: BTreeSet<u64>,
        clean_living: bool,
        alive: BTreeSet<u64>,
    },
}

/// A command's successful outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// Nothing to report beyond success.
    Done,
    /// The group after the command.
    Group(GroupView),
}

/// A command refused, with the response code a broker is answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub code: i32,
    pub remark: String,
    /// The group as it stands, when the answer carries it (MASTER_STILL_EXIST does).
    pub group: Option<Box<GroupView>>,
}

impl Refusal {
    fn new(code: ResponseCode, remark: impl Into<String>) -> Self {
        Refusal {
            code: code.code(),
            remark: remark.into(),
            group: None,
        }
    }
}

/// What applying a command gives.
pub type CommandResult = Result<Reply, Refusal>;

/// The registry: every broker group by `brokerName`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replicas {
    groups: BTreeMap<String, BrokerGroup>,
}

impl Replicas {
    /// One group, if any broker of it ever applied for an id.
    pub fn group(&self, broker_name: &str) -> Option<&BrokerGroup> {
        self.groups.get(broker_name)
    }

    /// Every group, by name.
    pub fn groups(&self) -> impl Iterator<Item = &BrokerGroup> {
        self.groups.values()
    }

    /// The id a broker of `broker_name` should apply for next.
    pub fn next_broker_id(&self, broker_name: &str) -> u64 {
        self.groups
            .get(broker_name)
            .map_or(FIRST_BROKER_ID, |g| g.next_broker_id)
    }

    /// Applies one committed command.
    pub fn apply(&mut self, command: Command) -> CommandResult {
        match command {
            Command::ApplyBrokerId {
                cluster,
                broker_name,
                broker_id,
                address,
                register_check_code,
            } => self.apply_broker_id(
                &cluster,
                &broker_name,
                broker_id,
                address,
                register_check_code,
            ),
            Command::RegisterBroker {
                cluster,
                broker_name,
                broker_id,
                address,
            } => self.register_broker(&cluster, &broker_name, broker_id, address),
            Command::ElectMaster {
                broker_name,
                requester,
                designated,
                alive,
                allow_unclean,
            } => {
                let request = Election {
                    requester,
                    designated,
                    alive,
                    allow_unclean,
                };
                self.elect_master(&broker_name, &request)
            }
            Command::AlterSyncStateSet {
                broker_name,
                master,
                master_epoch,
                sync_state_set_epoch,
                new_set,
                alive,
            } => self.alter_sync_state_set(
                &broker_name,
                master,
                master_epoch,
                sync_state_set_epoch,
                new_set,
                &alive,
            ),
            Command::CleanBrokerData {
                broker_name,
                broker_ids,
                clean_living,
                alive,
            } => self.clean_broker_data(&broker_name, &broker_ids, clean_living, &alive),
        }
    }

    fn apply_broker_id(
        &mut self,
        cluster: &str,
        broker_name: &str,
        broker_id: u64,
        address: String,
        register_check_code: String,
    ) -> CommandResult {
        let Some(group) = self.groups.get_mut(broker_name) else {
            if broker_id != FIRST_BROKER_ID {
                return Err(Refusal::new(
                    ResponseCode::ControllerBrokerIdInvalid,
                    format!(
                        "broker group {broker_name} is new: its first broker takes id {FIRST_BROKER_ID}, not {broker_id}"
                    ),
                ));
            }
            let mut group = BrokerGroup::new(cluster, broker_name);
            group.add_replica(broker_id, address, register_check_code);
            self.groups.insert(broker_name.to_owned(), group);
            return Ok(Reply::Done);
        };
        match group.replicas.get(&broker_id) {
            // A broker re-applying with its own code (a retry) keeps the id.
            Some(existing) if existing.register_check_code == register_check_code => {
                Ok(Reply::Done)
            }
            Some(existing) => Err(Refusal::new(
                ResponseCode::ControllerBrokerIdInvalid,
                format!(
                    "broker id {broker_id} of {broker_name} is taken by {}",
                    existing.address
                ),
            )),
            None => {
                group.add_replica(broker_id, address, register_check_code);
                Ok(Reply::Done)
            }
        }
    }

    fn register_broker(
        &mut self,
        cluster: &str,
        broker_name: &str,
        broker_id: u64,
        address: String,
    ) -> CommandResult {
        let replica = self
            .groups
            .get_mut(broker_name)
            .and_then(|g| g.replicas.get_mut(&broker_id));
        let Some(replica) = replica else {
            return Err(Refusal::new(
                ResponseCode::ControllerBrokerNeedToBeRegistered,
                format!(
                    "broker {broker_id} of {broker_name} ({cluster}) hasn't been registered in the controller"
                ),
            ));
        };
        replica.address = address;
        Ok(Reply::Done)
    }

    fn elect_master(&mut self, broker_name: &str, request: &Election) -> CommandResult {
        let Some(group) = self.groups.get_mut(broker_name) else {
            return Err(Refusal::new(
                ResponseCode::ControllerBrokerNeedToBeRegistered,
                format!("broker group {broker_name} hasn't been registered"),
            ));
        };
        let chosen = if group.master_epoch == 0 && request.requester.is_some() {
            // A group's first election: the broker asking becomes master.
            request.requester
        } else {
            let prefer = request.requester.filter(|_| request.designated);
            elect(group, prefer, &request.alive, request.allow_unclean)
        };
        match chosen {
            Some(id) if Some(id) == group.master => {
                let mut refusal = Refusal::new(
                    ResponseCode::ControllerMasterStillExist,
                    format!("broker {id} of {broker_name} is still its master"),
                );
                refusal.group = Some(Box::new(group.view()));
                Err(refusal)
            }
            Some(id) => {
                group.master = Some(id);
                group.master_epoch += 1;
                group.sync_state_set = BTreeSet::from([id]);
                group.sync_state_set_epoch += 1;
                Ok(Reply::Group(group.view()))
            }
            None if request.requester.is_none() => {
                // The controller found the master dead and nobody may take over: the group has
                // no master, at a new epoch, until a replica can be elected. A group already
                // without a master keeps its epoch, so retries do not churn it.
                if group.master.take().is_some() {
                    group.master_epoch += 1;
                }
                Err(Refusal::new(
                    ResponseCode::ControllerMasterNotAvailable,
                    format!("no replica of {broker_name} can be elected master"),
                ))
            }
            None => Err(Refusal::new(
                ResponseCode::ControllerElectMasterFailed,
                format!("no replica of {broker_name} can be elected master"),
            )),
        }
    }

    fn alter_sync_state_set(
        &mut self,
        broker_name: &str,
        master: u64,
        master_epoch: i32,
        sync_state_set_epoch: i32,
        new_set: BTreeSet<u64>,
        alive: &BTreeSet<u64>,
    ) -> CommandResult {
        let failed = |remark: String| {
            Err(Refusal::new(
                ResponseCode::ControllerAlterSyncStateSetFailed,
                remark,
            ))
        };
        let Some(group) = self.groups.get_mut(broker_name) else {
            return failed(format!(
                "broker group {broker_name} is unknown to the controller"
            ));
        };
        if new_set == group.sync_state_set {
            return failed(format!(
                "the SyncStateSet of {broker_name} is already {new_set:?}"
            ));
        }
        if group.master != Some(master) {
            return Err(Refusal::new(
                ResponseCode::ControllerInvalidMaster,
                format!("broker {master} is not the master of {broker_name}"),
            ));
        }
        if master_epoch != group.master_epoch {
            return Err(Refusal::new(
                ResponseCode::ControllerFencedMasterEpoch,
                format!(
                    "master epoch {master_epoch} is not the current {}",
                    group.master_epoch
                ),
            ));
        }
        if sync_state_set_epoch != group.sync_state_set_epoch {
            return Err(Refusal::new(
                ResponseCode::ControllerFencedSyncStateSetEpoch,
                format!(
                    "SyncStateSet epoch {sync_state_set_epoch} is not the current {}",
                    group.sync_state_set_epoch
                ),
            ));
        }
        if let Some(unknown) = new_set.iter().find(|id| !group.replicas.contains_key(id)) {
            return Err(Refusal::new(
                ResponseCode::ControllerInvalidReplicas,
                format!("replica {unknown} of {broker_name} is not registered"),
            ));
        }
        if let Some(dead) = new_set.iter().find(|id| !alive.contains(id)) {
            return Err(Refusal::new(
                ResponseCode::ControllerBrokerNotAlive,
                format!("replica {dead} of {broker_name} is not alive"),
            ));
        }
        if !new_set.contains(&master) {
            return failed(format!(
                "the new SyncStateSet {new_set:?} lacks the master {master}"
            ));
        }
        group.sync_state_set = new_set;
        group.sync_state_set_epoch += 1;
        Ok(Reply::Group(group.view()))
    }

    fn clean_broker_data(
        &mut self,
        broker_name: &str,
        broker_ids: &BTreeSet<u64>,
        clean_living: bool,
        alive: &BTreeSet<u64>,
    ) -> CommandResult {
        let refuse = |remark: String| {
            Err(Refusal::new(
                ResponseCode::ControllerInvalidCleanBrokerMetadata,
                remark,
            ))
        };
        let group = self.groups.get(broker_name);
        if !clean_living {
            if broker_ids.is_empty() && group.is_some_and(|g| g.master.is_some()) {
                return refuse(format!("broker group {broker_name} still has a master"));
            }
            if let Some(living) = broker_ids.iter().find(|id| alive.contains(id)) {
                return refuse(format!(
                    "broker {living} of {broker_name} is alive; it is not cleaned"
                ));
            }
        }
        let Some(group) = self.groups.get_mut(broker_name) else {
            return refuse(format!(
                "broker group {broker_name} is unknown to the controller"
            ));
        };
        if broker_ids.is_empty() {
            self.groups.remove(broker_name);
            return Ok(Reply::Done);
        }
        for id in broker_ids {
            group.replicas.remove(id);
            group.sync_state_set.remove(id);
            if group.master == Some(*id) {
                group.master = None;
            }
        }
        if group.replicas.is_empty() {
            self.groups.remove(broker_name);
        }
        Ok(Reply::Done)
    }
}

/// The inputs of one election.
struct Election {
    requester: Option<u64>,
    designated: bool,
    alive: Vec<Candidate>,
    allow_unclean: bool,
}

impl BrokerGroup {
    fn add_replica(&mut self, broker_id: u64, address: String, register_check_code: String) {
        self.replicas.insert(
            broker_id,
            Replica {
                address,
                register_check_code,
            },
        );
        self.next_broker_id += 1;
    }
}

#[cfg(test)]
mod tests;
