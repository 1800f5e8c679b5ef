//! Master/slave replication between two real brokers on loopback: the slave finds its master
//! through the name server, copies its CommitLog byte for byte over the HA protocol, builds its
//! own ConsumeQueues, serves pulls, refuses sends, and copies the master's metadata; a
//! SYNC_MASTER answers only once its slave holds a message; what the HA listener is sent is
//! checked before it counts.

use std::sync::Arc;
use std::time::Duration;

use comet_broker::BrokerController;
use comet_broker::config::BrokerRole;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{CommandHeaderExt, PullMessageResponseHeader};
use comet_store::MessageStore;
use comet_testkit::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOPIC: &str = "Replicated";

/// The whole CommitLog of `store`, as bytes per segment start.
fn log_bytes(store: &MessageStore) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = store.min_phy_offset();
    while let Some(bytes) = store.read_replicated(offset, 1 << 20) {
        out.extend_from_slice(&bytes);
        offset += bytes.len() as i64;
    }
    out
}

async fn send(broker: &TestBroker, body: &[u8]) -> i32 {
    broker.invoke(send_v2(TOPIC, 0, body, &[])).await.code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_copies_its_master_and_serves_pulls_but_no_sends() {
    let master = TestBroker::start().await;
    for i in 0..50 {
        assert_eq!(send(&master, format!("before-{i}").as_bytes()).await, 0);
    }
    let slave_dir = tempfile::tempdir().expect("tempdir");
    let slave = master.start_slave(slave_dir.path(), |_| {}).await;
    for i in 0..250 {
        assert_eq!(send(&master, &vec![b'x'; 100 + i]).await, 0);
    }
    let (mstore, sstore) = (master.store(), &slave.context().store);
    assert!(
        wait_until(|| async { sstore.max_phy_offset() == mstore.max_phy_offset() }).await,
        "slave at {} of {}",
        sstore.max_phy_offset(),
        mstore.max_phy_offset()
    );
    assert_eq!(log_bytes(sstore), log_bytes(mstore), "byte-identical logs");
    // Its own dispatch built the queue, and it serves pulls (slaveReadEnable).
    assert!(wait_until(|| async { sstore.get_max_offset_in_queue(TOPIC, 0) == 300 }).await);
    let slave_addr = slave.local_addr().to_string();
    let pulled = master
        .client
        .invoke(&slave_addr, pull("g", TOPIC, 0, 0, 32), RPC_TIMEOUT)
        .await
        .expect("slave answers");
    assert_eq!(pulled.code, ResponseCode::Success.code());
    let header: PullMessageResponseHeader = pulled.decode_header().expect("pull header");
    assert_eq!(header.next_begin_offset, 32);
    // Its topics are the master's.
    assert!(
        wait_until(|| async { slave.context().topic_config.select(TOPIC).is_some() }).await,
        "topic copied"
    );
    // It refuses sends, as a Java slave does.
    let refused = master
        .client
        .invoke(&slave_addr, send_v2(TOPIC, 0, b"no", &[]), RPC_TIMEOUT)
        .await
        .expect("slave answers");
    assert_eq!(refused.code, ResponseCode::ServiceNotAvailable.code());
    let unknown = master
        .client
        .invoke(
            &slave_addr,
            send_v2("NoSuchTopic", 0, b"no", &[]),
            RPC_TIMEOUT,
        )
        .await
        .expect("slave answers");
    assert_eq!(unknown.code, ResponseCode::TopicNotExist.code());
    slave.shutdown().await.expect("slave stops");
    master.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_master_answers_once_a_slave_holds_the_message() {
    let master = TestBroker::start_with(|c| {
        c.broker_role = BrokerRole::SyncMaster;
        c.in_sync_replicas = 2;
        c.slave_timeout_ms = 500;
    })
    .await;
    // No slave: the message is stored, the answer says its copy is missing.
    assert_eq!(
        send(&master, b"alone").await,
        ResponseCode::FlushSlaveTimeout.code()
    );
    assert_eq!(master.store().get_max_offset_in_queue(TOPIC, 0), 1);
    let slave_dir = tempfile::tempdir().expect("tempdir");
    let slave = master.start_slave(slave_dir.path(), |_| {}).await;
    let caught_up = wait_until(|| async {
        slave.context().store.max_phy_offset() == master.store().max_phy_offset()
    })
    .await;
    assert!(caught_up, "slave caught up");
    for i in 0..20 {
        assert_eq!(send(&master, format!("copied-{i}").as_bytes()).await, 0);
        // Answered only once the slave held it.
        assert!(slave.context().store.max_phy_offset() >= master.store().max_phy_offset());
    }
    // The time from each write to the slave's acknowledgement was measured.
    assert!(master.ctx().replication.master.lag().samples >= 20);
    slave.shutdown().await.expect("slave stops");
    master.shutdown().await;
}

/// Connects to the master's HA listener and sends `report`; returns whether the master closed
/// the connection.
async fn closed_after_report(ha: std::net::SocketAddr, reports: &[i64]) -> bool {
    let mut stream = tokio::net::TcpStream::connect(ha).await.expect("connect");
    for r in reports {
        stream.write_all(&r.to_be_bytes()).await.expect("report");
    }
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
            Err(_) => return false,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_the_master_cannot_trust_end_the_connection_and_never_count() {
    let master = TestBroker::start_with(|c| {
        c.broker_role = BrokerRole::SyncMaster;
        c.in_sync_replicas = 2;
        c.slave_timeout_ms = 500;
    })
    .await;
    assert_eq!(
        send(&master, b"one").await,
        ResponseCode::FlushSlaveTimeout.code()
    );
    let end = master.store().max_phy_offset();
    let ha = master
        .ctx()
        .replication
        .master
        .local_addr()
        .expect("HA listener");
    // Beyond the master's end: a log this master never wrote.
    assert!(closed_after_report(ha, &[end + 1_000_000]).await);
    // A start, then an acknowledgement of bytes never sent (Apache's #3015).
    assert!(closed_after_report(ha, &[end, end + 4096]).await);
    // Going backwards.
    assert!(closed_after_report(ha, &[end, end - 10]).await);
    // None of them made a send look replicated.
    assert_eq!(
        master.ctx().replication.master.acks().acks(),
        Vec::<i64>::new()
    );
    assert_eq!(
        send(&master, b"two").await,
        ResponseCode::FlushSlaveTimeout.code()
    );
    master.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_refuses_a_master_whose_log_diverged() {
    // A slave with a log of its own (written as a master), then pointed at another master.
    let master = TestBroker::start().await;
    for i in 0..10 {
        assert_eq!(send(&master, format!("m-{i}").as_bytes()).await, 0);
    }
    let other_dir = tempfile::tempdir().expect("tempdir");
    let other = BrokerController::start(test_config(other_dir.path()))
        .await
        .expect("another master starts");
    let client = comet_remoting::RemotingClient::new(comet_remoting::ClientConfig::default());
    let other_addr = other.local_addr().to_string();
    for i in 0..30 {
        let sent = client
            .invoke(
                &other_addr,
                send_v2(TOPIC, 0, format!("other-{i}").as_bytes(), &[]),
                RPC_TIMEOUT,
            )
            .await
            .expect("answer");
        assert_eq!(sent.code, 0);
    }
    let other_end = other.context().store.max_phy_offset();
    assert!(other_end > master.store().max_phy_offset());
    other.shutdown().await.expect("stops");
    client.shutdown().await;
    let slave = master.start_slave(other_dir.path(), |_| {}).await;
    // The slave's log is longer than the master's: the master drops the connection, and the
    // slave's log stays as it was.
    let ha_slave = Arc::clone(slave.context().replication.slave.as_ref().expect("a slave"));
    assert!(wait_until(|| async { ha_slave.failed_connections() >= 1 }).await);
    assert!(master.ctx().replication.master.acks().acks().is_empty());
    assert_eq!(slave.context().store.max_phy_offset(), other_end);
    slave.shutdown().await.expect("slave stops");
    master.shutdown().await;
}

fn create_topic_with(topic: &str, attributes: &str) -> comet_protocol::RemotingCommand {
    use comet_protocol::code::RequestCode;
    use comet_protocol::headers::{CreateTopicRequestHeader, request_with_header};
    request_with_header(
        RequestCode::UpdateAndCreateTopic,
        &CreateTopicRequestHeader {
            topic: topic.to_owned(),
            default_topic: "TBW102".to_owned(),
            read_queue_nums: 2,
            write_queue_nums: 2,
            perm: 6,
            attributes: Some(attributes.to_owned()),
            ..Default::default()
        },
    )
}

fn commit(group: &str, queue_id: i32, offset: i64) -> comet_protocol::RemotingCommand {
    use comet_protocol::code::RequestCode;
    use comet_protocol::headers::{UpdateConsumerOffsetRequestHeader, request_with_header};
    request_with_header(
        RequestCode::UpdateConsumerOffset,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: group.to_owned(),
            topic: TOPIC.to_owned(),
            queue_id,
            commit_offset: offset,
            ..Default::default()
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_copies_metadata_without_losing_attributes_or_newer_offsets() {
    let master = TestBroker::start().await;
    for _ in 0..20 {
        assert_eq!(send(&master, b"m").await, 0);
    }
    let created = master
        .invoke(create_topic_with("FifoTopic", "+message.type=FIFO"))
        .await;
    assert_eq!(created.code, 0, "{:?}", created.remark);
    // The group exists once a consumer of it sent a heartbeat.
    assert_eq!(master.invoke(heartbeat("c1", "g", TOPIC)).await.code, 0);
    for (queue, offset) in [(0, 10), (1, 0)] {
        assert_eq!(master.invoke(commit("g", queue, offset)).await.code, 0);
    }
    let slave_dir = tempfile::tempdir().expect("tempdir");
    let slave = master.start_slave(slave_dir.path(), |_| {}).await;
    let ctx = Arc::clone(slave.context());
    let client = comet_remoting::RemotingClient::new(comet_remoting::ClientConfig::default());
    comet_broker::ha::sync::sync_all(&ctx, &client, &master.addr).await;
    let fifo = ctx.topic_config.select("FifoTopic").expect("topic copied");
    assert_eq!(
        fifo.attributes.get("message.type").map(String::as_str),
        Some("FIFO"),
        "attributes survive the copy"
    );
    assert_eq!(
        ctx.topic_config.data_version(),
        master.ctx().topic_config.data_version()
    );
    assert_eq!(ctx.consumer_offsets.query_offset("g", TOPIC, 0), 10);
    // Consumers read from the slave while the master did not hear of it: the slave's newer
    // offset of queue 1 stays; a reset made on the master (queue 0 back to 5) still arrives.
    let slave_addr = slave.local_addr().to_string();
    let committed = client
        .invoke(&slave_addr, commit("g", 1, 15), RPC_TIMEOUT)
        .await
        .expect("slave answers");
    assert_eq!(committed.code, 0);
    assert!(wait_until(|| async { ctx.consumer_offsets.query_offset("g", TOPIC, 1) == 15 }).await);
    assert_eq!(master.invoke(commit("g", 0, 5)).await.code, 0);
    comet_broker::ha::sync::sync_all(&ctx, &client, &master.addr).await;
    assert_eq!(ctx.consumer_offsets.query_offset("g", TOPIC, 1), 15);
    assert_eq!(ctx.consumer_offsets.query_offset("g", TOPIC, 0), 5);
    // A copy changes nothing when nothing changed.
    let version = ctx.topic_config.data_version();
    comet_broker::ha::sync::sync_all(&ctx, &client, &master.addr).await;
    assert_eq!(ctx.topic_config.data_version(), version);
    client.shutdown().await;
    slave.shutdown().await.expect("slave stops");
    master.shutdown().await;
}

/// What a 5.3.3 Java slave's metadata copy asks its master (`SlaveSynchronize.syncAll`, and
/// `syncTimerCheckPoint` every 3 s), answered as a Java master answers: the consumer offsets
/// with their `dataVersion` (the Java slave reads it with `DataVersion.assignNewOne` and fails on
/// a body without one, before persisting what it copied), an empty POP request-mode table, and
/// for the timer wheel Comet does not have, the errors of a Java master whose timer wheel is off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_answers_a_java_slaves_metadata_copy() {
    let master = TestBroker::start().await;
    let request = |code| comet_protocol::RemotingCommand::request(code);
    let offsets = master.ctx().consumer_offsets.clone();
    let version_of = |body: &[u8]| -> serde_json::Value {
        let doc: serde_json::Value =
            comet_protocol::body::from_fastjson(body).expect("offsets body is fastjson");
        doc["dataVersion"].clone()
    };

    offsets.commit_offset("127.0.0.1:1", "g", TOPIC, 0, 7);
    let first = master
        .invoke(request(RequestCode::GetAllConsumerOffset))
        .await;
    assert_eq!(first.code, ResponseCode::Success.code());
    let body = first.body.as_deref().expect("a body");
    let doc: serde_json::Value = comet_protocol::body::from_fastjson(body).expect("fastjson");
    assert_eq!(doc["offsetTable"][format!("{TOPIC}@g")]["0"], 7);
    let v1 = version_of(body);
    assert!(v1["counter"].is_i64() && v1["timestamp"].is_i64(), "{v1}");
    // The version moves on when the offsets changed, and only then.
    let same = master
        .invoke(request(RequestCode::GetAllConsumerOffset))
        .await;
    assert_eq!(version_of(same.body.as_deref().expect("body")), v1);
    offsets.commit_offset("127.0.0.1:1", "g", TOPIC, 0, 9);
    let moved = master
        .invoke(request(RequestCode::GetAllConsumerOffset))
        .await;
    let v2 = version_of(moved.body.as_deref().expect("body"));
    assert_eq!(v2["counter"], v1["counter"].as_i64().expect("counter") + 1);

    let modes = master
        .invoke(request(RequestCode::GetAllMessageRequestMode))
        .await;
    assert_eq!(modes.code, ResponseCode::Success.code());
    assert_eq!(
        modes.body.as_deref(),
        Some(&br#"{"messageRequestModeMap":{}}"#[..])
    );
    let checkpoint = master
        .invoke(request(RequestCode::GetTimerCheckPoint))
        .await;
    assert_eq!(
        (checkpoint.code, checkpoint.remark.as_deref()),
        (
            ResponseCode::SystemError.code(),
            Some("The checkpoint is null")
        )
    );
    let metrics = master.invoke(request(RequestCode::GetTimerMetrics)).await;
    assert_eq!(
        (metrics.code, metrics.remark.as_deref()),
        (
            ResponseCode::SystemError.code(),
            Some("The timer message store is null")
        )
    );
    master.shutdown().await;
}

/// A slave whose master is gone from the name server (the registration answer names no master)
/// stops copying metadata from it, as Apache's slave does, and copies from the master again
/// once a registration names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_copies_metadata_only_from_a_master_the_name_server_names() {
    let mut master = TestBroker::start().await;
    let slave_dir = tempfile::tempdir().expect("tempdir");
    let slave = master.start_slave(slave_dir.path(), |_| {}).await;
    let copy_from = slave.context().replication.master_addr();
    assert_eq!(copy_from.borrow().as_deref(), Some(master.addr.as_str()));
    master.stop_broker().await;
    slave.register_now().await;
    assert_eq!(*copy_from.borrow(), None, "no master named, nothing copied");
    master.restart_broker().await;
    slave.register_now().await;
    assert_eq!(copy_from.borrow().as_deref(), Some(master.addr.as_str()));
    slave.shutdown().await.expect("slave stops");
    master.shutdown().await;
}

/// The offsets where records of `store`'s CommitLog start, from its first segment.
fn record_starts(store: &MessageStore) -> Vec<i64> {
    let log = log_bytes(store);
    let mut starts = Vec::new();
    let mut pos = 0usize;
    while let Some(size) = log
        .get(pos..pos + 4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .and_then(|s| usize::try_from(s).ok())
        .filter(|s| *s > 8 && pos + *s <= log.len())
    {
        starts.push(store.min_phy_offset() + pos as i64);
        pos += size;
    }
    starts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_refuses_a_longer_master_whose_log_diverged_from_its_own() {
    // The slave's log: one record written by another master (an older history).
    let other_dir = tempfile::tempdir().expect("tempdir");
    let other = BrokerController::start(test_config(other_dir.path()))
        .await
        .expect("another master starts");
    let client = comet_remoting::RemotingClient::new(comet_remoting::ClientConfig::default());
    let sent = client
        .invoke(
            &other.local_addr().to_string(),
            send_v2(TOPIC, 0, &[b'o'; 1000], &[]),
            RPC_TIMEOUT,
        )
        .await
        .expect("answer");
    assert_eq!(sent.code, 0);
    let other_end = other.context().store.max_phy_offset();
    other.shutdown().await.expect("stops");
    client.shutdown().await;
    // The master (a newer history, as after a lost disk) has written past the slave's end, and
    // none of its records starts where the slave's log ends.
    let master = TestBroker::start().await;
    while master.store().max_phy_offset() < other_end + 2000 {
        assert_eq!(send(&master, b"newer history").await, 0);
    }
    assert!(!record_starts(master.store()).contains(&other_end));
    let slave = master.start_slave(other_dir.path(), |_| {}).await;
    // The master takes the report (it is within its log); the slave refuses the bytes, which
    // do not continue its records, and its log stays as it was.
    let ha_slave = Arc::clone(slave.context().replication.slave.as_ref().expect("a slave"));
    assert!(
        wait_until(|| async { ha_slave.failed_connections() >= 1 }).await,
        "the slave refused the master's bytes"
    );
    assert_eq!(slave.context().store.max_phy_offset(), other_end);
    assert!(
        master
            .ctx()
            .replication
            .master
            .acks()
            .acks()
            .iter()
            .all(|a| *a <= other_end),
        "nothing past the slave's end counts as replicated"
    );
    slave.shutdown().await.expect("slave stops");
    master.shutdown().await;
}
