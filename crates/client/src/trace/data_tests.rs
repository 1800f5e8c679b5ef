use super::*;

// The expected strings below were printed by Apache RocketMQ's Java client 5.3.3
// (`org.apache.rocketmq.client.trace.TraceDataEncoder.encoderFromContextBean`, run with the jars
// of interop/java's Maven classpath) for TraceContexts filled with the same values as the Rust
// contexts built here; `\u{1}` and `\u{2}` stand for the two separator characters.
const JAVA_PUB: &str = "Pub\u{1}1700000000123\u{1}DefaultRegion\u{1}pg\u{1}TopicA\u{1}\
    7F00000100002A9F0000000000000001\u{1}TagA\u{1}k1 k2\u{1}127.0.0.1:10911\u{1}11\u{1}7\u{1}0\u{1}\
    7F00000100002A9F00000000000000FF\u{1}true\u{2}";
const JAVA_SUB_BEFORE: &str = "SubBefore\u{1}1700000000200\u{1}DefaultRegion\u{1}cg\u{1}\
    7F0000010000REQ\u{1}7F00000100002A9F0000000000000001\u{1}2\u{1}k1 k2\u{2}";
const JAVA_SUB_AFTER: &str = "SubAfter\u{1}7F0000010000REQ\u{1}7F00000100002A9F0000000000000001\
    \u{1}5\u{1}false\u{1}k1 k2\u{1}4\u{1}1700000000200\u{1}cg\u{2}";
const JAVA_END_TRANSACTION: &str = "EndTransaction\u{1}1700000000300\u{1}DefaultRegion\u{1}tg\u{1}\
    TopicT\u{1}7F00000100002A9F0000000000000002\u{1}null\u{1}\u{1}127.0.0.1:10911\u{1}2\u{1}\
    7F00000100002A9F0000000000000002\u{1}COMMIT_MESSAGE\u{1}false\u{2}";

const MSG_ID: &str = "7F00000100002A9F0000000000000001";

fn pub_context() -> TraceContext {
    let mut ctx = TraceContext::new(TraceType::Pub, 1_700_000_000_123);
    ctx.region_id = "DefaultRegion".into();
    ctx.group_name = "pg".into();
    ctx.cost_time = 7;
    ctx.beans.push(TraceBean {
        topic: "TopicA".into(),
        msg_id: MSG_ID.into(),
        offset_msg_id: "7F00000100002A9F00000000000000FF".into(),
        tags: Some("TagA".into()),
        keys: Some("k1 k2".into()),
        store_host: "127.0.0.1:10911".into(),
        body_length: 11,
        ..TraceBean::default()
    });
    ctx
}

fn consume_bean() -> TraceBean {
    TraceBean {
        msg_id: MSG_ID.into(),
        retry_times: 2,
        keys: Some("k1 k2".into()),
        ..TraceBean::default()
    }
}

fn sub_before_context() -> TraceContext {
    let mut ctx = TraceContext::new(TraceType::SubBefore, 1_700_000_000_200);
    ctx.region_id = "DefaultRegion".into();
    ctx.group_name = "cg".into();
    ctx.request_id = "7F0000010000REQ".into();
    ctx.beans.push(consume_bean());
    ctx
}

fn sub_after_context() -> TraceContext {
    let mut ctx = sub_before_context();
    ctx.trace_type = TraceType::SubAfter;
    ctx.cost_time = 5;
    ctx.success = false;
    ctx.context_code = 4;
    ctx
}

fn end_transaction_context() -> TraceContext {
    let mut ctx = TraceContext::new(TraceType::EndTransaction, 1_700_000_000_300);
    ctx.region_id = "DefaultRegion".into();
    ctx.group_name = "tg".into();
    ctx.beans.push(TraceBean {
        topic: "TopicT".into(),
        msg_id: "7F00000100002A9F0000000000000002".into(),
        tags: None,
        keys: Some(String::new()),
        store_host: "127.0.0.1:10911".into(),
        msg_type: MessageType::TransMsgCommit,
        transaction_id: Some("7F00000100002A9F0000000000000002".into()),
        transaction_state: Some("COMMIT_MESSAGE".into()),
        ..TraceBean::default()
    });
    ctx
}

#[test]
fn encodings_equal_the_java_encoders_bytes() {
    assert_eq!(encode(&pub_context()).data, JAVA_PUB);
    assert_eq!(encode(&sub_before_context()).data, JAVA_SUB_BEFORE);
    assert_eq!(encode(&sub_after_context()).data, JAVA_SUB_AFTER);
    assert_eq!(
        encode(&end_transaction_context()).data,
        JAVA_END_TRANSACTION
    );
}

#[test]
fn keys_are_the_msg_id_and_the_message_keys() {
    let mut keys = encode(&pub_context()).keys;
    keys.sort();
    assert_eq!(keys, [MSG_ID, "k1", "k2"]);
    // Empty keys add nothing (Java's sample printed only the msgId).
    assert_eq!(
        encode(&end_transaction_context()).keys,
        ["7F00000100002A9F0000000000000002"]
    );
}

#[test]
fn every_record_type_round_trips() {
    let pub_ctx = pub_context();
    assert_eq!(decode(&encode(&pub_ctx).data).unwrap(), [pub_ctx]);

    let before = sub_before_context();
    let decoded = decode(&encode(&before).data).unwrap();
    assert_eq!(decoded.len(), 1);
    assert_eq!(decoded[0].request_id, before.request_id);
    assert_eq!(decoded[0].time_stamp, before.time_stamp);
    assert_eq!(decoded[0].group_name, "cg");
    assert_eq!(decoded[0].beans[0].retry_times, 2);
    assert_eq!(decoded[0].beans[0].keys.as_deref(), Some("k1 k2"));

    let after = sub_after_context();
    let decoded = decode(&encode(&after).data).unwrap();
    assert_eq!(decoded[0].trace_type, TraceType::SubAfter);
    assert_eq!(
        (
            decoded[0].cost_time,
            decoded[0].success,
            decoded[0].context_code
        ),
        (5, false, 4)
    );
    assert_eq!(decoded[0].time_stamp, after.time_stamp);
    assert_eq!(decoded[0].group_name, "cg");
    assert_eq!(decoded[0].beans[0].msg_id, MSG_ID);

    let end = end_transaction_context();
    let decoded = decode(&encode(&end).data).unwrap();
    let bean = &decoded[0].beans[0];
    assert_eq!(bean.msg_type, MessageType::TransMsgCommit);
    assert_eq!(bean.transaction_state.as_deref(), Some("COMMIT_MESSAGE"));
    assert_eq!(bean.tags.as_deref(), Some("null"));
    assert!(!bean.from_transaction_check);

    let mut recall = TraceContext::new(TraceType::Recall, 9);
    recall.region_id = "r".into();
    recall.group_name = "g".into();
    recall.success = false;
    recall.beans.push(TraceBean {
        topic: "t".into(),
        msg_id: "id".into(),
        ..TraceBean::default()
    });
    let decoded = decode(&encode(&recall).data).unwrap();
    assert_eq!(decoded[0].beans[0].topic, "t");
    assert!(!decoded[0].success);
}

#[test]
fn decodes_several_records_and_the_java_samples() {
    let body = format!("{JAVA_PUB}{JAVA_SUB_BEFORE}{JAVA_SUB_AFTER}{JAVA_END_TRANSACTION}");
    let types: Vec<TraceType> = decode(&body)
        .unwrap()
        .iter()
        .map(|c| c.trace_type)
        .collect();
    assert_eq!(
        types,
        [
            TraceType::Pub,
            TraceType::SubBefore,
            TraceType::SubAfter,
            TraceType::EndTransaction
        ]
    );
}

#[test]
fn decodes_older_layouts_like_java() {
    // A 15-field Pub (clientHost appended by older clients) and a SubAfter without the context
    // code, timestamp and group; Java decodes both (checked with the same 5.3.3 decoder).
    let data = "Pub\u{1}1\u{1}r\u{1}g\u{1}t\u{1}id\u{1}tg\u{1}k\u{1}h\u{1}3\u{1}4\u{1}0\u{1}off\u{1}\
                true\u{1}client\u{2}SubAfter\u{1}req\u{1}id\u{1}5\u{1}true\u{1}k\u{2}";
    let decoded = decode(data).unwrap();
    assert_eq!(decoded[0].beans[0].client_host, "client");
    assert_eq!(decoded[0].beans[0].offset_msg_id, "off");
    assert!(decoded[0].success);
    assert_eq!(decoded[1].context_code, 0);
    assert_eq!(decoded[1].group_name, "");
    // A 13-field Pub has no offset msgId: its 13th field is the success flag.
    let short =
        "Pub\u{1}1\u{1}r\u{1}g\u{1}t\u{1}id\u{1}tg\u{1}k\u{1}h\u{1}3\u{1}4\u{1}0\u{1}true\u{2}";
    let decoded = decode(short).unwrap();
    assert!(decoded[0].success);
    assert_eq!(decoded[0].beans[0].offset_msg_id, "");
}

#[test]
fn bad_records_are_errors_and_unknown_types_are_skipped() {
    assert_eq!(decode("").unwrap(), []);
    assert_eq!(decode("Other\u{1}x\u{2}").unwrap(), []);
    assert!(matches!(
        decode("SubBefore\u{1}1\u{2}"),
        Err(TraceDecodeError::MissingFields { needed: 8, .. })
    ));
    let bad_type = JAVA_PUB.replace(
        "\u{1}0\u{1}7F00000100002A9F00000000000000FF",
        "\u{1}9\u{1}x",
    );
    assert!(matches!(
        decode(&bad_type),
        Err(TraceDecodeError::BadNumber {
            field: "msgType",
            ..
        })
    ));
}
