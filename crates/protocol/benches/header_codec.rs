//! Header codec benchmarks on the produce hot path: a realistic SEND_MESSAGE_V2 request header
//! (13 ext fields, as the Java producer sends) encoded and decoded with the JSON and ROCKETMQ
//! codecs, and the typed V2 header parsed from / written to its ext fields.

use std::hint::black_box;

use bytes::BytesMut;
use criterion::{Criterion, criterion_group, criterion_main};

use comet_protocol::code::RequestCode;
use comet_protocol::command::{ExtFields, LanguageCode, RemotingCommand, SerializeType};
use comet_protocol::header::{binary, json};
use comet_protocol::headers::{CommandHeader, SendMessageRequestHeaderV2};

fn send_v2_header() -> SendMessageRequestHeaderV2 {
    SendMessageRequestHeaderV2 {
        producer_group: "please_rename_unique_group_name".into(),
        topic: "TopicTest".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 3,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_123,
        flag: 0,
        properties: Some("KEYS\u{1}order-1234\u{2}UNIQ_KEY\u{1}7F000001B8F418B4AAC27B4C5B4E0000\u{2}WAIT\u{1}true\u{2}TAGS\u{1}TagA\u{2}".into()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        max_reconsume_times: Some(16),
        batch: Some(false),
        broker_name: None,
        rpc: Default::default(),
    }
}

fn send_v2_command(ser: SerializeType) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(RequestCode::SendMessageV2);
    cmd.language = LanguageCode::Java;
    cmd.opaque = 123_456;
    cmd.serialize_type = ser;
    let mut ext = ExtFields::with_capacity(16);
    send_v2_header().to_ext_fields(&mut ext);
    cmd.ext_fields = Some(ext);
    cmd
}

fn bench_codecs(c: &mut Criterion) {
    let json_cmd = send_v2_command(SerializeType::Json);
    let bin_cmd = send_v2_command(SerializeType::RocketMq);
    assert_eq!(json_cmd.ext_fields.as_ref().map(ExtFields::len), Some(13));

    let mut json_bytes = BytesMut::new();
    json::encode(&json_cmd, &mut json_bytes);
    let mut bin_bytes = BytesMut::new();
    binary::encode(&bin_cmd, &mut bin_bytes).expect("binary encode");

    let mut group = c.benchmark_group("send_v2_header");
    let mut buf = BytesMut::with_capacity(1024);
    group.bench_function("json_encode", |b| {
        b.iter(|| {
            buf.clear();
            json::encode(black_box(&json_cmd), &mut buf);
            black_box(buf.len())
        })
    });
    group.bench_function("json_decode", |b| {
        b.iter(|| json::decode(black_box(&json_bytes)))
    });
    group.bench_function("rocketmq_encode", |b| {
        b.iter(|| {
            buf.clear();
            binary::encode(black_box(&bin_cmd), &mut buf).map(|()| buf.len())
        })
    });
    group.bench_function("rocketmq_decode", |b| {
        b.iter(|| binary::decode(black_box(&bin_bytes)))
    });

    let ext = json_cmd.ext_fields.clone().unwrap_or_default();
    group.bench_function("typed_parse", |b| {
        b.iter(|| SendMessageRequestHeaderV2::from_ext_fields(black_box(&ext)))
    });
    let header = send_v2_header();
    group.bench_function("typed_write", |b| {
        b.iter(|| {
            let mut out = ExtFields::with_capacity(16);
            black_box(&header).to_ext_fields(&mut out);
            out
        })
    });
    group.finish();
}

criterion_group!(benches, bench_codecs);
criterion_main!(benches);
