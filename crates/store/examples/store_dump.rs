//! Dumps a store directory through Comet's own read path, as JSON lines, so that a store written
//! by another broker (Apache RocketMQ) can be compared message by message with what its producer
//! was told.
//!
//! Why through [`MessageStore`] and not by parsing files here: the point is to prove that Comet's
//! open/recovery code, ConsumeQueue reader, pull path (`get_message`) and IndexFile lookups accept
//! the other broker's layout. So the directory is opened exactly as the broker opens it (normal
//! recovery when the `abort` file is absent, abnormal when present), every (topic, queue) known to
//! the ConsumeQueue table is pulled from its min to its max offset, and every key asked for is looked
//! up in the index. Nothing is interpreted here beyond decoding; the comparison lives in the caller
//! (`interop/store-compat/compare.py`).
//!
//! ```text
//! cargo run -p comet-store --example store_dump -- --root <store dir> \
//!     [--mapped-file-size 1048576] [--query-keys <file of "topic<TAB>key" lines>] [--out <file>]
//! ```
//!
//! Output lines (one JSON object each, `kind` first):
//! - `recovery`: what start-up recovery found (abnormal or not, where it verified from, ...);
//! - `msg`: one message per ConsumeQueue unit: the unit (`cqCommitLogOffset`, `cqSize`,
//!   `cqTagsCode`), the record's own fields, its properties and its body (hex, decompressed when the
//!   sys flag says so, with `storedBodyLen` the stored length);
//! - `queue`: per queue, min/max offsets and how many units were dumped;
//! - `query`: per asked key, the CommitLog offsets and UNIQ_KEYs the index lookup returned;
//! - `summary`: totals.
//!
//! Exits 2 on bad arguments, 1 if the store cannot be opened or a unit cannot be read back.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use comet_protocol::message::{compress, record};
use comet_store::{GetMessageStatus, MessageStore, MessageStoreConfig};
use serde_json::{Map, Value, json};

/// Messages asked for per `get_message` call (the pull size of a Java consumer).
const PULL_BATCH: usize = 32;
/// Byte budget per `get_message` call.
const PULL_MAX_BYTES: usize = 4 * 1024 * 1024;
/// Largest decompressed body accepted (a stored body is at most 4 MiB; zlib of text can inflate it
/// many times, so allow generous headroom while still bounding memory).
const MAX_DECOMPRESSED_BODY: usize = 64 * 1024 * 1024;
/// Most index hits returned per key lookup.
const QUERY_MAX_NUM: usize = 64;
/// Consumer group name passed to `get_message` (only used for logging there).
const DUMP_GROUP: &str = "comet_store_dump";
/// How long to wait for the reput service to dispatch what recovery left before dumping.
const DISPATCH_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug)]
struct Args {
    root: PathBuf,
    mapped_file_size: Option<usize>,
    query_keys: Option<PathBuf>,
    out: Option<PathBuf>,
}

fn usage() -> &'static str {
    "usage: store_dump --root <store dir> [--mapped-file-size <bytes>] \
     [--query-keys <file of topic<TAB>key lines>] [--out <file>]"
}

fn parse_args() -> Result<Args, String> {
    let mut root = None;
    let mut mapped_file_size = None;
    let mut query_keys = None;
    let mut out = None;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--root" => root = Some(PathBuf::from(value("--root")?)),
            "--mapped-file-size" => {
                let v = value("--mapped-file-size")?;
                mapped_file_size = Some(
                    v.parse()
                        .map_err(|_| format!("--mapped-file-size {v:?} is not a number"))?,
                );
            }
            "--query-keys" => query_keys = Some(PathBuf::from(value("--query-keys")?)),
            "--out" => out = Some(PathBuf::from(value("--out")?)),
            "-h" | "--help" => return Err(usage().to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{}", usage())),
        }
    }
    Ok(Args {
        root: root.ok_or_else(|| format!("--root is required\n{}", usage()))?,
        mapped_file_size,
        query_keys,
        out,
    })
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// One `msg` line for the record `bytes` found through the unit at `queue_offset`.
fn message_line(
    topic: &str,
    queue_id: i32,
    queue_offset: i64,
    unit: Option<comet_store::consume_queue::CqUnit>,
    bytes: &bytes::Bytes,
) -> Result<Value, String> {
    let view = record::decode_record_view(bytes)
        .map_err(|e| format!("{topic}/{queue_id}@{queue_offset}: undecodable record: {e}"))?;
    let msg = record::decode_record(bytes, false)
        .map_err(|e| format!("{topic}/{queue_id}@{queue_offset}: undecodable record: {e}"))?;
    let body = compress::decompress(msg.sys_flag, &msg.body, MAX_DECOMPRESSED_BODY)
        .map_err(|e| format!("{topic}/{queue_id}@{queue_offset}: cannot decompress body: {e}"))?;
    let mut props = Map::new();
    for (k, v) in msg.properties.iter() {
        props.insert(k.to_owned(), Value::String(v.to_owned()));
    }
    Ok(json!({
        "kind": "msg",
        "topic": topic,
        "queueId": queue_id,
        "queueOffset": queue_offset,
        "cqCommitLogOffset": unit.map(|u| u.commit_log_offset),
        "cqSize": unit.map(|u| u.size),
        "cqTagsCode": unit.map(|u| u.tags_code),
        "recordTopic": msg.topic,
        "recordQueueId": msg.queue_id,
        "recordQueueOffset": msg.queue_offset,
        "commitLogOffset": msg.commit_log_offset,
        "storeSize": msg.store_size,
        "magic": view.magic,
        "bodyCrcOk": view.body_crc_matches(),
        "sysFlag": msg.sys_flag,
        "flag": msg.flag,
        "bornTimestamp": msg.born_timestamp,
        "bornHost": msg.born_host.to_string(),
        "storeTimestamp": msg.store_timestamp,
        "storeHost": msg.store_host.to_string(),
        "reconsumeTimes": msg.reconsume_times,
        "offsetMsgId": msg.offset_msg_id(),
        "uniqKey": msg.uniq_key(),
        "tags": msg.tags(),
        "keys": msg.properties.get(comet_protocol::message::properties::keys::KEYS),
        "properties": props,
        "rawProperties": String::from_utf8_lossy(view.properties),
        "storedBodyLen": msg.body.len(),
        "bodyHex": hex(&body),
    }))
}

/// Dumps every queue; returns (messages, problems).
fn dump_queues(store: &MessageStore, out: &mut impl Write) -> Result<(u64, Vec<String>), String> {
    let mut total = 0u64;
    let mut problems = Vec::new();
    for (topic, queue_id, queue) in store.consume_queues().entries() {
        let (min, max) = {
            let q = queue.read();
            (q.min_offset(), q.max_offset())
        };
        let mut offset = min;
        let mut dumped = 0u64;
        while offset < max {
            let result = store.get_message(
                DUMP_GROUP,
                &topic,
                queue_id,
                offset,
                PULL_BATCH,
                PULL_MAX_BYTES,
                None,
            );
            if result.status != GetMessageStatus::Found {
                problems.push(format!(
                    "{topic}/{queue_id}@{offset}: get_message answered {:?} (min {min}, max {max})",
                    result.status
                ));
                if result.next_begin_offset <= offset {
                    break;
                }
                offset = result.next_begin_offset;
                continue;
            }
            for (bytes, &queue_offset) in result.messages.iter().zip(&result.queue_offsets) {
                let unit = queue.read().get(queue_offset);
                match message_line(&topic, queue_id, queue_offset, unit, bytes) {
                    Ok(line) => {
                        writeln!(out, "{line}").map_err(|e| e.to_string())?;
                        dumped += 1;
                    }
                    Err(problem) => problems.push(problem),
                }
            }
            if result.next_begin_offset <= offset {
                problems.push(format!(
                    "{topic}/{queue_id}@{offset}: get_message did not advance"
                ));
                break;
            }
            offset = result.next_begin_offset;
        }
        let line = json!({
            "kind": "queue", "topic": topic, "queueId": queue_id,
            "minOffset": min, "maxOffset": max, "dumped": dumped,
        });
        writeln!(out, "{line}").map_err(|e| e.to_string())?;
        total += dumped;
    }
    Ok((total, problems))
}

/// Looks up every `topic<TAB>key` line of `path` in the index; returns the number of lookups.
fn dump_queries(store: &MessageStore, path: &PathBuf, out: &mut impl Write) -> Result<u64, String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut count = 0;
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        let Some((topic, key)) = line.split_once('\t') else {
            continue;
        };
        let result = store.query_message(topic, key, QUERY_MAX_NUM, 0, i64::MAX);
        let hits: Vec<Value> = result
            .messages
            .iter()
            .zip(&result.commit_log_offsets)
            .map(|(bytes, &offset)| {
                let view = record::decode_record_view(bytes).ok();
                json!({
                    "commitLogOffset": offset,
                    "uniqKey": view.and_then(|v| v.property("UNIQ_KEY")),
                    "keys": view.and_then(|v| v.property("KEYS")),
                })
            })
            .collect();
        let line = json!({"kind": "query", "topic": topic, "key": key, "hits": hits});
        writeln!(out, "{line}").map_err(|e| e.to_string())?;
        count += 1;
    }
    Ok(count)
}

fn run(args: &Args) -> Result<Vec<String>, String> {
    let mut config = MessageStoreConfig::with_root(&args.root);
    if let Some(size) = args.mapped_file_size {
        config.mapped_file_size_commit_log = size;
    }
    // Leave retention alone: a dump must not delete anything it is about to compare.
    config.delete_when = String::new();
    config.disk_max_used_space_ratio = 100;
    config.disk_space_clean_forcibly_ratio = 100;
    config.disk_space_warning_level_ratio = 100;

    let store =
        MessageStore::open(config).map_err(|e| format!("open {}: {e}", args.root.display()))?;
    let mut out: Box<dyn Write> = match &args.out {
        Some(p) => Box::new(BufWriter::new(
            File::create(p).map_err(|e| format!("{}: {e}", p.display()))?,
        )),
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
    };

    let report = store.recovery_report().clone();
    let line = json!({
        "kind": "recovery",
        "abnormal": report.abnormal,
        "verifyFrom": report.verify_from,
        "verifiedRecords": report.verified_records,
        "maxPhyOffset": report.max_phy_offset,
        "truncatedFrom": report.truncated_from,
        "droppedBytes": report.dropped_bytes,
        "deletedSegments": report.deleted_segments,
        "corruption": report.corruption.as_ref().map(|c| json!({
            "file": c.file.display().to_string(), "offset": c.offset, "reason": c.reason,
        })),
        "redispatchFrom": report.redispatch_from,
        "redispatchedRecords": report.redispatched_records,
        "repairedQueues": report.repaired_queues,
        "minPhyOffset": store.min_phy_offset(),
    });
    writeln!(out, "{line}").map_err(|e| e.to_string())?;

    let mut problems = Vec::new();
    if !store.wait_dispatched(store.max_phy_offset(), DISPATCH_WAIT) {
        problems.push(format!(
            "dispatch did not reach {} within {DISPATCH_WAIT:?} (at {})",
            store.max_phy_offset(),
            store.dispatched_offset()
        ));
    }
    let (messages, queue_problems) = dump_queues(&store, &mut out)?;
    problems.extend(queue_problems);
    let queries = match &args.query_keys {
        Some(path) => dump_queries(&store, path, &mut out)?,
        None => 0,
    };
    let line = json!({
        "kind": "summary",
        "messages": messages,
        "queues": store.consume_queues().entries().len(),
        "queries": queries,
        "maxPhyOffset": store.max_phy_offset(),
        "problems": problems,
    });
    writeln!(out, "{line}").map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    drop(out);
    store.shutdown().map_err(|e| format!("shutdown: {e}"))?;
    Ok(problems)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("store_dump: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(problems) if problems.is_empty() => ExitCode::SUCCESS,
        Ok(problems) => {
            for p in &problems {
                eprintln!("store_dump: {p}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("store_dump: {e}");
            ExitCode::FAILURE
        }
    }
}
