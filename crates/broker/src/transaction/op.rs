//! Op records: the durable "this half is finished" marks in `RMQ_SYS_TRANS_OP_HALF_TOPIC`.
//!
//! A commit or rollback never touches the half message itself (the commit log is append-only);
//! instead it appends an op record to the op queue of the same queue id, tagged `d` ("removed"),
//! whose body lists the half queue offsets it finishes as decimal text. RocketMQ 4.x writes one
//! offset per record; 5.x may batch several, separated by `,`. The check service reads both, so a
//! store written by either (or by Comet) is understood.

use std::net::SocketAddr;

use bytes::Bytes;
use comet_protocol::message::MessageExt;
use comet_protocol::message::properties::keys;

use comet_protocol::naming::TRANS_OP_HALF_TOPIC;

/// Tag of an op record that finishes half messages (`TransactionalMessageUtil.REMOVETAG`).
pub const REMOVE_TAG: &str = "d";
/// Separator of offsets in a batched op body (RocketMQ 5.x).
pub const OFFSET_SEPARATOR: char = ',';
/// Most offsets read from one op body: a bound on what one corrupt or hostile record can make
/// the check service allocate.
pub const MAX_OFFSETS_PER_OP_RECORD: usize = 4096;

/// The op record finishing `half_offsets` of half queue `queue_id` (at least one offset).
pub fn op_message(
    half_offsets: &[i64],
    queue_id: i32,
    store_host: SocketAddr,
    uniq_key: String,
    now_ms: i64,
) -> MessageExt {
    let body = half_offsets
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(&OFFSET_SEPARATOR.to_string());
    let mut msg = MessageExt::new(TRANS_OP_HALF_TOPIC, Bytes::from(body));
    msg.queue_id = queue_id;
    msg.properties.insert(keys::TAGS, REMOVE_TAG);
    msg.properties.insert(keys::WAIT_STORE_MSG_OK, "false");
    msg.properties.insert(keys::UNIQ_KEY, uniq_key);
    msg.born_timestamp = now_ms;
    msg.born_host = store_host;
    msg.store_host = store_host;
    msg
}

/// The half queue offsets an op body finishes. Entries that are not numbers are skipped (a
/// Java broker logs and ignores them too); at most [`MAX_OFFSETS_PER_OP_RECORD`] are returned.
pub fn decode_op_body(body: &[u8]) -> Vec<i64> {
    let Ok(text) = std::str::from_utf8(body) else {
        return Vec::new();
    };
    text.split(OFFSET_SEPARATOR)
        .filter_map(|part| part.trim().parse::<i64>().ok())
        .filter(|offset| *offset >= 0)
        .take(MAX_OFFSETS_PER_OP_RECORD)
        .collect()
}

/// Whether a stored op record is a removal mark.
pub fn is_remove_op(msg: &MessageExt) -> bool {
    msg.tags() == Some(REMOVE_TAG)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_and_batched_bodies() {
        assert_eq!(decode_op_body(b"17"), vec![17]);
        assert_eq!(decode_op_body(b"1,2,30"), vec![1, 2, 30]);
        assert_eq!(decode_op_body(b" 4 , x,,-3,5"), vec![4, 5]);
        assert!(decode_op_body(b"").is_empty());
        assert!(decode_op_body(&[0xff, 0xfe]).is_empty());
        let many = vec!["1"; MAX_OFFSETS_PER_OP_RECORD + 10].join(",");
        assert_eq!(
            decode_op_body(many.as_bytes()).len(),
            MAX_OFFSETS_PER_OP_RECORD
        );
    }

    #[test]
    fn op_message_round_trips() {
        let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
        let msg = op_message(&[12, 3], 0, host, "U".into(), 99);
        assert_eq!(msg.topic, TRANS_OP_HALF_TOPIC);
        assert!(is_remove_op(&msg));
        assert_eq!(decode_op_body(&msg.body), vec![12, 3]);
        assert_eq!(msg.born_timestamp, 99);
    }
}
