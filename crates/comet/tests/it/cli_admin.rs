//! The mqadmin-style subcommands of the `comet` binary (topic, group, producer, message, cluster,
//! broker and name-server administration) against an in-process name server and broker, each in
//! JSON and as a table.

use std::path::Path;
use std::time::Duration;

use comet_broker::BrokerConfig;
use comet_broker::config::MetricsExporterType;
use comet_testkit::WAIT_DEADLINE;
use comet_testkit::process::{comet_command, output};
use comet_testkit::wait::wait_until_every;
use serde_json::Value;

/// Poll period of waits whose every check runs a `comet` command.
const COMMAND_POLL: Duration = Duration::from_millis(50);

/// Runs `comet <args>` on a blocking thread: (success, stdout, stderr).
async fn run(args: Vec<String>) -> (bool, String, String) {
    let mut command = comet_command(env!("CARGO_BIN_EXE_comet"));
    command.args(&args).env("RUST_BACKTRACE", "0");
    let output = output(command).await;
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A running name server and broker, and the `comet` command line against them.
struct Cluster {
    cluster: comet_testkit::Cluster,
    ns: String,
    broker_addr: String,
}

impl Cluster {
    /// Starts both, with the broker's traffic counters on (they feed `stats-all`).
    async fn start() -> Cluster {
        Cluster::start_with(|_, _| {}).await
    }

    /// Starts both, after `configure` has adjusted the broker's configuration (it gets the
    /// cluster's temporary directory for files the broker reads).
    async fn start_with(configure: impl FnOnce(&mut BrokerConfig, &Path)) -> Cluster {
        let cluster = comet_testkit::Cluster::start_in(|config, dir| {
            config.metrics_exporter_type = MetricsExporterType::Prom;
            config.metrics_prom_exporter_port = 0;
            configure(config, dir);
        })
        .await;
        Cluster {
            ns: cluster.namesrv_addr(),
            broker_addr: cluster.broker().broker_addr(),
            cluster,
        }
    }

    /// `comet <args> -n <ns>`; panics unless it succeeds; returns stdout.
    async fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = run(self.argv(args)).await;
        assert!(ok, "comet {args:?} failed\nstdout: {out}\nstderr: {err}");
        out
    }

    /// `comet <args> -n <ns> --json`, parsed (the first line).
    async fn json(&self, args: &[&str]) -> Value {
        let mut with_json = args.to_vec();
        with_json.push("--json");
        let out = self.ok(&with_json).await;
        serde_json::from_str(out.lines().next().unwrap_or_default())
            .unwrap_or_else(|e| panic!("comet {args:?} printed no JSON ({e}): {out}"))
    }

    /// `comet <args> -n <ns> --json`, one parsed object per line.
    async fn json_lines(&self, args: &[&str]) -> Vec<Value> {
        let mut with_json = args.to_vec();
        with_json.push("--json");
        let out = self.ok(&with_json).await;
        out.lines()
            .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
            .collect()
    }

    /// Stderr of a command that must fail.
    async fn fails(&self, args: &[&str]) -> String {
        let (ok, out, err) = run(self.argv(args)).await;
        assert!(!ok, "comet {args:?} should fail, printed {out}");
        err
    }

    fn argv(&self, args: &[&str]) -> Vec<String> {
        args.iter()
            .map(|s| (*s).to_owned())
            .chain(["-n".to_owned(), self.ns.clone()])
            .collect()
    }

    /// Creates `topic` with 4 queues and sends `count` messages keyed `key{i}` with bodies
    /// `body{i}`; returns the send results. Waits until the last one is indexed.
    async fn topic_with_messages(&self, topic: &str, count: usize) -> Vec<Value> {
        self.ok(&["topic", "create", topic, "-r", "4", "-w", "4"])
            .await;
        let n = count.to_string();
        let sent = self
            .json_lines(&[
                "produce", topic, "--count", &n, "--keys", "key{i}", "--body", "body{i}",
            ])
            .await;
        let last_key = format!("key{}", count - 1);
        let indexed = wait_until_every(COMMAND_POLL, WAIT_DEADLINE, || async {
            !self
                .json_lines(&["msg", "by-key", topic, &last_key])
                .await
                .is_empty()
        })
        .await;
        assert!(indexed, "index: deadline");
        sent
    }

    /// Pull-consumes `count` messages of `topic` as `group` (committing them).
    async fn consume(&self, topic: &str, group: &str, count: usize) {
        let n = count.to_string();
        self.ok(&[
            "consume", topic, "--mode", "pull", "--from", "first", "--count", &n, "-g", group,
        ])
        .await;
    }

    /// Per-queue consumer offsets of `group` on `topic` (`group progress`), by queue id.
    async fn offsets(&self, group: &str, topic: &str) -> Vec<(i64, i64)> {
        let progress = self.json(&["group", "progress", group, "-t", topic]).await;
        let mut offsets: Vec<(i64, i64)> = progress["queues"]
            .as_array()
            .expect("queues")
            .iter()
            .map(|q| {
                (
                    q["queueId"].as_i64().expect("queueId"),
                    q["consumerOffset"].as_i64().expect("offset"),
                )
            })
            .collect();
        offsets.sort_unstable();
        offsets
    }

    async fn stop(self) {
        self.cluster.shutdown().await;
    }
}

/// The broker's `brokerPermission` setting, read with `broker-config get`.
async fn broker_permission(c: &Cluster, addr: &str) -> Value {
    c.json(&["broker-config", "get", "-b", addr, "brokerPermission"])
        .await[addr]["brokerPermission"]
        .clone()
}

/// The perm of the first queue data of `topic`'s route.
async fn route_perm(c: &Cluster, topic: &str) -> i64 {
    c.json(&["topic", "route", topic]).await["queueDatas"][0]["perm"]
        .as_i64()
        .expect("perm")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_subcommands() {
    let c = Cluster::start().await;
    let topic = "CliAdminTopic";
    c.topic_with_messages(topic, 6).await;
    c.consume(topic, "cli_admin_reader", 6).await;

    let clusters = c.json(&["topic", "cluster-list", topic]).await;
    assert_eq!(clusters["clusters"], serde_json::json!(["DefaultCluster"]));
    assert_eq!(
        c.ok(&["topic", "cluster-list", topic]).await.trim(),
        "DefaultCluster"
    );

    let changed = c.json(&["topic", "update-perm", topic, "-p", "4"]).await;
    assert_eq!(changed["brokers"], serde_json::json!([c.broker_addr]));
    assert_eq!(route_perm(&c, topic).await, 4);
    let table = c.ok(&["topic", "update-perm", topic, "-p", "6"]).await;
    assert!(table.contains("perm to RW-"), "{table}");
    assert_eq!(route_perm(&c, topic).await, 6);
    let route = c.json(&["topic", "route", topic]).await;
    assert_eq!(route["queueDatas"][0]["readQueueNums"], 4, "{route}");
    c.fails(&["topic", "update-perm", topic, "-p", "5"]).await;

    let listed = c.json(&["topic", "list", "-c"]).await;
    let entry = listed["topics"]
        .as_array()
        .expect("topics")
        .iter()
        .find(|t| t["topic"] == topic)
        .cloned()
        .expect("the topic is listed");
    assert_eq!(entry["groups"], serde_json::json!(["cli_admin_reader"]));
    assert_eq!(entry["clusters"], serde_json::json!(["DefaultCluster"]));
    let table = c.ok(&["topic", "list", "-c"]).await;
    assert!(
        table
            .lines()
            .any(|l| l.contains(topic) && l.contains("cli_admin_reader")),
        "{table}"
    );
    assert!(!table.contains("%RETRY%"), "{table}");

    let status = c.json(&["topic", "status", topic]).await;
    let max: i64 = status["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .map(|q| q["maxOffset"].as_i64().expect("maxOffset"))
        .sum();
    assert_eq!(max, 6);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_subcommands() {
    let c = Cluster::start().await;
    let topic = "CliGroupTopic";
    c.topic_with_messages(topic, 6).await;
    c.consume(topic, "cli_src", 4).await;

    let created = c
        .json(&[
            "group", "create", "cli_cfg", "-r", "3", "-q", "2", "-s", "false",
        ])
        .await;
    assert_eq!(created["brokers"], serde_json::json!([c.broker_addr]));
    let config = c.json(&["group", "config", "cli_cfg"]).await;
    let read = &config["brokers"][0]["config"];
    assert_eq!(read["retryMaxTimes"], 3, "{config}");
    assert_eq!(read["retryQueueNums"], 2, "{config}");
    assert_eq!(read["consumeEnable"], false, "{config}");
    assert_eq!(read["consumeBroadcastEnable"], true, "{config}");
    let table = c.ok(&["group", "config", "cli_cfg"]).await;
    assert!(
        table
            .lines()
            .any(|l| l.contains("retryMaxTimes") && l.trim_end().ends_with('3')),
        "{table}"
    );

    // `-r` also deletes the group's retry and dead-letter topics.
    c.ok(&["topic", "create", "%RETRY%cli_cfg", "-r", "1", "-w", "1"])
        .await;
    let deleted = c.json(&["group", "delete", "cli_cfg", "-r"]).await;
    assert_eq!(
        deleted["topicsDeleted"],
        serde_json::json!(["%RETRY%cli_cfg", "%DLQ%cli_cfg"])
    );
    c.fails(&["group", "config", "cli_cfg"]).await;
    let topics = c.ok(&["topic", "list"]).await;
    assert!(!topics.contains("%RETRY%cli_cfg"), "{topics}");

    let stats = c.json(&["group", "consume-stats"]).await;
    let line = stats["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .find(|g| g["group"] == "cli_src" && g["topic"] == topic)
        .cloned()
        .expect("cli_src is listed");
    assert_eq!(line["diff"], 2, "{stats}");
    assert_eq!(stats["totalDiff"][c.broker_addr.as_str()], 2, "{stats}");
    let table = c
        .ok(&["group", "consume-stats", "-b", &c.broker_addr])
        .await;
    assert!(
        table.contains("cli_src") && table.contains("Diff Total: 2"),
        "{table}"
    );

    // Clone, skip, reset: the destination group follows each step.
    c.ok(&["group", "create", "cli_dst"]).await;
    let cloned = c
        .json(&[
            "group",
            "clone-offset",
            "-s",
            "cli_src",
            "-d",
            "cli_dst",
            "-t",
            topic,
        ])
        .await;
    assert_eq!(cloned["queues"].as_array().map(Vec::len), Some(4));
    assert_eq!(
        c.offsets("cli_dst", topic).await,
        c.offsets("cli_src", topic).await
    );
    let skipped = c.json(&["group", "skip-backlog", "cli_dst", topic]).await;
    assert_eq!(skipped["timestamp"], -1);
    let progress = c.json(&["group", "progress", "cli_dst", "-t", topic]).await;
    assert_eq!(progress["diffTotal"], 0, "{progress}");
    let table = c
        .ok(&["group", "reset-offset", "cli_dst", topic, "-s", "0"])
        .await;
    assert!(table.starts_with("BROKER"), "{table}");
    let progress = c.json(&["group", "progress", "cli_dst", "-t", topic]).await;
    assert_eq!(progress["diffTotal"], 6, "{progress}");
    c.stop().await;
}

/// The offline reset path (what the CLI falls back to when a broker answers
/// CONSUMER_NOT_ONLINE) commits each queue's target itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_reset_commits_queue_by_queue() {
    let c = Cluster::start().await;
    let topic = "CliOfflineTopic";
    c.topic_with_messages(topic, 6).await;
    c.consume(topic, "cli_offline", 6).await;
    let admin = comet_client::admin::MQAdmin::new(comet_client::ClientConfig::new(c.ns.clone()))
        .expect("admin");
    let set = admin
        .reset_offset_offline("cli_offline", topic, 0, true)
        .await
        .expect("offline reset");
    assert_eq!(set.len(), 4);
    assert!(set.values().all(|o| *o == 0), "{set:?}");
    assert_eq!(
        c.offsets("cli_offline", topic).await,
        vec![(0, 0), (1, 0), (2, 0), (3, 0)]
    );
    let set = admin
        .reset_offset_offline(
            "cli_offline",
            topic,
            comet_client::admin::RESET_TO_END,
            true,
        )
        .await
        .expect("offline skip");
    assert_eq!(set.values().sum::<i64>(), 6, "{set:?}");
    let progress = c
        .json(&["group", "progress", "cli_offline", "-t", topic])
        .await;
    assert_eq!(progress["diffTotal"], 0, "{progress}");
    admin.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_subcommands() {
    let c = Cluster::start().await;
    let topic = "CliMsgTopic";
    let sent = c.topic_with_messages(topic, 6).await;
    let first = &sent[0];
    let uniq = first["msgId"].as_str().expect("msgId");
    let found = c.json_lines(&["msg", "by-unique-key", topic, uniq]).await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["body"], "body0");
    let table = c.ok(&["msg", "by-unique-key", topic, uniq]).await;
    assert!(table.contains("key0") && table.contains("body0"), "{table}");
    c.fails(&[
        "msg",
        "by-unique-key",
        topic,
        "00000000000000000000000000000000",
    ])
    .await;

    // `produce -b -i` (mqadmin sendMessage -b -i) sends to one chosen queue.
    let broker_name = first["brokerName"].as_str().expect("brokerName").to_owned();
    let to_queue = c
        .json_lines(&[
            "produce",
            topic,
            "--body",
            "q3",
            "-b",
            &broker_name,
            "-i",
            "3",
        ])
        .await;
    assert_eq!(to_queue[0]["queueId"], 3, "{to_queue:?}");
    let before = sent.iter().filter(|m| m["queueId"] == 3).count();
    assert_eq!(to_queue[0]["queueOffset"], before, "{to_queue:?}");
    c.fails(&["produce", topic, "-b", &broker_name]).await;

    let qid = first["queueId"].to_string();
    let offset = first["queueOffset"].to_string();
    let broker = first["brokerName"].as_str().expect("brokerName");
    let at = c
        .json(&[
            "msg",
            "by-offset",
            "-t",
            topic,
            "-b",
            broker,
            "-i",
            &qid,
            "-o",
            &offset,
        ])
        .await;
    assert_eq!(at["body"], "body0");
    assert_eq!(at["keys"], serde_json::json!(["key0"]));
    let detail = c
        .ok(&[
            "msg",
            "by-offset",
            "-t",
            topic,
            "-b",
            broker,
            "-i",
            &qid,
            "-o",
            &offset,
        ])
        .await;
    assert!(
        detail.contains("Queue Offset") && detail.contains("body0"),
        "{detail}"
    );
    c.fails(&[
        "msg",
        "by-offset",
        "-t",
        topic,
        "-b",
        broker,
        "-i",
        &qid,
        "-o",
        "99",
    ])
    .await;

    let all = c.json_lines(&["msg", "print", topic]).await;
    let mut bodies: Vec<String> = all
        .iter()
        .map(|m| m["body"].as_str().expect("body").to_owned())
        .collect();
    bodies.sort();
    let mut expected: Vec<String> = (0..6).map(|i| format!("body{i}")).collect();
    expected.push("q3".to_owned());
    assert_eq!(bodies, expected);
    assert_eq!(
        c.json_lines(&["msg", "print", topic, "--max", "2"])
            .await
            .len(),
        2
    );
    // A window after every store time holds nothing; one around them holds everything.
    let last_store = all
        .iter()
        .map(|m| m["storeTimestamp"].as_i64().expect("storeTimestamp"))
        .max()
        .expect("messages");
    let after = (last_store + 1).to_string();
    assert!(
        c.json_lines(&["msg", "print", topic, "-s", &after])
            .await
            .is_empty()
    );
    let window = c
        .json_lines(&["msg", "print", topic, "-s", "0", "-e", &after])
        .await;
    assert_eq!(window.len(), 7);
    let table = c.ok(&["msg", "print", topic]).await;
    assert_eq!(table.lines().count(), 8, "{table}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_broker_and_namesrv_subcommands() {
    let c = Cluster::start().await;
    let topic = "CliOpsTopic";
    c.topic_with_messages(topic, 6).await;
    c.consume(topic, "cli_ops_reader", 6).await;

    let listed = c.json(&["cluster-list", "-m"]).await;
    let broker = &listed["brokers"][0];
    assert_eq!(broker["cluster"], "DefaultCluster");
    assert_eq!(broker["brokerName"], "broker-a");
    assert_eq!(broker["brokerId"], 0);
    assert_eq!(broker["addr"], c.broker_addr.as_str());
    assert!(
        broker["runtime"]["brokerVersionDesc"].is_string(),
        "{listed}"
    );
    let table = c.ok(&["cluster-list"]).await;
    assert!(
        table.contains("broker-a") && table.contains(&c.broker_addr),
        "{table}"
    );

    let addr = c.broker_addr.clone();
    assert_eq!(broker_permission(&c, &addr).await, "6");
    c.ok(&["broker-config", "set", "-b", &addr, "brokerPermission=4"])
        .await;
    assert_eq!(broker_permission(&c, &addr).await, "4");
    c.json(&["broker-config", "set", "brokerPermission=6"])
        .await;
    assert_eq!(broker_permission(&c, &addr).await, "6");
    let err = c
        .fails(&["broker-config", "set", "-b", &addr, "rocketmqHome=/x"])
        .await;
    assert!(
        err.contains("refused to change rocketmqHome")
            && err.contains("Can not update config in black list. (NO_PERMISSION 16)"),
        "{err}"
    );
    let err = c
        .fails(&[
            "broker-config",
            "set",
            "-b",
            &addr,
            "flushIntervalCommitLog=abc",
        ])
        .await;
    assert!(
        err.contains("flushIntervalCommitLog") && err.contains("INVALID_PARAMETER 29"),
        "{err}"
    );
    // A live key: in force at once, and what `get` reads back.
    c.ok(&[
        "broker-config",
        "set",
        "-b",
        &addr,
        "flushIntervalCommitLog=900",
    ])
    .await;
    let conf = c
        .json(&[
            "broker-config",
            "get",
            "-b",
            &addr,
            "flushIntervalCommitLog",
        ])
        .await;
    assert_eq!(
        conf[addr.as_str()]["flushIntervalCommitLog"],
        "900",
        "{conf}"
    );
    let table = c.ok(&["broker-config", "get", "-b", &addr]).await;
    assert!(
        table.contains("brokerName") && table.contains("broker-a"),
        "{table}"
    );

    let conf = c
        .json(&["namesrv-config", "get", "orderMessageEnable"])
        .await;
    assert_eq!(conf[c.ns.as_str()]["orderMessageEnable"], "true", "{conf}");
    c.json(&["namesrv-config", "set", "orderMessageEnable=false"])
        .await;
    let table = c.ok(&["namesrv-config", "get", "orderMessageEnable"]).await;
    assert!(
        table.contains("orderMessageEnable") && table.contains("false"),
        "{table}"
    );

    let wiped = c.json(&["broker-perm", "wipe-write", "broker-a"]).await;
    assert!(
        wiped["topicCounts"][c.ns.as_str()].as_i64() > Some(0),
        "{wiped}"
    );
    assert_eq!(route_perm(&c, topic).await, 4);
    let table = c.ok(&["broker-perm", "add-write", "broker-a"]).await;
    assert!(table.contains("broker-a"), "{table}");
    assert_eq!(route_perm(&c, topic).await, 6);

    // stats-all reads the broker's per-topic and per-group counts (VIEW_BROKER_STATS_DATA), which
    // the broker samples every 10 s: read until the sends are in.
    wait_until_every(Duration::from_millis(500), WAIT_DEADLINE, || async {
        c.json(&["stats-all", "-t", topic]).await["rows"][0]["inMsg24Hour"] == 6
    })
    .await;
    let stats = c.json(&["stats-all", "-t", topic]).await;
    let row = &stats["rows"][0];
    assert_eq!(row["group"], "cli_ops_reader", "{stats}");
    assert_eq!(row["inMsg24Hour"], 6, "{stats}");
    assert!(row["outMsg24Hour"].as_i64() >= Some(6), "{stats}");
    assert_eq!(row["accumulation"], 0, "{stats}");
    let table = c.ok(&["stats-all", "-a"]).await;
    assert!(
        table.contains(topic) && table.contains("cli_ops_reader"),
        "{table}"
    );

    let mut config = comet_client::producer::ProducerConfig::new("cli_ops_producers", c.ns.clone());
    config.client.instance_name = "cli-ops".to_owned();
    // The broker learns of a producer from its heartbeats; send them often.
    config.client.heartbeat_broker_interval = std::time::Duration::from_millis(200);
    let producer = comet_client::producer::DefaultMQProducer::new(config);
    producer.start().await.expect("producer starts");
    producer
        .send(comet_client::Message::new(topic, b"x".to_vec()))
        .await
        .expect("send");
    let producers = [
        "producer",
        "connections",
        "-g",
        "cli_ops_producers",
        "-t",
        topic,
    ];
    let registered = wait_until_every(Duration::from_millis(100), WAIT_DEADLINE, || async {
        run(c.argv(&producers)).await.0
    })
    .await;
    assert!(registered, "producer heartbeat: deadline");
    let conn = c.json(&producers).await;
    assert_eq!(
        conn["connectionSet"].as_array().map(Vec::len),
        Some(1),
        "{conn}"
    );
    let table = c
        .ok(&[
            "producer",
            "connections",
            "-g",
            "cli_ops_producers",
            "-t",
            topic,
        ])
        .await;
    assert!(table.contains("RUST"), "{table}");
    producer.shutdown().await;
    c.fails(&["producer", "connections", "-g", "nobody", "-t", topic])
        .await;
    c.stop().await;
}

/// An admin account and an ordinary one without rights on topics.
const ACL_FILE: &str = r#"
accounts:
  - accessKey: cliAdmin
    secretKey: cliAdminSecret
    admin: true
  - accessKey: cliUser
    secretKey: cliUserSecret
    admin: false
    defaultTopicPerm: DENY
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_commands_are_signed_with_the_given_account() {
    let c = Cluster::start_with(|config, dir| {
        let path = dir.join("plain_acl.yml");
        std::fs::write(&path, ACL_FILE).expect("ACL file written");
        config.acl_enable = true;
        config.acl_file = Some(path);
    })
    .await;
    let topic = "CliAclTopic";
    let create = ["topic", "create", topic, "-b", &c.broker_addr];
    let with = |account: [&'static str; 4]| [&create[..], &account[..]].concat();

    let unsigned = c.fails(&create).await;
    assert!(
        unsigned.contains("code 16"),
        "refused with NO_PERMISSION: {unsigned}"
    );
    let wrong = c
        .fails(&with([
            "--access-key",
            "cliAdmin",
            "--secret-key",
            "not-it",
        ]))
        .await;
    assert!(
        wrong.contains("code 16"),
        "refused with NO_PERMISSION: {wrong}"
    );
    c.fails(&with([
        "--access-key",
        "cliUser",
        "--secret-key",
        "cliUserSecret",
    ]))
    .await;
    c.fails(&["topic", "route", topic]).await;

    c.ok(&with([
        "--access-key",
        "cliAdmin",
        "--secret-key",
        "cliAdminSecret",
    ]))
    .await;
    assert_eq!(route_perm(&c, topic).await, 6);

    let usage = c
        .fails(&["topic", "route", topic, "--access-key", "cliAdmin"])
        .await;
    assert!(usage.contains("--secret-key"), "{usage}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_whose_reader_has_gone_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let c = Cluster::start().await;
    let ns = c.ns.clone();
    let output = tokio::task::spawn_blocking(move || {
        let mut child = comet_command(env!("CARGO_BIN_EXE_comet"))
            .args(["topic", "list", "-n", &ns])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("comet runs");
        // The reader goes away before the listing (of at least the system topics) is printed.
        drop(child.stdout.take());
        child.wait_with_output().expect("comet ends")
    })
    .await
    .expect("blocking task");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.signal(), Some(libc::SIGPIPE), "{stderr}");
    c.stop().await;
}
