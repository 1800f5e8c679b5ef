//! The consumer RPCs of the gRPC endpoint on a real broker, called with the tonic client
//! generated from Comet's own protos: QueryAssignment, ReceiveMessage (long polling included),
//! AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue, for ordinary and
//! FIFO groups.

use std::collections::HashMap;
use std::time::Duration;

use comet_broker::BrokerConfig;
use comet_grpc_proto::v2;
use comet_grpc_proto::v2::messaging_service_client::MessagingServiceClient;
use comet_grpc_proto::v2::receive_message_response::Content;
use comet_grpc_proto::v2::settings::PubSub;
use comet_grpc_proto::v2::telemetry_command::Command;
use comet_protocol::body::{SubscriptionGroupConfig, TopicConfig, perm};
use comet_protocol::code::ResponseCode;
use comet_protocol::message::record::decode_records;
use comet_protocol::time::now_millis;
use comet_testkit::grpc::{code, resource, start_grpc};
use comet_testkit::{TestBroker, pull, wait_until};
use futures::StreamExt;
use tonic::transport::Channel;

const CLIENT_ID: &str = "grpc-consumer-test@1@1@abc";
/// Deadline of each call: a hang guard only a failing test reaches.
const CALL_DEADLINE: Duration = Duration::from_secs(30);

/// A broker serving gRPC whose timer wheel has 100 ms slots and whose receive limits are low
/// (1 s invisible time, 500 ms long poll), so redeliveries and empty polls come promptly.
async fn start() -> (TestBroker, MessagingServiceClient<Channel>) {
    start_with(|_| {}).await
}

/// [`start`] with `tweak` applied to the broker's configuration too.
async fn start_with(
    tweak: impl FnOnce(&mut BrokerConfig),
) -> (TestBroker, MessagingServiceClient<Channel>) {
    start_grpc(|c| {
        c.timer_precision_ms = 100;
        c.min_invisible_time_mills_for_recv = 1_000;
        c.grpc_client_consumer_min_long_polling_timeout_millis = 500;
        tweak(c);
    })
    .await
}

fn create_topic(broker: &TestBroker, name: &str, queues: i32, fifo: bool) {
    let mut config = TopicConfig::with_queues(name, queues, queues, perm::PERM_READ_WRITE);
    if fifo {
        config
            .attributes
            .insert("+message.type".to_owned(), "FIFO".to_owned());
    }
    broker.ctx().topic_config.update(config);
}

fn req<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("x-mq-client-id", CLIENT_ID.parse().expect("ASCII"));
    request
        .metadata_mut()
        .insert("x-mq-client-version", "5.0.8".parse().expect("ASCII"));
    request.set_timeout(CALL_DEADLINE);
    request
}

async fn send(
    client: &mut MessagingServiceClient<Channel>,
    topic: &str,
    id: &str,
    group: Option<&str>,
) {
    let message = v2::Message {
        topic: resource(topic),
        user_properties: HashMap::new(),
        system_properties: Some(v2::SystemProperties {
            message_id: id.to_owned(),
            tag: Some("TagA".to_owned()),
            message_type: if group.is_some() {
                v2::MessageType::Fifo
            } else {
                v2::MessageType::Normal
            } as i32,
            body_encoding: v2::Encoding::Identity as i32,
            message_group: group.map(str::to_owned),
            ..Default::default()
        }),
        body: id.as_bytes().to_vec(),
    };
    let response = client
        .send_message(req(v2::SendMessageRequest {
            messages: vec![message],
        }))
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(code(response.status.as_ref()), v2::Code::Ok, "{response:?}");
}

/// What one receive asks for.
#[derive(Clone)]
struct Ask<'a> {
    group: &'a str,
    topic: &'a str,
    batch: i32,
    invisible_ms: u64,
    poll_ms: u64,
    attempt_id: Option<&'a str>,
    /// The call's deadline (`grpc-timeout`).
    deadline: Duration,
    /// A push consumer's receive: the broker picks and renews the invisible time.
    auto_renew: bool,
}

fn ask<'a>(group: &'a str, topic: &'a str) -> Ask<'a> {
    Ask {
        group,
        topic,
        batch: 32,
        invisible_ms: 30_000,
        poll_ms: 500,
        attempt_id: None,
        deadline: CALL_DEADLINE,
        auto_renew: false,
    }
}

fn millis(ms: u64) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(ms / 1000).expect("small"),
        nanos: i32::try_from((ms % 1000) * 1_000_000).expect("small"),
    }
}

/// Receives once: the status and the messages, checking the stream's shape (one status first,
/// one delivery timestamp last, messages only after an OK).
async fn receive(
    client: &mut MessagingServiceClient<Channel>,
    a: &Ask<'_>,
) -> (v2::Code, Vec<v2::Message>) {
    let request = v2::ReceiveMessageRequest {
        group: resource(a.group),
        message_queue: Some(v2::MessageQueue {
            topic: resource(a.topic),
            id: -1,
            ..Default::default()
        }),
        filter_expression: Some(v2::FilterExpression {
            r#type: v2::FilterType::Tag as i32,
            expression: "*".to_owned(),
        }),
        batch_size: a.batch,
        invisible_duration: (!a.auto_renew).then(|| millis(a.invisible_ms)),
        auto_renew: a.auto_renew,
        long_polling_timeout: Some(millis(a.poll_ms)),
        attempt_id: a.attempt_id.map(str::to_owned),
    };
    let mut request = req(request);
    request.set_timeout(a.deadline);
    let mut stream = client
        .receive_message(request)
        .await
        .expect("gRPC OK")
        .into_inner();
    let mut answers = Vec::new();
    while let Some(answer) = stream.next().await {
        answers.push(answer.expect("stream item").content.expect("content"));
    }
    let Some(Content::Status(status)) = answers.first() else {
        panic!("the stream starts with a status: {answers:?}");
    };
    assert!(
        matches!(answers.last(), Some(Content::DeliveryTimestamp(_))),
        "the stream ends with the delivery timestamp: {answers:?}"
    );
    let messages: Vec<v2::Message> = answers[1..answers.len() - 1]
        .iter()
        .map(|c| match c {
            Content::Message(m) => m.clone(),
            other => panic!("only messages between status and timestamp: {other:?}"),
        })
        .collect();
    if status.code() != v2::Code::Ok {
        assert!(messages.is_empty());
    }
    (status.code(), messages)
}

/// Receives until `n` messages came (each call long-polls), at most [`CALL_DEADLINE`] overall.
async fn receive_n(
    client: &mut MessagingServiceClient<Channel>,
    a: &Ask<'_>,
    n: usize,
) -> Vec<v2::Message> {
    let deadline = tokio::time::Instant::now() + CALL_DEADLINE;
    let mut got = Vec::new();
    while got.len() < n && tokio::time::Instant::now() < deadline {
        let (_, messages) = receive(client, a).await;
        got.extend(messages);
    }
    got
}

fn system(m: &v2::Message) -> &v2::SystemProperties {
    m.system_properties.as_ref().expect("system properties")
}

fn handle(m: &v2::Message) -> String {
    system(m).receipt_handle.clone().expect("receipt handle")
}

async fn ack(
    client: &mut MessagingServiceClient<Channel>,
    group: &str,
    topic: &str,
    entries: &[(&str, &str)],
) -> v2::AckMessageResponse {
    client
        .ack_message(req(v2::AckMessageRequest {
            group: resource(group),
            topic: resource(topic),
            entries: entries
                .iter()
                .map(|(id, handle)| v2::AckMessageEntry {
                    message_id: (*id).to_owned(),
                    receipt_handle: (*handle).to_owned(),
                })
                .collect(),
        }))
        .await
        .expect("gRPC OK")
        .into_inner()
}

async fn ack_one(
    client: &mut MessagingServiceClient<Channel>,
    group: &str,
    topic: &str,
    m: &v2::Message,
) -> v2::Code {
    let rsp = ack(client, group, topic, &[(&system(m).message_id, &handle(m))]).await;
    code(rsp.status.as_ref())
}

/// Waits until the revive service has settled every checkpoint written so far.
async fn all_settled(broker: &TestBroker) -> bool {
    use std::sync::atomic::Ordering;
    let stats = &broker.ctx().pop.stats;
    wait_until(|| async {
        let written = stats.checkpoints_written.load(Ordering::Relaxed);
        written > 0 && stats.checkpoints_settled.load(Ordering::Relaxed) >= written
    })
    .await
}

async fn query(
    client: &mut MessagingServiceClient<Channel>,
    group: &str,
    topic: &str,
) -> v2::QueryAssignmentResponse {
    client
        .query_assignment(req(v2::QueryAssignmentRequest {
            topic: resource(topic),
            group: resource(group),
            endpoints: None,
        }))
        .await
        .expect("gRPC OK")
        .into_inner()
}

#[tokio::test]
async fn query_assignment_gives_one_pop_queue_or_every_queue_to_a_fifo_group() {
    let (broker, mut client) = start().await;
    create_topic(&broker, "GrpcAssign", 4, false);
    let mut orderly = SubscriptionGroupConfig::new("assign_fifo");
    orderly.consume_message_orderly = true;
    broker.ctx().subscription_groups.update(orderly);
    let plain = query(&mut client, "assign_plain", "GrpcAssign").await;
    assert_eq!(code(plain.status.as_ref()), v2::Code::Ok);
    let ids: Vec<i32> = plain
        .assignments
        .iter()
        .map(|a| a.message_queue.as_ref().expect("queue").id)
        .collect();
    assert_eq!(ids, vec![-1]);
    let queue = plain.assignments[0].message_queue.as_ref().expect("queue");
    assert_eq!(queue.permission(), v2::Permission::ReadWrite);
    let broker_of = queue.broker.as_ref().expect("broker");
    assert_eq!(
        (broker_of.name.as_str(), broker_of.id),
        (broker.config.broker_name.as_str(), 0)
    );

    let fifo = query(&mut client, "assign_fifo", "GrpcAssign").await;
    let ids: Vec<i32> = fifo
        .assignments
        .iter()
        .map(|a| a.message_queue.as_ref().expect("queue").id)
        .collect();
    assert_eq!(ids, vec![0, 1, 2, 3]);

    let missing = query(&mut client, "assign_plain", "GrpcNoSuchTopic").await;
    assert_eq!(code(missing.status.as_ref()), v2::Code::TopicNotFound);
    broker.ctx().topic_config.update(TopicConfig::with_queues(
        "GrpcWriteOnly",
        4,
        4,
        perm::PERM_WRITE,
    ));
    let forbidden = query(&mut client, "assign_plain", "GrpcWriteOnly").await;
    assert_eq!(code(forbidden.status.as_ref()), v2::Code::Forbidden);
    assert!(forbidden.assignments.is_empty());
    broker.shutdown().await;
}

#[tokio::test]
async fn received_messages_are_acked_once_and_not_delivered_again() {
    let (broker, mut client) = start().await;
    let (topic, group) = ("GrpcRecv", "recv_group");
    create_topic(&broker, topic, 4, false);
    for i in 0..5 {
        send(&mut client, topic, &format!("RECV{i}"), None).await;
    }
    let a = Ask {
        invisible_ms: 2_000,
        ..ask(group, topic)
    };
    let got = receive_n(&mut client, &a, 5).await;
    let mut ids: Vec<String> = got.iter().map(|m| system(m).message_id.clone()).collect();
    ids.sort();
    assert_eq!(ids, vec!["RECV0", "RECV1", "RECV2", "RECV3", "RECV4"]);
    for m in &got {
        let s = system(m);
        assert_eq!(s.delivery_attempt, Some(1));
        assert_eq!(s.tag.as_deref(), Some("TagA"));
        assert_eq!(m.body, s.message_id.as_bytes());
        assert!(
            !m.user_properties.contains_key("POP_CK"),
            "the broker's handle is not a user property"
        );
    }
    let entries: Vec<(String, String)> = got
        .iter()
        .map(|m| (system(m).message_id.clone(), handle(m)))
        .collect();
    let refs: Vec<(&str, &str)> = entries
        .iter()
        .map(|(i, h)| (i.as_str(), h.as_str()))
        .collect();
    let acked = ack(&mut client, group, topic, &refs).await;
    assert_eq!(code(acked.status.as_ref()), v2::Code::Ok, "{acked:?}");
    assert_eq!(acked.entries.len(), 5);
    assert!(
        acked
            .entries
            .iter()
            .all(|e| code(e.status.as_ref()) == v2::Code::Ok)
    );
    // Once the revive service has seen every checkpoint past its invisible time, nothing
    // comes back.
    assert!(all_settled(&broker).await, "checkpoints settled");
    let (status, again) = receive(&mut client, &a).await;
    assert_eq!(status, v2::Code::MessageNotFound, "{again:?}");
    broker.shutdown().await;
}

#[tokio::test]
async fn an_unacked_message_comes_back_with_delivery_attempt_two() {
    let (broker, mut client) = start().await;
    let (topic, group) = ("GrpcRedeliver", "redeliver_group");
    create_topic(&broker, topic, 2, false);
    send(&mut client, topic, "AGAIN", None).await;
    let a = Ask {
        invisible_ms: 1_000,
        ..ask(group, topic)
    };
    let first = receive_n(&mut client, &a, 1).await;
    assert_eq!(first.len(), 1);
    assert_eq!(system(&first[0]).delivery_attempt, Some(1));
    let a = Ask {
        poll_ms: 5_000,
        invisible_ms: 30_000,
        ..a
    };
    let second = receive_n(&mut client, &a, 1).await;
    assert_eq!(second.len(), 1, "redelivered after the invisible time");
    let s = system(&second[0]);
    assert_eq!(
        (s.message_id.as_str(), s.delivery_attempt),
        ("AGAIN", Some(2))
    );
    assert_eq!(second[0].body, b"AGAIN");
    assert_eq!(
        second[0].topic.as_ref().map(|t| t.name.as_str()),
        Some(topic)
    );
    // The first handle's invisible time is over; the second's is not.
    assert_eq!(
        ack_one(&mut client, group, topic, &first[0]).await,
        v2::Code::InvalidReceiptHandle
    );
    assert_eq!(
        ack_one(&mut client, group, topic, &second[0]).await,
        v2::Code::Ok
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn changing_the_invisible_duration_answers_a_new_handle_and_brings_the_message_back() {
    let (broker, mut client) = start().await;
    let (topic, group) = ("GrpcChange", "change_group");
    create_topic(&broker, topic, 2, false);
    send(&mut client, topic, "CHANGE", None).await;
    let a = ask(group, topic);
    let got = receive_n(&mut client, &a, 1).await;
    assert_eq!(got.len(), 1);
    let old = handle(&got[0]);
    let changed = client
        .change_invisible_duration(req(v2::ChangeInvisibleDurationRequest {
            group: resource(group),
            topic: resource(topic),
            receipt_handle: old.clone(),
            invisible_duration: Some(millis(1_000)),
            message_id: "CHANGE".to_owned(),
        }))
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(code(changed.status.as_ref()), v2::Code::Ok, "{changed:?}");
    assert_ne!(changed.receipt_handle, old);
    assert_eq!(
        changed.receipt_handle.split(' ').nth(2),
        Some("1000"),
        "the new handle carries the new invisible time: {}",
        changed.receipt_handle
    );
    // Back after one second instead of thirty.
    let a = Ask {
        poll_ms: 5_000,
        ..a
    };
    let back = receive_n(&mut client, &a, 1).await;
    assert_eq!(
        back.len(),
        1,
        "the message came back after the new invisible time"
    );
    assert_eq!(system(&back[0]).delivery_attempt, Some(2));
    assert_eq!(
        ack_one(&mut client, group, topic, &back[0]).await,
        v2::Code::Ok
    );

    let garbage = client
        .change_invisible_duration(req(v2::ChangeInvisibleDurationRequest {
            group: resource(group),
            topic: resource(topic),
            receipt_handle: "not a handle".to_owned(),
            invisible_duration: Some(millis(1_000)),
            message_id: "CHANGE".to_owned(),
        }))
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(
        code(garbage.status.as_ref()),
        v2::Code::InvalidReceiptHandle
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn a_forwarded_message_lands_in_the_dead_letter_queue() {
    let (broker, mut client) = start().await;
    let (topic, group) = ("GrpcDlq", "dlq_group");
    create_topic(&broker, topic, 2, false);
    send(&mut client, topic, "DEAD", None).await;
    let a = Ask {
        invisible_ms: 2_000,
        ..ask(group, topic)
    };
    let got = receive_n(&mut client, &a, 1).await;
    assert_eq!(got.len(), 1);
    let forwarded = client
        .forward_message_to_dead_letter_queue(req(v2::ForwardMessageToDeadLetterQueueRequest {
            group: resource(group),
            topic: resource(topic),
            receipt_handle: handle(&got[0]),
            message_id: "DEAD".to_owned(),
            delivery_attempt: 1,
            max_delivery_attempts: 17,
        }))
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(
        code(forwarded.status.as_ref()),
        v2::Code::Ok,
        "{forwarded:?}"
    );
    let dlq = format!("%DLQ%{group}");
    let rsp = broker.invoke(pull("dlq_reader", &dlq, 0, 0, 32)).await;
    assert_eq!(rsp.code, ResponseCode::Success.code(), "{rsp:?}");
    let stored = decode_records(&rsp.body.clone().unwrap_or_default(), true).expect("records");
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].body.as_ref(), b"DEAD");
    assert_eq!(stored[0].uniq_key(), Some("DEAD"));
    // It was acked too: nothing comes back once its checkpoint is settled.
    assert!(all_settled(&broker).await, "checkpoints settled");
    let (status, again) = receive(&mut client, &a).await;
    assert_eq!(status, v2::Code::MessageNotFound, "{again:?}");
    broker.shutdown().await;
}

#[tokio::test]
async fn a_held_receive_is_woken_by_a_send() {
    let (broker, mut client) = start().await;
    let (topic, group) = ("GrpcLongPoll", "long_poll_group");
    create_topic(&broker, topic, 2, false);
    // A first empty poll makes the group start reading this (empty) topic.
    let (status, _) = receive(&mut client, &ask(group, topic)).await;
    assert_eq!(status, v2::Code::MessageNotFound);
    let mut receiver = client.clone();
    let held = tokio::spawn(async move {
        let a = Ask {
            poll_ms: 20_000,
            ..ask(group, topic)
        };
        receive(&mut receiver, &a).await
    });
    assert!(
        wait_until(|| async { broker.ctx().pop.held_count() > 0 }).await,
        "the receive is held"
    );
    send(&mut client, topic, "WAKE", None).await;
    let (status, messages) = held.await.expect("receive task");
    assert_eq!(status, v2::Code::Ok);
    assert_eq!(messages.len(), 1);
    assert_eq!(system(&messages[0]).message_id, "WAKE");
    broker.shutdown().await;
}

#[tokio::test]
async fn receive_checks_its_times_and_ack_reports_each_entry() {
    let (broker, mut client) = start().await;
    let (topic, group) = ("GrpcChecks", "checks_group");
    create_topic(&broker, topic, 2, false);
    let short = Ask {
        invisible_ms: 999,
        ..ask(group, topic)
    };
    assert_eq!(
        receive(&mut client, &short).await.0,
        v2::Code::IllegalInvisibleTime
    );
    let long = Ask {
        invisible_ms: 12 * 3600 * 1000 + 1,
        ..ask(group, topic)
    };
    assert_eq!(
        receive(&mut client, &long).await.0,
        v2::Code::IllegalInvisibleTime
    );
    // A long poll longer than the call's deadline ends before it, with an answer.
    let bounded = Ask {
        poll_ms: 20_000,
        deadline: Duration::from_secs(2),
        ..ask(group, topic)
    };
    assert_eq!(
        receive(&mut client, &bounded).await.0,
        v2::Code::MessageNotFound
    );
    send(&mut client, topic, "MIXED", None).await;
    let got = receive_n(&mut client, &ask(group, topic), 1).await;
    assert_eq!(got.len(), 1);
    let good = handle(&got[0]);
    let rsp = ack(
        &mut client,
        group,
        topic,
        &[("MIXED", &good), ("OTHER", "0 1 2 0 0 nowhere 0")],
    )
    .await;
    assert_eq!(code(rsp.status.as_ref()), v2::Code::MultipleResults);
    let codes: Vec<v2::Code> = rsp
        .entries
        .iter()
        .map(|e| code(e.status.as_ref()))
        .collect();
    assert_eq!(codes, vec![v2::Code::Ok, v2::Code::InvalidReceiptHandle]);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_fifo_group_receives_a_message_group_in_order_one_batch_at_a_time() {
    let (broker, mut client) = start().await;
    let (topic, group) = ("GrpcFifoRecv", "fifo_group");
    create_topic(&broker, topic, 4, true);
    let mut orderly = SubscriptionGroupConfig::new(group);
    orderly.consume_message_orderly = true;
    broker.ctx().subscription_groups.update(orderly);
    for i in 0..4 {
        send(&mut client, topic, &format!("STEP{i}"), Some("order-1")).await;
    }
    let a = Ask {
        batch: 2,
        attempt_id: Some("attempt-1"),
        ..ask(group, topic)
    };
    let first = receive_n(&mut client, &a, 2).await;
    let ids: Vec<&str> = first
        .iter()
        .map(|m| system(m).message_id.as_str())
        .collect();
    assert_eq!(ids, vec!["STEP0", "STEP1"]);
    // The queue is blocked while the batch is un-acked: another attempt gets nothing, the same
    // attempt gets the same batch again.
    let other = Ask {
        attempt_id: Some("attempt-2"),
        ..a.clone()
    };
    assert_eq!(
        receive(&mut client, &other).await.0,
        v2::Code::MessageNotFound
    );
    let (status, same) = receive(&mut client, &a).await;
    assert_eq!(status, v2::Code::Ok);
    let ids: Vec<&str> = same.iter().map(|m| system(m).message_id.as_str()).collect();
    assert_eq!(ids, vec!["STEP0", "STEP1"]);
    for m in &same {
        assert_eq!(ack_one(&mut client, group, topic, m).await, v2::Code::Ok);
    }
    let next = receive_n(&mut client, &other, 2).await;
    let ids: Vec<&str> = next.iter().map(|m| system(m).message_id.as_str()).collect();
    assert_eq!(ids, vec!["STEP2", "STEP3"]);
    broker.shutdown().await;
}

/// A push consumer's open Telemetry stream: dropping it ends the client's half, as a client that
/// goes away ends it.
struct Attached {
    _inbound: tonic::Streaming<v2::TelemetryCommand>,
    _close: tokio::sync::oneshot::Sender<()>,
}

/// Opens a Telemetry stream announcing a push consumer of `group` on `topic`, and waits for the
/// settings answer.
async fn attach_push_consumer(
    client: &mut MessagingServiceClient<Channel>,
    group: &str,
    topic: &str,
) -> Attached {
    let settings = v2::TelemetryCommand {
        status: None,
        command: Some(Command::Settings(v2::Settings {
            client_type: Some(v2::ClientType::PushConsumer as i32),
            request_timeout: Some(millis(3_000)),
            pub_sub: Some(PubSub::Subscription(v2::Subscription {
                group: resource(group),
                subscriptions: vec![v2::SubscriptionEntry {
                    topic: resource(topic),
                    expression: Some(v2::FilterExpression {
                        r#type: v2::FilterType::Tag as i32,
                        expression: "*".to_owned(),
                    }),
                }],
                ..Default::default()
            })),
            ..Default::default()
        })),
    };
    let (close, closed) = tokio::sync::oneshot::channel::<()>();
    let until_closed = futures::stream::once(closed).filter_map(|_| async { None });
    let outbound = futures::stream::iter(vec![settings]).chain(until_closed);
    let mut request = tonic::Request::new(outbound);
    request
        .metadata_mut()
        .insert("x-mq-client-id", CLIENT_ID.parse().expect("ASCII"));
    let mut inbound = client
        .telemetry(request)
        .await
        .expect("stream opens")
        .into_inner();
    let answer = tokio::time::timeout(CALL_DEADLINE, inbound.message())
        .await
        .expect("settings answered")
        .expect("gRPC OK")
        .expect("one command");
    assert_eq!(code(answer.status.as_ref()), v2::Code::Ok);
    Attached {
        _inbound: inbound,
        _close: close,
    }
}

#[tokio::test]
async fn a_push_consumers_message_stays_invisible_until_acked() {
    let (broker, mut client) = start_with(|c| c.default_invisible_time_mills = 2_000).await;
    let (topic, group) = ("GrpcRenew", "renew_group");
    create_topic(&broker, topic, 2, false);
    let _telemetry = attach_push_consumer(&mut client, group, topic).await;
    send(&mut client, topic, "RENEW", None).await;
    let a = Ask {
        auto_renew: true,
        ..ask(group, topic)
    };
    let got = receive_n(&mut client, &a, 1).await;
    assert_eq!(got.len(), 1);
    let first = handle(&got[0]);
    let fields: Vec<i64> = first
        .split(' ')
        .take(3)
        .map(|f| f.parse().expect("number"))
        .collect();
    assert_eq!(fields[2], 2_000, "popped with defaultInvisibleTimeMills");
    // Well past the first handle's invisible time, the message has not come back...
    let expired_at = fields[1] + fields[2];
    assert!(wait_until(|| async { now_millis() > expired_at + 2_000 }).await);
    let (status, again) = receive(&mut client, &a).await;
    assert_eq!(status, v2::Code::MessageNotFound, "{again:?}");
    // ...and the client's first handle still acks it: the broker acks its renewed one.
    assert_eq!(
        ack_one(&mut client, group, topic, &got[0]).await,
        v2::Code::Ok
    );
    assert!(all_settled(&broker).await, "checkpoints settled");
    let (status, again) = receive(&mut client, &a).await;
    assert_eq!(status, v2::Code::MessageNotFound, "{again:?}");
    broker.shutdown().await;
}

#[tokio::test]
async fn a_push_consumers_message_comes_back_once_its_client_is_gone() {
    let (broker, mut client) = start().await;
    let (topic, group) = ("GrpcRenewGone", "renew_gone_group");
    create_topic(&broker, topic, 2, false);
    let telemetry = attach_push_consumer(&mut client, group, topic).await;
    send(&mut client, topic, "ORPHAN", None).await;
    let a = Ask {
        auto_renew: true,
        ..ask(group, topic)
    };
    let got = receive_n(&mut client, &a, 1).await;
    assert_eq!(got.len(), 1);
    // The client goes away: its Telemetry stream ends, and the message comes back within about
    // a second, long before the 60 s it was popped with.
    drop(telemetry);
    let plain = Ask {
        poll_ms: 5_000,
        ..ask(group, topic)
    };
    let back = receive_n(&mut client, &plain, 1).await;
    assert_eq!(back.len(), 1, "the message came back");
    let s = system(&back[0]);
    assert_eq!(
        (s.message_id.as_str(), s.delivery_attempt),
        ("ORPHAN", Some(2))
    );
    broker.shutdown().await;
}
