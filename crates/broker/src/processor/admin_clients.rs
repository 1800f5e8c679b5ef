//! Administration requests about who produces and consumes what: a producer group's connections
//! (GET_PRODUCER_CONNECTION_LIST), every producer connection (GET_ALL_PRODUCER_INFO), the groups that consume a topic (QUERY_TOPIC_CONSUME_BY_WHO),
//! and every group's progress on this broker at once (GET_BROKER_CONSUME_STATS, mqadmin's
//! `brokerConsumeStats`), and the per-topic and per-group message counts (VIEW_BROKER_STATS_DATA,
//! read by mqadmin's `statsAll`).

use std::collections::{BTreeSet, HashMap};

use comet_protocol::RemotingCommand;
use comet_protocol::body::{
    BrokerStatsData, BrokerStatsItem, Connection, ConsumeStats, ConsumeStatsList, GroupList,
    MessageQueue, OffsetWrapper, ProducerConnection, ProducerInfo, ProducerTableInfo,
};
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::{
    GetConsumeStatsInBrokerHeader, GetProducerConnectionListRequestHeader,
    QueryTopicConsumeByWhoRequestHeader, ViewBrokerStatsDataRequestHeader,
};

use crate::context::BrokerContext;
use crate::metrics::windows::GROUP_GET_NUMS;
use crate::processor::json_body;
use crate::processor::{Answer, decode_header, reject};

/// GET_PRODUCER_CONNECTION_LIST: the live connections of a producer group; SYSTEM_ERROR when no
/// producer of the group is connected.
pub(super) fn producer_connections(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let header: GetProducerConnectionListRequestHeader = decode_header(request)?;
    let channels = ctx.producers.group_channels(&header.producer_group);
    if channels.is_empty() {
        return Err(reject(
            ResponseCode::SystemError,
            format!("the producer group[{}] not exist", header.producer_group),
        ));
    }
    let connection_set = channels
        .into_iter()
        .map(|c| Connection {
            client_id: c.client_id,
            client_addr: c.channel.remote_addr().to_string(),
            language: c.language.name().to_owned(),
            version: c.version,
        })
        .collect();
    Ok(json_body(&ProducerConnection { connection_set }))
}

/// GET_ALL_PRODUCER_INFO: every producer connection, by producer group (what
/// rocketmq-exporter counts producers with).
pub(super) fn all_producers(ctx: &BrokerContext) -> RemotingCommand {
    let data = ctx
        .producers
        .groups()
        .into_iter()
        .map(|group| {
            let infos = ctx
                .producers
                .group_channels(&group)
                .into_iter()
                .map(|c| ProducerInfo {
                    client_id: c.client_id,
                    remote_ip: format!("/{}", c.channel.remote_addr()),
                    language: c.language.name().to_owned(),
                    version: c.version,
                    last_update_timestamp: c.last_update_millis,
                })
                .collect();
            (group, infos)
        })
        .collect();
    json_body(&ProducerTableInfo { data })
}

/// QUERY_TOPIC_CONSUME_BY_WHO: groups with an online consumer subscribed to the topic, and groups
/// with a committed offset on it (offline groups included).
pub(super) fn topic_consume_by_who(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let header: QueryTopicConsumeByWhoRequestHeader = decode_header(request)?;
    let mut group_list: BTreeSet<String> = ctx
        .consumers
        .groups_by_topic(&header.topic)
        .into_iter()
        .collect();
    group_list.extend(ctx.consumer_offsets.groups_of_topic(&header.topic));
    Ok(json_body(&GroupList { group_list }))
}

/// The offsets of `group` on each of `queues` queues of `topic`: the queue's end, the group's
/// committed offset (0 when it has none) and the store time of the last consumed message.
pub(super) fn queue_offsets(
    ctx: &BrokerContext,
    group: &str,
    topic: &str,
    queues: i32,
) -> Vec<(MessageQueue, OffsetWrapper)> {
    (0..queues)
        .map(|queue_id| {
            let broker_offset = ctx.store.get_max_offset_in_queue(topic, queue_id).max(0);
            let consumer_offset = ctx
                .consumer_offsets
                .query_offset(group, topic, queue_id)
                .max(0);
            let last_timestamp = if consumer_offset > 0 {
                ctx.store
                    .get_message_store_timestamp(topic, queue_id, consumer_offset - 1)
                    .max(0)
            } else {
                0
            };
            let mq = MessageQueue::new(topic, ctx.config.broker_name.clone(), queue_id);
            let offsets = OffsetWrapper {
                broker_offset,
                consumer_offset,
                pull_offset: consumer_offset,
                last_timestamp,
            };
            (mq, offsets)
        })
        .collect()
}

/// GET_BROKER_CONSUME_STATS: for every subscription group, its stats on each topic it has
/// offsets for (only orderly topics with `isOrder`), skipping topics an online group no longer
/// subscribes to; plus the totals of the lag over all of them.
pub(super) fn broker_consume_stats(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let header: GetConsumeStatsInBrokerHeader = decode_header(request)?;
    let mut list = ConsumeStatsList {
        broker_addr: ctx.broker_addr(),
        ..ConsumeStatsList::default()
    };
    for group in ctx
        .subscription_groups
        .all()
        .into_iter()
        .map(|g| g.group_name)
    {
        let online = ctx.consumers.group_info(&group);
        let mut per_topic = Vec::new();
        for topic in ctx.consumer_offsets.topics_of_group(&group) {
            let Some(config) = ctx.topic_config.select(&topic) else {
                continue;
            };
            if header.is_order && !config.order {
                continue;
            }
            let unsubscribed = online.as_ref().is_some_and(|info| {
                !info.subscriptions().is_empty() && info.subscription(&topic).is_none()
            });
            if unsubscribed {
                continue;
            }
            let stats = ConsumeStats {
                offset_table: queue_offsets(ctx, &group, &topic, config.write_queue_nums)
                    .into_iter()
                    .collect(),
                consume_tps: consume_tps(ctx, &group, &topic),
            };
            list.total_diff += stats.diff_total();
            list.total_inflight_diff += stats
                .offset_table
                .values()
                .map(|o| o.broker_offset.saturating_sub(o.pull_offset))
                .sum::<i64>();
            per_topic.push(stats);
        }
        list.consume_stats_list
            .push(HashMap::from([(group, per_topic)]));
    }
    Ok(json_body(&list))
}

/// Messages per second `group` pulled from `topic` over the last minute, as Apache's broker
/// reports a group's consume TPS (its GROUP_GET_NUMS statistic of `topic@group`).
pub(super) fn consume_tps(ctx: &BrokerContext, group: &str, topic: &str) -> f64 {
    ctx.stats_windows
        .get(GROUP_GET_NUMS, &format!("{topic}@{group}"))
        .map_or(0.0, |s| s.minute.tps)
}

/// VIEW_BROKER_STATS_DATA: a statistic's figures over the last minute, hour and day
/// ([`crate::metrics::windows`]: topic puts, group gets, broker totals). A statistic not sampled
/// yet (the traffic is sampled every 10 s) or unknown is answered as Java answers it:
/// SYSTEM_ERROR "The stats <name> <key> not exist".
pub(super) fn view_broker_stats(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let header: ViewBrokerStatsDataRequestHeader = decode_header(request)?;
    let (name, key) = (header.stats_name.as_str(), header.stats_key.as_str());
    let Some(stats) = ctx.stats_windows.get(name, key) else {
        return Err(reject(
            ResponseCode::SystemError,
            format!("The stats <{name}> <{key}> not exist"),
        ));
    };
    let item = |w: crate::metrics::windows::WindowStats| BrokerStatsItem {
        sum: w.sum,
        tps: w.tps,
        avgpt: w.avgpt,
    };
    Ok(json_body(&BrokerStatsData {
        stats_minute: item(stats.minute),
        stats_hour: item(stats.hour),
        stats_day: item(stats.day),
    }))
}
