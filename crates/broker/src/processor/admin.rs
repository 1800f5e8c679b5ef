//! Administration requests (mqadmin and dashboards): topics, subscription groups, statistics,
//! offset reset, broker config and runtime figures.
//!
//! Bodies are written in fastjson's form (alphabetical keys, MessageQueue objects as map keys)
//! because the Java and Go admin tools parse exactly that. Every change to topics or groups is
//! persisted before the response goes out, and topic changes trigger an immediate re-registration
//! with the name servers (through the topic manager's change signal).

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::body::{
    Connection, ConsumeStats, ConsumerConnection, KvTable, MessageQueue, ResetOffsetBody,
    SubscriptionGroupConfig, TopicOffset, TopicStatsTable, from_fastjson, to_fastjson_bytes,
};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::command::COMET_VERSION;
use comet_protocol::headers::{
    DeleteSubscriptionGroupRequestHeader, DeleteTopicRequestHeader, GetConsumeStatsRequestHeader,
    GetConsumerConnectionListRequestHeader, GetTopicConfigRequestHeader,
    GetTopicStatsInfoRequestHeader, ResetOffsetRequestHeader, request_with_header,
};
use comet_remoting::{Channel, RequestProcessor};
use futures::future::BoxFuture;

use crate::config::MAX_QUEUE_NUMS;
use crate::context::BrokerContext;
use crate::metrics::create_times::{CreateKey, Created};
use crate::processor::{Answer, answer, decode_header, error_response, json_body, reject};
use crate::processor::{admin_clients, admin_topics, broker_config};
use comet_protocol::naming::{validate_group, validate_topic};

/// The request codes [`AdminProcessor`] answers.
/// `timestamp` value of a reset request meaning "to the end of the queue".
pub const RESET_TO_MAX_TIMESTAMP: i64 = -1;

/// Handles the admin codes routed to it (see [`routes`](crate::processor::routes)).
pub struct AdminProcessor {
    ctx: Arc<BrokerContext>,
    boot_timestamp: i64,
}

impl AdminProcessor {
    pub fn new(ctx: Arc<BrokerContext>) -> Self {
        AdminProcessor {
            ctx,
            boot_timestamp: comet_protocol::time::now_millis(),
        }
    }
}

impl RequestProcessor for AdminProcessor {
    fn process(
        &self,
        _channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let ctx = Arc::clone(&self.ctx);
        let boot = self.boot_timestamp;
        Box::pin(async move {
            let response = match RequestCode::from(request.code) {
                RequestCode::UpdateAndCreateTopic => {
                    let began = std::time::Instant::now();
                    let response = answer(admin_topics::update_and_create_topic(&ctx, &request));
                    let topic = request.ext("topic").unwrap_or_default();
                    let is_system = ctx.topic_config.is_system_topic(topic);
                    record_create(&ctx, Created::Topic, &response, is_system, began);
                    response
                }
                RequestCode::UpdateAndCreateTopicList => {
                    let began = std::time::Instant::now();
                    let response =
                        answer(admin_topics::update_and_create_topic_list(&ctx, &request));
                    record_create(&ctx, Created::Topic, &response, false, began);
                    response
                }
                RequestCode::DeleteTopicInBroker => answer(delete_topic(&ctx, &request)),
                RequestCode::GetAllTopicConfig => json_body(&ctx.topic_config.wrapper()),
                RequestCode::GetTopicStatsInfo => answer(topic_stats(&ctx, &request)),
                RequestCode::GetTopicConfig => answer(topic_config(&ctx, &request)),
                RequestCode::GetConsumeStats => answer(consume_stats(&ctx, &request)),
                RequestCode::UpdateAndCreateSubscriptiongroup => {
                    let began = std::time::Instant::now();
                    let response = update_group(&ctx, &request);
                    let is_system = group_name_of(&request)
                        .is_some_and(|g| g.to_ascii_lowercase().starts_with("cid_rmq_sys_"));
                    record_create(&ctx, Created::Group, &response, is_system, began);
                    response
                }
                RequestCode::DeleteSubscriptiongroup => answer(delete_group(&ctx, &request)),
                RequestCode::GetAllSubscriptiongroupConfig => {
                    json_body(&ctx.subscription_groups.snapshot())
                }
                RequestCode::GetBrokerRuntimeInfo => runtime_info(&ctx, boot),
                RequestCode::GetProducerConnectionList => {
                    answer(admin_clients::producer_connections(&ctx, &request))
                }
                RequestCode::QueryTopicConsumeByWho => {
                    answer(admin_clients::topic_consume_by_who(&ctx, &request))
                }
                RequestCode::ViewBrokerStatsData => {
                    answer(admin_clients::view_broker_stats(&ctx, &request))
                }
                RequestCode::GetBrokerConsumeStats => {
                    answer(admin_clients::broker_consume_stats(&ctx, &request))
                }
                RequestCode::GetAllProducerInfo => admin_clients::all_producers(&ctx),
                RequestCode::GetBrokerClusterAclConfig => {
                    answer(super::acl_listing::acl_listing(&ctx))
                }
                RequestCode::GetConsumerConnectionList => {
                    answer(consumer_connections(&ctx, &request))
                }
                RequestCode::InvokeBrokerToResetOffset => {
                    answer(reset_offset(&ctx, &request).await)
                }
                RequestCode::GetBrokerConfig => broker_config::get_config(&ctx),
                RequestCode::UpdateBrokerConfig => {
                    answer(broker_config::update_config(&ctx, &request).await)
                }
                RequestCode::GetAllDelayOffset => match ctx.schedule.encode() {
                    Ok(text) => success().with_body(text.into_bytes()),
                    Err(e) => error_response(ResponseCode::SystemError, e.to_string()),
                },
                // Comet has no timer wheel (5.x timer messages): a 5.x slave with
                // timerWheelEnable=true asking for the master's timer progress gets the answers
                // of a Java master whose timer wheel is off.
                RequestCode::GetTimerCheckPoint => {
                    error_response(ResponseCode::SystemError, "The checkpoint is null")
                }
                RequestCode::GetTimerMetrics => {
                    error_response(ResponseCode::SystemError, "The timer message store is null")
                }
                other => error_response(
                    ResponseCode::RequestCodeNotSupported,
                    format!("request type {} not supported", other.code()),
                ),
            };
            Some(response)
        })
    }
}

fn success() -> RemotingCommand {
    RemotingCommand::response(ResponseCode::Success, None)
}

fn delete_topic(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let header: DeleteTopicRequestHeader = decode_header(request)?;
    let topic = header.topic.as_str();
    if let Err(e) = validate_topic(topic) {
        return Err(reject(ResponseCode::InvalidParameter, e.to_string()));
    }
    if ctx.topic_config.is_system_topic(topic) {
        return Err(reject(
            ResponseCode::InvalidParameter,
            format!("The topic[{topic}] is a system topic and cannot be deleted."),
        ));
    }
    ctx.topic_config.delete(topic);
    ctx.consumer_offsets.remove_topic(topic);
    if let Err(e) = ctx.store.delete_topics(&[topic]) {
        tracing::error!(topic, error = %e, "deleting the topic's consume queues failed");
        return Err(reject(
            ResponseCode::SystemError,
            format!("deleting the consume queues of topic[{topic}] failed: {e}"),
        ));
    }
    Ok(success())
}

/// GET_TOPIC_CONFIG (351): one topic's config, as RocketMQ 5.x's TopicConfigAndQueueMapping.
///
/// The 5.x admin tools ask for it before consumer-progress queries (to detect static topics); a
/// topic without a static queue mapping is the plain TopicConfig object (the `mappingDetail` field
/// is null, which fastjson omits), so that is the whole body.
fn topic_config(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let header: GetTopicConfigRequestHeader = decode_header(request)?;
    Ok(match ctx.topic_config.select(&header.topic) {
        Some(config) => json_body(&config),
        None => error_response(
            ResponseCode::TopicNotExist,
            format!("No topic in this broker. topic: {}", header.topic),
        ),
    })
}

fn topic_stats(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let header: GetTopicStatsInfoRequestHeader = decode_header(request)?;
    let topic = header.topic.as_str();
    let Some(config) = ctx.topic_config.select(topic) else {
        return Err(reject(
            ResponseCode::TopicNotExist,
            format!("topic[{topic}] not exist"),
        ));
    };
    let mut table = TopicStatsTable::default();
    for queue_id in 0..config.write_queue_nums {
        let min_offset = ctx.store.get_min_offset_in_queue(topic, queue_id).max(0);
        let max_offset = ctx.store.get_max_offset_in_queue(topic, queue_id).max(0);
        let last_update_timestamp = if max_offset > 0 {
            ctx.store
                .get_message_store_timestamp(topic, queue_id, max_offset - 1)
                .max(0)
        } else {
            0
        };
        table.offset_table.insert(
            MessageQueue::new(topic, ctx.config.broker_name.clone(), queue_id),
            TopicOffset {
                min_offset,
                max_offset,
                last_update_timestamp,
            },
        );
    }
    Ok(json_body(&table))
}

fn consume_stats(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let header: GetConsumeStatsRequestHeader = decode_header(request)?;
    let group = header.consumer_group.as_str();
    let topics: Vec<String> = match (&header.topic, &header.topic_list) {
        (Some(t), _) if !t.is_empty() => vec![t.clone()],
        (_, Some(list)) if !list.is_empty() => list
            .split(';')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => ctx.consumer_offsets.topics_of_group(group),
    };
    let mut stats = ConsumeStats::default();
    for topic in &topics {
        let Some(config) = ctx.topic_config.select(topic) else {
            return Err(reject(
                ResponseCode::TopicNotExist,
                format!("topic[{topic}] not exist"),
            ));
        };
        let has_offsets = !ctx.consumer_offsets.query_offsets(group, topic).is_empty();
        let subscribed = ctx.consumers.subscription(group, topic).is_some();
        if !has_offsets && !subscribed {
            continue;
        }
        stats.offset_table.extend(admin_clients::queue_offsets(
            ctx,
            group,
            topic,
            config.read_queue_nums,
        ));
        stats.consume_tps += admin_clients::consume_tps(ctx, group, topic);
    }
    Ok(json_body(&stats))
}

fn update_group(ctx: &BrokerContext, request: &RemotingCommand) -> RemotingCommand {
    let Some(body) = request.body.as_deref() else {
        return error_response(
            ResponseCode::SystemError,
            "bad request body: a SubscriptionGroupConfig JSON body is required",
        );
    };
    let config: SubscriptionGroupConfig = match from_fastjson(body) {
        Ok(c) => c,
        Err(e) => {
            return error_response(
                ResponseCode::SystemError,
                format!("bad request body: SubscriptionGroupConfig: {e}"),
            );
        }
    };
    if let Err(e) = validate_group(&config.group_name) {
        return error_response(ResponseCode::InvalidParameter, format!("groupName: {e}"));
    }
    if config.retry_queue_nums < 0 || config.retry_queue_nums > MAX_QUEUE_NUMS {
        return error_response(
            ResponseCode::InvalidParameter,
            format!(
                "retryQueueNums {} is out of range 0..={MAX_QUEUE_NUMS}",
                config.retry_queue_nums
            ),
        );
    }
    ctx.subscription_groups.update(config);
    success()
}

fn delete_group(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let header: DeleteSubscriptionGroupRequestHeader = decode_header(request)?;
    ctx.subscription_groups.delete(&header.group_name);
    if header.clean_offset.unwrap_or(false) {
        ctx.consumer_offsets.remove_group(&header.group_name);
    }
    Ok(success())
}

/// Times one topic or group creation for the metrics endpoint.
fn record_create(
    ctx: &BrokerContext,
    created: Created,
    response: &RemotingCommand,
    is_system: bool,
    began: std::time::Instant,
) {
    let key = CreateKey {
        created,
        success: response.code == ResponseCode::Success.code(),
        is_system,
    };
    ctx.create_times.record(key, began.elapsed());
}

/// The `groupName` of an UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body, if it has one.
fn group_name_of(request: &RemotingCommand) -> Option<String> {
    let body: serde_json::Value = serde_json::from_slice(request.body.as_deref()?).ok()?;
    body.get("groupName")?.as_str().map(str::to_owned)
}

/// GET_BROKER_RUNTIME_INFO: Apache's keys ([`crate::runtime_info`]) and Comet's own.
fn runtime_info(ctx: &BrokerContext, boot_timestamp: i64) -> RemotingCommand {
    let s = ctx.store.stats();
    let mut table = crate::runtime_info::runtime_table(ctx, boot_timestamp).table;
    let mut put = |k: &str, v: String| {
        table.insert(k.to_owned(), v);
    };
    put("brokerVersion", COMET_VERSION.to_string());
    put(
        "brokerVersionDesc",
        format!("Comet {}", env!("CARGO_PKG_VERSION")),
    );
    put("brokerName", ctx.config.broker_name.clone());
    put("clusterName", ctx.config.broker_cluster_name.clone());
    put("brokerAddr", ctx.broker_addr());
    let ha = &ctx.replication.master;
    let lag = ha.lag();
    put("haSlaveCount", ha.slaves().len().to_string());
    put(
        "haInSyncSlaveCount",
        ctx.replication
            .in_sync_slaves(ctx.store.max_phy_offset())
            .to_string(),
    );
    put(
        "haFlushSlaveTimeouts",
        ctx.replication.slave_timeouts().to_string(),
    );
    put("haReplicationLagSamples", lag.samples.to_string());
    put("haReplicationLagP50Micros", lag.p50_micros.to_string());
    put("haReplicationLagP99Micros", lag.p99_micros.to_string());
    put("haReplicationLagP999Micros", lag.p999_micros.to_string());
    put("haReplicationLagMaxMicros", lag.max_micros.to_string());
    put(
        "commitLogFlushedOffset",
        s.commit_log_flushed_offset.to_string(),
    );
    put(
        "putMessageFlushTimeouts",
        s.put_message_flush_timeouts.to_string(),
    );
    put("getFoundTimes", s.get_message_times_found.to_string());
    put("getMissTimes", s.get_message_times_miss.to_string());
    put(
        "getTransferedTimes",
        s.get_message_transferred_msg_count.to_string(),
    );
    put("dispatchedRecords", s.dispatched_records.to_string());
    put("diskFull", ctx.store.is_disk_full().to_string());
    put("topicCount", ctx.topic_config.len().to_string());
    put(
        "subscriptionGroupCount",
        ctx.subscription_groups.all().len().to_string(),
    );
    put(
        "onlineConsumerGroupCount",
        ctx.consumers.groups().len().to_string(),
    );
    for level in 1..=ctx.schedule.max_delay_level() {
        let delivered = ctx.schedule.offset(level);
        let max = ctx
            .store
            .get_max_offset_in_queue(comet_protocol::naming::SCHEDULE_TOPIC, level - 1);
        put(
            &format!("scheduleMessageOffset_{level}"),
            format!("{delivered},{max}"),
        );
    }
    json_body(&KvTable { table })
}

fn consumer_connections(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let header: GetConsumerConnectionListRequestHeader = decode_header(request)?;
    let group = header.consumer_group.as_str();
    let Some(info) = ctx.consumers.group_info(group) else {
        return Err(reject(
            ResponseCode::ConsumerNotOnline,
            format!("the consumer group[{group}] not online"),
        ));
    };
    let connection_set = info
        .channels()
        .map(|c| Connection {
            client_id: c.client_id.clone(),
            client_addr: c.channel.remote_addr().to_string(),
            language: c.language.name().to_owned(),
            version: c.version,
        })
        .collect();
    let body = ConsumerConnection {
        connection_set,
        subscription_table: info.subscriptions().clone(),
        consume_type: Some(info.consume_type),
        message_model: Some(info.message_model),
        consume_from_where: Some(info.consume_from_where),
    };
    Ok(json_body(&body))
}

/// INVOKE_BROKER_TO_RESET_OFFSET: computes each queue's offset for the timestamp, stores it as the
/// group's committed offset (so consumers that start later begin there too) and tells every
/// online consumer of the group with RESET_CONSUMER_CLIENT_OFFSET.
async fn reset_offset(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let header: ResetOffsetRequestHeader = decode_header(request)?;
    let topic = header.topic.as_str();
    let group = header.group.as_str();
    let Some(config) = ctx.topic_config.select(topic) else {
        return Err(reject(
            ResponseCode::TopicNotExist,
            format!("topic[{topic}] not exist"),
        ));
    };
    let queues: Vec<i32> = match header.queue_id_or_all() {
        q if q < 0 => (0..config.read_queue_nums).collect(),
        q if q < config.read_queue_nums => vec![q],
        q => {
            return Err(reject(
                ResponseCode::InvalidParameter,
                format!(
                    "queueId {q} is illegal for topic[{topic}] with {} queues",
                    config.read_queue_nums
                ),
            ));
        }
    };
    let mut body = ResetOffsetBody::default();
    for queue_id in queues {
        let target = match header.offset {
            Some(offset) if offset >= 0 => offset,
            _ if header.timestamp == RESET_TO_MAX_TIMESTAMP => {
                ctx.store.get_max_offset_in_queue(topic, queue_id)
            }
            _ => ctx
                .store
                .get_offset_in_queue_by_time(topic, queue_id, header.timestamp),
        };
        let current = ctx.consumer_offsets.query_offset(group, topic, queue_id);
        let offset = if header.is_force || current < 0 || target < current {
            target
        } else {
            current
        };
        ctx.consumer_offsets
            .commit_offset("ResetOffset", group, topic, queue_id, offset);
        body.offset_table.insert(
            MessageQueue::new(topic, ctx.config.broker_name.clone(), queue_id),
            offset,
        );
    }
    let payload = match to_fastjson_bytes(&body) {
        Ok(b) => bytes::Bytes::from(b),
        Err(e) => return Err(reject(ResponseCode::SystemError, e.to_string())),
    };
    if let Some(info) = ctx.consumers.group_info(group) {
        let notify_header = ResetOffsetRequestHeader {
            group: group.to_owned(),
            topic: topic.to_owned(),
            queue_id: None,
            offset: None,
            timestamp: header.timestamp,
            is_force: header.is_force,
            rpc: Default::default(),
        };
        let notify = request_with_header(RequestCode::ResetConsumerClientOffset, &notify_header)
            .with_body(payload.clone());
        for channel in info.all_channels() {
            if let Err(e) = channel.invoke_oneway(notify.clone()).await {
                tracing::warn!(group, peer = %channel.remote_addr(), error = %e,
                    "RESET_CONSUMER_CLIENT_OFFSET could not be sent");
            }
        }
    }
    tracing::info!(
        group,
        topic,
        timestamp = header.timestamp,
        force = header.is_force,
        "consumer offsets reset"
    );
    Ok(success().with_body(payload))
}
