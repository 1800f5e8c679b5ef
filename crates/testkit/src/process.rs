//! The `comet` binary as a child process: one-shot commands (`comet produce`, `comet topic list`,
//! ...) and `comet serve` on free ports, found ready through its ready file.
//!
//! Tests of the `comet` package pass `env!("CARGO_BIN_EXE_comet")`; tests of other packages use
//! [`comet_bin`], the binary Cargo built beside them.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::wait::eventually_blocking;

/// The `comet` binary of this target directory: beside the running test executable (which lives
/// one level deeper, in `deps/`), or `COMET_BIN`. `cargo test --workspace` builds it (the comet
/// package's own tests need it); `cargo test -p <other package>` alone needs a
/// `cargo build -p comet` first, or `COMET_BIN`.
pub fn comet_bin() -> PathBuf {
    let bin = match std::env::var_os("COMET_BIN") {
        Some(path) => PathBuf::from(path),
        None => {
            let exe = std::env::current_exe().unwrap_or_default();
            let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
            if dir.file_name().is_some_and(|n| n == "deps") {
                dir.pop();
            }
            dir.join(format!("comet{}", std::env::consts::EXE_SUFFIX))
        }
    };
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p comet` (or set COMET_BIN)",
        bin.display()
    );
    bin
}

/// `bin` as a command that ignores the environment's `NAMESRV_ADDR` (the tests name their own).
pub fn comet_command(bin: impl AsRef<Path>) -> Command {
    let mut command = Command::new(bin.as_ref());
    command.env_remove("NAMESRV_ADDR");
    command
}

/// Runs `command` to its end on a blocking thread (the test's runtime keeps serving the
/// in-process brokers the command talks to) and returns what it printed and its status.
pub async fn output(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || command.output().expect("comet runs"))
        .await
        .expect("blocking task")
}

/// A child process stopped and reaped when dropped, unless it already ended: a test that fails
/// half-way leaves nothing running. The child gets SIGTERM first and [`KILL_ON_DROP_GRACE`] to
/// end (`comet cluster` stops the processes it supervises then), SIGKILL after that.
pub struct KillOnDrop(pub Child);

/// How long a [`KillOnDrop`] child has after SIGTERM before SIGKILL.
pub const KILL_ON_DROP_GRACE: Duration = Duration::from_secs(30);

impl Drop for KillOnDrop {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        if !matches!(self.0.try_wait(), Ok(None)) {
            return;
        }
        if let Ok(pid) = i32::try_from(self.0.id()) {
            // SAFETY: kill(2) of the child this guard owns and has not reaped.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let until = std::time::Instant::now() + KILL_ON_DROP_GRACE;
            while matches!(self.0.try_wait(), Ok(None)) && std::time::Instant::now() < until {
                std::thread::sleep(crate::wait::POLL);
            }
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where a `comet serve` child's output goes.
pub enum ServeOutput {
    /// Nowhere.
    Null,
    /// Into a log file, replaced (`append: false`) or appended to (a restart on the same data).
    Log { path: PathBuf, append: bool },
}

/// A running `comet serve` child, ready: killed (SIGKILL) and reaped when dropped.
pub struct Serve {
    pub child: Child,
    pub namesrv: String,
    pub broker: String,
    /// The whole ready file (addresses of every listener it started).
    pub ready: serde_json::Value,
}

impl Serve {
    /// Starts `bin serve` with the name server and broker on free loopback ports, its data in
    /// `data_dir`, `args` after those (`--set key=value`, ...), and waits (up to `deadline`) for
    /// its ready file `ready_file`, which is removed first.
    pub fn spawn(
        bin: impl AsRef<Path>,
        data_dir: &Path,
        ready_file: &Path,
        args: &[&str],
        output: ServeOutput,
        deadline: Duration,
    ) -> Serve {
        let _ = std::fs::remove_file(ready_file);
        let (stdout, stderr) = match output {
            ServeOutput::Null => (Stdio::null(), Stdio::null()),
            ServeOutput::Log { path, append } => {
                let log = if append {
                    File::options().create(true).append(true).open(&path)
                } else {
                    File::create(&path)
                }
                .expect("log file");
                (log.try_clone().expect("log").into(), log.into())
            }
        };
        let child = comet_command(bin)
            .args([
                "serve",
                "--namesrv-listen",
                "127.0.0.1:0",
                "--broker-listen",
                "127.0.0.1:0",
            ])
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--ready-file")
            .arg(ready_file)
            .args(args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("spawn comet serve");
        let mut text = String::new();
        eventually_blocking("comet serve to become ready", deadline, || {
            text = std::fs::read_to_string(ready_file).unwrap_or_default();
            !text.is_empty()
        });
        let ready: serde_json::Value = serde_json::from_str(&text).expect("ready file is JSON");
        let addr = |key: &str| {
            ready[key]
                .as_str()
                .unwrap_or_else(|| panic!("{key} address in the ready file: {text}"))
                .to_owned()
        };
        Serve {
            namesrv: addr("namesrv"),
            broker: addr("broker"),
            child,
            ready,
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
