//! The API behind the console's pages beyond the basic operations: the session's role, the name
//! servers' reachability, a broker's figures and settings, the sampled charts, the pickers, the
//! producers online, the system-name filters and the message trace.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::{Method, StatusCode};
use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{ConsumeConcurrentlyStatus, ConsumeFromWhere, concurrently_fn};
use comet_client::message::Message;
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{ClientConfig, trace};
use comet_console::sampler;
use comet_protocol::command::COMET_VERSION;
use comet_protocol::version::version_name;
use comet_testkit::console::{Env, VIEWER_PASSWORD, encode};
use comet_testkit::{eventually, wait_for};
use serde_json::{Value, json};

fn names(answer: &Value) -> Vec<String> {
    answer["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.as_str().or_else(|| i["name"].as_str()))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn points(answer: &Value, key: &str) -> Vec<Value> {
    answer["series"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["key"] == key)
        .and_then(|s| s["points"].as_array().cloned())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_session_says_whether_the_page_may_write() {
    let env = Env::start(|_| {}).await;
    let admin = env.admin().await;
    let session = env.get("/api/session", &admin).await;
    assert_eq!(session.json["role"], "admin");
    assert_eq!(session.json["canWrite"], true);
    let (answer, viewer) = env.try_login("viewer", VIEWER_PASSWORD).await;
    assert_eq!(answer.json["canWrite"], false, "{}", answer.text);
    let viewer = viewer.expect("viewer logs in");
    let session = env.get("/api/session", &viewer).await;
    assert_eq!(session.json["role"], "viewer");
    assert_eq!(session.json["canWrite"], false);
    // Whatever the page shows, the server refuses the viewer's change of a broker setting.
    let path = format!("/api/brokers/{}/config", env.broker_addr());
    let refused = env
        .write(
            Method::POST,
            &path,
            &viewer,
            json!({ "key": "brokerPermission", "value": "4" }),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);
    assert_eq!(env.broker().context().broker_permission(), 6);
}

#[tokio::test]
async fn the_status_reports_unreachable_name_servers_and_when_they_last_answered() {
    let mut env = Env::start(|_| {}).await;
    let login = env.admin().await;
    let up = env.get("/api/status", &login).await;
    assert_eq!(up.status, StatusCode::OK, "{}", up.text);
    assert_eq!(up.json["ok"], true, "{}", up.text);
    assert_eq!(up.json["namesrv"], env.namesrv_addr.as_str());
    let last_ok = up.json["lastOkMs"].as_i64().expect("lastOkMs");
    assert!(up.json["error"].is_null());

    env.stop_namesrv().await;
    let down = env.get("/api/status", &login).await;
    assert_eq!(
        down.status,
        StatusCode::OK,
        "a poll through an outage answers"
    );
    assert_eq!(down.json["ok"], false, "{}", down.text);
    assert!(
        !down.json["error"].as_str().unwrap_or("").is_empty(),
        "{}",
        down.text
    );
    assert_eq!(
        down.json["lastOkMs"], last_ok,
        "the last success is kept: {}",
        down.text
    );
    assert!(down.json["checkedMs"].as_i64() >= Some(last_ok));
    let overview = env.get("/api/overview", &login).await;
    assert!(overview.status.is_server_error(), "{}", overview.text);
    assert!(overview.json["error"].is_string(), "{}", overview.text);
    // A sampling round during the outage records the failure and no point.
    sampler::sample_once(&env.state).await;
    assert!(!env.state.health.state().ok);
    assert_eq!(env.state.history.series_count(), 0);
}

#[tokio::test]
async fn a_broker_page_shows_its_figures_and_settings_and_passes_its_answer_on() {
    let env = Env::start(|_| {}).await;
    let login = env.admin().await;
    let addr = env.broker_addr();
    let detail = env.get(&format!("/api/brokers/{addr}"), &login).await;
    assert_eq!(detail.status, StatusCode::OK, "{}", detail.text);
    assert_eq!(detail.json["role"], "master");
    assert_eq!(detail.json["brokerId"], 0);
    assert!(detail.json["runtime"]["brokerVersionDesc"].is_string());
    assert!(detail.json["runtime"]["putTps"].is_string());
    assert_eq!(
        detail.json["config"]["brokerName"],
        detail.json["brokerName"]
    );

    let path = format!("/api/brokers/{addr}/config");
    let changed = env
        .write(
            Method::POST,
            &path,
            &login,
            json!({ "key": "brokerPermission", "value": "4" }),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.text);
    assert_eq!(changed.json["nowReads"], "4", "{}", changed.text);
    assert_eq!(env.broker().context().broker_permission(), 4);
    // The broker's refusal is shown with its own words.
    let refused = env
        .write(
            Method::POST,
            &path,
            &login,
            json!({ "key": "rocketmqHome", "value": "/tmp" }),
        )
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        refused.text.contains("black list"),
        "the broker's words: {}",
        refused.text
    );
    // A line break would smuggle a second key into the properties text: refused here.
    for body in [
        json!({ "key": "brokerPermission", "value": "6\nrocketmqHome=/tmp" }),
        json!({ "key": "broker Permission", "value": "6" }),
        json!({ "key": "", "value": "6" }),
        json!({ "key": "brokerPermission", "value": "6", "extra": 1 }),
    ] {
        let answer = env.write(Method::POST, &path, &login, body.clone()).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}");
    }
    assert_eq!(env.broker().context().broker_permission(), 4, "unchanged");
    // Only the cluster's own brokers are reached.
    let elsewhere = env.get("/api/brokers/10.9.9.9:10911", &login).await;
    assert_eq!(
        elsewhere.status,
        StatusCode::NOT_FOUND,
        "{}",
        elsewhere.text
    );
    let elsewhere = env
        .write(
            Method::POST,
            "/api/brokers/10.9.9.9:10911/config",
            &login,
            json!({ "key": "brokerPermission", "value": "6" }),
        )
        .await;
    assert_eq!(
        elsewhere.status,
        StatusCode::NOT_FOUND,
        "{}",
        elsewhere.text
    );
}

#[tokio::test]
async fn charts_read_the_sampled_rings_of_cluster_brokers_topics_and_groups() {
    let env = Env::start(|_| {}).await;
    let login = env.admin().await;
    env.create_topic(&login, "ChartTopic", 2).await;
    sampler::sample_once(&env.state).await;
    let cluster = env.get("/api/history?kind=cluster", &login).await;
    assert_eq!(cluster.status, StatusCode::OK, "{}", cluster.text);
    assert_eq!(cluster.json["intervalSecs"], 10);
    assert_eq!(points(&cluster.json, "cluster/in").len(), 1);
    assert_eq!(points(&cluster.json, "cluster/out").len(), 1);
    // A broker in its first 10 s reports no rate: its counters give one from the next round.
    let key = format!("broker/{}/in", env.broker_addr());
    eventually("a point of the broker's rate", || async {
        sampler::sample_once(&env.state).await;
        let brokers = env.get("/api/history?kind=brokers", &login).await;
        let series = &brokers.json["series"][0];
        series["key"] == key.as_str() && series["label"] == "broker-a/0"
    })
    .await;

    // The first request for a topic watches it and sets the base of its rate.
    let topic = env
        .get("/api/history?kind=topic&name=ChartTopic", &login)
        .await;
    assert_eq!(topic.status, StatusCode::OK, "{}", topic.text);
    assert!(points(&topic.json, "topic/ChartTopic/in").is_empty());
    for i in 0..5 {
        let sent = env
            .send(&login, "ChartTopic", json!({ "body": format!("m{i}") }))
            .await;
        assert_eq!(sent.status, StatusCode::OK, "{}", sent.text);
    }
    let rate = wait_for("a rate point of ChartTopic", || async {
        sampler::sample_once(&env.state).await;
        let topic = env
            .get("/api/history?kind=topic&name=ChartTopic", &login)
            .await;
        let points = points(&topic.json, "topic/ChartTopic/in");
        points
            .iter()
            .filter_map(|p| p[1].as_f64())
            .find(|v| *v > 0.0)
    })
    .await;
    assert!(rate > 0.0);
    let cluster = env.get("/api/history?kind=cluster", &login).await;
    assert!(points(&cluster.json, "cluster/in").len() >= 2);

    // A group's lag has a point at once; its consume rate from the next sample.
    env.create_group("chart_group").await;
    let path = "/api/history?kind=group&name=chart_group";
    let group = env.get(path, &login).await;
    assert_eq!(group.status, StatusCode::OK, "{}", group.text);
    assert_eq!(points(&group.json, "group/chart_group/lag").len(), 1);
    assert!(points(&group.json, "group/chart_group/tps").is_empty());
    eventually("a consume-rate point of chart_group", || async {
        sampler::sample_once(&env.state).await;
        let group = env.get(path, &login).await;
        !points(&group.json, "group/chart_group/tps").is_empty()
    })
    .await;
    // The group list shows the brokers' consume rate, which a group that never pulled has at 0.
    env.create_group("unsampled_group").await;
    let list = env.get("/api/groups?q=unsampled_group", &login).await;
    assert_eq!(list.json["items"][0]["consumeTps"], 0.0, "{}", list.text);
    for bad in [
        "/api/history",
        "/api/history?kind=bogus",
        "/api/history?kind=topic",
        "/api/history?kind=topic&name=bad%20name",
        "/api/history?kind=group&name=a/b",
    ] {
        let answer = env.get(bad, &login).await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{bad}: {}",
            answer.text
        );
    }
}

#[tokio::test]
async fn pickers_and_lists_hide_system_names_unless_asked() {
    let env = Env::start(|_| {}).await;
    let login = env.admin().await;
    env.create_topic(&login, "PickOrders", 1).await;
    env.create_topic(&login, "%DLQ%pick_group", 1).await;
    env.create_group("pick_group").await;
    env.create_group("CID_RMQ_SYS_PICK").await;

    let topics = env.get("/api/pickers/topics", &login).await;
    assert_eq!(topics.status, StatusCode::OK, "{}", topics.text);
    let listed = names(&topics.json);
    assert!(listed.contains(&"PickOrders".to_owned()), "{listed:?}");
    assert!(!listed.contains(&"TBW102".to_owned()), "{listed:?}");
    assert!(!listed.iter().any(|t| t.starts_with('%')), "{listed:?}");
    let all = names(
        &env.get("/api/pickers/topics?system=true", &login)
            .await
            .json,
    );
    assert!(all.contains(&"TBW102".to_owned()), "{all:?}");
    let filtered = env.get("/api/pickers/topics?q=pickord", &login).await;
    assert_eq!(names(&filtered.json), ["PickOrders"]);

    let groups = names(&env.get("/api/pickers/groups", &login).await.json);
    assert!(groups.contains(&"pick_group".to_owned()), "{groups:?}");
    assert!(
        !groups.contains(&"CID_RMQ_SYS_PICK".to_owned()),
        "{groups:?}"
    );
    let groups = names(
        &env.get("/api/pickers/groups?system=true", &login)
            .await
            .json,
    );
    assert!(
        groups.contains(&"CID_RMQ_SYS_PICK".to_owned()),
        "{groups:?}"
    );
    let dlq = names(&env.get("/api/pickers/dlq-groups", &login).await.json);
    assert_eq!(dlq, ["pick_group"]);
    let trace_topics = names(&env.get("/api/pickers/trace-topics", &login).await.json);
    assert!(trace_topics.contains(&"RMQ_SYS_TRACE_TOPIC".to_owned()));

    // The lists: system names only when asked for.
    let list = names(&env.get("/api/topics?size=500", &login).await.json);
    assert!(list.contains(&"PickOrders".to_owned()) && !list.contains(&"TBW102".to_owned()));
    let list = names(
        &env.get("/api/topics?size=500&system=true", &login)
            .await
            .json,
    );
    assert!(list.contains(&"TBW102".to_owned()), "{list:?}");
    let group_names = |answer: &Value| -> Vec<String> {
        answer["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g["group"].as_str().map(str::to_owned))
            .collect()
    };
    let list = group_names(&env.get("/api/groups?size=500", &login).await.json);
    assert!(list.contains(&"pick_group".to_owned()), "{list:?}");
    assert!(!list.contains(&"CID_RMQ_SYS_PICK".to_owned()), "{list:?}");
    let list = group_names(
        &env.get("/api/groups?size=500&system=true", &login)
            .await
            .json,
    );
    assert!(list.contains(&"CID_RMQ_SYS_PICK".to_owned()), "{list:?}");
    for bad in [
        "/api/pickers/topics?system=maybe",
        "/api/groups?system=1",
        "/api/topics?system=yes",
    ] {
        let answer = env.get(bad, &login).await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{bad}: {}",
            answer.text
        );
    }
    let unknown = env.get("/api/pickers/everything", &login).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    // A topic's route shows its permission as mqadmin prints it.
    let detail = env.get("/api/topics/PickOrders", &login).await;
    assert_eq!(detail.json["route"]["queues"][0]["permText"], "RW-");
}

#[tokio::test]
async fn producers_online_are_listed_with_their_release_names() {
    let env = Env::start(|_| {}).await;
    let login = env.admin().await;
    env.create_topic(&login, "OnlineTopic", 1).await;
    let sent = env
        .send(&login, "OnlineTopic", json!({ "body": "x" }))
        .await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.text);
    let release = version_name(COMET_VERSION).expect("a known release");
    let online = wait_for("the console's producer online", || async {
        let answer = env.get("/api/producers/online?system=true", &login).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
        answer.json["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|g| g["group"] == "TOOLS_PRODUCER")
            .cloned()
    })
    .await;
    assert_eq!(online["clients"][0]["versionName"], release, "{online}");
    let hidden = env.get("/api/producers/online", &login).await;
    assert!(
        !hidden.text.contains("TOOLS_PRODUCER"),
        "a system group: {}",
        hidden.text
    );
    let picker = names(
        &env.get("/api/pickers/producer-groups?system=true", &login)
            .await
            .json,
    );
    assert!(picker.contains(&"TOOLS_PRODUCER".to_owned()), "{picker:?}");
    let path = format!(
        "/api/producers?group=TOOLS_PRODUCER&topic={}",
        encode("OnlineTopic")
    );
    let connections = env.get(&path, &login).await;
    assert_eq!(connections.json["clients"][0]["versionName"], release);
}

/// A producer and a push consumer with message trace on, in group `traced_group`.
async fn traced_send_and_consume(env: &Env, topic: &str) -> (String, DefaultMQPushConsumer) {
    let mut config = ProducerConfig::new("traced_producer", env.namesrv_addr.clone());
    config.enable_msg_trace = true;
    config.client.instance_name = "console-trace-producer".to_owned();
    let producer = DefaultMQProducer::new(config);
    producer.start().await.expect("producer starts");
    let mut msg = Message::new(topic.to_owned(), b"traced body".to_vec());
    msg.set_keys(["traced-key"]);
    let sent = producer.send(msg).await.expect("sent");
    producer.shutdown().await;

    let mut config = PushConsumerConfig::new("traced_group");
    config.client = ClientConfig::new(env.namesrv_addr.clone());
    config.client.instance_name = "console-trace-consumer".to_owned();
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    config.enable_msg_trace = true;
    let consumer = DefaultMQPushConsumer::new(config);
    consumer.subscribe(topic, "*").await.expect("subscribed");
    let consumed = Arc::new(AtomicUsize::new(0));
    let counter = consumed.clone();
    consumer.register_message_listener(concurrently_fn(move |msgs, _| {
        counter.fetch_add(msgs.len(), Ordering::SeqCst);
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }));
    consumer.start().await.expect("consumer starts");
    eventually("the traced message consumed", || async {
        consumed.load(Ordering::SeqCst) >= 1
    })
    .await;
    (sent.msg_id, consumer)
}

#[tokio::test]
async fn a_traced_message_shows_its_send_and_consume_records() {
    let env = Env::start(|_| {}).await;
    let login = env.admin().await;
    env.create_topic(&login, "TracedTopic", 1).await;
    let (msg_id, consumer) = traced_send_and_consume(&env, "TracedTopic").await;
    let path = format!("/api/messages/trace?id={msg_id}");
    let items = wait_for("the Pub, SubBefore and SubAfter records", || async {
        env.broker().register_now().await;
        let answer = env.get(&path, &login).await;
        let items = answer.json["items"].as_array().cloned().unwrap_or_default();
        let kinds: Vec<&str> = items.iter().filter_map(|i| i["type"].as_str()).collect();
        (kinds.contains(&"Pub") && kinds.contains(&"SubAfter")).then_some(items)
    })
    .await;
    let publish = items.iter().find(|i| i["type"] == "Pub").expect("Pub");
    assert_eq!(publish["topic"], "TracedTopic");
    assert_eq!(publish["group"], "traced_producer");
    assert_eq!(publish["keys"], "traced-key");
    let after = items
        .iter()
        .find(|i| i["type"] == "SubAfter")
        .expect("SubAfter");
    assert_eq!(after["group"], "traced_group");
    assert_eq!(after["success"], true);
    let times: Vec<i64> = items
        .iter()
        .filter_map(|i| i["timestamp"].as_i64())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "in time order: {times:?}"
    );
    assert_eq!(trace::RMQ_SYS_TRACE_TOPIC, "RMQ_SYS_TRACE_TOPIC");

    // The group list tells the online client's release, consume type and model.
    let groups = env.get("/api/groups?q=traced_group", &login).await;
    let group = &groups.json["items"][0];
    assert_eq!(group["clients"], 1, "{}", groups.text);
    assert_eq!(
        group["version"],
        version_name(COMET_VERSION).expect("release")
    );
    assert_eq!(group["consumeType"], "CONSUME_PASSIVELY");
    assert_eq!(group["messageModel"], "CLUSTERING");
    let bad = env.get("/api/messages/trace?id=not-hex", &login).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    consumer.shutdown().await;
}
