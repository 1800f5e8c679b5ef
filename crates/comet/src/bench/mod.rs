//! `comet bench produce|consume|e2e|grpc-send|grpc-receive|topics`: a load generator for any broker that
//! speaks RocketMQ's remoting protocol (Comet, Apache RocketMQ, rocketmq-rust), and for the 5.x gRPC
//! protocol (Comet's gRPC endpoint, Apache's proxy).
//!
//! It exists so that every broker is measured by the *same* client under the *same* load: the
//! comparison script (`bench/compare.sh`) points it at each broker in turn. It therefore only uses
//! the public `comet-client` SDK (one shared producer or consumer, as the Java benchmark tools do)
//! and never a Comet-specific shortcut.
//!
//! Every message body starts with a [`stamp`] (magic, run id, wall-clock nanoseconds at send), so a
//! consumer — in the same process (`e2e`) or another one (`consume`) — can measure born→consumed
//! latency with sub-millisecond resolution; the broker's millisecond `bornTimestamp` is the
//! fallback for foreign messages. Latencies go into HDR histograms (nanosecond values, three
//! significant digits) and are reported as p50/p90/p99/p99.9/max.
//!
//! While running, a progress bar with live TPS is drawn on a terminal; otherwise plain lines are
//! printed periodically to stderr. The final report goes to stdout, as text or with `--json` as one
//! JSON object.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use comet_client::ClientConfig;
use comet_client::admin::{MQAdmin, TopicTarget, topic::default_topic_config};

pub mod consume;
pub mod e2e;
pub mod grpc;
pub mod produce;
pub mod rate;
pub mod report;
pub mod stamp;
pub mod topics;

/// Topic used when `--topic` is not given. Not RocketMQ's `BenchmarkTest`: that is a system topic
/// (1,024 queues, made by the broker itself), and Comet and Apache brokers alike refuse to create
/// or reshape it, so a default run could not set up its queues.
pub const DEFAULT_BENCH_TOPIC: &str = "CometBench";
/// Queues per broker of the topic the bench creates (mqadmin `updateTopic`'s default).
pub const DEFAULT_BENCH_QUEUES: i32 = 8;
/// Run length when neither `--duration` nor `--count` is given.
pub const DEFAULT_DURATION_SECS: f64 = 10.0;
/// Seconds between two progress updates.
pub const DEFAULT_REPORT_INTERVAL_SECS: f64 = 1.0;
/// Pause between two attempts while waiting for the broker to accept sends (`--wait-ready`).
pub const READY_RETRY_PAUSE: Duration = Duration::from_millis(5);
/// Largest number of queues a bench topic may ask for.
pub const MAX_BENCH_QUEUES: i32 = 1024;
/// Largest `--threads` accepted.
pub const MAX_BENCH_THREADS: usize = 256;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Tokio worker threads of the load generator (default: one per core). On a box it shares
    /// with the broker, one thread is often faster: a multi-threaded client spends much of its
    /// CPU waking its other thread for each response (see BENCHMARKS.md).
    #[arg(long, global = true, value_parser = clap::value_parser!(u16).range(1..=MAX_BENCH_THREADS as i64))]
    pub threads: Option<u16>,
    #[command(subcommand)]
    pub command: BenchCommand,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Send as fast as allowed (or at --rate) with N concurrent producers; send RT histogram.
    Produce(produce::ProduceArgs),
    /// Consume a topic (push or pull) and measure throughput and born→consumed latency.
    Consume(consume::ConsumeArgs),
    /// Produce at a fixed rate and consume in the same process: born→consumed latency.
    E2e(e2e::E2eArgs),
    /// SendMessage over the 5.x gRPC protocol with N concurrent callers; send RT histogram.
    GrpcSend(grpc::GrpcSendArgs),
    /// ReceiveMessage + AckMessage over the 5.x gRPC protocol (a simple consumer).
    GrpcReceive(grpc::GrpcReceiveArgs),
    /// Create many topics one request after another, then time route lookups: how creation and
    /// lookups cost as the topic table grows.
    Topics(topics::TopicsArgs),
}

pub async fn run(args: BenchArgs) -> Result<()> {
    match args.command {
        BenchCommand::Produce(a) => produce::run(a).await,
        BenchCommand::Consume(a) => consume::run(a).await,
        BenchCommand::E2e(a) => e2e::run(a).await,
        BenchCommand::GrpcSend(a) => grpc::run_send(a).await,
        BenchCommand::GrpcReceive(a) => grpc::run_receive(a).await,
        BenchCommand::Topics(a) => topics::run(a).await,
    }
}

/// Target and output options shared by every bench command.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// Name server address(es), `;`-separated.
    #[arg(short = 'n', long = "namesrv", env = "NAMESRV_ADDR", default_value = crate::cli::DEFAULT_NAMESRV)]
    pub namesrv: String,
    /// Topic to use.
    #[arg(short = 't', long, default_value = DEFAULT_BENCH_TOPIC)]
    pub topic: String,
    /// Print the final report as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Seconds between progress updates.
    #[arg(long, default_value_t = DEFAULT_REPORT_INTERVAL_SECS)]
    pub report_interval: f64,
}

impl TargetArgs {
    pub fn client_config(&self) -> ClientConfig {
        ClientConfig::new(self.namesrv.clone())
    }

    pub fn report_interval(&self) -> Result<Duration> {
        positive_secs(self.report_interval, "--report-interval")
    }
}

/// Topic creation options of the commands that send.
#[derive(Debug, Clone, Args)]
pub struct TopicSetupArgs {
    /// Read and write queues per broker of the topic created before the run.
    #[arg(long, default_value_t = DEFAULT_BENCH_QUEUES)]
    pub queues: i32,
    /// Do not create the topic; rely on it existing (or on the broker's auto-creation).
    #[arg(long)]
    pub no_create: bool,
}

/// Converts a seconds flag to a duration, refusing zero, negative and non-finite values.
pub fn positive_secs(secs: f64, flag: &str) -> Result<Duration> {
    if !secs.is_finite() || secs <= 0.0 {
        bail!("{flag} must be a positive number of seconds, got {secs}");
    }
    Duration::try_from_secs_f64(secs).with_context(|| format!("{flag} {secs} is out of range"))
}

/// Creates (or updates) `topic` with `queues` read/write queues on every master broker known to
/// the name server. Fails when there is no broker yet, so callers can retry while one starts.
pub async fn ensure_topic(client: &ClientConfig, topic: &str, queues: i32) -> Result<()> {
    if !(1..=MAX_BENCH_QUEUES).contains(&queues) {
        bail!("--queues must be between 1 and {MAX_BENCH_QUEUES}, got {queues}");
    }
    let admin = MQAdmin::new(client.clone()).context("creating the admin client")?;
    let outcome = async {
        let masters = admin
            .master_addrs(None)
            .await
            .context("asking the name server for the brokers")?;
        if masters.is_empty() {
            bail!("the name server knows no master broker yet");
        }
        let mut config = default_topic_config(topic);
        config.read_queue_nums = queues;
        config.write_queue_nums = queues;
        for (_, addr) in masters {
            admin
                .create_topic(&TopicTarget::Broker(addr.clone()), &config)
                .await
                .with_context(|| format!("creating topic {topic} on {addr}"))?;
        }
        Ok(())
    }
    .await;
    admin.shutdown().await;
    outcome
}

/// Runs `attempt` until it succeeds, pausing [`READY_RETRY_PAUSE`] between failures, for at most
/// `patience` (a single attempt when `None`). Returns the last error when time runs out.
pub async fn retry_until<T, F, Fut>(patience: Option<Duration>, mut attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let deadline = patience.map(|p| tokio::time::Instant::now() + p);
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) => match deadline {
                Some(d) if tokio::time::Instant::now() + READY_RETRY_PAUSE < d => {
                    tracing::debug!(error = %format!("{e:#}"), "not ready yet, retrying");
                    tokio::time::sleep(READY_RETRY_PAUSE).await;
                }
                _ => return Err(e),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_flags_must_be_positive_and_finite() {
        assert!(positive_secs(0.0, "--x").is_err());
        assert!(positive_secs(-1.0, "--x").is_err());
        assert!(positive_secs(f64::NAN, "--x").is_err());
        assert!(positive_secs(f64::INFINITY, "--x").is_err());
        assert_eq!(
            positive_secs(1.5, "--x").ok(),
            Some(Duration::from_millis(1500))
        );
    }

    #[tokio::test]
    async fn retry_until_gives_up_with_the_last_error_and_stops_on_success() {
        let mut calls = 0u32;
        let out: Result<u32> = retry_until(None, || {
            calls += 1;
            async { bail!("no") }
        })
        .await;
        assert!(out.is_err());
        assert_eq!(calls, 1);

        let mut calls = 0u32;
        let out = retry_until(Some(Duration::from_secs(30)), || {
            calls += 1;
            let n = calls;
            async move { if n < 3 { bail!("not yet") } else { Ok(n) } }
        })
        .await;
        assert_eq!(out.ok(), Some(3));
    }
}
