//! `comet bench e2e`: produce at a fixed rate and consume in the same process, measuring the
//! latency from the moment a message is sent to the moment the consumer's listener sees it.
//!
//! The consumer starts first, with a fresh group reading from the last offset, and the run waits
//! until it owns every queue of the topic, so no message is sent before someone is pulling. Only
//! messages stamped with this run's id count, so older messages in the topic do not distort the
//! figures. Latencies of messages sent during `--warmup` are not recorded (connections, route
//! caches and the JIT of a Java broker are still settling). After the senders stop, the consumer
//! gets `--drain` seconds to receive what is still in flight; the remainder is reported as lost.
//!
//! With `--deliver-after-ms` the messages are timer messages and their stamp is their due time:
//! the latency is then how late each arrived, and one received before its time counts as early.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use comet_client::admin::MQAdmin;
use serde_json::json;
use tokio::time::Instant;

use super::consume::{FromWhere, Sink, start_push};
use super::produce::{LoadArgs, SendMode, SendPlan, new_run_id, prepare, run_senders};
use super::report::{LatencySummary, Progress, Report};
use super::stamp::unix_nanos;
use super::{TargetArgs, TopicSetupArgs, positive_secs};

/// Fixed rate when `--rate` is not given (the rocketmq-rust reference point).
pub const DEFAULT_E2E_RATE: f64 = 1000.0;
/// Warm-up seconds whose latencies are not recorded.
pub const DEFAULT_WARMUP_SECS: f64 = 1.0;
/// Seconds the consumer gets to catch up after the senders stop.
pub const DEFAULT_DRAIN_SECS: f64 = 10.0;
/// Longest wait for the consumer to own every queue.
pub const REBALANCE_PATIENCE: Duration = Duration::from_secs(60);
/// Pause between two looks at the consumer's queues while waiting for its rebalance.
pub const REBALANCE_POLL: Duration = Duration::from_millis(10);
/// Consumer group prefix; the run id is appended so each run starts fresh.
pub const E2E_GROUP_PREFIX: &str = "BENCH_E2E_";
/// Messages per pull of the e2e consumer.
pub const E2E_PULL_BATCH: i32 = 32;

#[derive(Debug, Args)]
pub struct E2eArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub topic_setup: TopicSetupArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Seconds at the start whose latencies are not recorded.
    #[arg(long, default_value_t = DEFAULT_WARMUP_SECS)]
    pub warmup: f64,
    /// Seconds the consumer gets after the senders stop.
    #[arg(long, default_value_t = DEFAULT_DRAIN_SECS)]
    pub drain: f64,
}

/// Readable queues of `topic` across all brokers, from the name server's route.
async fn readable_queues(target: &TargetArgs) -> Result<usize> {
    let admin = MQAdmin::new(target.client_config()).context("creating the admin client")?;
    let route = admin.topic_route(&target.topic).await;
    admin.shutdown().await;
    let route = route.with_context(|| format!("fetching the route of {}", target.topic))?;
    Ok(route
        .queue_datas
        .iter()
        .map(|q| usize::try_from(q.read_queue_nums).unwrap_or(0))
        .sum())
}

pub async fn run(mut args: E2eArgs) -> Result<()> {
    if args.load.rate.is_none() {
        args.load.rate = Some(DEFAULT_E2E_RATE);
    }
    let warmup =
        Duration::try_from_secs_f64(args.warmup.max(0.0)).context("--warmup is out of range")?;
    let drain = positive_secs(args.drain, "--drain")?;
    let run_id = new_run_id();
    let plan = Arc::new(SendPlan::new(
        &args.target.topic,
        &args.load,
        SendMode::Sync,
        1,
        1,
        run_id,
    )?);
    let interval = args.target.report_interval()?;
    let producer = Arc::new(super::produce::start_producer(&args.target, &args.load).await?);
    prepare(
        &producer,
        &args.target,
        &args.topic_setup,
        &plan,
        args.load.wait_ready,
    )
    .await
    .context("the broker did not accept the probe message")?;

    let expected_queues = readable_queues(&args.target).await?;
    if expected_queues == 0 {
        bail!("topic {} has no readable queue", args.target.topic);
    }
    let sink = Arc::new(Sink::new(Some(run_id), u64::MAX, None)?);
    let group = format!("{E2E_GROUP_PREFIX}{run_id}");
    let consumer = start_push(
        &args.target,
        &group,
        FromWhere::Last,
        E2E_PULL_BATCH,
        Arc::clone(&sink),
    )
    .await?;
    let rebalance_deadline = Instant::now() + REBALANCE_PATIENCE;
    while consumer.owned_queues().len() < expected_queues {
        if Instant::now() >= rebalance_deadline {
            consumer.shutdown().await;
            producer.shutdown().await;
            bail!(
                "the consumer did not own all {expected_queues} queues within {REBALANCE_PATIENCE:?}"
            );
        }
        tokio::time::sleep(REBALANCE_POLL).await;
    }
    // The warm-up counts from when sending starts.
    sink.record_after(unix_nanos().saturating_add(u64::try_from(warmup.as_nanos()).unwrap_or(0)));
    let progress = Progress::start("e2e", Arc::clone(&sink.counters), interval, plan.planned());
    let producer_counters = Arc::new(super::report::Counters::default());
    let sent = run_senders(
        Arc::clone(&producer),
        Arc::clone(&plan),
        Arc::clone(&producer_counters),
    )
    .await;
    let sent_ok = producer_counters.ok();
    let drain_deadline = Instant::now() + drain;
    while sink.counters.ok() < sent_ok && Instant::now() < drain_deadline {
        tokio::time::sleep(REBALANCE_POLL).await;
    }
    progress.finish();
    consumer.shutdown().await;
    producer.shutdown().await;
    let (send_rt, errors, elapsed) = sent?;
    let received = sink.counters.ok();
    let mut extra = serde_json::Map::new();
    extra.insert("sent".to_owned(), json!(sent_ok));
    extra.insert("lost".to_owned(), json!(sent_ok.saturating_sub(received)));
    if plan.deliver_after.is_some() {
        // Timer messages: the latency is how late each arrived after its due time.
        extra.insert(
            "early".to_owned(),
            json!(sink.early.load(std::sync::atomic::Ordering::Relaxed)),
        );
    }
    if let Some(s) = LatencySummary::of(&send_rt) {
        extra.insert("send_rt".to_owned(), s.to_json());
    }
    if !errors.is_empty() {
        extra.insert("errors".to_owned(), json!(errors));
    }
    let mut settings = plan.settings();
    if let Some(obj) = settings.as_object_mut() {
        obj.insert("warmup_secs".to_owned(), json!(warmup.as_secs_f64()));
        obj.insert("group".to_owned(), json!(group));
    }
    let report = Report {
        command: "e2e",
        settings,
        elapsed,
        messages: received,
        failed: producer_counters.failed(),
        bytes: sink.counters.bytes(),
        latency: LatencySummary::of(&sink.latency()).map(|s| ("e2e_latency", s)),
        extra,
    };
    report.print(args.target.json);
    Ok(())
}
