//! `comet bench consume`: drain a topic with a push or a pull consumer and measure throughput and
//! born→consumed latency.
//!
//! Throughput is computed over the *active window*, from the first to the last message received,
//! so the consumer's start-up and rebalance (which differ between brokers and are not what a
//! catch-up measurement is about) do not dilute it; the wall time is reported as well.
//!
//! Latency uses the bench stamp at the head of the body when present (nanosecond wall clock of
//! the sender), else the broker's millisecond `bornTimestamp`. It is only meaningful when producer
//! and consumer share a clock, i.e. run on the same machine.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use comet_client::MessageExt;
use comet_client::consumer::pull::{DefaultMQPullConsumer, MAX_PULL_BATCH, PullConsumerConfig};
use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{ConsumeConcurrentlyStatus, ConsumeFromWhere, concurrently_fn};
use comet_client::{MessageQueue, PullStatus};
use hdrhistogram::Histogram;
use serde_json::json;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::report::{
    Counters, LatencySummary, Planned, Progress, Report, new_histogram, record_nanos,
};
use super::stamp::{NANOS_PER_MILLI, read_stamp, unix_nanos};
use super::{TargetArgs, positive_secs};

/// Consumer group of the bench when none is given.
pub const DEFAULT_BENCH_CONSUMER_GROUP: &str = "BENCH_CONSUMER";
/// Messages asked for per pull when `--pull-batch` is not given (the SDK's default).
pub const DEFAULT_PULL_BATCH: i32 = 32;
/// Pause before retrying a pull that failed.
pub const PULL_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Push (the SDK drives pulls and calls a listener) or pull (one task per queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConsumeMode {
    Push,
    Pull,
}

/// Where a group without a stored offset starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FromWhere {
    First,
    Last,
}

impl FromWhere {
    pub fn to_protocol(self) -> ConsumeFromWhere {
        match self {
            FromWhere::First => ConsumeFromWhere::ConsumeFromFirstOffset,
            FromWhere::Last => ConsumeFromWhere::ConsumeFromLastOffset,
        }
    }

    fn name(self) -> &'static str {
        match self {
            FromWhere::First => "first",
            FromWhere::Last => "last",
        }
    }
}

#[derive(Debug, Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Push or pull consumer.
    #[arg(short = 'm', long, value_enum, default_value_t = ConsumeMode::Push)]
    pub mode: ConsumeMode,
    /// Consumer group.
    #[arg(short = 'g', long, default_value = DEFAULT_BENCH_CONSUMER_GROUP)]
    pub group: String,
    /// Where a group without a stored offset starts.
    #[arg(long, value_enum, default_value_t = FromWhere::Last)]
    pub from_where: FromWhere,
    /// Run length in seconds (default 10 unless --count is given).
    #[arg(short = 'd', long)]
    pub duration: Option<f64>,
    /// Stop after this many messages.
    #[arg(short = 'c', long)]
    pub count: Option<u64>,
    /// Messages asked for per pull request.
    #[arg(long, default_value_t = DEFAULT_PULL_BATCH)]
    pub pull_batch: i32,
}

/// Where received messages are counted and timed; shared by listeners and pull tasks.
pub struct Sink {
    pub counters: Arc<Counters>,
    latency: Mutex<Histogram<u64>>,
    window: Mutex<Option<(Instant, Instant)>>,
    /// Only messages stamped with this run id count (e2e); all messages count when `None`.
    run_id: Option<u32>,
    /// Latencies of messages sent before this wall-clock time are not recorded (warm-up).
    record_after_unix_nanos: AtomicU64,
    target: Option<u64>,
    pub done: Notify,
    /// Messages received before the time their stamp names: timer messages delivered early.
    pub early: AtomicU64,
}

impl Sink {
    pub fn new(
        run_id: Option<u32>,
        record_after_unix_nanos: u64,
        target: Option<u64>,
    ) -> Result<Self> {
        Ok(Sink {
            counters: Arc::new(Counters::default()),
            latency: Mutex::new(new_histogram()?),
            window: Mutex::new(None),
            run_id,
            record_after_unix_nanos: AtomicU64::new(record_after_unix_nanos),
            target,
            done: Notify::new(),
            early: AtomicU64::new(0),
        })
    }

    /// Counts and times `msgs`, received now.
    pub fn on_messages(&self, msgs: &[MessageExt]) {
        let now_nanos = unix_nanos();
        let now = Instant::now();
        let mut counted = 0u64;
        let mut bytes = 0u64;
        let mut samples = Vec::with_capacity(msgs.len());
        let mut early = 0u64;
        let record_after = self.record_after_unix_nanos.load(Ordering::Relaxed);
        for msg in msgs {
            let stamp = read_stamp(&msg.body);
            let sent_nanos = match (self.run_id, stamp) {
                (Some(id), Some(s)) if s.run_id == id => s.sent_unix_nanos,
                (Some(_), _) => continue,
                (None, Some(s)) => s.sent_unix_nanos,
                (None, None) => u64::try_from(msg.born_timestamp).unwrap_or(0) * NANOS_PER_MILLI,
            };
            counted += 1;
            bytes += msg.body.len() as u64;
            if sent_nanos >= record_after && sent_nanos > 0 {
                match now_nanos.checked_sub(sent_nanos) {
                    Some(latency) => samples.push(latency),
                    None => early += 1,
                }
            }
        }
        if counted == 0 {
            return;
        }
        if early > 0 {
            self.early.fetch_add(early, Ordering::Relaxed);
        }
        {
            let mut hist = self.latency.lock().unwrap_or_else(PoisonError::into_inner);
            for s in samples {
                record_nanos(&mut hist, s);
            }
        }
        {
            let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
            let first = window.map_or(now, |(first, _)| first);
            *window = Some((first, now));
        }
        self.counters.add_ok(counted, bytes);
        if self.target.is_some_and(|t| self.counters.ok() >= t) {
            self.done.notify_one();
        }
    }

    /// From now on, record latencies only of messages sent at or after `unix_nanos`.
    pub fn record_after(&self, unix_nanos: u64) {
        self.record_after_unix_nanos
            .store(unix_nanos, Ordering::Relaxed);
    }

    /// The latency histogram so far.
    pub fn latency(&self) -> Histogram<u64> {
        self.latency
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Time from the first to the last message received (zero before two receptions).
    pub fn active_window(&self) -> Duration {
        self.window
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .map_or(Duration::ZERO, |(first, last)| last - first)
    }

    /// Whether the target count has been reached.
    pub fn reached_target(&self) -> bool {
        self.target.is_some_and(|t| self.counters.ok() >= t)
    }
}

/// Starts a push consumer of `topic` for `group` that feeds `sink`.
pub async fn start_push(
    target: &TargetArgs,
    group: &str,
    from_where: FromWhere,
    pull_batch: i32,
    sink: Arc<Sink>,
) -> Result<DefaultMQPushConsumer> {
    let mut config = PushConsumerConfig::new(group);
    config.client = target.client_config();
    config.consume_from_where = from_where.to_protocol();
    config.pull_batch_size = pull_batch;
    let consumer = DefaultMQPushConsumer::new(config);
    consumer
        .subscribe(&target.topic, "*")
        .await
        .with_context(|| format!("subscribing to {}", target.topic))?;
    consumer.register_message_listener(concurrently_fn(move |msgs, _ctx| {
        sink.on_messages(msgs);
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }));
    consumer
        .start()
        .await
        .context("starting the push consumer")?;
    Ok(consumer)
}

/// Starts a pull consumer with one long-polling task per queue feeding `sink`; the tasks stop when
/// `stop` is set (and are aborted when the set is dropped).
async fn start_pull(
    args: &ConsumeArgs,
    sink: Arc<Sink>,
    stop: Arc<AtomicBool>,
) -> Result<(Arc<DefaultMQPullConsumer>, JoinSet<()>)> {
    let mut config = PullConsumerConfig::new(args.group.clone(), args.target.client_config());
    config.register_topics = vec![args.target.topic.clone()];
    let consumer = Arc::new(DefaultMQPullConsumer::new(config));
    consumer
        .start()
        .await
        .context("starting the pull consumer")?;
    let queues = consumer
        .fetch_subscribe_message_queues(&args.target.topic)
        .await
        .with_context(|| format!("fetching the queues of {}", args.target.topic))?;
    if queues.is_empty() {
        bail!("topic {} has no readable queue", args.target.topic);
    }
    let mut tasks = JoinSet::new();
    for mq in queues {
        let offset = start_offset(&consumer, &mq, args.from_where).await?;
        let (consumer, sink, stop) = (Arc::clone(&consumer), Arc::clone(&sink), Arc::clone(&stop));
        let batch = args.pull_batch;
        tasks.spawn(async move { pull_loop(consumer, mq, offset, batch, sink, stop).await });
    }
    Ok((consumer, tasks))
}

/// The group's stored offset of `mq`, or the queue's first or last offset when none is stored.
async fn start_offset(
    consumer: &DefaultMQPullConsumer,
    mq: &MessageQueue,
    from_where: FromWhere,
) -> Result<i64> {
    let stored = consumer
        .fetch_consume_offset(mq, true)
        .await
        .with_context(|| format!("fetching the offset of {mq}"))?;
    if stored >= 0 {
        return Ok(stored);
    }
    let offset = match from_where {
        FromWhere::First => consumer.min_offset(mq).await,
        FromWhere::Last => consumer.max_offset(mq).await,
    };
    offset.with_context(|| format!("fetching the bounds of {mq}"))
}

async fn pull_loop(
    consumer: Arc<DefaultMQPullConsumer>,
    mq: MessageQueue,
    mut offset: i64,
    batch: i32,
    sink: Arc<Sink>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Relaxed) {
        match consumer
            .pull_block_if_not_found(&mq, "*", offset, batch)
            .await
        {
            Ok(result) => {
                if result.pull_status == PullStatus::Found {
                    sink.on_messages(&result.msg_found_list);
                }
                offset = result.next_begin_offset;
                if let Err(e) = consumer.update_consume_offset(&mq, offset) {
                    tracing::warn!(queue = %mq, error = %e, "recording the consume offset failed");
                }
            }
            Err(e) => {
                sink.counters.add_failed(1);
                tracing::warn!(queue = %mq, error = %e, "pull failed");
                tokio::time::sleep(PULL_RETRY_PAUSE).await;
            }
        }
    }
}

/// Waits until `sink` reached its target, the deadline passed, or Ctrl-C.
pub async fn wait_for_end(sink: &Sink, deadline: Option<Instant>) {
    let far = Instant::now() + Duration::from_secs(u64::from(u32::MAX));
    let until = deadline.unwrap_or(far);
    while !sink.reached_target() {
        tokio::select! {
            _ = sink.done.notified() => {}
            _ = tokio::time::sleep_until(until) => return,
            _ = tokio::signal::ctrl_c() => return,
        }
    }
}

pub async fn run(args: ConsumeArgs) -> Result<()> {
    if !(1..=MAX_PULL_BATCH).contains(&args.pull_batch) {
        bail!("--pull-batch must be between 1 and {MAX_PULL_BATCH}");
    }
    if args.count == Some(0) {
        bail!("--count must be positive");
    }
    let duration = match (args.duration, args.count) {
        (Some(d), _) => Some(positive_secs(d, "--duration")?),
        (None, Some(_)) => None,
        (None, None) => Some(positive_secs(super::DEFAULT_DURATION_SECS, "--duration")?),
    };
    let interval = args.target.report_interval()?;
    let sink = Arc::new(Sink::new(None, 0, args.count)?);
    let planned = match (args.count, duration) {
        (Some(n), None) => Planned::Messages(n),
        (_, Some(d)) => Planned::Duration(d),
        (None, None) => Planned::Messages(0),
    };
    let started = Instant::now();
    let progress = Progress::start("consume", Arc::clone(&sink.counters), interval, planned);
    let deadline = duration.map(|d| started + d);
    match args.mode {
        ConsumeMode::Push => {
            let consumer = start_push(
                &args.target,
                &args.group,
                args.from_where,
                args.pull_batch,
                Arc::clone(&sink),
            )
            .await?;
            wait_for_end(&sink, deadline).await;
            consumer.shutdown().await;
        }
        ConsumeMode::Pull => {
            let stop = Arc::new(AtomicBool::new(false));
            let (consumer, mut tasks) =
                start_pull(&args, Arc::clone(&sink), Arc::clone(&stop)).await?;
            wait_for_end(&sink, deadline).await;
            stop.store(true, Ordering::Relaxed);
            // Held long polls would keep the tasks for up to the suspend time: abort them.
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
            consumer.shutdown().await;
        }
    }
    let wall = started.elapsed();
    progress.finish();
    let mut extra = serde_json::Map::new();
    extra.insert("wall_secs".to_owned(), json!(wall.as_secs_f64()));
    let report = Report {
        command: "consume",
        settings: json!({
            "topic": args.target.topic,
            "mode": match args.mode { ConsumeMode::Push => "push", ConsumeMode::Pull => "pull" },
            "group": args.group,
            "from_where": args.from_where.name(),
            "pull_batch": args.pull_batch,
            "count": args.count,
            "duration_secs": duration.map(|d| d.as_secs_f64()),
        }),
        elapsed: sink.active_window(),
        messages: sink.counters.ok(),
        failed: sink.counters.failed(),
        bytes: sink.counters.bytes(),
        latency: LatencySummary::of(&sink.latency()).map(|s| ("e2e_latency", s)),
        extra,
    };
    report.print(args.target.json);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::stamp::stamped_body;

    fn msg(body: bytes::Bytes, born_ms: i64) -> MessageExt {
        let mut m = MessageExt::new("T", body);
        m.born_timestamp = born_ms;
        m
    }

    #[tokio::test]
    async fn sink_counts_only_its_run_and_skips_warm_up_latencies() {
        let now = unix_nanos();
        let sink = Sink::new(Some(42), now - 1_000_000_000, Some(3)).expect("sink");
        sink.on_messages(&[
            msg(stamped_body(100, 42, now - 2_000_000), 0),
            msg(stamped_body(100, 41, now), 0),
            msg(stamped_body(100, 42, now - 5_000_000_000), 0),
            msg(bytes::Bytes::from_static(b"foreign"), 1),
        ]);
        assert_eq!(sink.counters.ok(), 2);
        assert_eq!(sink.counters.bytes(), 200);
        let hist = sink.latency();
        // Only the first message is past the warm-up; its latency is at least the 2 ms head start.
        assert_eq!(hist.len(), 1);
        assert!(hist.min() >= 1_990_000, "{}", hist.min());
        assert!(!sink.reached_target());
        sink.on_messages(&[msg(stamped_body(100, 42, now), 0)]);
        assert!(sink.reached_target());
    }

    #[test]
    fn a_message_received_before_its_stamped_time_counts_as_early() {
        let now = unix_nanos();
        let sink = Sink::new(Some(7), 0, None).expect("sink");
        sink.on_messages(&[
            msg(stamped_body(100, 7, now + 60_000_000_000), 0),
            msg(stamped_body(100, 7, now - 1_000_000), 0),
        ]);
        assert_eq!(sink.counters.ok(), 2);
        assert_eq!(sink.early.load(Ordering::Relaxed), 1);
        assert_eq!(sink.latency().len(), 1, "an early one has no latency");
    }

    #[test]
    fn sink_without_run_id_falls_back_to_born_timestamp() {
        let sink = Sink::new(None, 0, None).expect("sink");
        let born_ms = i64::try_from(unix_nanos() / NANOS_PER_MILLI).expect("ms") - 3;
        sink.on_messages(&[msg(bytes::Bytes::from_static(b"plain"), born_ms)]);
        assert_eq!(sink.counters.ok(), 1);
        assert!(sink.latency().min() >= 2_000_000);
    }
}
