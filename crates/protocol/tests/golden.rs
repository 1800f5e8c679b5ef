//! Golden tests against bytes captured from real Apache RocketMQ peers.
//!
//! The fixtures in `tests/fixtures/<peer>/` were recorded by `interop/capture/capture.sh`: a
//! recording proxy sat between real clients (Java 4.9.8 and 5.3.3 with JSON and with ROCKETMQ
//! headers, Go 2.1.2) and a real Apache RocketMQ 5.3.3 name server and broker, and saved every frame
//! whole, 4-byte length prefix included. `frames.jsonl` in each directory indexes the frames as the
//! proxy (an independent Python decoder) saw them. See `tests/fixtures/README.md`.
//!
//! What must hold, and why:
//! - Every frame decodes with `frame::decode_frame`, consuming exactly its bytes, and the decoded
//!   code/flag/opaque/language/version agree with the proxy's index.
//! - **Byte-exact re-encoding for every frame written by Java** (all Java client frames in both
//!   codecs, and every frame of the Apache name server and broker). Java's JSON headers come from
//!   fastjson, whose top-level keys are alphabetical with nulls omitted, exactly what our JSON encoder
//!   writes, and our `ExtFields` keep the decoded order; Java's ROCKETMQ headers use the same fixed
//!   layout as our binary codec, and again the entry order is kept.
//! - **Go frames are compared semantically** (decode, re-encode, decode again, equal command): Go
//!   writes its JSON keys in struct order (`code, language, version, opaque, flag, remark,
//!   extFields`), always writes `remark` (often `""`) and never `serializeTypeCurrentRPC`, so our
//!   fastjson-style bytes legitimately differ.
//! - Specific protocol facts from the capture (codes, header keys, versions, languages, response ext
//!   fields, stored-record layout in pull bodies) are asserted per peer below.

use std::error::Error;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use comet_protocol::frame;
use comet_protocol::message::record::decode_records;
use comet_protocol::{LanguageCode, RemotingCommand, SerializeType};
use serde_json::Value;

type TestResult = Result<(), Box<dyn Error>>;

/// `MQVersion` ordinal the Apache 5.3.3 name server and broker put in every response.
const APACHE_SERVER_VERSION: i32 = 479;
/// Stored-message magic code of V1 records (1-byte topic length).
const MAGIC_V1: i32 = 0xDAA3_20A7_u32 as i32;
/// MessageSysFlag COMPRESSED bit, and the 5.x "ZLIB" compression type in bits 8..10.
const SYSFLAG_COMPRESSED: i32 = 0x1;
const SYSFLAG_COMPRESSION_ZLIB: i32 = 3 << 8;
/// Records the capture programs write to queue 0: one single, a batch of three, one compressed.
const RECORDS_SENT: usize = 5;
/// Length of the compressible body the capture programs send (above the 4 KiB compression threshold).
const BIG_BODY_LEN: usize = 8192;
const BIG_BODY_PATTERN: &str = "comet-golden-compressible-body-";
/// Upper bound for decompressing a captured body (it must come out at `BIG_BODY_LEN`).
const MAX_DECOMPRESSED: u64 = 1 << 20;
/// Each peer directory must hold at least this many frames, so a lost fixture set fails the test.
const MIN_FRAMES_PER_PEER: usize = 20;
/// Request codes asserted below.
const GET_ROUTEINFO_BY_TOPIC: i32 = 105;
const HEART_BEAT: i32 = 34;
const SEND_MESSAGE: i32 = 10;
const SEND_MESSAGE_V2: i32 = 310;
const SEND_BATCH_MESSAGE: i32 = 320;
const PULL_MESSAGE: i32 = 11;
const QUERY_CONSUMER_OFFSET: i32 = 14;
const UPDATE_CONSUMER_OFFSET: i32 = 15;
const GET_CONSUMER_LIST_BY_GROUP: i32 = 38;
const SUCCESS: i32 = 0;
const TOPIC_NOT_EXIST: i32 = 17;
const FLAG_RESPONSE: i32 = 0x1;
const FLAG_ONEWAY: i32 = 0x2;

/// One captured peer: which client wrote the c2s requests, in which codec, with which topic.
struct Peer {
    dir: &'static str,
    topic: &'static str,
    language: LanguageCode,
    version: i32,
    serialize_type: SerializeType,
}

const PEERS: [Peer; 5] = [
    Peer {
        dir: "java-4.9.8-json",
        topic: "GoldenJava498Json",
        language: LanguageCode::Java,
        version: 409,
        serialize_type: SerializeType::Json,
    },
    Peer {
        dir: "java-4.9.8-rocketmq",
        topic: "GoldenJava498Rocketmq",
        language: LanguageCode::Java,
        version: 409,
        serialize_type: SerializeType::RocketMq,
    },
    Peer {
        dir: "java-5.3.3-json",
        topic: "GoldenJava533Json",
        language: LanguageCode::Java,
        version: 479,
        serialize_type: SerializeType::Json,
    },
    Peer {
        dir: "java-5.3.3-rocketmq",
        topic: "GoldenJava533Rocketmq",
        language: LanguageCode::Java,
        version: 479,
        serialize_type: SerializeType::RocketMq,
    },
    Peer {
        dir: "go-2.1.2",
        topic: "GoldenGo212",
        language: LanguageCode::Go,
        version: 317,
        serialize_type: SerializeType::Json,
    },
];

/// One captured frame with its index entry and decoded command.
struct Captured {
    file: String,
    bytes: Bytes,
    index: Value,
    cmd: RemotingCommand,
}

impl Captured {
    fn is_c2s(&self) -> bool {
        self.index["direction"] == "c2s"
    }

    /// For a response: the code of the request it answers (paired by the capture script).
    fn request_code(&self) -> Option<i64> {
        self.index["request_code"].as_i64()
    }
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
}

/// Loads and decodes every frame of a peer, checking the decode invariants on the way.
fn load(peer: &Peer) -> Result<Vec<Captured>, Box<dyn Error>> {
    let dir = fixtures_dir().join(peer.dir);
    let index = fs::read_to_string(dir.join("frames.jsonl"))?;
    let mut frames = Vec::new();
    for line in index.lines().filter(|l| !l.trim().is_empty()) {
        let entry: Value = serde_json::from_str(line)?;
        let file = entry["file"]
            .as_str()
            .ok_or("index entry without file")?
            .to_owned();
        let bytes = Bytes::from(fs::read(dir.join(&file))?);
        let mut buf = BytesMut::from(&bytes[..]);
        let cmd = frame::decode_frame(&mut buf)
            .map_err(|e| format!("{}/{file}: decode failed: {e}", peer.dir))?
            .ok_or_else(|| format!("{}/{file}: incomplete frame", peer.dir))?;
        assert!(
            buf.is_empty(),
            "{}/{file}: {} bytes left over",
            peer.dir,
            buf.len()
        );
        frames.push(Captured {
            file,
            bytes,
            index: entry,
            cmd,
        });
    }
    assert!(
        frames.len() >= MIN_FRAMES_PER_PEER,
        "{}: only {} frames",
        peer.dir,
        frames.len()
    );
    Ok(frames)
}

fn find<'a>(
    frames: &'a [Captured],
    what: &str,
    pred: impl Fn(&Captured) -> bool,
) -> Result<&'a Captured, String> {
    frames
        .iter()
        .find(|f| pred(f))
        .ok_or_else(|| format!("no {what} frame"))
}

fn requests(frames: &[Captured], code: i32) -> impl Iterator<Item = &Captured> {
    frames
        .iter()
        .filter(move |f| f.is_c2s() && !f.cmd.is_response() && f.cmd.code == code)
}

/// The response paired with `req` (same connection and opaque, RESPONSE flag).
fn response_to<'a>(frames: &'a [Captured], req: &Captured) -> Result<&'a Captured, String> {
    find(frames, "response", |f| {
        f.cmd.is_response()
            && f.cmd.opaque == req.cmd.opaque
            && f.index["conn"] == req.index["conn"]
    })
    .map_err(|e| format!("{e} to {}", req.file))
}

fn ext<'a>(f: &'a Captured, key: &str) -> Result<&'a str, String> {
    f.cmd
        .ext(key)
        .ok_or_else(|| format!("{}: no ext field {key}", f.file))
}

fn body(f: &Captured) -> Result<&Bytes, String> {
    f.cmd
        .body
        .as_ref()
        .ok_or_else(|| format!("{}: no body", f.file))
}

/// Splits a properties string (`k 0x01 v 0x02`...) into pairs, tolerating a missing trailing 0x02.
fn properties(s: &str) -> Vec<(&str, &str)> {
    s.split('\u{2}')
        .filter_map(|kv| kv.split_once('\u{1}'))
        .collect()
}

fn big_body() -> String {
    BIG_BODY_PATTERN.repeat(BIG_BODY_LEN / BIG_BODY_PATTERN.len() + 1)[..BIG_BODY_LEN].to_owned()
}

fn zlib_decompress(data: &[u8]) -> Result<Vec<u8>, Box<dyn Error>> {
    let mut out = Vec::new();
    flate2::read::ZlibDecoder::new(data)
        .take(MAX_DECOMPRESSED)
        .read_to_end(&mut out)?;
    Ok(out)
}

/// Walks a pull body by its records' TOTALSIZE fields; returns the record count. The sizes must
/// tile the body exactly and each record must carry the V1 magic code.
fn walk_records(file: &str, body: &[u8]) -> Result<usize, String> {
    let mut pos = 0usize;
    let mut count = 0usize;
    while pos < body.len() {
        let size_bytes: [u8; 4] = body
            .get(pos..pos + 4)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| format!("{file}: truncated TOTALSIZE at {pos}"))?;
        let magic_bytes: [u8; 4] = body
            .get(pos + 4..pos + 8)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| format!("{file}: truncated MAGICCODE at {pos}"))?;
        let size = usize::try_from(i32::from_be_bytes(size_bytes))
            .map_err(|_| format!("{file}: negative size"))?;
        assert_eq!(
            i32::from_be_bytes(magic_bytes),
            MAGIC_V1,
            "{file}: record {count} magic"
        );
        assert!(size > 8, "{file}: record {count} size {size}");
        pos += size;
        count += 1;
    }
    assert_eq!(pos, body.len(), "{file}: record sizes overrun the body");
    Ok(count)
}

#[test]
fn every_fixture_decodes_and_matches_the_proxy_index() -> TestResult {
    for peer in &PEERS {
        for f in load(peer)? {
            let idx = &f.index;
            let what = format!("{}/{}", peer.dir, f.file);
            assert_eq!(
                Some(i64::from(f.cmd.code)),
                idx["code"].as_i64(),
                "{what}: code"
            );
            assert_eq!(
                Some(i64::from(f.cmd.flag)),
                idx["flag"].as_i64(),
                "{what}: flag"
            );
            assert_eq!(
                Some(i64::from(f.cmd.opaque)),
                idx["opaque"].as_i64(),
                "{what}: opaque"
            );
            assert_eq!(
                Some(i64::from(f.cmd.version)),
                idx["version"].as_i64(),
                "{what}: version"
            );
            assert_eq!(
                Some(f.cmd.body_len() as i64),
                idx["body_len"].as_i64(),
                "{what}: body length"
            );
            let ser = match f.cmd.serialize_type {
                SerializeType::Json => "JSON",
                SerializeType::RocketMq => "ROCKETMQ",
            };
            assert_eq!(idx["serialize_type"], ser, "{what}: serialize type");
            // The proxy records the language as a name (JSON) or as the byte (ROCKETMQ).
            let lang = &idx["language"];
            match lang.as_str() {
                Some(name) => assert_eq!(f.cmd.language.name(), name, "{what}: language"),
                None => assert_eq!(
                    Some(i64::from(f.cmd.language.code())),
                    lang.as_i64(),
                    "{what}: language"
                ),
            }
            // Who wrote it: the client for requests it sent, Apache (Java 5.3.3) for everything else
            // that travels server to client.
            if f.is_c2s() {
                assert_eq!(f.cmd.language, peer.language, "{what}: client language");
                assert_eq!(f.cmd.version, peer.version, "{what}: client version");
                assert_eq!(
                    f.cmd.serialize_type, peer.serialize_type,
                    "{what}: client codec"
                );
            } else {
                assert_eq!(
                    f.cmd.language,
                    LanguageCode::Java,
                    "{what}: server language"
                );
                assert_eq!(
                    f.cmd.version, APACHE_SERVER_VERSION,
                    "{what}: server version"
                );
                assert_eq!(
                    f.cmd.serialize_type,
                    SerializeType::Json,
                    "{what}: server codec"
                );
            }
        }
    }
    Ok(())
}

#[test]
fn java_frames_reencode_byte_exact() -> TestResult {
    let mut checked = 0usize;
    for peer in &PEERS {
        for f in load(peer)?
            .iter()
            .filter(|f| f.cmd.language == LanguageCode::Java)
        {
            let ours = frame::encode_to_bytes(&f.cmd)?;
            if ours != f.bytes {
                let (theirs, mine) = (
                    String::from_utf8_lossy(&f.bytes),
                    String::from_utf8_lossy(&ours),
                );
                panic!(
                    "{}/{}: re-encoding differs\ncaptured: {theirs:?}\nours:     {mine:?}",
                    peer.dir, f.file
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} Java frames checked");
    Ok(())
}

#[test]
fn all_frames_roundtrip_semantically() -> TestResult {
    for peer in &PEERS {
        for f in load(peer)? {
            let ours = frame::encode_to_bytes(&f.cmd)?;
            let mut buf = BytesMut::from(&ours[..]);
            let again = frame::decode_frame(&mut buf)?.ok_or("re-encoded frame incomplete")?;
            assert!(buf.is_empty());
            assert_eq!(again, f.cmd, "{}/{}", peer.dir, f.file);
        }
    }
    Ok(())
}

#[test]
fn go_json_headers_are_not_fastjson_ordered() -> TestResult {
    // Documents why Go frames are only compared semantically: its header starts with
    // `{"code":N,"language":"GO"` where fastjson (and we) write `"extFields"`/`"flag"` second.
    let peer = &PEERS[4];
    let frames = load(peer)?;
    let req = requests(&frames, SEND_MESSAGE).next().ok_or("no Go send")?;
    let header_start = req.bytes.get(8..).ok_or("short frame")?;
    assert!(header_start.starts_with(b"{\"code\":10,\"language\":\"GO\",\"version\":317"));
    assert_ne!(frame::encode_to_bytes(&req.cmd)?, req.bytes);
    Ok(())
}

#[test]
fn java_send_message_v2_headers() -> TestResult {
    for peer in PEERS.iter().filter(|p| p.language == LanguageCode::Java) {
        let frames = load(peer)?;
        let mut sends = requests(&frames, SEND_MESSAGE_V2);
        let single = sends.next().ok_or("no SEND_MESSAGE_V2")?;
        let compressed = sends.next().ok_or("no second SEND_MESSAGE_V2")?;
        for f in [single, compressed] {
            let keys: Vec<&str> = f
                .cmd
                .ext_fields
                .as_ref()
                .ok_or("no ext")?
                .iter()
                .map(|(k, _)| k)
                .collect();
            // a..k, m and n (brokerName); `l` (maxReconsumeTimes) is null for a plain send.
            assert_eq!(
                keys,
                [
                    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "m", "n"
                ],
                "{}",
                f.file
            );
            assert_eq!(ext(f, "a")?, format!("{}_PG", peer.topic));
            assert_eq!(ext(f, "b")?, peer.topic);
            assert_eq!(ext(f, "c")?, "TBW102");
            assert_eq!(ext(f, "d")?, "4");
            assert_eq!(ext(f, "e")?, "0");
            assert_eq!(ext(f, "h")?, "0");
            assert_eq!(ext(f, "m")?, "false");
            assert_eq!(ext(f, "n")?, "broker-a");
            assert!(
                ext(f, "g")?.parse::<i64>()? > 1_500_000_000_000,
                "bornTimestamp in ms"
            );
        }
        assert_eq!(ext(single, "f")?, "0");
        assert_eq!(body(single)?.as_ref(), b"hello comet golden");
        let props = properties(ext(single, "i")?);
        for expected in [
            ("TAGS", "TagA"),
            ("KEYS", "KeyA KeyB"),
            ("cometProp", "golden"),
            ("WAIT", "true"),
        ] {
            assert!(
                props.contains(&expected),
                "{}: {expected:?} not in {props:?}",
                peer.dir
            );
        }
        // UNIQ_KEY: hex of IP (4 or 16 bytes; this machine gave Java an IPv6 one) + pid, hash, time, counter.
        assert!(
            props
                .iter()
                .any(|(k, v)| *k == "UNIQ_KEY" && (v.len() == 32 || v.len() == 56))
        );
        // 4.9.8 ends the properties string without a trailing 0x02 separator; 5.3.3 writes one.
        let trailing = ext(single, "i")?.ends_with('\u{2}');
        assert_eq!(
            trailing,
            peer.version >= 479,
            "{}: trailing separator",
            peer.dir
        );

        // Both Java clients mark a zlib body COMPRESSED | ZLIB<<8 (769) here, 4.9.8 included.
        let sys_flag: i32 = ext(compressed, "f")?.parse()?;
        assert_eq!(
            sys_flag,
            SYSFLAG_COMPRESSED | SYSFLAG_COMPRESSION_ZLIB,
            "{}",
            peer.dir
        );
        assert_eq!(zlib_decompress(body(compressed)?)?, big_body().as_bytes());
        assert!(properties(ext(compressed, "i")?).contains(&("TAGS", "TagC")));
    }
    Ok(())
}

#[test]
fn go_send_message_uses_v1_keys() -> TestResult {
    let peer = &PEERS[4];
    let frames = load(peer)?;
    let mut sends = requests(&frames, SEND_MESSAGE);
    let single = sends.next().ok_or("no Go SEND_MESSAGE")?;
    let compressed = sends.next().ok_or("no second Go SEND_MESSAGE")?;
    assert!(
        requests(&frames, SEND_MESSAGE_V2).next().is_none(),
        "Go never sends 310"
    );
    for f in [single, compressed] {
        assert_eq!(f.cmd.language, LanguageCode::Go);
        assert_eq!(f.cmd.version, 317);
        assert_eq!(
            f.cmd.remark.as_deref(),
            Some(""),
            "Go always writes a remark"
        );
        assert_eq!(ext(f, "producerGroup")?, format!("{}_PG", peer.topic));
        assert_eq!(ext(f, "topic")?, peer.topic);
        assert_eq!(ext(f, "defaultTopic")?, "TBW102");
        assert_eq!(ext(f, "defaultTopicQueueNums")?, "4");
        assert_eq!(ext(f, "queueId")?, "0");
        assert_eq!(ext(f, "batch")?, "false");
        assert!(ext(f, "bornTimestamp")?.parse::<i64>()? > 1_500_000_000_000);
        assert!(f.cmd.ext("b").is_none(), "no V2 keys in a Go single send");
    }
    assert_eq!(ext(single, "sysFlag")?, "0");
    assert_eq!(body(single)?.as_ref(), b"hello comet golden");
    let props = properties(ext(single, "properties")?);
    for expected in [
        ("TAGS", "TagA"),
        ("KEYS", "KeyA KeyB"),
        ("cometProp", "golden"),
    ] {
        assert!(props.contains(&expected), "{expected:?} not in {props:?}");
    }
    // Go sets only the COMPRESSED bit (zlib, no type bits).
    assert_eq!(ext(compressed, "sysFlag")?, "1");
    assert_eq!(zlib_decompress(body(compressed)?)?, big_body().as_bytes());
    Ok(())
}

#[test]
fn batch_sends_use_v2_keys_and_batch_records() -> TestResult {
    for peer in &PEERS {
        let frames = load(peer)?;
        let req = requests(&frames, SEND_BATCH_MESSAGE)
            .next()
            .ok_or("no batch")?;
        assert_eq!(ext(req, "b")?, peer.topic, "{}", peer.dir);
        assert_eq!(ext(req, "m")?, "true", "{}", peer.dir);
        assert_eq!(ext(req, "e")?, "0", "{}", peer.dir);
        // Batch body: TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG, BODYLEN+BODY, PROPLEN(i16)+PROPERTIES.
        let data = body(req)?;
        let mut pos = 0usize;
        let mut bodies = Vec::new();
        while pos < data.len() {
            let int_at = |at: usize| -> Result<i32, String> {
                data.get(at..at + 4)
                    .and_then(|s| s.try_into().ok())
                    .map(i32::from_be_bytes)
                    .ok_or_else(|| format!("{}: batch truncated at {at}", peer.dir))
            };
            let total = usize::try_from(int_at(pos)?)?;
            assert_eq!(int_at(pos + 4)?, 0, "client magic code is 0");
            let body_len = usize::try_from(int_at(pos + 16)?)?;
            let inner = data
                .get(pos + 20..pos + 20 + body_len)
                .ok_or("batch body truncated")?;
            bodies.push(String::from_utf8(inner.to_vec())?);
            pos += total;
        }
        assert_eq!(
            pos,
            data.len(),
            "{}: batch record sizes tile the body",
            peer.dir
        );
        assert_eq!(bodies, ["batch-0", "batch-1", "batch-2"], "{}", peer.dir);
        let rsp = response_to(&frames, req)?;
        assert_eq!(rsp.cmd.code, SUCCESS);
        assert_eq!(
            ext(rsp, "msgId")?.split(',').count(),
            3,
            "{}: one offset id per message",
            peer.dir
        );
        assert_eq!(
            ext(rsp, "queueOffset")?,
            "1",
            "{}: after the single send",
            peer.dir
        );
    }
    Ok(())
}

#[test]
fn send_responses_carry_region_and_trace() -> TestResult {
    for peer in &PEERS {
        let frames = load(peer)?;
        let sends: Vec<&Captured> = frames
            .iter()
            .filter(|f| matches!(f.request_code(), Some(c) if c == i64::from(SEND_MESSAGE) || c == i64::from(SEND_MESSAGE_V2) || c == i64::from(SEND_BATCH_MESSAGE)))
            .collect();
        assert!(
            sends.len() >= 3,
            "{}: {} send responses",
            peer.dir,
            sends.len()
        );
        for rsp in sends {
            assert_eq!(rsp.cmd.code, SUCCESS, "{}/{}", peer.dir, rsp.file);
            assert_eq!(rsp.cmd.flag, FLAG_RESPONSE);
            assert_eq!(ext(rsp, "MSG_REGION")?, "DefaultRegion");
            assert_eq!(ext(rsp, "TRACE_ON")?, "true");
            assert_eq!(ext(rsp, "queueId")?, "0");
            // Offset message ids: 4-byte store IP (127.0.0.2, the advertised brokerIP1) + port + offset.
            for id in ext(rsp, "msgId")?.split(',') {
                assert_eq!(id.len(), 32, "{id}");
                assert!(id.starts_with("7F000002"), "{id}");
            }
        }
    }
    Ok(())
}

#[test]
fn pull_responses_hold_the_stored_records() -> TestResult {
    for peer in &PEERS {
        let frames = load(peer)?;
        let found: Vec<&Captured> = frames
            .iter()
            .filter(|f| f.request_code() == Some(i64::from(PULL_MESSAGE)) && f.cmd.code == SUCCESS)
            .collect();
        assert!(!found.is_empty(), "{}: no FOUND pull", peer.dir);
        for rsp in &found {
            assert_eq!(rsp.cmd.remark.as_deref(), Some("FOUND"));
            for key in [
                "suggestWhichBrokerId",
                "nextBeginOffset",
                "minOffset",
                "maxOffset",
            ] {
                ext(rsp, key)?.parse::<i64>()?;
            }
            let data = body(rsp)?;
            let count = walk_records(&rsp.file, data)?;
            assert_eq!(count, RECORDS_SENT, "{}/{}", peer.dir, rsp.file);
            assert_eq!(ext(rsp, "nextBeginOffset")?, RECORDS_SENT.to_string());

            // The full codec must agree with the raw walk and find what the client sent.
            let records = decode_records(data, true)?;
            assert_eq!(records.len(), RECORDS_SENT);
            for (i, m) in records.iter().enumerate() {
                assert_eq!(m.topic, peer.topic);
                assert_eq!(m.queue_id, 0);
                assert_eq!(m.queue_offset, i as i64);
                assert_eq!(m.properties.get("MSG_REGION"), Some("DefaultRegion"));
            }
            let tags: Vec<Option<&str>> = records.iter().map(|m| m.tags()).collect();
            assert_eq!(
                tags,
                [
                    Some("TagA"),
                    Some("TagB"),
                    Some("TagB"),
                    Some("TagB"),
                    Some("TagC")
                ],
                "{}",
                peer.dir
            );
            let bodies: Vec<&[u8]> = records.iter().take(4).map(|m| m.body.as_ref()).collect();
            assert_eq!(
                bodies,
                [
                    &b"hello comet golden"[..],
                    b"batch-0",
                    b"batch-1",
                    b"batch-2"
                ]
            );
            let big = records.get(4).ok_or("no fifth record")?;
            assert_ne!(
                big.sys_flag & SYSFLAG_COMPRESSED,
                0,
                "stored body stays compressed"
            );
            assert_eq!(zlib_decompress(&big.body)?, big_body().as_bytes());
            assert_eq!(
                records.first().and_then(|m| m.properties.get("cometProp")),
                Some("golden")
            );
        }
    }
    Ok(())
}

#[test]
fn pull_request_headers() -> TestResult {
    for peer in &PEERS {
        let frames = load(peer)?;
        let req = requests(&frames, PULL_MESSAGE).next().ok_or("no pull")?;
        assert_eq!(
            ext(req, "consumerGroup")?.split('_').next(),
            Some(peer.topic)
        );
        assert_eq!(ext(req, "topic")?, peer.topic);
        for key in [
            "queueId",
            "queueOffset",
            "maxMsgNums",
            "sysFlag",
            "commitOffset",
            "suspendTimeoutMillis",
            "subVersion",
        ] {
            ext(req, key)?.parse::<i64>()?;
        }
    }
    Ok(())
}

#[test]
fn offsets_and_consumer_list() -> TestResult {
    for peer in &PEERS {
        let frames = load(peer)?;
        // Java's pull consumer commits offset 5 synchronously; the Go push consumer commits oneway.
        let update = requests(&frames, UPDATE_CONSUMER_OFFSET)
            .find(|f| f.cmd.ext("commitOffset") == Some("5"))
            .ok_or_else(|| format!("{}: no UPDATE_CONSUMER_OFFSET of 5", peer.dir))?;
        assert_eq!(ext(update, "topic")?, peer.topic);
        assert_eq!(ext(update, "queueId")?, "0");
        if peer.language == LanguageCode::Java {
            assert_eq!(
                ext(update, "consumerGroup")?,
                format!("{}_PULL", peer.topic)
            );
            assert_eq!(update.cmd.flag, 0);
            assert_eq!(response_to(&frames, update)?.cmd.code, SUCCESS);
            // ... and reads it back.
            let query = requests(&frames, QUERY_CONSUMER_OFFSET)
                .find(|f| f.cmd.ext("consumerGroup") == Some(&format!("{}_PULL", peer.topic)))
                .ok_or("no QUERY_CONSUMER_OFFSET")?;
            let rsp = response_to(&frames, query)?;
            assert_eq!(rsp.cmd.code, SUCCESS);
            assert_eq!(ext(rsp, "offset")?, "5");
            // The push consumer persists its offset on shutdown as a true oneway request.
            let oneway = requests(&frames, UPDATE_CONSUMER_OFFSET)
                .find(|f| f.cmd.ext("consumerGroup") == Some(&format!("{}_PUSH", peer.topic)))
                .ok_or("no push-consumer offset commit")?;
            assert_eq!(oneway.cmd.flag, FLAG_ONEWAY);
            assert!(
                response_to(&frames, oneway).is_err(),
                "oneway requests get no response"
            );
        } else {
            // Go's "oneway" InvokeOneWay does not set the ONEWAY bit: flag 0, the broker answers.
            assert_eq!(update.cmd.flag, 0);
            assert_eq!(
                ext(update, "consumerGroup")?,
                format!("{}_PUSH", peer.topic)
            );
        }

        let push_group = format!("{}_PUSH", peer.topic);
        let list = requests(&frames, GET_CONSUMER_LIST_BY_GROUP)
            .find(|f| f.cmd.ext("consumerGroup") == Some(push_group.as_str()))
            .ok_or("no consumer list of the push group")?;
        let rsp = response_to(&frames, list)?;
        let json: Value = serde_json::from_slice(body(rsp)?)?;
        let ids = json["consumerIdList"]
            .as_array()
            .ok_or("no consumerIdList")?;
        assert_eq!(ids.len(), 1, "{}", peer.dir);
    }
    Ok(())
}

#[test]
fn heartbeats_register_the_push_consumer() -> TestResult {
    for peer in &PEERS {
        let frames = load(peer)?;
        let push_group = format!("{}_PUSH", peer.topic);
        let mut saw_consumer = false;
        for hb in requests(&frames, HEART_BEAT) {
            let json: Value = serde_json::from_slice(body(hb)?)?;
            assert!(json["clientID"].as_str().is_some_and(|s| !s.is_empty()));
            for consumer in json["consumerDataSet"].as_array().into_iter().flatten() {
                if consumer["groupName"] == push_group.as_str() {
                    saw_consumer = true;
                    let subs = consumer["subscriptionDataSet"]
                        .as_array()
                        .ok_or("no subscriptions")?;
                    assert!(
                        subs.iter()
                            .any(|s| s["topic"] == peer.topic && s["subString"] == "*")
                    );
                }
            }
            // The 5.3.3 broker answers every heartbeat with these two ext fields.
            let rsp = response_to(&frames, hb)?;
            assert_eq!(ext(rsp, "IS_SUPPORT_HEART_BEAT_V2")?, "true");
            assert_eq!(ext(rsp, "IS_SUB_CHANGE")?, "true");
        }
        assert!(
            saw_consumer,
            "{}: no heartbeat registered {push_group}",
            peer.dir
        );
    }
    Ok(())
}

#[test]
fn route_lookups() -> TestResult {
    for peer in &PEERS {
        let frames = load(peer)?;
        // The first lookup of the not-yet-created topic fails; the client falls back to TBW102.
        let first = requests(&frames, GET_ROUTEINFO_BY_TOPIC)
            .find(|f| f.cmd.ext("topic") == Some(peer.topic))
            .ok_or("no route request for the topic")?;
        let rsp = response_to(&frames, first)?;
        assert_eq!(rsp.cmd.code, TOPIC_NOT_EXIST);
        assert!(
            rsp.cmd
                .remark
                .as_deref()
                .is_some_and(|r| r.contains(peer.topic))
        );

        let tbw = requests(&frames, GET_ROUTEINFO_BY_TOPIC)
            .find(|f| f.cmd.ext("topic") == Some("TBW102"))
            .ok_or("no TBW102 route request")?;
        let route = body(response_to(&frames, tbw)?)?;
        let text = std::str::from_utf8(route)?;
        // Name server 5.3.3 writes standard JSON (quoted map keys) only to clients with version
        // >= 401 (V4_9_4); the Go client announces 317 and gets fastjson's `{0:"addr"}`.
        let standard = peer.version >= 401;
        assert_eq!(
            text.contains("\"brokerAddrs\":{\"0\":\"127.0.0.2:"),
            standard,
            "{}: {text}",
            peer.dir
        );
        assert_eq!(
            text.contains("\"brokerAddrs\":{0:\"127.0.0.2:"),
            !standard,
            "{}: {text}",
            peer.dir
        );
        if standard {
            let json: Value = serde_json::from_str(text)?;
            assert_eq!(json["queueDatas"][0]["perm"], 7);
            assert_eq!(json["brokerDatas"][0]["brokerName"], "broker-a");
        }
    }
    Ok(())
}
