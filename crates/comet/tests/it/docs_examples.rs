//! The shell examples of docs/getting-started.md and docs/operations.md, run as written against
//! a `comet serve` of this build, so the user guide cannot promise a command that fails.
//!
//! Every ```sh block is run, in the pages' order, in one temporary directory, with the built
//! `comet` first on the PATH:
//! - a block with `$ command` lines is a transcript: each command runs on its own, must exit 0,
//!   must print something when the page shows output, and a table header the page shows must be
//!   the one printed;
//! - any other block is a script and runs whole under `bash -eu`; background jobs it leaves are
//!   stopped after it.
//!
//! The server runs on free ports, so addresses are rewritten: the default name server and broker
//! addresses become this server's, and `NAMESRV_ADDR` names its name server (the default the
//! commands fall back to). A message id that the page made up (32 hex digits) becomes the last
//! one a command printed. The few blocks that cannot run here are listed in [`SKIPPED`] with the
//! reason.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use comet_testkit::process::{Serve, ServeOutput};

/// Blocks not run, by their first line, and why.
const SKIPPED: &[(&str, &str)] = &[
    (
        "cargo build --release -p comet",
        "the test runs the binary cargo built for it",
    ),
    (
        "comet serve",
        "the test runs the server itself, on free ports",
    ),
    (
        "comet serve --namesrv-listen 0.0.0.0:9876 --broker-listen 0.0.0.0:10911 --set brokerIP1=192.0.2.10",
        "it listens on every interface of the machine",
    ),
];

/// Hang guard of one command.
const COMMAND_DEADLINE: Duration = Duration::from_secs(120);

/// One runnable example.
#[derive(Debug)]
enum Example {
    /// A `$ command` and the output the page shows after it.
    Command { line: String, shown: Vec<String> },
    /// A whole block run as one script.
    Script(String),
}

/// The examples of one page, in order.
fn examples(page: &str) -> Vec<Example> {
    let mut out = Vec::new();
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "```sh" {
            continue;
        }
        let block: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
        let first = block.first().map(|l| l.trim()).unwrap_or_default();
        if SKIPPED.iter().any(|(skip, _)| *skip == first) {
            continue;
        }
        if block.iter().any(|l| l.starts_with("$ ")) {
            let mut current: Option<(String, Vec<String>)> = None;
            for l in block {
                if let Some(cmd) = l.strip_prefix("$ ") {
                    if let Some((line, shown)) = current.take() {
                        out.push(Example::Command { line, shown });
                    }
                    current = Some((cmd.to_owned(), Vec::new()));
                } else if let Some((_, shown)) = current.as_mut() {
                    shown.push(l.to_owned());
                }
            }
            if let Some((line, shown)) = current {
                out.push(Example::Command { line, shown });
            }
        } else {
            out.push(Example::Script(block.join("\n")));
        }
    }
    out
}

/// Where the examples run.
struct Runner {
    dir: PathBuf,
    bin_dir: PathBuf,
    namesrv: String,
    broker: String,
    /// The last message id a command printed.
    last_msg_id: Option<String>,
}

impl Runner {
    /// `text` with the page's addresses and made-up message ids replaced by this run's.
    fn rewrite(&self, text: &str) -> String {
        let mut text = text
            .replace("127.0.0.1:9876", &self.namesrv)
            .replace("127.0.0.1:10911", &self.broker)
            .replace("./target/release/comet", "comet");
        if let Some(id) = &self.last_msg_id {
            for word in text.clone().split(|c: char| !c.is_ascii_alphanumeric()) {
                if is_msg_id(word) {
                    text = text.replace(word, id);
                }
            }
        }
        text
    }

    fn run(&mut self, example: &Example) {
        let (script, shown) = match example {
            Example::Command { line, shown } => (self.rewrite(line), shown.as_slice()),
            Example::Script(body) => (
                format!("{}\njobs -p | xargs -r kill\nwait", self.rewrite(body)),
                &[][..],
            ),
        };
        let output = self.bash(&script);
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "the example failed: {script}\nstdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        if shown.iter().any(|l| !l.trim().is_empty()) {
            assert!(
                !stdout.trim().is_empty(),
                "{script}: the page shows output, the command printed none"
            );
        }
        if let Some(header) = shown.first().filter(|l| is_table_header(l)) {
            let printed = stdout.lines().next().unwrap_or_default();
            assert_eq!(
                printed.split_whitespace().collect::<Vec<_>>(),
                header.split_whitespace().collect::<Vec<_>>(),
                "{script}: the page's table header is not the one printed"
            );
        }
        if let Some(id) = stdout
            .split(|c: char| !c.is_ascii_alphanumeric())
            .rfind(|w| is_msg_id(w))
        {
            self.last_msg_id = Some(id.to_owned());
        }
    }

    fn bash(&self, script: &str) -> std::process::Output {
        let path = format!(
            "{}:{}",
            self.bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut child = Command::new("bash")
            .args(["-euc", script])
            .current_dir(&self.dir)
            .env("PATH", path)
            .env("NAMESRV_ADDR", &self.namesrv)
            .env("DIR", &self.dir)
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bash runs");
        let started = Instant::now();
        while child.try_wait().expect("wait").is_none() {
            if started.elapsed() > COMMAND_DEADLINE {
                let _ = child.kill();
                panic!("{script}: still running after {COMMAND_DEADLINE:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        child.wait_with_output().expect("output")
    }
}

/// A RocketMQ message id: 32 upper-case hex digits.
fn is_msg_id(word: &str) -> bool {
    word.len() == 32
        && word
            .chars()
            .all(|c| c.is_ascii_digit() || ('A'..='F').contains(&c))
}

/// A line of upper-case column names (`#  STATUS  MSG_ID ...`).
fn is_table_header(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    words.len() >= 2
        && words.iter().all(|w| {
            w.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || "#_".contains(c))
        })
}

/// A `comet serve` on free ports in `dir`.
fn serve(dir: &Path) -> Serve {
    Serve::spawn(
        env!("CARGO_BIN_EXE_comet"),
        &dir.join("serve-data"),
        &dir.join("serve-ready.json"),
        &[
            "--set",
            "metricsPromExporterPort=0",
            "--set",
            "consolePort=0",
            "--set",
            "grpcServerPort=0",
        ],
        ServeOutput::Null,
        COMMAND_DEADLINE,
    )
}

#[test]
fn the_guides_shell_examples_run_as_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = serve(dir.path());
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_comet"));
    let mut runner = Runner {
        dir: dir.path().to_path_buf(),
        bin_dir: bin.parent().expect("bin dir").to_path_buf(),
        namesrv: server.namesrv.clone(),
        broker: server.broker.clone(),
        last_msg_id: None,
    };
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let mut ran = 0;
    for page in ["getting-started.md", "operations.md"] {
        let text = std::fs::read_to_string(docs.join(page)).expect("page readable");
        for example in examples(&text) {
            eprintln!("{page}: {example:?}");
            runner.run(&example);
            ran += 1;
        }
    }
    drop(server);
    assert!(ran >= 10, "only {ran} examples found");
}

#[test]
fn transcripts_and_scripts_are_told_apart() {
    let page = "text\n```sh\n$ comet a\nHEAD  ER\nrow\n$ comet b\n```\n```sh\nx \\\n  y\nz\n```\n";
    let found = examples(page);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(
        matches!(&found[0], Example::Command { line, shown } if line == "comet a" && shown.len() == 2)
    );
    assert!(matches!(&found[2], Example::Script(s) if s.starts_with("x \\")));
    assert!(is_table_header("#  STATUS  MSG_ID"));
    assert!(!is_table_header("[produce    1.0s]      6052 msg/s"));
}
