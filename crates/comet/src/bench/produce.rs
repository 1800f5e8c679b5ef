//! `comet bench produce`: N concurrent senders sharing one producer, in one of four modes.
//!
//! - `sync`: each sender awaits every send; the send RT histogram is the request round trip.
//! - `async`: each sender keeps up to `--inflight` sends outstanding (spawned, as the SDK's
//!   `send_async` does); the RT is from issue to acknowledgement.
//! - `oneway`: fire and forget; the RT is only the time to hand the request to the connection,
//!   and the throughput is what the client could write, not what the broker stored.
//! - `batch`: each send carries `--batch` messages in one SEND_BATCH_MESSAGE request.
//!
//! With `--rate` the senders follow one shared schedule ([`super::rate::Pacer`]); without it they
//! send as fast as the broker answers. The run ends after `--duration` or `--count` messages.
//!
//! Before the clock starts, the topic is created (unless `--no-create`) and one probe message is
//! sent, so the route lookup and connection set-up are not measured. `--wait-ready` retries that
//! set-up while a broker is starting and reports when the first send was accepted
//! (`ready_unix_nanos`), which is how `bench/compare.sh` measures start-to-first-send.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{ClientError, Message, SendResult, SendStatus};
use comet_protocol::limits::MAX_MESSAGE_SIZE;
use hdrhistogram::Histogram;
use serde_json::json;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::rate::{Pacer, Quota, slot_spacing_nanos};
use super::report::{Counters, Planned, Progress, Report, nanos_of, new_histogram, record_nanos};
use super::stamp::{NANOS_PER_MILLI, stamped_body, unix_nanos};
use super::{TargetArgs, TopicSetupArgs, positive_secs, retry_until};

/// Producer group of the bench when none is given.
pub const DEFAULT_BENCH_PRODUCER_GROUP: &str = "BENCH_PRODUCER";
/// Concurrent senders when `--producers` is not given.
pub const DEFAULT_PRODUCERS: usize = 32;
/// Most concurrent senders accepted.
pub const MAX_PRODUCERS: usize = 4096;
/// Body size when `--size` is not given.
pub const DEFAULT_MESSAGE_SIZE: usize = 1024;
/// Messages per request in batch mode when `--batch` is not given.
pub const DEFAULT_BATCH: usize = 32;
/// Outstanding sends per sender in async mode when `--inflight` is not given.
pub const DEFAULT_INFLIGHT: usize = 64;
/// Most outstanding sends per sender in async mode.
pub const MAX_INFLIGHT: usize = 65_536;
/// Send timeout when `--timeout-ms` is not given (the SDK's default).
pub const DEFAULT_SEND_TIMEOUT_MS: u64 = 3000;
/// Distinct failure causes remembered for the report.
pub const MAX_REPORTED_ERRORS: usize = 5;

/// How each send is issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SendMode {
    Sync,
    Async,
    Oneway,
    Batch,
}

impl SendMode {
    pub fn name(self) -> &'static str {
        match self {
            SendMode::Sync => "sync",
            SendMode::Async => "async",
            SendMode::Oneway => "oneway",
            SendMode::Batch => "batch",
        }
    }
}

/// Load shape options shared by `produce` and `e2e`.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Concurrent senders (they share one producer and its connections).
    #[arg(short = 'p', long, default_value_t = DEFAULT_PRODUCERS)]
    pub producers: usize,
    /// Body size in bytes (the first 20 bytes are the latency stamp).
    #[arg(short = 's', long, default_value_t = DEFAULT_MESSAGE_SIZE)]
    pub size: usize,
    /// Total messages per second across all senders; omit for as fast as possible.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Run length in seconds (default 10 unless --count is given).
    #[arg(short = 'd', long)]
    pub duration: Option<f64>,
    /// Stop after this many messages.
    #[arg(short = 'c', long)]
    pub count: Option<u64>,
    /// Producer group.
    #[arg(short = 'g', long, default_value = DEFAULT_BENCH_PRODUCER_GROUP)]
    pub group: String,
    /// Send timeout in milliseconds.
    #[arg(long, default_value_t = DEFAULT_SEND_TIMEOUT_MS)]
    pub timeout_ms: u64,
    /// Retry topic creation and the probe send for up to this many seconds (broker starting).
    #[arg(long)]
    pub wait_ready: Option<f64>,
    /// Send timer messages due this many milliseconds after each send (TIMER_DELIVER_MS); the
    /// latency stamp then carries the due time, so `e2e` measures how late each one arrived.
    #[arg(long, value_name = "MS")]
    pub deliver_after_ms: Option<u64>,
}

#[derive(Debug, Args)]
pub struct ProduceArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub topic_setup: TopicSetupArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Send mode.
    #[arg(short = 'm', long, value_enum, default_value_t = SendMode::Sync)]
    pub mode: SendMode,
    /// Messages per request in batch mode.
    #[arg(long, default_value_t = DEFAULT_BATCH)]
    pub batch: usize,
    /// Outstanding sends per sender in async mode.
    #[arg(long, default_value_t = DEFAULT_INFLIGHT)]
    pub inflight: usize,
}

/// Everything a sender needs, checked once.
#[derive(Debug, Clone)]
pub struct SendPlan {
    pub topic: String,
    pub mode: SendMode,
    pub producers: usize,
    pub size: usize,
    pub batch: usize,
    pub inflight: usize,
    pub rate: Option<f64>,
    pub duration: Option<Duration>,
    pub count: Option<u64>,
    pub run_id: u32,
    /// Timer messages due this long after their send.
    pub deliver_after: Option<Duration>,
}

impl SendPlan {
    /// Validates the flags into a plan.
    pub fn new(
        topic: &str,
        load: &LoadArgs,
        mode: SendMode,
        batch: usize,
        inflight: usize,
        run_id: u32,
    ) -> Result<Self> {
        if !(1..=MAX_PRODUCERS).contains(&load.producers) {
            bail!("--producers must be between 1 and {MAX_PRODUCERS}");
        }
        if load.size == 0 || load.size > MAX_MESSAGE_SIZE {
            bail!("--size must be between 1 and {MAX_MESSAGE_SIZE} bytes");
        }
        let batch = if mode == SendMode::Batch { batch } else { 1 };
        if batch == 0 || batch.saturating_mul(load.size) > MAX_MESSAGE_SIZE {
            bail!("--batch × --size must be between 1 message and {MAX_MESSAGE_SIZE} bytes");
        }
        if !(1..=MAX_INFLIGHT).contains(&inflight) {
            bail!("--inflight must be between 1 and {MAX_INFLIGHT}");
        }
        let rate = match load.rate {
            Some(r) => {
                slot_spacing_nanos(r)
                    .context("--rate must be a positive number of messages per second")?;
                Some(r)
            }
            None => None,
        };
        let duration = match (load.duration, load.count) {
            (Some(d), _) => Some(positive_secs(d, "--duration")?),
            (None, Some(_)) => None,
            (None, None) => Some(positive_secs(super::DEFAULT_DURATION_SECS, "--duration")?),
        };
        if load.count == Some(0) {
            bail!("--count must be positive");
        }
        Ok(SendPlan {
            topic: topic.to_owned(),
            mode,
            producers: load.producers,
            size: load.size,
            batch,
            inflight,
            rate,
            duration,
            count: load.count,
            run_id,
            deliver_after: load.deliver_after_ms.map(Duration::from_millis),
        })
    }

    pub fn planned(&self) -> Planned {
        match (self.count, self.duration) {
            (Some(n), None) => Planned::Messages(n),
            (_, Some(d)) => Planned::Duration(d),
            (None, None) => Planned::Messages(0),
        }
    }

    pub fn settings(&self) -> serde_json::Value {
        json!({
            "topic": self.topic,
            "mode": self.mode.name(),
            "producers": self.producers,
            "size": self.size,
            "batch": self.batch,
            "inflight": (self.mode == SendMode::Async).then_some(self.inflight),
            "rate": self.rate,
            "duration_secs": self.duration.map(|d| d.as_secs_f64()),
            "count": self.count,
            "deliver_after_ms": self.deliver_after.map(|d| d.as_millis()),
        })
    }

    fn message(&self) -> Message {
        let Some(after) = self.deliver_after else {
            return Message::new(
                self.topic.clone(),
                stamped_body(self.size, self.run_id, unix_nanos()),
            );
        };
        // Due on a whole millisecond, the broker's unit; the stamp says exactly that time.
        let after_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        let due_ms = (unix_nanos() / NANOS_PER_MILLI).saturating_add(after_ms);
        let mut msg = Message::new(
            self.topic.clone(),
            stamped_body(
                self.size,
                self.run_id,
                due_ms.saturating_mul(NANOS_PER_MILLI),
            ),
        );
        msg.set_deliver_time_ms(i64::try_from(due_ms).unwrap_or(i64::MAX));
        msg
    }
}

/// Run id of probe messages, which no e2e run counts.
pub const PROBE_RUN_ID: u32 = 0;

/// A run id that differs between runs (the start time mixed with the pid), never [`PROBE_RUN_ID`].
pub fn new_run_id() -> u32 {
    let nanos = unix_nanos();
    ((nanos as u32) ^ ((nanos >> 32) as u32) ^ std::process::id().rotate_left(16)) | 1
}

/// A started producer for `target` with the load's group and timeout.
pub async fn start_producer(target: &TargetArgs, load: &LoadArgs) -> Result<DefaultMQProducer> {
    let mut config = ProducerConfig::new(load.group.clone(), target.namesrv.clone());
    config.send_msg_timeout = Duration::from_millis(load.timeout_ms);
    let producer = DefaultMQProducer::new(config);
    producer.start().await.context("starting the producer")?;
    Ok(producer)
}

/// Creates the topic (unless told not to) and sends one probe message; with `wait_ready`, retries
/// both until they succeed. Returns the wall-clock time the probe was accepted.
pub async fn prepare(
    producer: &DefaultMQProducer,
    target: &TargetArgs,
    topic_setup: &TopicSetupArgs,
    plan: &SendPlan,
    wait_ready: Option<f64>,
) -> Result<u64> {
    let patience = wait_ready
        .map(|s| positive_secs(s, "--wait-ready"))
        .transpose()?;
    let client = target.client_config();
    retry_until(patience, || async {
        if !topic_setup.no_create {
            super::ensure_topic(&client, &plan.topic, topic_setup.queues).await?;
        }
        let probe = Message::new(
            plan.topic.clone(),
            stamped_body(plan.size, PROBE_RUN_ID, unix_nanos()),
        );
        let result = producer
            .send(probe)
            .await
            .context("sending the probe message")?;
        if result.send_status != SendStatus::SendOk {
            bail!("probe message answered {:?}", result.send_status);
        }
        Ok(unix_nanos())
    })
    .await
}

/// What one sender brings back.
struct SenderOutcome {
    rt: Histogram<u64>,
    errors: Vec<String>,
}

/// Runs the plan's senders on `producer` until the duration or count is spent. Returns the send
/// RT histogram (nanoseconds), up to [`MAX_REPORTED_ERRORS`] distinct failure causes, and the
/// elapsed time.
pub async fn run_senders(
    producer: Arc<DefaultMQProducer>,
    plan: Arc<SendPlan>,
    counters: Arc<Counters>,
) -> Result<(Histogram<u64>, Vec<String>, Duration)> {
    let start = Instant::now();
    let deadline = plan.duration.map(|d| start + d);
    let pacer = match plan.rate {
        Some(rate) => Some(Arc::new(
            Pacer::start(rate, deadline.map(Instant::into_std))
                .context("starting the pacer thread")?,
        )),
        None => None,
    };
    let quota = Arc::new(Quota::new(plan.count));
    let mut senders = JoinSet::new();
    for _ in 0..plan.producers {
        let ctx = SenderContext {
            producer: Arc::clone(&producer),
            plan: Arc::clone(&plan),
            counters: Arc::clone(&counters),
            pacer: pacer.clone(),
            quota: Arc::clone(&quota),
            deadline,
        };
        senders.spawn(ctx.run());
    }
    let mut rt = new_histogram()?;
    let mut errors = Vec::new();
    while let Some(joined) = senders.join_next().await {
        let outcome = joined.context("a sender task failed")??;
        rt.add(&outcome.rt).context("merging histograms")?;
        for e in outcome.errors {
            remember_error(&mut errors, e);
        }
    }
    Ok((rt, errors, start.elapsed()))
}

fn remember_error(errors: &mut Vec<String>, e: String) {
    if errors.len() < MAX_REPORTED_ERRORS && !errors.contains(&e) {
        errors.push(e);
    }
}

struct SenderContext {
    producer: Arc<DefaultMQProducer>,
    plan: Arc<SendPlan>,
    counters: Arc<Counters>,
    pacer: Option<Arc<Pacer>>,
    quota: Arc<Quota>,
    deadline: Option<Instant>,
}

impl SenderContext {
    /// Claims the next `batch` messages (quota, schedule, deadline as of `now`); 0 when the run
    /// is over.
    async fn next_turn(&self, now: Instant) -> u64 {
        if self.deadline.is_some_and(|d| now >= d) {
            return 0;
        }
        let n = self.quota.take(self.plan.batch as u64);
        if n == 0 {
            return 0;
        }
        if let Some(pacer) = &self.pacer
            && !pacer.acquire(n).await
        {
            return 0;
        }
        n
    }

    fn account(&self, outcome: &std::result::Result<SendResult, ClientError>, n: u64) -> bool {
        match outcome {
            Ok(r) if r.send_status == SendStatus::SendOk => {
                self.counters.add_ok(n, n * self.plan.size as u64);
                true
            }
            _ => {
                self.counters.add_failed(n);
                false
            }
        }
    }

    async fn run(self) -> Result<SenderOutcome> {
        let mut rt = new_histogram()?;
        let mut errors = Vec::new();
        let mut inflight = JoinSet::new();
        // The clock is read once between two sends (a sync sender's previous send ended then),
        // and again only after a wait for the pacer.
        let mut now = Instant::now();
        loop {
            let n = self.next_turn(now).await;
            if n == 0 {
                break;
            }
            let issued = if self.pacer.is_some() {
                Instant::now()
            } else {
                now
            };
            let outcome = match self.plan.mode {
                SendMode::Sync => self.producer.send(self.plan.message()).await,
                SendMode::Batch => {
                    let msgs = (0..n).map(|_| self.plan.message()).collect();
                    self.producer.send_batch(msgs).await
                }
                SendMode::Oneway => {
                    let result = self.producer.send_oneway(self.plan.message()).await;
                    now = Instant::now();
                    record_nanos(&mut rt, nanos_between(issued, now));
                    match result {
                        Ok(()) => self.counters.add_ok(1, self.plan.size as u64),
                        Err(e) => {
                            self.counters.add_failed(1);
                            remember_error(&mut errors, e.to_string());
                        }
                    }
                    continue;
                }
                SendMode::Async => {
                    let fut = self.producer.send_async(self.plan.message());
                    inflight.spawn(async move { (fut.await, elapsed_nanos(issued)) });
                    if inflight.len() >= self.plan.inflight {
                        self.reap_one(&mut inflight, &mut rt, &mut errors).await;
                    }
                    now = Instant::now();
                    continue;
                }
            };
            now = Instant::now();
            record_nanos(&mut rt, nanos_between(issued, now));
            if !self.account(&outcome, n) {
                remember_error(&mut errors, describe(&outcome));
            }
        }
        while !inflight.is_empty() {
            self.reap_one(&mut inflight, &mut rt, &mut errors).await;
        }
        Ok(SenderOutcome { rt, errors })
    }

    async fn reap_one(
        &self,
        inflight: &mut JoinSet<(std::result::Result<SendResult, ClientError>, u64)>,
        rt: &mut Histogram<u64>,
        errors: &mut Vec<String>,
    ) {
        match inflight.join_next().await {
            Some(Ok((outcome, nanos))) => {
                record_nanos(rt, nanos);
                if !self.account(&outcome, 1) {
                    remember_error(errors, describe(&outcome));
                }
            }
            Some(Err(e)) => {
                self.counters.add_failed(1);
                remember_error(errors, format!("async send task failed: {e}"));
            }
            None => {}
        }
    }
}

fn describe(outcome: &std::result::Result<SendResult, ClientError>) -> String {
    match outcome {
        Ok(r) => format!("send status {:?}", r.send_status),
        Err(e) => e.to_string(),
    }
}

fn elapsed_nanos(since: Instant) -> u64 {
    nanos_between(since, Instant::now())
}

fn nanos_between(from: Instant, to: Instant) -> u64 {
    nanos_of(to.saturating_duration_since(from))
}

pub async fn run(args: ProduceArgs) -> Result<()> {
    let plan = Arc::new(SendPlan::new(
        &args.target.topic,
        &args.load,
        args.mode,
        args.batch,
        args.inflight,
        new_run_id(),
    )?);
    let interval = args.target.report_interval()?;
    let producer = Arc::new(start_producer(&args.target, &args.load).await?);
    let ready = prepare(
        &producer,
        &args.target,
        &args.topic_setup,
        &plan,
        args.load.wait_ready,
    )
    .await;
    let ready_unix_nanos = match ready {
        Ok(t) => t,
        Err(e) => {
            producer.shutdown().await;
            return Err(e.context("the broker did not accept the probe message"));
        }
    };
    let counters = Arc::new(Counters::default());
    let progress = Progress::start("produce", Arc::clone(&counters), interval, plan.planned());
    let outcome = run_senders(
        Arc::clone(&producer),
        Arc::clone(&plan),
        Arc::clone(&counters),
    )
    .await;
    progress.finish();
    producer.shutdown().await;
    let (rt, errors, elapsed) = outcome?;
    let mut extra = serde_json::Map::new();
    extra.insert("ready_unix_nanos".to_owned(), json!(ready_unix_nanos));
    if !errors.is_empty() {
        extra.insert("errors".to_owned(), json!(errors));
    }
    let report = Report {
        command: "produce",
        settings: plan.settings(),
        elapsed,
        messages: counters.ok(),
        failed: counters.failed(),
        bytes: counters.bytes(),
        latency: super::report::LatencySummary::of(&rt).map(|s| ("send_rt", s)),
        extra,
    };
    report.print(args.target.json);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load() -> LoadArgs {
        LoadArgs {
            producers: 4,
            size: 1024,
            rate: None,
            duration: None,
            count: None,
            group: DEFAULT_BENCH_PRODUCER_GROUP.to_owned(),
            timeout_ms: DEFAULT_SEND_TIMEOUT_MS,
            wait_ready: None,
            deliver_after_ms: None,
        }
    }

    #[test]
    fn a_timer_plan_stamps_the_due_time_it_asks_for() {
        let mut l = load();
        l.deliver_after_ms = Some(5_000);
        let plan = SendPlan::new("T", &l, SendMode::Sync, 1, 1, 9).expect("plan");
        let before_ms = unix_nanos() / NANOS_PER_MILLI;
        let msg = plan.message();
        let due_ms: u64 = msg
            .properties()
            .get("TIMER_DELIVER_MS")
            .expect("a timer message")
            .parse()
            .expect("a number");
        assert!((before_ms + 5_000..=before_ms + 6_000).contains(&due_ms));
        let stamp = super::super::stamp::read_stamp(&msg.body).expect("stamped");
        assert_eq!(stamp.sent_unix_nanos, due_ms * NANOS_PER_MILLI);
        let plain = SendPlan::new("T", &load(), SendMode::Sync, 1, 1, 9).expect("plan");
        assert!(
            plain
                .message()
                .properties()
                .get("TIMER_DELIVER_MS")
                .is_none()
        );
    }

    #[test]
    fn plan_defaults_to_a_ten_second_run_and_ignores_batch_outside_batch_mode() {
        let plan = SendPlan::new("T", &load(), SendMode::Sync, 32, 1, 9).expect("plan");
        assert_eq!(plan.duration, Some(Duration::from_secs(10)));
        assert_eq!(plan.batch, 1);
        let plan = SendPlan::new("T", &load(), SendMode::Batch, 32, 1, 9).expect("plan");
        assert_eq!(plan.batch, 32);
        let msg = plan.message();
        assert_eq!(msg.body.len(), 1024);
        assert_eq!(
            super::super::stamp::read_stamp(&msg.body).map(|s| s.run_id),
            Some(9)
        );
    }

    #[test]
    fn plan_refuses_bad_flags() {
        let mut l = load();
        l.size = 0;
        assert!(SendPlan::new("T", &l, SendMode::Sync, 1, 1, 0).is_err());
        let mut l = load();
        l.size = MAX_MESSAGE_SIZE;
        assert!(SendPlan::new("T", &l, SendMode::Batch, 2, 1, 0).is_err());
        let mut l = load();
        l.producers = 0;
        assert!(SendPlan::new("T", &l, SendMode::Sync, 1, 1, 0).is_err());
        let mut l = load();
        l.rate = Some(-1.0);
        assert!(SendPlan::new("T", &l, SendMode::Sync, 1, 1, 0).is_err());
        let mut l = load();
        l.count = Some(0);
        assert!(SendPlan::new("T", &l, SendMode::Sync, 1, 1, 0).is_err());
        assert!(SendPlan::new("T", &load(), SendMode::Async, 1, 0, 0).is_err());
    }

    #[test]
    fn a_count_alone_means_no_deadline() {
        let mut l = load();
        l.count = Some(100);
        let plan = SendPlan::new("T", &l, SendMode::Sync, 1, 1, 0).expect("plan");
        assert_eq!(plan.duration, None);
        assert!(matches!(plan.planned(), Planned::Messages(100)));
    }
}
