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
use comet_protocol::headers::{
    CheckTransactionStateRequestHeader, CommandHeader, CommandHeaderExt,
    EndTransactionRequestHeader, SendMessageRequestHeader, SendMessageResponseHeader,
    transaction_flag,
};
use comet_protocol::message::id::decode_offset_msg_id;
use comet_protocol::message::properties::keys;
use comet_protocol::message::record::{decode_record, decode_records};
use comet_protocol::message::{Properties, sysflag};
use comet_protocol::{ExtFields, LanguageCode, RemotingCommand, SerializeType};
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

/// The transaction captures (`interop/capture/capture.sh`, `TxCaptureClient` / `capture -tx`): each
/// client's TransactionMQProducer (group `<topic>_TXPG`) sends three half messages whose local
/// transactions commit, roll back and answer unknown; the broker checks the unknown one and the
/// client answers commit; then a consumer sees the two committed messages.
const TX_PEERS: [Peer; 5] = [
    Peer {
        dir: "java-4.9.8-json-tx",
        topic: "GoldenTxJava498Json",
        language: LanguageCode::Java,
        version: 409,
        serialize_type: SerializeType::Json,
    },
    Peer {
        dir: "java-4.9.8-rocketmq-tx",
        topic: "GoldenTxJava498Rocketmq",
        language: LanguageCode::Java,
        version: 409,
        serialize_type: SerializeType::RocketMq,
    },
    Peer {
        dir: "java-5.3.3-json-tx",
        topic: "GoldenTxJava533Json",
        language: LanguageCode::Java,
        version: 479,
        serialize_type: SerializeType::Json,
    },
    Peer {
        dir: "java-5.3.3-rocketmq-tx",
        topic: "GoldenTxJava533Rocketmq",
        language: LanguageCode::Java,
        version: 479,
        serialize_type: SerializeType::RocketMq,
    },
    Peer {
        dir: "go-2.1.2-tx",
        topic: "GoldenTxGo212",
        language: LanguageCode::Go,
        version: 317,
        serialize_type: SerializeType::Json,
    },
];

fn all_peers() -> impl Iterator<Item = &'static Peer> {
    PEERS.iter().chain(TX_PEERS.iter())
}

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

/// The response paired with `req` (same connection and opaque, RESPONSE flag, travelling the other
/// way: a broker's own requests, like CHECK_TRANSACTION_STATE, number their opaques independently
/// of the client's, so the same opaque can occur in both directions of one connection).
fn response_to<'a>(frames: &'a [Captured], req: &Captured) -> Result<&'a Captured, String> {
    find(frames, "response", |f| {
        f.cmd.is_response()
            && f.cmd.opaque == req.cmd.opaque
            && f.index["conn"] == req.index["conn"]
            && f.is_c2s() != req.is_c2s()
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
    for peer in all_peers() {
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
    for peer in all_peers() {
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
    for peer in all_peers() {
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

// ---------------------------------------------------------------------------------------------
// Transactions (issue #6): half sends, END_TRANSACTION, CHECK_TRANSACTION_STATE, committed records.
// The transaction peers share one Apache broker, so offsets differ per peer and per run: the tests
// assert how the frames refer to each other (the END_TRANSACTION names the offsets the send response
// and the check handed out), never the offsets themselves.

const END_TRANSACTION: i32 = 37;
const CHECK_TRANSACTION_STATE: i32 = 39;
/// Where the broker parks half messages; the check header names it as the topic.
const HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// User property naming the outcome the capture programs' local transaction reports.
const OUTCOME_PROPERTY: &str = "cometTx";
/// Each outcome the capture programs exercise, with the `commitOrRollback` it must produce.
const TX_OUTCOMES: [(&str, i32); 3] = [
    ("commit", transaction_flag::COMMIT),
    ("rollback", transaction_flag::ROLLBACK),
    ("unknown", transaction_flag::NOT_TYPE),
];
/// The 5.3.3 broker's answer to Go's flag-0 rollback END_TRANSACTION: a SUCCESS response that keeps
/// the default remark of an unset response.
const UNSET_RESPONSE_REMARK: &str = "not set any response code";

/// One half-message send of a transaction capture, with what the broker answered.
struct HalfSend<'a> {
    outcome: &'a str,
    header: SendMessageRequestHeader,
    properties: Properties,
    response: SendMessageResponseHeader,
}

impl HalfSend<'_> {
    fn uniq_key(&self) -> Result<&str, String> {
        self.properties
            .get(keys::UNIQ_KEY)
            .ok_or_else(|| format!("half send {} without UNIQ_KEY", self.outcome))
    }
}

/// The three half sends of a transaction peer (SEND_MESSAGE_V2 from Java, SEND_MESSAGE from Go),
/// in send order, each paired with its response.
fn half_sends<'a>(
    peer: &Peer,
    frames: &'a [Captured],
) -> Result<Vec<HalfSend<'a>>, Box<dyn Error>> {
    let code = match peer.language {
        LanguageCode::Go => SEND_MESSAGE,
        _ => SEND_MESSAGE_V2,
    };
    let mut sends = Vec::new();
    for req in requests(frames, code) {
        let ext = req.cmd.ext_fields.as_ref().ok_or("send without ext")?;
        let header = SendMessageRequestHeader::decode_for_code(code, ext)?;
        let properties = Properties::parse(header.properties.as_deref().unwrap_or_default());
        let outcome = properties
            .get(OUTCOME_PROPERTY)
            .ok_or_else(|| format!("{}/{}: no {OUTCOME_PROPERTY}", peer.dir, req.file))?;
        let outcome = TX_OUTCOMES
            .iter()
            .map(|(o, _)| *o)
            .find(|o| *o == outcome)
            .ok_or_else(|| format!("{}/{}: outcome {outcome}", peer.dir, req.file))?;
        let rsp = response_to(frames, req)?;
        assert_eq!(rsp.cmd.code, SUCCESS, "{}/{}", peer.dir, rsp.file);
        sends.push(HalfSend {
            outcome,
            response: rsp.cmd.decode_header()?,
            header,
            properties,
        });
    }
    let order: Vec<&str> = sends.iter().map(|s| s.outcome).collect();
    assert_eq!(order, ["commit", "rollback", "unknown"], "{}", peer.dir);
    Ok(sends)
}

fn end_transactions(
    frames: &[Captured],
) -> Result<Vec<(&Captured, EndTransactionRequestHeader)>, Box<dyn Error>> {
    requests(frames, END_TRANSACTION)
        .map(|f| Ok((f, f.cmd.decode_header()?)))
        .collect()
}

/// The broker's CHECK_TRANSACTION_STATE requests (server to client).
fn checks(frames: &[Captured]) -> impl Iterator<Item = &Captured> {
    frames
        .iter()
        .filter(|f| !f.is_c2s() && !f.cmd.is_response() && f.cmd.code == CHECK_TRANSACTION_STATE)
}

#[test]
fn half_message_sends_are_prepared() -> TestResult {
    for peer in &TX_PEERS {
        let frames = load(peer)?;
        let group = format!("{}_TXPG", peer.topic);
        for send in half_sends(peer, &frames)? {
            let what = format!("{} {}", peer.dir, send.outcome);
            let h = &send.header;
            assert_eq!(h.producer_group, group, "{what}");
            assert_eq!(h.topic, peer.topic, "{what}");
            // PREPARED (0x4) is the only bit: no compression, no other transaction type.
            assert_eq!(h.sys_flag, sysflag::TRANSACTION_PREPARED_TYPE, "{what}");
            assert_eq!(
                sysflag::transaction_type(h.sys_flag),
                sysflag::TRANSACTION_PREPARED_TYPE
            );
            let p = &send.properties;
            assert_eq!(p.get(keys::TRANSACTION_PREPARED), Some("true"), "{what}");
            assert_eq!(p.get(keys::PRODUCER_GROUP), Some(group.as_str()), "{what}");
            assert_eq!(p.get(keys::TAGS), Some("TagTx"), "{what}");
            let key = format!("TxKey-{}", send.outcome);
            assert_eq!(p.get(keys::KEYS), Some(key.as_str()), "{what}");
            // The producer does not name the transaction: the broker does, in its answer.
            assert_eq!(p.get(keys::TRANSACTION_ID), None, "{what}");

            // The answer: transactionId = the message's UNIQ_KEY; msgId = the half's offset id,
            // stored at the advertised 127.0.0.2; queueId = the real queue the producer picked
            // (the half itself sits in RMQ_SYS_TRANS_HALF_TOPIC queue 0).
            let r = &send.response;
            assert_eq!(
                r.transaction_id.as_deref(),
                Some(send.uniq_key()?),
                "{what}"
            );
            let (store_host, _) = decode_offset_msg_id(&r.msg_id)?;
            assert_eq!(store_host.ip().to_string(), "127.0.0.2", "{what}");
            assert_eq!(r.queue_id, h.queue_id, "{what}");
            assert!(r.queue_offset >= 0, "{what}");
        }
    }
    Ok(())
}

#[test]
fn end_transaction_headers_decode_with_the_typed_header() -> TestResult {
    for peer in &TX_PEERS {
        let frames = load(peer)?;
        let sends = half_sends(peer, &frames)?;
        let ends = end_transactions(&frames)?;
        let group = format!("{}_TXPG", peer.topic);
        // One END_TRANSACTION per local transaction, then one answering the single check.
        assert_eq!(ends.len(), TX_OUTCOMES.len() + 1, "{}", peer.dir);
        for ((f, end), send) in ends.iter().zip(&sends) {
            let what = format!("{}/{} ({})", peer.dir, f.file, send.outcome);
            let expected = TX_OUTCOMES
                .iter()
                .find(|(o, _)| *o == send.outcome)
                .map(|(_, flag)| *flag)
                .ok_or("outcome")?;
            assert_eq!(end.commit_or_rollback, expected, "{what}");
            assert_eq!(end.producer_group, group, "{what}");
            assert_eq!(end.msg_id, send.uniq_key()?, "{what}");
            assert_eq!(
                end.transaction_id.as_deref(),
                send.response.transaction_id.as_deref(),
                "{what}"
            );
            // The offsets come from the send response: its queueOffset (the half queue's) and
            // the commit-log offset inside its offset msgId.
            assert_eq!(
                end.tran_state_table_offset, send.response.queue_offset,
                "{what}"
            );
            let (_, half_offset) = decode_offset_msg_id(&send.response.msg_id)?;
            assert_eq!(end.commit_log_offset, half_offset, "{what}");
            // Go always writes the key; Java writes `false` here too.
            assert_eq!(end.from_transaction_check, Some(false), "{what}");
            assert_eq!(f.cmd.remark, peer_remark(peer), "{what}");
            assert_end_transaction_extras(peer, f, end, Some(peer.topic), &what);
        }
        let (answer_frame, answer) = ends.last().ok_or("no check answer")?;
        assert_eq!(answer.from_transaction_check, Some(true), "{}", peer.dir);
        assert_eq!(
            answer.commit_or_rollback,
            transaction_flag::COMMIT,
            "{}",
            peer.dir
        );
        assert_eq!(answer.producer_group, group);
        // 5.3.3 copies the check header's topic, which is the half topic, into its answer.
        let what = format!("{}/{} (check answer)", peer.dir, answer_frame.file);
        assert_end_transaction_extras(peer, answer_frame, answer, Some(HALF_TOPIC), &what);
    }
    Ok(())
}

/// Go always writes a remark (`""`); Java writes none.
fn peer_remark(peer: &Peer) -> Option<String> {
    (peer.language == LanguageCode::Go).then(String::new)
}

/// The per-client differences of END_TRANSACTION: Java sends it oneway and names the broker
/// (`bname`), 5.3.3 also the topic; Go sends flag 0 (no ONEWAY bit) without either.
fn assert_end_transaction_extras(
    peer: &Peer,
    f: &Captured,
    end: &EndTransactionRequestHeader,
    topic_5x: Option<&str>,
    what: &str,
) {
    if peer.language == LanguageCode::Java {
        assert_eq!(f.cmd.flag, FLAG_ONEWAY, "{what}");
        assert_eq!(end.rpc.broker_name.as_deref(), Some("broker-a"), "{what}");
        let topic = if peer.version >= 479 { topic_5x } else { None };
        assert_eq!(end.topic.as_deref(), topic, "{what}");
    } else {
        assert_eq!(f.cmd.flag, 0, "{what}");
        assert_eq!(end.rpc.broker_name, None, "{what}");
        assert_eq!(end.topic, None, "{what}");
    }
}

#[test]
fn end_transaction_reencodes_through_the_typed_header() -> TestResult {
    // Decoding into EndTransactionRequestHeader and encoding it again loses nothing: every key
    // the peers wrote is a field of the typed header (or of its inherited RPC part).
    for peer in &TX_PEERS {
        let frames = load(peer)?;
        for (f, end) in end_transactions(&frames)? {
            let mut ext = ExtFields::new();
            end.to_ext_fields(&mut ext);
            let theirs = f.cmd.ext_fields.as_ref().ok_or("no ext")?;
            let mut a: Vec<(&str, &str)> = theirs.iter().collect();
            let mut b: Vec<(&str, &str)> = ext.iter().collect();
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b, "{}/{}", peer.dir, f.file);
        }
    }
    Ok(())
}

#[test]
fn check_transaction_state_header_and_half_message_body() -> TestResult {
    for peer in &TX_PEERS {
        let frames = load(peer)?;
        let sends = half_sends(peer, &frames)?;
        let unknown = sends.get(2).ok_or("no unknown send")?;
        let mut all = checks(&frames);
        let check = all.next().ok_or("no CHECK_TRANSACTION_STATE")?;
        assert!(all.next().is_none(), "{}: checked more than once", peer.dir);
        let what = format!("{}/{}", peer.dir, check.file);
        // The broker sends it oneway on the producer's own connection, in JSON.
        assert_eq!(check.cmd.flag, FLAG_ONEWAY, "{what}");
        assert_eq!(check.cmd.serialize_type, SerializeType::Json, "{what}");
        let send_conn = requests(&frames, END_TRANSACTION)
            .next()
            .map(|f| &f.index["conn"])
            .ok_or("no END_TRANSACTION")?;
        assert_eq!(&check.index["conn"], send_conn, "{what}: connection");

        let h: CheckTransactionStateRequestHeader = check.cmd.decode_header()?;
        assert_eq!(h.topic.as_deref(), Some(HALF_TOPIC), "{what}");
        assert_eq!(h.msg_id.as_deref(), Some(unknown.uniq_key()?), "{what}");
        assert_eq!(
            h.transaction_id.as_deref(),
            Some(unknown.uniq_key()?),
            "{what}"
        );
        assert_eq!(h.rpc.broker_name.as_deref(), Some("broker-a"), "{what}");
        // The check names a *new* copy of the half (put back at the half queue's tail before
        // checking): later offsets than the send's, and offsetMsgId agrees with commitLogOffset.
        let offset_msg_id = h.offset_msg_id.as_deref().ok_or("no offsetMsgId")?;
        let (store_host, offset) = decode_offset_msg_id(offset_msg_id)?;
        assert_eq!(offset, h.commit_log_offset, "{what}");
        assert_eq!(store_host.ip().to_string(), "127.0.0.2", "{what}");
        assert!(
            h.tran_state_table_offset > unknown.response.queue_offset,
            "{what}"
        );
        let (_, sent_offset) = decode_offset_msg_id(&unknown.response.msg_id)?;
        assert!(h.commit_log_offset > sent_offset, "{what}");

        // The body is that copy as a stored record, with the real topic and queue restored.
        let record = decode_record(body(check)?, true)?;
        assert_eq!(record.topic, peer.topic, "{what}");
        assert_eq!(record.queue_id, unknown.header.queue_id, "{what}");
        assert_eq!(record.queue_offset, h.tran_state_table_offset, "{what}");
        assert_eq!(record.commit_log_offset, h.commit_log_offset, "{what}");
        assert_eq!(record.body.as_ref(), b"tx-unknown", "{what}");
        // Stored halves have their transaction type reset to NOT (the PREPARED bit is gone).
        assert_eq!(
            sysflag::transaction_type(record.sys_flag),
            sysflag::TRANSACTION_NOT_TYPE,
            "{what}"
        );
        let p = &record.properties;
        let group = format!("{}_TXPG", peer.topic);
        let queue = unknown.header.queue_id.to_string();
        for (key, value) in [
            (keys::TRANSACTION_PREPARED, "true"),
            (keys::PRODUCER_GROUP, group.as_str()),
            (keys::REAL_TOPIC, peer.topic),
            (keys::REAL_QUEUE_ID, queue.as_str()),
            (keys::TRANSACTION_ID, unknown.uniq_key()?),
            (keys::UNIQ_KEY, unknown.uniq_key()?),
            (keys::TRANSACTION_CHECK_TIMES, "1"),
            (OUTCOME_PROPERTY, "unknown"),
            // Apache marks the checked copy WAIT=false (whatever the producer sent: Java sent
            // true, Go nothing) and stores the broker's region and trace switch with it.
            (keys::WAIT_STORE_MSG_OK, "false"),
            (keys::MSG_REGION, "DefaultRegion"),
            (keys::TRACE_SWITCH, "true"),
        ] {
            assert_eq!(p.get(key), Some(value), "{what}: property {key}");
        }
        // ... and does not add TRAN_PREPARED_QUEUE_OFFSET to a copy it puts back for a check.
        assert_eq!(
            p.get(keys::TRANSACTION_PREPARED_QUEUE_OFFSET),
            None,
            "{what}"
        );

        // The client answers with the check's own offsets and ids.
        let (_, answer) = end_transactions(&frames)?
            .into_iter()
            .find(|(_, e)| e.from_transaction_check == Some(true))
            .ok_or("no check answer")?;
        assert_eq!(
            answer.tran_state_table_offset, h.tran_state_table_offset,
            "{what}"
        );
        assert_eq!(answer.commit_log_offset, h.commit_log_offset, "{what}");
        assert_eq!(Some(answer.msg_id.as_str()), h.msg_id.as_deref(), "{what}");
        assert_eq!(answer.transaction_id, h.transaction_id, "{what}");
    }
    Ok(())
}

#[test]
fn committed_transactions_are_stored_in_the_real_topic() -> TestResult {
    for peer in &TX_PEERS {
        let frames = load(peer)?;
        let ends = end_transactions(&frames)?;
        let commit_of = |body: &[u8]| -> Option<i64> {
            let outcome = match body {
                b"tx-commit" => "commit",
                b"tx-unknown" => "unknown",
                _ => return None,
            };
            // The committed record points back at the half it was made from.
            let sends = half_sends(peer, &frames).ok()?;
            let uniq = sends
                .iter()
                .find(|s| s.outcome == outcome)?
                .uniq_key()
                .ok()?
                .to_owned();
            ends.iter()
                .find(|(_, e)| e.msg_id == uniq && e.commit_or_rollback == transaction_flag::COMMIT)
                .map(|(_, e)| e.commit_log_offset)
        };
        let mut bodies = Vec::new();
        for rsp in frames
            .iter()
            .filter(|f| f.request_code() == Some(i64::from(PULL_MESSAGE)) && f.cmd.code == SUCCESS)
        {
            for m in decode_records(body(rsp)?, true)? {
                let what = format!("{}/{}", peer.dir, rsp.file);
                assert_eq!(m.topic, peer.topic, "{what}");
                assert_eq!(
                    sysflag::transaction_type(m.sys_flag),
                    sysflag::TRANSACTION_COMMIT_TYPE,
                    "{what}"
                );
                assert_eq!(
                    Some(m.prepared_transaction_offset),
                    commit_of(&m.body),
                    "{what}"
                );
                // Apache 5.3.3 keeps the half's bookkeeping properties on the committed message:
                // REAL_TOPIC, REAL_QID and TRAN_MSG=true (see the fixtures README).
                assert_eq!(
                    m.properties.get(keys::REAL_TOPIC),
                    Some(peer.topic),
                    "{what}"
                );
                let queue = m.queue_id.to_string();
                assert_eq!(
                    m.properties.get(keys::REAL_QUEUE_ID),
                    Some(queue.as_str()),
                    "{what}"
                );
                assert_eq!(
                    m.properties.get(keys::TRANSACTION_PREPARED),
                    Some("true"),
                    "{what}"
                );
                bodies.push(m.body.clone());
            }
        }
        bodies.sort();
        bodies.dedup();
        assert_eq!(bodies, [&b"tx-commit"[..], b"tx-unknown"], "{}", peer.dir);
    }
    Ok(())
}

#[test]
fn go_end_transaction_without_oneway_bit_gets_answers() -> TestResult {
    // Go's InvokeOneWay leaves flag 0, so the 5.3.3 broker answers every END_TRANSACTION that it
    // acts on (commit, rollback, the check's commit) and stays silent on "unknown" (0).
    let peer = &TX_PEERS[4];
    let frames = load(peer)?;
    for (f, end) in end_transactions(&frames)? {
        let rsp = response_to(&frames, f);
        match end.commit_or_rollback {
            transaction_flag::NOT_TYPE => assert!(rsp.is_err(), "{}: unknown answered", f.file),
            flag => {
                let rsp = rsp?;
                assert_eq!(rsp.cmd.code, SUCCESS, "{}", f.file);
                let remark = (flag == transaction_flag::ROLLBACK).then_some(UNSET_RESPONSE_REMARK);
                assert_eq!(rsp.cmd.remark.as_deref(), remark, "{}", f.file);
            }
        }
    }
    // Java's END_TRANSACTION is truly oneway: never answered.
    for peer in TX_PEERS.iter().filter(|p| p.language == LanguageCode::Java) {
        let frames = load(peer)?;
        for (f, _) in end_transactions(&frames)? {
            assert!(response_to(&frames, f).is_err(), "{}/{}", peer.dir, f.file);
        }
    }
    Ok(())
}
