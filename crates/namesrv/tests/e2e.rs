//! End-to-end tests: a real `NameServer` on 127.0.0.1:0 driven with `comet_remoting::RemotingClient`
//! and raw protocol requests built from the typed headers. Waiting is done on observable state
//! (a response, a table size) under a hang guard; nothing sleeps and hopes.

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use comet_namesrv::{NameServer, NameServerHandle, NamesrvConfig, body_crc32};
use comet_protocol::body::{
    ClusterInfo, DataVersion, KvTable, RegisterBrokerBody, TopicConfig, TopicList, TopicRouteData,
    from_fastjson,
};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CommandHeader, DeleteTopicFromNamesrvRequestHeader, GetKvConfigRequestHeader,
    GetKvListByNamespaceRequestHeader, GetRouteInfoRequestHeader, GetTopicsByClusterRequestHeader,
    PutKvConfigRequestHeader, RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader,
    request_with_header,
};
use comet_protocol::{RemotingCommand, SerializeType};
use comet_remoting::{ClientConfig, RemotingClient};

/// Hang guard for anything that should complete promptly (generous for a loaded CI box).
const GUARD: Duration = Duration::from_secs(30);
const RPC_TIMEOUT: Duration = Duration::from_secs(3);
const CLUSTER: &str = "DefaultCluster";
const BROKER_ADDR: &str = "127.0.0.1:10911";
/// `MQVersion.V4_5_2`, what the Go client sends: legacy route JSON.
const GO_CLIENT_VERSION: i32 = 317;
/// `MQVersion.V5_3_3`: standard route JSON.
const JAVA_5_VERSION: i32 = 479;

async fn guard<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(GUARD, fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what} did not complete within {GUARD:?}"),
    }
}

/// Polls a condition of the name server's state (no future to await) until it holds.
async fn reached(what: &str, cond: impl Fn() -> bool) {
    comet_testkit::eventually(what, || std::future::ready(cond())).await;
}

async fn start(dir: &Path) -> (NameServerHandle, String) {
    let handle = NameServer::start(NamesrvConfig::new("127.0.0.1:0", dir))
        .await
        .expect("name server starts");
    let addr = handle.local_addr().to_string();
    (handle, addr)
}

fn client() -> RemotingClient {
    RemotingClient::new(ClientConfig::default())
}

async fn call(client: &RemotingClient, addr: &str, request: RemotingCommand) -> RemotingCommand {
    guard("request", client.invoke(addr, request, RPC_TIMEOUT))
        .await
        .expect("response")
}

fn request<H: CommandHeader>(code: RequestCode, header: &H, version: i32) -> RemotingCommand {
    let mut req = request_with_header(code, header);
    req.version = version;
    req
}

fn register_request(name: &str, id: i64, addr: &str, topics: &[(&str, i32)]) -> RemotingCommand {
    let table: HashMap<String, TopicConfig> = topics
        .iter()
        .map(|(t, q)| ((*t).to_string(), TopicConfig::with_queues(*t, *q, *q, 6)))
        .collect();
    let mut body = RegisterBrokerBody::default();
    body.topic_config_serialize_wrapper.topic_config_table = table;
    body.topic_config_serialize_wrapper.data_version = DataVersion {
        timestamp: 1_700_000_000_000,
        counter: 1,
        state_version: 0,
    };
    let bytes = body.encode(false).expect("encode body");
    let header = RegisterBrokerRequestHeader {
        broker_name: name.into(),
        broker_addr: addr.into(),
        cluster_name: CLUSTER.into(),
        ha_server_addr: "127.0.0.1:10912".into(),
        broker_id: id,
        compressed: Some(false),
        body_crc32: Some(body_crc32(Some(&bytes))),
        ..Default::default()
    };
    request(RequestCode::RegisterBroker, &header, JAVA_5_VERSION).with_body(bytes)
}

fn route_request(topic: &str, version: i32, standard: Option<bool>) -> RemotingCommand {
    let header = GetRouteInfoRequestHeader {
        topic: topic.into(),
        accept_standard_json_only: standard,
        ..Default::default()
    };
    request(RequestCode::GetRouteinfoByTopic, &header, version)
}

fn body_text(rsp: &RemotingCommand) -> String {
    String::from_utf8(rsp.body.as_deref().unwrap_or_default().to_vec()).expect("UTF-8 body")
}

#[tokio::test]
async fn register_route_cluster_topics_delete_unregister() {
    let dir = tempfile::tempdir().unwrap();
    let (ns, addr) = start(dir.path()).await;
    let c = client();

    let rsp = call(
        &c,
        &addr,
        register_request("broker-a", 0, BROKER_ADDR, &[("TopicA", 4), ("TopicB", 8)]),
    )
    .await;
    assert_eq!(rsp.code, 0, "{:?}", rsp.remark);
    assert!(rsp.body.is_none(), "no ORDER_TOPIC_CONFIG yet");

    // Legacy form for old clients: bare numeric keys, byte for byte.
    let rsp = call(&c, &addr, route_request("TopicA", GO_CLIENT_VERSION, None)).await;
    assert_eq!(rsp.code, 0);
    let legacy = body_text(&rsp);
    assert_eq!(
        legacy,
        r#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#
    );
    // Standard form by version, and by flag.
    let rsp = call(&c, &addr, route_request("TopicA", JAVA_5_VERSION, None)).await;
    let standard = body_text(&rsp);
    assert_eq!(standard, legacy.replace("{0:", "{\"0\":"));
    let rsp = call(
        &c,
        &addr,
        route_request("TopicA", GO_CLIENT_VERSION, Some(true)),
    )
    .await;
    assert_eq!(body_text(&rsp), standard);
    let route = TopicRouteData::decode(rsp.body.as_deref().unwrap_or_default()).unwrap();
    assert_eq!(route.broker_datas[0].master_addr(), Some(BROKER_ADDR));
    let rsp = call(&c, &addr, route_request("TopicB", JAVA_5_VERSION, None)).await;
    let route = TopicRouteData::decode(rsp.body.as_deref().unwrap_or_default()).unwrap();
    assert_eq!(route.queue_datas[0].write_queue_nums, 8);

    // Unknown topic.
    let rsp = call(&c, &addr, route_request("Nope", JAVA_5_VERSION, None)).await;
    assert_eq!(rsp.code, i32::from(ResponseCode::TopicNotExist));
    let remark = rsp.remark.unwrap_or_default();
    assert!(
        remark.starts_with("No topic route info in name server for the topic: Nope"),
        "{remark}"
    );

    // Cluster info, always legacy keys.
    let rsp = call(
        &c,
        &addr,
        RemotingCommand::request(RequestCode::GetBrokerClusterInfo),
    )
    .await;
    let text = body_text(&rsp);
    assert!(
        text.contains(r#""brokerAddrs":{0:"127.0.0.1:10911"}"#),
        "{text}"
    );
    let info = ClusterInfo::decode(text.as_bytes()).unwrap();
    assert_eq!(
        info.cluster_addr_table[CLUSTER],
        vec!["broker-a".to_string()]
    );

    // Topic lists.
    let rsp = call(
        &c,
        &addr,
        RemotingCommand::request(RequestCode::GetAllTopicListFromNameserver),
    )
    .await;
    assert_eq!(body_text(&rsp), r#"{"topicList":["TopicA","TopicB"]}"#);
    let by_cluster = GetTopicsByClusterRequestHeader {
        cluster: CLUSTER.into(),
        ..Default::default()
    };
    let rsp = call(
        &c,
        &addr,
        request(RequestCode::GetTopicsByCluster, &by_cluster, JAVA_5_VERSION),
    )
    .await;
    let list: TopicList = from_fastjson(rsp.body.as_deref().unwrap_or_default()).unwrap();
    assert_eq!(list.topic_list.len(), 2);
    let rsp = call(
        &c,
        &addr,
        RemotingCommand::request(RequestCode::GetSystemTopicListFromNs),
    )
    .await;
    let list: TopicList = from_fastjson(rsp.body.as_deref().unwrap_or_default()).unwrap();
    assert!(list.topic_list.contains(CLUSTER) && list.topic_list.contains("broker-a"));
    assert_eq!(list.broker_addr.as_deref(), Some(BROKER_ADDR));

    // Delete one topic.
    let del = DeleteTopicFromNamesrvRequestHeader {
        topic: "TopicB".into(),
        ..Default::default()
    };
    let rsp = call(
        &c,
        &addr,
        request(RequestCode::DeleteTopicInNamesrv, &del, JAVA_5_VERSION),
    )
    .await;
    assert_eq!(rsp.code, 0);
    let rsp = call(&c, &addr, route_request("TopicB", JAVA_5_VERSION, None)).await;
    assert_eq!(rsp.code, 17);
    let rsp = call(&c, &addr, route_request("TopicA", JAVA_5_VERSION, None)).await;
    assert_eq!(rsp.code, 0);

    // Unregister.
    let unreg = UnregisterBrokerRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: BROKER_ADDR.into(),
        cluster_name: CLUSTER.into(),
        broker_id: 0,
        ..Default::default()
    };
    let rsp = call(
        &c,
        &addr,
        request(RequestCode::UnregisterBroker, &unreg, JAVA_5_VERSION),
    )
    .await;
    assert_eq!(rsp.code, 0);
    let rsp = call(&c, &addr, route_request("TopicA", JAVA_5_VERSION, None)).await;
    assert_eq!(rsp.code, 17);
    assert_eq!(ns.route_info().live_broker_count(), 0);

    c.shutdown().await;
    guard("shutdown", ns.shutdown()).await;
}

#[tokio::test]
async fn kv_config_survives_a_restart_and_feeds_routes() {
    let dir = tempfile::tempdir().unwrap();
    let (ns, addr) = start(dir.path()).await;
    let c = client();
    let put = PutKvConfigRequestHeader {
        namespace: "ORDER_TOPIC_CONFIG".into(),
        key: "TopicA".into(),
        value: "broker-a:4".into(),
        ..Default::default()
    };
    let rsp = call(
        &c,
        &addr,
        request(RequestCode::PutKvConfig, &put, JAVA_5_VERSION),
    )
    .await;
    assert_eq!(rsp.code, 0, "{:?}", rsp.remark);
    c.shutdown().await;
    guard("shutdown", ns.shutdown()).await;
    assert!(dir.path().join("kvConfig.json").exists());

    let (ns, addr) = start(dir.path()).await;
    let c = client();
    let get = GetKvConfigRequestHeader {
        namespace: "ORDER_TOPIC_CONFIG".into(),
        key: "TopicA".into(),
        ..Default::default()
    };
    let rsp = call(
        &c,
        &addr,
        request(RequestCode::GetKvConfig, &get, JAVA_5_VERSION),
    )
    .await;
    assert_eq!(rsp.code, 0);
    assert_eq!(rsp.ext("value"), Some("broker-a:4"));
    let missing = GetKvConfigRequestHeader {
        key: "Other".into(),
        ..get.clone()
    };
    let rsp = call(
        &c,
        &addr,
        request(RequestCode::GetKvConfig, &missing, JAVA_5_VERSION),
    )
    .await;
    assert_eq!(rsp.code, i32::from(ResponseCode::QueryNotFound));
    let list = GetKvListByNamespaceRequestHeader {
        namespace: "ORDER_TOPIC_CONFIG".into(),
        ..Default::default()
    };
    let rsp = call(
        &c,
        &addr,
        request(RequestCode::GetKvlistByNamespace, &list, JAVA_5_VERSION),
    )
    .await;
    let table: KvTable = from_fastjson(rsp.body.as_deref().unwrap_or_default()).unwrap();
    assert_eq!(table.table["TopicA"], "broker-a:4");

    // The order config reaches brokers (register response) and clients (route).
    let rsp = call(
        &c,
        &addr,
        register_request("broker-a", 0, BROKER_ADDR, &[("TopicA", 4), ("TopicB", 4)]),
    )
    .await;
    let table: KvTable = from_fastjson(rsp.body.as_deref().unwrap_or_default()).unwrap();
    assert_eq!(table.table["TopicA"], "broker-a:4");
    let rsp = call(&c, &addr, route_request("TopicA", JAVA_5_VERSION, None)).await;
    let route = TopicRouteData::decode(rsp.body.as_deref().unwrap_or_default()).unwrap();
    assert_eq!(route.order_topic_conf.as_deref(), Some("broker-a:4"));

    c.shutdown().await;
    guard("shutdown", ns.shutdown()).await;
}

#[tokio::test]
async fn closing_the_broker_connection_removes_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let (ns, addr) = start(dir.path()).await;
    let broker = client();
    let rsp = call(
        &broker,
        &addr,
        register_request("broker-a", 0, BROKER_ADDR, &[("TopicA", 4), ("TopicB", 4)]),
    )
    .await;
    assert_eq!(rsp.code, 0);
    let other = client();
    let rsp = call(
        &other,
        &addr,
        register_request(
            "broker-b",
            0,
            "127.0.0.1:20911",
            &[("TopicA", 2), ("TopicC", 2)],
        ),
    )
    .await;
    assert_eq!(rsp.code, 0);
    assert_eq!(ns.route_info().live_broker_count(), 2);

    broker.close_channel(&addr);
    let route = Arc::clone(ns.route_info());
    reached("broker-a removed", || {
        !route.is_broker_live(CLUSTER, BROKER_ADDR)
    })
    .await;
    assert!(route.is_broker_live(CLUSTER, "127.0.0.1:20911"));
    let rsp = call(&other, &addr, route_request("TopicB", JAVA_5_VERSION, None)).await;
    assert_eq!(rsp.code, 17);
    let rsp = call(&other, &addr, route_request("TopicA", JAVA_5_VERSION, None)).await;
    let route = TopicRouteData::decode(rsp.body.as_deref().unwrap_or_default()).unwrap();
    assert_eq!(route.broker_datas.len(), 1);
    assert_eq!(route.broker_datas[0].broker_name, "broker-b");

    broker.shutdown().await;
    other.shutdown().await;
    guard("shutdown", ns.shutdown()).await;
}

#[tokio::test]
async fn silent_brokers_expire_through_the_scanner() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(comet_remoting::ManualClock::new(1_000_000));
    let mut config = NamesrvConfig::new("127.0.0.1:0", dir.path());
    config.scan_interval = Duration::from_millis(10);
    let ns = NameServer::start_with_clock(config, clock.clone())
        .await
        .unwrap();
    let addr = ns.local_addr().to_string();
    let broker = client();
    let rsp = call(
        &broker,
        &addr,
        register_request("broker-a", 0, BROKER_ADDR, &[("TopicA", 4), ("TopicB", 4)]),
    )
    .await;
    assert_eq!(rsp.code, 0);

    let route = Arc::clone(ns.route_info());
    assert_eq!(route.live_broker_count(), 1);
    // Past the default 120 s expiry (the exact boundary is covered by the unit tests).
    clock.advance(120_001);
    reached("broker expired", || route.live_broker_count() == 0).await;
    // The expired broker's connection is closed by the name server, as RocketMQ does.
    reached("broker connection closed", || {
        broker.channel(&addr).is_none()
    })
    .await;
    let c = client();
    let rsp = call(&c, &addr, route_request("TopicA", JAVA_5_VERSION, None)).await;
    assert_eq!(rsp.code, 17);

    c.shutdown().await;
    broker.shutdown().await;
    guard("shutdown", ns.shutdown()).await;
}

#[tokio::test]
async fn malformed_headers_get_error_responses_and_the_connection_survives() {
    let dir = tempfile::tempdir().unwrap();
    let (ns, addr) = start(dir.path()).await;
    let c = client();

    let mut bad = register_request("broker-a", 0, BROKER_ADDR, &[("TopicA", 4), ("TopicB", 4)]);
    bad.ext_mut().insert("brokerId", "not-a-number");
    let rsp = call(&c, &addr, bad).await;
    assert_eq!(rsp.code, i32::from(ResponseCode::SystemError));
    assert!(
        rsp.remark
            .as_deref()
            .unwrap_or_default()
            .contains("brokerId"),
        "{:?}",
        rsp.remark
    );

    let rsp = call(
        &c,
        &addr,
        RemotingCommand::request(RequestCode::GetRouteinfoByTopic),
    )
    .await;
    assert_eq!(rsp.code, i32::from(ResponseCode::SystemError));
    assert!(
        rsp.remark
            .as_deref()
            .unwrap_or_default()
            .contains("`topic`"),
        "{:?}",
        rsp.remark
    );

    let mut bad_crc = register_request("broker-a", 0, BROKER_ADDR, &[("TopicA", 4), ("TopicB", 4)]);
    bad_crc.ext_mut().insert("bodyCrc32", "12345");
    let rsp = call(&c, &addr, bad_crc).await;
    assert_eq!(
        (rsp.code, rsp.remark.as_deref()),
        (1, Some("crc32 not match"))
    );

    let rsp = call(
        &c,
        &addr,
        register_request("broker-a", 0, BROKER_ADDR, &[("Lonely", 4)]),
    )
    .await;
    assert_eq!(
        (rsp.code, rsp.remark.as_deref()),
        (1, Some("register broker failed"))
    );

    // Codes the name server does not serve.
    let rsp = call(
        &c,
        &addr,
        RemotingCommand::request(RequestCode::SendMessageV2),
    )
    .await;
    assert_eq!(rsp.code, i32::from(ResponseCode::RequestCodeNotSupported));

    // Same connection, still serving — and through the ROCKETMQ binary header codec too.
    let rsp = call(
        &c,
        &addr,
        RemotingCommand::request(RequestCode::GetBrokerClusterInfo),
    )
    .await;
    assert_eq!(rsp.code, 0);
    let binary = RemotingClient::new(ClientConfig {
        serialize_type: SerializeType::RocketMq,
        ..ClientConfig::default()
    });
    let rsp = call(
        &binary,
        &addr,
        register_request("broker-a", 0, BROKER_ADDR, &[("TopicA", 4), ("TopicB", 4)]),
    )
    .await;
    assert_eq!(rsp.code, 0, "{:?}", rsp.remark);
    let rsp = call(&c, &addr, route_request("TopicA", JAVA_5_VERSION, None)).await;
    assert_eq!(rsp.code, 0);

    c.shutdown().await;
    binary.shutdown().await;
    guard("shutdown", ns.shutdown()).await;
}
