//! A stored message as a v2 `Message`, the shape gRPC clients receive it in.
//!
//! The message id is the UNIQ_KEY (the offset message id when absent); tag, keys, message group
//! (`__SHARDINGKEY`), delivery time (TIMER_DELIVER_MS), born and store information, queue and
//! offset are filled from the record, `delivery_attempt` is the reconsume count plus one, and the
//! body digest is the upper-case MD5 hex of the body, which the Java client compares exactly. User
//! properties are every property a client may set itself.

use std::collections::HashMap;

use comet_grpc_proto::v2;
use comet_protocol::message::properties::keys;
use comet_protocol::message::{MessageExt, sysflag};
use md5::{Digest, Md5};

use super::send::RESERVED_KEYS;

/// `msg` as a v2 message of type `message_type`.
pub fn to_v2(msg: &MessageExt, message_type: v2::MessageType) -> v2::Message {
    let property = |key: &str| msg.properties.get(key).map(str::to_owned);
    let user_properties: HashMap<String, String> = msg
        .properties
        .iter()
        .filter(|(k, _)| !RESERVED_KEYS.contains(k))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let encoding = if msg.sys_flag & sysflag::COMPRESSED != 0 {
        v2::Encoding::Gzip
    } else {
        v2::Encoding::Identity
    };
    let system = v2::SystemProperties {
        tag: property(keys::TAGS),
        keys: msg.keys().map(str::to_owned).collect(),
        message_id: msg
            .uniq_key()
            .map_or_else(|| msg.offset_msg_id(), str::to_owned),
        body_digest: Some(v2::Digest {
            r#type: v2::DigestType::Md5 as i32,
            checksum: md5_upper_hex(&msg.body),
        }),
        body_encoding: encoding as i32,
        message_type: message_type as i32,
        born_timestamp: Some(timestamp(msg.born_timestamp)),
        born_host: msg.born_host.ip().to_string(),
        store_timestamp: Some(timestamp(msg.store_timestamp)),
        store_host: msg.store_host.to_string(),
        delivery_timestamp: property(keys::TIMER_DELIVER_MS)
            .and_then(|ms| ms.trim().parse().ok())
            .map(timestamp),
        queue_id: msg.queue_id,
        queue_offset: Some(msg.queue_offset),
        delivery_attempt: Some(msg.reconsume_times.saturating_add(1)),
        message_group: property(keys::SHARDING_KEY),
        trace_context: property(super::send::TRACE_CONTEXT),
        dead_letter_queue: dead_letter_queue(msg),
        ..v2::SystemProperties::default()
    };
    v2::Message {
        topic: Some(v2::Resource {
            resource_namespace: String::new(),
            name: msg.topic.clone(),
        }),
        user_properties,
        system_properties: Some(system),
        body: msg.body.to_vec(),
    }
}

/// Where a dead-lettered message came from, when it carries both DLQ_ORIGIN_TOPIC and
/// DLQ_ORIGIN_MESSAGE_ID (the pair Apache's proxy reports; one alone reports nothing).
fn dead_letter_queue(msg: &MessageExt) -> Option<v2::DeadLetterQueue> {
    let topic = msg.properties.get(keys::DLQ_ORIGIN_TOPIC)?;
    let message_id = msg.properties.get(keys::DLQ_ORIGIN_MESSAGE_ID)?;
    Some(v2::DeadLetterQueue {
        topic: topic.to_owned(),
        message_id: message_id.to_owned(),
    })
}

/// The upper-case MD5 hex of `body`.
pub fn md5_upper_hex(body: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let digest = Md5::digest(body);
    let mut out = String::with_capacity(digest.len() * 2);
    for b in digest {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0x0F)]));
    }
    out
}

fn timestamp(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ms.div_euclid(1000),
        nanos: i32::try_from(ms.rem_euclid(1000) * 1_000_000).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn digest_is_upper_case_md5() {
        assert_eq!(md5_upper_hex(b""), "D41D8CD98F00B204E9800998ECF8427E");
    }

    #[test]
    fn stored_fields_and_user_properties_are_mapped() {
        let mut msg = MessageExt::new("T", Bytes::from_static(b"body"));
        msg.properties.insert(keys::UNIQ_KEY, "ID1");
        msg.properties.insert(keys::TAGS, "TagA");
        msg.properties.insert(keys::KEYS, "k1 k2");
        msg.properties.insert("seq", "3");
        msg.reconsume_times = 2;
        msg.born_timestamp = 1_500;
        let v2 = to_v2(&msg, v2::MessageType::Transaction);
        let system = v2.system_properties.expect("set");
        assert_eq!(system.message_id, "ID1");
        assert_eq!(system.tag.as_deref(), Some("TagA"));
        assert_eq!(system.keys, vec!["k1", "k2"]);
        assert_eq!(system.delivery_attempt, Some(3));
        assert_eq!(system.message_type(), v2::MessageType::Transaction);
        assert_eq!(
            system.born_timestamp,
            Some(prost_types::Timestamp {
                seconds: 1,
                nanos: 500_000_000
            })
        );
        assert_eq!(v2.user_properties.len(), 1);
        assert_eq!(v2.user_properties.get("seq").map(String::as_str), Some("3"));
        assert_eq!(system.dead_letter_queue, None);
    }

    #[test]
    fn the_origin_of_a_dead_letter_needs_both_properties() {
        let mut msg = MessageExt::new("%DLQ%G", Bytes::from_static(b"body"));
        msg.properties.insert(keys::DLQ_ORIGIN_TOPIC, "T");
        let system = |msg: &MessageExt| {
            to_v2(msg, v2::MessageType::Normal)
                .system_properties
                .expect("set")
        };
        assert_eq!(system(&msg).dead_letter_queue, None);
        msg.properties.insert(keys::DLQ_ORIGIN_MESSAGE_ID, "ID9");
        assert_eq!(
            system(&msg).dead_letter_queue,
            Some(v2::DeadLetterQueue {
                topic: "T".to_owned(),
                message_id: "ID9".to_owned(),
            })
        );
    }
}
