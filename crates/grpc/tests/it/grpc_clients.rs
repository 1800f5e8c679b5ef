//! gRPC clients in the broker's client tables: a Telemetry stream's Settings register a producer
//! under each of its topics and a consumer in its group (with the language of `x-mq-language`),
//! NotifyClientTermination and the end of the stream remove them, and the transaction check
//! reaches a gRPC producer as a RecoverOrphanedTransactionCommand on its stream, answered with
//! EndTransaction.

use std::collections::HashMap;
use std::time::Duration;

use comet_grpc_proto::v2;
use comet_grpc_proto::v2::messaging_service_client::MessagingServiceClient;
use comet_grpc_proto::v2::settings::PubSub;
use comet_grpc_proto::v2::telemetry_command::Command;
use comet_protocol::command::LanguageCode;
use comet_testkit::grpc::{resource, start_grpc};
use comet_testkit::scrape::scrape;
use comet_testkit::{TestBroker, wait_until};
use futures::channel::mpsc;
use tonic::transport::Channel;

const CLIENT_ID: &str = "grpc-clients@1@1@abc";
/// Hang guard for one streamed answer (only a failing test waits this long).
const ANSWER_DEADLINE: Duration = Duration::from_secs(30);

async fn start_with(
    tweak: impl FnOnce(&mut comet_broker::config::BrokerConfig),
) -> (TestBroker, MessagingServiceClient<Channel>) {
    start_grpc(tweak).await
}

fn req<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    let metadata = request.metadata_mut();
    metadata.insert("x-mq-client-id", CLIENT_ID.parse().expect("ASCII"));
    metadata.insert("x-mq-language", "GO".parse().expect("ASCII"));
    metadata.insert("x-mq-client-version", "5.1.0".parse().expect("ASCII"));
    request
}

fn settings(client_type: v2::ClientType, pub_sub: PubSub) -> v2::TelemetryCommand {
    v2::TelemetryCommand {
        status: None,
        command: Some(Command::Settings(v2::Settings {
            client_type: Some(client_type as i32),
            request_timeout: Some(prost_types::Duration {
                seconds: 3,
                nanos: 0,
            }),
            pub_sub: Some(pub_sub),
            ..Default::default()
        })),
    }
}

fn producer(topic: &str) -> v2::TelemetryCommand {
    settings(
        v2::ClientType::Producer,
        PubSub::Publishing(v2::Publishing {
            topics: vec![resource(topic).expect("set")],
            max_body_size: 0,
            validate_message_type: true,
        }),
    )
}

/// Opens a Telemetry stream that sends `first`; returns the sender keeping the client's half
/// open (dropping it ends the stream) and the broker's half, after the settings answer.
async fn open_stream(
    client: &mut MessagingServiceClient<Channel>,
    first: v2::TelemetryCommand,
) -> (
    mpsc::UnboundedSender<v2::TelemetryCommand>,
    tonic::Streaming<v2::TelemetryCommand>,
) {
    let (tx, rx) = mpsc::unbounded();
    tx.unbounded_send(first).expect("queued");
    let mut inbound = client
        .telemetry(req(rx))
        .await
        .expect("stream opens")
        .into_inner();
    let answer = next_command(&mut inbound).await;
    assert!(
        matches!(answer.command, Some(Command::Settings(_))),
        "{answer:?}"
    );
    (tx, inbound)
}

async fn next_command(
    inbound: &mut tonic::Streaming<v2::TelemetryCommand>,
) -> v2::TelemetryCommand {
    tokio::time::timeout(ANSWER_DEADLINE, inbound.message())
        .await
        .expect("a command in time")
        .expect("gRPC OK")
        .expect("one command")
}

fn producer_ids(broker: &TestBroker, group: &str) -> Vec<(String, LanguageCode)> {
    broker
        .ctx()
        .producers
        .group_channels(group)
        .into_iter()
        .map(|info| (info.client_id, info.language))
        .collect()
}

#[tokio::test]
async fn settings_register_the_client_until_it_terminates_or_its_stream_ends() {
    let (broker, mut client) = start_with(|c| {
        c.metrics_exporter_type = comet_broker::config::MetricsExporterType::Prom;
        c.metrics_prom_exporter_port = 0;
    })
    .await;
    let (tx, _inbound) = open_stream(&mut client, producer("GrpcRegTopic")).await;
    assert_eq!(
        producer_ids(&broker, "GrpcRegTopic"),
        vec![(CLIENT_ID.to_owned(), LanguageCode::Go)]
    );
    let (_, _, metrics) = scrape(broker.handle().metrics_addr().expect("metrics on")).await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("rocketmq_producer_connections{")
                && l.contains("language=\"go\"")
                && l.contains("protocol_type=\"grpc\"")),
        "the gRPC producer is counted as a grpc connection:\n{metrics}"
    );
    let heartbeat = client
        .heartbeat(req(v2::HeartbeatRequest {
            group: None,
            client_type: v2::ClientType::Producer as i32,
        }))
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(heartbeat.status.map(|s| s.code()), Some(v2::Code::Ok));
    assert_eq!(producer_ids(&broker, "GrpcRegTopic").len(), 1);

    let terminated = client
        .notify_client_termination(req(v2::NotifyClientTerminationRequest { group: None }))
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(terminated.status.map(|s| s.code()), Some(v2::Code::Ok));
    assert!(producer_ids(&broker, "GrpcRegTopic").is_empty());
    drop(tx);

    // A push consumer is registered in its group, and leaves it when its stream ends.
    let consumer = settings(
        v2::ClientType::PushConsumer,
        PubSub::Subscription(v2::Subscription {
            group: resource("GrpcRegGroup"),
            subscriptions: vec![v2::SubscriptionEntry {
                topic: resource("GrpcRegTopic"),
                expression: Some(v2::FilterExpression {
                    r#type: v2::FilterType::Tag as i32,
                    expression: "TagA || TagB".to_owned(),
                }),
            }],
            ..Default::default()
        }),
    );
    let (tx, _inbound) = open_stream(&mut client, consumer).await;
    let consumers = broker.ctx().consumers.clone();
    assert_eq!(
        consumers.consumer_ids("GrpcRegGroup"),
        vec![CLIENT_ID.to_owned()]
    );
    let subscription = consumers
        .subscription("GrpcRegGroup", "GrpcRegTopic")
        .expect("subscribed");
    assert_eq!(subscription.tags_set, vec!["TagA", "TagB"]);
    drop(tx);
    assert!(
        wait_until(|| {
            let consumers = consumers.clone();
            async move { consumers.consumer_ids("GrpcRegGroup").is_empty() }
        })
        .await,
        "the end of the stream removes the consumer"
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn an_orphaned_transaction_is_checked_back_over_telemetry() {
    let (broker, mut client) = start_with(|c| {
        c.transaction_timeout_ms = 0;
        c.transaction_check_interval_ms = 200;
    })
    .await;
    let topic = "GrpcTxCheck";
    let mut config = comet_protocol::body::TopicConfig::with_queues(topic, 1, 1, 6);
    config
        .attributes
        .insert("message.type".to_owned(), "TRANSACTION".to_owned());
    broker.ctx().topic_config.update(config);
    let (_tx, mut inbound) = open_stream(&mut client, producer(topic)).await;

    let message = v2::Message {
        topic: resource(topic),
        user_properties: HashMap::from([("seq".to_owned(), "7".to_owned())]),
        system_properties: Some(v2::SystemProperties {
            message_id: "ORPHAN1".to_owned(),
            tag: Some("TagT".to_owned()),
            message_type: v2::MessageType::Transaction as i32,
            ..Default::default()
        }),
        body: b"orphan".to_vec(),
    };
    let sent = client
        .send_message(req(v2::SendMessageRequest {
            messages: vec![message],
        }))
        .await
        .expect("gRPC OK")
        .into_inner();
    let entry = sent.entries.first().expect("one entry");
    assert_eq!(entry.status.as_ref().map(|s| s.code()), Some(v2::Code::Ok));

    let command = next_command(&mut inbound).await;
    let Some(Command::RecoverOrphanedTransactionCommand(recover)) = command.command else {
        panic!("expected a transaction check, got {command:?}");
    };
    assert_eq!(recover.transaction_id, entry.transaction_id);
    let checked = recover.message.expect("the half");
    assert_eq!(checked.topic.as_ref().map(|t| t.name.as_str()), Some(topic));
    assert_eq!(checked.body, b"orphan");
    let system = checked.system_properties.expect("set");
    assert_eq!(system.message_id, "ORPHAN1");
    assert_eq!(system.tag.as_deref(), Some("TagT"));
    assert_eq!(
        checked.user_properties.get("seq").map(String::as_str),
        Some("7")
    );

    let ended = client
        .end_transaction(req(v2::EndTransactionRequest {
            topic: resource(topic),
            message_id: system.message_id.clone(),
            transaction_id: recover.transaction_id.clone(),
            resolution: v2::TransactionResolution::Commit as i32,
            source: v2::TransactionSource::SourceServerCheck as i32,
            trace_context: String::new(),
        }))
        .await
        .expect("gRPC OK")
        .into_inner();
    assert_eq!(ended.status.map(|s| s.code()), Some(v2::Code::Ok));
    let store = broker.store().clone();
    assert!(
        wait_until(|| {
            let store = store.clone();
            async move { store.get_max_offset_in_queue(topic, 0) == 1 }
        })
        .await,
        "the checked transaction is committed"
    );
    broker.shutdown().await;
}
