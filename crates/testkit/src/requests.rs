//! Builders of the raw requests tests send to a broker: sends (V1, V2, batch), pulls and
//! heartbeats, with the properties they carry, and the decoding of a send's offset msgId.

use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use comet_protocol::RemotingCommand;
use comet_protocol::body::{ConsumerData, HeartbeatData, ProducerData, SubscriptionData};
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{
    PullMessageRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2, pull_sys_flag,
    request_with_header,
};
use comet_protocol::message::Properties;
use comet_protocol::message::batch::{BatchEntry, encode_batch};

/// The producer group tests send as.
pub const PRODUCER_GROUP: &str = "test_producer_group";

/// Current wall-clock milliseconds.
pub fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A properties string from pairs.
pub fn properties(pairs: &[(&str, &str)]) -> String {
    pairs.iter().copied().collect::<Properties>().encode()
}

/// The V1 send header of a single message.
pub fn send_header(topic: &str, queue_id: i32, props: &[(&str, &str)]) -> SendMessageRequestHeader {
    SendMessageRequestHeader {
        producer_group: PRODUCER_GROUP.to_owned(),
        topic: topic.to_owned(),
        default_topic: "TBW102".to_owned(),
        default_topic_queue_nums: 4,
        queue_id,
        sys_flag: 0,
        born_timestamp: now_millis(),
        flag: 0,
        properties: Some(properties(props)),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: None,
        max_reconsume_times: None,
        rpc: Default::default(),
    }
}

/// SEND_MESSAGE (10) with V1 keys.
pub fn send_v1(topic: &str, queue_id: i32, body: &[u8], props: &[(&str, &str)]) -> RemotingCommand {
    request_with_header(
        RequestCode::SendMessage,
        &send_header(topic, queue_id, props),
    )
    .with_body(Bytes::copy_from_slice(body))
}

/// SEND_MESSAGE_V2 (310) with the short keys.
pub fn send_v2(topic: &str, queue_id: i32, body: &[u8], props: &[(&str, &str)]) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2::from(send_header(topic, queue_id, props));
    request_with_header(RequestCode::SendMessageV2, &header).with_body(Bytes::copy_from_slice(body))
}

/// SEND_BATCH_MESSAGE (320): one entry per body, each with a TAGS property.
pub fn send_batch(topic: &str, queue_id: i32, bodies: &[&[u8]], tag: &str) -> RemotingCommand {
    let entries: Vec<BatchEntry> = bodies
        .iter()
        .map(|b| BatchEntry {
            flag: 0,
            body: Bytes::copy_from_slice(b),
            properties: [("TAGS", tag), ("WAIT", "true")].into_iter().collect(),
        })
        .collect();
    let mut body = BytesMut::new();
    encode_batch(&entries, &mut body).expect("batch encodes");
    let mut header = send_header(topic, queue_id, &[("WAIT", "true")]);
    header.batch = Some(true);
    let header = SendMessageRequestHeaderV2::from(header);
    request_with_header(RequestCode::SendBatchMessage, &header).with_body(body.freeze())
}

/// PULL_MESSAGE (11) without suspension, committing nothing.
pub fn pull(group: &str, topic: &str, queue_id: i32, offset: i64, max: i32) -> RemotingCommand {
    let header = PullMessageRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: max,
        sys_flag: pull_sys_flag::build(false, false, true, false),
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".to_owned()),
        sub_version: now_millis(),
        expression_type: Some("TAG".to_owned()),
        ..Default::default()
    };
    request_with_header(RequestCode::PullMessage, &header)
}

/// HEART_BEAT (34) of a push consumer of `group` subscribed to `topic` (all tags), plus a
/// producer of [`PRODUCER_GROUP`].
pub fn heartbeat(client_id: &str, group: &str, topic: &str) -> RemotingCommand {
    let data = HeartbeatData {
        client_id: client_id.to_owned(),
        producer_data_set: vec![ProducerData {
            group_name: PRODUCER_GROUP.to_owned(),
        }],
        consumer_data_set: vec![ConsumerData {
            group_name: group.to_owned(),
            subscription_data_set: vec![SubscriptionData::from_tag_expression(
                topic,
                "*",
                now_millis(),
            )],
            ..Default::default()
        }],
        ..Default::default()
    };
    RemotingCommand::request(RequestCode::HeartBeat)
        .with_body(data.encode().expect("heartbeat encodes"))
}

/// The broker address a response's offset msgId points at, and its commit-log offset.
pub fn decode_msg_id(msg_id: &str) -> (SocketAddr, i64) {
    comet_protocol::message::id::decode_offset_msg_id(msg_id).expect("valid offset msgId")
}
