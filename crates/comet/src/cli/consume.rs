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
use comet_client::consumer::lite::{DefaultLitePullConsumer, LitePullConsumerConfig};
use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{
    ConsumeConcurrentlyStatus, ConsumeFromWhere, MessageListener, MessageQueue,
};
use comet_client::{ClientError, MessageExt, NoRouteReason};
use tokio::sync::{mpsc, oneshot};

use super::{ConnectArgs, format_millis, message_json, parse_time, printable_body};

/// Consumer group of `comet consume` when none is given.
pub const DEFAULT_CLI_GROUP: &str = "COMET_CLI_CONSUMER";
/// How long one poll of the pull mode waits before checking the stop conditions again.
const POLL_SLICE: Duration = Duration::from_millis(500);

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
    /// The end of each queue, as Apache RocketMQ's CONSUME_FROM_LAST_OFFSET: except that a queue
    /// whose first message (offset 0) is still stored and in memory is read from its start, so
    /// a new group on a young topic also reads what was sent before it started.
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
    /// Where a group without committed offsets starts (a group with offsets goes on from them).
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
    /// Messages asked for per pull (Java `pullBatchSize`).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(i32).range(1..=1024))]
    pub pull_batch_size: i32,
    /// Messages one queue may hold in the consumer's cache before its pulls pause (Java
    /// `pullThresholdForQueue`). With a small value and a slow reader of the output, the
    /// backlog stays on the broker instead of in this process.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u16).range(1..))]
    pub pull_threshold_for_queue: u16,
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
    check_topic(&args.connect, &args.topic).await?;
    let rule = StopRule {
        count: args.count,
        idle: (args.idle > 0).then(|| Duration::from_secs(args.idle)),
    };
    match args.mode {
        ConsumeMode::Pull => run_pull(&args, from, timestamp, &rule).await,
        ConsumeMode::Push => run_push(&args, from, timestamp, &rule).await,
    }
}

/// Fails at once for a topic the name servers do not know, instead of a consumer waiting for a
/// route that will not come.
async fn check_topic(connect: &ConnectArgs, topic: &str) -> Result<()> {
    let admin = connect.admin()?;
    let route = admin.topic_route(topic).await;
    admin.shutdown().await;
    match route {
        Ok(_) => Ok(()),
        Err(ClientError::NoRoute {
            reason: NoRouteReason::TopicNotExist,
            namesrv,
            ..
        }) => bail!(
            "topic {topic} does not exist (the name servers {namesrv} do not know it), so there \
             is nothing to consume; `comet topic list` lists the topics"
        ),
        Err(e) => Err(e).with_context(|| format!("reading the route of topic {topic}")),
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
    config.pull_batch_size = args.pull_batch_size;
    config.pull_threshold_for_queue = usize::from(args.pull_threshold_for_queue);
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
    let mut printed = 0usize;
    let mut last_message = tokio::time::Instant::now();
    let signal = crate::wait_for_signal();
    tokio::pin!(signal);
    loop {
        let batch = tokio::select! {
            r = &mut signal => { r?; return consumer.commit_sync().await.map_err(Into::into); }
            r = consumer.poll_batch(POLL_SLICE) => r?,
        };
        let Some(batch) = batch else {
            if let Some(idle) = rule.idle
                && last_message.elapsed() >= idle
            {
                consumer.commit_sync().await?;
                if printed == 0 {
                    bail!(no_messages(idle));
                }
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

/// The failure of an `--idle` run that printed nothing (it exits non-zero, like `grep` finding
/// nothing, so a script can tell an empty read from a read).
fn no_messages(idle: Duration) -> String {
    format!(
        "no messages: none arrived within --idle {} s (the group's offsets are unchanged)",
        idle.as_secs()
    )
}

/// A message handed from the push listener to the printer. The listener waits for `printed`
/// before it reports the message consumed, so the group commits only what reached stdout.
struct Delivery {
    msg: MessageExt,
    queue: MessageQueue,
    printed: oneshot::Sender<()>,
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
    config.pull_batch_size = args.pull_batch_size;
    config.pull_threshold_for_queue = i64::from(args.pull_threshold_for_queue);
    // One listener call of one message at a time: messages of a queue reach the printer in
    // queue order, so what was printed of a queue is a run of offsets from where it started.
    config.consume_thread_min = 1;
    config.consume_thread_max = 1;
    config.consume_message_batch_max_size = 1;
    config.enable_msg_trace = args.trace;
    config.custom_trace_topic.clone_from(&args.trace_topic);
    let consumer = DefaultMQPushConsumer::new(config);
    consumer.subscribe(&args.topic, &args.tags).await?;
    let (tx, rx) = mpsc::channel::<Delivery>(1);
    consumer.register_message_listener(MessageListener::concurrently_async(move |msgs, ctx| {
        let tx = tx.clone();
        async move {
            for msg in msgs {
                let (printed, was_printed) = oneshot::channel();
                let delivery = Delivery {
                    msg,
                    queue: ctx.message_queue.clone(),
                    printed,
                };
                if tx.send(delivery).await.is_err() || was_printed.await.is_err() {
                    // The printer has stopped: the message was not printed, so this call never
                    // reports it consumed. It stays in the queue's cache, which keeps the
                    // group's committed offset below it; shutdown abandons the call.
                    std::future::pending::<()>().await;
                }
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    }));
    consumer
        .start()
        .await
        .context("starting the push consumer")?;
    let (outcome, printed) = print_deliveries(rx, args.connect.json, rule).await;
    // The last printed message's listener call may still be on its way to recording its
    // offset; record the printed ends here so the shutdown's commit includes them. Only ever
    // forward: a queue's offset cannot pass a message that was not printed.
    if let Some(store) = consumer.offset_store() {
        for (queue, next_offset) in &printed.next_offsets {
            store.update_offset(queue, *next_offset, true);
        }
    }
    consumer.shutdown().await;
    outcome?;
    printed.report_if_none(rule)
}

/// What the printer printed: per queue, the offset after the last printed message.
#[derive(Default)]
struct Printed {
    count: usize,
    next_offsets: HashMap<MessageQueue, i64>,
    /// The run ended because `--idle` passed without a message.
    idle_ended: bool,
}

impl Printed {
    fn record(&mut self, queue: MessageQueue, queue_offset: i64) {
        self.count += 1;
        let next = self.next_offsets.entry(queue).or_insert(queue_offset + 1);
        *next = (*next).max(queue_offset + 1);
    }

    /// An `--idle` run that printed nothing says so, and fails like `grep` finding nothing.
    fn report_if_none(&self, rule: &StopRule) -> Result<()> {
        match rule.idle {
            Some(idle) if self.idle_ended && self.count == 0 => bail!(no_messages(idle)),
            _ => Ok(()),
        }
    }
}

/// Prints deliveries until the stop rule, the idle time or a signal ends the run.
async fn print_deliveries(
    mut rx: mpsc::Receiver<Delivery>,
    json: bool,
    rule: &StopRule,
) -> (Result<()>, Printed) {
    let mut printed = Printed::default();
    let signal = crate::wait_for_signal();
    tokio::pin!(signal);
    let outcome = loop {
        let next = async {
            match rule.idle {
                Some(idle) => tokio::time::timeout(idle, rx.recv()).await.ok(),
                None => Some(rx.recv().await),
            }
        };
        tokio::select! {
            r = &mut signal => break r,
            received = next => match received {
                Some(Some(delivery)) => {
                    print_message(&delivery.msg, json);
                    printed.record(delivery.queue, delivery.msg.queue_offset);
                    // The listener may report it consumed only now that it is on stdout.
                    let _ = delivery.printed.send(());
                    if rule.done(printed.count) {
                        break Ok(());
                    }
                }
                // Idle for too long.
                None => {
                    printed.idle_ended = true;
                    break Ok(());
                }
                // The consumer stopped.
                Some(None) => break Ok(()),
            },
        }
    };
    // Closing the channel stops every later listener call before it prints.
    drop(rx);
    (outcome, printed)
}
