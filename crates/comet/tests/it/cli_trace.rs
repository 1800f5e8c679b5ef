//! `comet produce --trace` and `comet message trace --id`: the built binary against an in-process
//! name server and broker (topic auto-creation on, as by default, creates the trace topic).

use std::process::Output;
use std::time::Duration;

use comet_testkit::Cluster;
use comet_testkit::process::{comet_command, output};

/// Hang guard for the trace records to become queryable.
const DEADLINE: Duration = Duration::from_secs(60);

async fn comet(args: &[&str]) -> Output {
    let mut command = comet_command(env!("CARGO_BIN_EXE_comet"));
    command.args(args);
    output(command).await
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_with_trace_then_show_the_trace_by_msg_id() {
    let cluster = Cluster::start().await;
    let ns = cluster.namesrv_addr();

    let produced = comet(&[
        "produce",
        "-n",
        &ns,
        "CliTraceTopic",
        "--trace",
        "--tags",
        "TagX",
        "--keys",
        "order-1",
        "--json",
    ])
    .await;
    assert!(produced.status.success(), "produce: {produced:?}");
    let sent: serde_json::Value =
        serde_json::from_str(stdout(&produced).trim()).expect("one JSON object");
    let msg_id = sent["msgId"].as_str().expect("msgId").to_owned();

    // The records are stored when produce exits (shutdown sends what is queued); the broker
    // indexes them asynchronously, so the first queries may find nothing yet.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let record = loop {
        let shown = comet(&["message", "trace", "-n", &ns, "--id", &msg_id, "--json"]).await;
        if shown.status.success() {
            let line = stdout(&shown);
            break serde_json::from_str::<serde_json::Value>(line.trim()).expect("one record");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no trace: {shown:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(record["type"], "Pub");
    assert_eq!(record["msgId"], msg_id.as_str());
    assert_eq!(record["topic"], "CliTraceTopic");
    assert_eq!(record["tags"], "TagX");
    assert_eq!(record["keys"], "order-1");
    assert_eq!(record["group"], "COMET_CLI_PRODUCER");
    assert_eq!(record["success"], true);
    assert_eq!(record["msgType"], "Normal_Msg");

    let table = comet(&["msg", "trace", "-n", &ns, "--id", &msg_id]).await;
    assert!(table.status.success());
    let text = stdout(&table);
    assert!(text.starts_with("TYPE"), "{text}");
    assert!(
        text.lines().nth(1).is_some_and(|l| l.starts_with("Pub")),
        "{text}"
    );

    let missing = comet(&[
        "msg",
        "trace",
        "-n",
        &ns,
        "--id",
        "7F0000010000000000000000DEADBEEF",
    ])
    .await;
    assert!(!missing.status.success(), "an untraced id is an error");

    cluster.shutdown().await;
}
