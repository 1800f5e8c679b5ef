//! Property tests of the message codec: every encoder round-trips through its decoder, and no
//! decoder panics on arbitrary bytes (they all sit on network or disk input).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::{Bytes, BytesMut};
use comet_protocol::message::batch::{self, BatchEntry};
use comet_protocol::message::compress::{self, CompressionType};
use comet_protocol::message::id::{self, UniqIdGenerator};
use comet_protocol::message::record::{self, MAX_RECORD_TOPIC_LEN};
use comet_protocol::message::{MessageExt, Properties, sysflag, tags_hash};
use proptest::prelude::*;

/// Properties keys/values without the separators 0x01/0x02 and non-empty.
fn prop_text() -> impl Strategy<Value = String> {
    "[^\u{1}\u{2}]{1,12}"
}

fn properties() -> impl Strategy<Value = Properties> {
    proptest::collection::vec((prop_text(), prop_text()), 0..8)
        .prop_map(|pairs| pairs.into_iter().collect())
}

fn socket_addr() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>())
            .prop_map(|(ip, port)| SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port)),
        (any::<[u8; 16]>(), any::<u16>())
            .prop_map(|(ip, port)| SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port)),
    ]
}

/// Topics on both sides of the V1/V2 boundary (127 bytes), up to the 255-byte maximum.
fn topic() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9_%-]{0,127}",
        "[A-Za-z0-9_%-]{128,255}",
        "[\u{4e00}-\u{4e20}]{1,40}",
    ]
    .prop_filter("topic fits a record", |t| t.len() <= MAX_RECORD_TOPIC_LEN)
}

prop_compose! {
    fn message()(
        topic in topic(),
        body in proptest::collection::vec(any::<u8>(), 0..2048),
        properties in properties(),
        flag in any::<i32>(),
        queue_id in any::<i32>(),
        queue_offset in any::<i64>(),
        // Only bits the encoder does not derive itself.
        sys_flag in any::<i32>().prop_map(|f| f & !(sysflag::BORNHOST_V6 | sysflag::STOREHOSTADDRESS_V6)),
        born_timestamp in any::<i64>(),
        born_host in socket_addr(),
        store_timestamp in any::<i64>(),
        store_host in socket_addr(),
        commit_log_offset in any::<i64>(),
        reconsume_times in any::<i32>(),
        prepared_transaction_offset in any::<i64>(),
    ) -> MessageExt {
        let body_crc = record::body_crc(&body);
        MessageExt {
            topic, flag, body: Bytes::from(body), properties, queue_id, store_size: 0,
            queue_offset, sys_flag, born_timestamp, born_host, store_timestamp, store_host,
            commit_log_offset, body_crc, reconsume_times, prepared_transaction_offset,
        }
    }
}

/// What a decoded record holds for `msg`: the encoder fills in TOTALSIZE and the V6 bits.
fn as_stored(msg: &MessageExt, size: usize) -> MessageExt {
    let mut expected = msg.clone();
    expected.store_size = size as i32;
    expected.sys_flag = sysflag::with_host_families(
        msg.sys_flag,
        msg.born_host.is_ipv6(),
        msg.store_host.is_ipv6(),
    );
    expected
}

proptest! {
    #[test]
    fn record_round_trip(msg in message()) {
        let mut buf = BytesMut::new();
        record::encode_record(&msg, &mut buf).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let buf = buf.freeze();
        let expected_magic = if msg.topic.len() > 127 {
            comet_protocol::message::MESSAGE_MAGIC_V2
        } else {
            comet_protocol::message::MESSAGE_MAGIC_V1
        };
        prop_assert_eq!(record::peek_magic(&buf), Some(expected_magic));
        prop_assert_eq!(record::peek_total_size(&buf), Some(buf.len() as i32));
        let decoded = record::decode_record(&buf, true)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&decoded, &as_stored(&msg, buf.len()));

        let view = record::decode_record_view(&buf).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(view.topic, msg.topic.as_str());
        prop_assert_eq!(view.body, &msg.body[..]);
        let encoded_props = msg.properties.encode();
        prop_assert_eq!(view.properties, encoded_props.as_bytes());

        let mut slot = vec![0_u8; buf.len()];
        prop_assert_eq!(record::encode_record_into(&msg, &mut slot).ok(), Some(buf.len()));
        prop_assert_eq!(&slot[..], &buf[..]);
    }

    #[test]
    fn records_concatenate(msgs in proptest::collection::vec(message(), 0..5)) {
        let mut buf = BytesMut::new();
        let mut sizes = Vec::new();
        for msg in &msgs {
            let before = buf.len();
            record::encode_record(msg, &mut buf).map_err(|e| TestCaseError::fail(e.to_string()))?;
            sizes.push(buf.len() - before);
        }
        let decoded = record::decode_records(&buf.freeze(), true)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let expected: Vec<_> = msgs.iter().zip(sizes).map(|(m, s)| as_stored(m, s)).collect();
        prop_assert_eq!(decoded, expected);
    }

    #[test]
    fn properties_round_trip(props in properties()) {
        let encoded = props.encode();
        prop_assert_eq!(encoded.len(), props.encoded_len());
        let terminated = encoded.is_empty() || encoded.ends_with(char::from(2_u8));
        prop_assert!(terminated);
        prop_assert_eq!(&Properties::parse(&encoded), &props);
        prop_assert_eq!(Properties::parse_bytes(encoded.as_bytes()).ok(), Some(props.clone()));
        for (key, value) in props.iter() {
            prop_assert_eq!(
                comet_protocol::message::properties::find_property(encoded.as_bytes(), key),
                Some(value)
            );
        }
    }

    #[test]
    fn batch_round_trip(
        entries in proptest::collection::vec(
            (any::<i32>(), proptest::collection::vec(any::<u8>(), 0..512), properties()),
            0..10,
        )
    ) {
        let entries: Vec<BatchEntry> = entries
            .into_iter()
            .map(|(flag, body, properties)| BatchEntry { flag, body: Bytes::from(body), properties })
            .collect();
        let mut buf = BytesMut::new();
        batch::encode_batch(&entries, &mut buf).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let decoded = batch::decode_batch(&buf.freeze())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(decoded, entries);
    }

    #[test]
    fn offset_msg_id_round_trip(host in socket_addr(), offset in any::<i64>()) {
        let encoded = id::offset_msg_id(host, offset);
        let expected_len = if host.is_ipv4() { 32 } else { 56 };
        prop_assert_eq!(encoded.len(), expected_len);
        prop_assert!(encoded.bytes().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b)));
        prop_assert_eq!(id::decode_offset_msg_id(&encoded).ok(), Some((host, offset)));
    }

    #[test]
    fn uniq_id_round_trip(host in socket_addr(), pid in any::<i16>(), hash in any::<i32>(),
                          now in 0_i64..4_102_444_800_000) {
        let generator = UniqIdGenerator::with_parts(host.ip(), pid, hash);
        let first = generator.next_id_at(now);
        let second = generator.next_id_at(now);
        prop_assert_ne!(&first, &second);
        let parts = id::decode_uniq_id(&first).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parts.ip, host.ip());
        prop_assert_eq!(parts.pid, pid);
        prop_assert_eq!(parts.client_hash, hash);
        prop_assert_eq!(parts.counter, 0);
        prop_assert_eq!(parts.approx_timestamp(now + 1), now);
        prop_assert_eq!(id::decode_uniq_id(&second).ok().map(|p| p.counter), Some(1));
    }

    #[test]
    fn compress_round_trip(
        body in proptest::collection::vec(any::<u8>(), 0..8192),
        level in 0_i32..10,
        kind in prop_oneof![
            Just(CompressionType::Zlib),
            Just(CompressionType::Lz4),
            Just(CompressionType::Zstd),
        ],
    ) {
        let packed = compress::compress(kind, level, &body)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let flag = kind.mark(sysflag::TRANSACTION_COMMIT_TYPE);
        prop_assert_eq!(compress::decompress(flag, &packed, body.len()).ok(), Some(body.clone()));
        if !body.is_empty() {
            prop_assert!(compress::decompress(flag, &packed, body.len() - 1).is_err());
        }
    }

    #[test]
    fn tags_hash_is_java_hash_code(tags in "\\PC{0,20}") {
        // Reference: the definition s[0]*31^(n-1) + ... + s[n-1] over UTF-16 units, mod 2^32.
        let mut reference: u32 = 0;
        for unit in tags.encode_utf16() {
            reference = reference.wrapping_mul(31).wrapping_add(u32::from(unit));
        }
        prop_assert_eq!(tags_hash(&tags), i64::from(reference as i32));
    }

    #[test]
    fn arbitrary_bytes_never_panic_any_decoder(
        bytes in proptest::collection::vec(any::<u8>(), 0..512),
        sys_flag in any::<i32>(),
        text in "\\PC{0,64}",
    ) {
        let shared = Bytes::from(bytes.clone());
        let _ = record::decode_record_view(&bytes);
        let _ = record::decode_record(&shared, true);
        let _ = record::decode_records(&shared, false);
        let _ = record::peek_total_size(&bytes);
        let _ = record::peek_magic(&bytes);
        let _ = batch::decode_batch(&shared);
        let _ = Properties::parse_bytes(&bytes);
        let _ = Properties::parse(&text);
        let _ = comet_protocol::message::properties::find_property(&bytes, "TAGS");
        let _ = id::decode_offset_msg_id(&text);
        let _ = id::decode_uniq_id(&text);
        let _ = compress::decompress(sys_flag | sysflag::COMPRESSED, &bytes, 4096);
    }

    #[test]
    fn mutated_records_never_panic(msg in message(), pos in any::<prop::sample::Index>(),
                                    byte in any::<u8>(), cut in any::<prop::sample::Index>()) {
        // Arbitrary bytes almost never pass the magic check; corrupting one byte of a valid
        // record, and truncating it, exercises the deeper length checks.
        let mut buf = BytesMut::new();
        record::encode_record(&msg, &mut buf).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut bytes = buf.to_vec();
        let at = pos.index(bytes.len());
        if let Some(slot) = bytes.get_mut(at) {
            *slot = byte;
        }
        let shared = Bytes::from(bytes.clone());
        let _ = record::decode_record(&shared, true);
        let truncated = shared.slice(..cut.index(shared.len() + 1));
        let _ = record::decode_records(&truncated, false);
        prop_assert!(truncated.len() == shared.len() || record::decode_record(&truncated, false).is_err());
    }

    #[test]
    fn mutated_batches_never_panic(flag in any::<i32>(), body in proptest::collection::vec(any::<u8>(), 0..64),
                                   props in properties(), pos in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut buf = BytesMut::new();
        let entry = BatchEntry { flag, body: Bytes::from(body), properties: props };
        batch::encode_batch(&[entry.clone(), entry], &mut buf)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut bytes = buf.to_vec();
        let at = pos.index(bytes.len());
        if let Some(slot) = bytes.get_mut(at) {
            *slot = byte;
        }
        let _ = batch::decode_batch(&Bytes::from(bytes));
    }
}
