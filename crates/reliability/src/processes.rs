//! Name servers and brokers as separate child processes (`comet namesrv`, `comet broker -c
//! broker.conf`), for the runs that need a master and a slave. Each child writes its output to
//! a log file that every start on the same directory appends to; killing one is a real SIGKILL.
//!
//! A broker counts as ready once it answers GET_BROKER_RUNTIME_INFO: its store is recovered and
//! its listener serves. Ports are fixed for the whole run (a restarted broker comes back where
//! it was, as a real one does), so they are picked once, free on 127.0.0.1.

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use comet_remoting::RemotingClient;

use crate::error::{Error, Result};
use crate::serve::{COMMIT_LOG_SEGMENT_BYTES, FlushMode, READY_TIMEOUT, read_log_from};
use crate::wire;

/// How often a starting child is looked at.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// Bytes of a child's log quoted in an error.
const LOG_TAIL_BYTES: usize = 4096;
/// Attempts at finding a free port (with its neighbours free for a broker).
const PORT_ATTEMPTS: usize = 200;

/// A running child process with its log. Dropping it kills the process (SIGKILL) and reaps it.
#[derive(Debug)]
pub struct Process {
    child: Child,
    name: String,
    log_path: PathBuf,
    /// Length of the log before this start: [`Process::log`] returns what this run wrote.
    log_start: u64,
}

impl Process {
    /// Starts `bin args...` with stdout and stderr appended to `log_path`.
    pub fn spawn(name: &str, bin: &Path, args: &[String], log_path: &Path) -> Result<Process> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)
            .map_err(|e| Error::io(log_path, e))?;
        let log_start = log.metadata().map(|m| m.len()).unwrap_or(0);
        let log_err = log.try_clone().map_err(|e| Error::io(log_path, e))?;
        let child = Command::new(bin)
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("COMET_SERVE_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|source| Error::Spawn {
                bin: bin.to_path_buf(),
                source,
            })?;
        Ok(Process {
            child,
            name: name.to_owned(),
            log_path: log_path.to_path_buf(),
            log_start,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
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

    /// Fails with the log's tail when the process has exited.
    pub fn check_running(&mut self) -> Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(Error::NotReady(format!(
                "{} exited with {status}; log: {}",
                self.name,
                self.log_tail()
            ))),
            Err(e) => Err(Error::io(&self.log_path, e)),
        }
    }

    /// Current length of the log file: a position to read new lines from later.
    pub fn log_position(&self) -> u64 {
        std::fs::metadata(&self.log_path)
            .map(|m| m.len())
            .unwrap_or(0)
    }

    /// What the process wrote to its log from `position` on.
    pub fn log_since(&self, position: u64) -> String {
        read_log_from(&self.log_path, position.max(self.log_start))
    }

    /// What this run has written to the log so far.
    pub fn log(&self) -> String {
        read_log_from(&self.log_path, self.log_start)
    }

    pub fn log_tail(&self) -> String {
        let log = self.log();
        let start = log.len().saturating_sub(LOG_TAIL_BYTES);
        let start = (start..log.len())
            .find(|i| log.is_char_boundary(*i))
            .unwrap_or(log.len());
        log.get(start..).unwrap_or_default().to_owned()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill_now();
    }
}

/// A free address on 127.0.0.1; for a broker (`broker`), the fast port 2 below and the HA port
/// 1 above are free too.
pub fn free_addr(broker: bool) -> Result<SocketAddr> {
    let ip = Ipv4Addr::LOCALHOST;
    for _ in 0..PORT_ATTEMPTS {
        let probe = TcpListener::bind((ip, 0)).map_err(|e| Error::io("127.0.0.1:0", e))?;
        let port = probe
            .local_addr()
            .map_err(|e| Error::io("127.0.0.1:0", e))?
            .port();
        drop(probe);
        let free = |p: u16| TcpListener::bind((ip, p)).is_ok();
        if !broker || (port > 2 && port < u16::MAX && free(port - 2) && free(port + 1)) {
            return Ok(SocketAddr::from((ip, port)));
        }
    }
    Err(Error::NotReady("no free ports on 127.0.0.1".into()))
}

/// Starts `comet namesrv` on `addr` and waits until it accepts connections.
pub fn start_namesrv(bin: &Path, dir: &Path, addr: SocketAddr) -> Result<Process> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let args = vec![
        "namesrv".to_owned(),
        "--listen".to_owned(),
        addr.to_string(),
        "--data-dir".to_owned(),
        dir.join("data").display().to_string(),
    ];
    let mut process = Process::spawn("namesrv", bin, &args, &dir.join("namesrv.log"))?;
    let started = Instant::now();
    while TcpStream::connect_timeout(&addr, POLL_INTERVAL * 10).is_err() {
        process.check_running()?;
        if started.elapsed() > READY_TIMEOUT {
            return Err(Error::NotReady(format!(
                "name server not listening on {addr} after {READY_TIMEOUT:?}"
            )));
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    Ok(process)
}

/// What a broker of a replicated pair is.
#[derive(Debug, Clone)]
pub struct BrokerSpec {
    /// `master` or `slave`: names its directory and log.
    pub name: String,
    /// The directory holding `broker.conf`, `broker.log` and `store/`.
    pub dir: PathBuf,
    pub addr: SocketAddr,
    /// `ASYNC_MASTER`, `SYNC_MASTER` or `SLAVE`.
    pub role: String,
    pub broker_id: u32,
    pub broker_name: String,
    pub namesrv: String,
    pub flush: FlushMode,
    /// More `key=value` lines for broker.conf.
    pub extra: Vec<(String, String)>,
}

impl BrokerSpec {
    /// The store's root directory.
    pub fn store_dir(&self) -> PathBuf {
        self.dir.join("store")
    }

    /// The CommitLog's directory.
    pub fn commit_log_dir(&self) -> PathBuf {
        self.store_dir().join("commitlog")
    }

    pub fn conf_path(&self) -> PathBuf {
        self.dir.join("broker.conf")
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("broker.log")
    }

    /// The broker.conf text.
    pub fn conf(&self) -> String {
        let mut conf = String::new();
        let ip = self.addr.ip();
        let lines = [
            ("brokerClusterName", "ReliabilityCluster".to_owned()),
            ("brokerName", self.broker_name.clone()),
            ("brokerId", self.broker_id.to_string()),
            ("brokerRole", self.role.clone()),
            ("bindAddress", ip.to_string()),
            ("brokerIP1", ip.to_string()),
            ("listenPort", self.addr.port().to_string()),
            ("namesrvAddr", self.namesrv.clone()),
            ("storePathRootDir", self.store_dir().display().to_string()),
            ("flushDiskType", self.flush.config_value().to_owned()),
            (
                "mappedFileSizeCommitLog",
                COMMIT_LOG_SEGMENT_BYTES.to_string(),
            ),
            ("slaveReadEnable", "true".to_owned()),
        ];
        for (key, value) in &lines {
            let _ = writeln!(conf, "{key}={value}");
        }
        for (key, value) in &self.extra {
            let _ = writeln!(conf, "{key}={value}");
        }
        conf
    }

    /// Writes broker.conf (again) and starts `comet broker -c` on it; does not wait.
    pub fn spawn(&self, bin: &Path) -> Result<Process> {
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        let conf = self.conf_path();
        std::fs::write(&conf, self.conf()).map_err(|e| Error::io(&conf, e))?;
        let args = vec![
            "broker".to_owned(),
            "-c".to_owned(),
            conf.display().to_string(),
        ];
        Process::spawn(&self.name, bin, &args, &self.log_path())
    }
}

/// Waits until the broker at `addr` answers GET_BROKER_RUNTIME_INFO.
pub async fn wait_broker_ready(
    client: &RemotingClient,
    process: &mut Process,
    addr: &str,
) -> Result<()> {
    let started = Instant::now();
    loop {
        if wire::runtime_info(client, addr).await.is_ok() {
            return Ok(());
        }
        process.check_running()?;
        if started.elapsed() > READY_TIMEOUT {
            return Err(Error::NotReady(format!(
                "{} at {addr} not answering after {READY_TIMEOUT:?}; log: {}",
                process.name(),
                process.log_tail()
            )));
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}
