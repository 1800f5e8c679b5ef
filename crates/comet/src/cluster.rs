//! `comet cluster`: a local multi-process cluster for development and tests, from one command.
//!
//! It starts N name servers and M broker groups (a master and S slaves each) as child `comet`
//! processes on 127.0.0.1, every one with its own `broker.conf`, data directory and log file
//! under one folder, and waits until each listens. The web console runs in this process, the
//! one that lives as long as the cluster, as an admin client of the name servers (as
//! `comet console -n` does): it keeps working whichever broker dies. The command prints the
//! console's address and password, writes `cluster.json` (addresses, process ids, the console)
//! and stays in the foreground, reporting any child that exits on its own. On Ctrl-C or
//! SIGTERM (`comet cluster stop --dir D` sends it) it stops the console, then the brokers
//! (slaves first, then masters) and the name servers with SIGTERM, waiting for each to exit,
//! and kills what is still running after [`STOP_TIMEOUT`].
//!
//! Ports: see [`StartArgs::base_port`]'s help, the one place they are described.

use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use comet_client::ClientConfig;
use comet_console::{ConsoleConfig, ConsoleHandle};
use tokio::signal::unix::{Signal, SignalKind};

/// Longest wait for a child to listen.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest wait for a child to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// The file the running cluster describes itself in.
pub const CLUSTER_FILE: &str = "cluster.json";
/// Port of the web console: `--base-port` + this.
const CONSOLE_PORT_OFFSET: u16 = 80;
/// Ports of the brokers start at `--base-port` + this.
const BROKER_PORT_OFFSET: u16 = 100;
/// Most name servers: their ports end where the console's begins.
const MAX_NAMESRVS: usize = CONSOLE_PORT_OFFSET as usize;

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
    /// First port of the cluster, which listens on 127.0.0.1 only: name server i on base+i
    /// (i from 0, at most 80 of them), the web console on base+80, and broker b on base+102+4b,
    /// counting the brokers in start order (broker-a-0, broker-a-1, ..., broker-b-0, ...), each
    /// with its fast port 2 below and its HA port 1 above (base 20000: name servers 20000 and
    /// 20001, console 20080, brokers 20102, 20106, 20110, ...). 0 picks free ports for all.
    #[arg(long, default_value_t = 20_000)]
    pub base_port: u16,
    /// Role of the masters: ASYNC_MASTER or SYNC_MASTER.
    #[arg(long, default_value = "ASYNC_MASTER")]
    pub role: String,
    /// A broker.conf key for every broker (`--set flushDiskType=SYNC_FLUSH`, repeatable); a
    /// console key (`--set consolePassword=...`) goes to the console instead.
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
    /// Its exit was reported.
    exited: bool,
}

/// The console the cluster serves, and how to log in to it.
struct Console {
    handle: ConsoleHandle,
    url: String,
    /// The password printed, when this start chose it (`None` when configured).
    password: Option<String>,
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
    let console_config = console_config(&args)?;
    // Installed before the first child starts, so no exit goes unnoticed.
    let mut exits = tokio::signal::unix::signal(SignalKind::child())
        .context("installing the SIGCHLD handler")?;
    let (args, mut members) = tokio::task::spawn_blocking(move || start(args))
        .await
        .context("starting the cluster")??;
    let console = match serve_console(&members, console_config).await {
        Ok(console) => console,
        Err(e) => {
            tokio::task::spawn_blocking(move || stop_members(&mut members)).await?;
            return Err(e);
        }
    };
    if let Err(e) = write_cluster_file(&args.dir, &members, console.as_ref()) {
        if let Some(console) = console {
            console.handle.shutdown().await;
        }
        tokio::task::spawn_blocking(move || stop_members(&mut members)).await?;
        return Err(e);
    }
    println!("cluster ready: {}", args.dir.join(CLUSTER_FILE).display());
    println!("{}", console_line(console.as_ref()));
    let supervised = supervise(&mut members, &mut exits).await;
    if let Some(console) = console {
        console.handle.shutdown().await;
    }
    tokio::task::spawn_blocking(move || {
        stop_members(&mut members);
        let _ = std::fs::remove_file(args.dir.join(CLUSTER_FILE));
    })
    .await
    .context("stopping the cluster")?;
    supervised
}

/// The line that tells where the console is and how to log in.
fn console_line(console: Option<&Console>) -> String {
    let user = comet_console::auth::ADMIN_USER;
    match console {
        None => "console: off (consoleEnable=false)".to_owned(),
        Some(Console {
            url,
            password: Some(password),
            ..
        }) => format!("console: {url} (user {user}, password {password})"),
        Some(Console { url, .. }) => {
            format!("console: {url} (user {user}, password as configured by consolePassword)")
        }
    }
}

/// Waits for Ctrl-C or SIGTERM, reporting every child that exits meanwhile (each SIGCHLD).
async fn supervise(members: &mut [Member], exits: &mut Signal) -> Result<()> {
    let stop = crate::wait_for_signal();
    tokio::pin!(stop);
    loop {
        report_exits(members);
        tokio::select! {
            stopped = &mut stop => return stopped,
            _ = exits.recv() => {}
        }
    }
}

/// Reports, once each, the members that exited: which one and its exit status.
fn report_exits(members: &mut [Member]) {
    for member in members.iter_mut().filter(|m| !m.exited) {
        if let Ok(Some(status)) = member.child.try_wait() {
            member.exited = true;
            eprintln!(
                "comet cluster: {} (pid {}) exited on its own with {status}; the rest of the \
                 cluster keeps running (its output: {}.log)",
                member.name,
                member.child.id(),
                member.name
            );
        }
    }
}

/// The console's configuration: on 127.0.0.1 at the base port + 80 (a free port with base 0),
/// its accounts under `<dir>/console`, then the console keys of the environment and `--set`.
fn console_config(args: &StartArgs) -> Result<ConsoleConfig> {
    let port = match args.base_port {
        0 => 0,
        base => base
            .checked_add(CONSOLE_PORT_OFFSET)
            .context("--base-port leaves no room for the console's port")?,
    };
    let mut config = ConsoleConfig {
        host: std::net::Ipv4Addr::LOCALHOST.into(),
        port,
        data_dir: args.dir.join("console"),
        ..ConsoleConfig::default()
    };
    crate::console::apply_env_and_overrides(&mut config, &args.overrides)?;
    config.validate().context("invalid console configuration")?;
    Ok(config)
}

/// Starts the console over the cluster's name servers, unless `consoleEnable=false`. Without a
/// configured password, one is chosen for this run (the command prints it and `cluster.json`
/// names it).
async fn serve_console(members: &[Member], mut config: ConsoleConfig) -> Result<Option<Console>> {
    if !config.enable {
        return Ok(None);
    }
    let password = match config.password {
        Some(_) => None,
        None => {
            let chosen = comet_console::auth::random_token(18);
            config.password = Some(chosen.clone());
            Some(chosen)
        }
    };
    let namesrv = namesrv_addrs(members).join(";");
    let handle = comet_console::start(config, ClientConfig::new(namesrv))
        .await
        .context("starting the web console")?;
    let url = format!("http://{}/", handle.local_addr());
    Ok(Some(Console {
        handle,
        url,
        password,
    }))
}

fn namesrv_addrs(members: &[Member]) -> Vec<String> {
    members
        .iter()
        .filter(|m| m.ha.is_none())
        .map(|m| m.addr.to_string())
        .collect()
}

/// Starts the members; on failure stops what started.
fn start(args: StartArgs) -> Result<(StartArgs, Vec<Member>)> {
    if !matches!(args.role.as_str(), "ASYNC_MASTER" | "SYNC_MASTER") {
        bail!(
            "--role must be ASYNC_MASTER or SYNC_MASTER, not {}",
            args.role
        );
    }
    if args.namesrvs == 0 || args.namesrvs > MAX_NAMESRVS || args.groups == 0 || args.groups > 26 {
        bail!("--namesrvs must be within 1..={MAX_NAMESRVS} and --groups within 1..=26");
    }
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let exe = std::env::current_exe().context("locating the comet binary")?;
    let mut members = Vec::new();
    if let Err(e) = launch(&args, &exe, &mut members) {
        stop_members(&mut members);
        return Err(e);
    }
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
            exited: false,
        });
        wait_listening(members.last_mut(), START_TIMEOUT)?;
        namesrv_addrs.push(addr.to_string());
    }
    let mut index = 0u16;
    for group in 0..args.groups {
        let broker_name = format!("broker-{}", char::from(b'a' + u8::try_from(group)?));
        for id in 0..=args.slaves {
            let addr = port_for(args.base_port, BROKER_PORT_OFFSET + 4 * index + 2, true)?;
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
                exited: false,
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
    // The cluster's own process serves the console; no broker does.
    let _ = writeln!(conf, "consoleEnable=false");
    let broker_keys = args.overrides.iter().filter(|kv| {
        let key = kv.split_once('=').map_or(kv.as_str(), |(k, _)| k);
        !ConsoleConfig::is_console_key(key.trim())
    });
    for kv in broker_keys {
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

/// `cluster.json`: the name servers, the brokers, the supervisor's pid and the console (its
/// address, user and, when this run chose it, its password: the file is readable by its owner
/// only).
fn write_cluster_file(dir: &Path, members: &[Member], console: Option<&Console>) -> Result<()> {
    let describe = |brokers: bool| -> Vec<serde_json::Value> {
        members
            .iter()
            .filter(|m| m.ha.is_some() == brokers)
            .map(|m| {
                let mut entry = serde_json::json!({
                    "name": m.name,
                    "addr": m.addr.to_string(),
                    "pid": m.child.id(),
                });
                if let Some(ha) = m.ha {
                    entry["ha"] = ha.to_string().into();
                }
                entry
            })
            .collect()
    };
    let doc = serde_json::json!({
        "pid": std::process::id(),
        "namesrvAddr": namesrv_addrs(members).join(";"),
        "namesrvs": describe(false),
        "brokers": describe(true),
        "console": console.map(|c| serde_json::json!({
            "url": c.url,
            "user": comet_console::auth::ADMIN_USER,
            "password": c.password,
        })),
    });
    let path = dir.join(CLUSTER_FILE);
    // Written beside it and renamed over it: a reader sees the old file or the whole new one,
    // never a half-written one.
    let partial = dir.join(format!("{CLUSTER_FILE}.partial"));
    let text = serde_json::to_string_pretty(&doc)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&partial).and_then(|mut f| {
        std::io::Write::write_all(&mut f, text.as_bytes())?;
        // A file left from an earlier run keeps its mode at open: set it here.
        std::fs::set_permissions(
            &partial,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )?;
        std::fs::rename(&partial, &path)
    });
    written.with_context(|| format!("writing {}", path.display()))
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

#[allow(unsafe_code)]
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
    fn no_broker_serves_the_console_and_console_keys_stay_out_of_broker_conf() {
        let args = StartArgs {
            dir: PathBuf::from("/tmp/comet-cluster-test"),
            namesrvs: 1,
            groups: 2,
            slaves: 1,
            base_port: 20_000,
            role: "ASYNC_MASTER".to_owned(),
            overrides: vec![
                "flushDiskType=SYNC_FLUSH".to_owned(),
                "consolePassword=cluster-secret".to_owned(),
            ],
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], 20_102));
        for (name, id) in [("broker-a", 0), ("broker-a", 1), ("broker-b", 0)] {
            let conf = broker_conf(&args, name, id, addr, Path::new("/tmp/x"), &[]);
            assert!(conf.contains("consoleEnable=false\n"), "{conf}");
            assert!(conf.contains("flushDiskType=SYNC_FLUSH\n"), "{conf}");
            assert!(!conf.contains("cluster-secret"), "{conf}");
        }
        let console = console_config(&args).expect("console config");
        assert_eq!(console.port, 20_080);
        assert_eq!(console.password.as_deref(), Some("cluster-secret"));
        let ephemeral = StartArgs {
            base_port: 0,
            overrides: Vec::new(),
            ..args
        };
        assert_eq!(console_config(&ephemeral).expect("config").port, 0);
    }

    #[test]
    fn ports_follow_the_base_port() {
        let at = |offset, broker| port_for(20_000, offset, broker).expect("port").port();
        assert_eq!(at(0, false), 20_000);
        assert_eq!(at(1, false), 20_001);
        assert_eq!(at(CONSOLE_PORT_OFFSET, false), 20_080);
        assert_eq!(at(BROKER_PORT_OFFSET + 2, true), 20_102);
        assert_eq!(at(BROKER_PORT_OFFSET + 4 + 2, true), 20_106);
        assert!(port_for(65_500, BROKER_PORT_OFFSET, true).is_err());
    }
}
