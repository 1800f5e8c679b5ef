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
    /// Delay level (1 = 1 s ... 18 = 2 h).
    #[arg(long)]
    pub delay_level: Option<i32>,
    /// Producer group.
    #[arg(short = 'g', long, default_value = DEFAULT_CLI_PRODUCER_GROUP)]
    pub group: String,
    /// Record message trace (Pub records in the trace topic, see `comet msg trace`).
    #[arg(long)]
    pub trace: bool,
    /// Trace topic of --trace (default RMQ_SYS_TRACE_TOPIC).
    #[arg(long, requires = "trace")]
    pub trace_topic: Option<String>,
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
    msg
}

pub async fn run(args: ProduceArgs) -> Result<()> {
    if args.size.is_some_and(|s| s == 0 || s > MAX_MESSAGE_SIZE) {
        bail!("--size must be in 1..={MAX_MESSAGE_SIZE}");
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

async fn send_all(producer: &DefaultMQProducer, args: &ProduceArgs) -> Result<()> {
    let mut table = Table::new(["#", "STATUS", "MSG_ID", "BROKER", "QID", "QUEUE_OFFSET"]);
    for index in 0..args.count {
        let result = producer
            .send(message_of(args, index))
            .await
            .with_context(|| format!("sending message {index} to {}", args.topic))?;
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
