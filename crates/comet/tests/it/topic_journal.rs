//! Topic changes are answered once they are in `topics.json.journal`: a `comet serve` killed with
//! SIGKILL right after creating topics (one by one and in a UPDATE_AND_CREATE_TOPIC_LIST) and
//! deleting one has them after its restart, routes them through its name server, and a clean
//! stop leaves them all in `topics.json` with the journal gone.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use comet_protocol::RemotingCommand;
use comet_protocol::body::{TopicConfig, TopicConfigSerializeWrapper as Topics, from_fastjson};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    DeleteTopicRequestHeader, GetRouteInfoRequestHeader, request_with_header,
};
use comet_remoting::{ClientConfig, RemotingClient};
use comet_testkit::cluster::create_topic_request;
use comet_testkit::process::{Serve, ServeOutput};
use comet_testkit::wait_until;

const RPC: Duration = Duration::from_secs(10);
/// Hang guard for anything this test waits for.
const DEADLINE: Duration = Duration::from_secs(60);

fn spawn_serve(data: &Path) -> Serve {
    Serve::spawn(
        env!("CARGO_BIN_EXE_comet"),
        data,
        &data.join("ready.json"),
        // No periodic whole write during the test: what the restart finds is the journal's.
        &["--set", "flushConsumerOffsetInterval=3600000"],
        ServeOutput::Log {
            path: data.join("serve.log"),
            append: true,
        },
        DEADLINE,
    )
}

async fn call(client: &RemotingClient, addr: &str, request: RemotingCommand) -> RemotingCommand {
    client
        .invoke(addr, request, RPC)
        .await
        .unwrap_or_else(|e| panic!("request to {addr}: {e}"))
}

fn create_list(topics: &[(&str, i32)]) -> RemotingCommand {
    let list: Vec<TopicConfig> = topics
        .iter()
        .map(|(name, queues)| TopicConfig::with_queues(*name, *queues, *queues, 6))
        .collect();
    let body = serde_json::to_vec(&serde_json::json!({ "topicConfigList": list })).expect("json");
    RemotingCommand::request(RequestCode::UpdateAndCreateTopicList).with_body(body)
}

async fn broker_topics(client: &RemotingClient, broker: &str) -> BTreeMap<String, TopicConfig> {
    let rsp = call(
        client,
        broker,
        RemotingCommand::request(RequestCode::GetAllTopicConfig),
    )
    .await;
    assert_eq!(rsp.code, ResponseCode::Success.code());
    let topics: Topics = from_fastjson(rsp.body.as_deref().unwrap_or_default()).expect("topics");
    topics.topic_config_table.into_iter().collect()
}

/// Whether the name server routes `topic`, waiting for the broker's registration.
async fn routed(client: &RemotingClient, namesrv: &str, topic: &str) -> bool {
    wait_until(|| async {
        let request = request_with_header(
            RequestCode::GetRouteinfoByTopic,
            &GetRouteInfoRequestHeader {
                topic: topic.to_owned(),
                ..Default::default()
            },
        );
        call(client, namesrv, request).await.code == ResponseCode::Success.code()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_changes_survive_a_kill9_and_a_clean_stop_writes_them_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let config = data.join("store").join("config");
    let client = RemotingClient::new(ClientConfig::default());

    let mut serve = spawn_serve(data);
    for (topic, queues) in [("JournalA", 2), ("JournalB", 3), ("JournalGone", 1)] {
        let rsp = call(&client, &serve.broker, create_topic_request(topic, queues)).await;
        assert_eq!(rsp.code, ResponseCode::Success.code(), "{:?}", rsp.remark);
    }
    let rsp = call(
        &client,
        &serve.broker,
        create_list(&[("JournalList1", 4), ("JournalList2", 5)]),
    )
    .await;
    assert_eq!(rsp.code, ResponseCode::Success.code(), "{:?}", rsp.remark);
    // A list with one bad name is refused whole.
    let rsp = call(
        &client,
        &serve.broker,
        create_list(&[("JournalNever", 1), ("bad name!", 1)]),
    )
    .await;
    assert_ne!(rsp.code, ResponseCode::Success.code());
    let delete = request_with_header(
        RequestCode::DeleteTopicInBroker,
        &DeleteTopicRequestHeader {
            topic: "JournalGone".to_owned(),
            ..Default::default()
        },
    );
    assert_eq!(
        call(&client, &serve.broker, delete).await.code,
        ResponseCode::Success.code()
    );
    assert!(
        config.join("topics.json.journal").exists(),
        "the changes are in the journal"
    );
    serve.child.kill().expect("SIGKILL");
    serve.child.wait().expect("reaped");
    drop(serve);

    let mut serve = spawn_serve(data);
    let topics = broker_topics(&client, &serve.broker).await;
    for (topic, queues) in [
        ("JournalA", 2),
        ("JournalB", 3),
        ("JournalList1", 4),
        ("JournalList2", 5),
    ] {
        let config = topics
            .get(topic)
            .unwrap_or_else(|| panic!("{topic} lost by the kill"));
        assert_eq!(config.read_queue_nums, queues, "{topic}");
        assert!(
            routed(&client, &serve.namesrv, topic).await,
            "{topic} not routed"
        );
    }
    assert!(!topics.contains_key("JournalGone"), "the deletion was kept");
    assert!(
        !topics.contains_key("JournalNever"),
        "a refused list creates nothing"
    );

    let pid = serve.child.id().to_string();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("run kill");
    assert!(status.success());
    let exit = serve.child.wait().expect("wait");
    assert!(exit.success(), "comet serve exited with {exit}");
    assert!(
        !config.join("topics.json.journal").exists(),
        "a clean stop empties the journal"
    );
    let text = std::fs::read_to_string(config.join("topics.json")).expect("topics.json");
    let written: Topics = from_fastjson(text.as_bytes()).expect("topics.json parses");
    for topic in ["JournalA", "JournalB", "JournalList1", "JournalList2"] {
        assert!(
            written.topic_config_table.contains_key(topic),
            "{topic} in topics.json"
        );
    }
    assert!(!written.topic_config_table.contains_key("JournalGone"));
}
