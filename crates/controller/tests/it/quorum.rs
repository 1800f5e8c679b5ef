use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

use comet_client::admin::controller::ControllerAdmin;
use comet_controller::{Controller, ControllerConfig, ControllerHandle};
use comet_protocol::RemotingCommand;
use comet_protocol::body::controller::{ElectMasterResponseBody, SyncStateSet};
use comet_protocol::body::lenient::from_fastjson;
use comet_protocol::body::to_fastjson_bytes;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::*;
use comet_remoting::{ClientConfig, RemotingClient};
use comet_testkit::wait::wait_until;

const TIMEOUT: Duration = Duration::from_secs(5);
const CLUSTER: &str = "c1";
const GROUP: &str = "broker-a";

fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("addr").port())
        .collect()
}

fn peers_of(ports: &[u16]) -> String {
    ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("n{i}-127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(";")
}

async fn start(peers: &str, index: usize, root: &Path) -> ControllerHandle {
    let config = ControllerConfig {
        group: "g".into(),
        peers: peers.into(),
        self_id: format!("n{index}"),
        store_path: root.join(format!("c{index}")),
        scan_interval: Duration::from_millis(200),
        ..ControllerConfig::default()
    };
    Controller::start(config).await.expect("controller starts")
}

/// One client playing one broker: its own connection to each controller, as a broker has.
struct FakeBroker {
    client: RemotingClient,
    address: String,
}

impl FakeBroker {
    fn new(port: u16) -> Self {
        FakeBroker {
            client: RemotingClient::try_new(ClientConfig::default()).expect("client"),
            address: format!("127.0.0.1:{port}"),
        }
    }

    async fn call(&self, controller: &str, request: RemotingCommand) -> RemotingCommand {
        self.client
            .invoke(controller, request, TIMEOUT)
            .await
            .expect("controller answers")
    }

    /// CONTROLLER_GET_METADATA_INFO: the leader's address, as brokers find it.
    async fn leader(&self, controller: &str) -> Option<String> {
        let response = self
            .call(
                controller,
                RemotingCommand::request(RequestCode::ControllerGetMetadataInfo),
            )
            .await;
        let header: GetMetaDataResponseHeader = response.decode_header().expect("header");
        header.controller_leader_address
    }

    /// 1012 → 1013 → 1003, as a new broker registers; returns its id and the register answer.
    async fn register(
        &self,
        leader: &str,
    ) -> (u64, RegisterBrokerToControllerResponseHeader, SyncStateSet) {
        let next = self
            .call(
                leader,
                request_with_header(
                    RequestCode::ControllerGetNextBrokerId,
                    &GetNextBrokerIdRequestHeader {
                        cluster_name: Some(CLUSTER.into()),
                        broker_name: Some(GROUP.into()),
                    },
                ),
            )
            .await;
        assert_eq!(next.code, 0, "{:?}", next.remark);
        let id = next
            .decode_header::<GetNextBrokerIdResponseHeader>()
            .expect("header")
            .next_broker_id;
        let applied = self
            .call(
                leader,
                request_with_header(
                    RequestCode::ControllerApplyBrokerId,
                    &ApplyBrokerIdRequestHeader {
                        cluster_name: Some(CLUSTER.into()),
                        broker_name: Some(GROUP.into()),
                        applied_broker_id: Some(id),
                        register_check_code: Some(format!("{};1700000000000", self.address)),
                    },
                ),
            )
            .await;
        assert_eq!(applied.code, 0, "{:?}", applied.remark);
        let registered = self
            .call(
                leader,
                request_with_header(
                    RequestCode::ControllerRegisterBroker,
                    &RegisterBrokerToControllerRequestHeader {
                        cluster_name: Some(CLUSTER.into()),
                        broker_name: Some(GROUP.into()),
                        broker_id: Some(id),
                        broker_address: Some(self.address.clone()),
                        invoke_time: Some(1),
                    },
                ),
            )
            .await;
        assert_eq!(registered.code, 0, "{:?}", registered.remark);
        let body: SyncStateSet =
            from_fastjson(&registered.body_bytes().unwrap_or_default()).expect("body");
        let id = u64::try_from(id).expect("id");
        (id, registered.decode_header().expect("header"), body)
    }

    async fn heartbeat(&self, controller: &str, id: u64, epoch: i32, max_offset: i64) {
        let answer = self
            .call(
                controller,
                request_with_header(
                    RequestCode::BrokerHeartbeat,
                    &BrokerHeartbeatRequestHeader {
                        cluster_name: Some(CLUSTER.into()),
                        broker_addr: Some(self.address.clone()),
                        broker_name: Some(GROUP.into()),
                        broker_id: Some(i64::try_from(id).expect("id")),
                        epoch: Some(epoch),
                        max_offset: Some(max_offset),
                        confirm_offset: Some(max_offset),
                        heartbeat_timeout_mills: Some(10_000),
                        election_priority: None,
                    },
                ),
            )
            .await;
        assert_eq!(answer.code, 0);
    }

    async fn elect(&self, leader: &str, id: u64) -> RemotingCommand {
        self.call(
            leader,
            request_with_header(
                RequestCode::ControllerElectMaster,
                &ElectMasterRequestHeader {
                    cluster_name: Some(CLUSTER.into()),
                    broker_name: Some(GROUP.into()),
                    broker_id: Some(i64::try_from(id).expect("id")),
                    designate_elect: Some(false),
                    invoke_time: Some(1),
                },
            ),
        )
        .await
    }

    /// The master (`master` at `master_epoch`) reports `set` in sync, based on `set_epoch`.
    async fn alter_sync_state_set(
        &self,
        leader: &str,
        master: i64,
        master_epoch: i32,
        set: &[i64],
        set_epoch: i32,
    ) {
        let request = request_with_header(
            RequestCode::ControllerAlterSyncStateSet,
            &AlterSyncStateSetRequestHeader {
                broker_name: Some(GROUP.into()),
                master_broker_id: Some(master),
                master_epoch: Some(master_epoch),
                invoke_time: Some(1),
            },
        )
        .with_body(
            to_fastjson_bytes(&SyncStateSet {
                sync_state_set: set.iter().copied().collect(),
                sync_state_set_epoch: set_epoch,
            })
            .expect("body"),
        );
        let altered = self.call(leader, request).await;
        assert_eq!(altered.code, 0, "{:?}", altered.remark);
    }

    async fn replica_info(&self, leader: &str) -> (GetReplicaInfoResponseHeader, SyncStateSet) {
        let response = self
            .call(
                leader,
                request_with_header(
                    RequestCode::ControllerGetReplicaInfo,
                    &GetReplicaInfoRequestHeader {
                        broker_name: Some(GROUP.into()),
                    },
                ),
            )
            .await;
        assert_eq!(response.code, 0, "{:?}", response.remark);
        let body = from_fastjson(&response.body_bytes().unwrap_or_default()).expect("body");
        (response.decode_header().expect("header"), body)
    }
}

/// The leader every controller of `controllers` names, if they all name the same one of them.
async fn leader_named_by_all(probe: &FakeBroker, controllers: &[String]) -> Option<String> {
    let mut leaders = BTreeSet::new();
    for c in controllers {
        leaders.insert(probe.leader(c).await);
    }
    match leaders.into_iter().collect::<Vec<_>>().as_slice() {
        [Some(leader)] if controllers.contains(leader) => Some(leader.clone()),
        _ => None,
    }
}

/// Waits for a leader every controller agrees on and returns its address.
async fn agreed_leader(probe: &FakeBroker, controllers: &[String]) -> String {
    let agreed =
        wait_until(|| async { leader_named_by_all(probe, controllers).await.is_some() }).await;
    assert!(agreed, "the controllers never agreed on a leader");
    leader_named_by_all(probe, controllers)
        .await
        .expect("still agreed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_registers_brokers_and_replaces_a_dead_master() {
    let root = tempfile::tempdir().expect("tempdir");
    let ports = free_ports(3);
    let peers = peers_of(&ports);
    let mut controllers = Vec::new();
    for i in 0..3 {
        controllers.push(Some(start(&peers, i, root.path()).await));
    }
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let b1 = FakeBroker::new(30911);
    let b2 = FakeBroker::new(30921);
    let leader = agreed_leader(&b1, &addrs).await;

    // A follower refuses the registry's commands with CONTROLLER_NOT_LEADER.
    let follower = addrs.iter().find(|a| **a != leader).expect("a follower");
    let refused = b1
        .call(
            follower,
            request_with_header(
                RequestCode::ControllerGetNextBrokerId,
                &GetNextBrokerIdRequestHeader {
                    cluster_name: Some(CLUSTER.into()),
                    broker_name: Some(GROUP.into()),
                },
            ),
        )
        .await;
    assert_eq!(refused.code, ResponseCode::ControllerNotLeader.code());

    // Broker 1 registers, heartbeats to every controller and is elected the first master.
    let (id1, header, _) = b1.register(&leader).await;
    assert_eq!(id1, 1);
    assert_eq!(header.master_broker_id, None, "no master yet");
    for c in &addrs {
        b1.heartbeat(c, id1, -1, 0).await;
    }
    let elected = b1.elect(&leader, id1).await;
    assert_eq!(elected.code, 0, "{:?}", elected.remark);
    let eh: ElectMasterResponseHeader = elected.decode_header().expect("header");
    assert_eq!((eh.master_broker_id, eh.master_epoch), (Some(1), Some(1)));
    let body: ElectMasterResponseBody =
        from_fastjson(&elected.body_bytes().unwrap_or_default()).expect("body");
    assert_eq!(body.sync_state_set, BTreeSet::from([1]));

    // Broker 2 registers and is told the master; the master adds it to the SyncStateSet.
    let (id2, header, _) = b2.register(&leader).await;
    assert_eq!(id2, 2);
    assert_eq!(header.master_broker_id, Some(1));
    assert_eq!(header.master_address.as_deref(), Some("127.0.0.1:30911"));
    for c in &addrs {
        b2.heartbeat(c, id2, 1, 100).await;
    }
    b1.alter_sync_state_set(&leader, 1, 1, &[1, 2], 1).await;

    // The leader controller dies; the others elect a new leader that knows everything.
    let leader_index = addrs.iter().position(|a| *a == leader).expect("index");
    if let Some(handle) = controllers[leader_index].take() {
        handle.shutdown().await;
    }
    let survivors: Vec<String> = addrs.iter().filter(|a| **a != leader).cloned().collect();
    let leader = agreed_leader(&b2, &survivors).await;
    let (info, set) = b2.replica_info(&leader).await;
    assert_eq!((info.master_broker_id, info.master_epoch), (Some(1), 1));
    assert_eq!(set.sync_state_set, BTreeSet::from([1, 2]));

    // The master dies: its connections close, and the leader elects broker 2 at epoch 2.
    b1.client.shutdown().await;
    let promoted = wait_until(|| async {
        let (info, _) = b2.replica_info(&leader).await;
        info.master_broker_id == Some(2)
    })
    .await;
    assert!(promoted, "broker 2 never became master");
    let (info, set) = b2.replica_info(&leader).await;
    assert_eq!(info.master_epoch, 2);
    assert_eq!(info.master_address.as_deref(), Some("127.0.0.1:30921"));
    assert_eq!(set.sync_state_set, BTreeSet::from([2]));

    // An operator moves the mastership back to broker 1 once it is in sync again; the admin
    // client finds the leader by itself.
    let b1 = FakeBroker::new(30911);
    for c in &survivors {
        b1.heartbeat(c, 1, 2, 900).await;
    }
    b2.alter_sync_state_set(&leader, 2, 2, &[1, 2], 3).await;
    let admin = ControllerAdmin::new(&survivors.join(";"), TIMEOUT).expect("admin");
    let info = admin
        .sync_state(&[GROUP.to_owned()])
        .await
        .expect("sync state");
    let group = &info.replicas_info_table[GROUP];
    assert_eq!(group.master_broker_id, Some(2));
    assert_eq!(group.in_sync_replicas.len(), 2);
    let elected = admin
        .elect_master(CLUSTER, GROUP, 1)
        .await
        .expect("elected");
    assert_eq!(elected.master_broker_id, Some(1));
    assert_eq!(elected.master_epoch, Some(3));
    assert_eq!(elected.body.sync_state_set, BTreeSet::from([1]));
    let refused = admin.elect_master(CLUSTER, GROUP, 9).await;
    assert!(refused.is_err(), "an unknown broker cannot be designated");
    admin.shutdown().await;

    // The stopped controller restarts from its store and catches up.
    controllers[leader_index] = Some(start(&peers, leader_index, root.path()).await);
    let leader = agreed_leader(&b2, &addrs).await;
    let (info, _) = b2.replica_info(&leader).await;
    assert_eq!((info.master_broker_id, info.master_epoch), (Some(1), 3));
    for handle in controllers.into_iter().flatten() {
        handle.shutdown().await;
    }
}
