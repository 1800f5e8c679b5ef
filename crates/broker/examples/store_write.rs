//! Writes a store directory with Comet's [`MessageStore`] for an Apache RocketMQ broker to serve,
//! plus a manifest (JSON lines) of exactly what was written.
//!
//! Why: the opposite direction of `store_dump`. If Apache's broker, started on this directory,
//! recovers it without truncating anything and its consumers read every message back with the
//! queue offsets, bodies, tags, keys and properties listed here — and its index finds them by key
//! — then Comet's CommitLog, ConsumeQueue, IndexFile, checkpoint and `config/topics.json` are
//! byte-compatible with the real thing. The messages are deterministic (seeded), cover 3 topics ×
//! 4 queues, several CommitLog segments (so BLANK entries at segment ends), zlib-compressed bodies
//! (sys flag `0x301`, as a 5.x Java producer sends them), batches, non-ASCII property values, and
//! both WAIT values. Every message is stored with the store host the Apache broker will have, so
//! offset message ids decode to that broker.
//!
//! ```text
//! cargo run -p comet-broker --example store_write -- --root <store dir> --store-host 127.0.0.1:10911 \
//!     --manifest <file> [--mapped-file-size 1048576] [--count 2000] [--seed 1]
//! ```
//!
//! The directory must not hold a store yet. Exits 2 on bad arguments, 1 if a put fails.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use comet_broker::config_tables::{TOPICS_FILE, TopicConfigTable, config_path};
use comet_protocol::body::TopicConfig;
use comet_protocol::message::batch::BatchEntry;
use comet_protocol::message::compress::{self, CompressionType, DEFAULT_COMPRESS_LEVEL};
use comet_protocol::message::id::{self, UniqIdGenerator};
use comet_protocol::message::properties::keys;
use comet_protocol::message::{MessageExt, Properties};
use comet_store::{MessageExtBatch, MessageStore, MessageStoreConfig, PutMessageResult};
use serde_json::{Map, Value, json};

/// Topics written; each gets [`QUEUES_PER_TOPIC`] queues.
const TOPICS: [&str; 3] = [
    "CometStoreCompatW0",
    "CometStoreCompatW1",
    "CometStoreCompatW2",
];
/// Queues per topic (also the read/write queue numbers in `topics.json`).
const QUEUES_PER_TOPIC: i32 = 4;
/// Tags cycled through.
const TAGS: [&str; 3] = ["TagA", "TagB", "TagC"];
/// Consecutive messages sharing a tag before the next tag is used.
const TAG_RUN: usize = 12;
/// Default number of messages.
const DEFAULT_COUNT: usize = 2000;
/// Smallest and largest random body; the average (~1.6 KiB) spreads 2,000 messages over several
/// 1 MiB segments.
const MIN_BODY_LEN: usize = 200;
const MAX_BODY_LEN: usize = 3000;
/// Every this many messages, one large compressible body is stored zlib-compressed.
const COMPRESSED_EVERY: usize = 97;
/// Uncompressed size of those bodies (above the Java producer's 4 KiB threshold).
const COMPRESSED_BODY_LEN: usize = 6000;
/// Every this many messages, a batch is stored instead of a single message.
const BATCH_EVERY: usize = 101;
/// Messages per batch.
const BATCH_LEN: usize = 4;
/// Every this many messages, WAIT is `false` instead of `true`.
const WAIT_FALSE_EVERY: usize = 5;
/// Number of distinct shared keys (each on many messages, so index chains get long).
const SHARED_KEYS: usize = 7;
/// Born host of every message (a producer on loopback).
const BORN_HOST: ([u8; 4], u16) = ([127, 0, 0, 1], 45_678);
/// How long to wait for dispatch (ConsumeQueue + index) to catch up before shutdown.
const DISPATCH_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Args {
    root: PathBuf,
    mapped_file_size: Option<usize>,
    store_host: SocketAddr,
    manifest: PathBuf,
    count: usize,
    seed: u64,
}

fn usage() -> &'static str {
    "usage: store_write --root <store dir> --store-host <ip:port> --manifest <file> \
     [--mapped-file-size <bytes>] [--count <n>] [--seed <n>]"
}

fn parse_args() -> Result<Args, String> {
    let mut root = None;
    let mut mapped_file_size = None;
    let mut store_host = None;
    let mut manifest = None;
    let mut count = DEFAULT_COUNT;
    let mut seed = 1u64;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--root" => root = Some(PathBuf::from(value("--root")?)),
            "--manifest" => manifest = Some(PathBuf::from(value("--manifest")?)),
            "--store-host" => {
                let v = value("--store-host")?;
                store_host = Some(
                    v.parse()
                        .map_err(|_| format!("--store-host {v:?} is not ip:port"))?,
                );
            }
            "--mapped-file-size" => {
                let v = value("--mapped-file-size")?;
                mapped_file_size = Some(
                    v.parse()
                        .map_err(|_| format!("--mapped-file-size {v:?} is not a number"))?,
                );
            }
            "--count" => {
                let v = value("--count")?;
                count = v
                    .parse()
                    .map_err(|_| format!("--count {v:?} is not a number"))?;
            }
            "--seed" => {
                let v = value("--seed")?;
                seed = v
                    .parse()
                    .map_err(|_| format!("--seed {v:?} is not a number"))?;
            }
            "-h" | "--help" => return Err(usage().to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{}", usage())),
        }
    }
    let missing = |what: &str| format!("{what} is required\n{}", usage());
    Ok(Args {
        root: root.ok_or_else(|| missing("--root"))?,
        mapped_file_size,
        store_host: store_host.ok_or_else(|| missing("--store-host"))?,
        manifest: manifest.ok_or_else(|| missing("--manifest"))?,
        count,
        seed,
    })
}

/// xorshift64*: deterministic bodies, so a failing run can be reproduced from its seed.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0.max(1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn between(&mut self, lo: usize, hi: usize) -> usize {
        let span = u64::try_from(hi.saturating_sub(lo) + 1).unwrap_or(1);
        lo + usize::try_from(self.next_u64() % span).unwrap_or(0)
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64().to_le_bytes()[0]).collect()
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// What one message is, before it is stored.
struct Planned {
    topic: &'static str,
    queue_id: i32,
    flag: i32,
    /// Uncompressed body (what a consumer must see).
    body: Vec<u8>,
    properties: Properties,
}

fn plan(i: usize, rng: &mut Rng, ids: &UniqIdGenerator) -> Planned {
    let topic = TOPICS[i % TOPICS.len()];
    let queues = usize::try_from(QUEUES_PER_TOPIC).unwrap_or(1);
    let queue_id = i32::try_from((i / TOPICS.len()) % queues).unwrap_or(0);
    let body = if i % COMPRESSED_EVERY == COMPRESSED_EVERY - 1 {
        let mut text = String::with_capacity(COMPRESSED_BODY_LEN);
        while text.len() < COMPRESSED_BODY_LEN {
            let _ = write!(text, "comet-store-compat compressible line {i} ");
        }
        text.truncate(COMPRESSED_BODY_LEN);
        text.into_bytes()
    } else {
        let len = rng.between(MIN_BODY_LEN, MAX_BODY_LEN);
        rng.bytes(len)
    };
    let mut properties = Properties::new();
    properties.insert(keys::TAGS, TAGS[(i / TAG_RUN) % TAGS.len()]);
    properties.insert(keys::KEYS, format!("wk-{i} wshared-{}", i % SHARED_KEYS));
    properties.insert(keys::UNIQ_KEY, ids.next_id());
    let wait = if i.is_multiple_of(WAIT_FALSE_EVERY) {
        "false"
    } else {
        "true"
    };
    properties.insert(keys::WAIT_STORE_MSG_OK, wait);
    properties.insert("cometIdx", i.to_string());
    properties.insert("cometNote", format!("grüße-{i}-✓"));
    Planned {
        topic,
        queue_id,
        flag: i32::try_from(i % 5).unwrap_or(0),
        body,
        properties,
    }
}

fn manifest_line(
    p: &Planned,
    queue_offset: i64,
    commit_log_offset: i64,
    store_host: SocketAddr,
    sys_flag: i32,
    batch: bool,
) -> Value {
    let mut props = Map::new();
    for (k, v) in p.properties.iter() {
        props.insert(k.to_owned(), Value::String(v.to_owned()));
    }
    json!({
        "topic": p.topic,
        "queueId": p.queue_id,
        "queueOffset": queue_offset,
        "commitLogOffset": commit_log_offset,
        "offsetMsgId": id::offset_msg_id(store_host, commit_log_offset),
        "uniqKey": p.properties.get(keys::UNIQ_KEY),
        "tags": p.properties.get(keys::TAGS),
        "keys": p.properties.get(keys::KEYS),
        "flag": p.flag,
        "sysFlag": sys_flag,
        "batch": batch,
        "properties": props,
        "bodyHex": hex(&p.body),
    })
}

fn check(result: &PutMessageResult, what: &str) -> Result<(), String> {
    match &result.append {
        Some(_) if result.is_ok() => Ok(()),
        _ => Err(format!("{what}: put answered {:?}", result.status)),
    }
}

async fn write_messages(
    store: &MessageStore,
    args: &Args,
    out: &mut impl Write,
) -> Result<usize, String> {
    let mut rng = Rng(args.seed);
    let ids = UniqIdGenerator::new();
    let born_host = SocketAddr::from(BORN_HOST);
    let mut written = 0usize;
    let mut i = 0usize;
    while i < args.count {
        let now = comet_protocol::time::now_millis();
        if i % BATCH_EVERY == BATCH_EVERY - 1 && i + BATCH_LEN <= args.count {
            // A batch goes to one queue: every member takes the first one's topic and queue.
            // Batches are never compressed, so members keep small raw bodies.
            let first = plan(i, &mut rng, &ids);
            let (topic, queue_id) = (first.topic, first.queue_id);
            let mut members = vec![first];
            for j in 1..BATCH_LEN {
                let mut p = plan(i + j, &mut rng, &ids);
                p.topic = topic;
                p.queue_id = queue_id;
                members.push(p);
            }
            for m in &mut members {
                m.body.truncate(MAX_BODY_LEN);
            }
            let batch = MessageExtBatch {
                topic: topic.to_owned(),
                queue_id,
                sys_flag: 0,
                born_timestamp: now,
                born_host,
                store_host: args.store_host,
                reconsume_times: 0,
                messages: members
                    .iter()
                    .map(|p| BatchEntry {
                        flag: p.flag,
                        body: Bytes::from(p.body.clone()),
                        properties: p.properties.clone(),
                    })
                    .collect(),
            };
            let result = store.put_messages(batch).await;
            check(&result, &format!("batch at message {i}"))?;
            let append = result.append.ok_or("batch put returned no append result")?;
            let offsets: Vec<i64> = append
                .msg_id
                .split(',')
                .map(|id| id::decode_offset_msg_id(id).map(|(_, off)| off))
                .collect::<Result<_, _>>()
                .map_err(|e| format!("batch msg id {:?}: {e}", append.msg_id))?;
            if offsets.len() != members.len() {
                return Err(format!(
                    "batch of {} returned {} ids",
                    members.len(),
                    offsets.len()
                ));
            }
            for (k, (p, phys)) in members.iter().zip(offsets).enumerate() {
                let queue_offset = append.logics_offset + i64::try_from(k).unwrap_or(0);
                let line = manifest_line(p, queue_offset, phys, args.store_host, 0, true);
                writeln!(out, "{line}").map_err(|e| e.to_string())?;
            }
            written += members.len();
            i += BATCH_LEN;
            continue;
        }

        let p = plan(i, &mut rng, &ids);
        let (stored_body, sys_flag) = if p.body.len() >= compress::DEFAULT_COMPRESS_THRESHOLD {
            let z = compress::compress(CompressionType::Zlib, DEFAULT_COMPRESS_LEVEL, &p.body)
                .map_err(|e| format!("compress message {i}: {e}"))?;
            (z, CompressionType::Zlib.mark(0))
        } else {
            (p.body.clone(), 0)
        };
        let mut msg = MessageExt::new(p.topic, Bytes::from(stored_body));
        msg.queue_id = p.queue_id;
        msg.flag = p.flag;
        msg.sys_flag = sys_flag;
        msg.properties = p.properties.clone();
        msg.born_timestamp = now;
        msg.born_host = born_host;
        msg.store_host = args.store_host;
        let result = store.put_message(msg).await;
        check(&result, &format!("message {i}"))?;
        let append = result.append.ok_or("put returned no append result")?;
        let line = manifest_line(
            &p,
            append.logics_offset,
            append.wrote_offset,
            args.store_host,
            sys_flag,
            false,
        );
        writeln!(out, "{line}").map_err(|e| e.to_string())?;
        written += 1;
        i += 1;
    }
    Ok(written)
}

fn write_topics(args: &Args) -> Result<(), String> {
    let path = config_path(&args.root, TOPICS_FILE);
    let table = TopicConfigTable::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    for topic in TOPICS {
        let mut config = TopicConfig::new(topic);
        config.read_queue_nums = QUEUES_PER_TOPIC;
        config.write_queue_nums = QUEUES_PER_TOPIC;
        table.put(config);
    }
    table
        .persist()
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn run(args: &Args) -> Result<(usize, i64), String> {
    let mut config = MessageStoreConfig::with_root(&args.root);
    if let Some(size) = args.mapped_file_size {
        config.mapped_file_size_commit_log = size;
    }
    let store =
        MessageStore::open(config).map_err(|e| format!("open {}: {e}", args.root.display()))?;
    let file =
        File::create(&args.manifest).map_err(|e| format!("{}: {e}", args.manifest.display()))?;
    let mut out = BufWriter::new(file);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let written = runtime.block_on(write_messages(&store, args, &mut out))?;
    out.flush()
        .map_err(|e| format!("{}: {e}", args.manifest.display()))?;
    let end = store.max_phy_offset();
    if !store.wait_dispatched(end, DISPATCH_WAIT) {
        return Err(format!(
            "dispatch stuck at {} of {end} after {DISPATCH_WAIT:?}",
            store.dispatched_offset()
        ));
    }
    store.shutdown().map_err(|e| format!("shutdown: {e}"))?;
    if args.root.join("abort").exists() {
        return Err("the abort file survived shutdown".to_owned());
    }
    write_topics(args)?;
    Ok((written, end))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("store_write: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok((written, end)) => {
            println!(
                "store_write: {written} messages, CommitLog end {end}, manifest {}",
                args.manifest.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("store_write: {e}");
            ExitCode::FAILURE
        }
    }
}
