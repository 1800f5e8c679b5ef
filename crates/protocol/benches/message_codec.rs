//! Message codec throughput: the per-record costs the store pays on dispatch/recovery
//! (`decode_record_view`), the client pays per pulled message (`decode_record`), the broker pays
//! per stored message (`encode_record`), and everyone pays per properties string.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use bytes::{Bytes, BytesMut};
use comet_protocol::message::properties::keys;
use comet_protocol::message::{MessageExt, Properties, record};
use criterion::{Criterion, criterion_group, criterion_main};

/// Body size of the benchmarked record.
const BODY_LEN: usize = 1024;

fn sample_message() -> MessageExt {
    let body = Bytes::from(vec![0x5A_u8; BODY_LEN]);
    let mut msg = MessageExt::new("BenchmarkTopic", body);
    msg.queue_id = 3;
    msg.queue_offset = 123_456;
    msg.commit_log_offset = 987_654_321;
    msg.born_timestamp = 1_700_000_000_000;
    msg.store_timestamp = 1_700_000_000_001;
    msg.born_host = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 50_000);
    msg.store_host = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 10_911);
    msg.body_crc = record::body_crc(&msg.body);
    msg.properties = five_properties();
    msg
}

fn five_properties() -> Properties {
    [
        (keys::TAGS, "TagA"),
        (keys::KEYS, "order-1 order-2"),
        (keys::WAIT_STORE_MSG_OK, "true"),
        (keys::UNIQ_KEY, "0A0000010000000000000000000000AB"),
        (keys::CLUSTER, "DefaultCluster"),
    ]
    .into_iter()
    .collect()
}

fn bench(c: &mut Criterion) {
    let msg = sample_message();
    let mut buf = BytesMut::new();
    if let Err(e) = record::encode_record(&msg, &mut buf) {
        panic!("sample record does not encode: {e}");
    }
    let encoded = buf.freeze();

    c.bench_function("decode_record_view (1 KiB body)", |b| {
        b.iter(|| record::decode_record_view(black_box(&encoded)))
    });
    c.bench_function("decode_record (1 KiB body, no CRC)", |b| {
        b.iter(|| record::decode_record(black_box(&encoded), false))
    });
    c.bench_function("decode_record (1 KiB body, CRC)", |b| {
        b.iter(|| record::decode_record(black_box(&encoded), true))
    });
    let mut out = BytesMut::with_capacity(encoded.len() * 2);
    c.bench_function("encode_record (1 KiB body)", |b| {
        b.iter(|| {
            out.clear();
            record::encode_record(black_box(&msg), &mut out)
        })
    });
    let props = five_properties().encode();
    c.bench_function("Properties::parse (5 keys)", |b| {
        b.iter(|| Properties::parse(black_box(&props)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
