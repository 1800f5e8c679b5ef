//! `comet cluster`: two name servers and two broker groups with a slave each, as real processes.
//! Messages sent through the name servers reach both groups, every slave holds its master's
//! CommitLog byte for byte, and `comet cluster stop` stops every process. The cluster's own
//! process serves the web console, which keeps answering when a broker dies; the death is
//! reported with the child's name and exit status.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use comet_testkit::process::{KillOnDrop, comet_command};
use comet_testkit::wait::eventually_blocking;

/// Hang guard for the cluster's start, its replication and its stop.
const DEADLINE: Duration = Duration::from_secs(90);
/// Bytes per CommitLog segment: small, so comparing whole segment files is cheap.
const SEGMENT: u64 = 1024 * 1024;

fn comet(args: &[&str]) -> std::process::Output {
    comet_command(env!("CARGO_BIN_EXE_comet"))
        .args(args)
        .output()
        .expect("comet runs")
}

fn segment(dir: &Path, broker: &str) -> Vec<u8> {
    std::fs::read(
        dir.join(broker)
            .join("store/commitlog/00000000000000000000"),
    )
    .unwrap_or_default()
}

#[test]
fn a_local_cluster_replicates_and_stops() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("cluster");
    let segment_key = format!("mappedFileSizeCommitLog={SEGMENT}");
    let root_text = root.display().to_string();
    let mut supervisor = KillOnDrop(
        comet_command(env!("CARGO_BIN_EXE_comet"))
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
    // The file is written in place: it may exist a moment before its content is whole.
    let read_doc = || {
        std::fs::read_to_string(&file)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
    };
    eventually_blocking("cluster.json", DEADLINE, || read_doc().is_some());
    let doc = read_doc().expect("cluster.json");
    let namesrv = doc["namesrvAddr"]
        .as_str()
        .expect("name servers")
        .to_owned();
    assert_eq!(namesrv.split(';').count(), 2);
    assert_eq!(doc["brokers"].as_array().map(Vec::len), Some(4));
    assert!(
        doc["console"]["url"]
            .as_str()
            .is_some_and(|u| u.starts_with("http://127.0.0.1:")),
        "{doc}"
    );

    let created = comet(&["topic", "create", "ClusterTopic", "-n", &namesrv]);
    assert!(created.status.success(), "{created:?}");
    let route_has_both = || {
        let route = comet(&["topic", "route", "ClusterTopic", "-n", &namesrv]);
        let text = String::from_utf8_lossy(&route.stdout).into_owned();
        route.status.success() && text.contains("broker-a") && text.contains("broker-b")
    };
    eventually_blocking("the topic's route", DEADLINE, route_has_both);
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
        eventually_blocking(&format!("{slave} to hold {master}'s log"), DEADLINE, || {
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

/// One HTTP/1.1 exchange with the console at `addr`: the status, the `Set-Cookie` value and the
/// body. `Connection: close` ends the answer at the end of the stream.
fn http(
    addr: &str,
    method: &str,
    path: &str,
    cookie: Option<&str>,
    body: &str,
) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).expect("console connects");
    stream
        .set_read_timeout(Some(DEADLINE))
        .expect("read timeout");
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(cookie) = cookie {
        request.push_str(&format!("Cookie: {cookie}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).expect("request sent");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer read");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let cookie = head
        .lines()
        .find_map(|l| {
            l.strip_prefix("set-cookie: ")
                .or_else(|| l.strip_prefix("Set-Cookie: "))
        })
        .and_then(|v| v.split(';').next())
        .unwrap_or_default()
        .to_owned();
    (status, cookie, body.to_owned())
}

#[test]
fn the_console_outlives_a_dead_broker_and_the_death_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("cluster");
    let root_text = root.display().to_string();
    std::fs::create_dir_all(&root).expect("cluster dir");
    let out_path = dir.path().join("stdout.log");
    let err_path = dir.path().join("stderr.log");
    let _supervisor = KillOnDrop(
        comet_command(env!("CARGO_BIN_EXE_comet"))
            .args([
                "cluster",
                "--dir",
                &root_text,
                "--base-port",
                "0",
                "--namesrvs",
                "1",
                "--groups",
                "1",
                "--slaves",
                "1",
            ])
            .env_remove("COMET_CONSOLE_PASSWORD")
            .stdout(std::fs::File::create(&out_path).expect("stdout file"))
            .stderr(std::fs::File::create(&err_path).expect("stderr file"))
            .spawn()
            .expect("comet cluster starts"),
    );
    let file = root.join("cluster.json");
    let printed = || std::fs::read_to_string(&out_path).unwrap_or_default();
    eventually_blocking("the console line", DEADLINE, || {
        printed().contains("console: http://")
    });
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("cluster.json")).expect("json");
    let url = doc["console"]["url"]
        .as_str()
        .expect("console url")
        .to_owned();
    let password = doc["console"]["password"]
        .as_str()
        .expect("password")
        .to_owned();
    assert!(printed().contains(&format!("console: {url} (user admin, password {password})")));
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&file).expect("metadata").permissions(),
    );
    assert_eq!(mode & 0o077, 0, "cluster.json names a password: owner only");
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let login = format!(r#"{{"user":"admin","password":"{password}"}}"#);
    let (status, cookie, body) = http(&addr, "POST", "/api/login", None, &login);
    assert_eq!(status, 200, "{body}");
    let overview = || http(&addr, "GET", "/api/overview", Some(&cookie), "");
    eventually_blocking("both brokers in the overview", DEADLINE, || {
        let (status, _, body) = overview();
        status == 200 && body.contains("broker-a") && body.matches("\"brokerId\"").count() == 2
    });

    let master = doc["brokers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|b| b["name"] == "broker-a-0")
        .and_then(|b| b["pid"].as_i64())
        .expect("broker-a-0's pid");
    let killed = Command::new("kill")
        .args(["-9", &master.to_string()])
        .status();
    assert!(killed.is_ok_and(|s| s.success()));
    let reported = || std::fs::read_to_string(&err_path).unwrap_or_default();
    eventually_blocking("the report of broker-a-0's death", DEADLINE, || {
        let text = reported();
        text.contains("broker-a-0") && text.contains("signal: 9")
    });
    assert!(!reported().contains("broker-a-1"), "{}", reported());
    // The console lives in the cluster's process: it still answers, and the slave is listed.
    let (status, _, body) = overview();
    assert_eq!(status, 200, "{body}");
    eventually_blocking("the slave alone in the overview", DEADLINE, || {
        let (status, _, body) = overview();
        status == 200
            && body.matches("\"brokerId\"").count() == 1
            && body.contains("\"brokerId\":1")
    });

    let stopped = comet(&["cluster", "stop", "--dir", &root_text]);
    assert!(stopped.status.success(), "{stopped:?}");
}
