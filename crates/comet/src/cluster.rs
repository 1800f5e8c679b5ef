//! `comet cluster`: a local multi-process cluster for development and tests, from one command.
//!
//! It starts N name servers and M broker groups (a master and S slaves each) as child `comet`
//! processes on 127.0.0.1, every one with its own `broker.conf`, data directory and log file
//! under one folder, waits until each listens, writes `cluster.json` (addresses, process ids)
//! there and stays in the foreground. On Ctrl-C or SIGTERM (`comet cluster stop --dir D` sends
//! it) it stops the brokers (slaves first, then masters) and the name servers with SIGTERM,
//! waiting for each to exit, and kills what is still running after [`STOP_TIMEOUT`].
//!
//! Ports: name server `i` listens on `base + i`; broker `b` (counting every master and slave)
//! on `base + 100 + 4·b + 2`, with its fast port 2 below and its HA port 1 above. With
//! `--base-port 0` free ports are picked instead.

use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

/// Longest wait for a child to listen.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest wait for a child to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// The file the running cluster describes itself in.
pub const CLUSTER_FILE: &str = "cluster.json";

#[derive(Debug, Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    pub command: Option<ClusterCommand>,
    #[command(flatten)]
    pub start: StartArgs,
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Stop the cluster running in `--dir` (SIGTERM to its `comet cluster` process).
    Stop {
        #[arg(long, default_value = "comet-cluster")]
        dir: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct StartArgs {
    /// Folder for configuration, data and logs.
    #[arg(long, default_value = "comet-cluster")]
    pub dir: PathBuf,
    /// Name servers.
    #[arg(long, default_value_t = 2)]
    pub namesrvs: usize,
    /// Broker groups (`broker-a`, `broker-b`, ...).
    #[arg(long, default_value_t = 2)]
    pub groups: usize,
    /// Slaves per group.
    #[arg(long, default_value_t = 1)]
    pub slaves: usize,
    /// First port (see the module docs); 0 picks free ports.
    #[arg(long, default_value_t = 20_000)]
    pub base_port: u16,
    /// Role of the masters: ASYNC_MASTER or SYNC_MASTER.
    #[arg(long, default_value = "ASYNC_MASTER")]
    pub role: String,
    /// A broker.conf key for every broker (`--set flushDiskType=SYNC_FLUSH`, repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

/// One process of the cluster.
struct Member {
    name: String,
    addr: SocketAddr,
    /// A broker's HA address (`None` for a name server).
    ha: Option<SocketAddr>,
    /// Brokers stop before name servers, slaves before masters.
    stop_rank: u8,
    child: Child,
}

pub async fn run(args: ClusterArgs) -> Result<()> {
    let args = match args.command {
        Some(ClusterCommand::Stop { dir }) => {
            return tokio::task::spawn_blocking(move || stop(&dir))
                .await
                .context("stopping the cluster")?;
        }
        None => args.start,
    };
    let (args, mut members) = tokio::task::spawn_blocking(move || start(args))
        .await
        .context("starting the cluster")??;
    crate::wait_for_signal().await?;
    tokio::task::spawn_blocking(move || {
        stop_members(&mut members);
        let _ = std::fs::remove_file(args.dir.join(CLUSTER_FILE));
    })
    .await
    .context("stopping the cluster")
}

/// Starts the cluster and describes it in `cluster.json`; on failure stops what started.
fn start(args: StartArgs) -> Result<(StartArgs, Vec<Member>)> {
    if !matches!(args.role.as_str(), "ASYNC_MASTER" | "SYNC_MASTER") {
        bail!(
            "--role must be ASYNC_MASTER or SYNC_MASTER, not {}",
            args.role
        );
    }
    if args.namesrvs == 0 || args.groups == 0 || args.groups > 26 {
        bail!("--namesrvs must be at least 1 and --groups within 1..=26");
    }
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let exe = std::env::current_exe().context("locating the comet binary")?;
    let mut members = Vec::new();
    let launched =
        launch(&args, &exe, &mut members).and_then(|()| write_cluster_file(&args.dir, &members));
    if let Err(e) = launched {
        stop_members(&mut members);
        return Err(e);
    }
    println!("cluster ready: {}", args.dir.join(CLUSTER_FILE).display());
    Ok((args, members))
}

/// Starts every member, waiting until each listens.
fn launch(args: &StartArgs, exe: &Path, members: &mut Vec<Member>) -> Result<()> {
    let mut namesrv_addrs = Vec::new();
    for i in 0..args.namesrvs {
        let addr = port_for(args.base_port, u16::try_from(i).unwrap_or(u16::MAX), false)?;
        let name = format!("namesrv-{i}");
        let data = args.dir.join(&name);
        let child = spawn(
            exe,
            &args.dir,
            &name,
            &[
                "namesrv",
                "--listen",
                &addr.to_string(),
                "--data-dir",
                &data.display().to_string(),
            ],
        )?;
        members.push(Member {
            name,
            addr,
            ha: None,
            stop_rank: 2,
            child,
        });
        wait_listening(members.last_mut(), START_TIMEOUT)?;
        namesrv_addrs.push(addr.to_string());
    }
    let mut index = 0u16;
    for group in 0..args.groups {
        let broker_name = format!("broker-{}", char::from(b'a' + u8::try_from(group)?));
        for id in 0..=args.slaves {
            let addr = port_for(args.base_port, 100 + 4 * index + 2, true)?;
            index += 1;
            let name = format!("{broker_name}-{id}");
            let dir = args.dir.join(&name);
            std::fs::create_dir_all(&dir)?;
            let conf = broker_conf(args, &broker_name, id, addr, &dir, &namesrv_addrs);
            let conf_path = dir.join("broker.conf");
            std::fs::write(&conf_path, conf)
                .with_context(|| format!("writing {}", conf_path.display()))?;
            let child = spawn(
                exe,
                &args.dir,
                &name,
                &["broker", "-c", &conf_path.display().to_string()],
            )?;
            members.push(Member {
                name,
                addr,
                ha: Some(SocketAddr::new(addr.ip(), addr.port() + 1)),
                stop_rank: if id == 0 { 1 } else { 0 },
                child,
            });
            wait_listening(members.last_mut(), START_TIMEOUT)?;
        }
    }
    Ok(())
}

/// The `broker.conf` of broker `id` of group `broker_name`.
fn broker_conf(
    args: &StartArgs,
    broker_name: &str,
    id: usize,
    addr: SocketAddr,
    dir: &Path,
    namesrv_addrs: &[String],
) -> String {
    let role = if id == 0 { args.role.as_str() } else { "SLAVE" };
    let mut conf = String::new();
    let _ = writeln!(conf, "brokerClusterName=DefaultCluster");
    let _ = writeln!(conf, "brokerName={broker_name}");
    let _ = writeln!(conf, "brokerId={id}");
    let _ = writeln!(conf, "brokerRole={role}");
    let _ = writeln!(conf, "bindAddress={}", addr.ip());
    let _ = writeln!(conf, "brokerIP1={}", addr.ip());
    let _ = writeln!(conf, "listenPort={}", addr.port());
    let _ = writeln!(conf, "haListenPort={}", addr.port() + 1);
    let _ = writeln!(conf, "namesrvAddr={}", namesrv_addrs.join(";"));
    let _ = writeln!(conf, "storePathRootDir={}", dir.join("store").display());
    let _ = writeln!(conf, "slaveReadEnable=true");
    // One web console for the cluster, served by the first master; on an ephemeral port when
    // the cluster's ports are.
    let _ = writeln!(
        conf,
        "consoleEnable={}",
        broker_name == "broker-a" && id == 0
    );
    if args.base_port == 0 {
        let _ = writeln!(conf, "consolePort=0");
    }
    for kv in &args.overrides {
        let _ = writeln!(conf, "{kv}");
    }
    conf
}

/// The address of a member: `base + offset`, or a free one with `base` 0 (for a broker, with
/// the port 2 below and 1 above free too).
fn port_for(base: u16, offset: u16, broker: bool) -> Result<SocketAddr> {
    let ip = std::net::Ipv4Addr::LOCALHOST;
    if base != 0 {
        let port = base
            .checked_add(offset)
            .context("--base-port leaves no room for the cluster's ports")?;
        return Ok(SocketAddr::from((ip, port)));
    }
    for _ in 0..100 {
        let probe = TcpListener::bind((ip, 0))?;
        let port = probe.local_addr()?.port();
        drop(probe);
        let free = |p: u16| TcpListener::bind((ip, p)).is_ok();
        if !broker || (port > 2 && port < u16::MAX && free(port - 2) && free(port + 1)) {
            return Ok(SocketAddr::from((ip, port)));
        }
    }
    bail!("no free ports found on 127.0.0.1")
}

/// Starts `comet <args>` with its output going to `<dir>/<name>.log`.
fn spawn(exe: &Path, dir: &Path, name: &str, args: &[&str]) -> Result<Child> {
    let log_path = dir.join(format!("{name}.log"));
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    let err = log.try_clone()?;
    Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .spawn()
        .with_context(|| format!("starting {name}"))
}

/// Waits until `member` accepts connections; fails if it exits first.
fn wait_listening(member: Option<&mut Member>, timeout: Duration) -> Result<()> {
    let Some(member) = member else { return Ok(()) };
    let deadline = Instant::now() + timeout;
    loop {
        if TcpStream::connect_timeout(&member.addr, Duration::from_millis(200)).is_ok() {
            println!("{} listening on {}", member.name, member.addr);
            return Ok(());
        }
        if let Some(status) = member.child.try_wait()? {
            bail!(
                "{} exited with {status} before listening (see its log)",
                member.name
            );
        }
        if Instant::now() >= deadline {
            bail!(
                "{} did not listen on {} within {timeout:?}",
                member.name,
                member.addr
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn write_cluster_file(dir: &Path, members: &[Member]) -> Result<()> {
    let namesrv: Vec<String> = members
        .iter()
        .filter(|m| m.ha.is_none())
        .map(|m| m.addr.to_string())
        .collect();
    let brokers: Vec<serde_json::Value> = members
        .iter()
        .filter(|m| m.ha.is_some())
        .map(|m| {
            serde_json::json!({
                "name": m.name,
                "addr": m.addr.to_string(),
                "ha": m.ha.map(|a| a.to_string()),
                "pid": m.child.id(),
            })
        })
        .collect();
    let doc = serde_json::json!({
        "pid": std::process::id(),
        "namesrvAddr": namesrv.join(";"),
        "brokers": brokers,
    });
    let path = dir.join(CLUSTER_FILE);
    std::fs::write(&path, serde_json::to_string_pretty(&doc)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// SIGTERM to every member in stop order, each waited for; SIGKILL after [`STOP_TIMEOUT`].
fn stop_members(members: &mut [Member]) {
    members.sort_by_key(|m| m.stop_rank);
    for member in members.iter_mut() {
        if let Ok(Some(_)) = member.child.try_wait() {
            continue;
        }
        signal(member.child.id(), libc::SIGTERM);
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match member.child.try_wait() {
                Ok(Some(status)) => {
                    println!("{} stopped ({status})", member.name);
                    break;
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                _ => {
                    eprintln!(
                        "{} did not stop within {STOP_TIMEOUT:?}; killing it",
                        member.name
                    );
                    let _ = member.child.kill();
                    let _ = member.child.wait();
                    break;
                }
            }
        }
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) only sends a signal; an unknown pid yields ESRCH, which is ignored.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// `comet cluster stop`: signals the supervisor recorded in `<dir>/cluster.json`.
fn stop(dir: &Path) -> Result<()> {
    let path = dir.join(CLUSTER_FILE);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "no running cluster in {} ({})",
            dir.display(),
            path.display()
        )
    })?;
    let doc: serde_json::Value = serde_json::from_str(&text)?;
    let pid = doc["pid"]
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
        .with_context(|| format!("{} names no supervisor pid", path.display()))?;
    signal(pid, libc::SIGTERM);
    let deadline = Instant::now() + STOP_TIMEOUT * 2;
    while path.exists() {
        if Instant::now() >= deadline {
            bail!("the cluster in {} did not stop", dir.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    println!("cluster in {} stopped", dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_master_serves_the_console() {
        let args = |base_port| StartArgs {
            dir: PathBuf::from("/tmp/comet-cluster-test"),
            namesrvs: 1,
            groups: 2,
            slaves: 1,
            base_port,
            role: "ASYNC_MASTER".to_owned(),
            overrides: Vec::new(),
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], 20_102));
        let conf = |args: &StartArgs, name: &str, id| {
            broker_conf(args, name, id, addr, Path::new("/tmp/x"), &[])
        };
        let fixed = args(20_000);
        assert!(conf(&fixed, "broker-a", 0).contains("consoleEnable=true\n"));
        assert!(!conf(&fixed, "broker-a", 0).contains("consolePort"));
        assert!(conf(&fixed, "broker-a", 1).contains("consoleEnable=false\n"));
        assert!(conf(&fixed, "broker-b", 0).contains("consoleEnable=false\n"));
        assert!(conf(&args(0), "broker-a", 0).contains("consolePort=0\n"));
    }
}
