//! Fuzz checks for `comet-protocol`'s decoders, shared by the libFuzzer targets in
//! `fuzz_targets/` and the stable-toolchain `replay` harness.
//!
//! Every decoder in the protocol crate takes bytes from the network or from disk, so the contract
//! under test is the same everywhere: any input yields `Ok` or a `ProtocolError`, never a panic,
//! an abort or an allocation proportional to a length field instead of the input. Where a decoder
//! has an encoder, a successful decode is also re-encoded and decoded again and must give the same
//! value: Comet must be able to read back whatever it accepted and writes on.
//!
//! Each check is a plain function of `&[u8]`, so a crash input saved by libFuzzer can be replayed
//! on stable Rust (`cargo run --example replay -- <target> <file>`) and turned into a unit test.
//! Targets that cover a family of types (typed headers, JSON bodies) use the first input byte to
//! pick the type, so one corpus and one campaign cover all of them.

pub mod grpc;

use std::fmt::Debug;

use bytes::{Bytes, BytesMut};
use comet_protocol::body::{self, lenient};
use comet_protocol::command::ExtFields;
use comet_protocol::frame;
use comet_protocol::header;
use comet_protocol::headers::{self, CommandHeader, FieldSpec, HeaderSpec};
use comet_protocol::message::{batch, properties::Properties, record};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Separator between keys and values in a `typed_header` input (after the selector byte).
pub const EXT_FIELD_SEPARATOR: u8 = 0;

/// Most frames taken off one `frame` input, so a stream of tiny frames stays fast.
pub const MAX_FRAMES_PER_INPUT: usize = 64;

/// The names of the fuzz targets, in the order `replay` and `smoke.sh` run them.
pub const TARGETS: &[&str] = &[
    "frame",
    "header_json",
    "header_binary",
    "typed_header",
    "record",
    "batch",
    "properties",
    "json_body",
    "grpc",
];

/// Runs the check named `target` on `data`; `false` if no such target exists.
pub fn run(target: &str, data: &[u8]) -> bool {
    match target {
        "frame" => frame(data),
        "header_json" => header_json(data),
        "header_binary" => header_binary(data),
        "typed_header" => typed_header(data),
        "record" => record(data),
        "batch" => batch(data),
        "properties" => properties(data),
        "json_body" => json_body(data),
        "grpc" => grpc::grpc(data),
        _ => return false,
    }
    true
}

/// A stream of length-prefixed frames, decoded as the remoting codec does; every decoded command
/// must survive an encode/decode round trip unchanged. The bytes are also tried as one frame
/// whose prefix was already stripped.
pub fn frame(data: &[u8]) {
    let mut buf = BytesMut::from(data);
    for _ in 0..MAX_FRAMES_PER_INPUT {
        match frame::decode_frame(&mut buf) {
            Ok(Some(cmd)) => {
                if let Ok(bytes) = frame::encode_to_bytes(&cmd) {
                    let mut again = BytesMut::from(&bytes[..]);
                    let back = frame::decode_frame(&mut again);
                    assert_eq!(back, Ok(Some(cmd)), "frame round trip changed the command");
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
    let _ = frame::decode(Bytes::copy_from_slice(data));
}

/// A JSON header (the bytes between the 8-byte frame prefix and the body).
pub fn header_json(data: &[u8]) {
    let _ = header::json::decode(data);
}

/// A ROCKETMQ binary header.
pub fn header_binary(data: &[u8]) {
    let _ = header::binary::decode(data);
}

/// One typed header parser, chosen by the first byte; the rest is `key\0value\0key\0value...`.
pub fn typed_header(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Some(entry) = TYPED_HEADERS.get(usize::from(selector) % TYPED_HEADERS.len()) else {
        return;
    };
    (entry.check)(&ext_fields_from_bytes(rest));
}

/// Builds ext fields from `key\0value\0...` bytes (invalid UTF-8 replaced, a lone key gets "").
pub fn ext_fields_from_bytes(data: &[u8]) -> ExtFields {
    let mut ext = ExtFields::new();
    let mut tokens = data.split(|b| *b == EXT_FIELD_SEPARATOR);
    while let Some(key) = tokens.next() {
        let value = tokens.next().unwrap_or_default();
        ext.insert(String::from_utf8_lossy(key), String::from_utf8_lossy(value));
    }
    ext
}

/// The inverse of [`ext_fields_from_bytes`], for writing seeds.
pub fn ext_fields_to_bytes(ext: &ExtFields) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, (k, v)) in ext.iter().enumerate() {
        if i > 0 {
            out.push(EXT_FIELD_SEPARATOR);
        }
        out.extend_from_slice(k.as_bytes());
        out.push(EXT_FIELD_SEPARATOR);
        out.extend_from_slice(v.as_bytes());
    }
    out
}

/// A commit-log area: record stream, single record and zero-copy view; a record that decodes must
/// re-encode to a record that decodes to the same message.
pub fn record(data: &[u8]) {
    let bytes = Bytes::copy_from_slice(data);
    let _ = record::decode_records(&bytes, true);
    let _ = record::decode_records(&bytes, false);
    if let Ok(view) = record::decode_record_view(data) {
        let _ = view.properties();
        let _ = view.body_crc_matches();
        let _ = view.property("UNIQ_KEY");
    }
    if let Ok(mut msg) = record::decode_record(&bytes, false) {
        let mut out = BytesMut::new();
        if record::encode_record(&msg, &mut out).is_ok() {
            // Duplicate property keys collapse on decode, so the re-encoded record may be shorter:
            // TOTALSIZE is the one field allowed to change, and must match what was written.
            let written = i32::try_from(out.len()).unwrap_or(i32::MAX);
            msg.store_size = written;
            let back = record::decode_record(&out.freeze(), false);
            assert_eq!(back, Ok(msg), "record round trip changed the message");
        }
    }
}

/// A batch send body; decoded entries must round-trip through `encode_batch`.
pub fn batch(data: &[u8]) {
    let bytes = Bytes::copy_from_slice(data);
    if let Ok(entries) = batch::decode_batch(&bytes) {
        let mut out = BytesMut::new();
        if batch::encode_batch(&entries, &mut out).is_ok() {
            let back = batch::decode_batch(&out.freeze());
            assert_eq!(back, Ok(entries), "batch round trip changed the entries");
        }
    }
}

/// A message properties string; parsing what `encode` wrote must give the same properties.
pub fn properties(data: &[u8]) {
    let _ = comet_protocol::message::properties::find_property(data, "UNIQ_KEY");
    if let Ok(props) = Properties::parse_bytes(data) {
        let again = Properties::parse(&props.encode());
        assert_eq!(again, props, "properties round trip changed the map");
        let mut without = props.clone();
        without.remove_transient();
    }
    let _ = Properties::parse(&String::from_utf8_lossy(data));
}

/// A JSON body read with the fastjson-tolerant reader, as the type chosen by the first byte.
/// Whatever decodes must come back unchanged from Comet's fastjson and standard writers.
pub fn json_body(data: &[u8]) {
    let _ = lenient::normalize(data);
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    if let Some(entry) = JSON_BODIES.get(usize::from(selector) % JSON_BODIES.len()) {
        (entry.check)(rest);
    }
}

/// One typed header parser: its name, its fields (for seeding) and its check.
pub struct TypedHeader {
    pub name: &'static str,
    pub fields: &'static [FieldSpec],
    pub has_rpc: bool,
    pub check: fn(&ExtFields),
}

fn check_header<H: CommandHeader + PartialEq + Debug>(ext: &ExtFields) {
    if let Ok(parsed) = H::from_ext_fields(ext) {
        let mut out = ExtFields::new();
        parsed.to_ext_fields(&mut out);
        let back = H::from_ext_fields(&out);
        assert_eq!(
            back,
            Ok(parsed),
            "typed header round trip changed the value"
        );
    }
}

macro_rules! typed_headers {
    ($($ty:ident),* $(,)?) => {
        /// Every typed header in `comet_protocol::headers`; the `typed_header` selector byte
        /// indexes this table (modulo its length).
        pub static TYPED_HEADERS: &[TypedHeader] = &[$(
            TypedHeader {
                name: stringify!($ty),
                fields: <headers::$ty as HeaderSpec>::FIELDS,
                has_rpc: <headers::$ty as HeaderSpec>::HAS_RPC,
                check: check_header::<headers::$ty>,
            },
        )*];
    };
}

typed_headers!(
    RpcHeader,
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetTopicConfigRequestHeader,
    GetTopicStatsInfoRequestHeader,
    GetConsumeStatsRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
    ResetOffsetRequestHeader,
    GetConsumerStatusRequestHeader,
    HeartbeatRequestHeader,
    HeartbeatResponseHeader,
    UnregisterClientRequestHeader,
    GetConsumerListByGroupRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    LockBatchMqRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
    GetRouteInfoRequestHeader,
    PutKvConfigRequestHeader,
    GetKvConfigRequestHeader,
    GetKvConfigResponseHeader,
    DeleteKvConfigRequestHeader,
    GetKvListByNamespaceRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    RegisterTopicRequestHeader,
    GetTopicsByClusterRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    CheckTransactionStateRequestHeader,
);

/// One JSON body type: its name, whether bytes decode as it (for seeding) and its check.
pub struct JsonBody {
    pub name: &'static str,
    pub accepts: fn(&[u8]) -> bool,
    pub check: fn(&[u8]),
}

fn accepts<T: DeserializeOwned>(data: &[u8]) -> bool {
    lenient::from_fastjson::<T>(data).is_ok()
}

fn check_body<T: DeserializeOwned + Serialize + PartialEq + Debug>(data: &[u8]) {
    if let Ok(parsed) = lenient::from_fastjson::<T>(data) {
        if let Ok(text) = lenient::to_fastjson_bytes(&parsed) {
            let back = lenient::from_fastjson::<T>(&text);
            assert_eq!(
                back.as_ref(),
                Ok(&parsed),
                "fastjson round trip changed the body"
            );
        }
        if let Ok(text) = lenient::to_standard_json_bytes(&parsed) {
            let back = lenient::from_fastjson::<T>(&text);
            assert_eq!(
                back,
                Ok(parsed),
                "standard JSON round trip changed the body"
            );
        }
    }
}

fn check_heartbeat(data: &[u8]) {
    check_body::<body::HeartbeatData>(data);
    let _ = body::HeartbeatData::decode(data);
}

fn check_register_broker(data: &[u8]) {
    check_body::<body::RegisterBrokerBody>(data);
    let _ = body::RegisterBrokerBody::decode(data, false);
    let _ = body::RegisterBrokerBody::decode(data, true);
}

fn check_route(data: &[u8]) {
    check_body::<body::TopicRouteData>(data);
    let _ = body::TopicRouteData::decode(data);
}

fn check_cluster_info(data: &[u8]) {
    check_body::<body::ClusterInfo>(data);
    let _ = body::ClusterInfo::decode(data);
}

fn check_any_json(data: &[u8]) {
    let _ = lenient::from_fastjson::<serde_json::Value>(data);
}

macro_rules! json_bodies {
    ($($name:ident: $ty:ty => $check:expr),* $(,)?) => {
        /// Every JSON body type in `comet_protocol::body`; the `json_body` selector byte indexes
        /// this table (modulo its length).
        pub static JSON_BODIES: &[JsonBody] = &[$(
            JsonBody { name: stringify!($name), accepts: accepts::<$ty>, check: $check },
        )*];
    };
}

json_bodies!(
    Value: serde_json::Value => check_any_json,
    HeartbeatData: body::HeartbeatData => check_heartbeat,
    RegisterBrokerBody: body::RegisterBrokerBody => check_register_broker,
    TopicRouteData: body::TopicRouteData => check_route,
    ClusterInfo: body::ClusterInfo => check_cluster_info,
    LockBatchRequestBody: body::LockBatchRequestBody => check_body::<body::LockBatchRequestBody>,
    LockBatchResponseBody: body::LockBatchResponseBody => check_body::<body::LockBatchResponseBody>,
    UnlockBatchRequestBody: body::UnlockBatchRequestBody => check_body::<body::UnlockBatchRequestBody>,
    MessageQueue: body::MessageQueue => check_body::<body::MessageQueue>,
    ConsumeStats: body::ConsumeStats => check_body::<body::ConsumeStats>,
    TopicStatsTable: body::TopicStatsTable => check_body::<body::TopicStatsTable>,
    ConsumerConnection: body::ConsumerConnection => check_body::<body::ConsumerConnection>,
    ProducerConnection: body::ProducerConnection => check_body::<body::ProducerConnection>,
    GetConsumerListByGroupResponseBody: body::GetConsumerListByGroupResponseBody => check_body::<body::GetConsumerListByGroupResponseBody>,
    ResetOffsetBody: body::ResetOffsetBody => check_body::<body::ResetOffsetBody>,
    TopicList: body::TopicList => check_body::<body::TopicList>,
    KvTable: body::KvTable => check_body::<body::KvTable>,
    TopicConfig: body::TopicConfig => check_body::<body::TopicConfig>,
    DataVersion: body::DataVersion => check_body::<body::DataVersion>,
    TopicConfigSerializeWrapper: body::TopicConfigSerializeWrapper => check_body::<body::TopicConfigSerializeWrapper>,
    SubscriptionGroupConfig: body::SubscriptionGroupConfig => check_body::<body::SubscriptionGroupConfig>,
);
