//! Timer messages (TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS) end to end: parked in
//! `rmq_sys_wheel_timer` as RocketMQ stores them, invisible in their topic until their time,
//! refused beyond the maximum delay, delivered after a broker restart, rolled when further
//! ahead than the wheel's window, kept across a restart three days ahead and found by key.

use base64::Engine;
use comet_protocol::headers::CommandHeaderExt;
use comet_protocol::message::MessageExt;
use comet_protocol::message::record::decode_records;
use comet_protocol::naming::TIMER_TOPIC;
use comet_testkit::*;

const SUCCESS: i32 = 0;
const SYSTEM_ERROR: i32 = 1;
const MESSAGE_ILLEGAL: i32 = 13;

fn now_ms() -> i64 {
    comet_protocol::time::now_millis()
}

/// The messages of `topic` queue `queue_id` from offset 0.
async fn pull_all(broker: &TestBroker, topic: &str, queue_id: i32) -> Vec<MessageExt> {
    let rsp = broker
        .invoke(pull("timer_group", topic, queue_id, 0, 32))
        .await;
    if rsp.code != SUCCESS {
        return Vec::new();
    }
    decode_records(&rsp.body.clone().unwrap_or_default(), true).expect("decodes")
}

/// Waits (up to [`WAIT_DEADLINE`]) until `topic` queue 0 holds `n` messages; returns them.
async fn wait_delivered(broker: &TestBroker, topic: &str, n: usize) -> Vec<MessageExt> {
    let deadline = tokio::time::Instant::now() + WAIT_DEADLINE;
    loop {
        let seen = pull_all(broker, topic, 0).await;
        if seen.len() >= n {
            return seen;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} of {n} timer messages delivered",
            seen.len()
        );
        tokio::time::sleep(POLL).await;
    }
}

fn body_text(m: &MessageExt) -> String {
    String::from_utf8_lossy(&m.body).into_owned()
}

#[tokio::test]
async fn a_relative_delay_is_parked_in_the_timer_topic_until_due() {
    let broker = TestBroker::start().await;
    let topic = "TimerTopicA";
    let sent_at = now_ms();
    let rsp = broker
        .invoke(send_v2(
            topic,
            0,
            b"later",
            &[("TIMER_DELAY_MS", "2000"), ("TAGS", "t")],
        ))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let recall = rsp
        .ext("recallHandle")
        .expect("a parked message has a recall handle");
    let recall = String::from_utf8(
        base64::engine::general_purpose::URL_SAFE
            .decode(recall)
            .expect("base64"),
    )
    .expect("text");

    // Stored as RocketMQ stores it: timer topic queue 0, real topic and slot in properties.
    assert!(
        wait_until(|| async { broker.store().get_max_offset_in_queue(TIMER_TOPIC, 0) == 1 }).await
    );
    let parked = pull_all(&broker, TIMER_TOPIC, 0).await;
    assert_eq!(parked.len(), 1);
    let p = &parked[0].properties;
    assert_eq!(p.get("REAL_TOPIC"), Some(topic));
    assert_eq!(p.get("REAL_QID"), Some("0"));
    assert_eq!(p.get("TIMER_DELAY_MS"), Some("2000"));
    let out_ms: i64 = p
        .get("TIMER_OUT_MS")
        .expect("TIMER_OUT_MS")
        .parse()
        .unwrap();
    assert_eq!(
        out_ms % 1000,
        0,
        "the slot time is a multiple of the precision"
    );
    assert!(out_ms + 1000 >= sent_at + 2000);
    let uniq = parked[0].uniq_key().expect("UNIQ_KEY");
    assert_eq!(recall, format!("v1 {topic} broker-a {} {uniq}", out_ms + 1));

    let delivered = wait_delivered(&broker, topic, 1).await;
    let m = &delivered[0];
    assert_eq!(body_text(m), "later");
    assert!(
        m.store_timestamp >= sent_at + 2000,
        "delivered {} ms early",
        sent_at + 2000 - m.store_timestamp
    );
    // Apache 5.3.3 delivers with the parked record's properties: REAL_TOPIC/REAL_QID stay.
    assert_eq!(m.properties.get("REAL_TOPIC"), Some(topic));
    assert_eq!(m.properties.get("REAL_QID"), Some("0"));
    assert_eq!(m.tags(), Some("t"));
    assert!(m.properties.get("TIMER_DEQUEUE_MS").is_some());
    assert!(m.properties.get("TIMER_ENQUEUE_MS").is_some());
    assert_eq!(
        m.properties.get("TIMER_OUT_MS"),
        Some(out_ms.to_string().as_str())
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn a_past_delivery_time_is_delivered_at_once() {
    let broker = TestBroker::start().await;
    let topic = "TimerTopicPast";
    let past = (now_ms() - 60_000).to_string();
    let rsp = broker
        .invoke(send_v2(
            topic,
            0,
            b"now",
            &[("TIMER_DELIVER_MS", past.as_str())],
        ))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let h: comet_protocol::headers::SendMessageResponseHeader =
        rsp.decode_header().expect("send header");
    assert_eq!(h.queue_offset, 0, "stored straight into its topic");
    assert_eq!(
        rsp.ext("recallHandle"),
        None,
        "nothing parked, nothing to recall"
    );
    assert_eq!(broker.store().get_max_offset_in_queue(TIMER_TOPIC, 0), 0);
    let delivered = wait_delivered(&broker, topic, 1).await;
    assert_eq!(
        delivered[0].properties.get("TIMER_DELIVER_MS"),
        Some(past.as_str())
    );
    assert_eq!(delivered[0].properties.get("TIMER_OUT_MS"), None);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_time_beyond_the_maximum_delay_is_refused() {
    let broker = TestBroker::start_with(|c| c.timer_max_delay_sec = 60).await;
    let far = (now_ms() + 3_600_000).to_string();
    let rsp = broker
        .invoke(send_v2(
            "TimerTopicFar",
            0,
            b"x",
            &[("TIMER_DELIVER_MS", far.as_str())],
        ))
        .await;
    assert_eq!(rsp.code, MESSAGE_ILLEGAL);
    let remark = rsp.remark.unwrap_or_default();
    assert!(
        remark.starts_with(
            "timer message illegal, the delay time should not be bigger than the max delay 60000ms"
        ),
        "{remark}"
    );
    let rsp = broker
        .invoke(send_v2(
            "TimerTopicFar",
            0,
            b"x",
            &[("TIMER_DELAY_SEC", "soon")],
        ))
        .await;
    assert_eq!(rsp.code, MESSAGE_ILLEGAL);
    assert_eq!(
        broker.store().get_max_offset_in_queue("TimerTopicFar", 0),
        0
    );
    assert_eq!(broker.store().get_max_offset_in_queue(TIMER_TOPIC, 0), 0);
    broker.shutdown().await;
}

#[tokio::test]
async fn timer_messages_are_refused_when_the_wheel_is_off() {
    let broker = TestBroker::start_with(|c| c.timer_wheel_enable = false).await;
    let rsp = broker
        .invoke(send_v2(
            "TimerTopicOff",
            0,
            b"x",
            &[("TIMER_DELAY_MS", "2000")],
        ))
        .await;
    assert_eq!(rsp.code, SYSTEM_ERROR);
    assert_eq!(
        rsp.remark.as_deref(),
        Some("accurate timer message is not enabled, timerWheelEnable is false")
    );
    assert!(broker.ctx().topic_config.select(TIMER_TOPIC).is_none());
    broker.shutdown().await;
}

#[tokio::test]
async fn parked_messages_are_delivered_after_a_restart_and_not_before_their_time() {
    let mut broker = TestBroker::start().await;
    assert!(broker.ctx().topic_config.select(TIMER_TOPIC).is_some());
    let topic = "TimerTopicRestart";
    let sent_at = now_ms();
    for i in 0..20 {
        let delay = (3000 + (i % 4) * 700).to_string();
        let rsp = broker
            .invoke(send_v2(
                topic,
                0,
                format!("m{i}").as_bytes(),
                &[("TIMER_DELAY_MS", delay.as_str())],
            ))
            .await;
        assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    }
    assert!(
        wait_until(|| async {
            broker
                .ctx()
                .timer
                .stats()
                .is_some_and(|s| s.enqueue_offset == 20)
        })
        .await,
        "the timer messages were never parked"
    );
    broker.restart_broker().await;
    let stats = broker.ctx().timer.stats().expect("timer on");
    assert_eq!(
        stats.enqueue_offset, 20,
        "the checkpoint kept the enqueue progress"
    );

    let delivered = wait_delivered(&broker, topic, 20).await;
    let mut bodies: Vec<String> = delivered.iter().map(body_text).collect();
    bodies.sort();
    bodies.dedup();
    assert_eq!(bodies.len(), 20, "every message delivered");
    for m in &delivered {
        let i: i64 = body_text(m)[1..].parse().unwrap();
        let due = sent_at + 3000 + (i % 4) * 700;
        assert!(
            m.store_timestamp >= due,
            "m{i} delivered {} ms early",
            due - m.store_timestamp
        );
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn a_message_beyond_the_roll_window_rolls_and_still_arrives_on_time() {
    let broker = TestBroker::start_with(|c| c.timer_roll_window_slot = 2).await;
    let topic = "TimerTopicRoll";
    let sent_at = now_ms();
    let rsp = broker
        .invoke(send_v2(topic, 0, b"far", &[("TIMER_DELAY_SEC", "5")]))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let delivered = wait_delivered(&broker, topic, 1).await;
    let m = &delivered[0];
    assert!(m.store_timestamp >= sent_at + 5000);
    let rolls: i32 = m
        .properties
        .get("TIMER_ROLL_TIMES")
        .expect("rolled at least once")
        .parse()
        .unwrap();
    assert!(rolls >= 1);
    // Each roll went through the timer topic again.
    assert!(broker.store().get_max_offset_in_queue(TIMER_TOPIC, 0) >= 2);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_message_three_days_ahead_is_kept_across_a_restart_and_listed() {
    let mut broker = TestBroker::start().await;
    let topic = "TimerTopicFar";
    let max_delay_sec = i64::try_from(broker.ctx().config.timer_max_delay_sec).unwrap();
    assert_eq!(max_delay_sec, 259_200, "three days is the default maximum");
    // A minute short of the maximum, so the clock moving during the test keeps it legal.
    let delay_sec = (max_delay_sec - 60).to_string();
    let sent_at = now_ms();
    let rsp = broker
        .invoke(send_v2(
            topic,
            0,
            b"far ahead",
            &[("TIMER_DELAY_SEC", delay_sec.as_str()), ("KEYS", "far-key")],
        ))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let parked = |broker: &TestBroker| {
        broker
            .ctx()
            .timer
            .stats()
            .is_some_and(|s| s.enqueue_offset == 1 && s.parked == 1)
    };
    assert!(
        wait_until(|| async { parked(&broker) }).await,
        "never parked"
    );

    broker.restart_broker().await;
    assert!(parked(&broker), "the wheel lost it across the restart");
    assert!(
        pull_all(&broker, topic, 0).await.is_empty(),
        "visible in its topic days early"
    );
    // Listed where it waits: by key in the timer topic, with its topic and due time.
    assert!(
        wait_indexed(broker.store(), TIMER_TOPIC, "far-key").await,
        "not found by key after the restart"
    );
    let found = broker
        .store()
        .query_message(TIMER_TOPIC, "far-key", 4, 0, i64::MAX);
    let records: Vec<MessageExt> = found
        .messages
        .iter()
        .flat_map(|b| decode_records(b, true).expect("decodes"))
        .collect();
    assert_eq!(records.len(), 1);
    let m = &records[0];
    assert_eq!(body_text(m), "far ahead");
    assert_eq!(m.properties.get("REAL_TOPIC"), Some(topic));
    let out_ms: i64 = m
        .properties
        .get("TIMER_OUT_MS")
        .expect("due time kept")
        .parse()
        .unwrap();
    let due = sent_at + (max_delay_sec - 60) * 1000;
    assert!(
        (due - 2000..=now_ms() + (max_delay_sec - 60) * 1000).contains(&out_ms),
        "due at {out_ms}, asked for about {due}"
    );
    broker.shutdown().await;
}
