//! The official RocketMQ 5.x Rust SDK (crate `rocketmq` 5.0.0) against a gRPC endpoint: Comet's
//! or Apache RocketMQ's proxy.
//!
//!     rust-sdk ENDPOINT TOPIC COUNT MODE [--tls] [--delay-ms N] [--group NAME] [--deadline-s N]
//!
//! Modes:
//! - `produce`: COUNT normal messages, body `rust-sdk-body-i`, tag `TagA`, keys `key-i` and
//!   `k2-i`, property `seq=i`; prints `SENT i MESSAGE_ID` for every receipt.
//! - `produce-fifo`: the same, all in message group `--group` (default `RustSdkGroup`).
//! - `produce-delay`: the same, each due `--delay-ms` (default 3000) after sending; the SDK
//!   carries whole seconds, so the due time is rounded up to the next second and printed in
//!   milliseconds: `SENT i MESSAGE_ID DUE_MS`.
//! - `simple-consume`: a SimpleConsumer of group `--group` (default `RustSdkSimpleGroup`)
//!   receives (tag `TagA`) and acks every message, printing one JSON line per receipt:
//!   `RECV {"id":..,"body":..,"tag":..,"keys":[..],"attempt":..,"properties":{..}}`. It exits 0
//!   once COUNT distinct messages were acked, 1 when `--deadline-s` (default 60) passes first.
//!
//! `--tls` asks the SDK for an https connection. The SDK gives its gRPC channel no TLS settings,
//! and the connection fails against both Apache's proxy and Comet, so the suite runs plaintext.
//!
//! The SDK logs to stderr; everything the checkers read goes to stdout.

use std::collections::{HashMap, HashSet};
use std::error::Error;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rocketmq::conf::{ClientOption, ProducerOption, SimpleConsumerOption};
use rocketmq::model::common::{FilterExpression, FilterType};
use rocketmq::model::message::{MessageBuilder, MessageView};
use rocketmq::{Producer, SimpleConsumer};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// The tag of every message produced, and the simple consumer's filter.
const TAG: &str = "TagA";

/// How many receive calls may fail one after the other before the simple consumer gives up.
const MAX_FAILED_RECEIVES: usize = 10;

/// What the command line asked for.
struct Args {
    endpoint: String,
    topic: String,
    count: usize,
    mode: String,
    tls: bool,
    delay_ms: u64,
    group: Option<String>,
    deadline: Duration,
}

fn parse_args() -> Result<Args> {
    let mut argv = std::env::args().skip(1);
    let usage = "usage: rust-sdk ENDPOINT TOPIC COUNT MODE [--tls] [--delay-ms N] [--group NAME] [--deadline-s N]";
    let mut positional = || argv.next().ok_or(usage);
    let endpoint = positional()?;
    let topic = positional()?;
    let count = positional()?.parse()?;
    let mode = positional()?;
    let mut args = Args {
        endpoint,
        topic,
        count,
        mode,
        tls: false,
        delay_ms: 3000,
        group: None,
        deadline: Duration::from_secs(60),
    };
    let rest: Vec<String> = argv.collect();
    let mut it = rest.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--tls" => args.tls = true,
            "--delay-ms" => args.delay_ms = value()?.parse()?,
            "--group" => args.group = Some(value()?.clone()),
            "--deadline-s" => args.deadline = Duration::from_secs(value()?.parse()?),
            other => return Err(format!("unknown option {other}; {usage}").into()),
        }
    }
    Ok(args)
}

fn client_option(args: &Args) -> ClientOption {
    let mut option = ClientOption::default();
    option.set_access_url(args.endpoint.clone());
    option.set_enable_tls(args.tls);
    option.set_timeout(Duration::from_secs(10));
    option
}

fn now_ms() -> Result<u64> {
    Ok(u64::try_from(
        SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis(),
    )?)
}

/// Sends COUNT numbered messages; `fifo` puts them in one message group, `delay_ms` makes them
/// timer messages.
async fn produce(args: &Args, fifo: bool, delay_ms: Option<u64>) -> Result<()> {
    let mut producer_option = ProducerOption::default();
    producer_option.set_topics(vec![args.topic.clone()]);
    let mut producer = Producer::new(producer_option, client_option(args))?;
    producer.start().await?;
    let group = args
        .group
        .clone()
        .unwrap_or_else(|| "RustSdkGroup".to_string());
    for i in 0..args.count {
        let mut builder = MessageBuilder::builder()
            .set_topic(args.topic.clone())
            .set_tag(TAG)
            .set_keys(vec![format!("key-{i}"), format!("k2-{i}")])
            .set_properties(HashMap::from([("seq", i.to_string())]))
            .set_body(format!("rust-sdk-body-{i}").into_bytes());
        if fifo {
            builder = builder.set_message_group(group.clone());
        }
        let due_ms = match delay_ms {
            Some(delay) => {
                let due_s = (now_ms()? + delay).div_ceil(1000);
                builder = builder.set_delivery_timestamp(i64::try_from(due_s)?);
                Some(due_s * 1000)
            }
            None => None,
        };
        let receipt = producer.send(builder.build()?).await?;
        match due_ms {
            Some(due) => println!("SENT {i} {} {due}", receipt.message_id()),
            None => println!("SENT {i} {}", receipt.message_id()),
        }
    }
    producer.shutdown().await?;
    Ok(())
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn describe(message: &MessageView) -> String {
    let keys: Vec<String> = message.keys().iter().map(|k| json_string(k)).collect();
    let mut props: Vec<(&String, &String)> = message.properties().iter().collect();
    props.sort();
    let props: Vec<String> = props
        .iter()
        .map(|(k, v)| format!("{}:{}", json_string(k), json_string(v)))
        .collect();
    format!(
        "{{\"id\":{},\"body\":{},\"tag\":{},\"keys\":[{}],\"attempt\":{},\"properties\":{{{}}}}}",
        json_string(message.message_id()),
        json_string(&String::from_utf8_lossy(message.body())),
        message.tag().map_or("null".to_string(), json_string),
        keys.join(","),
        message.delivery_attempt(),
        props.join(",")
    )
}

/// Receives and acks until COUNT distinct messages were acked or the deadline passes; returns
/// whether all arrived.
async fn simple_consume(args: &Args) -> Result<bool> {
    let mut option = SimpleConsumerOption::default();
    option.set_topics(vec![args.topic.clone()]);
    option.set_consumer_group(
        args.group
            .clone()
            .unwrap_or_else(|| "RustSdkSimpleGroup".to_string()),
    );
    // The SDK's default long polling (40 s) is kept: it also uses it as the call's deadline, and a
    // proxy refuses a poll whose deadline leaves less than its minimum polling time (5 s).
    let mut consumer = SimpleConsumer::new(option, client_option(args))?;
    consumer.start().await?;
    let filter = FilterExpression::new(FilterType::Tag, TAG);
    let deadline = Instant::now() + args.deadline;
    let mut acked = HashSet::new();
    let mut errors: HashMap<String, usize> = HashMap::new();
    let mut failed_in_a_row = 0;
    while acked.len() < args.count
        && Instant::now() < deadline
        && failed_in_a_row < MAX_FAILED_RECEIVES
    {
        let messages = match consumer
            .receive_with(&args.topic, &filter, 16, Duration::from_secs(30))
            .await
        {
            Ok(messages) => {
                failed_in_a_row = 0;
                messages
            }
            Err(e) => {
                // The SDK turns an empty long poll into an empty list, so an error is a real
                // failure: count it, pause briefly and retry until too many come in a row. The
                // error text ends with the response's headers (a date among them), left out.
                let text = e.to_string();
                let text = text.split(", metadata:").next().unwrap_or_default();
                *errors.entry(text.to_string()).or_default() += 1;
                failed_in_a_row += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        for message in messages {
            println!("RECV {}", describe(&message));
            consumer.ack(&message).await?;
            acked.insert(message.message_id().to_string());
        }
    }
    for (error, n) in &errors {
        eprintln!("rust-sdk: receive failed {n} times: {error}");
    }
    consumer.shutdown().await?;
    eprintln!(
        "rust-sdk: acked {} distinct messages of {}",
        acked.len(),
        args.count
    );
    Ok(acked.len() >= args.count)
}

async fn run(args: &Args) -> Result<bool> {
    match args.mode.as_str() {
        "produce" => produce(args, false, None).await.map(|()| true),
        "produce-fifo" => produce(args, true, None).await.map(|()| true),
        "produce-delay" => produce(args, false, Some(args.delay_ms))
            .await
            .map(|()| true),
        "simple-consume" => simple_consume(args).await,
        other => Err(format!("unknown mode {other}").into()),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let result = match parse_args() {
        Ok(args) => run(&args).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("rust-sdk: {e}");
            ExitCode::FAILURE
        }
    }
}
