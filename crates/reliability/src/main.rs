//! `comet-reliability`: the long versions of the reliability runs, against a `comet serve` binary
//! started as a child process. Prints one summary line per run (the figures in RELIABILITY.md)
//! and exits non-zero when a promise was broken.

mod bin_fault;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use comet_reliability::churn::ChurnMode;
use comet_reliability::replicated::{self, ReplicationMode};
use comet_reliability::serve::{FlushMode, default_comet_bin};
use comet_reliability::{churn, churn_consumer, crash_loop, timer_crash};

#[derive(Parser)]
#[command(
    name = "comet-reliability",
    about = "Crash loops and consumer churn against comet serve"
)]
struct Cli {
    /// The `comet` binary to run (default: the one next to this executable).
    #[arg(long, global = true)]
    comet_bin: Option<PathBuf>,
    /// Data directory (default: a fresh temporary directory, removed afterwards).
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    /// Seed of every random choice (kill moments, churn timing).
    #[arg(long, global = true, default_value_t = 0x5eed)]
    seed: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// SIGKILL the broker at random moments under load, restart, audit; repeat.
    CrashLoop {
        #[arg(long, default_value_t = 100)]
        cycles: u32,
        #[arg(long, value_enum, default_value_t = FlushMode::Sync)]
        flush: FlushMode,
        #[arg(long, default_value_t = 4)]
        producers: usize,
        /// Longest random delay between the cycle's load quota and the kill, in ms.
        #[arg(long, default_value_t = 1500)]
        max_kill_delay_ms: u64,
        /// Run a name server, a master (SYNC_MASTER or ASYNC_MASTER) and its slave as separate
        /// processes and kill the master, the slave or both in turn; audit both brokers.
        #[arg(long, value_enum)]
        replicated: Option<ReplicationMode>,
        /// With --replicated: a broker.conf key for both brokers (`--broker-set
        /// inSyncReplicas=1`, repeatable).
        #[arg(long = "broker-set", value_name = "KEY=VALUE")]
        broker_settings: Vec<String>,
    },
    /// Push consumers (child processes) join and leave a clustering group while producers send;
    /// some leave by SIGKILL, the others gracefully.
    Churn {
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Send by order key and consume with the orderly listener; check first-delivery order.
        #[arg(long)]
        orderly: bool,
        /// Percent of leaves done by SIGKILL.
        #[arg(long, default_value_t = 50)]
        kill_percent: u64,
        /// Pause of each producer between sends, in ms (0: flat out).
        #[arg(long, default_value_t = 0)]
        send_pause_ms: u64,
    },
    /// Timer messages due over the next `--span-secs`, the broker SIGKILLed `--kills` times while
    /// they wait; a ledger checks every one is delivered, none early, and counts duplicates.
    TimerCrash(TimerCrashArgs),
    /// The network-namespace fault suite's load, setup and checker (see
    /// crates/reliability/netns/run.sh).
    #[command(subcommand)]
    Fault(bin_fault::FaultCommand),
    /// One churn consumer process (started by `churn`): reports deliveries on stdout, exits
    /// gracefully when stdin closes.
    #[command(hide = true)]
    ChurnConsumer {
        #[arg(long)]
        namesrv: String,
        #[arg(long)]
        instance: String,
        #[arg(long, default_value = churn::TOPIC)]
        topic: String,
        #[arg(long, default_value = churn::GROUP)]
        group: String,
        #[arg(long)]
        orderly: bool,
    },
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("comet_reliability=info,warn")
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    if let Command::Fault(command) = cli.command {
        // Runs inside the suite's namespaces: needs neither the broker binary nor a data dir.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("tokio runtime")?;
        return runtime.block_on(bin_fault::run(command));
    }
    if let Command::ChurnConsumer {
        namesrv,
        instance,
        topic,
        group,
        orderly,
    } = cli.command
    {
        // A child of `churn`: needs neither the broker binary nor a data directory.
        let options = churn_consumer::ConsumerOptions {
            namesrv,
            topic,
            group,
            instance_name: instance,
            orderly,
            client_timer: churn::CLIENT_TIMER,
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("tokio runtime")?;
        return runtime
            .block_on(churn_consumer::run(&options))
            .context("churn consumer");
    }
    let comet_bin = cli.comet_bin.unwrap_or_else(default_comet_bin);
    if !comet_bin.exists() {
        bail!(
            "{} not found: build it (`cargo build -p comet`) or pass --comet-bin",
            comet_bin.display()
        );
    }
    let temp;
    let data_dir = match cli.data_dir {
        Some(dir) => dir,
        None => {
            temp = tempfile_dir()?;
            temp.path().to_path_buf()
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    match cli.command {
        Command::CrashLoop {
            cycles,
            flush,
            producers,
            max_kill_delay_ms,
            replicated: Some(mode),
            broker_settings,
        } => {
            let mut config = replicated::ReplicatedConfig::new(comet_bin, data_dir, cycles, mode);
            config.broker_settings = parse_settings(&broker_settings)?;
            config.flush = flush;
            config.seed = cli.seed;
            config.producers = producers;
            config.max_kill_delay = Duration::from_millis(max_kill_delay_ms);
            let report = runtime.block_on(replicated::run(&config))?;
            println!("{report}");
        }
        Command::CrashLoop {
            cycles,
            flush,
            producers,
            max_kill_delay_ms,
            replicated: None,
            ..
        } => {
            let mut config = crash_loop::CrashLoopConfig::new(comet_bin, data_dir, cycles, flush);
            config.seed = cli.seed;
            config.producers = producers;
            config.max_kill_delay = Duration::from_millis(max_kill_delay_ms);
            let report = runtime.block_on(crash_loop::run(&config))?;
            println!("{report}");
        }
        Command::Churn {
            seconds,
            orderly,
            kill_percent,
            send_pause_ms,
        } => {
            let churn = ChurnArgs {
                seconds,
                orderly,
                kill_percent,
                send_pause_ms,
                seed: cli.seed,
            };
            run_churn(&runtime, comet_bin, data_dir, &churn)?;
        }
        Command::TimerCrash(args) => {
            run_timer_crash(&runtime, comet_bin, data_dir, &args, cli.seed)?
        }
        Command::ChurnConsumer { .. } | Command::Fault(_) => {}
    }
    Ok(())
}

/// The timer crash test's shape.
#[derive(clap::Args)]
struct TimerCrashArgs {
    #[arg(long, default_value_t = 10_000)]
    messages: u64,
    #[arg(long, default_value_t = 60)]
    span_secs: u64,
    #[arg(long, default_value_t = 2)]
    kills: u32,
    #[arg(long, value_enum, default_value_t = FlushMode::Async)]
    flush: FlushMode,
}

/// Runs the timer crash test; fails when a message was lost, early or unknown.
fn run_timer_crash(
    runtime: &tokio::runtime::Runtime,
    comet_bin: PathBuf,
    data_dir: PathBuf,
    args: &TimerCrashArgs,
    seed: u64,
) -> Result<()> {
    let mut config = timer_crash::TimerCrashConfig::new(comet_bin, data_dir);
    config.messages = args.messages;
    config.span = Duration::from_secs(args.span_secs);
    config.kills = args.kills;
    config.flush = args.flush;
    config.seed = seed;
    let report = runtime.block_on(timer_crash::run(&config))?;
    println!("{report}");
    if report.lost > 0 || report.early > 0 || report.unknown > 0 {
        bail!(
            "timer messages lost {}, early {}, unknown {}",
            report.lost,
            report.early,
            report.unknown
        );
    }
    Ok(())
}

/// `KEY=VALUE` pairs.
fn parse_settings(pairs: &[String]) -> Result<Vec<(String, String)>> {
    pairs
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((key, value)) => Ok((key.trim().to_owned(), value.trim().to_owned())),
            None => bail!("--broker-set expects KEY=VALUE, got {kv:?}"),
        })
        .collect()
}

struct ChurnArgs {
    seconds: u64,
    orderly: bool,
    kill_percent: u64,
    send_pause_ms: u64,
    seed: u64,
}

fn run_churn(
    runtime: &tokio::runtime::Runtime,
    comet_bin: PathBuf,
    data_dir: PathBuf,
    args: &ChurnArgs,
) -> Result<()> {
    let ChurnArgs {
        seconds,
        orderly,
        kill_percent,
        send_pause_ms,
        seed,
    } = *args;
    let consumer_bin = std::env::current_exe().context("locating this executable")?;
    let mode = if orderly {
        ChurnMode::Orderly
    } else {
        ChurnMode::Concurrently
    };
    let mut config = churn::ChurnConfig::new(
        comet_bin,
        consumer_bin,
        data_dir,
        Duration::from_secs(seconds),
        mode,
    );
    config.seed = seed;
    config.kill_percent = kill_percent;
    config.send_pause = Duration::from_millis(send_pause_ms);
    let report = runtime.block_on(churn::run(&config))?;
    println!("{report}");
    let audit = &report.audit;
    if audit.lost > 0
        || audit.unknown > 0
        || audit.queue_order_violations > 0
        || audit.key_order_violations > 0
    {
        bail!(
            "churn lost {}, invented {}, {} queue-order and {} key-order violations",
            audit.lost,
            audit.unknown,
            audit.queue_order_violations,
            audit.key_order_violations
        );
    }
    Ok(())
}

/// A temporary directory that is removed when the run ends.
fn tempfile_dir() -> Result<TempDir> {
    let base = std::env::temp_dir().join(format!("comet-reliability-{}", std::process::id()));
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    Ok(TempDir(base))
}

struct TempDir(PathBuf);

impl TempDir {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
