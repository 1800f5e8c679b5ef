//! Admin commands against a real broker: topic and group management, route registration,
//! statistics (consume lag), offset reset, broker config and runtime info.

use comet_broker::BrokerConfig;
use comet_protocol::RemotingCommand;
use comet_protocol::body::{
    ConsumeStats, ConsumeStatsList, GroupList, KvTable, ProducerConnection, ResetOffsetBody,
    SubscriptionGroupConfig, TopicConfigSerializeWrapper, TopicRouteData, TopicStatsTable,
    from_fastjson, to_fastjson_bytes,
};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CreateTopicRequestHeader, DeleteSubscriptionGroupRequestHeader, DeleteTopicRequestHeader,
    GetConsumeStatsInBrokerHeader, GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader, GetRouteInfoRequestHeader,
    GetTopicStatsInfoRequestHeader, QueryTopicConsumeByWhoRequestHeader, ResetOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader, request_with_header,
};
use comet_testkit::*;

const SUCCESS: i32 = 0;

fn create_topic(topic: &str, queues: i32) -> RemotingCommand {
    request_with_header(
        RequestCode::UpdateAndCreateTopic,
        &CreateTopicRequestHeader {
            topic: topic.to_owned(),
            default_topic: "TBW102".to_owned(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm: 6,
            order: false,
            ..Default::default()
        },
    )
}

fn route_request(topic: &str) -> RemotingCommand {
    request_with_header(
        RequestCode::GetRouteinfoByTopic,
        &GetRouteInfoRequestHeader {
            topic: topic.to_owned(),
            ..Default::default()
        },
    )
}

fn create_group(group: &str) -> RemotingCommand {
    let config = SubscriptionGroupConfig::new(group);
    RemotingCommand::request(RequestCode::UpdateAndCreateSubscriptiongroup)
        .with_body(to_fastjson_bytes(&config).expect("group encodes"))
}

fn commit(group: &str, topic: &str, queue_id: i32, offset: i64) -> RemotingCommand {
    request_with_header(
        RequestCode::UpdateConsumerOffset,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: group.to_owned(),
            topic: topic.to_owned(),
            queue_id,
            commit_offset: offset,
            ..Default::default()
        },
    )
}

fn consume_stats(group: &str, topic: &str) -> RemotingCommand {
    request_with_header(
        RequestCode::GetConsumeStats,
        &GetConsumeStatsRequestHeader {
            consumer_group: group.to_owned(),
            topic: Some(topic.to_owned()),
            ..Default::default()
        },
    )
}

#[tokio::test]
async fn topic_lifecycle_and_route_registration() {
    let broker = TestBroker::start().await;
    let rsp = broker.invoke(create_topic("AdminTopic", 3)).await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);

    let rsp = broker
        .invoke(RemotingCommand::request(RequestCode::GetAllTopicConfig))
        .await;
    assert_eq!(rsp.code, SUCCESS);
    let all: TopicConfigSerializeWrapper =
        from_fastjson(&rsp.body.clone().unwrap_or_default()).expect("wrapper parses");
    let created = all.topic_config_table.get("AdminTopic").expect("listed");
    assert_eq!((created.read_queue_nums, created.write_queue_nums), (3, 3));
    assert!(all.topic_config_table.contains_key("SCHEDULE_TOPIC_XXXX"));

    let routed = || async {
        let rsp = broker.invoke_namesrv(route_request("AdminTopic")).await;
        rsp.code == SUCCESS
            && from_fastjson::<TopicRouteData>(&rsp.body.clone().unwrap_or_default())
                .map(|r| r.queue_datas.iter().any(|q| q.write_queue_nums == 3))
                .unwrap_or(false)
    };
    assert!(wait_until(routed).await, "route never registered");

    // System topics and bad names are refused; a missing field is named.
    let rsp = broker.invoke(create_topic("TBW102", 8)).await;
    assert_eq!(rsp.code, ResponseCode::InvalidParameter.code());
    let rsp = broker.invoke(create_topic("bad/name", 8)).await;
    assert_eq!(rsp.code, ResponseCode::InvalidParameter.code());
    let mut missing = create_topic("X", 1);
    missing.ext_fields.as_mut().map(|e| e.remove("perm"));
    let rsp = broker.invoke(missing).await;
    assert_ne!(rsp.code, SUCCESS);
    assert!(rsp.remark.unwrap_or_default().contains("perm"));

    let rsp = broker
        .invoke(request_with_header(
            RequestCode::DeleteTopicInBroker,
            &DeleteTopicRequestHeader {
                topic: "AdminTopic".to_owned(),
                ..Default::default()
            },
        ))
        .await;
    assert_eq!(rsp.code, SUCCESS);
    assert!(broker.ctx().topic_config.select("AdminTopic").is_none());
    broker.shutdown().await;
}

#[tokio::test]
async fn consume_stats_show_lag_and_reset_moves_offsets() {
    let broker = TestBroker::start().await;
    let (topic, group) = ("LagTopic", "lag_group");
    assert_eq!(broker.invoke(create_topic(topic, 1)).await.code, SUCCESS);
    assert_eq!(broker.invoke(create_group(group)).await.code, SUCCESS);
    for i in 0..5 {
        let rsp = broker
            .invoke(send_v2(topic, 0, format!("m{i}").as_bytes(), &[]))
            .await;
        assert_eq!(rsp.code, SUCCESS);
    }
    assert!(wait_until(|| async { broker.store().get_max_offset_in_queue(topic, 0) == 5 }).await);
    let rsp = broker.invoke(commit(group, topic, 0, 2)).await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);

    let rsp = broker.invoke(consume_stats(group, topic)).await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let stats: ConsumeStats =
        from_fastjson(&rsp.body.clone().unwrap_or_default()).expect("stats parse");
    assert_eq!(stats.diff_total(), 3);
    let wrapper = stats.offset_table.values().next().expect("one queue");
    assert_eq!((wrapper.broker_offset, wrapper.consumer_offset), (5, 2));
    assert!(wrapper.last_timestamp > 0);

    let rsp = broker
        .invoke(request_with_header(
            RequestCode::GetTopicStatsInfo,
            &GetTopicStatsInfoRequestHeader {
                topic: topic.to_owned(),
                ..Default::default()
            },
        ))
        .await;
    let topic_stats: TopicStatsTable =
        from_fastjson(&rsp.body.clone().unwrap_or_default()).expect("topic stats parse");
    assert_eq!(
        topic_stats
            .offset_table
            .values()
            .map(|o| o.max_offset)
            .sum::<i64>(),
        5
    );

    // Reset to the beginning (timestamp 0): the stored offset moves back to 0.
    let rsp = broker
        .invoke(request_with_header(
            RequestCode::InvokeBrokerToResetOffset,
            &ResetOffsetRequestHeader {
                group: group.to_owned(),
                topic: topic.to_owned(),
                timestamp: 0,
                is_force: true,
                ..Default::default()
            },
        ))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let body: ResetOffsetBody =
        from_fastjson(&rsp.body.clone().unwrap_or_default()).expect("reset body parses");
    assert_eq!(
        body.offset_table.values().copied().collect::<Vec<_>>(),
        vec![0]
    );
    assert_eq!(
        broker.ctx().consumer_offsets.query_offset(group, topic, 0),
        0
    );
    let stats: ConsumeStats = from_fastjson(
        &broker
            .invoke(consume_stats(group, topic))
            .await
            .body
            .unwrap_or_default(),
    )
    .expect("stats parse");
    assert_eq!(stats.diff_total(), 5);

    let rsp = broker.invoke(consume_stats(group, "NoSuchTopicHere")).await;
    assert_eq!(rsp.code, ResponseCode::TopicNotExist.code());
    broker.shutdown().await;
}

#[tokio::test]
async fn subscription_groups_are_managed() {
    let broker = TestBroker::start_with(|c| c.auto_create_subscription_group = false).await;
    let mut config = SubscriptionGroupConfig::new("managed_group");
    config.retry_max_times = 5;
    let rsp = broker
        .invoke(
            RemotingCommand::request(RequestCode::UpdateAndCreateSubscriptiongroup)
                .with_body(to_fastjson_bytes(&config).expect("encodes")),
        )
        .await;
    assert_eq!(rsp.code, SUCCESS);
    let rsp = broker
        .invoke(RemotingCommand::request(
            RequestCode::GetAllSubscriptiongroupConfig,
        ))
        .await;
    let text = String::from_utf8(rsp.body.clone().unwrap_or_default().to_vec()).expect("utf8");
    assert!(text.contains("managed_group") && text.contains("\"retryMaxTimes\":5"));

    let rsp = broker
        .invoke(
            RemotingCommand::request(RequestCode::UpdateAndCreateSubscriptiongroup)
                .with_body(&b"{not json"[..]),
        )
        .await;
    assert_eq!(rsp.code, ResponseCode::SystemError.code());
    assert!(
        rsp.remark
            .unwrap_or_default()
            .contains("SubscriptionGroupConfig")
    );

    let rsp = broker
        .invoke(request_with_header(
            RequestCode::DeleteSubscriptiongroup,
            &DeleteSubscriptionGroupRequestHeader {
                group_name: "managed_group".to_owned(),
                clean_offset: Some(true),
                ..Default::default()
            },
        ))
        .await;
    assert_eq!(rsp.code, SUCCESS);
    assert!(
        broker
            .ctx()
            .subscription_groups
            .find("managed_group")
            .is_none()
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn broker_config_runtime_info_and_delay_offsets() {
    let broker = TestBroker::start().await;
    let rsp = broker
        .invoke(RemotingCommand::request(RequestCode::GetBrokerConfig))
        .await;
    assert_eq!(rsp.code, SUCCESS);
    let text = String::from_utf8(rsp.body.clone().unwrap_or_default().to_vec()).expect("utf8");
    let parsed = BrokerConfig::parse(&text).expect("printed config parses");
    // The broker fills in where it writes runtime changes.
    let expected = BrokerConfig {
        broker_config_path: Some(broker.config.config_file_path()),
        ..broker.config.clone()
    };
    assert_eq!(parsed.config, expected);
    assert!(parsed.unknown_keys.is_empty());

    let rsp = broker
        .invoke(RemotingCommand::request(RequestCode::GetBrokerRuntimeInfo))
        .await;
    let kv: KvTable = from_fastjson(&rsp.body.clone().unwrap_or_default()).expect("kv parses");
    assert_eq!(
        kv.table.get("brokerName").map(String::as_str),
        Some("broker-a")
    );
    assert!(kv.table.contains_key("commitLogMaxOffset"));
    assert!(kv.table.contains_key("scheduleMessageOffset_18"));
    // The keys rocketmq-exporter parses as numbers (it fails on a missing or malformed one).
    for key in [
        "msgPutTotalTodayNow",
        "sendThreadPoolQueueHeadWaitTimeMills",
        "queryThreadPoolQueueHeadWaitTimeMills",
        "msgGetTotalTodayNow",
        "queryThreadPoolQueueSize",
        "bootTimestamp",
        "msgPutTotalYesterdayMorning",
        "msgGetTotalYesterdayMorning",
        "pullThreadPoolQueueSize",
        "commitLogMinOffset",
        "pullThreadPoolQueueHeadWaitTimeMills",
        "dispatchMaxBuffer",
        "brokerVersion",
        "consumeQueueDiskRatio",
        "pageCacheLockTimeMills",
        "commitLogDiskRatio",
        "commitLogMaxOffset",
        "getMessageEntireTimeMax",
        "msgPutTotalTodayMorning",
        "putMessageTimesTotal",
        "msgGetTotalTodayMorning",
        "sendThreadPoolQueueSize",
        "startAcceptSendRequestTimeStamp",
        "putMessageEntireTimeMax",
        "earliestMessageTimeStamp",
        "remainTransientStoreBufferNumbs",
        "queryThreadPoolQueueCapacity",
        "putMessageAverageSize",
        "dispatchBehindBytes",
        "putMessageSizeTotal",
        "sendThreadPoolQueueCapacity",
        "pullThreadPoolQueueCapacity",
    ] {
        let value = kv.table.get(key).map(String::as_str);
        assert!(
            value.is_some_and(|v| v.parse::<f64>().is_ok()),
            "{key}: {value:?}"
        );
    }
    let flush_backlog = &kv.table["remainHowManyDataToFlush"];
    assert!(
        flush_backlog
            .split(' ')
            .next()
            .is_some_and(|n| n.parse::<f64>().is_ok()),
        "{flush_backlog}"
    );
    assert!(kv.table["commitLogDirCapacity"].starts_with("Total : "));
    // Apache's 13 put-time buckets, `label:count` each.
    let distribution = &kv.table["putMessageDistributeTime"];
    assert_eq!(distribution.split(' ').count(), 13, "{distribution}");
    assert!(distribution.starts_with("[<=0ms]:"), "{distribution}");
    assert_eq!(kv.table["putTps"].split(' ').count(), 3);

    let rsp = broker
        .invoke(RemotingCommand::request(RequestCode::GetAllDelayOffset))
        .await;
    assert_eq!(rsp.code, SUCCESS);
    assert!(
        String::from_utf8(rsp.body.clone().unwrap_or_default().to_vec())
            .expect("utf8")
            .contains("offsetTable")
    );
    broker.shutdown().await;
}

/// GET_TOPIC_CONFIG (351) exactly as `rocketmq-tools` 5.3.3 `DefaultMQAdminExt.examineTopicConfig`
/// sent it (recorded through interop/capture/proxy.py; 5.3.3's `examineConsumeStats` asks for the
/// retry topic's config this way before it reads consumer progress): frame length 0x90, JSON
/// header length 0x8c, then the header.
const JAVA_533_GET_TOPIC_CONFIG_TBW102: &[u8] = b"\x00\x00\x00\x90\x00\x00\x00\x8c\
{\"code\":351,\"extFields\":{\"lo\":\"true\",\"topic\":\"TBW102\"},\"flag\":0,\"language\":\"JAVA\",\
\"opaque\":0,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":479}";

fn java_get_topic_config(topic: &str) -> RemotingCommand {
    let recorded = JAVA_533_GET_TOPIC_CONFIG_TBW102
        .get(8..)
        .and_then(|json| std::str::from_utf8(json).ok())
        .expect("recorded header is UTF-8 JSON after the two length words");
    // Same bytes with another topic name; the length words are recomputed.
    let header = recorded.replace("\"TBW102\"", &format!("\"{topic}\""));
    let mut frame = bytes::BytesMut::new();
    frame.extend_from_slice(&((header.len() + 4) as u32).to_be_bytes());
    frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
    frame.extend_from_slice(header.as_bytes());
    comet_protocol::frame::decode_frame(&mut frame)
        .expect("recorded frame decodes")
        .expect("whole frame")
}

#[tokio::test]
async fn get_topic_config_answers_the_java_admin_request() {
    // The recorded bytes themselves decode to code 351 with the topic and `lo` fields.
    let mut recorded = bytes::BytesMut::from(JAVA_533_GET_TOPIC_CONFIG_TBW102);
    let request = comet_protocol::frame::decode_frame(&mut recorded)
        .expect("recorded frame decodes")
        .expect("whole frame");
    assert_eq!(request.code, RequestCode::GetTopicConfig.code());
    let fields = request.ext_fields.as_ref().expect("ext fields");
    assert_eq!(fields.get("topic"), Some("TBW102"));
    assert_eq!(fields.get("lo"), Some("true"));

    let broker = TestBroker::start().await;
    assert_eq!(
        broker
            .invoke(create_topic("AdminTopicConfig", 3))
            .await
            .code,
        SUCCESS
    );
    let rsp = broker
        .invoke(java_get_topic_config("AdminTopicConfig"))
        .await;
    assert_eq!(rsp.code, SUCCESS, "remark: {:?}", rsp.remark);
    let body = rsp
        .body
        .as_deref()
        .expect("TopicConfigAndQueueMapping body");
    let config: comet_protocol::body::TopicConfig =
        from_fastjson(body).expect("body is a TopicConfig object");
    assert_eq!(config.topic_name, "AdminTopicConfig");
    assert_eq!(config.read_queue_nums, 3);
    assert_eq!(config.write_queue_nums, 3);
    assert_eq!(config.perm, 6);

    let missing = broker.invoke(java_get_topic_config("NoSuchTopic")).await;
    assert_eq!(missing.code, ResponseCode::TopicNotExist.code());
    broker.shutdown().await;
}

#[tokio::test]
async fn who_produces_and_who_consumes_and_every_group_s_progress() {
    let broker = TestBroker::start().await;
    let topic = "WhoTopic";
    let (online, offline) = ("who_online", "who_offline");
    assert_eq!(broker.invoke(create_topic(topic, 2)).await.code, SUCCESS);
    for group in [online, offline] {
        assert_eq!(broker.invoke(create_group(group)).await.code, SUCCESS);
    }
    for i in 0..3 {
        let rsp = broker
            .invoke(send_v2(topic, 0, format!("m{i}").as_bytes(), &[]))
            .await;
        assert_eq!(rsp.code, SUCCESS);
    }
    assert!(wait_until(|| async { broker.store().get_max_offset_in_queue(topic, 0) == 3 }).await);
    let rsp = broker
        .invoke(heartbeat("who-client@1", online, topic))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    assert_eq!(
        broker.invoke(commit(online, topic, 0, 1)).await.code,
        SUCCESS
    );
    assert_eq!(
        broker.invoke(commit(offline, topic, 0, 2)).await.code,
        SUCCESS
    );

    // GET_PRODUCER_CONNECTION_LIST: the heartbeat's producer group, and an unknown one.
    let producers = |group: &str| {
        request_with_header(
            RequestCode::GetProducerConnectionList,
            &GetProducerConnectionListRequestHeader {
                producer_group: group.to_owned(),
                ..Default::default()
            },
        )
    };
    let rsp = broker.invoke(producers(PRODUCER_GROUP)).await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let body: ProducerConnection =
        from_fastjson(&rsp.body.clone().unwrap_or_default()).expect("producer connections parse");
    let ids: Vec<&str> = body
        .connection_set
        .iter()
        .map(|c| c.client_id.as_str())
        .collect();
    assert_eq!(ids, vec!["who-client@1"]);
    let rsp = broker.invoke(producers("nobody_produces")).await;
    assert_eq!(rsp.code, ResponseCode::SystemError.code());
    assert!(rsp.remark.unwrap_or_default().contains("nobody_produces"));

    // GET_ALL_PRODUCER_INFO: every producer connection by group.
    let rsp = broker
        .invoke(RemotingCommand::request(RequestCode::GetAllProducerInfo))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let table: comet_protocol::body::ProducerTableInfo =
        from_fastjson(&rsp.body.clone().unwrap_or_default()).expect("producer table parses");
    let infos = &table.data[PRODUCER_GROUP];
    assert_eq!(infos.len(), 1, "{table:?}");
    assert_eq!(infos[0].client_id, "who-client@1");
    assert!(infos[0].remote_ip.starts_with("/127.0.0.1:"), "{table:?}");
    assert!(infos[0].last_update_timestamp > 0);

    // QUERY_TOPIC_CONSUME_BY_WHO: the online group and the offline one with offsets.
    let rsp = broker
        .invoke(request_with_header(
            RequestCode::QueryTopicConsumeByWho,
            &QueryTopicConsumeByWhoRequestHeader {
                topic: topic.to_owned(),
                ..Default::default()
            },
        ))
        .await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let groups: GroupList = from_fastjson(&rsp.body.clone().unwrap_or_default()).expect("groups");
    assert_eq!(
        groups
            .group_list
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        vec![offline, online]
    );

    // GET_BROKER_CONSUME_STATS: both groups' lag on the topic, and nothing for orderly topics.
    let broker_stats = |is_order: bool| {
        request_with_header(
            RequestCode::GetBrokerConsumeStats,
            &GetConsumeStatsInBrokerHeader {
                is_order,
                ..Default::default()
            },
        )
    };
    let rsp = broker.invoke(broker_stats(false)).await;
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    let list: ConsumeStatsList =
        from_fastjson(&rsp.body.clone().unwrap_or_default()).expect("consume stats list parses");
    assert_eq!(list.total_diff, (3 - 1) + (3 - 2));
    assert_eq!(list.broker_addr, broker.handle().broker_addr());
    let lag_of = |list: &ConsumeStatsList, group: &str| -> Option<i64> {
        list.consume_stats_list
            .iter()
            .find_map(|m| m.get(group))
            .map(|stats| stats.iter().map(ConsumeStats::diff_total).sum())
    };
    assert_eq!(lag_of(&list, online), Some(2));
    assert_eq!(lag_of(&list, offline), Some(1));
    let orderly: ConsumeStatsList = from_fastjson(
        &broker
            .invoke(broker_stats(true))
            .await
            .body
            .unwrap_or_default(),
    )
    .expect("orderly list parses");
    assert_eq!(orderly.total_diff, 0);
    assert_eq!(lag_of(&orderly, online), Some(0));
    broker.shutdown().await;
}

#[tokio::test]
async fn consume_tps_is_what_a_group_pulled_per_second_over_the_last_minute() {
    let broker = TestBroker::start().await;
    let (topic, group, idle) = ("TpsTopic", "tps_group", "tps_idle_group");
    assert_eq!(broker.invoke(create_topic(topic, 1)).await.code, SUCCESS);
    for g in [group, idle] {
        assert_eq!(broker.invoke(create_group(g)).await.code, SUCCESS);
    }
    for i in 0..20 {
        let rsp = broker
            .invoke(send_v2(topic, 0, format!("m{i}").as_bytes(), &[]))
            .await;
        assert_eq!(rsp.code, SUCCESS);
    }
    assert!(wait_until(|| async { broker.store().get_max_offset_in_queue(topic, 0) == 20 }).await);
    let pulled = broker.invoke(pull(group, topic, 0, 0, 32)).await;
    assert_eq!(pulled.code, SUCCESS, "{:?}", pulled.remark);
    for g in [group, idle] {
        assert_eq!(broker.invoke(commit(g, topic, 0, 0)).await.code, SUCCESS);
    }
    let tps_of = |stats: &ConsumeStats| stats.consume_tps;
    // The broker samples its counters every 10 s; the pull shows at the next sample.
    let sampled = wait_until(|| async {
        let rsp = broker.invoke(consume_stats(group, topic)).await;
        from_fastjson::<ConsumeStats>(&rsp.body.unwrap_or_default())
            .is_ok_and(|stats| tps_of(&stats) > 0.0)
    })
    .await;
    assert!(
        sampled,
        "GET_CONSUME_STATS never reported the group's pulls"
    );
    let idle_stats: ConsumeStats = from_fastjson(
        &broker
            .invoke(consume_stats(idle, topic))
            .await
            .body
            .unwrap_or_default(),
    )
    .expect("stats parse");
    assert_eq!(tps_of(&idle_stats), 0.0, "a group that pulled nothing");

    let rsp = broker
        .invoke(request_with_header(
            RequestCode::GetBrokerConsumeStats,
            &GetConsumeStatsInBrokerHeader::default(),
        ))
        .await;
    let list: ConsumeStatsList =
        from_fastjson(&rsp.body.unwrap_or_default()).expect("consume stats list parses");
    let tps: f64 = list
        .consume_stats_list
        .iter()
        .filter_map(|m| m.get(group))
        .flatten()
        .map(tps_of)
        .sum();
    assert!(tps > 0.0, "GET_BROKER_CONSUME_STATS: {list:?}");
    broker.shutdown().await;
}
