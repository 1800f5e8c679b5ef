//! A real name server and a real broker on 127.0.0.1 with ephemeral ports, in a temporary
//! directory with small files (with the broker's gRPC endpoint when its configuration asks for
//! one), and a raw protocol client to talk to them: [`TestBroker`], the one way tests start a
//! name server and a broker in-process. [`Cluster`] is the same with the client-level tests'
//! geometry; [`TestBroker::start_slave`] adds a slave to the group.
//!
//! Everything a test starts here is its own (ports, directory, broker), so tests of one binary
//! run side by side.

use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use comet_broker::config::BrokerRole;
use comet_broker::{BrokerConfig, BrokerContext, BrokerController, BrokerHandle};
use comet_namesrv::{NameServer, NameServerHandle, NamesrvConfig};
use comet_protocol::RemotingCommand;
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{CreateTopicRequestHeader, request_with_header};
use comet_remoting::{ClientConfig, RemotingClient};
use comet_store::MessageStore;
use tempfile::TempDir;

use crate::wait::{WAIT_DEADLINE, wait_until};

/// Timeout of one request in tests.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(10);
/// CommitLog segment size in tests: small enough that rolling is exercised.
pub const TEST_COMMIT_LOG_SEGMENT: usize = 1024 * 1024;
/// CommitLog segment size of the client-level tests ([`Cluster`]): a message of the client's
/// largest size (4 MiB) fits one.
pub const CLIENT_COMMIT_LOG_SEGMENT: usize = 4 * 1024 * 1024;
/// ConsumeQueue file size in tests (entries × 20 bytes).
pub const TEST_CONSUME_QUEUE_FILE: usize = 1000 * 20;

/// A broker configuration for tests rooted at `dir`: 127.0.0.1:0, small files, small index,
/// frequent flushes.
pub fn test_config(dir: &Path) -> BrokerConfig {
    BrokerConfig {
        bind_address: "127.0.0.1".parse().expect("literal IP"),
        listen_port: 0,
        store_path_root_dir: dir.to_path_buf(),
        mapped_file_size_commit_log: TEST_COMMIT_LOG_SEGMENT,
        mapped_file_size_consume_queue: TEST_CONSUME_QUEUE_FILE,
        max_hash_slot_num: 1000,
        max_index_num: 4000,
        flush_interval_commit_log_ms: 50,
        flush_interval_consume_queue_ms: 100,
        flush_consumer_offset_interval_ms: 200,
        ..BrokerConfig::default()
    }
}

/// [`test_config`] with the client-level tests' CommitLog segments
/// ([`CLIENT_COMMIT_LOG_SEGMENT`]).
pub fn client_test_config(dir: &Path) -> BrokerConfig {
    BrokerConfig {
        mapped_file_size_commit_log: CLIENT_COMMIT_LOG_SEGMENT,
        ..test_config(dir)
    }
}

/// A running name server (if requested) and broker, with a client to talk to them.
pub struct TestBroker {
    pub handle: Option<BrokerHandle>,
    /// The broker's gRPC endpoint, when its configuration serves one.
    pub grpc: Option<comet_grpc::GrpcEndpoint>,
    pub namesrv: Option<NameServerHandle>,
    pub client: RemotingClient,
    /// Broker address to send requests to.
    pub addr: String,
    pub dir: TempDir,
    pub config: BrokerConfig,
}

impl TestBroker {
    /// Name server + broker with default test settings.
    pub async fn start() -> TestBroker {
        Self::start_with(|_| {}).await
    }

    /// Name server + broker, with `tweak` applied to the broker configuration.
    pub async fn start_with(tweak: impl FnOnce(&mut BrokerConfig)) -> TestBroker {
        Self::launch(test_config, |_, _| {}, |config, _| tweak(config)).await
    }

    /// The general form: the broker's configuration is `base(store directory)` with the name
    /// server's address, then `broker` adjusts it; `namesrv` adjusts the name server's first.
    /// Both also get the test's temporary directory, for files they read (an ACL file, TLS
    /// certificates), which they may write there.
    pub async fn launch(
        base: fn(&Path) -> BrokerConfig,
        namesrv: impl FnOnce(&mut NamesrvConfig, &Path),
        broker: impl FnOnce(&mut BrokerConfig, &Path),
    ) -> TestBroker {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut namesrv_config = NamesrvConfig::new("127.0.0.1:0", dir.path().join("namesrv"));
        namesrv(&mut namesrv_config, dir.path());
        let namesrv = NameServer::start(namesrv_config)
            .await
            .expect("name server starts");
        let mut config = base(&dir.path().join("store"));
        config.namesrv_addr = vec![namesrv.local_addr().to_string()];
        broker(&mut config, dir.path());
        let handle = BrokerController::start(config.clone())
            .await
            .expect("broker starts");
        let grpc = comet_grpc::start(&handle)
            .await
            .expect("gRPC endpoint starts");
        let addr = handle.local_addr().to_string();
        TestBroker {
            handle: Some(handle),
            grpc,
            namesrv: Some(namesrv),
            client: RemotingClient::new(ClientConfig::default()),
            addr,
            dir,
            config,
        }
    }

    pub fn handle(&self) -> &BrokerHandle {
        self.handle.as_ref().expect("broker running")
    }

    /// The running broker (the same as [`TestBroker::handle`]).
    pub fn broker(&self) -> &BrokerHandle {
        self.handle()
    }

    /// Where the running broker listens.
    pub fn broker_addr(&self) -> String {
        self.broker().local_addr().to_string()
    }

    /// The broker's name (`brokerName`), as routes show it.
    pub fn broker_name(&self) -> String {
        self.broker().context().config.broker_name.clone()
    }

    /// Where the broker's gRPC endpoint listens, when it serves one.
    pub fn grpc_addr(&self) -> Option<SocketAddr> {
        self.grpc.as_ref().map(|g| g.addr)
    }

    pub fn ctx(&self) -> &Arc<BrokerContext> {
        self.handle().context()
    }

    pub fn store(&self) -> &Arc<MessageStore> {
        &self.ctx().store
    }

    pub fn namesrv_addr(&self) -> String {
        self.namesrv
            .as_ref()
            .map(|n| n.local_addr().to_string())
            .expect("name server running")
    }

    /// Sends `request` to the broker and waits for the response.
    pub async fn invoke(&self, request: RemotingCommand) -> RemotingCommand {
        self.client
            .invoke(&self.addr, request, RPC_TIMEOUT)
            .await
            .expect("broker answers")
    }

    /// Sends `request` to the name server and waits for the response.
    pub async fn invoke_namesrv(&self, request: RemotingCommand) -> RemotingCommand {
        self.client
            .invoke(&self.namesrv_addr(), request, RPC_TIMEOUT)
            .await
            .expect("name server answers")
    }

    /// Sends `request` oneway to the broker.
    pub async fn invoke_oneway(&self, request: RemotingCommand) {
        self.client
            .invoke_oneway(&self.addr, request)
            .await
            .expect("oneway request sent");
    }

    /// Creates `topic` with `queues` read/write queues (UPDATE_AND_CREATE_TOPIC) and registers
    /// it with the name server before returning.
    pub async fn create_topic(&self, topic: &str, queues: i32) {
        let request = create_topic_request(topic, queues);
        let response = self
            .client
            .invoke(&self.broker_addr(), request, RPC_TIMEOUT)
            .await
            .expect("broker answers");
        assert_eq!(response.code, 0, "create topic: {:?}", response.remark);
        self.broker().register_now().await;
    }

    /// The group's committed offset of a queue on the broker (-1 if none).
    pub fn committed_offset(&self, group: &str, topic: &str, queue_id: i32) -> i64 {
        self.ctx()
            .consumer_offsets
            .query_offset(group, topic, queue_id)
    }

    /// Waits until the broker holds `offset` as the group's committed offset of a queue. A
    /// consumer persists its offsets oneway (as Java does), also at shutdown, so the broker
    /// applies them some time after the call returns.
    pub async fn wait_committed(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        let committed = wait_until(|| {
            let now = self.committed_offset(group, topic, queue_id);
            async move { now == offset }
        })
        .await;
        assert!(
            committed,
            "{group} never committed {offset} on {topic}:{queue_id} (broker has {})",
            self.committed_offset(group, topic, queue_id)
        );
    }

    /// Next offset to be written in a queue (as dispatched so far).
    pub fn max_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.store().get_max_offset_in_queue(topic, queue_id)
    }

    /// Waits until every record in the CommitLog has reached its ConsumeQueue: a send is
    /// answered once appended, and dispatch (what max offsets, pulls and stats read) follows
    /// asynchronously, much later on a loaded box.
    pub async fn wait_dispatched(&self) {
        let store = Arc::clone(self.store());
        let caught_up = tokio::task::spawn_blocking(move || {
            store.wait_dispatched(store.max_phy_offset(), WAIT_DEADLINE)
        })
        .await
        .expect("dispatch wait task");
        assert!(
            caught_up,
            "dispatch did not catch up within {WAIT_DEADLINE:?}"
        );
    }

    /// A slave (broker id 1, reads served) of this broker's group, in `dir`, registered with the
    /// same name server, with the master's file geometry and `tweak` applied last.
    pub async fn start_slave(
        &self,
        dir: &Path,
        tweak: impl FnOnce(&mut BrokerConfig),
    ) -> BrokerHandle {
        let master = &self.ctx().config;
        let mut config = BrokerConfig {
            mapped_file_size_commit_log: master.mapped_file_size_commit_log,
            mapped_file_size_consume_queue: master.mapped_file_size_consume_queue,
            max_hash_slot_num: master.max_hash_slot_num,
            max_index_num: master.max_index_num,
            namesrv_addr: master.namesrv_addr.clone(),
            broker_name: master.broker_name.clone(),
            broker_cluster_name: master.broker_cluster_name.clone(),
            broker_role: BrokerRole::Slave,
            broker_id: 1,
            // Without it a slave refuses pulls, as Apache's does.
            slave_read_enable: true,
            ..test_config(dir)
        };
        tweak(&mut config);
        BrokerController::start(config).await.expect("slave starts")
    }

    /// Stops the broker only (the name server and directory stay).
    pub async fn stop_broker(&mut self) {
        if let Some(grpc) = self.grpc.take() {
            grpc.shutdown().await;
        }
        if let Some(handle) = self.handle.take() {
            handle.shutdown().await.expect("broker shuts down cleanly");
        }
        self.client.close_channel(&self.addr);
    }

    /// Stops and restarts the broker on the same directory (new port).
    pub async fn restart_broker(&mut self) {
        self.stop_broker().await;
        let handle = BrokerController::start(self.config.clone())
            .await
            .expect("broker restarts");
        self.grpc = comet_grpc::start(&handle)
            .await
            .expect("gRPC endpoint restarts");
        self.addr = handle.local_addr().to_string();
        self.handle = Some(handle);
    }

    /// Stops the name server only (the broker keeps running).
    pub async fn stop_namesrv(&mut self) {
        if let Some(namesrv) = self.namesrv.take() {
            namesrv.shutdown().await;
        }
    }

    /// Stops everything.
    pub async fn shutdown(mut self) {
        self.stop_broker().await;
        self.stop_namesrv().await;
        self.client.shutdown().await;
    }
}

/// The client-level tests' name server and broker (client, console, CLI, ACL): a [`TestBroker`]
/// on [`client_test_config`], whose every method it offers.
pub struct Cluster(pub TestBroker);

impl Cluster {
    pub async fn start() -> Cluster {
        Self::start_with(|_| {}).await
    }

    /// With `tweak` applied to the broker configuration.
    pub async fn start_with(tweak: impl FnOnce(&mut BrokerConfig)) -> Cluster {
        Self::start_in(|config, _| tweak(config)).await
    }

    /// With `setup` applied to the broker configuration; it also gets the test's temporary
    /// directory, for files the broker reads.
    pub async fn start_in(setup: impl FnOnce(&mut BrokerConfig, &Path)) -> Cluster {
        Cluster(TestBroker::launch(client_test_config, |_, _| {}, setup).await)
    }

    pub async fn shutdown(self) {
        self.0.shutdown().await;
    }
}

impl Deref for Cluster {
    type Target = TestBroker;

    fn deref(&self) -> &TestBroker {
        &self.0
    }
}

impl DerefMut for Cluster {
    fn deref_mut(&mut self) -> &mut TestBroker {
        &mut self.0
    }
}

/// Waits until the index (built by dispatch) finds `key` in `topic`; `false` after
/// [`WAIT_DEADLINE`].
/// UPDATE_AND_CREATE_TOPIC of `topic` with `queues` read and write queues, read-write.
pub fn create_topic_request(topic: &str, queues: i32) -> RemotingCommand {
    request_with_header(
        RequestCode::UpdateAndCreateTopic,
        &CreateTopicRequestHeader {
            topic: topic.to_owned(),
            default_topic: "TBW102".to_owned(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm: 6,
            order: false,
            ..Default::default()
        },
    )
}

pub async fn wait_indexed(store: &Arc<MessageStore>, topic: &str, key: &str) -> bool {
    wait_until(|| async {
        !store
            .query_message(topic, key, 1, 0, i64::MAX)
            .messages
            .is_empty()
    })
    .await
}
