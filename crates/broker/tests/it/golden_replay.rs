//! Comet's broker against the frames captured from Apache RocketMQ 5.3.3
//! (`crates/protocol/tests/fixtures`, recorded by `interop/capture/capture.sh`).
//!
//! `crates/protocol/tests/golden.rs` pins what Apache sent; these tests replay the very requests
//! the real clients sent there (same headers, same properties, same UNIQ_KEYs) to a Comet broker
//! configured like the Apache one (`broker-a` in `CometInteropCluster`, transactions checked
//! once a half is 1 s old) and require Comet's answers, checks and stored records to carry the
//! same content. Only what differs on every run is translated or left out: commit-log and queue
//! offsets (and the offset msgIds built from them) and born timestamps, which are rewritten to
//! "now" so that the check service treats the replayed halves as fresh.
//! Property *order* is not compared: Apache writes Java HashMap order, which no client relies on.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::error::Error;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use comet_broker::BrokerConfig;
use comet_broker::core::end_transaction::{Ended, end_transaction};
use comet_broker::processor::end_transaction::ROLLBACK_REMARK;
use comet_broker::transaction::TransactionService;
use comet_protocol::RemotingCommand;
use comet_protocol::body::{HeartbeatData, ProducerData};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::frame;
use comet_protocol::headers::{CommandHeaderExt, EndTransactionRequestHeader, transaction_flag};
use comet_protocol::message::batch::decode_batch;
use comet_protocol::message::id::decode_offset_msg_id;
use comet_protocol::message::properties::keys;
use comet_protocol::message::record::{decode_record, decode_records};
use comet_protocol::message::{MessageExt, Properties};
use comet_remoting::{Channel, ClientConfig, RemotingClient, RequestProcessor};
use comet_testkit::{RPC_TIMEOUT, TestBroker, WAIT_DEADLINE, pull, wait_until};
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::mpsc;

type TestResult = Result<(), Box<dyn Error>>;

/// The Apache broker's name and cluster in the capture (`interop/apache/run.sh`).
const CAPTURE_BROKER_NAME: &str = "broker-a";
const CAPTURE_CLUSTER: &str = "CometInteropCluster";
/// The capture's transaction timings (`interop/capture/capture.sh`), check interval shortened.
const CAPTURE_TX_TIMEOUT_MS: u64 = 1_000;
const TEST_TX_CHECK_INTERVAL_MS: u64 = 200;
/// Queues of the topics the capture programs auto-create (`defaultTopicQueueNums`).
const CAPTURE_QUEUES: i32 = 4;
/// Most records one pull asks for.
const PULL_BATCH: i32 = 32;
const SEND_MESSAGE: i32 = 10;
const SEND_MESSAGE_V2: i32 = 310;
const SEND_BATCH_MESSAGE: i32 = 320;
const PULL_MESSAGE: i32 = 11;
const END_TRANSACTION: i32 = 37;
const CHECK_TRANSACTION_STATE: i32 = 39;
/// Header keys of the born timestamp in V1 and V2 send headers.
const BORN_TIMESTAMP_KEYS: [&str; 2] = ["bornTimestamp", "g"];
/// CHECK_TRANSACTION_STATE header keys whose values are offsets of this run.
const CHECK_OFFSET_KEYS: [&str; 3] = ["commitLogOffset", "tranStateTableOffset", "offsetMsgId"];
/// Records the non-transaction capture programs store in queue 0 (single, batch of 3, compressed).
const RECORDS_SENT: usize = 5;

/// The transaction peers: fixture directory and topic.
const TX_PEERS: [(&str, &str); 5] = [
    ("java-4.9.8-json-tx", "GoldenTxJava498Json"),
    ("java-4.9.8-rocketmq-tx", "GoldenTxJava498Rocketmq"),
    ("java-5.3.3-json-tx", "GoldenTxJava533Json"),
    ("java-5.3.3-rocketmq-tx", "GoldenTxJava533Rocketmq"),
    ("go-2.1.2-tx", "GoldenTxGo212"),
];

/// One captured frame: its index entry and the decoded command.
struct Frame {
    file: String,
    index: Value,
    cmd: RemotingCommand,
}

impl Frame {
    fn is_c2s(&self) -> bool {
        self.index["direction"] == "c2s"
    }
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../protocol/tests/fixtures")
}

fn load(peer: &str) -> Result<Vec<Frame>, Box<dyn Error>> {
    let dir = fixtures_dir().join(peer);
    let index = fs::read_to_string(dir.join("frames.jsonl"))?;
    let mut frames = Vec::new();
    for line in index.lines().filter(|l| !l.trim().is_empty()) {
        let index: Value = serde_json::from_str(line)?;
        let file = index["file"]
            .as_str()
            .ok_or("entry without file")?
            .to_owned();
        let mut buf = BytesMut::from(&fs::read(dir.join(&file))?[..]);
        let cmd = frame::decode_frame(&mut buf)?.ok_or_else(|| format!("{file}: incomplete"))?;
        frames.push(Frame { file, index, cmd });
    }
    Ok(frames)
}

/// The response Apache sent to `req`, if any.
fn response_to<'a>(frames: &'a [Frame], req: &Frame) -> Option<&'a Frame> {
    frames.iter().find(|f| {
        f.cmd.is_response()
            && f.cmd.opaque == req.cmd.opaque
            && f.index["conn"] == req.index["conn"]
            && f.is_c2s() != req.is_c2s()
    })
}

fn ext_keys(cmd: &RemotingCommand) -> BTreeSet<String> {
    cmd.ext_fields
        .iter()
        .flat_map(|e| e.iter().map(|(k, _)| k.to_owned()))
        .collect()
}

fn property_map(p: &Properties) -> BTreeMap<String, String> {
    p.iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn now_millis() -> i64 {
    comet_protocol::time::now_millis()
}

/// A captured request made fresh: born now (the check service and `fileReservedTime` judge a
/// half by its age). Returns the born timestamp written.
fn refreshed(req: &RemotingCommand) -> (RemotingCommand, i64) {
    let mut cmd = req.clone();
    let now = now_millis();
    for key in BORN_TIMESTAMP_KEYS {
        if cmd.ext(key).is_some() {
            cmd.ext_mut().insert(key, now.to_string());
        }
    }
    (cmd, now)
}

/// A broker configured like the Apache broker of the capture.
async fn capture_like_broker() -> TestBroker {
    TestBroker::start_with(|c: &mut BrokerConfig| {
        c.broker_name = CAPTURE_BROKER_NAME.to_owned();
        c.broker_cluster_name = CAPTURE_CLUSTER.to_owned();
        c.transaction_timeout_ms = CAPTURE_TX_TIMEOUT_MS;
        c.transaction_check_interval_ms = TEST_TX_CHECK_INTERVAL_MS;
    })
    .await
}

struct CheckSink(mpsc::UnboundedSender<RemotingCommand>);

impl RequestProcessor for CheckSink {
    fn process(
        &self,
        _channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let _ = self.0.send(request);
        Box::pin(async { None })
    }
}

/// The replaying producer: one connection that is registered for `group` and receives checks.
async fn producer(
    broker: &TestBroker,
    group: &str,
) -> (RemotingClient, mpsc::UnboundedReceiver<RemotingCommand>) {
    let client = RemotingClient::new(ClientConfig::default());
    let (tx, checks) = mpsc::unbounded_channel();
    client.register(
        RequestCode::CheckTransactionState.code(),
        Arc::new(CheckSink(tx)),
    );
    let data = HeartbeatData {
        client_id: "127.0.0.1@golden-replay".to_owned(),
        producer_data_set: vec![ProducerData {
            group_name: group.to_owned(),
        }],
        ..Default::default()
    };
    let request = RemotingCommand::request(RequestCode::HeartBeat)
        .with_body(data.encode().expect("heartbeat encodes"));
    let rsp = client
        .invoke(&broker.addr, request, RPC_TIMEOUT)
        .await
        .expect("heartbeat answered");
    assert_eq!(rsp.code, ResponseCode::Success.code());
    (client, checks)
}

/// Every record of `topic` a consumer of `group` can pull.
async fn pull_topic(broker: &TestBroker, group: &str, topic: &str) -> Vec<MessageExt> {
    let mut all = Vec::new();
    for queue_id in 0..CAPTURE_QUEUES {
        let rsp = broker
            .invoke(pull(group, topic, queue_id, 0, PULL_BATCH))
            .await;
        if rsp.code == ResponseCode::Success.code() {
            let body = rsp.body.unwrap_or_default();
            all.extend(decode_records(&body, false).expect("pull body decodes"));
        }
    }
    all
}

/// The commit-log and queue offsets a response or check names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Offsets {
    commit_log: i64,
    queue: i64,
}

/// Rewrites an END_TRANSACTION the client sent to Apache so that it names Comet's offsets.
fn translated_end(
    req: &RemotingCommand,
    offsets: &HashMap<Offsets, Offsets>,
) -> Result<(RemotingCommand, EndTransactionRequestHeader), Box<dyn Error>> {
    let mut header: EndTransactionRequestHeader = req.decode_header()?;
    let apache = Offsets {
        commit_log: header.commit_log_offset,
        queue: header.tran_state_table_offset,
    };
    let comet = offsets
        .get(&apache)
        .ok_or_else(|| format!("END_TRANSACTION names unknown offsets {apache:?}"))?;
    header.commit_log_offset = comet.commit_log;
    header.tran_state_table_offset = comet.queue;
    let mut cmd = req.clone();
    let ext = cmd.ext_mut();
    ext.insert("commitLogOffset", comet.commit_log.to_string());
    ext.insert("tranStateTableOffset", comet.queue.to_string());
    Ok((cmd, header))
}

/// Compares Comet's CHECK_TRANSACTION_STATE with Apache's; returns the offsets both name.
fn compare_check(
    what: &str,
    apache: &RemotingCommand,
    comet: &RemotingCommand,
    born: i64,
) -> Result<(Offsets, Offsets), Box<dyn Error>> {
    assert_eq!(
        ext_keys(comet),
        ext_keys(apache),
        "{what}: check header keys"
    );
    for (key, value) in apache.ext_fields.iter().flat_map(|e| e.iter()) {
        if !CHECK_OFFSET_KEYS.contains(&key) {
            assert_eq!(comet.ext(key), Some(value), "{what}: check header {key}");
        }
    }
    assert_eq!(comet.flag, apache.flag, "{what}: check flag (oneway)");
    let theirs = decode_record(&apache.body.clone().unwrap_or_default(), true)?;
    let ours = decode_record(&comet.body.clone().unwrap_or_default(), true)?;
    assert_eq!(ours.topic, theirs.topic, "{what}: check body topic");
    assert_eq!(ours.queue_id, theirs.queue_id, "{what}: check body queue");
    assert_eq!(ours.sys_flag, theirs.sys_flag, "{what}: check body sysflag");
    assert_eq!(ours.flag, theirs.flag, "{what}: check body flag");
    assert_eq!(ours.body, theirs.body, "{what}: check body body");
    assert_eq!(ours.born_timestamp, born, "{what}: check body born");
    assert_eq!(
        property_map(&ours.properties),
        property_map(&theirs.properties),
        "{what}: check body properties"
    );
    let offsets_of = |cmd: &RemotingCommand, record: &MessageExt| -> Result<Offsets, String> {
        let h: comet_protocol::headers::CheckTransactionStateRequestHeader =
            cmd.decode_header().map_err(|e| e.to_string())?;
        assert_eq!(record.queue_offset, h.tran_state_table_offset, "{what}");
        assert_eq!(record.commit_log_offset, h.commit_log_offset, "{what}");
        let (_, offset) = decode_offset_msg_id(h.offset_msg_id.as_deref().unwrap_or_default())
            .map_err(|e| e.to_string())?;
        assert_eq!(offset, h.commit_log_offset, "{what}: offsetMsgId");
        Ok(Offsets {
            commit_log: h.commit_log_offset,
            queue: h.tran_state_table_offset,
        })
    };
    Ok((offsets_of(apache, &theirs)?, offsets_of(comet, &ours)?))
}

/// Replays one transaction peer (see the module docs).
async fn replay_transactions(peer: &str, topic: &str) -> TestResult {
    let frames = load(peer)?;
    let broker = capture_like_broker().await;
    let (client, mut checks) = producer(&broker, &format!("{topic}_TXPG")).await;
    // Apache's offsets → Comet's, for the halves and the checked copy.
    let mut offsets: HashMap<Offsets, Offsets> = HashMap::new();
    // UNIQ_KEY → body, and body → the commit-log offset Comet committed it from.
    let mut bodies: HashMap<String, Bytes> = HashMap::new();
    let mut committed_from: HashMap<Bytes, i64> = HashMap::new();
    let mut born: HashMap<String, i64> = HashMap::new();
    let mut checks_seen = 0;

    for req in frames.iter().filter(|f| f.is_c2s() && !f.cmd.is_response()) {
        let what = format!("{peer}/{}", req.file);
        match req.cmd.code {
            SEND_MESSAGE | SEND_MESSAGE_V2 => {
                let apache = response_to(&frames, req).ok_or("send without response")?;
                let (cmd, born_at) = refreshed(&req.cmd);
                let ours = client.invoke(&broker.addr, cmd, RPC_TIMEOUT).await?;
                assert_eq!(ours.code, apache.cmd.code, "{what}: {:?}", ours.remark);
                assert_eq!(ext_keys(&ours), ext_keys(&apache.cmd), "{what}: keys");
                for key in ["MSG_REGION", "TRACE_ON", "transactionId", "queueId"] {
                    assert_eq!(ours.ext(key), apache.cmd.ext(key), "{what}: {key}");
                }
                let id = |c: &RemotingCommand| -> Result<Offsets, Box<dyn Error>> {
                    let (_, commit_log) = decode_offset_msg_id(c.ext("msgId").unwrap_or(""))?;
                    let queue = c.ext("queueOffset").unwrap_or("").parse()?;
                    Ok(Offsets { commit_log, queue })
                };
                offsets.insert(id(&apache.cmd)?, id(&ours)?);
                let uniq = ours.ext("transactionId").unwrap_or_default().to_owned();
                bodies.insert(uniq.clone(), req.cmd.body.clone().unwrap_or_default());
                born.insert(uniq, born_at);
            }
            END_TRANSACTION => {
                let header: EndTransactionRequestHeader = req.cmd.decode_header()?;
                if header.from_transaction_check == Some(true) {
                    // Answer to the check: Comet's check must have come and look like Apache's.
                    let theirs = frames
                        .iter()
                        .find(|f| !f.is_c2s() && f.cmd.code == CHECK_TRANSACTION_STATE)
                        .ok_or("no captured check")?;
                    let ours = tokio::time::timeout(WAIT_DEADLINE, checks.recv())
                        .await?
                        .ok_or("check channel closed")?;
                    checks_seen += 1;
                    let born_at = born.get(&header.msg_id).copied().unwrap_or_default();
                    let (a, c) = compare_check(&what, &theirs.cmd, &ours, born_at)?;
                    offsets.insert(a, c);
                }
                let (cmd, translated) = translated_end(&req.cmd, &offsets)?;
                if translated.commit_or_rollback == transaction_flag::COMMIT {
                    let body = bodies.get(&translated.msg_id).cloned().unwrap_or_default();
                    committed_from.insert(body, translated.commit_log_offset);
                }
                match response_to(&frames, req) {
                    Some(apache) if !req.cmd.is_oneway() => {
                        let ours = client.invoke(&broker.addr, cmd, RPC_TIMEOUT).await?;
                        assert_eq!(
                            (ours.code, ours.remark.as_deref()),
                            (apache.cmd.code, apache.cmd.remark.as_deref()),
                            "{what}: END_TRANSACTION answer"
                        );
                    }
                    // Oneway, or a flag-0 request Apache did not answer (no answer is
                    // asserted in `end_transaction_answers_like_apache`).
                    _ => client.invoke_oneway(&broker.addr, cmd).await?,
                }
            }
            _ => {}
        }
    }
    assert_eq!(checks_seen, 1, "{peer}: one check, as in the capture");

    // The committed records: what Apache's consumer pulled, by body.
    let mut expected: BTreeMap<Bytes, MessageExt> = BTreeMap::new();
    for rsp in frames.iter().filter(|f| {
        f.cmd.is_response()
            && f.index["request_code"].as_i64() == Some(i64::from(PULL_MESSAGE))
            && f.cmd.code == ResponseCode::Success.code()
    }) {
        for m in decode_records(&rsp.cmd.body.clone().unwrap_or_default(), true)? {
            expected.insert(m.body.clone(), m);
        }
    }
    assert_eq!(expected.len(), 2, "{peer}: Apache delivered two commits");
    let group = format!("{topic}_TXPULL");
    assert!(
        wait_until(|| async { pull_topic(&broker, &group, topic).await.len() == expected.len() })
            .await,
        "{peer}: both commits become visible"
    );
    for ours in pull_topic(&broker, &group, topic).await {
        let what = format!("{peer}: committed {:?}", ours.body);
        let theirs = expected.get(&ours.body).ok_or(what.clone())?;
        assert_eq!(ours.topic, theirs.topic, "{what}");
        assert_eq!(ours.queue_id, theirs.queue_id, "{what}");
        assert_eq!(ours.sys_flag, theirs.sys_flag, "{what}");
        assert_eq!(
            Some(ours.prepared_transaction_offset),
            committed_from.get(&ours.body).copied(),
            "{what}: preparedTransactionOffset names the half it was committed from"
        );
        assert_eq!(
            property_map(&ours.properties),
            property_map(&theirs.properties),
            "{what}: properties"
        );
    }
    client.shutdown().await;
    broker.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn java_4_transactions_replay_like_apache() -> TestResult {
    for (peer, topic) in &TX_PEERS[..2] {
        replay_transactions(peer, topic).await?;
    }
    Ok(())
}

#[tokio::test]
async fn java_5_transactions_replay_like_apache() -> TestResult {
    for (peer, topic) in &TX_PEERS[2..4] {
        replay_transactions(peer, topic).await?;
    }
    Ok(())
}

#[tokio::test]
async fn go_transactions_replay_like_apache() -> TestResult {
    let (peer, topic) = TX_PEERS[4];
    replay_transactions(peer, topic).await
}

#[tokio::test]
async fn end_transaction_answers_like_apache() -> TestResult {
    // Go sends END_TRANSACTION with flag 0, so Apache's answers (or their absence) are on record.
    let (peer, _) = TX_PEERS[4];
    let frames = load(peer)?;
    let broker = capture_like_broker().await;
    let service = TransactionService::new(broker.ctx().store_host.ip());
    let peer_addr = "127.0.0.1:1".parse()?;
    let mut unknown_seen = false;
    for req in frames
        .iter()
        .filter(|f| f.is_c2s() && !f.cmd.is_response() && f.cmd.code == END_TRANSACTION)
    {
        let header: EndTransactionRequestHeader = req.cmd.decode_header()?;
        if header.commit_or_rollback != transaction_flag::NOT_TYPE {
            continue;
        }
        unknown_seen = true;
        assert!(response_to(&frames, req).is_none(), "Apache answered");
        let ours = end_transaction(broker.ctx(), &service, &header, peer_addr, None).await;
        // Left to the check service: the processor answers nothing.
        assert_eq!(
            ours,
            Ok(Ended::Left),
            "{}: unknown must not be answered",
            req.file
        );
    }
    assert!(unknown_seen);
    // Nor is any state other than commit and rollback (Apache's `default: return null`).
    for state in [transaction_flag::PREPARED, 3] {
        let header = EndTransactionRequestHeader {
            topic: None,
            producer_group: "g".to_owned(),
            tran_state_table_offset: 0,
            commit_log_offset: 0,
            commit_or_rollback: state,
            from_transaction_check: Some(false),
            msg_id: "m".to_owned(),
            transaction_id: None,
            rpc: Default::default(),
        };
        let ours = end_transaction(broker.ctx(), &service, &header, peer_addr, None).await;
        assert_eq!(ours, Ok(Ended::Left), "state {state} answered");
    }
    // The rollback remark is Apache's, as captured.
    let rollback_answer = frames
        .iter()
        .find(|f| f.cmd.is_response() && f.cmd.remark.as_deref() == Some(ROLLBACK_REMARK));
    assert!(rollback_answer.is_some(), "the capture holds the remark");
    broker.shutdown().await;
    Ok(())
}

/// Replays the single, batch and compressed sends of a non-transaction peer and compares the
/// stored records with the ones Apache's pull returned.
async fn replay_sends(peer: &str, topic: &str) -> TestResult {
    let frames = load(peer)?;
    let broker = capture_like_broker().await;
    // What each stored record should carry as its own UNIQ_KEY, in send order.
    let mut own_uniq_keys: Vec<Option<String>> = Vec::new();
    for req in frames.iter().filter(|f| {
        f.is_c2s()
            && !f.cmd.is_response()
            && [SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE].contains(&f.cmd.code)
    }) {
        let what = format!("{peer}/{}", req.file);
        let (cmd, _) = refreshed(&req.cmd);
        let rsp = broker.invoke(cmd).await;
        assert_eq!(rsp.code, ResponseCode::Success.code(), "{what}");
        if req.cmd.code == SEND_BATCH_MESSAGE {
            for entry in decode_batch(&req.cmd.body.clone().unwrap_or_default())? {
                own_uniq_keys.push(entry.properties.get(keys::UNIQ_KEY).map(str::to_owned));
            }
        } else {
            let props = Properties::parse(
                req.cmd
                    .ext("properties")
                    .or(req.cmd.ext("i"))
                    .unwrap_or_default(),
            );
            own_uniq_keys.push(props.get(keys::UNIQ_KEY).map(str::to_owned));
        }
    }
    assert_eq!(own_uniq_keys.len(), RECORDS_SENT, "{peer}");
    let theirs = frames
        .iter()
        .find(|f| {
            f.cmd.is_response()
                && f.index["request_code"].as_i64() == Some(i64::from(PULL_MESSAGE))
                && f.cmd.code == ResponseCode::Success.code()
        })
        .ok_or("no FOUND pull")?;
    let theirs = decode_records(&theirs.cmd.body.clone().unwrap_or_default(), true)?;
    // The sends were acknowledged once appended; the pull reads the ConsumeQueue, which
    // asynchronous dispatch fills after that.
    let store = Arc::clone(broker.store());
    let dispatched = tokio::task::spawn_blocking(move || {
        store.wait_dispatched(store.max_phy_offset(), WAIT_DEADLINE)
    })
    .await?;
    assert!(
        dispatched,
        "{peer}: dispatch caught up within {WAIT_DEADLINE:?}"
    );
    let rsp = broker
        .invoke(pull(&format!("{topic}_PULL"), topic, 0, 0, PULL_BATCH))
        .await;
    assert_eq!(rsp.code, ResponseCode::Success.code(), "{peer}: pull");
    let ours = decode_records(&rsp.body.unwrap_or_default(), false)?;
    assert_eq!(ours.len(), theirs.len(), "{peer}: stored records");
    for ((ours, theirs), own_uniq) in ours.iter().zip(&theirs).zip(&own_uniq_keys) {
        let what = format!("{peer}: record {}", ours.queue_offset);
        assert_eq!(ours.body, theirs.body, "{what}");
        let mut expected = property_map(&theirs.properties);
        // Apache appends the batch-level UNIQ_KEY to every member (its last duplicate wins);
        // Comet keeps each member's own id.
        match own_uniq {
            Some(uniq) => {
                expected.insert(keys::UNIQ_KEY.to_owned(), uniq.clone());
            }
            None => {
                expected.remove(keys::UNIQ_KEY);
            }
        }
        let mut actual = property_map(&ours.properties);
        if own_uniq.is_none() {
            // A member sent without an id (Go batches) has none in either broker.
            assert!(!actual.contains_key(keys::UNIQ_KEY), "{what}");
            actual.remove(keys::UNIQ_KEY);
        }
        assert_eq!(actual, expected, "{what}: properties");
    }
    broker.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn java_sends_store_what_apache_stores() -> TestResult {
    replay_sends("java-5.3.3-json", "GoldenJava533Json").await
}

#[tokio::test]
async fn go_sends_store_what_apache_stores() -> TestResult {
    replay_sends("go-2.1.2", "GoldenGo212").await
}
