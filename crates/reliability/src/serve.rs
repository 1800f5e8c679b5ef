//! `comet serve` as a child process: the thing under test. Starting it waits for its ready file
//! (written once both listeners are bound), killing it is a real SIGKILL (no destructor, no flush,
//! no abort-file cleanup) and terminating it is a real SIGTERM, so what survives is exactly what
//! the broker made durable by itself.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How long a starting broker may take to write its ready file (recovery of a large log included).
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the ready file and the child's exit status are looked at while waiting.
const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// CommitLog segment size used by the harness: small, so runs cross segment boundaries often.
pub const COMMIT_LOG_SEGMENT_BYTES: u64 = 1 << 20;
/// Bytes of the broker log quoted in an error.
const LOG_TAIL_BYTES: usize = 4096;

/// `flushDiskType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FlushMode {
    Sync,
    Async,
}

impl FlushMode {
    pub fn config_value(self) -> &'static str {
        match self {
            FlushMode::Sync => "SYNC_FLUSH",
            FlushMode::Async => "ASYNC_FLUSH",
        }
    }
}

/// How to start the broker.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub comet_bin: PathBuf,
    pub data_dir: PathBuf,
    pub flush: FlushMode,
    /// Extra `--set key=value` pairs.
    pub settings: Vec<(String, String)>,
}

impl ServeOptions {
    pub fn new(comet_bin: PathBuf, data_dir: PathBuf, flush: FlushMode) -> Self {
        ServeOptions {
            comet_bin,
            data_dir,
            flush,
            settings: Vec::new(),
        }
    }

    pub fn set(mut self, key: &str, value: impl Into<String>) -> Self {
        self.settings.push((key.to_owned(), value.into()));
        self
    }

    /// The broker log, appended to by every start on this data directory.
    pub fn log_path(&self) -> PathBuf {
        self.data_dir.join("serve.log")
    }

    /// The store's root directory (`commitlog/`, `consumequeue/`, `abort`, `config/`).
    pub fn store_dir(&self) -> PathBuf {
        self.data_dir.join("store")
    }
}

/// A running `comet serve`. Dropping it kills the process (SIGKILL) and reaps it.
#[derive(Debug)]
pub struct Serve {
    child: Child,
    pub broker: String,
    pub namesrv: String,
    /// Length of the log file before this start: [`Serve::log`] returns what this run wrote.
    log_start: u64,
    log_path: PathBuf,
}

impl Serve {
    pub fn start(options: &ServeOptions) -> Result<Serve> {
        std::fs::create_dir_all(&options.data_dir).map_err(|e| Error::io(&options.data_dir, e))?;
        let ready = options.data_dir.join("ready.json");
        match std::fs::remove_file(&ready) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&ready, e)),
        }
        let log_path = options.log_path();
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| Error::io(&log_path, e))?;
        let log_start = log.metadata().map(|m| m.len()).unwrap_or(0);
        let log_err = log.try_clone().map_err(|e| Error::io(&log_path, e))?;
        let mut command = Command::new(&options.comet_bin);
        command
            .args([
                "serve",
                "--namesrv-listen",
                "127.0.0.1:0",
                "--broker-listen",
                "127.0.0.1:0",
            ])
            .arg("--data-dir")
            .arg(&options.data_dir)
            .arg("--ready-file")
            .arg(&ready)
            .arg("--set")
            .arg(format!("flushDiskType={}", options.flush.config_value()))
            .arg("--set")
            .arg(format!(
                "mappedFileSizeCommitLog={COMMIT_LOG_SEGMENT_BYTES}"
            ));
        for (key, value) in &options.settings {
            command.arg("--set").arg(format!("{key}={value}"));
        }
        let child = command
            .env(
                "RUST_LOG",
                std::env::var("COMET_SERVE_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|source| Error::Spawn {
                bin: options.comet_bin.clone(),
                source,
            })?;
        let mut serve = Serve {
            child,
            broker: String::new(),
            namesrv: String::new(),
            log_start,
            log_path,
        };
        let started = Instant::now();
        let text = loop {
            if let Ok(text) = std::fs::read_to_string(&ready) {
                break text;
            }
            if let Ok(Some(status)) = serve.child.try_wait() {
                return Err(Error::NotReady(format!(
                    "exited with {status}; log: {}",
                    serve.log_tail()
                )));
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(Error::NotReady(format!(
                    "no ready file after {READY_TIMEOUT:?}; log: {}",
                    serve.log_tail()
                )));
            }
            std::thread::sleep(POLL_INTERVAL);
        };
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::NotReady(format!("ready file is not JSON ({e}): {text}")))?;
        let field = |name: &str| {
            value
                .get(name)
                .and_then(|v| v.as_str())
                .map(str::to_owned)
                .ok_or_else(|| Error::NotReady(format!("ready file lacks {name}: {text}")))
        };
        serve.broker = field("broker")?;
        serve.namesrv = field("namesrv")?;
        Ok(serve)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL and reap.
    pub fn kill(mut self) {
        self.kill_now();
    }

    fn kill_now(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM without waiting.
    #[allow(unsafe_code)]
    pub fn signal_terminate(&self) -> Result<()> {
        let pid = libc::pid_t::try_from(self.child.id())
            .map_err(|_| Error::Violation("child pid out of range".into()))?;
        // SAFETY: kill(2) with a pid we spawned and still own (not yet reaped) and a valid signal.
        let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
        if rc != 0 {
            return Err(Error::io(&self.log_path, std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Waits for the process to exit on its own, at most `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let started = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ok(status),
                Ok(None) => {}
                Err(e) => return Err(Error::io(&self.log_path, e)),
            }
            if started.elapsed() > timeout {
                return Err(Error::Violation(format!(
                    "comet serve still running {timeout:?} after SIGTERM"
                )));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// What this run has written to the log so far.
    pub fn log(&self) -> String {
        read_log_from(&self.log_path, self.log_start)
    }

    fn log_tail(&self) -> String {
        let log = self.log();
        let start = log.len().saturating_sub(LOG_TAIL_BYTES);
        let start = (start..log.len())
            .find(|i| log.is_char_boundary(*i))
            .unwrap_or(log.len());
        log.get(start..).unwrap_or_default().to_owned()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill_now();
    }
}

/// The log file from byte `start` on (lossy UTF-8; empty if unreadable).
pub fn read_log_from(path: &Path, start: u64) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    let start = usize::try_from(start)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    String::from_utf8_lossy(bytes.get(start..).unwrap_or_default()).into_owned()
}

/// The `comet` binary next to the running executable (both live in the same Cargo target
/// directory; a test executable lives one level deeper, in `deps/`). `COMET_BIN` overrides.
pub fn default_comet_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("COMET_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    dir.join(format!("comet{}", std::env::consts::EXE_SUFFIX))
}
