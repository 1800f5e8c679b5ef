//! Property tests of the header layer: both header codecs round-trip arbitrary commands through
//! `frame::encode` + `frame::decode_frame`, every typed header round-trips through its ext fields,
//! and `frame::decode_frame` survives arbitrary bytes.

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes, BytesMut};
use proptest::prelude::*;

use comet_protocol::command::{ExtFields, LanguageCode, RemotingCommand, SerializeType};
use comet_protocol::frame;
use comet_protocol::headers::*;

/// Most ext fields generated per command (far below the codec limit, enough to shake ordering).
const MAX_GEN_FIELDS: usize = 12;
/// Largest generated body.
const MAX_GEN_BODY: usize = 256;

const KNOWN_LANGUAGES: [LanguageCode; 14] = [
    LanguageCode::Java,
    LanguageCode::Cpp,
    LanguageCode::Dotnet,
    LanguageCode::Python,
    LanguageCode::Delphi,
    LanguageCode::Erlang,
    LanguageCode::Ruby,
    LanguageCode::Other,
    LanguageCode::Http,
    LanguageCode::Go,
    LanguageCode::Php,
    LanguageCode::Oms,
    LanguageCode::Rust,
    LanguageCode::NodeJs,
];

/// Strings mixing ASCII, control characters, quotes/backslashes and non-ASCII (incl. astral).
fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => prop::char::range('a', 'z'),
            1 => prop::char::range('\u{0}', '\u{1f}'),
            1 => prop_oneof![Just('"'), Just('\\'), Just('/'), Just('\u{7f}')],
            1 => any::<char>(),
        ],
        0..24,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

fn ext_fields() -> impl Strategy<Value = ExtFields> {
    prop::collection::vec((text(), text()), 0..MAX_GEN_FIELDS)
        .prop_map(|kv| kv.into_iter().collect())
}

fn body() -> impl Strategy<Value = Option<Bytes>> {
    prop::option::of(prop::collection::vec(any::<u8>(), 1..MAX_GEN_BODY).prop_map(Bytes::from))
}

prop_compose! {
    fn json_command()(
        code in any::<i32>(),
        language in prop::sample::select(KNOWN_LANGUAGES.to_vec()),
        version in any::<i32>(),
        opaque in any::<i32>(),
        flag in any::<i32>(),
        remark in prop::option::of(text()),
        ext in prop::option::of(ext_fields()),
        body in body(),
    ) -> RemotingCommand {
        RemotingCommand {
            code, language, version, opaque, flag, remark, ext_fields: ext, body, body_parts: Vec::new(),
            serialize_type: SerializeType::Json, hold: None,
        }
    }
}

prop_compose! {
    /// The binary codec carries code and version as i16, cannot tell an empty remark or ext map
    /// from an absent one, and keeps unknown language bytes.
    fn binary_command()(
        code in any::<i16>(),
        language in prop_oneof![
            prop::sample::select(KNOWN_LANGUAGES.to_vec()),
            (14u8..=255).prop_map(LanguageCode::Unknown),
        ],
        version in any::<i16>(),
        opaque in any::<i32>(),
        flag in any::<i32>(),
        remark in prop::option::of(text().prop_filter("non-empty", |s| !s.is_empty())),
        ext in prop::option::of(ext_fields().prop_filter("non-empty", |e| !e.is_empty())),
        body in body(),
    ) -> RemotingCommand {
        RemotingCommand {
            code: code.into(), language, version: version.into(), opaque, flag, remark, ext_fields: ext, body, body_parts: Vec::new(),
            serialize_type: SerializeType::RocketMq, hold: None,
        }
    }
}

fn round_trip(cmd: &RemotingCommand) -> Result<(), TestCaseError> {
    let mut buf = BytesMut::new();
    frame::encode(cmd, &mut buf).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let decoded = frame::decode_frame(&mut buf).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(decoded.as_ref(), Some(cmd));
    prop_assert!(buf.is_empty());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn json_header_round_trips(cmd in json_command()) {
        round_trip(&cmd)?;
    }

    #[test]
    fn binary_header_round_trips(cmd in binary_command()) {
        round_trip(&cmd)?;
    }

    #[test]
    fn two_frames_back_to_back(a in json_command(), b in binary_command()) {
        let mut buf = BytesMut::new();
        frame::encode(&a, &mut buf).map_err(|e| TestCaseError::fail(e.to_string()))?;
        frame::encode(&b, &mut buf).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let first = frame::decode_frame(&mut buf).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let second = frame::decode_frame(&mut buf).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(first, Some(a));
        prop_assert_eq!(second, Some(b));
    }

    #[test]
    fn decode_frame_never_panics_on_garbage(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let mut buf = BytesMut::from(&bytes[..]);
        // Keep decoding until the input is exhausted or rejected; any outcome but a panic is fine.
        while let Ok(Some(_)) = frame::decode_frame(&mut buf) {}
    }

    #[test]
    fn decode_frame_never_panics_on_plausible_frames(
        ser in 0u8..3,
        header_len in 0u32..600,
        payload in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        // A well-formed length prefix and mark in front of random header bytes reaches the codecs.
        let mut buf = BytesMut::new();
        buf.put_u32(4 + payload.len() as u32);
        buf.put_u32((u32::from(ser) << 24) | header_len);
        buf.put_slice(&payload);
        while let Ok(Some(_)) = frame::decode_frame(&mut buf) {}
    }
}

/// Raw material for one field value; the field's [`ValueKind`] picks what is used.
#[derive(Debug, Clone)]
struct Seed {
    present: bool,
    number: i64,
    flag: bool,
    text: String,
    pick: usize,
}

fn seeds(n: usize) -> impl Strategy<Value = Vec<Seed>> {
    prop::collection::vec(
        (
            any::<bool>(),
            any::<i64>(),
            any::<bool>(),
            text(),
            any::<usize>(),
        )
            .prop_map(|(present, number, flag, text, pick)| Seed {
                present,
                number,
                flag,
                text,
                pick,
            }),
        n,
    )
}

fn value_for(kind: ValueKind, seed: &Seed) -> String {
    match kind {
        ValueKind::Text => seed.text.clone(),
        ValueKind::Int => (seed.number as i32).to_string(),
        ValueKind::Long => seed.number.to_string(),
        ValueKind::Bool => seed.flag.to_string(),
        ValueKind::OneOf(names) => names
            .get(seed.pick % names.len().max(1))
            .copied()
            .unwrap_or_default()
            .to_owned(),
    }
}

/// The inherited RpcHeader keys, when a header embeds them.
fn all_fields<H: HeaderSpec>() -> Vec<FieldSpec> {
    let mut fields = H::FIELDS.to_vec();
    if H::HAS_RPC {
        fields.extend_from_slice(RpcHeader::FIELDS);
    }
    fields
}

fn as_map(ext: &ExtFields) -> BTreeMap<String, String> {
    ext.iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Builds canonical ext fields for `H` from `seeds`, parses them, writes them back, and checks
/// that nothing was lost or changed in either direction.
fn check_header<H: CommandHeader + HeaderSpec + PartialEq + std::fmt::Debug>(
    seeds: &[Seed],
) -> Result<(), TestCaseError> {
    let fields = all_fields::<H>();
    let mut ext = ExtFields::new();
    for (spec, seed) in fields.iter().zip(seeds) {
        if spec.required || seed.present {
            ext.insert(spec.key, value_for(spec.kind, seed));
        }
    }
    let header =
        H::from_ext_fields(&ext).map_err(|e| TestCaseError::fail(format!("{e} from {ext:?}")))?;
    let mut written = ExtFields::new();
    header.to_ext_fields(&mut written);
    prop_assert_eq!(as_map(&written), as_map(&ext));
    let again = H::from_ext_fields(&written).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&again, &header);

    // Dropping any required field is reported under that field's key.
    for spec in fields.iter().filter(|s| s.required) {
        let mut missing = ext.clone();
        missing.remove(spec.key);
        prop_assert_eq!(
            H::from_ext_fields(&missing).err(),
            Some(comet_protocol::ProtocolError::MissingField(spec.key))
        );
    }
    Ok(())
}

/// Seeds for the widest header (field count plus the five inherited keys).
const MAX_SEEDS: usize = 24;

macro_rules! header_round_trips {
    ($($ty:ident),* $(,)?) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]
            #[test]
            fn every_typed_header_round_trips(seeds in seeds(MAX_SEEDS)) {
                $(
                    prop_assert!(all_fields::<$ty>().len() <= MAX_SEEDS, "{} has too many fields", stringify!($ty));
                    check_header::<$ty>(&seeds)?;
                )*
            }
        }
    };
}

header_round_trips!(
    RpcHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
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
    ConsumerSendMsgBackRequestHeader,
    HeartbeatRequestHeader,
    HeartbeatResponseHeader,
    UnregisterClientRequestHeader,
    GetConsumerListByGroupRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    LockBatchMqRequestHeader,
    EndTransactionRequestHeader,
    CheckTransactionStateRequestHeader,
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
    ViewBrokerStatsDataRequestHeader,
);

proptest! {
    /// V1 → V2 → V1 is the identity, and both key sets decode to the same header.
    #[test]
    fn send_v1_v2_conversion(seeds in seeds(MAX_SEEDS)) {
        let fields = all_fields::<SendMessageRequestHeader>();
        let mut ext = ExtFields::new();
        for (spec, seed) in fields.iter().zip(&seeds) {
            if spec.required || seed.present {
                ext.insert(spec.key, value_for(spec.kind, seed));
            }
        }
        let v1 = SendMessageRequestHeader::from_ext_fields(&ext).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let v2 = SendMessageRequestHeaderV2::from(v1.clone());
        let mut v2_ext = ExtFields::new();
        v2.to_ext_fields(&mut v2_ext);
        let via_v2 = SendMessageRequestHeader::decode_for_code(310, &v2_ext).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(via_v2, v1);
    }
}
