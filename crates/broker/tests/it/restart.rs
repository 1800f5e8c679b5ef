//! A broker restarted on the same directory keeps its topics, groups, consumer offsets, messages
//! and delay-queue progress, and a clean shutdown leaves no `abort` marker behind.

use comet_protocol::RemotingCommand;
use comet_protocol::body::SubscriptionGroupConfig;
use comet_protocol::code::RequestCode;
use comet_protocol::headers::CommandHeaderExt;
use comet_protocol::headers::{
    CreateTopicRequestHeader, QueryConsumerOffsetRequestHeader, QueryConsumerOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader, request_with_header,
};
use comet_protocol::message::record::decode_records;
use comet_testkit::*;

const SUCCESS: i32 = 0;

#[tokio::test]
async fn restart_keeps_topics_offsets_messages_and_delay_progress() {
    let mut broker = TestBroker::start().await;
    let (topic, group) = ("DurableTopic", "durable_group");
    let rsp = broker
        .invoke(request_with_header(
            RequestCode::UpdateAndCreateTopic,
            &CreateTopicRequestHeader {
                topic: topic.to_owned(),
                default_topic: "TBW102".to_owned(),
                read_queue_nums: 2,
                write_queue_nums: 2,
                perm: 6,
                order: false,
                ..Default::default()
            },
        ))
        .await;
    assert_eq!(rsp.code, SUCCESS);
    let group_body = comet_protocol::body::to_fastjson_bytes(&SubscriptionGroupConfig::new(group))
        .expect("encodes");
    let rsp = broker
        .invoke(
            RemotingCommand::request(RequestCode::UpdateAndCreateSubscriptiongroup)
                .with_body(group_body),
        )
        .await;
    assert_eq!(rsp.code, SUCCESS);
    for i in 0..10 {
        let rsp = broker
            .invoke(send_v1(topic, 1, format!("durable-{i}").as_bytes(), &[]))
            .await;
        assert_eq!(rsp.code, SUCCESS);
    }
    let rsp = broker
        .invoke(send_v2(topic, 0, b"delayed", &[("DELAY", "1")]))
        .await;
    assert_eq!(rsp.code, SUCCESS);
    let rsp = broker
        .invoke(request_with_header(
            RequestCode::UpdateConsumerOffset,
            &UpdateConsumerOffsetRequestHeader {
                consumer_group: group.to_owned(),
                topic: topic.to_owned(),
                queue_id: 1,
                commit_offset: 7,
                ..Default::default()
            },
        ))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    assert!(
        wait_until(|| async { broker.store().get_max_offset_in_queue(topic, 0) == 1 }).await,
        "delayed message never delivered"
    );
    assert!(wait_until(|| async { broker.ctx().schedule.offset(1) == 1 }).await);

    broker.restart_broker().await;
    assert!(
        !broker.store().recovery_report().abnormal,
        "the previous run did not shut down cleanly (abort file left behind)"
    );

    let config = broker
        .ctx()
        .topic_config
        .select(topic)
        .expect("topic survived");
    assert_eq!(config.write_queue_nums, 2);
    assert!(broker.ctx().subscription_groups.find(group).is_some());
    assert_eq!(broker.ctx().schedule.offset(1), 1);
    assert_eq!(broker.store().get_max_offset_in_queue(topic, 1), 10);
    assert_eq!(broker.store().get_max_offset_in_queue(topic, 0), 1);

    let rsp = broker
        .invoke(request_with_header(
            RequestCode::QueryConsumerOffset,
            &QueryConsumerOffsetRequestHeader {
                consumer_group: group.to_owned(),
                topic: topic.to_owned(),
                queue_id: 1,
                ..Default::default()
            },
        ))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let offset: QueryConsumerOffsetResponseHeader = rsp.decode_header().expect("offset header");
    assert_eq!(offset.offset, 7);

    let rsp = broker.invoke(pull(group, topic, 1, 7, 32)).await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let msgs = decode_records(&rsp.body.clone().unwrap_or_default(), true).expect("decodes");
    let bodies: Vec<String> = msgs
        .iter()
        .map(|m| String::from_utf8_lossy(&m.body).into_owned())
        .collect();
    assert_eq!(bodies, vec!["durable-7", "durable-8", "durable-9"]);

    // New sends continue the queue where it ended.
    let rsp = broker.invoke(send_v1(topic, 1, b"after", &[])).await;
    let h: comet_protocol::headers::SendMessageResponseHeader =
        rsp.decode_header().expect("send header");
    assert_eq!(h.queue_offset, 10);
    broker.shutdown().await;
}
