//! ACL against a real in-process name server and broker started with `aclEnable=true`: signing,
//! refusals with NO_PERMISSION and their remarks, per-topic and per-group permissions on send,
//! pull, offsets and admin codes, the account white list, hot reload, and Comet's own producer
//! and consumer signing end to end.
//!
//! All requests come from 127.0.0.1, so only the `trusted` account white-lists that address.
//! Nothing sleeps to synchronize: asynchronous effects are polled with a deadline.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use comet_acl::{AclClientRpcHook, SessionCredentials};
use comet_client::consumer::lite::{DefaultLitePullConsumer, LitePullConsumerConfig};
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{ClientConfig, Message, SendStatus};
use comet_protocol::RemotingCommand;
use comet_protocol::body::{ConsumerData, HeartbeatData, SubscriptionData};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CreateTopicRequestHeader, PullMessageRequestHeader, QueryConsumerOffsetRequestHeader,
    SendMessageRequestHeader, SendMessageRequestHeaderV2, UpdateConsumerOffsetRequestHeader,
    pull_sys_flag, request_with_header,
};
use comet_remoting::{RemotingClient, RpcHook};
use comet_testkit::{TestBroker, WAIT_DEADLINE, test_config, wait_until};

const RPC_TIMEOUT: Duration = Duration::from_secs(10);
const NO_PERMISSION: i32 = 16;

const ACL_FILE: &str = r#"
accounts:
  - accessKey: appUser
    secretKey: appSecret123
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - orders=PUB
      - audit=SUB
      - both=PUB|SUB
      - secret=DENY
    groupPerms:
      - billing=SUB
      - legacy=DENY
  - accessKey: adminUser
    secretKey: adminSecret123
    admin: true
  - accessKey: trusted
    secretKey: trustedSecret123
    whiteRemoteAddress: 127.0.0.1
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
"#;

static NEXT_INSTANCE: AtomicUsize = AtomicUsize::new(0);

fn app() -> SessionCredentials {
    SessionCredentials::new("appUser", "appSecret123")
}

fn admin() -> SessionCredentials {
    SessionCredentials::new("adminUser", "adminSecret123")
}

struct AclCluster {
    cluster: TestBroker,
    acl_path: PathBuf,
}

impl AclCluster {
    async fn start() -> AclCluster {
        let cluster = TestBroker::launch(
            test_config,
            |_, _| {},
            |config, dir| {
                let acl_path = dir.join("plain_acl.yml");
                std::fs::write(&acl_path, ACL_FILE).expect("write ACL file");
                config.acl_enable = true;
                config.acl_file = Some(acl_path);
            },
        )
        .await;
        AclCluster {
            acl_path: cluster.dir.path().join("plain_acl.yml"),
            cluster,
        }
    }

    fn broker_addr(&self) -> String {
        self.cluster.broker_addr()
    }

    fn namesrv_addr(&self) -> String {
        self.cluster.namesrv_addr()
    }

    /// Sends `request` signed with `credentials` (unsigned with `None`).
    async fn invoke(
        &self,
        credentials: Option<SessionCredentials>,
        request: RemotingCommand,
    ) -> RemotingCommand {
        let client = RemotingClient::new(comet_remoting::ClientConfig::default());
        if let Some(credentials) = credentials {
            client.add_rpc_hook(Arc::new(AclClientRpcHook::new(credentials)));
        }
        client
            .invoke(&self.broker_addr(), request, RPC_TIMEOUT)
            .await
            .expect("broker answers")
    }

    async fn shutdown(self) {
        self.cluster.shutdown().await;
    }
}

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn send_header(topic: &str) -> SendMessageRequestHeader {
    SendMessageRequestHeader {
        producer_group: "acl_test_producer".to_owned(),
        topic: topic.to_owned(),
        default_topic: "TBW102".to_owned(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: now_millis(),
        flag: 0,
        properties: None,
        reconsume_times: None,
        unit_mode: None,
        batch: None,
        max_reconsume_times: None,
        rpc: Default::default(),
    }
}

fn send(topic: &str) -> RemotingCommand {
    request_with_header(RequestCode::SendMessage, &send_header(topic))
        .with_body(Bytes::from_static(b"acl body"))
}

fn send_v2(topic: &str) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2::from(send_header(topic));
    request_with_header(RequestCode::SendMessageV2, &header)
        .with_body(Bytes::from_static(b"acl body v2"))
}

fn pull(group: &str, topic: &str) -> RemotingCommand {
    let header = PullMessageRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id: 0,
        queue_offset: 0,
        max_msg_nums: 32,
        sys_flag: pull_sys_flag::build(false, false, true, false),
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".to_owned()),
        sub_version: now_millis(),
        expression_type: Some("TAG".to_owned()),
        ..Default::default()
    };
    request_with_header(RequestCode::PullMessage, &header)
}

fn update_offset(group: &str, topic: &str) -> RemotingCommand {
    let header = UpdateConsumerOffsetRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id: 0,
        commit_offset: 0,
        ..Default::default()
    };
    request_with_header(RequestCode::UpdateConsumerOffset, &header)
}

fn query_offset(group: &str, topic: &str) -> RemotingCommand {
    let header = QueryConsumerOffsetRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id: 0,
        ..Default::default()
    };
    request_with_header(RequestCode::QueryConsumerOffset, &header)
}

fn heartbeat(group: &str, topic: &str) -> RemotingCommand {
    let data = HeartbeatData {
        client_id: "127.0.0.1@acl-test".to_owned(),
        consumer_data_set: vec![ConsumerData {
            group_name: group.to_owned(),
            subscription_data_set: vec![SubscriptionData::from_tag_expression(
                topic,
                "*",
                now_millis(),
            )],
            ..Default::default()
        }],
        ..Default::default()
    };
    RemotingCommand::request(RequestCode::HeartBeat)
        .with_body(data.encode().expect("heartbeat encodes"))
}

fn create_topic(topic: &str) -> RemotingCommand {
    let header = CreateTopicRequestHeader {
        topic: topic.to_owned(),
        default_topic: "TBW102".to_owned(),
        read_queue_nums: 2,
        write_queue_nums: 2,
        perm: 6,
        order: false,
        ..Default::default()
    };
    request_with_header(RequestCode::UpdateAndCreateTopic, &header)
}

fn assert_denied(rsp: &RemotingCommand, remark_contains: &str) {
    assert_eq!(
        rsp.code, NO_PERMISSION,
        "expected NO_PERMISSION, got {rsp:?}"
    );
    let remark = rsp.remark.as_deref().unwrap_or_default();
    assert!(
        remark.contains(remark_contains),
        "remark {remark:?} should contain {remark_contains:?}"
    );
}

fn assert_allowed(rsp: &RemotingCommand) {
    assert_ne!(
        rsp.code, NO_PERMISSION,
        "unexpected refusal: {:?}",
        rsp.remark
    );
}

/// Signs like the Java hook but with a wrong secret.
struct WrongSecret;

impl RpcHook for WrongSecret {
    fn before_request(
        &self,
        remote: std::net::SocketAddr,
        request: &mut RemotingCommand,
    ) -> Result<(), Box<RemotingCommand>> {
        AclClientRpcHook::new(SessionCredentials::new("appUser", "not-the-secret"))
            .before_request(remote, request)
    }
    fn after_response(
        &self,
        _: std::net::SocketAddr,
        _: &RemotingCommand,
        _: &mut RemotingCommand,
    ) {
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsigned_unknown_and_wrongly_signed_requests_are_refused() {
    let cluster = AclCluster::start().await;

    let rsp = cluster.invoke(None, send("orders")).await;
    assert_denied(&rsp, "carries no AccessKey");

    let rsp = cluster
        .invoke(
            Some(SessionCredentials::new("nobody", "whatever1")),
            send("orders"),
        )
        .await;
    assert_denied(&rsp, "no account for accessKey=nobody");

    let client = RemotingClient::new(comet_remoting::ClientConfig::default());
    client.add_rpc_hook(Arc::new(WrongSecret));
    let rsp = client
        .invoke(&cluster.broker_addr(), send("orders"), RPC_TIMEOUT)
        .await
        .expect("answer");
    assert_denied(&rsp, "check signature failed for accessKey=appUser");

    // Signed correctly, then the body is changed: the signature covers the body.
    let mut tampered = send("orders");
    AclClientRpcHook::new(app()).sign_request(&mut tampered);
    tampered.body = Some(Bytes::from_static(b"tampered"));
    let rsp = cluster.invoke(None, tampered).await;
    assert_denied(&rsp, "check signature failed");

    // AccessKey without Signature.
    let mut unsigned = send("orders");
    unsigned.ext_mut().insert("AccessKey", "appUser");
    let rsp = cluster.invoke(None, unsigned).await;
    assert_denied(&rsp, "carries no Signature");

    // The same request properly signed is stored.
    let rsp = cluster.invoke(Some(app()), send("orders")).await;
    assert_eq!(rsp.code, ResponseCode::Success.code(), "{:?}", rsp.remark);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_and_group_permissions_on_send_pull_and_offsets() {
    let cluster = AclCluster::start().await;
    let ok = ResponseCode::Success.code();

    // Send: PUB needed.
    assert_eq!(cluster.invoke(Some(app()), send("orders")).await.code, ok);
    assert_eq!(cluster.invoke(Some(app()), send_v2("both")).await.code, ok);
    assert_denied(
        &cluster.invoke(Some(app()), send("audit")).await,
        "no PUB permission on topic audit",
    );
    assert_denied(
        &cluster.invoke(Some(app()), send_v2("audit")).await,
        "no PUB permission on topic audit",
    );
    assert_denied(
        &cluster.invoke(Some(app()), send("secret")).await,
        "topic secret",
    );
    assert_denied(
        &cluster.invoke(Some(app()), send("unlisted")).await,
        "no PUB permission on topic unlisted",
    );

    // Pull: SUB on the topic and on the group.
    assert_allowed(&cluster.invoke(Some(app()), pull("billing", "both")).await);
    assert_allowed(&cluster.invoke(Some(app()), pull("anyGroup", "both")).await);
    assert_denied(
        &cluster.invoke(Some(app()), pull("billing", "orders")).await,
        "no SUB permission on topic orders",
    );
    assert_denied(
        &cluster.invoke(Some(app()), pull("legacy", "both")).await,
        "no SUB permission on group legacy",
    );

    // Offsets.
    assert_allowed(
        &cluster
            .invoke(Some(app()), update_offset("billing", "both"))
            .await,
    );
    assert_allowed(
        &cluster
            .invoke(Some(app()), query_offset("billing", "audit"))
            .await,
    );
    assert_denied(
        &cluster
            .invoke(Some(app()), update_offset("legacy", "both"))
            .await,
        "group legacy",
    );
    assert_denied(
        &cluster
            .invoke(Some(app()), query_offset("billing", "orders"))
            .await,
        "topic orders",
    );

    // Heartbeat: the group and every subscribed topic.
    assert_eq!(
        cluster
            .invoke(Some(app()), heartbeat("billing", "both"))
            .await
            .code,
        ok
    );
    assert_denied(
        &cluster
            .invoke(Some(app()), heartbeat("billing", "secret"))
            .await,
        "topic secret",
    );
    assert_denied(
        &cluster
            .invoke(Some(app()), heartbeat("legacy", "both"))
            .await,
        "group legacy",
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_codes_need_admin_and_white_listed_peers_skip_checks() {
    let cluster = AclCluster::start().await;
    assert_denied(
        &cluster
            .invoke(Some(app()), create_topic("made_by_app"))
            .await,
        "needs admin permission",
    );
    let rsp = cluster
        .invoke(Some(admin()), create_topic("made_by_admin"))
        .await;
    assert_eq!(rsp.code, ResponseCode::Success.code(), "{:?}", rsp.remark);
    // An admin with no explicit perms may also send anywhere.
    assert_eq!(
        cluster
            .invoke(Some(admin()), send("made_by_admin"))
            .await
            .code,
        ResponseCode::Success.code()
    );

    // `trusted` white-lists 127.0.0.1: no signature and DENY perms do not matter.
    let mut bare = send("orders");
    bare.ext_mut().insert("AccessKey", "trusted");
    let rsp = cluster.invoke(None, bare).await;
    assert_eq!(rsp.code, ResponseCode::Success.code(), "{:?}", rsp.remark);
    let rsp = cluster
        .invoke(
            Some(SessionCredentials::new("trusted", "wrong-secret")),
            create_topic("made_by_trusted"),
        )
        .await;
    assert_eq!(rsp.code, ResponseCode::Success.code(), "{:?}", rsp.remark);

    // The ACL listing names every account: admins only, and never with a secret.
    let listing = || RemotingCommand::request(RequestCode::GetBrokerClusterAclConfig);
    assert_denied(
        &cluster.invoke(Some(app()), listing()).await,
        "needs admin permission",
    );
    let rsp = cluster.invoke(Some(admin()), listing()).await;
    assert_eq!(rsp.code, ResponseCode::Success.code(), "{:?}", rsp.remark);
    let body = rsp.body.clone().unwrap_or_default();
    let listed: comet_protocol::body::acl::AclConfigBody =
        comet_protocol::body::from_fastjson(&body).expect("listing parses");
    let keys: Vec<&str> = listed
        .plain_access_configs
        .iter()
        .map(|a| a.access_key.as_str())
        .collect();
    assert!(
        keys.contains(&"appUser") && keys.contains(&"adminUser"),
        "{keys:?}"
    );
    assert!(
        listed
            .plain_access_configs
            .iter()
            .all(|a| a.secret_key == comet_acl::config::MASKED_SECRET),
        "{listed:?}"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_to_the_acl_file_take_effect_without_restart() {
    let cluster = AclCluster::start().await;
    assert_denied(
        &cluster.invoke(Some(app()), send("audit")).await,
        "topic audit",
    );

    // A broken file is ignored: the previous ACL stays in force.
    write_file(&cluster.acl_path, "accounts: [ [ not yaml");
    // Then a valid edit granting PUB on audit and revoking orders.
    let edited = ACL_FILE
        .replace("- audit=SUB", "- audit=PUB|SUB")
        .replace("- orders=PUB", "- orders=DENY");
    write_file(&cluster.acl_path, &edited);
    let reloaded = wait_until(|| async {
        cluster.invoke(Some(app()), send("audit")).await.code == ResponseCode::Success.code()
    })
    .await;
    assert!(
        reloaded,
        "the edited ACL file was not picked up within {WAIT_DEADLINE:?}"
    );
    assert_denied(
        &cluster.invoke(Some(app()), send("orders")).await,
        "topic orders",
    );
    cluster.shutdown().await;
}

fn write_file(path: &Path, text: &str) {
    // Write then rename, as editors and config management do, so the broker never reads a
    // half-written file.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write temp");
    std::fs::rename(&tmp, path).expect("rename");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn comet_client_signs_and_works_end_to_end() {
    let cluster = AclCluster::start().await;
    let instance = |role: &str| {
        format!(
            "acl-{role}-{}",
            NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed)
        )
    };
    let client_config = |role: &str, credentials: Option<SessionCredentials>| {
        let mut client = ClientConfig::new(cluster.namesrv_addr());
        client.instance_name = instance(role);
        client.credentials = credentials;
        client
    };

    // Without credentials the broker refuses the send.
    let mut config = ProducerConfig::new("acl_e2e_unsigned", cluster.namesrv_addr());
    config.client = client_config("unsigned", None);
    config.retry_times_when_send_failed = 0;
    let unsigned = DefaultMQProducer::new(config);
    unsigned.start().await.expect("producer starts");
    let err = unsigned
        .send(Message::new("both", "refused"))
        .await
        .expect_err("unsigned send must fail");
    assert!(err.to_string().contains("AccessKey"), "{err}");
    unsigned.shutdown().await;

    let mut config = ProducerConfig::new("acl_e2e_producer", cluster.namesrv_addr());
    config.client = client_config("producer", Some(app()));
    let producer = DefaultMQProducer::new(config);
    producer.start().await.expect("producer starts");
    let mut sent = Vec::new();
    for i in 0..5 {
        let result = producer
            .send(Message::new("both", format!("signed-{i}")))
            .await
            .expect("signed send succeeds");
        assert_eq!(result.send_status, SendStatus::SendOk);
        sent.push(format!("signed-{i}"));
    }

    let mut consumer_config =
        LitePullConsumerConfig::new("billing", client_config("consumer", Some(app())));
    consumer_config.consume_from_where =
        comet_client::consumer::ConsumeFromWhere::ConsumeFromFirstOffset;
    let consumer = DefaultLitePullConsumer::new(consumer_config);
    consumer.subscribe("both", "*").await.expect("subscribe");
    consumer.start().await.expect("consumer starts");
    let mut received: Vec<String> = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT_DEADLINE;
    while received.len() < sent.len() && tokio::time::Instant::now() < deadline {
        for msg in consumer
            .poll(Duration::from_millis(500))
            .await
            .expect("poll")
        {
            received.push(String::from_utf8_lossy(&msg.body).into_owned());
        }
    }
    received.sort();
    assert_eq!(
        received, sent,
        "every signed message is consumed through ACL"
    );
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}
