//! `comet-reliability fault ...`: the pieces the network-namespace fault suite
//! (`crates/reliability/netns/run.sh`) runs inside its namespaces.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use comet_reliability::fault_check::{self, CheckOptions, GroupSpec};
use comet_reliability::fault_load::{self, ConsumeOptions, ProduceOptions};
use comet_reliability::wire;
use comet_remoting::{ClientConfig, RemotingClient};

/// How often `setup` looks again.
const POLL: Duration = Duration::from_millis(200);

#[derive(Subcommand)]
pub enum FaultCommand {
    /// Create the topic on every master and wait until every slave and name server knows it.
    Setup {
        #[arg(long)]
        namesrv: String,
        #[arg(long)]
        topic: String,
        #[arg(long, default_value_t = 4)]
        queues: i32,
        /// `NAME,MASTER_ADDR,SLAVE_ADDR,MASTER_STORE,SLAVE_STORE` (repeatable).
        #[arg(long = "group", required = true)]
        groups: Vec<GroupSpec>,
        #[arg(long, default_value_t = 60)]
        deadline_secs: u64,
    },
    /// SDK producers sending until SIGTERM; one ledger line per send.
    Produce {
        #[arg(long)]
        namesrv: String,
        #[arg(long)]
        topic: String,
        #[arg(long)]
        ledger: PathBuf,
        #[arg(long)]
        round: u32,
        #[arg(long, default_value_t = 4)]
        tasks: u32,
        #[arg(long, default_value_t = 0)]
        pause_ms: u64,
        /// The client's pollNameServerInterval.
        #[arg(long, default_value_t = 30_000)]
        route_refresh_ms: u64,
    },
    /// An SDK push consumer consuming until SIGTERM; one line per delivery.
    Consume {
        #[arg(long)]
        namesrv: String,
        #[arg(long)]
        topic: String,
        #[arg(long)]
        group: String,
        #[arg(long)]
        deliveries: PathBuf,
        #[arg(long, default_value_t = 30_000)]
        route_refresh_ms: u64,
    },
    /// Wait until every broker named answers GET_BROKER_RUNTIME_INFO.
    WaitBroker {
        #[arg(long = "addr", required = true)]
        addrs: Vec<String>,
        #[arg(long, default_value_t = 60)]
        deadline_secs: u64,
    },
    /// Wait until the ledgers hold enough answers with a status (SEND_OK by default).
    WaitAcks {
        #[arg(long)]
        ledger_dir: PathBuf,
        #[arg(long)]
        count: u64,
        #[arg(long)]
        round: Option<u32>,
        #[arg(long)]
        broker: Option<String>,
        /// Count only answers at or after this Unix time (ms).
        #[arg(long)]
        after_ms: Option<i64>,
        /// The send status to count (SEND_OK, FLUSH_SLAVE_TIMEOUT, ...).
        #[arg(long, default_value = "SEND_OK")]
        status: String,
        #[arg(long, default_value_t = 60)]
        deadline_secs: u64,
    },
    /// Audit the groups against the ledgers (and the consumer's deliveries).
    Check {
        #[arg(long)]
        label: String,
        #[arg(long)]
        topic: String,
        #[arg(long, default_value_t = 4)]
        queues: i32,
        #[arg(long)]
        ledger_dir: PathBuf,
        /// A consumer's deliveries file (repeatable: one per consumer of the group).
        #[arg(long)]
        deliveries: Vec<PathBuf>,
        #[arg(long = "group", required = true)]
        groups: Vec<GroupSpec>,
        /// Read this group from its slave only (repeatable).
        #[arg(long)]
        master_down: Vec<String>,
        #[arg(long)]
        allow_loss: bool,
        /// File of ids accepted as lost by earlier checks (extended by --allow-loss).
        #[arg(long)]
        known_lost: Option<PathBuf>,
        /// Skip the slave-to-master comparisons (the load is still running).
        #[arg(long)]
        no_compare: bool,
        /// Wait up to this long for the consumer to deliver every acknowledged message.
        #[arg(long)]
        drain_secs: Option<u64>,
        #[arg(long, default_value_t = 60)]
        settle_secs: u64,
        #[arg(long)]
        since_ms: Option<i64>,
    },
}

pub async fn run(command: FaultCommand) -> Result<()> {
    match command {
        FaultCommand::Setup {
            namesrv,
            topic,
            queues,
            groups,
            deadline_secs,
        } => {
            setup(
                &namesrv,
                &topic,
                queues,
                &groups,
                Duration::from_secs(deadline_secs),
            )
            .await
        }
        FaultCommand::Produce {
            namesrv,
            topic,
            ledger,
            round,
            tasks,
            pause_ms,
            route_refresh_ms,
        } => {
            let options = ProduceOptions {
                namesrv,
                topic,
                ledger,
                round,
                tasks,
                pause: Duration::from_millis(pause_ms),
                route_refresh: Duration::from_millis(route_refresh_ms),
            };
            Ok(fault_load::produce(&options).await?)
        }
        FaultCommand::Consume {
            namesrv,
            topic,
            group,
            deliveries,
            route_refresh_ms,
        } => {
            let options = ConsumeOptions {
                namesrv,
                topic,
                group,
                deliveries,
                route_refresh: Duration::from_millis(route_refresh_ms),
            };
            Ok(fault_load::consume(&options).await?)
        }
        FaultCommand::WaitBroker {
            addrs,
            deadline_secs,
        } => wait_brokers(&addrs, Duration::from_secs(deadline_secs)).await,
        FaultCommand::WaitAcks {
            ledger_dir,
            count,
            round,
            broker,
            after_ms,
            status,
            deadline_secs,
        } => {
            let filter = fault_check::AckFilter {
                round,
                broker,
                after_ms,
                status,
            };
            wait_acks(
                &ledger_dir,
                &filter,
                count,
                Duration::from_secs(deadline_secs),
            )
            .await
        }
        FaultCommand::Check {
            label,
            topic,
            queues,
            ledger_dir,
            deliveries,
            groups,
            master_down,
            allow_loss,
            known_lost,
            no_compare,
            drain_secs,
            settle_secs,
            since_ms,
        } => {
            let options = CheckOptions {
                label,
                topic,
                queues,
                ledger_dir,
                deliveries,
                groups,
                master_down,
                allow_loss,
                known_lost,
                compare: !no_compare,
                drain: drain_secs.map(Duration::from_secs),
                settle: Duration::from_secs(settle_secs),
                since_ms,
            };
            run_check(&options).await
        }
    }
}

/// Waits for the answers `filter` counts and prints how many there were, how many sends failed
/// meanwhile and how long it took.
async fn wait_acks(
    ledger_dir: &std::path::Path,
    filter: &fault_check::AckFilter,
    count: u64,
    deadline: Duration,
) -> Result<()> {
    let started = Instant::now();
    let (acks, failures) = fault_check::wait_acks(ledger_dir, filter, count, deadline).await?;
    println!(
        "acks={acks} failed={failures} after={:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs the checker and prints its line and violations; fails when a promise was broken.
async fn run_check(options: &CheckOptions) -> Result<()> {
    let report = fault_check::check(options).await?;
    println!("{report}");
    for v in &report.violations {
        println!("  VIOLATION: {v}");
    }
    if !report.violations.is_empty() {
        bail!("{}: {} violations", report.label, report.violations.len());
    }
    Ok(())
}

/// Waits until every broker of `addrs` answers.
async fn wait_brokers(addrs: &[String], deadline: Duration) -> Result<()> {
    let client = RemotingClient::new(ClientConfig::default());
    let started = Instant::now();
    for addr in addrs {
        while wire::runtime_info(&client, addr).await.is_err() {
            if started.elapsed() > deadline {
                bail!("{addr} did not answer within {deadline:?}");
            }
            tokio::time::sleep(POLL).await;
        }
    }
    client.shutdown().await;
    Ok(())
}

/// Creates `topic` on every master; waits until every slave has copied it and every name server
/// routes it to every group, master and slave.
async fn setup(
    namesrv: &str,
    topic: &str,
    queues: i32,
    groups: &[GroupSpec],
    deadline: Duration,
) -> Result<()> {
    let client = RemotingClient::new(ClientConfig::default());
    for group in groups {
        wire::create_topic(&client, &group.master, topic, queues)
            .await
            .with_context(|| format!("creating {topic} on {}", group.master))?;
    }
    let started = Instant::now();
    loop {
        let mut missing = Vec::new();
        for group in groups {
            if !wire::knows_topic(&client, &group.slave, topic)
                .await
                .unwrap_or(false)
            {
                missing.push(format!("{} slave has no topic", group.name));
            }
        }
        for addr in namesrv.split(';').filter(|a| !a.is_empty()) {
            let route = wire::topic_route(&client, addr, topic).await.ok().flatten();
            for group in groups {
                let complete = route.as_ref().is_some_and(|r| {
                    r.queue_datas.iter().any(|q| q.broker_name == group.name)
                        && r.broker_datas
                            .iter()
                            .any(|b| b.broker_name == group.name && b.broker_addrs.len() >= 2)
                });
                if !complete {
                    missing.push(format!("{addr} routes {topic} without {}", group.name));
                }
            }
        }
        if missing.is_empty() {
            break;
        }
        if started.elapsed() > deadline {
            bail!(
                "setup incomplete after {deadline:?}: {}",
                missing.join("; ")
            );
        }
        tokio::time::sleep(POLL).await;
    }
    client.shutdown().await;
    println!("topic {topic} ready on {} groups", groups.len());
    Ok(())
}
