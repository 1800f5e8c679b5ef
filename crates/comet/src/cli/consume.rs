//! `comet consume`: print a topic's messages as a consumer group reads them.
//!
//! `--mode push` runs a push consumer (the broker-driven listener model most applications use);
//! `--mode pull` runs the lite pull consumer (the application polls). Both join the group, so
//! the group's offsets advance and `comet group progress` shows the effect; both stop after
//! `--count` messages, after `--idle` seconds without a message, or on Ctrl-C, committing what
//! was printed.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use comet_client::MessageExt;
use comet_client::consumer::lite::{DefaultLitePullConsumer, LitePullConsumerConfig};
use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{ConsumeConcurrentlyStatus, ConsumeFromWhere, concurrently_fn};
use tokio::sync::mpsc;

use super::{ConnectArgs, format_millis, message_json, parse_time, printable_body};

/// Consumer group of `comet consume` when none is given.
pub const DEFAULT_CLI_GROUP: &str = "COMET_CLI_CONSUMER";
/// How long one poll of the pull mode waits before checking the stop conditions again.
const POLL_SLICE: Duration = Duration::from_millis(500);
/// Messages the push listener may hand to the printer before it waits.
const PRINT_QUEUE: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConsumeMode {
    /// A push consumer (listener).
    Push,
    /// A lite pull consumer (poll loop).
    Pull,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StartFrom {
    /// The first message still stored.
    First,
    /// Only messages sent from now on.
    Last,
    /// The first message stored at or after --timestamp.
    Timestamp,
}

#[derive(Debug, Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Topic to read.
    pub topic: String,
    /// Consumer group.
    #[arg(short = 'g', long, default_value = DEFAULT_CLI_GROUP)]
    pub group: String,
    /// Tag expression: `*` or `TagA || TagB`.
    #[arg(long, default_value = "*")]
    pub tags: String,
    /// Push or pull consumer.
    #[arg(long, value_enum, default_value_t = ConsumeMode::Push)]
    pub mode: ConsumeMode,
    /// Where a group without committed offsets starts.
    #[arg(long, value_enum, default_value_t = StartFrom::Last)]
    pub from: StartFrom,
    /// Start time for `--from timestamp` (epoch ms, yyyyMMddHHmmss, or YYYY-MM-DD HH:MM:SS UTC).
    #[arg(long)]
    pub timestamp: Option<String>,
    /// Stop after this many messages (0 = no limit).
    #[arg(long, default_value_t = 0)]
    pub count: usize,
    /// Stop after this many seconds without a message (0 = never).
    #[arg(long, default_value_t = 0)]
    pub idle: u64,
    /// Record message trace (SubBefore/SubAfter records in the trace topic, see
    /// `comet msg trace`).
    #[arg(long)]
    pub trace: bool,
    /// Trace topic of --trace (default RMQ_SYS_TRACE_TOPIC).
    #[arg(long, requires = "trace")]
    pub trace_topic: Option<String>,
}

/// What ends a consume run.
struct StopRule {
    count: usize,
    idle: Option<Duration>,
}

impl StopRule {
    fn done(&self, printed: usize) -> bool {
        self.count > 0 && printed >= self.count
    }
}

pub async fn run(args: ConsumeArgs) -> Result<()> {
    let (from, timestamp) = match (args.from, args.timestamp.as_deref()) {
        (StartFrom::First, _) => (ConsumeFromWhere::ConsumeFromFirstOffset, None),
        (StartFrom::Last, _) => (ConsumeFromWhere::ConsumeFromLastOffset, None),
        (StartFrom::Timestamp, Some(t)) => {
            (ConsumeFromWhere::ConsumeFromTimestamp, Some(parse_time(t)?))
        }
        (StartFrom::Timestamp, None) => bail!("--from timestamp needs --timestamp"),
    };
    let rule = StopRule {
        count: args.count,
        idle: (args.idle > 0).then(|| Duration::from_secs(args.idle)),
    };
    match args.mode {
        ConsumeMode::Pull => run_pull(&args, from, timestamp, &rule).await,
        ConsumeMode::Push => run_push(&args, from, timestamp, &rule).await,
    }
}

fn print_message(msg: &MessageExt, json: bool) {
    if json {
        println!("{}", message_json(msg));
    } else {
        println!(
            "{} queue={}:{} offset={} msgId={} tags={} keys={} stored={} body={}",
            msg.topic,
            msg.store_host,
            msg.queue_id,
            msg.queue_offset,
            msg.msg_id(),
            msg.tags().unwrap_or("-"),
            msg.keys().collect::<Vec<_>>().join(","),
            format_millis(msg.store_timestamp),
            printable_body(&msg.body),
        );
    }
}

async fn run_pull(
    args: &ConsumeArgs,
    from: ConsumeFromWhere,
    timestamp: Option<i64>,
    rule: &StopRule,
) -> Result<()> {
    let mut config = LitePullConsumerConfig::new(args.group.clone(), args.connect.client_config());
    config.consume_from_where = from;
    config.consume_timestamp = timestamp;
    // Offsets are committed explicitly, exactly up to what was printed.
    config.auto_commit = false;
    config.enable_msg_trace = args.trace;
    config.custom_trace_topic.clone_from(&args.trace_topic);
    let consumer = DefaultLitePullConsumer::new(config);
    consumer.subscribe(&args.topic, &args.tags).await?;
    consumer
        .start()
        .await
        .context("starting the lite pull consumer")?;
    let outcome = pull_loop(&consumer, args.connect.json, rule).await;
    consumer.shutdown().await;
    outcome
}

async fn pull_loop(consumer: &DefaultLitePullConsumer, json: bool, rule: &StopRule) -> Result<()> {
    let mut printed = 0;
    let mut last_message = tokio::time::Instant::now();
    let signal = crate::wait_for_signal();
    tokio::pin!(signal);
    loop {
        let batch = tokio::select! {
            r = &mut signal => { r?; return consumer.commit_sync().await.map_err(Into::into); }
            r = consumer.poll_batch(POLL_SLICE) => r?,
        };
        let Some(batch) = batch else {
            if rule.idle.is_some_and(|idle| last_message.elapsed() >= idle) {
                consumer.commit_sync().await?;
                return Ok(());
            }
            continue;
        };
        last_message = tokio::time::Instant::now();
        for msg in &batch.messages {
            print_message(msg, json);
            printed += 1;
            if rule.done(printed) {
                // Commit everything polled, then move this queue back to just past the last
                // printed message so the unprinted rest of the batch is read by the next run.
                consumer.commit_sync().await?;
                let rewind = HashMap::from([(batch.queue.clone(), msg.queue_offset + 1)]);
                consumer.commit_offsets(&rewind, true).await?;
                return Ok(());
            }
        }
    }
}

async fn run_push(
    args: &ConsumeArgs,
    from: ConsumeFromWhere,
    timestamp: Option<i64>,
    rule: &StopRule,
) -> Result<()> {
    let mut config = PushConsumerConfig::new(args.group.clone());
    config.client = args.connect.client_config();
    config.consume_from_where = from;
    config.consume_timestamp = timestamp;
    // One listener call at a time keeps the printed order per queue and makes --count exact.
    config.consume_thread_min = 1;
    config.consume_thread_max = 1;
    config.enable_msg_trace = args.trace;
    config.custom_trace_topic.clone_from(&args.trace_topic);
    let consumer = DefaultMQPushConsumer::new(config);
    consumer.subscribe(&args.topic, &args.tags).await?;
    let (tx, mut rx) = mpsc::channel::<MessageExt>(PRINT_QUEUE);
    consumer.register_message_listener(concurrently_fn(move |msgs, _ctx| {
        for msg in msgs {
            if tx.try_send(msg.clone()).is_err() {
                // The printer is gone (stopping) or far behind: have the broker redeliver.
                return ConsumeConcurrentlyStatus::ReconsumeLater;
            }
        }
        ConsumeConcurrentlyStatus::ConsumeSuccess
    }));
    consumer
        .start()
        .await
        .context("starting the push consumer")?;
    let json = args.connect.json;
    let mut printed = 0;
    let signal = crate::wait_for_signal();
    tokio::pin!(signal);
    let outcome: Result<()> = loop {
        let next = async {
            match rule.idle {
                Some(idle) => tokio::time::timeout(idle, rx.recv()).await.ok(),
                None => Some(rx.recv().await),
            }
        };
        tokio::select! {
            r = &mut signal => break r,
            received = next => match received {
                Some(Some(msg)) => {
                    print_message(&msg, json);
                    printed += 1;
                    if rule.done(printed) {
                        break Ok(());
                    }
                }
                // Idle for too long, or the consumer stopped.
                _ => break Ok(()),
            },
        }
    };
    consumer.shutdown().await;
    outcome
}
