//! `comet cluster`: two name servers and two broker groups with a slave each, as real processes.
//! Messages sent through the name servers reach both groups, every slave holds its master's
//! CommitLog byte for byte, and `comet cluster stop` stops every process.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Hang guard for the cluster's start, its replication and its stop.
const DEADLINE: Duration = Duration::from_secs(90);
/// Bytes per CommitLog segment: small, so comparing whole segment files is cheap.
const SEGMENT: u64 = 1024 * 1024;

fn comet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_comet"))
        .args(args)
        .env_remove("NAMESRV_ADDR")
        .output()
        .expect("comet runs")
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn segment(dir: &Path, broker: &str) -> Vec<u8> {
    std::fs::read(
        dir.join(broker)
            .join("store/commitlog/00000000000000000000"),
    )
    .unwrap_or_default()
}

/// Stops the supervisor if the test fails before `comet cluster stop`.
struct Supervisor(Child);

impl Drop for Supervisor {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn a_local_cluster_replicates_and_stops() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("cluster");
    let segment_key = format!("mappedFileSizeCommitLog={SEGMENT}");
    let root_text = root.display().to_string();
    let mut supervisor = Supervisor(
        Command::new(env!("CARGO_BIN_EXE_comet"))
            .args([
                "cluster",
                "--dir",
                &root_text,
                "--base-port",
                "0",
                "--namesrvs",
                "2",
                "--groups",
                "2",
                "--slaves",
                "1",
                "--set",
                &segment_key,
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("comet cluster starts"),
    );
    let file = root.join("cluster.json");
    wait_for("cluster.json", || file.exists());
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("cluster.json")).expect("json");
    let namesrv = doc["namesrvAddr"]
        .as_str()
        .expect("name servers")
        .to_owned();
    assert_eq!(namesrv.split(';').count(), 2);
    assert_eq!(doc["brokers"].as_array().map(Vec::len), Some(4));

    let created = comet(&["topic", "create", "ClusterTopic", "-n", &namesrv]);
    assert!(created.status.success(), "{created:?}");
    let route_has_both = || {
        let route = comet(&["topic", "route", "ClusterTopic", "-n", &namesrv]);
        let text = String::from_utf8_lossy(&route.stdout).into_owned();
        route.status.success() && text.contains("broker-a") && text.contains("broker-b")
    };
    wait_for("the topic's route", route_has_both);
    let sent = comet(&[
        "produce",
        "ClusterTopic",
        "-n",
        &namesrv,
        "--count",
        "200",
        "--body",
        "cluster-{i}",
    ]);
    assert!(sent.status.success(), "{sent:?}");
    let out = String::from_utf8_lossy(&sent.stdout);
    assert!(
        out.contains("broker-a") && out.contains("broker-b"),
        "{out}"
    );

    for group in ["broker-a", "broker-b"] {
        let (master, slave) = (format!("{group}-0"), format!("{group}-1"));
        let written = segment(&root, &master);
        assert_eq!(written.len() as u64, SEGMENT);
        wait_for(&format!("{slave} to hold {master}'s log"), || {
            segment(&root, &slave) == segment(&root, &master)
        });
    }

    let stopped = comet(&["cluster", "stop", "--dir", &root_text]);
    assert!(stopped.status.success(), "{stopped:?}");
    let status = supervisor.0.wait().expect("supervisor exits");
    assert!(status.success(), "{status}");
    for broker in doc["brokers"].as_array().into_iter().flatten() {
        let pid = broker["pid"].as_u64().expect("pid");
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.contains(") Z ")),
            "broker {pid} still running"
        );
    }
    assert!(!file.exists(), "cluster.json removed at stop");
}
