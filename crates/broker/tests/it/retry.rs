//! CONSUMER_SEND_MSG_BACK end to end: a message given back lands in
//! SCHEDULE_TOPIC_XXXX, then in `%RETRY%<group>` after its delay, with RETRY_TOPIC,
//! ORIGIN_MESSAGE_ID and the reconsume count; the 17th failure goes to `%DLQ%<group>`. Delay
//! levels are all 1 s here so the sixteen rounds take seconds, not hours.

use comet_protocol::RemotingCommand;
use comet_protocol::body::perm;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CommandHeaderExt, ConsumerSendMsgBackRequestHeader, PullMessageRequestHeader,
    SendMessageResponseHeader, pull_sys_flag, request_with_header,
};
use comet_protocol::message::MessageExt;
use comet_protocol::message::properties::keys;
use comet_protocol::message::record::decode_records;
use comet_testkit::{TestBroker, send_v2, wait_until};

const TOPIC: &str = "RetryTopic";
const GROUP: &str = "retry_group";
const RETRY: &str = "%RETRY%retry_group";
const DLQ: &str = "%DLQ%retry_group";
const SCHEDULE: &str = "SCHEDULE_TOPIC_XXXX";
/// Eighteen levels of one second each.
const FAST_DELAY_LEVELS: &str = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s";
const MAX_RECONSUME: i32 = 16;

async fn start() -> TestBroker {
    TestBroker::start_with(|c| c.message_delay_level = FAST_DELAY_LEVELS.to_owned()).await
}

fn send_back(offset: i64, delay_level: i32) -> RemotingCommand {
    let header = ConsumerSendMsgBackRequestHeader {
        offset,
        group: GROUP.to_owned(),
        delay_level,
        origin_topic: Some(TOPIC.to_owned()),
        max_reconsume_times: Some(MAX_RECONSUME),
        ..Default::default()
    };
    request_with_header(RequestCode::ConsumerSendMsgBack, &header)
}

async fn wait_max(broker: &TestBroker, topic: &str, queue_id: i32, at_least: i64) {
    let store = broker.store().clone();
    let name = topic.to_owned();
    assert!(
        wait_until(|| {
            let (store, name) = (store.clone(), name.clone());
            async move { store.get_max_offset_in_queue(&name, queue_id) >= at_least }
        })
        .await,
        "{topic}:{queue_id} never reached {at_least}"
    );
}

/// The message at `offset` of `topic` queue 0, pulled with `*`.
async fn pull_one(broker: &TestBroker, topic: &str, offset: i64) -> MessageExt {
    let header = PullMessageRequestHeader {
        consumer_group: GROUP.to_owned(),
        topic: topic.to_owned(),
        queue_id: 0,
        queue_offset: offset,
        max_msg_nums: 1,
        sys_flag: pull_sys_flag::build(false, false, true, false),
        subscription: Some("*".to_owned()),
        expression_type: Some("TAG".to_owned()),
        ..Default::default()
    };
    let rsp = broker
        .invoke(request_with_header(RequestCode::PullMessage, &header))
        .await;
    assert_eq!(rsp.code, 0, "pull {topic}@{offset}: {rsp:?}");
    let body = rsp.body.clone().unwrap_or_default();
    // The properties the broker adds on send (MSG_REGION, CLUSTER, TRACE_ON) travel with every
    // re-put (send-back, delay delivery, DLQ) exactly once: counted in the raw record, since
    // decoding keeps only the last of duplicate keys.
    for key in [keys::MSG_REGION, keys::CLUSTER, keys::TRACE_SWITCH] {
        let needle = format!("{key}\u{1}");
        let count = body
            .windows(needle.len())
            .filter(|w| *w == needle.as_bytes())
            .count();
        assert_eq!(count, 1, "{topic}@{offset}: {key} stored {count} times");
    }
    let mut msgs = decode_records(&body, true).expect("records");
    assert_eq!(msgs.len(), 1);
    msgs.remove(0)
}

#[tokio::test]
async fn retries_go_through_the_schedule_topic_then_the_dlq() {
    let broker = start().await;
    let rsp = broker
        .invoke(send_v2(
            TOPIC,
            0,
            b"will fail",
            &[("TAGS", "TagA"), ("KEYS", "k1")],
        ))
        .await;
    assert_eq!(rsp.code, 0);
    let sent: SendMessageResponseHeader = rsp.decode_header().expect("send header");
    let (_, original_offset) = comet_testkit::decode_msg_id(&sent.msg_id);
    wait_max(&broker, TOPIC, 0, 1).await;

    // First failure: broker-chosen level 3 → SCHEDULE_TOPIC_XXXX queue 2, then %RETRY%.
    let schedule_before = broker.store().get_max_offset_in_queue(SCHEDULE, 2);
    let rsp = broker.invoke(send_back(original_offset, 0)).await;
    assert_eq!(rsp.code, 0, "{rsp:?}");
    wait_max(&broker, SCHEDULE, 2, schedule_before + 1).await;
    wait_max(&broker, RETRY, 0, 1).await;
    let mut retried = pull_one(&broker, RETRY, 0).await;
    assert_eq!(retried.topic, RETRY);
    assert_eq!(&retried.body[..], b"will fail");
    assert_eq!(retried.tags(), Some("TagA"));
    assert_eq!(retried.properties.get(keys::RETRY_TOPIC), Some(TOPIC));
    assert_eq!(
        retried.properties.get(keys::ORIGIN_MESSAGE_ID),
        Some(sent.msg_id.as_str())
    );
    assert_eq!(retried.reconsume_times, 1);
    let retry_config = broker
        .ctx()
        .topic_config
        .select(RETRY)
        .expect("retry topic exists");
    assert_eq!(retry_config.perm, perm::PERM_READ_WRITE);

    // Failures 2..=16 keep cycling through the retry topic.
    for round in 2..=MAX_RECONSUME {
        let rsp = broker.invoke(send_back(retried.commit_log_offset, 0)).await;
        assert_eq!(rsp.code, 0, "round {round}: {rsp:?}");
        wait_max(&broker, RETRY, 0, i64::from(round)).await;
        retried = pull_one(&broker, RETRY, i64::from(round - 1)).await;
        assert_eq!(retried.reconsume_times, round);
        assert_eq!(retried.properties.get(keys::RETRY_TOPIC), Some(TOPIC));
        assert_eq!(
            retried.properties.get(keys::ORIGIN_MESSAGE_ID),
            Some(sent.msg_id.as_str())
        );
    }

    // The 17th failure: retries are used up, the message is dead-lettered at once.
    let rsp = broker.invoke(send_back(retried.commit_log_offset, 0)).await;
    assert_eq!(rsp.code, 0, "{rsp:?}");
    wait_max(&broker, DLQ, 0, 1).await;
    let dead = pull_one(&broker, DLQ, 0).await;
    assert_eq!(dead.topic, DLQ);
    assert_eq!(&dead.body[..], b"will fail");
    assert_eq!(dead.reconsume_times, MAX_RECONSUME + 1);
    assert_eq!(dead.properties.get(keys::RETRY_TOPIC), Some(TOPIC));
    assert_eq!(
        dead.properties.get(keys::ORIGIN_MESSAGE_ID),
        Some(sent.msg_id.as_str())
    );
    let dlq = broker
        .ctx()
        .topic_config
        .select(DLQ)
        .expect("DLQ topic exists");
    assert_eq!(
        (dlq.read_queue_nums, dlq.write_queue_nums, dlq.perm),
        (1, 1, perm::PERM_READ_WRITE)
    );
    assert_eq!(
        broker.store().get_max_offset_in_queue(RETRY, 0),
        i64::from(MAX_RECONSUME),
        "nothing more went to the retry topic"
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn negative_level_goes_straight_to_the_dlq_and_bad_requests_are_refused() {
    let broker = start().await;
    let rsp = broker.invoke(send_v2(TOPIC, 0, b"poison", &[])).await;
    let sent: SendMessageResponseHeader = rsp.decode_header().expect("send header");
    let (_, offset) = comet_testkit::decode_msg_id(&sent.msg_id);
    wait_max(&broker, TOPIC, 0, 1).await;

    let rsp = broker.invoke(send_back(offset, -1)).await;
    assert_eq!(rsp.code, 0, "{rsp:?}");
    wait_max(&broker, DLQ, 0, 1).await;
    let dead = pull_one(&broker, DLQ, 0).await;
    assert_eq!((dead.reconsume_times, &dead.body[..]), (1, &b"poison"[..]));
    assert_eq!(broker.store().get_max_offset_in_queue(RETRY, 0), 0);

    let rsp = broker.invoke(send_back(offset + 7_000_000, 0)).await;
    assert_eq!(rsp.code, ResponseCode::SystemError.code());
    assert!(
        rsp.remark
            .as_deref()
            .is_some_and(|r| r.contains("look message by offset failed"))
    );

    let mut missing = send_back(offset, 0);
    missing.ext_mut().remove("group");
    let rsp = broker.invoke(missing).await;
    assert_eq!(rsp.code, ResponseCode::SystemError.code());
    assert!(rsp.remark.as_deref().is_some_and(|r| r.contains("group")));
    broker.shutdown().await;
}
