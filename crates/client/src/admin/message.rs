//! Message inspection: query by key, view by id, and the dead-letter queue.
//!
//! RocketMQ gives a message two ids. The *offset* msgId encodes the storing broker's address and
//! the commit-log offset, so it is answered by one VIEW_MESSAGE_BY_ID to that broker. The *unique*
//! id (UNIQ_KEY, what producers and consumers call `msgId`) is only in the brokers' indexes, so it
//! is answered by QUERY_MESSAGE with `_UNIQUE_KEY_QUERY` on every broker of the topic. Both are 32
//! hex characters for IPv4, so the text alone cannot tell them apart: an id whose decoded address
//! is a broker of the cluster is taken as an offset id, anything else as a unique key (and, without
//! a topic to search, as an offset id after all).
//!
//! Index lookups hash keys, so a broker may return messages whose key merely collides; results are
//! filtered to exact matches here.

use std::collections::BTreeSet;
use std::net::SocketAddr;

use comet_protocol::body::heartbeat::SUB_ALL;
use comet_protocol::headers::{PullMessageRequestHeader, QueryMessageRequestHeader, pull_sys_flag};
use comet_protocol::message::MessageExt;
use comet_protocol::message::id::decode_offset_msg_id;
use comet_protocol::message::properties::keys;

use super::{MQAdmin, TOOLS_CONSUMER_GROUP, route_masters};
use crate::api::PullStatus;
use crate::error::{ClientError, Result};
use crate::message::Message;
use crate::producer::DefaultMQProducer;

/// Most messages one key query returns (mqadmin `queryMsgByKey`'s default `maxNum`).
pub const DEFAULT_QUERY_MAX_NUM: i32 = 64;
/// Dead-letter topics: their prefix and a group's (`%DLQ%<group>`).
pub use comet_protocol::naming::{DLQ_GROUP_TOPIC_PREFIX, dlq_topic};
/// Messages asked for per pull when walking a dead-letter queue.
pub const DLQ_PULL_BATCH: i32 = 32;

/// How a message id was resolved by [`MQAdmin::view_message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageIdKind {
    /// An offset msgId: broker address + commit-log offset.
    Offset,
    /// A client unique id (UNIQ_KEY), found through the brokers' indexes.
    Unique,
}

/// What [`MQAdmin::resend_dlq_messages`] did with one dead-lettered message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DlqResendOutcome {
    /// The message's id (UNIQ_KEY when present).
    pub msg_id: String,
    /// The topic it was resent to (its original topic).
    pub topic: String,
    /// The send's error text, `None` when it was stored.
    pub error: Option<String>,
}

impl MQAdmin {
    /// Messages of `topic` indexed under `key` (the KEYS property) stored between `begin` and
    /// `end` (ms), from every master of the topic's route, oldest first, at most `max_num`.
    pub async fn query_message_by_key(
        &self,
        topic: &str,
        key: &str,
        max_num: i32,
        begin: i64,
        end: i64,
    ) -> Result<Vec<MessageExt>> {
        let mut found = self
            .query_index(topic, key, max_num, begin, end, false)
            .await?;
        found.retain(|m| m.keys().any(|k| k == key));
        Ok(found)
    }

    /// The messages of `topic` whose UNIQ_KEY is `uniq_key` (one, unless the broker stored
    /// a resend twice), oldest first.
    pub async fn query_message_by_unique_key(
        &self,
        topic: &str,
        uniq_key: &str,
    ) -> Result<Vec<MessageExt>> {
        let mut found = self
            .query_index(topic, uniq_key, DEFAULT_QUERY_MAX_NUM, 0, i64::MAX, true)
            .await?;
        found.retain(|m| m.uniq_key() == Some(uniq_key));
        Ok(found)
    }

    async fn query_index(
        &self,
        topic: &str,
        key: &str,
        max_num: i32,
        begin: i64,
        end: i64,
        unique: bool,
    ) -> Result<Vec<MessageExt>> {
        let route = self.topic_route(topic).await?;
        let header = QueryMessageRequestHeader {
            topic: topic.to_owned(),
            key: key.to_owned(),
            max_num,
            begin_timestamp: begin,
            end_timestamp: end,
            ..Default::default()
        };
        let mut found = Vec::new();
        for (_, addr) in route_masters(&route) {
            let mut messages = self
                .api()
                .query_message(&addr, header.clone(), unique, self.timeout())
                .await?;
            found.append(&mut messages);
        }
        found.sort_by_key(|m| (m.store_timestamp, m.commit_log_offset));
        found.truncate(usize::try_from(max_num.max(0)).unwrap_or(0));
        Ok(found)
    }

    /// The message with id `msg_id`: an offset msgId is viewed on the broker it names, a unique
    /// id is looked up in `topic`'s indexes (see the module docs for how the two are told apart).
    pub async fn view_message(
        &self,
        msg_id: &str,
        topic: Option<&str>,
    ) -> Result<(MessageIdKind, MessageExt)> {
        let offset_id = decode_offset_msg_id(msg_id).ok();
        if let Some((addr, offset)) = offset_id
            && self.is_known_broker(addr).await
        {
            let msg = self
                .api()
                .view_message(&addr.to_string(), offset, self.timeout())
                .await?;
            return Ok((MessageIdKind::Offset, msg));
        }
        if let Some(topic) = topic {
            let found = self.query_message_by_unique_key(topic, msg_id).await?;
            if let Some(msg) = found.into_iter().next_back() {
                return Ok((MessageIdKind::Unique, msg));
            }
        }
        match offset_id {
            Some((addr, offset)) => {
                let msg = self
                    .api()
                    .view_message(&addr.to_string(), offset, self.timeout())
                    .await?;
                Ok((MessageIdKind::Offset, msg))
            }
            None => Err(ClientError::IllegalArgument(format!(
                "message {msg_id} not found{}",
                if topic.is_some() {
                    ""
                } else {
                    " (give the topic to look a unique id up)"
                }
            ))),
        }
    }

    /// Whether `addr` is the address of a broker (master or slave) the name server knows.
    async fn is_known_broker(&self, addr: SocketAddr) -> bool {
        let Ok(info) = self.cluster_info().await else {
            return false;
        };
        let wanted = addr.to_string();
        info.broker_addr_table
            .values()
            .flat_map(|b| b.broker_addrs.values())
            .any(|a| *a == wanted)
    }

    /// Up to `max` messages of the group's dead-letter queue, oldest first per queue. Reads with
    /// [`TOOLS_CONSUMER_GROUP`] and commits nothing. A group that never dead-lettered anything has
    /// no DLQ topic: that is an empty list, not an error.
    pub async fn dlq_messages(&self, group: &str, max: usize) -> Result<Vec<MessageExt>> {
        let topic = dlq_topic(group);
        let route = match self.topic_route(&topic).await {
            Ok(route) => route,
            Err(ClientError::NoRoute { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let masters: BTreeSet<(String, String)> = route_masters(&route).into_iter().collect();
        let mut out = Vec::new();
        for queue_data in route.queue_datas.iter().filter(|q| q.is_readable()) {
            let Some((_, addr)) = masters
                .iter()
                .find(|(name, _)| *name == queue_data.broker_name)
            else {
                continue;
            };
            for queue_id in 0..queue_data.read_queue_nums {
                if out.len() >= max {
                    return Ok(out);
                }
                self.drain_queue(addr, &topic, queue_id, max - out.len(), &mut out)
                    .await?;
            }
        }
        Ok(out)
    }

    /// Appends up to `limit` messages of one queue, from its min offset on, to `out`.
    async fn drain_queue(
        &self,
        addr: &str,
        topic: &str,
        queue_id: i32,
        limit: usize,
        out: &mut Vec<MessageExt>,
    ) -> Result<()> {
        let api = self.api();
        let mut offset = api
            .get_min_offset(addr, topic, queue_id, self.timeout())
            .await?;
        let max_offset = api
            .get_max_offset(addr, topic, queue_id, self.timeout())
            .await?;
        let mut taken = 0;
        while offset < max_offset && taken < limit {
            let header = PullMessageRequestHeader {
                consumer_group: TOOLS_CONSUMER_GROUP.to_owned(),
                topic: topic.to_owned(),
                queue_id,
                queue_offset: offset,
                max_msg_nums: DLQ_PULL_BATCH,
                sys_flag: pull_sys_flag::build(false, false, true, false),
                commit_offset: 0,
                suspend_timeout_millis: 0,
                subscription: Some(SUB_ALL.to_owned()),
                sub_version: 0,
                expression_type: Some(
                    comet_protocol::body::heartbeat::EXPRESSION_TYPE_TAG.to_owned(),
                ),
                ..Default::default()
            };
            let result = api.pull_message(addr, header, self.timeout()).await?;
            if result.next_begin_offset <= offset && result.msg_found_list.is_empty() {
                break;
            }
            offset = result.next_begin_offset;
            if result.pull_status == PullStatus::Found {
                for msg in result.msg_found_list {
                    if taken >= limit {
                        break;
                    }
                    out.push(msg);
                    taken += 1;
                }
            }
        }
        Ok(())
    }

    /// Sends up to `max` messages of the group's dead-letter queue back to their original
    /// topics with `producer` (body, flag, tags and keys kept), so the group consumes them again.
    /// The DLQ itself is left as it is (RocketMQ never deletes single messages); one outcome per
    /// message, failures included.
    pub async fn resend_dlq_messages(
        &self,
        group: &str,
        max: usize,
        producer: &DefaultMQProducer,
    ) -> Result<Vec<DlqResendOutcome>> {
        let mut outcomes = Vec::new();
        for msg in self.dlq_messages(group, max).await? {
            let msg_id = msg.msg_id();
            let Some(topic) = Self::dlq_origin_topic(&msg) else {
                outcomes.push(DlqResendOutcome {
                    msg_id,
                    topic: String::new(),
                    error: Some("the original topic is unknown".to_owned()),
                });
                continue;
            };
            let mut copy = Message::new(topic.clone(), msg.body.clone());
            copy.flag = msg.flag;
            if let Some(tags) = msg.tags() {
                copy.set_tags(tags);
            }
            let keys: Vec<String> = msg.keys().map(str::to_owned).collect();
            if !keys.is_empty() {
                copy.set_keys(keys);
            }
            let error = producer.send(copy).await.err().map(|e| e.to_string());
            outcomes.push(DlqResendOutcome {
                msg_id,
                topic,
                error,
            });
        }
        Ok(outcomes)
    }

    /// The topic a dead-lettered message originally belonged to: RETRY_TOPIC (set by the
    /// broker on the first send-back), else the message's own topic when it is not a DLQ.
    pub fn dlq_origin_topic(msg: &MessageExt) -> Option<String> {
        msg.properties
            .get(keys::RETRY_TOPIC)
            .map(str::to_owned)
            .or_else(|| {
                msg.properties
                    .get(keys::DLQ_ORIGIN_TOPIC)
                    .map(str::to_owned)
            })
            .or_else(|| (!msg.topic.starts_with(DLQ_GROUP_TOPIC_PREFIX)).then(|| msg.topic.clone()))
    }
}
