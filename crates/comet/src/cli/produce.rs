//! `comet produce`: send messages to a topic and print where each one was stored.
//!
//! The body is `--body` (the same text for every message, with `{i}` replaced by the message's
//! index) or, with `--size`, a generated body of that many bytes. Sends are synchronous, one at a
//! time, so the printed order is the send order and a failure stops the run with its cause.

use anyhow::{Context, Result, bail};
use clap::Args;
use comet_client::Message;
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_protocol::limits::MAX_MESSAGE_SIZE;

use super::{ConnectArgs, Table};

/// Producer group of `comet produce` when none is given.
pub const DEFAULT_CLI_PRODUCER_GROUP: &str = "COMET_CLI_PRODUCER";
/// Body of a message when neither `--body` nor `--size` is given.
pub const DEFAULT_BODY: &str = "Hello Comet {i}";

#[derive(Debug, Args)]
pub struct ProduceArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Topic to send to.
    pub topic: String,
    /// Message body; `{i}` is replaced by the message index.
    #[arg(long, conflicts_with = "size")]
    pub body: Option<String>,
    /// Generate bodies of this many bytes instead of --body.
    #[arg(long)]
    pub size: Option<usize>,
    /// Number of messages.
    #[arg(long, default_value_t = 1)]
    pub count: usize,
    /// Tags of every message.
    #[arg(long)]
    pub tags: Option<String>,
    /// Keys of every message (space- or comma-separated); `{i}` is replaced by the index.
    #[arg(long)]
    pub keys: Option<String>,
    /// Delay level: 1 = 1 s ... 18 = 2 h with a broker's default `messageDelayLevel`; a level
    /// the brokers do not have is refused (a broker would deliver it at its highest level).
    #[arg(long, conflicts_with_all = ["deliver_at", "delay_ms"],
        value_parser = clap::value_parser!(i32).range(1..))]
    pub delay_level: Option<i32>,
    /// Deliver at this time, in ms since the epoch (a timer message: TIMER_DELIVER_MS).
    #[arg(long, conflicts_with = "delay_ms")]
    pub deliver_at: Option<i64>,
    /// Deliver this many ms after the broker receives each message (a timer message:
    /// TIMER_DELAY_MS).
    #[arg(long)]
    pub delay_ms: Option<i64>,
    /// Producer group.
    #[arg(short = 'g', long, default_value = DEFAULT_CLI_PRODUCER_GROUP)]
    pub group: String,
    /// Record message trace (Pub records in the trace topic, see `comet msg trace`).
    #[arg(long)]
    pub trace: bool,
    /// Trace topic of --trace (default RMQ_SYS_TRACE_TOPIC).
    #[arg(long, requires = "trace")]
    pub trace_topic: Option<String>,
    /// Send every message to this broker (by name) instead of spreading them; needs --queue.
    #[arg(short = 'b', long, requires = "queue")]
    pub broker: Option<String>,
    /// Queue id of --broker to send every message to.
    #[arg(short = 'i', long, requires = "broker")]
    pub queue: Option<i32>,
}

/// The body of message `index`.
fn body_of(args: &ProduceArgs, index: usize) -> Vec<u8> {
    match args.size {
        Some(size) => {
            let pattern = format!("{index}:");
            pattern
                .bytes()
                .chain(std::iter::repeat(b'x'))
                .take(size)
                .collect()
        }
        None => args
            .body
            .as_deref()
            .unwrap_or(DEFAULT_BODY)
            .replace("{i}", &index.to_string())
            .into_bytes(),
    }
}

fn message_of(args: &ProduceArgs, index: usize) -> Message {
    let mut msg = Message::new(args.topic.clone(), body_of(args, index));
    if let Some(tags) = &args.tags {
        msg.set_tags(tags.clone());
    }
    if let Some(keys) = &args.keys {
        let keys = keys.replace("{i}", &index.to_string());
        msg.set_keys(
            keys.split([' ', ','])
                .filter(|k| !k.is_empty())
                .map(str::to_owned),
        );
    }
    if let Some(level) = args.delay_level {
        msg.set_delay_level(level);
    }
    if let Some(at) = args.deliver_at {
        msg.set_deliver_time_ms(at);
    }
    if let Some(delay) = args.delay_ms {
        msg.set_delay_time_ms(delay);
    }
    msg
}

pub async fn run(args: ProduceArgs) -> Result<()> {
    if args.size.is_some_and(|s| s == 0 || s > MAX_MESSAGE_SIZE) {
        bail!("--size must be in 1..={MAX_MESSAGE_SIZE}");
    }
    if let Some(level) = args.delay_level {
        check_delay_level(&args.connect, level).await?;
    }
    let mut config = ProducerConfig::new(args.group.clone(), args.connect.namesrv.clone());
    config.client = args.connect.client_config();
    config.enable_msg_trace = args.trace;
    config.custom_trace_topic.clone_from(&args.trace_topic);
    let producer = DefaultMQProducer::new(config);
    producer.start().await.context("starting the producer")?;
    let outcome = send_all(&producer, &args).await;
    producer.shutdown().await;
    outcome
}

/// Refuses a delay level past the last one of some master's `messageDelayLevel`: the broker
/// would not refuse it but deliver the message at its highest level instead, which is not what
/// was asked for.
async fn check_delay_level(connect: &ConnectArgs, level: i32) -> Result<()> {
    let admin = connect.admin()?;
    let masters = admin
        .master_addrs(None)
        .await
        .context("reading the brokers' delay levels")?;
    for (name, addr) in masters {
        let config = admin
            .broker_config(&addr)
            .await
            .with_context(|| format!("reading the delay levels of broker {name}"))?;
        let levels: Vec<&str> = config
            .get("messageDelayLevel")
            .map(|l| l.split_whitespace().collect())
            .unwrap_or_default();
        let highest = i32::try_from(levels.len()).unwrap_or(i32::MAX);
        if !levels.is_empty() && level > highest {
            bail!(
                "delay level {level} does not exist on broker {name}, whose messageDelayLevel has \
                 {highest} levels; it would deliver the message at its highest level, {highest} \
                 ({}); pass --delay-level {highest} for that, or --delay-ms for another delay",
                levels.last().copied().unwrap_or_default()
            );
        }
    }
    admin.shutdown().await;
    Ok(())
}

async fn send_all(producer: &DefaultMQProducer, args: &ProduceArgs) -> Result<()> {
    let mut table = Table::new(["#", "STATUS", "MSG_ID", "BROKER", "QID", "QUEUE_OFFSET"]);
    for index in 0..args.count {
        let msg = message_of(args, index);
        let sent = match (&args.broker, args.queue) {
            (Some(broker), Some(queue)) => {
                let mq = comet_protocol::body::MessageQueue::new(&args.topic, broker, queue);
                producer.send_to_queue(msg, &mq).await
            }
            _ => producer.send(msg).await,
        };
        let result = sent.with_context(|| format!("sending message {index} to {}", args.topic))?;
        if args.connect.json {
            println!(
                "{}",
                serde_json::json!({
                    "index": index,
                    "sendStatus": format!("{:?}", result.send_status),
                    "msgId": result.msg_id,
                    "offsetMsgId": result.offset_msg_id,
                    "brokerName": result.message_queue.broker_name,
                    "queueId": result.message_queue.queue_id,
                    "queueOffset": result.queue_offset,
                })
            );
        } else {
            table.row([
                index.to_string(),
                format!("{:?}", result.send_status),
                result.msg_id,
                result.message_queue.broker_name,
                result.message_queue.queue_id.to_string(),
                result.queue_offset.to_string(),
            ]);
        }
    }
    if !args.connect.json {
        table.print();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        produce: ProduceArgs,
    }

    fn parse(extra: &[&str]) -> Result<ProduceArgs, clap::Error> {
        let argv = ["comet", "-n", "127.0.0.1:9876", "T"].iter().chain(extra);
        Cli::try_parse_from(argv).map(|c| c.produce)
    }

    #[test]
    fn timer_options_set_the_timer_properties() {
        let args = parse(&["--deliver-at", "1700000000000"]).unwrap();
        let msg = message_of(&args, 0);
        assert_eq!(msg.property("TIMER_DELIVER_MS"), Some("1700000000000"));
        assert_eq!(msg.deliver_time_ms(), Some(1_700_000_000_000));
        let args = parse(&["--delay-ms", "2500"]).unwrap();
        assert_eq!(
            message_of(&args, 0).property("TIMER_DELAY_MS"),
            Some("2500")
        );
        assert!(parse(&["--delay-ms", "1", "--deliver-at", "2"]).is_err());
        assert!(parse(&["--delay-ms", "1", "--delay-level", "2"]).is_err());
    }
}
