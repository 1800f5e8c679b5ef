//! # comet-testkit
//!
//! The harness of Comet's integration tests: a real name server and a real broker on 127.0.0.1
//! with ephemeral ports, in a temporary directory with small segments (with the broker's gRPC
//! endpoint when its configuration asks for one), plus a raw protocol client and builders for
//! the requests tests send.
//!
//! Tests never sleep to synchronize: asynchronous effects are awaited with [`wait_until`], which
//! polls a condition until a deadline and reports failure instead of hanging.

#![forbid(unsafe_code)]

pub mod grpc;
pub mod scrape;

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use comet_broker::{BrokerConfig, BrokerContext, BrokerController, BrokerHandle};
use comet_namesrv::{NameServer, NameServerHandle, NamesrvConfig};
use comet_protocol::RemotingCommand;
use comet_protocol::body::{ConsumerData, HeartbeatData, ProducerData, SubscriptionData};
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{
    PullMessageRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2, pull_sys_flag,
    request_with_header,
};
use comet_protocol::message::Properties;
use comet_protocol::message::batch::{BatchEntry, encode_batch};
use comet_remoting::{ClientConfig, RemotingClient};
use comet_store::MessageStore;
use tempfile::TempDir;

/// Timeout of one request in tests.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for an asynchronous effect before a test fails: a hang guard, generous for a
/// loaded 2-core CI box (only a failing test ever waits this long).
pub const WAIT_DEADLINE: Duration = Duration::from_secs(60);
/// Poll period of [`wait_until`].
pub const POLL: Duration = Duration::from_millis(20);
/// CommitLog segment size in tests: small enough that rolling is exercised.
pub const TEST_COMMIT_LOG_SEGMENT: usize = 1024 * 1024;
/// ConsumeQueue file size in tests (entries × 20 bytes).
pub const TEST_CONSUME_QUEUE_FILE: usize = 1000 * 20;
/// The producer group tests send as.
pub const PRODUCER_GROUP: &str = "test_producer_group";

/// A broker configuration for tests rooted at `dir`: 127.0.0.1:0, small files, small index.
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
        let dir = tempfile::tempdir().expect("tempdir");
        let namesrv = NameServer::start(NamesrvConfig::new(
            "127.0.0.1:0",
            dir.path().join("namesrv"),
        ))
        .await
        .expect("name server starts");
        let mut config = test_config(&dir.path().join("store"));
        config.namesrv_addr = vec![namesrv.local_addr().to_string()];
        tweak(&mut config);
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
    /// Waits until every record in the CommitLog has reached its ConsumeQueue: a send is
    /// answered once appended, and dispatch follows asynchronously.
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

    /// Stops everything.
    pub async fn shutdown(mut self) {
        self.stop_broker().await;
        if let Some(namesrv) = self.namesrv.take() {
            namesrv.shutdown().await;
        }
        self.client.shutdown().await;
    }
}

/// Polls `condition` every [`POLL`] until it holds or [`WAIT_DEADLINE`] passes.
pub async fn wait_until<F, Fut>(mut condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT_DEADLINE;
    loop {
        if condition().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until the index (built by dispatch) finds `key` in `topic`; `false` after
/// [`WAIT_DEADLINE`].
pub async fn wait_indexed(store: &Arc<MessageStore>, topic: &str, key: &str) -> bool {
    wait_until(|| async {
        !store
            .query_message(topic, key, 1, 0, i64::MAX)
            .messages
            .is_empty()
    })
    .await
}

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A properties string from pairs.
pub fn properties(pairs: &[(&str, &str)]) -> String {
    pairs.iter().copied().collect::<Properties>().encode()
}

/// The V1 send header of a single message.
pub fn send_header(topic: &str, queue_id: i32, props: &[(&str, &str)]) -> SendMessageRequestHeader {
    SendMessageRequestHeader {
        producer_group: PRODUCER_GROUP.to_owned(),
        topic: topic.to_owned(),
        default_topic: "TBW102".to_owned(),
        default_topic_queue_nums: 4,
        queue_id,
        sys_flag: 0,
        born_timestamp: now_millis(),
        flag: 0,
        properties: Some(properties(props)),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: None,
        max_reconsume_times: None,
        rpc: Default::default(),
    }
}

/// SEND_MESSAGE (10) with V1 keys.
pub fn send_v1(topic: &str, queue_id: i32, body: &[u8], props: &[(&str, &str)]) -> RemotingCommand {
    request_with_header(
        RequestCode::SendMessage,
        &send_header(topic, queue_id, props),
    )
    .with_body(Bytes::copy_from_slice(body))
}

/// SEND_MESSAGE_V2 (310) with the short keys.
pub fn send_v2(topic: &str, queue_id: i32, body: &[u8], props: &[(&str, &str)]) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2::from(send_header(topic, queue_id, props));
    request_with_header(RequestCode::SendMessageV2, &header).with_body(Bytes::copy_from_slice(body))
}

/// SEND_BATCH_MESSAGE (320): one entry per body, each with a TAGS property.
pub fn send_batch(topic: &str, queue_id: i32, bodies: &[&[u8]], tag: &str) -> RemotingCommand {
    let entries: Vec<BatchEntry> = bodies
        .iter()
        .map(|b| BatchEntry {
            flag: 0,
            body: Bytes::copy_from_slice(b),
            properties: [("TAGS", tag), ("WAIT", "true")].into_iter().collect(),
        })
        .collect();
    let mut body = BytesMut::new();
    encode_batch(&entries, &mut body).expect("batch encodes");
    let mut header = send_header(topic, queue_id, &[("WAIT", "true")]);
    header.batch = Some(true);
    let header = SendMessageRequestHeaderV2::from(header);
    request_with_header(RequestCode::SendBatchMessage, &header).with_body(body.freeze())
}

/// PULL_MESSAGE (11) without suspension, committing nothing.
pub fn pull(group: &str, topic: &str, queue_id: i32, offset: i64, max: i32) -> RemotingCommand {
    let header = PullMessageRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: max,
        sys_flag: pull_sys_flag::build(false, false, true, false),
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".to_owned()),
        sub_version: now_millis(),
        expression_type: Some("TAG".to_owned()),
        ..Default::default()
    };
    request_with_header(RequestCode::PullMessage, &header)
}

/// HEART_BEAT (34) of a push consumer of `group` subscribed to `topic` (all tags), plus a
/// producer of [`PRODUCER_GROUP`].
pub fn heartbeat(client_id: &str, group: &str, topic: &str) -> RemotingCommand {
    let data = HeartbeatData {
        client_id: client_id.to_owned(),
        producer_data_set: vec![ProducerData {
            group_name: PRODUCER_GROUP.to_owned(),
        }],
        consumer_data_set: vec![ConsumerData {
            group_name: group.to_owned(),
            subscription_data_set: vec![SubscriptionData::from_tag_expression(
                topic,
                "*",
                now_millis(),
            )],
            ..Default::default()
        }],
        ..Default::default()
    };
    RemotingCommand::request(RequestCode::HeartBeat)
        .with_body(data.encode().expect("heartbeat encodes"))
}

/// The broker address a response's offset msgId points at, and its commit-log offset.
pub fn decode_msg_id(msg_id: &str) -> (SocketAddr, i64) {
    comet_protocol::message::id::decode_offset_msg_id(msg_id).expect("valid offset msgId")
}
