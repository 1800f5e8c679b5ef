//! The metrics endpoint of a real broker, scraped over HTTP: Apache 5.x names and label keys,
//! the constant labels, consumer lag from stored offsets (rising while the group is offline),
//! connections, and the refusals of a bad configuration.

use std::collections::HashMap;

use comet_broker::config::MetricsExporterType;
use comet_broker::{BrokerConfig, BrokerController};
use comet_protocol::RemotingCommand;
use comet_protocol::body::{BrokerStatsData, from_fastjson};
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{
    CreateTopicRequestHeader, UpdateConsumerOffsetRequestHeader, ViewBrokerStatsDataRequestHeader,
    request_with_header,
};
use comet_testkit::scrape::scrape;
use comet_testkit::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SUCCESS: i32 = 0;

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

    // VIEW_BROKER_STATS_DATA (mqadmin statsAll) reads the same counters sampled every 10 s into
    // minute, hour and day windows, and Java's refusal for a statistic with nothing recorded.
    let stats = |name: &str, key: &str| {
        request_with_header(
            RequestCode::ViewBrokerStatsData,
            &ViewBrokerStatsDataRequestHeader {
                stats_name: name.to_owned(),
                stats_key: key.to_owned(),
                ..Default::default()
            },
        )
    };
    let sampled = |name: &'static str, key: String| {
        let broker = &broker;
        let request = stats(name, &key);
        async move {
            let rsp = broker.invoke(request).await;
            if rsp.code != SUCCESS {
                return None;
            }
            from_fastjson::<BrokerStatsData>(&rsp.body.unwrap_or_default()).ok()
        }
    };
    assert!(
        wait_until(|| async { sampled("TOPIC_PUT_NUMS", topic.to_owned()).await.is_some() }).await,
        "the topic's puts are sampled"
    );
    let put = sampled("TOPIC_PUT_NUMS", topic.to_owned())
        .await
        .expect("sampled");
    assert_eq!(put.stats_minute.sum, 4);
    assert_eq!(put.stats_day.sum, 4);
    assert!(
        (put.stats_minute.avgpt - 1.0).abs() < 1e-9,
        "one message per send"
    );
    let got = sampled("GROUP_GET_NUMS", format!("{topic}@{group}"))
        .await
        .expect("the group's gets are sampled with the puts");
    assert_eq!(got.stats_hour.sum, 3);
    let rsp = broker.invoke(stats("TOPIC_PUT_NUMS", "NeverSent")).await;
    assert_eq!(
        rsp.code,
        comet_protocol::code::ResponseCode::SystemError.code()
    );
    assert_eq!(
        rsp.remark.as_deref(),
        Some("The stats <TOPIC_PUT_NUMS> <NeverSent> not exist")
    );
    broker.shutdown().await;
}

/// PULL_MESSAGE held by the broker for up to 20 s until a message arrives.
fn held_pull(group: &str, topic: &str, offset: i64) -> RemotingCommand {
    let mut request = pull(group, topic, 0, offset, 32);
    let header = request.ext_mut();
    header.insert(
        "sysFlag",
        comet_protocol::headers::pull_sys_flag::build(false, true, true, false).to_string(),
    );
    header.insert("suspendTimeoutMillis", "20000");
    request
}

#[tokio::test]
async fn answers_are_timed_by_request_and_response_code_and_holding() {
    let broker = TestBroker::start_with(prom).await;
    let addr = broker.handle().metrics_addr().expect("metrics on");
    let (topic, group) = ("RpcTopic", "rpc_group");
    let created = broker.invoke(create_topic_request(topic, 1)).await;
    assert_eq!(created.code, SUCCESS, "{:?}", created.remark);
    for _ in 0..2 {
        let rsp = broker.invoke(send_v2(topic, 0, b"m", &[])).await;
        assert_eq!(rsp.code, SUCCESS);
    }
    // A pull at the end of the queue is held until the next message arrives.
    let held = broker.invoke(held_pull(group, topic, 2));
    let wake = async {
        let is_held = || async {
            let (_, _, body) = scrape(addr).await;
            find(&samples(&body), "comet_pull_held_requests", &[]).map(|s| s.value) == Some(1.0)
        };
        assert!(wait_until(is_held).await, "the pull is held");
        broker.invoke(send_v2(topic, 0, b"wake", &[])).await
    };
    let (held, woke) = tokio::join!(held, wake);
    assert_eq!(woke.code, SUCCESS);
    assert_eq!(held.code, SUCCESS, "{:?}", held.remark);

    let (_, _, body) = scrape(addr).await;
    let all = samples(&body);
    let count = |labels: &[(&str, &str)]| {
        find(&all, "rocketmq_rpc_latency_milliseconds_count", labels).map(|s| s.value)
    };
    let sends = [
        ("protocol_type", "remoting"),
        ("request_code", "send_message_v2"),
        ("response_code", "success"),
        ("is_long_polling", "false"),
        ("result", "success"),
    ];
    assert_eq!(count(&sends), Some(3.0), "{body}");
    let held_pulls = [
        ("request_code", "pull_message"),
        ("response_code", "success"),
        ("is_long_polling", "true"),
    ];
    assert_eq!(count(&held_pulls), Some(1.0), "{body}");
    let topic_created = [
        ("request_code", "update_and_create_topic"),
        ("is_long_polling", "false"),
    ];
    assert_eq!(count(&topic_created), Some(1.0), "{body}");
    // The topic's creation was timed too.
    let created = [("invocation_status", "success"), ("is_system", "false")];
    assert_eq!(
        find(
            &all,
            "rocketmq_topic_create_execution_time_milliseconds_count",
            &created
        )
        .map(|s| s.value),
        Some(1.0),
        "{body}"
    );
    let every_bucket = [("request_code", "send_message_v2"), ("le", "+Inf")];
    assert_eq!(
        find(
            &all,
            "rocketmq_rpc_latency_milliseconds_bucket",
            &every_bucket
        )
        .map(|s| s.value),
        Some(3.0),
        "{body}"
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn fetched_and_not_yet_fetched_messages_are_told_apart() {
    let broker = TestBroker::start_with(prom).await;
    let addr = broker.handle().metrics_addr().expect("metrics on");
    let (topic, group) = ("InflightTopic", "inflight_group");
    let created = broker.invoke(create_topic_request(topic, 1)).await;
    assert_eq!(created.code, SUCCESS, "{:?}", created.remark);
    for i in 0..5 {
        let rsp = broker
            .invoke(send_v2(topic, 0, format!("m{i}").as_bytes(), &[]))
            .await;
        assert_eq!(rsp.code, SUCCESS);
    }
    assert!(wait_until(|| async { broker.store().get_max_offset_in_queue(topic, 0) == 5 }).await);
    let rsp = broker.invoke(heartbeat("inflight@1", group, topic)).await;
    assert_eq!(rsp.code, SUCCESS);
    assert_eq!(
        broker.invoke(commit(group, topic, 0, 0)).await.code,
        SUCCESS
    );
    let figures = || async {
        let (_, _, body) = scrape(addr).await;
        let all = samples(&body);
        let labels = [("consumer_group", group), ("topic", topic)];
        let value = |name: &str| find(&all, name, &labels).map(|s| s.value);
        (
            value("rocketmq_consumer_inflight_messages"),
            value("rocketmq_consumer_ready_messages"),
            value("rocketmq_consumer_queueing_latency_milliseconds"),
        )
    };
    let (inflight, ready, _) = figures().await;
    assert_eq!((inflight, ready), (Some(0.0), Some(5.0)));

    // Three fetched and not committed, two waiting.
    let pulled = broker.invoke(pull(group, topic, 0, 0, 3)).await;
    assert_eq!(pulled.code, SUCCESS, "{:?}", pulled.remark);
    let (inflight, ready, queueing) = figures().await;
    assert_eq!((inflight, ready), (Some(3.0), Some(2.0)));
    assert!(queueing.is_some_and(|ms| ms >= 0.0));

    // The rest fetched, the first three committed.
    let pulled = broker.invoke(pull(group, topic, 0, 3, 32)).await;
    assert_eq!(pulled.code, SUCCESS, "{:?}", pulled.remark);
    assert_eq!(
        broker.invoke(commit(group, topic, 0, 3)).await.code,
        SUCCESS
    );
    let (inflight, ready, queueing) = figures().await;
    assert_eq!(
        (inflight, ready, queueing),
        (Some(2.0), Some(0.0), Some(0.0))
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn flushes_and_back_pressure_are_reported() {
    let broker = TestBroker::start_with(prom).await;
    let addr = broker.handle().metrics_addr().expect("metrics on");
    let created = broker.invoke(create_topic_request("FlushTopic", 1)).await;
    assert_eq!(created.code, SUCCESS, "{:?}", created.remark);
    let rsp = broker
        .invoke(send_v2("FlushTopic", 0, b"durable", &[]))
        .await;
    assert_eq!(rsp.code, SUCCESS);
    let value = |body: &str, name: &str| find(&samples(body), name, &[]).map(|s| s.value);
    // The flush thread flushes what was sent within its interval.
    let flushed = || async {
        let (_, _, body) = scrape(addr).await;
        value(&body, "comet_store_flush_latency_seconds_count").is_some_and(|n| n >= 1.0)
    };
    assert!(wait_until(flushed).await, "a flush is reported");
    let (_, _, body) = scrape(addr).await;
    assert!(
        value(&body, "comet_store_flushes_total").is_some_and(|n| n >= 1.0),
        "{body}"
    );
    assert!(
        value(&body, "comet_store_flushed_bytes_total").is_some_and(|n| n > 0.0),
        "{body}"
    );
    for name in [
        "comet_remoting_system_busy_total",
        "comet_remoting_write_buffer_refusals_total",
        "comet_remoting_read_pauses_total",
    ] {
        assert_eq!(value(&body, name), Some(0.0), "{name}: {body}");
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn half_messages_and_transaction_finish_times_are_reported() {
    use comet_protocol::headers::{
        CommandHeaderExt, EndTransactionRequestHeader, SendMessageResponseHeader,
    };
    use comet_protocol::message::properties::keys;
    use comet_protocol::message::sysflag;
    let broker = TestBroker::start_with(prom).await;
    let addr = broker.handle().metrics_addr().expect("metrics on");
    let topic = "TxMetricTopic";
    let created = broker.invoke(create_topic_request(topic, 1)).await;
    assert_eq!(created.code, SUCCESS, "{:?}", created.remark);
    let mut halves = Vec::new();
    for uniq in ["tx-1", "tx-2"] {
        let props = [
            (keys::TRANSACTION_PREPARED, "true"),
            (keys::PRODUCER_GROUP, PRODUCER_GROUP),
            (keys::UNIQ_KEY, uniq),
        ];
        let rsp = broker.invoke(send_v2(topic, 0, b"half", &props)).await;
        assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
        let header: SendMessageResponseHeader = rsp.decode_header().expect("send header");
        halves.push((uniq, header.queue_offset, decode_msg_id(&header.msg_id).1));
    }
    let value =
        |body: &str, name: &str| find(&samples(body), name, &[("topic", topic)]).map(|s| s.value);
    let (_, _, body) = scrape(addr).await;
    assert_eq!(value(&body, "rocketmq_half_messages"), Some(2.0), "{body}");

    let (uniq, queue_offset, commit_log_offset) = halves[0];
    let header = EndTransactionRequestHeader {
        topic: Some(topic.to_owned()),
        producer_group: PRODUCER_GROUP.to_owned(),
        tran_state_table_offset: queue_offset,
        commit_log_offset,
        commit_or_rollback: sysflag::TRANSACTION_COMMIT_TYPE,
        from_transaction_check: Some(false),
        msg_id: uniq.to_owned(),
        transaction_id: Some(uniq.to_owned()),
        rpc: Default::default(),
    };
    let ended = broker
        .invoke(request_with_header(RequestCode::EndTransaction, &header))
        .await;
    assert_eq!(ended.code, SUCCESS, "{:?}", ended.remark);
    let (_, _, body) = scrape(addr).await;
    assert_eq!(value(&body, "rocketmq_half_messages"), Some(1.0), "{body}");
    assert_eq!(
        value(&body, "rocketmq_finish_message_latency_milliseconds_count"),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        value(&body, "rocketmq_commit_messages_total"),
        Some(1.0),
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

#[tokio::test]
async fn parked_timer_messages_show_in_the_timer_gauges() {
    let broker = TestBroker::start_with(prom).await;
    let addr = broker.handle().metrics_addr().expect("metrics on");
    for i in 0..3 {
        let rsp = broker
            .invoke(send_v2(
                "MetricsTimerTopic",
                0,
                format!("t{i}").as_bytes(),
                &[("TIMER_DELAY_SEC", "3600")],
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
                .is_some_and(|s| s.enqueue_offset == 3)
        })
        .await
    );
    let (_, _, body) = scrape(addr).await;
    let all = samples(&body);
    let storage = [("storage_type", "local"), ("storage_medium", "disk")];
    let value = |name: &str| {
        find(&all, name, &storage)
            .unwrap_or_else(|| panic!("{name} missing:\n{body}"))
            .value
    };
    assert_eq!(value("rocketmq_timer_dequeue_lag"), 3.0);
    assert_eq!(value("rocketmq_timer_enqueue_lag"), 0.0);
    assert_eq!(value("rocketmq_timer_enqueue_latency_milliseconds"), 0.0);
    assert!(value("rocketmq_timer_dequeue_latency_milliseconds") >= 0.0);
    let topic = [("topic", "MetricsTimerTopic")];
    let by_topic = |name: &str| find(&all, name, &topic).map(|s| s.value);
    assert_eq!(
        by_topic("rocketmq_timer_enqueue_total"),
        Some(3.0),
        "{body}"
    );
    assert_eq!(
        by_topic("rocketmq_timer_dequeue_total"),
        Some(0.0),
        "{body}"
    );
    assert_eq!(by_topic("rocketmq_timing_messages"), Some(3.0), "{body}");
    broker.shutdown().await;
}
