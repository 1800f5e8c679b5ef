//! The `comet serve` process, killed with SIGKILL under load and restarted on the same data
//! directory, keeps every message it acknowledged (SYNC_FLUSH) and every consumer offset it had
//! persisted before the kill.
//!
//! This drives the real binary as a child process with a raw protocol client, so it tests the
//! whole stack: remoting, send processor, group commit, recovery, offset persistence.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use comet_protocol::RemotingCommand;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CommandHeaderExt, PullMessageRequestHeader, PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader, QueryConsumerOffsetResponseHeader, SendMessageRequestHeader,
    SendMessageRequestHeaderV2, SendMessageResponseHeader, UpdateConsumerOffsetRequestHeader,
    pull_sys_flag, request_with_header,
};
use comet_protocol::message::Properties;
use comet_protocol::message::record::decode_records;
use comet_remoting::{ClientConfig, RemotingClient};
use comet_testkit::process::{Serve, ServeOutput};
use parking_lot::Mutex;

const TOPIC: &str = "Kill9Topic";
const GROUP: &str = "kill9_group";
const RPC: Duration = Duration::from_secs(10);
/// Hang guard for anything this test waits for.
const DEADLINE: Duration = Duration::from_secs(60);

fn spawn_serve(data: &Path) -> Serve {
    Serve::spawn(
        env!("CARGO_BIN_EXE_comet"),
        data,
        &data.join("ready.json"),
        &[
            "--set",
            "flushDiskType=SYNC_FLUSH",
            "--set",
            "mappedFileSizeCommitLog=1048576",
            "--set",
            "flushConsumerOffsetInterval=200",
        ],
        ServeOutput::Log {
            path: data.join("serve.log"),
            append: true,
        },
        DEADLINE,
    )
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn send_request(i: usize) -> RemotingCommand {
    let props: Properties = [("WAIT", "true"), ("KEYS", &format!("k{i}") as &str)]
        .into_iter()
        .collect();
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: "kill9_producer".to_owned(),
        topic: TOPIC.to_owned(),
        default_topic: "TBW102".to_owned(),
        default_topic_queue_nums: 4,
        queue_id: (i % 4) as i32,
        sys_flag: 0,
        born_timestamp: now_ms(),
        flag: 0,
        properties: Some(props.encode()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: None,
        max_reconsume_times: None,
        rpc: Default::default(),
    });
    request_with_header(RequestCode::SendMessageV2, &header).with_body(body(i))
}

fn body(i: usize) -> Bytes {
    Bytes::from(format!("kill9-message-{i:08}-{}", "x".repeat(i % 200)))
}

type Acked = Arc<Mutex<BTreeMap<(i32, i64), Bytes>>>;

async fn send_one(client: &RemotingClient, addr: &str, i: usize, acked: &Acked) -> bool {
    let Ok(rsp) = client.invoke(addr, send_request(i), RPC).await else {
        return false;
    };
    if rsp.code != i32::from(ResponseCode::Success) {
        return false;
    }
    let header: SendMessageResponseHeader = rsp.decode_header().expect("send response header");
    acked
        .lock()
        .insert((header.queue_id, header.queue_offset), body(i));
    true
}

async fn pull_all(client: &RemotingClient, addr: &str, queue_id: i32) -> BTreeMap<i64, Bytes> {
    let mut out = BTreeMap::new();
    let mut offset = 0;
    loop {
        let header = PullMessageRequestHeader {
            consumer_group: GROUP.to_owned(),
            topic: TOPIC.to_owned(),
            queue_id,
            queue_offset: offset,
            max_msg_nums: 32,
            sys_flag: pull_sys_flag::build(false, false, true, false),
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: Some("*".to_owned()),
            sub_version: now_ms(),
            expression_type: Some("TAG".to_owned()),
            ..Default::default()
        };
        let rsp = client
            .invoke(
                addr,
                request_with_header(RequestCode::PullMessage, &header),
                RPC,
            )
            .await
            .expect("pull");
        if rsp.code != i32::from(ResponseCode::Success) {
            return out;
        }
        let h: PullMessageResponseHeader = rsp.decode_header().expect("pull header");
        let records = decode_records(&rsp.body.clone().unwrap_or_default(), true).expect("records");
        for m in records {
            out.insert(m.queue_offset, m.body.clone());
        }
        offset = h.next_begin_offset;
    }
}

async fn query_offset(client: &RemotingClient, addr: &str, queue_id: i32) -> RemotingCommand {
    let header = QueryConsumerOffsetRequestHeader {
        consumer_group: GROUP.to_owned(),
        topic: TOPIC.to_owned(),
        queue_id,
        ..Default::default()
    };
    client
        .invoke(
            addr,
            request_with_header(RequestCode::QueryConsumerOffset, &header),
            RPC,
        )
        .await
        .expect("query offset")
}

fn data_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    (dir, path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_keeps_acknowledged_messages_and_persisted_offsets() {
    let (_guard, data) = data_dir();
    let client = RemotingClient::new(ClientConfig::default());
    let acked: Acked = Arc::default();

    // Round 1: a first batch of messages, and a committed offset that reaches consumerOffset.json.
    let serve = spawn_serve(&data);
    for i in 0..100 {
        assert!(
            send_one(&client, &serve.broker, i, &acked).await,
            "send {i} failed"
        );
    }
    // A pull creates the subscription group (autoCreateSubscriptionGroup), as a consumer's would.
    // The sends were acknowledged once flushed; the ConsumeQueue the pull reads follows by
    // asynchronous dispatch, so read until the queue is complete.
    let started = Instant::now();
    let first = loop {
        let first = pull_all(&client, &serve.broker, 1).await;
        if first.len() >= 25 || started.elapsed() >= DEADLINE {
            break first;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        first.len(),
        25,
        "queue 1 holds every fourth of the first 100 messages"
    );
    let commit = UpdateConsumerOffsetRequestHeader {
        consumer_group: GROUP.to_owned(),
        topic: TOPIC.to_owned(),
        queue_id: 1,
        commit_offset: 17,
        rpc: Default::default(),
    };
    let rsp = client
        .invoke(
            &serve.broker,
            request_with_header(RequestCode::UpdateConsumerOffset, &commit),
            RPC,
        )
        .await
        .expect("commit offset");
    assert_eq!(rsp.code, i32::from(ResponseCode::Success));
    let offsets_file = data.join("store/config/consumerOffset.json");
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(&offsets_file).unwrap_or_default();
        // Queue 1 at 17, as fastjson writes it (a bare "17" could be part of dataVersion's
        // timestamp).
        if text.contains(&format!("{TOPIC}@{GROUP}")) && text.contains("{1:17") {
            break;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "offset never persisted: {text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Senders keep going while the process is killed mid-stream: every ack they got must survive.
    let stop = Arc::new(AtomicBool::new(false));
    let mut senders = Vec::new();
    for w in 0..4 {
        let client = client.clone();
        let addr = serve.broker.clone();
        let acked = Arc::clone(&acked);
        let stop = Arc::clone(&stop);
        senders.push(tokio::spawn(async move {
            let mut i = 1_000 + w * 100_000;
            while !stop.load(Ordering::Relaxed) {
                if !send_one(&client, &addr, i, &acked).await {
                    break;
                }
                i += 1;
            }
        }));
    }
    // Kill once the senders have stored a good number of messages under load.
    let started = Instant::now();
    while acked.lock().len() < 400 {
        assert!(started.elapsed() < DEADLINE, "senders made no progress");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(serve); // SIGKILL + reap
    stop.store(true, Ordering::Relaxed);
    for s in senders {
        let _ = s.await;
    }
    let acked = acked.lock().clone();
    assert!(
        data.join("store/abort").exists(),
        "a killed broker leaves its abort file"
    );

    // Round 2: restart on the same directory and read everything back.
    let serve = spawn_serve(&data);
    let client = RemotingClient::new(ClientConfig::default());
    let mut stored = BTreeMap::new();
    for q in 0..4 {
        for (offset, body) in pull_all(&client, &serve.broker, q).await {
            stored.insert((q, offset), body);
        }
    }
    for (key, body) in &acked {
        assert_eq!(
            stored.get(key),
            Some(body),
            "acknowledged message {key:?} lost or changed"
        );
    }
    let rsp = query_offset(&client, &serve.broker, 1).await;
    assert_eq!(rsp.code, i32::from(ResponseCode::Success));
    let h: QueryConsumerOffsetResponseHeader = rsp.decode_header().expect("offset header");
    assert_eq!(h.offset, 17);
    eprintln!(
        "kill9: {} acknowledged, {} stored after restart",
        acked.len(),
        stored.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_shuts_down_cleanly_and_restart_takes_the_fast_path() {
    let (_guard, data) = data_dir();
    let client = RemotingClient::new(ClientConfig::default());
    let acked: Acked = Arc::default();
    let mut serve = spawn_serve(&data);
    for i in 0..40 {
        assert!(
            send_one(&client, &serve.broker, i, &acked).await,
            "send {i} failed"
        );
    }
    let pid = serve.child.id().to_string();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("run kill");
    assert!(status.success());
    let started = Instant::now();
    let exit = loop {
        if let Some(exit) = serve.child.try_wait().expect("wait") {
            break exit;
        }
        assert!(started.elapsed() < DEADLINE, "comet serve ignored SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(exit.success(), "comet serve exited with {exit}");
    assert!(
        !data.join("store/abort").exists(),
        "a clean shutdown removes the abort file"
    );
    let log = std::fs::read_to_string(data.join("serve.log")).unwrap_or_default();
    drop(serve);

    let serve = spawn_serve(&data);
    let client = RemotingClient::new(ClientConfig::default());
    let mut stored = 0;
    for q in 0..4 {
        stored += pull_all(&client, &serve.broker, q).await.len();
    }
    assert_eq!(stored, acked.lock().len());
    let log_after = std::fs::read_to_string(data.join("serve.log")).unwrap_or_default();
    let restart_log = log_after.get(log.len()..).unwrap_or_default();
    assert!(
        restart_log.contains("abnormal: false") || restart_log.contains("abnormal=false"),
        "restart after a clean shutdown must take the normal recovery path: {restart_log}"
    );
}
