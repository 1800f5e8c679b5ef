//! Smoke test of the client subcommands: the built `comet` binary against an in-process name
//! server and broker — produce, consume (pull and push modes), topic list, group progress.

use comet_testkit::process::{comet_command, output};
use comet_testkit::{Cluster, eventually};

const TOPIC: &str = "CliSmokeTopic";

/// Runs `comet <args>` on a blocking thread and returns its stdout; fails on a non-zero exit.
async fn comet(args: Vec<String>) -> String {
    let mut command = comet_command(env!("CARGO_BIN_EXE_comet"));
    command.args(&args);
    let output = output(command).await;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "comet failed: {}\nstdout: {stdout}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn args(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_consume_and_list() {
    let cluster = Cluster::start().await;
    let ns = cluster.namesrv_addr();

    let produced = comet(args(&[
        "produce",
        "-n",
        &ns,
        TOPIC,
        "--count",
        "6",
        "--tags",
        "T1",
        "--body",
        "hello {i}",
        "--json",
    ]))
    .await;
    let sent: Vec<serde_json::Value> = produced
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(sent.len(), 6);
    assert!(sent.iter().all(|v| v["sendStatus"] == "SendOk"));
    // A send is acknowledged once appended; consume and group progress read the ConsumeQueues,
    // which asynchronous dispatch fills a little later.
    cluster.wait_dispatched().await;

    let pulled = comet(args(&[
        "consume",
        "-n",
        &ns,
        TOPIC,
        "--mode",
        "pull",
        "--from",
        "first",
        "--count",
        "4",
        "-g",
        "cli_pull_group",
        "--json",
    ]))
    .await;
    let bodies: Vec<String> = pulled
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("JSON message");
            assert_eq!(v["tags"], "T1");
            v["body"].as_str().expect("body").to_owned()
        })
        .collect();
    assert_eq!(bodies.len(), 4);
    assert!(bodies.iter().all(|b| b.starts_with("hello ")));

    // The group committed exactly what was printed: its lag is the 2 unprinted messages.
    let progress = comet(args(&[
        "group",
        "progress",
        "-n",
        &ns,
        "cli_pull_group",
        "-t",
        TOPIC,
        "--json",
    ]))
    .await;
    let progress: serde_json::Value = serde_json::from_str(progress.trim()).expect("progress JSON");
    assert_eq!(progress["diffTotal"], 2);

    // A second run of the same group prints the remaining 2.
    let rest = comet(args(&[
        "consume",
        "-n",
        &ns,
        TOPIC,
        "--mode",
        "pull",
        "--from",
        "first",
        "--count",
        "2",
        "-g",
        "cli_pull_group",
        "--json",
    ]))
    .await;
    let mut all: Vec<String> = bodies;
    all.extend(rest.lines().map(|l| {
        let v: serde_json::Value = serde_json::from_str(l).expect("JSON message");
        v["body"].as_str().expect("body").to_owned()
    }));
    all.sort();
    let expected: Vec<String> = (0..6).map(|i| format!("hello {i}")).collect();
    assert_eq!(all, expected);

    let pushed = comet(args(&[
        "consume",
        "-n",
        &ns,
        TOPIC,
        "--mode",
        "push",
        "--from",
        "first",
        "--count",
        "6",
        "-g",
        "cli_push_group",
        // One message per pull and one cached per queue: slower, the same messages.
        "--pull-batch-size",
        "1",
        "--pull-threshold-for-queue",
        "1",
    ]))
    .await;
    assert_eq!(
        pushed.lines().count(),
        6,
        "push mode prints every message: {pushed}"
    );

    let topics = comet(args(&["topic", "list", "-n", &ns])).await;
    assert!(topics.lines().any(|l| l == TOPIC), "topic list: {topics}");

    // `comet bench produce` with every default but the name server: its default topic must be
    // one a broker lets it create (RocketMQ's `BenchmarkTest` is a system topic and is refused).
    let bench = comet(args(&[
        "bench", "produce", "-n", &ns, "-c", "20", "-p", "2", "--json",
    ]))
    .await;
    let report: serde_json::Value = serde_json::from_str(
        bench
            .lines()
            .last()
            .expect("bench prints its JSON report last"),
    )
    .expect("JSON report");
    assert_eq!(report["messages"], 20, "bench report: {bench}");
    assert_eq!(report["failed"], 0, "bench report: {bench}");

    cluster.shutdown().await;
}

/// Counts what a push consumer's listener receives.
struct CountingListener(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl comet_client::consumer::MessageListenerConcurrently for CountingListener {
    fn consume_message<'a>(
        &'a self,
        msgs: &'a [comet_client::MessageExt],
        _ctx: &'a mut comet_client::consumer::ConsumeConcurrentlyContext,
    ) -> std::pin::Pin<
        Box<dyn Future<Output = comet_client::consumer::ConsumeConcurrentlyStatus> + Send + 'a>,
    > {
        self.0
            .fetch_add(msgs.len(), std::sync::atomic::Ordering::SeqCst);
        Box::pin(async { comet_client::consumer::ConsumeConcurrentlyStatus::ConsumeSuccess })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_status_and_direct_consumption() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let cluster = Cluster::start().await;
    let ns = cluster.namesrv_addr();
    let topic = "CliStatusTopic";
    let group = "cli_status_group";
    let produced = comet(args(&[
        "produce", "-n", &ns, topic, "--count", "1", "--body", "direct", "--json",
    ]))
    .await;
    let sent: serde_json::Value =
        serde_json::from_str(produced.lines().next().expect("one line")).expect("JSON");
    let offset_msg_id = sent["offsetMsgId"]
        .as_str()
        .expect("offset msgId")
        .to_owned();

    let seen = Arc::new(AtomicUsize::new(0));
    let mut consumer_config = comet_client::consumer::push::PushConsumerConfig::new(group);
    consumer_config.client = comet_client::ClientConfig::new(ns.clone());
    consumer_config.client.client_ip = "127.0.0.1".to_owned();
    consumer_config.client.instance_name = "cli-status".to_owned();
    consumer_config.consume_from_where =
        comet_client::consumer::ConsumeFromWhere::ConsumeFromFirstOffset;
    let consumer = comet_client::consumer::push::DefaultMQPushConsumer::new(consumer_config);
    consumer.subscribe(topic, "*").await.expect("subscribe");
    consumer.register_message_listener(comet_client::consumer::MessageListener::Concurrently(
        Arc::new(CountingListener(Arc::clone(&seen))),
    ));
    consumer.start().await.expect("consumer starts");
    let client_id = consumer.client_id().expect("started");
    eventually("the message is consumed", || {
        std::future::ready(seen.load(Ordering::SeqCst) == 1)
    })
    .await;

    let status = comet(args(&["group", "status", "-n", &ns, group, "--json"])).await;
    let status: serde_json::Value = serde_json::from_str(status.trim()).expect("JSON");
    let info = &status["clients"][client_id.as_str()];
    assert_eq!(
        info["properties"]["PROP_CONSUME_TYPE"], "CONSUME_PASSIVELY",
        "{status}"
    );
    assert!(
        info["mqTable"]
            .as_object()
            .is_some_and(|t| t.keys().any(|k| k.contains(topic))),
        "{status}"
    );
    let table = comet(args(&["group", "status", "-n", &ns, group])).await;
    assert!(
        table.contains(&client_id) && table.contains("CONSUME_PASSIVELY"),
        "{table}"
    );
    let detail = comet(args(&[
        "group", "status", "-n", &ns, group, "-i", &client_id, "-s",
    ]))
    .await;
    assert!(
        detail.contains("PROP_NAMESERVER_ADDR") && detail.contains("tokio runtime"),
        "{detail}"
    );

    let direct = comet(args(&[
        "msg",
        "consume-directly",
        "-n",
        &ns,
        &offset_msg_id,
        "-g",
        group,
        "-d",
        &client_id,
    ]))
    .await;
    assert!(direct.contains("consumeResult=CR_SUCCESS"), "{direct}");
    assert_eq!(seen.load(Ordering::SeqCst), 2);

    consumer.shutdown().await;
    cluster.shutdown().await;
}

/// The bodies of `comet consume --json` output.
fn printed_bodies(output: &str) -> Vec<String> {
    output
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("JSON message");
            v["body"].as_str().expect("body").to_owned()
        })
        .collect()
}

/// The group's total lag on the topic, as `comet group progress` reports it.
async fn diff_total(ns: &str, group: &str, topic: &str) -> i64 {
    let progress = comet(args(&[
        "group", "progress", "-n", ns, group, "-t", topic, "--json",
    ]))
    .await;
    let progress: serde_json::Value = serde_json::from_str(progress.trim()).expect("progress JSON");
    progress["diffTotal"].as_i64().expect("diffTotal")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_consume_commits_exactly_what_it_printed() {
    const TOTAL: usize = 40;
    let topic = "CliPushCommit";
    let cluster = Cluster::start().await;
    let ns = cluster.namesrv_addr();
    comet(args(&["topic", "create", "-n", &ns, topic])).await;
    comet(args(&[
        "produce", "-n", &ns, topic, "--count", "40", "--body", "m{i}",
    ]))
    .await;
    cluster.wait_dispatched().await;

    // Runs of 5, 5, 7 and the rest: after each, the group's lag is exactly what is left, and
    // together the runs print every message once.
    let mut printed = Vec::new();
    for count in [5, 5, 7, TOTAL - 17] {
        let out = comet(args(&[
            "consume",
            "-n",
            &ns,
            topic,
            "--from",
            "first",
            "--count",
            &count.to_string(),
            "-g",
            "cli_push_commit",
            "--json",
        ]))
        .await;
        let bodies = printed_bodies(&out);
        assert_eq!(bodies.len(), count, "printed: {out}");
        printed.extend(bodies);
        let left = i64::try_from(TOTAL - printed.len()).expect("small");
        assert_eq!(diff_total(&ns, "cli_push_commit", topic).await, left);
    }
    printed.sort();
    let mut expected: Vec<String> = (0..TOTAL).map(|i| format!("m{i}")).collect();
    expected.sort();
    assert_eq!(printed, expected, "every message printed exactly once");

    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_or_idle_consume_commits_what_it_printed() {
    const TOTAL: i64 = 3000;
    let topic = "CliInterrupted";
    let group = "cli_interrupted";
    let cluster = Cluster::start().await;
    let ns = cluster.namesrv_addr();
    comet(args(&["topic", "create", "-n", &ns, topic])).await;
    comet(args(&[
        "produce",
        "-n",
        &ns,
        topic,
        "--count",
        &TOTAL.to_string(),
    ]))
    .await;
    cluster.wait_dispatched().await;

    // Ctrl-C in the middle of the backlog: whatever was printed by then is exactly what the
    // group committed.
    let ns_run = ns.clone();
    let printed = tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        let mut child = comet_command(env!("CARGO_BIN_EXE_comet"))
            .args([
                "consume", "-n", &ns_run, topic, "--from", "first", "-g", group,
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("comet runs");
        let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut first = String::new();
        lines.read_line(&mut first).expect("first line");
        // Ctrl-C, as a terminal sends it.
        let interrupted = std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(interrupted.success());
        let rest = lines.lines().count();
        let status = child.wait().expect("comet exits");
        assert!(status.success(), "Ctrl-C ends consume cleanly: {status}");
        i64::try_from(rest + 1).expect("small")
    })
    .await
    .expect("blocking task");
    eprintln!("printed before Ctrl-C: {printed}");
    assert_eq!(diff_total(&ns, group, topic).await, TOTAL - printed);

    // --idle: the rest is printed, then a run with nothing left says so and fails.
    let rest = comet(args(&[
        "consume", "-n", &ns, topic, "-g", group, "--idle", "2",
    ]))
    .await;
    assert_eq!(
        i64::try_from(rest.lines().count()).expect("small"),
        TOTAL - printed
    );
    assert_eq!(diff_total(&ns, group, topic).await, 0);
    let empty = comet_command(env!("CARGO_BIN_EXE_comet"))
        .args(["consume", "-n", &ns, topic, "-g", group, "--idle", "1"])
        .output()
        .expect("comet runs");
    assert!(
        !empty.status.success(),
        "an idle end with nothing printed fails"
    );
    assert!(empty.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&empty.stderr);
    assert!(stderr.contains("no messages"), "{stderr}");

    cluster.shutdown().await;
}

/// Runs `comet <args>` with `RUST_BACKTRACE=1` (as many Rust users keep it) and returns its
/// stderr; fails unless the command fails.
async fn comet_fails(items: &[&str]) -> String {
    let argv = args(items);
    let mut command = comet_command(env!("CARGO_BIN_EXE_comet"));
    command.args(&argv).env("RUST_BACKTRACE", "1");
    let output = output(command).await;
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{items:?} succeeded: {stderr}");
    assert!(
        !stderr.to_lowercase().contains("backtrace"),
        "an error prints its causes, not a backtrace: {stderr}"
    );
    stderr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mistakes_fail_and_say_what_to_do() {
    let cluster = Cluster::start().await;
    let ns = cluster.namesrv_addr();
    let broker_addr = cluster.broker_addr();
    comet(args(&["topic", "create", "-n", &ns, "Known"])).await;

    let err = comet_fails(&["consume", "-n", &ns, "NoSuchTopic", "--idle", "1"]).await;
    assert!(err.contains("topic NoSuchTopic does not exist"), "{err}");
    let err = comet_fails(&["group", "progress", "-n", &ns, "NoSuchGroup"]).await;
    assert!(err.contains("no consume progress"), "{err}");
    let err = comet_fails(&["produce", "-n", &ns, "Known", "--delay-level", "99"]).await;
    assert!(err.contains("has 18 levels"), "{err}");
    let err = comet_fails(&["topic", "delete", "-n", &ns, "NoSuchTopic"]).await;
    assert!(err.contains("nothing was deleted"), "{err}");
    // A broker's address where a name server's belongs.
    let err = comet_fails(&["topic", "list", "-n", &broker_addr]).await;
    assert!(err.contains("-n takes a name server's address"), "{err}");

    cluster.shutdown().await;
}
