//! The console's operations against a real cluster: lists and paging, offsets of an offline
//! group, messages, and dead-letter resend.

use axum::http::{Method, StatusCode};
use comet_protocol::headers::UpdateConsumerOffsetRequestHeader;
use comet_testkit::console::{Env, Login, encode};
use comet_testkit::{eventually, wait_for};
use serde_json::{Value, json};

#[tokio::test]
async fn topic_list_is_filtered_and_paged_on_the_server() {
    let env = Env::start(|_| {}).await;
    let login = env.admin().await;
    for t in ["PageA", "PageB", "PageC"] {
        env.create_topic(&login, t, 1).await;
    }
    env.create_topic(&login, "%RETRY%pagegroup", 1).await;
    env.create_topic(&login, "%DLQ%pagegroup", 1).await;
    let page = env
        .get("/api/topics?type=normal&q=page&size=2&page=1", &login)
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert_eq!(page.json["total"], 3);
    let names: Vec<&str> = page.json["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["name"].as_str())
        .collect();
    assert_eq!(names, ["PageA", "PageB"]);
    let second = env
        .get("/api/topics?type=normal&q=page&size=2&page=2", &login)
        .await;
    assert_eq!(second.json["items"][0]["name"], "PageC");
    assert_eq!(second.json["items"].as_array().map(Vec::len), Some(1));
    let beyond = env
        .get("/api/topics?type=normal&q=page&size=2&page=9", &login)
        .await;
    assert_eq!(beyond.json["items"].as_array().map(Vec::len), Some(0));
    let retry = env.get("/api/topics?type=retry&q=pagegroup", &login).await;
    assert_eq!(retry.json["items"][0]["name"], "%RETRY%pagegroup");
    let dlq = env.get("/api/topics?type=dlq&q=pagegroup", &login).await;
    assert_eq!(dlq.json["total"], 1);
    let system = env.get("/api/topics?type=system", &login).await;
    let system: Vec<&str> = system.json["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["name"].as_str())
        .collect();
    assert!(system.contains(&"TBW102"), "{system:?}");
    assert!(
        system.contains(&"DefaultCluster"),
        "the cluster's own topic: {system:?}"
    );
    assert!(!system.contains(&"PageA"));

    let detail = env.get("/api/topics/PageA", &login).await;
    assert_eq!(detail.status, StatusCode::OK, "{}", detail.text);
    assert_eq!(detail.json["queues"].as_array().map(Vec::len), Some(1));
    let deleted = env
        .write(Method::DELETE, "/api/topics/PageC", &login, json!({}))
        .await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text);
    let admin = &env.state.admin;
    eventually("PageC to disappear", || async {
        !admin
            .topic_list()
            .await
            .map(|l| l.contains("PageC"))
            .unwrap_or(true)
    })
    .await;
}

/// Sends `n` messages to `topic` through the console, keyed `key`.
async fn send_many(env: &Env, login: &Login, topic: &str, n: usize, key: &str) -> Vec<Value> {
    let mut sent = Vec::new();
    for i in 0..n {
        let answer = env
            .send(
                login,
                topic,
                json!({ "body": format!("message {i}"), "keys": key, "tags": "t" }),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
        sent.push(answer.json);
    }
    sent
}

#[tokio::test]
async fn an_offline_group_is_reset_by_time_and_skips_its_backlog() {
    let env = Env::start(|_| {}).await;
    let login = env.admin().await;
    env.create_topic(&login, "ResetTopic", 2).await;
    send_many(&env, &login, "ResetTopic", 10, "rk").await;
    let admin = &env.state.admin;
    let mut max = Vec::new();
    for q in 0..2 {
        let offset = admin
            .api()
            .get_max_offset(&env.broker_addr(), "ResetTopic", q, admin.timeout())
            .await
            .expect("max offset");
        max.push(offset);
    }
    assert_eq!(max.iter().sum::<i64>(), 10);
    env.create_group("OfflineGroup").await;
    let groups = env.get("/api/groups?type=user&q=offline", &login).await;
    assert_eq!(groups.json["total"], 1, "{}", groups.text);
    assert_eq!(groups.json["items"][0]["group"], "OfflineGroup");
    assert_eq!(groups.json["items"][0]["clients"], 0);
    // The group consumed everything, then went away: no client is online.
    for (q, offset) in max.iter().enumerate() {
        let header = UpdateConsumerOffsetRequestHeader {
            consumer_group: "OfflineGroup".to_owned(),
            topic: "ResetTopic".to_owned(),
            queue_id: q as i32,
            commit_offset: *offset,
            ..Default::default()
        };
        admin
            .api()
            .update_consumer_offset(&env.broker_addr(), header, admin.timeout())
            .await
            .expect("commit");
    }
    let detail = env.get("/api/groups/OfflineGroup", &login).await;
    assert_eq!(detail.status, StatusCode::OK, "{}", detail.text);
    assert_eq!(detail.json["online"], false);
    assert_eq!(detail.json["lag"], 0);

    let reset = env
        .write(
            Method::POST,
            "/api/groups/OfflineGroup/reset",
            &login,
            json!({ "topic": "ResetTopic", "timestamp": 0 }),
        )
        .await;
    assert_eq!(reset.status, StatusCode::OK, "{}", reset.text);
    for q in 0..2 {
        assert_eq!(
            env.committed_offset("OfflineGroup", "ResetTopic", q),
            0,
            "queue {q}"
        );
    }
    let detail = env.get("/api/groups/OfflineGroup", &login).await;
    assert_eq!(detail.json["lag"], 10, "{}", detail.text);

    let skip = env
        .write(
            Method::POST,
            "/api/groups/OfflineGroup/skip",
            &login,
            json!({ "topic": "ResetTopic" }),
        )
        .await;
    assert_eq!(skip.status, StatusCode::OK, "{}", skip.text);
    for (q, offset) in max.iter().enumerate() {
        assert_eq!(
            env.committed_offset("OfflineGroup", "ResetTopic", q as i32),
            *offset
        );
    }

    let topic = env.get("/api/topics/ResetTopic", &login).await;
    assert_eq!(
        topic.json["consumers"][0]["group"], "OfflineGroup",
        "{}",
        topic.text
    );
    assert_eq!(topic.json["consumers"][0]["lag"], 0);

    // The client-side path brokers that refuse an offline reset need (they refuse the reset with CONSUMER_NOT_ONLINE):
    // the offsets are searched and committed queue by queue.
    let offsets = admin
        .reset_offset_offline("OfflineGroup", "ResetTopic", 0, true)
        .await
        .expect("direct commit");
    assert_eq!(offsets.len(), 2);
    for q in 0..2 {
        assert_eq!(
            env.committed_offset("OfflineGroup", "ResetTopic", q),
            0,
            "queue {q}"
        );
    }
}

#[tokio::test]
async fn messages_are_found_by_key_id_and_time_window_with_bounds() {
    let env = Env::start(|_| {}).await;
    let login = env.admin().await;
    env.create_topic(&login, "MsgTopic", 2).await;
    let sent = send_many(&env, &login, "MsgTopic", 5, "order-42").await;
    let by_time = "/api/messages/by-time?topic=MsgTopic&size=2&page=1";
    let page = wait_for("five messages in the window", || async {
        let page = env.get(by_time, &login).await.json;
        (page["total"] == 5).then_some(page)
    })
    .await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(page["truncated"], false);
    let third = env
        .get("/api/messages/by-time?topic=MsgTopic&size=2&page=3", &login)
        .await;
    assert_eq!(third.json["items"].as_array().map(Vec::len), Some(1));
    let future = env
        .get(
            "/api/messages/by-time?topic=MsgTopic&begin=4102444800000",
            &login,
        )
        .await;
    assert_eq!(future.json["total"], 0, "{}", future.text);

    eventually("the key index", || async {
        let keyed = env
            .get("/api/messages/by-key?topic=MsgTopic&key=order-42", &login)
            .await;
        keyed.json["total"] == 5
    })
    .await;
    let limited = env
        .get(
            "/api/messages/by-key?topic=MsgTopic&key=order-42&limit=2",
            &login,
        )
        .await;
    assert_eq!(limited.json["total"], 2);

    let offset_id = sent[0]["offsetMsgId"].as_str().expect("offset id");
    let by_id = env
        .get(&format!("/api/messages/by-id?id={offset_id}"), &login)
        .await;
    assert_eq!(by_id.status, StatusCode::OK, "{}", by_id.text);
    assert_eq!(by_id.json["items"][0]["bodyText"], "message 0");
    let unique = sent[1]["msgId"].as_str().expect("unique id");
    let by_unique = env
        .get(
            &format!("/api/messages/by-id?id={unique}&topic=MsgTopic"),
            &login,
        )
        .await;
    assert_eq!(
        by_unique.json["items"][0]["bodyText"], "message 1",
        "{}",
        by_unique.text
    );
}

#[tokio::test]
async fn a_dead_letter_is_resent_to_its_original_topic_with_no_consumer_online() {
    let env = Env::start(|_| {}).await;
    let login = env.admin().await;
    env.create_topic(&login, "OrderTopic", 1).await;
    send_many(&env, &login, "OrderTopic", 1, "dead-1").await;
    let admin = &env.state.admin;
    let original = wait_for("the message's index entry", || async {
        let found = admin
            .query_message_by_key("OrderTopic", "dead-1", 8, 0, i64::MAX)
            .await
            .unwrap_or_default();
        (found.len() == 1).then_some(found)
    })
    .await;
    // The group gives up on the message: the broker moves it to %DLQ%DeadGroup.
    let msg = &original[0];
    admin
        .api()
        .consumer_send_message_back(
            &env.broker_addr(),
            "",
            msg,
            "DeadGroup",
            -1,
            admin.timeout(),
            16,
        )
        .await
        .expect("send back to the DLQ");
    env.broker().register_now().await;
    let listed = wait_for("the dead letter", || async {
        let listed = env.get("/api/dlq/DeadGroup", &login).await.json;
        (listed["total"] == 1).then_some(listed)
    })
    .await;
    let dead = &listed["items"][0];
    assert_eq!(dead["originTopic"], "OrderTopic", "{dead}");
    assert_eq!(dead["topic"], "%DLQ%DeadGroup");
    let export = env.get("/api/dlq/DeadGroup/export", &login).await;
    assert_eq!(export.status, StatusCode::OK);
    assert_eq!(export.json["messages"].as_array().map(Vec::len), Some(1));

    let unknown = env
        .write(
            Method::POST,
            "/api/dlq/DeadGroup/resend",
            &login,
            json!({ "msgIds": ["00000000000000000000000000000000"] }),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.text);
    let resent = env
        .write(
            Method::POST,
            "/api/dlq/DeadGroup/resend",
            &login,
            json!({ "msgIds": [dead["msgId"]] }),
        )
        .await;
    assert_eq!(resent.status, StatusCode::OK, "{}", resent.text);
    assert_eq!(
        resent.json["results"][0]["error"],
        Value::Null,
        "{}",
        resent.text
    );
    assert_eq!(resent.json["results"][0]["topic"], "OrderTopic");
    eventually("the resent copy on the original topic", || async {
        admin
            .query_message_by_key("OrderTopic", "dead-1", 8, 0, i64::MAX)
            .await
            .map(|found| found.len() == 2)
            .unwrap_or(false)
    })
    .await;
}

#[tokio::test]
async fn overview_groups_and_producers_answer() {
    let env = Env::start(|_| {}).await;
    let login = env.admin().await;
    let overview = env.get("/api/overview", &login).await;
    assert_eq!(overview.status, StatusCode::OK, "{}", overview.text);
    let broker = &overview.json["brokers"][0];
    assert_eq!(broker["addr"], env.broker().broker_addr().to_string());
    assert_eq!(broker["role"], "master");
    assert!(
        broker["version"].as_str().unwrap_or("").contains("Comet"),
        "{broker}"
    );
    // ACL is off: the page says so instead of listing accounts.
    let acl = env.get("/api/acl", &login).await;
    assert_eq!(acl.status, StatusCode::OK, "{}", acl.text);
    assert_eq!(acl.json["enabled"], false, "{}", acl.text);
    assert!(acl.json["brokers"][0]["error"].is_string(), "{}", acl.text);
    env.create_topic(&login, "ProdTopic", 1).await;
    send_many(&env, &login, "ProdTopic", 1, "p").await;
    let groups = env.get("/api/groups?size=500", &login).await;
    assert_eq!(groups.status, StatusCode::OK, "{}", groups.text);
    let path = format!(
        "/api/producers?group=TOOLS_PRODUCER&topic={}",
        encode("ProdTopic")
    );
    eventually("the console's producer among the connections", || async {
        let producers = env.get(&path, &login).await;
        assert_eq!(producers.status, StatusCode::OK, "{}", producers.text);
        producers.json["clients"].as_array().map(Vec::len) == Some(1)
    })
    .await;
    let missing = env.get("/api/groups/NeverSeenGroup", &login).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.text);
}

#[tokio::test]
async fn a_thousand_topics_and_2500_groups_are_listed_one_page_at_a_time() {
    let env = Env::start(|_| {}).await;
    let login = env.admin().await;
    let ctx = env.broker().context();
    // Written straight into the broker's tables (one file write each), then registered once.
    let mut topics = comet_broker::config_tables::TopicsDocument {
        data_version: ctx.topic_config.data_version(),
        topic_config_table: ctx
            .topic_config
            .all()
            .into_iter()
            .map(|t| (t.topic_name.clone(), t))
            .collect(),
    };
    topics.data_version.counter += 1;
    for i in 0..1000 {
        let name = format!("ScaleTopic{i:04}");
        let mut config = comet_protocol::body::TopicConfig::new(name.clone());
        config.read_queue_nums = 1;
        config.write_queue_nums = 1;
        topics.topic_config_table.insert(name, config);
    }
    assert!(ctx.topic_config.mirror_master(topics));
    let mut groups = ctx.subscription_groups.snapshot();
    groups.data_version.counter += 1;
    for i in 0..2500 {
        let name = format!("ScaleGroup{i:04}");
        groups.subscription_group_table.insert(
            name.clone(),
            comet_protocol::body::SubscriptionGroupConfig::new(name),
        );
    }
    assert!(
        ctx.subscription_groups
            .mirror_master(groups)
            .expect("persisted")
    );
    env.broker().register_now().await;
    let admin = &env.state.admin;
    eventually("the thousand routes", || async {
        admin
            .topic_list()
            .await
            .map(|l| l.len() >= 1000)
            .unwrap_or(false)
    })
    .await;

    let first = env
        .get("/api/topics?type=normal&q=scaletopic&size=500", &login)
        .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    assert_eq!(first.json["total"], 1000);
    assert_eq!(first.json["items"].as_array().map(Vec::len), Some(500));
    let last = env
        .get(
            "/api/topics?type=normal&q=scaletopic&size=500&page=2",
            &login,
        )
        .await;
    assert_eq!(last.json["items"][499]["name"], "ScaleTopic0999");
    let groups = env
        .get("/api/groups?q=scalegroup&size=20&page=125", &login)
        .await;
    assert_eq!(groups.status, StatusCode::OK, "{}", groups.text);
    assert_eq!(groups.json["total"], 2500);
    let items = groups.json["items"].as_array().expect("items");
    assert_eq!(items.len(), 20);
    assert_eq!(items[19]["group"], "ScaleGroup2499");
}

/// A broker ACL file: `ops` administers, `app` may only use `AppTopic`.
const PLAIN_ACL: &str = "accounts:
  - accessKey: ops
    secretKey: ops-secret-1
    admin: true
  - accessKey: app
    secretKey: app-secret-1
    admin: false
    defaultTopicPerm: DENY
    topicPerms:
      - AppTopic=PUB|SUB
";

#[tokio::test]
async fn with_acl_on_the_console_signs_as_its_configured_account() {
    let acl_dir = tempfile::tempdir().expect("tempdir");
    let acl_file = acl_dir.path().join("plain_acl.yml");
    std::fs::write(&acl_file, PLAIN_ACL).expect("ACL file written");
    let acl = |config: &mut comet_broker::BrokerConfig| {
        config.acl_enable = true;
        config.acl_file = Some(acl_file.clone());
    };
    let unsigned = Env::start_with(acl, |_| {}).await;
    let login = unsigned.admin().await;
    let refused = unsigned
        .write(
            Method::POST,
            "/api/topics",
            &login,
            json!({ "topic": "AclConsoleTopic" }),
        )
        .await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.text
    );
    assert!(
        refused.text.contains("code 16"),
        "NO_PERMISSION: {}",
        refused.text
    );

    let signed = Env::start_with(acl, |c| {
        c.access_key = Some("ops".to_owned());
        c.secret_key = Some("ops-secret-1".to_owned());
    })
    .await;
    let login = signed.admin().await;
    signed.create_topic(&login, "AclConsoleTopic", 1).await;
    let sent = signed
        .send(&login, "AclConsoleTopic", json!({ "body": "signed" }))
        .await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.text);

    // The ACL page lists the accounts, never a secret.
    let acl_page = signed.get("/api/acl", &login).await;
    assert_eq!(acl_page.status, StatusCode::OK, "{}", acl_page.text);
    assert_eq!(acl_page.json["enabled"], true, "{}", acl_page.text);
    let accounts = &acl_page.json["brokers"][0]["accounts"];
    assert_eq!(accounts[0]["accessKey"], "ops", "{}", acl_page.text);
    assert_eq!(
        accounts[1]["topicPerms"][0], "AppTopic=PUB|SUB",
        "{}",
        acl_page.text
    );
    assert!(!acl_page.text.contains("secret"), "{}", acl_page.text);
}
