//! The metrics endpoint of a real broker, scraped over HTTP: Apache 5.x names and label keys,
//! the constant labels, consumer lag from stored offsets (rising while the group is offline),
//! connections, and the refusals of a bad configuration.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;

use comet_broker::config::MetricsExporterType;
use comet_broker::{BrokerConfig, BrokerController};
use comet_protocol::RemotingCommand;
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{
    CreateTopicRequestHeader, UpdateConsumerOffsetRequestHeader, request_with_header,
};
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SUCCESS: i32 = 0;

/// `GET /metrics`: status line, content type and body.
async fn scrape(addr: SocketAddr) -> (String, String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("request sent");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("response read");
    let text = String::from_utf8(raw).expect("UTF-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("header and body");
    let status = head.lines().next().unwrap_or_default().to_owned();
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type:")
                .map(|v| v.trim().to_owned())
        })
        .unwrap_or_default();
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    (status, content_type, body)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).expect("chunk size");
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
    out
}

/// One sample line: name, labels, value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: HashMap<String, String>,
    value: f64,
}

/// The samples of an exposition (a small reader for assertions; the test scripts check the
/// format itself with Prometheus' own tools).
fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("sample has a value");
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split(',')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').expect("label k=v");
                    (k.to_owned(), v.trim_matches('"').to_owned())
                })
                .collect();
            Sample {
                name: name.to_owned(),
                labels,
                value: value.parse().expect("numeric value"),
            }
        })
        .collect()
}

fn find<'a>(all: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Option<&'a Sample> {
    all.iter().find(|s| {
        s.name == name
            && labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
    })
}

fn commit(group: &str, topic: &str, queue_id: i32, offset: i64) -> RemotingCommand {
    request_with_header(
        RequestCode::UpdateConsumerOffset,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: group.to_owned(),
            topic: topic.to_owned(),
            queue_id,
            commit_offset: offset,
            ..Default::default()
        },
    )
}

fn create_topic_request(topic: &str, queues: i32) -> RemotingCommand {
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

fn prom(config: &mut BrokerConfig) {
    config.metrics_exporter_type = MetricsExporterType::Prom;
    config.metrics_prom_exporter_port = 0;
    config.metrics_label = "env:test, team:mq".to_owned();
}

#[tokio::test]
async fn the_endpoint_serves_apache_names_with_the_node_labels() {
    let broker = TestBroker::start_with(prom).await;
    let addr = broker.handle().metrics_addr().expect("metrics on");
    assert!(
        addr.ip().is_loopback(),
        "metrics bind loopback by default: {addr}"
    );
    let rsp = broker
        .invoke(heartbeat(
            "metrics-client@1",
            "metrics_group",
            "MetricsTopic",
        ))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);

    let (status, content_type, body) = scrape(addr).await;
    assert!(status.contains("200"), "{status}");
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let all = samples(&body);
    for name in [
        "rocketmq_broker_permission",
        "rocketmq_topic_number",
        "rocketmq_consumer_group_number",
        "rocketmq_producer_connections",
        "rocketmq_consumer_connections",
        "rocketmq_storage_flush_behind_bytes",
        "rocketmq_storage_dispatch_behind_bytes",
        "comet_store_put_messages_total",
        "comet_pull_held_requests",
    ] {
        assert!(
            all.iter().any(|s| s.name == name),
            "{name} missing:\n{body}"
        );
    }
    // Every series carries the node labels and the configured extra labels.
    let broker_name = broker.ctx().config.broker_name.clone();
    let cluster = broker.ctx().config.broker_cluster_name.clone();
    for s in &all {
        assert_eq!(
            s.labels.get("node_type").map(String::as_str),
            Some("broker"),
            "{s:?}"
        );
        assert_eq!(s.labels.get("node_id"), Some(&broker_name), "{s:?}");
        assert_eq!(s.labels.get("cluster"), Some(&cluster), "{s:?}");
        assert_eq!(
            s.labels.get("env").map(String::as_str),
            Some("test"),
            "{s:?}"
        );
        assert_eq!(
            s.labels.get("team").map(String::as_str),
            Some("mq"),
            "{s:?}"
        );
    }
    let consumers = find(
        &all,
        "rocketmq_consumer_connections",
        &[
            ("consumer_group", "metrics_group"),
            ("language", "rust"),
            ("consume_mode", "push"),
            ("protocol_type", "remoting"),
            ("is_system", "false"),
        ],
    )
    .unwrap_or_else(|| panic!("the heartbeat's consumer is counted:\n{body}"));
    assert_eq!(consumers.value, 1.0);
    assert!(
        find(
            &all,
            "rocketmq_producer_connections",
            &[("language", "rust")]
        )
        .is_some()
    );
    assert_eq!(
        find(&all, "rocketmq_broker_permission", &[]).map(|s| s.value),
        Some(6.0)
    );

    let (status, _, _) = {
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .expect("connects");
        stream
            .write_all(b"GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .expect("sent");
        let mut raw = String::new();
        stream.read_to_string(&mut raw).await.expect("read");
        (raw.lines().next().unwrap_or_default().to_owned(), (), ())
    };
    assert!(status.contains("404"), "{status}");
    broker.shutdown().await;
}

#[tokio::test]
async fn sends_and_pulls_are_counted_by_topic_type_and_group() {
    let broker = TestBroker::start_with(prom).await;
    let addr = broker.handle().metrics_addr().expect("metrics on");
    let (topic, group) = ("TrafficTopic", "traffic_group");
    let created = broker.invoke(create_topic_request(topic, 1)).await;
    assert_eq!(created.code, SUCCESS, "{:?}", created.remark);
    for i in 0..3 {
        let rsp = broker
            .invoke(send_v2(topic, 0, format!("m{i}").as_bytes(), &[]))
            .await;
        assert_eq!(rsp.code, SUCCESS);
    }
    let delayed = broker
        .invoke(send_v2(topic, 0, b"later", &[("DELAY", "1")]))
        .await;
    assert_eq!(delayed.code, SUCCESS);
    assert!(wait_until(|| async { broker.store().get_max_offset_in_queue(topic, 0) == 3 }).await);
    let rsp = broker
        .invoke(heartbeat("traffic-client@1", group, topic))
        .await;
    assert_eq!(rsp.code, SUCCESS);
    let pulled = broker.invoke(pull(group, topic, 0, 0, 32)).await;
    assert_eq!(pulled.code, SUCCESS, "{:?}", pulled.remark);

    let (_, _, body) = scrape(addr).await;
    let all = samples(&body);
    let value = |name: &str, labels: &[(&str, &str)]| find(&all, name, labels).map(|s| s.value);
    let normal = [
        ("topic", topic),
        ("message_type", "normal"),
        ("is_system", "false"),
    ];
    assert_eq!(
        value("rocketmq_messages_in_total", &normal),
        Some(3.0),
        "{body}"
    );
    assert_eq!(
        value("rocketmq_message_size_count", &normal),
        Some(3.0),
        "{body}"
    );
    let stored_bytes = value("rocketmq_throughput_in_total", &normal).unwrap_or_default();
    assert!(
        stored_bytes > 3.0 * 2.0,
        "records are counted with their headers: {stored_bytes}"
    );
    let delay = [("topic", topic), ("message_type", "delay")];
    assert_eq!(
        value("rocketmq_messages_in_total", &delay),
        Some(1.0),
        "{body}"
    );
    // Every message is under 1 KiB: all in the first bucket.
    let first_bucket = [("topic", topic), ("message_type", "normal"), ("le", "1024")];
    assert_eq!(
        value("rocketmq_message_size_bucket", &first_bucket),
        Some(3.0),
        "{body}"
    );
    let out = [
        ("topic", topic),
        ("consumer_group", group),
        ("is_system", "false"),
    ];
    assert_eq!(
        value("rocketmq_messages_out_total", &out),
        Some(3.0),
        "{body}"
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn lag_of_an_offline_group_rises_as_messages_arrive() {
    let broker = TestBroker::start_with(prom).await;
    let addr = broker.handle().metrics_addr().expect("metrics on");
    let (topic, group) = ("LagMetricTopic", "lag_metric_offline");
    let created = broker.invoke(create_topic_request(topic, 2)).await;
    assert_eq!(created.code, SUCCESS, "{:?}", created.remark);
    let send = |n: usize| {
        let broker = &broker;
        async move {
            for i in 0..n {
                let rsp = broker
                    .invoke(send_v2(topic, (i % 2) as i32, b"m", &[]))
                    .await;
                assert_eq!(rsp.code, SUCCESS);
            }
        }
    };
    send(4).await;
    assert!(wait_until(|| async { broker.store().get_max_offset_in_queue(topic, 1) == 2 }).await);
    let group_config = comet_protocol::body::SubscriptionGroupConfig::new(group);
    let created = broker
        .invoke(
            RemotingCommand::request(RequestCode::UpdateAndCreateSubscriptiongroup).with_body(
                comet_protocol::body::to_fastjson_bytes(&group_config).expect("group encodes"),
            ),
        )
        .await;
    assert_eq!(created.code, SUCCESS, "{:?}", created.remark);
    // The group consumed one message of queue 0 and has never been online.
    assert_eq!(
        broker.invoke(commit(group, topic, 0, 1)).await.code,
        SUCCESS
    );
    assert_eq!(
        broker.invoke(commit(group, topic, 1, 0)).await.code,
        SUCCESS
    );
    let lag_of = |body: &str| {
        let all = samples(body);
        let labels = [
            ("consumer_group", group),
            ("topic", topic),
            ("is_retry", "false"),
        ];
        let messages = find(&all, "rocketmq_consumer_lag_messages", &labels).map(|s| s.value);
        let latency =
            find(&all, "rocketmq_consumer_lag_latency_milliseconds", &labels).map(|s| s.value);
        (messages, latency)
    };
    let (_, _, body) = scrape(addr).await;
    let (messages, latency) = lag_of(&body);
    assert_eq!(messages, Some(3.0), "{body}");
    assert!(latency.is_some_and(|l| l >= 0.0), "{body}");

    send(6).await;
    assert!(wait_until(|| async { broker.store().get_max_offset_in_queue(topic, 1) == 5 }).await);
    let (_, _, body) = scrape(addr).await;
    assert_eq!(lag_of(&body).0, Some(9.0), "{body}");
    broker.shutdown().await;
}

#[tokio::test]
async fn a_bad_metrics_configuration_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = test_config(dir.path());
    prom(&mut config);
    config.metrics_label = "node_id:x".to_owned();
    let err = BrokerController::start(config.clone())
        .await
        .expect_err("reserved label");
    assert!(err.to_string().contains("metricsLabel"), "{err}");

    // A port already taken is a start error naming the keys.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    config.metrics_label = String::new();
    config.metrics_prom_exporter_port = taken.local_addr().expect("addr").port();
    let err = BrokerController::start(config)
        .await
        .expect_err("port taken");
    assert!(err.to_string().contains("metricsPromExporterPort"), "{err}");
}
