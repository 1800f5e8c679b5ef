//! Transactional messages end to end against a real broker, with raw requests: the half is
//! invisible until END_TRANSACTION commits it (exactly once), a rollback never shows, an unknown
//! outcome is resolved by the check service asking the producer's channel, an unanswered half is
//! discarded after `transactionCheckMax` checks, and pending halves survive a restart.

use std::sync::Arc;

use comet_broker::BrokerConfig;
use comet_protocol::RemotingCommand;
use comet_protocol::body::{HeartbeatData, ProducerData};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CheckTransactionStateRequestHeader, CommandHeaderExt, EndTransactionRequestHeader,
    SendMessageResponseHeader, request_with_header, transaction_flag,
};
use comet_protocol::message::properties::keys;
use comet_protocol::message::record::decode_records;
use comet_protocol::message::{MessageExt, sysflag};
use comet_remoting::{Channel, ClientConfig, RemotingClient, RequestProcessor};
use comet_testkit::{
    PRODUCER_GROUP, TestBroker, decode_msg_id, pull, send_v1, send_v2, wait_until,
};
use futures::future::BoxFuture;
use tokio::sync::mpsc;

const TOPIC: &str = "TxTopic";
const CONSUMER_GROUP: &str = "tx_consumer";
const HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
const OP_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";

/// Check settings that make the service act within a test's patience.
fn fast_checks(config: &mut BrokerConfig) {
    config.transaction_check_interval_ms = 100;
    config.transaction_timeout_ms = 0;
}

/// What the broker answered to a half send.
struct Half {
    commit_log_offset: i64,
    queue_offset: i64,
    uniq_key: String,
}

async fn send_half(broker: &TestBroker, body: &[u8], uniq: &str) -> Half {
    let props = [
        (keys::TRANSACTION_PREPARED, "true"),
        (keys::PRODUCER_GROUP, PRODUCER_GROUP),
        (keys::UNIQ_KEY, uniq),
        (keys::TAGS, "tx"),
        (keys::WAIT_STORE_MSG_OK, "true"),
    ];
    let rsp = broker.invoke(send_v2(TOPIC, 0, body, &props)).await;
    assert_eq!(rsp.code, ResponseCode::Success.code(), "{:?}", rsp.remark);
    let header: SendMessageResponseHeader = rsp.decode_header().expect("send response header");
    let (_, commit_log_offset) = decode_msg_id(&header.msg_id);
    assert_eq!(header.queue_id, 0, "the response names the real queue");
    Half {
        commit_log_offset,
        queue_offset: header.queue_offset,
        uniq_key: uniq.to_owned(),
    }
}

fn end_request(
    commit_log_offset: i64,
    queue_offset: i64,
    msg_id: &str,
    state: i32,
    from_check: bool,
) -> RemotingCommand {
    let header = EndTransactionRequestHeader {
        topic: Some(TOPIC.to_owned()),
        producer_group: PRODUCER_GROUP.to_owned(),
        tran_state_table_offset: queue_offset,
        commit_log_offset,
        commit_or_rollback: state,
        from_transaction_check: Some(from_check),
        msg_id: msg_id.to_owned(),
        transaction_id: Some(msg_id.to_owned()),
        rpc: Default::default(),
    };
    request_with_header(RequestCode::EndTransaction, &header)
}

fn end_of(half: &Half, state: i32) -> RemotingCommand {
    end_request(
        half.commit_log_offset,
        half.queue_offset,
        &half.uniq_key,
        state,
        false,
    )
}

/// Every message of the real topic's queue 0 from offset 0.
async fn pull_all(broker: &TestBroker) -> Vec<MessageExt> {
    let rsp = broker.invoke(pull(CONSUMER_GROUP, TOPIC, 0, 0, 32)).await;
    if rsp.code != ResponseCode::Success.code() {
        return Vec::new();
    }
    decode_records(&rsp.body.unwrap_or_default(), false).expect("pull body decodes")
}

/// Queue 0's max offset once everything stored so far is dispatched.
fn max_offset(broker: &TestBroker, topic: &str) -> i64 {
    let store = broker.store();
    assert!(
        store.wait_dispatched(store.max_phy_offset(), comet_testkit::WAIT_DEADLINE),
        "dispatch catches up"
    );
    store.get_max_offset_in_queue(topic, 0)
}

/// A producer connection: heartbeats as [`PRODUCER_GROUP`] and hands every
/// CHECK_TRANSACTION_STATE it receives to the test.
struct CheckedProducer {
    client: RemotingClient,
    checks: mpsc::UnboundedReceiver<RemotingCommand>,
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

impl CheckedProducer {
    async fn connect(broker: &TestBroker) -> CheckedProducer {
        let client = RemotingClient::new(ClientConfig::default());
        let (tx, checks) = mpsc::unbounded_channel();
        client.register(
            RequestCode::CheckTransactionState.code(),
            Arc::new(CheckSink(tx)),
        );
        let data = HeartbeatData {
            client_id: "127.0.0.1@tx-producer".to_owned(),
            producer_data_set: vec![ProducerData {
                group_name: PRODUCER_GROUP.to_owned(),
            }],
            ..Default::default()
        };
        let request = RemotingCommand::request(RequestCode::HeartBeat)
            .with_body(data.encode().expect("heartbeat encodes"));
        let rsp = client
            .invoke(&broker.addr, request, comet_testkit::RPC_TIMEOUT)
            .await
            .expect("heartbeat answered");
        assert_eq!(rsp.code, ResponseCode::Success.code());
        CheckedProducer { client, checks }
    }

    /// The next check, decoded, or `None` after the harness deadline.
    async fn next_check(&mut self) -> Option<(CheckTransactionStateRequestHeader, MessageExt)> {
        let request = tokio::time::timeout(comet_testkit::WAIT_DEADLINE, self.checks.recv())
            .await
            .ok()??;
        let header: CheckTransactionStateRequestHeader =
            request.decode_header().expect("check header decodes");
        let mut records =
            decode_records(&request.body.unwrap_or_default(), true).expect("check body decodes");
        assert_eq!(records.len(), 1, "one half message per check");
        Some((header, records.remove(0)))
    }
}

#[tokio::test]
async fn commit_makes_the_message_visible_exactly_once() {
    let broker = TestBroker::start().await;
    let half = send_half(&broker, b"pay order 1", "UNIQ-COMMIT").await;
    assert_eq!(max_offset(&broker, HALF_TOPIC), 1);
    assert!(
        pull_all(&broker).await.is_empty(),
        "a half message is invisible"
    );

    broker
        .invoke_oneway(end_of(&half, transaction_flag::COMMIT))
        .await;
    assert!(wait_until(|| async { pull_all(&broker).await.len() == 1 }).await);
    let msgs = pull_all(&broker).await;
    let msg = &msgs[0];
    assert_eq!(&msg.body[..], b"pay order 1");
    assert_eq!(msg.uniq_key(), Some("UNIQ-COMMIT"));
    assert_eq!(msg.tags(), Some("tx"));
    // As Apache 5.3.3 stores it: the half's bookkeeping stays on the committed record.
    assert_eq!(msg.properties.get(keys::TRANSACTION_PREPARED), Some("true"));
    assert_eq!(msg.properties.get(keys::REAL_TOPIC), Some(TOPIC));
    assert_eq!(msg.properties.get(keys::REAL_QUEUE_ID), Some("0"));
    assert_eq!(
        sysflag::transaction_type(msg.sys_flag),
        sysflag::TRANSACTION_COMMIT_TYPE
    );
    assert_eq!(msg.prepared_transaction_offset, half.commit_log_offset);
    assert!(wait_until(|| async { max_offset(&broker, OP_TOPIC) == 1 }).await);

    // A repeated commit (answered, so it has been applied when the answer arrives) adds nothing.
    let rsp = broker.invoke(end_of(&half, transaction_flag::COMMIT)).await;
    assert_eq!(rsp.code, ResponseCode::Success.code());
    assert_eq!(max_offset(&broker, TOPIC), 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn rollback_never_shows_and_bad_requests_are_refused() {
    let broker = TestBroker::start().await;
    let half = send_half(&broker, b"cancelled", "UNIQ-ROLLBACK").await;

    let wrong_offset = end_request(
        half.commit_log_offset,
        half.queue_offset + 5,
        &half.uniq_key,
        transaction_flag::COMMIT,
        false,
    );
    let rsp = broker.invoke(wrong_offset).await;
    assert_eq!(rsp.code, ResponseCode::SystemError.code());
    assert!(
        rsp.remark.unwrap_or_default().contains("offset wrong"),
        "remark names the mismatch"
    );
    let wrong_id = end_request(
        half.commit_log_offset,
        half.queue_offset,
        "SOMEONE-ELSE",
        transaction_flag::COMMIT,
        false,
    );
    assert_eq!(
        broker.invoke(wrong_id).await.code,
        ResponseCode::SystemError.code()
    );

    let rsp = broker
        .invoke(end_of(&half, transaction_flag::ROLLBACK))
        .await;
    assert_eq!(rsp.code, ResponseCode::Success.code(), "{:?}", rsp.remark);
    assert_eq!(
        max_offset(&broker, OP_TOPIC),
        1,
        "rollback writes an op record"
    );
    // A commit after the rollback is ignored.
    let rsp = broker.invoke(end_of(&half, transaction_flag::COMMIT)).await;
    assert_eq!(rsp.code, ResponseCode::Success.code());
    assert_eq!(max_offset(&broker, TOPIC), 0);
    assert!(pull_all(&broker).await.is_empty());

    // A normal message to the same topic is visible; a transactional batch is refused.
    let rsp = broker.invoke(send_v1(TOPIC, 0, b"plain", &[])).await;
    assert_eq!(rsp.code, ResponseCode::Success.code());
    let mut batch = comet_testkit::send_batch(TOPIC, 0, &[b"a", b"b"], "t");
    batch.ext_mut().insert(
        "i",
        comet_testkit::properties(&[(keys::TRANSACTION_PREPARED, "true")]),
    );
    let rsp = broker.invoke(batch).await;
    assert_eq!(rsp.code, ResponseCode::MessageIllegal.code());
    assert_eq!(max_offset(&broker, TOPIC), 1);
    assert_eq!(
        pull_all(&broker).await.len(),
        1,
        "only the plain message is visible"
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn unknown_outcome_is_checked_and_the_answer_commits() {
    let broker = TestBroker::start_with(fast_checks).await;
    let mut producer = CheckedProducer::connect(&broker).await;
    let half = send_half(&broker, b"maybe", "UNIQ-CHECK").await;
    broker
        .invoke_oneway(end_of(&half, transaction_flag::NOT_TYPE))
        .await;

    let (header, record) = producer.next_check().await.expect("a check arrives");
    assert_eq!(header.msg_id.as_deref(), Some("UNIQ-CHECK"));
    assert_eq!(
        header.topic.as_deref(),
        Some(HALF_TOPIC),
        "the header names the half topic, as Apache's does"
    );
    assert_eq!(record.topic, TOPIC, "the check body carries the real topic");
    assert_eq!(
        record.properties.get(keys::WAIT_STORE_MSG_OK),
        Some("false")
    );
    assert_eq!(
        record
            .properties
            .get(keys::TRANSACTION_PREPARED_QUEUE_OFFSET),
        None,
        "a first check shows the half as it was sent"
    );
    assert_eq!(&record.body[..], b"maybe");
    assert_eq!(
        record.properties.get(keys::PRODUCER_GROUP),
        Some(PRODUCER_GROUP)
    );
    assert_eq!(
        record.properties.get(keys::TRANSACTION_CHECK_TIMES),
        Some("1")
    );
    assert_eq!(record.commit_log_offset, header.commit_log_offset);
    assert_eq!(record.queue_offset, header.tran_state_table_offset);
    assert!(
        header.tran_state_table_offset > half.queue_offset,
        "the check names the re-put copy"
    );
    assert!(pull_all(&broker).await.is_empty());

    producer
        .client
        .invoke_oneway(
            &broker.addr,
            end_request(
                header.commit_log_offset,
                header.tran_state_table_offset,
                "UNIQ-CHECK",
                transaction_flag::COMMIT,
                true,
            ),
        )
        .await
        .expect("end sent");
    assert!(wait_until(|| async { pull_all(&broker).await.len() == 1 }).await);
    // Once ended, the check service leaves it alone: the half progress passes every copy.
    assert!(
        wait_until(|| async {
            let progress =
                broker
                    .ctx()
                    .consumer_offsets
                    .query_offset("CID_RMQ_SYS_TRANS", HALF_TOPIC, 0);
            progress == max_offset(&broker, HALF_TOPIC)
        })
        .await
    );
    assert_eq!(pull_all(&broker).await.len(), 1);
    assert_eq!(&pull_all(&broker).await[0].body[..], b"maybe");
    producer.client.shutdown().await;
    broker.shutdown().await;
}

#[tokio::test]
async fn unanswered_half_is_discarded_after_check_max() {
    let broker = TestBroker::start_with(|c| {
        fast_checks(c);
        c.transaction_check_max = 2;
    })
    .await;
    let mut producer = CheckedProducer::connect(&broker).await;
    send_half(&broker, b"orphan", "UNIQ-ORPHAN").await;

    for expected in ["1", "2"] {
        let (_, record) = producer.next_check().await.expect("a check arrives");
        assert_eq!(
            record.properties.get(keys::TRANSACTION_CHECK_TIMES),
            Some(expected)
        );
    }
    // The third round discards instead of checking: an op record, the half queue fully walked.
    assert!(
        wait_until(|| async {
            max_offset(&broker, OP_TOPIC) == 1
                && broker
                    .ctx()
                    .consumer_offsets
                    .query_offset("CID_RMQ_SYS_TRANS", HALF_TOPIC, 0)
                    == max_offset(&broker, HALF_TOPIC)
        })
        .await
    );
    assert!(
        producer.checks.try_recv().is_err(),
        "no third check was sent"
    );
    assert!(pull_all(&broker).await.is_empty());
    producer.client.shutdown().await;
    broker.shutdown().await;
}

#[tokio::test]
async fn pending_half_survives_a_restart() {
    // Checks wait for an hour, so nothing happens to the half before the restart.
    let mut broker = TestBroker::start_with(|c| {
        c.transaction_check_interval_ms = 100;
        c.transaction_timeout_ms = 3_600_000;
    })
    .await;
    let half = send_half(&broker, b"durable", "UNIQ-RESTART").await;
    broker.restart_broker().await;
    assert!(pull_all(&broker).await.is_empty());
    broker
        .invoke_oneway(end_of(&half, transaction_flag::COMMIT))
        .await;
    assert!(wait_until(|| async { pull_all(&broker).await.len() == 1 }).await);

    // With short checks after a second restart, a second pending half is checked.
    let second = send_half(&broker, b"durable 2", "UNIQ-RESTART-2").await;
    broker.config.transaction_timeout_ms = 0;
    broker.restart_broker().await;
    let mut producer = CheckedProducer::connect(&broker).await;
    let (header, _) = producer.next_check().await.expect("a check after restart");
    assert_eq!(header.msg_id.as_deref(), Some("UNIQ-RESTART-2"));
    assert!(header.tran_state_table_offset > second.queue_offset);
    producer.client.shutdown().await;
    broker.shutdown().await;
}

#[tokio::test]
async fn producer_end_after_check_immunity_is_refused() {
    let broker = TestBroker::start().await;
    let mut header = comet_testkit::send_header(
        TOPIC,
        0,
        &[
            (keys::TRANSACTION_PREPARED, "true"),
            (keys::PRODUCER_GROUP, PRODUCER_GROUP),
            (keys::UNIQ_KEY, "UNIQ-IMMUNE"),
            (keys::CHECK_IMMUNITY_TIME_IN_SECONDS, "1"),
        ],
    );
    // Born 10 s ago: its 1 s immunity is long over.
    header.born_timestamp -= 10_000;
    let request = request_with_header(
        RequestCode::SendMessageV2,
        &comet_protocol::headers::SendMessageRequestHeaderV2::from(header),
    )
    .with_body(bytes::Bytes::from_static(b"late"));
    let rsp = broker.invoke(request).await;
    assert_eq!(rsp.code, ResponseCode::Success.code(), "{:?}", rsp.remark);
    let sent: SendMessageResponseHeader = rsp.decode_header().expect("send response header");
    let (_, commit_log_offset) = decode_msg_id(&sent.msg_id);

    let late = end_request(
        commit_log_offset,
        sent.queue_offset,
        "UNIQ-IMMUNE",
        transaction_flag::COMMIT,
        false,
    );
    let rsp = broker.invoke(late).await;
    assert_eq!(rsp.code, ResponseCode::IllegalOperation.code());
    assert_eq!(max_offset(&broker, TOPIC), 0);

    let from_check = end_request(
        commit_log_offset,
        sent.queue_offset,
        "UNIQ-IMMUNE",
        transaction_flag::COMMIT,
        true,
    );
    let rsp = broker.invoke(from_check).await;
    assert_eq!(rsp.code, ResponseCode::Success.code(), "{:?}", rsp.remark);
    assert_eq!(max_offset(&broker, TOPIC), 1);
    broker.shutdown().await;
}
