//! The `comet` binary: parses the command line and wires the crates together. No protocol or storage
//! logic lives here; each subcommand is a thin shell over a library crate.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// Buffers are allocated on one thread and freed on another all along the send and pull paths
/// (a frame read by a connection's reader, dropped after the response is written).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod bench;
mod broker;
mod cli;
mod cluster;
mod console;
mod controller;
mod namesrv;
mod serve;

/// Comet: a message queue that speaks Apache RocketMQ's remoting protocol.
#[derive(Debug, Parser)]
#[command(name = "comet", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run an embedded name server and broker in one process (zero configuration).
    Serve(serve::ServeArgs),
    /// Run a stand-alone name server.
    Namesrv(namesrv::NamesrvArgs),
    /// Run a stand-alone broker (RocketMQ broker.conf keys; `-n` names the name servers).
    Broker(broker::BrokerArgs),
    /// Run one controller of a controller-mode quorum (RocketMQ controller.conf keys), which
    /// elects a new master when a broker group's master dies.
    Controller(controller::ControllerArgs),
    /// Run a local cluster: name servers and broker groups with slaves, as child processes
    /// (`comet cluster stop` stops it).
    Cluster(cluster::ClusterArgs),
    /// Send messages to a topic.
    Produce(cli::produce::ProduceArgs),
    /// Read and print a topic's messages as a consumer group.
    Consume(cli::consume::ConsumeArgs),
    /// Topic administration: create, list, route, stats, delete, cluster-list, update-perm.
    Topic(cli::topic::TopicArgs),
    /// Consumer group administration: progress, connections, status, offsets (reset, skip,
    /// clone), subscription-group create/delete/config, a broker's consume stats.
    Group(cli::group::GroupArgs),
    /// Message lookup by key, id, unique key or queue offset; a time window's messages; trace.
    #[command(alias = "message")]
    Msg(cli::msg::MsgArgs),
    /// A broker's runtime figures (store offsets, counts, replication), or every broker's.
    BrokerStatus(cli::status::BrokerStatusArgs),
    /// Producer group administration: a group's connections.
    Producer(cli::producer::ProducerArgs),
    /// Every cluster's brokers (with -m, their runtime figures).
    ClusterList(cli::cluster_list::ClusterListArgs),
    /// Read or change a broker's settings while it runs.
    BrokerConfig(cli::config::BrokerConfigArgs),
    /// Remove or restore a broker's write permission in the name servers' routes.
    BrokerPerm(cli::broker_perm::BrokerPermArgs),
    /// Read or change the name servers' settings while they run.
    NamesrvConfig(cli::config::NamesrvConfigArgs),
    /// A controller quorum: its leader, broker groups' masters, epochs and SyncStateSets, and
    /// a forced election.
    ControllerAdmin(cli::controller_admin::ControllerAdminArgs),
    /// Every topic's groups with their backlog, message rates and daily counts.
    StatsAll(cli::stats_all::StatsAllArgs),
    /// Load generator for any RocketMQ-protocol broker: produce, consume, e2e latency.
    Bench(bench::BenchArgs),
    /// Serve the web console for any RocketMQ cluster, reached through its name servers.
    Console(console::ConsoleArgs),
}

impl Command {
    /// Whether this is one of the client tools (`cli` module) rather than a server.
    fn is_client_tool(&self) -> bool {
        matches!(
            self,
            Command::Produce(_)
                | Command::Consume(_)
                | Command::Topic(_)
                | Command::Group(_)
                | Command::Msg(_)
                | Command::BrokerStatus(_)
                | Command::Producer(_)
                | Command::ClusterList(_)
                | Command::BrokerConfig(_)
                | Command::BrokerPerm(_)
                | Command::NamesrvConfig(_)
                | Command::ControllerAdmin(_)
                | Command::StatsAll(_)
                | Command::Bench(_)
        )
    }
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprint!("{}", error_report(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// What a failed command prints: the error, each cause on a line of its own, and a hint where
/// the error suggests a likely mistake. Never a backtrace: `RUST_BACKTRACE`, which many Rust
/// users keep set, is for panics, not for an error the command explains.
fn error_report(e: &anyhow::Error) -> String {
    use std::fmt::Write as _;
    let mut out = format!("error: {e}\n");
    let mut shown = e.to_string();
    for cause in e.chain().skip(1) {
        // Many errors already quote their cause ("connect to X failed: refused").
        let text = cause.to_string();
        if !shown.contains(&text) {
            let _ = writeln!(out, "  caused by: {text}");
        }
        shown = text;
    }
    if let Some(hint) = cli::errors::hint(e) {
        let _ = writeln!(out, "hint: {hint}");
    }
    out
}

fn run() -> Result<()> {
    let cli = Cli::parse();
    if cli.command.is_client_tool() {
        restore_default_sigpipe();
        // Client tools print their results on stdout; logs go to stderr, warnings only.
        tracing_subscriber::fmt()
            .with_env_filter(
                EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
            )
            .with_target(false)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    } else {
        tracing_subscriber::fmt()
            .with_env_filter(
                // openraft reports every vote and replication step at info.
                EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| EnvFilter::new("info,openraft=warn")),
            )
            .with_target(false)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .init();
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    // Read here rather than by tokio, which panics on a value it cannot use.
    let env_threads = std::env::var_os(WORKER_THREADS_ENV)
        .map(|v| parse_worker_threads(&v))
        .transpose()?;
    match (&cli.command, env_threads) {
        (
            Command::Bench(bench::BenchArgs {
                threads: Some(n), ..
            }),
            _,
        ) => {
            builder.worker_threads(usize::from(*n));
        }
        (_, Some(n)) => {
            builder.worker_threads(n);
        }
        (
            Command::Serve(_) | Command::Namesrv(_) | Command::Broker(_) | Command::Controller(_),
            None,
        ) => {
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            builder.worker_threads(server_worker_threads(cores));
        }
        _ => {}
    }
    let runtime = builder
        .enable_all()
        .thread_name("comet")
        .build()
        .context("building the tokio runtime")?;
    runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve::run(args).await,
            Command::Namesrv(args) => namesrv::run(args).await,
            Command::Broker(args) => broker::run(args).await,
            Command::Controller(args) => controller::run(args).await,
            Command::Cluster(args) => cluster::run(args).await,
            Command::Produce(args) => cli::produce::run(args).await,
            Command::Consume(args) => cli::consume::run(args).await,
            Command::Topic(args) => cli::topic::run(args).await,
            Command::Group(args) => cli::group::run(args).await,
            Command::Msg(args) => cli::msg::run(args).await,
            Command::BrokerStatus(args) => cli::status::run(args).await,
            Command::Producer(args) => cli::producer::run(args).await,
            Command::ClusterList(args) => cli::cluster_list::run(args).await,
            Command::BrokerConfig(args) => cli::config::run_broker(args).await,
            Command::BrokerPerm(args) => cli::broker_perm::run(args).await,
            Command::NamesrvConfig(args) => cli::config::run_namesrv(args).await,
            Command::ControllerAdmin(args) => cli::controller_admin::run(args).await,
            Command::StatsAll(args) => cli::stats_all::run(args).await,
            Command::Bench(args) => bench::run(args).await,
            Command::Console(args) => console::run(args).await,
        }
    })
}

/// Client tools end quietly when the reader of their output goes away (`comet topic list | head`),
/// as other command-line tools do; with SIGPIPE ignored, as Rust starts programs, the next write
/// to stdout would panic instead. Sockets are unaffected: they are written with MSG_NOSIGNAL.
#[allow(unsafe_code)]
fn restore_default_sigpipe() {
    // SAFETY: runs first thing in main, before any other thread exists; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Set, it overrides the worker thread count (`comet bench --threads` still wins).
const WORKER_THREADS_ENV: &str = "TOKIO_WORKER_THREADS";

/// The value of [`WORKER_THREADS_ENV`]: a positive integer.
fn parse_worker_threads(value: &std::ffi::OsStr) -> Result<usize> {
    value
        .to_str()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .with_context(|| format!("{WORKER_THREADS_ENV}={value:?} is not a positive integer"))
}

/// Tokio worker threads of a server process on a box with `cores` cores: one core is left to
/// the threads beside the runtime (commit-log flush, ConsumeQueue and index flush, the kernel's
/// network and page-cache work on their behalf), at least one worker. On two cores, one worker
/// instead of two took 17-20 % less broker CPU at 10,000 msg/s of 1 KiB messages from 32
/// senders to a push consumer, cut that load's p99 send-to-consume latency by a quarter, and left
/// 32 concurrent synchronous 1 KiB sends and 32 concurrent batch sends as fast or slightly
/// faster: two workers mostly spent the difference waking each other.
fn server_worker_threads(cores: usize) -> usize {
    cores.saturating_sub(1).max(1)
}

/// The default data directory: `./comet-data`.
pub fn default_data_dir() -> PathBuf {
    PathBuf::from("comet-data")
}

/// Resolves when the process receives SIGINT (Ctrl-C) or SIGTERM.
pub async fn wait_for_signal() -> Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
        _ = term.recv() => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bench_threads(args: &[&str]) -> Result<Option<u16>, clap::Error> {
        let cli = Cli::try_parse_from(args)?;
        match cli.command {
            Command::Bench(b) => Ok(b.threads),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn worker_threads_from_the_environment_must_be_a_positive_integer() {
        assert_eq!(parse_worker_threads("3".as_ref()).ok(), Some(3));
        for bad in ["0", "-1", "abc", "", "1.5"] {
            assert!(parse_worker_threads(bad.as_ref()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn servers_leave_one_core_to_the_threads_beside_the_runtime() {
        assert_eq!(server_worker_threads(0), 1);
        assert_eq!(server_worker_threads(1), 1);
        assert_eq!(server_worker_threads(2), 1);
        assert_eq!(server_worker_threads(4), 3);
        assert_eq!(server_worker_threads(64), 63);
    }

    #[test]
    fn bench_threads_is_optional_bounded_and_given_before_or_after_the_workload() {
        assert_eq!(
            bench_threads(&["comet", "bench", "produce"]).ok(),
            Some(None)
        );
        assert_eq!(
            bench_threads(&["comet", "bench", "--threads", "1", "produce"]).ok(),
            Some(Some(1))
        );
        assert_eq!(
            bench_threads(&["comet", "bench", "consume", "--threads", "3"]).ok(),
            Some(Some(3))
        );
        for bad in ["0", "257", "-1", "x"] {
            assert!(
                bench_threads(&["comet", "bench", "e2e", "--threads", bad]).is_err(),
                "{bad}"
            );
        }
    }
}
