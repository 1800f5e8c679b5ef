//! Sending a message back after failed consumption: to the group's retry topic
//! (`%RETRY%<group>`), from which the broker redelivers it with a growing delay, and to the
//! dead-letter queue (`%DLQ%<group>`) once it was reconsumed `max_reconsume_times` times.
//!
//! The consumer first asks the broker the message came from to do it (CONSUMER_SEND_MSG_BACK);
//! when that fails it sends a copy to the retry topic itself, as a new message carrying the
//! original id, topic and reconsume count, which is what the Java client's inner producer does.

use std::time::Duration;

use comet_protocol::headers::SendMessageRequestHeader;
use comet_protocol::message::properties::keys;

use super::{PushConsumerInner, Runtime};
use crate::api::CommunicationMode;
use crate::consumer::{MessageExt, now_millis, retry_topic};
use crate::error::ClientError;
use crate::message::Message;

/// Timeout of CONSUMER_SEND_MSG_BACK (Java uses 5 s).
pub const SEND_MESSAGE_BACK_TIMEOUT: Duration = Duration::from_millis(5000);
/// Producer group announced for the consumer's own sends to a retry topic.
pub const CLIENT_INNER_PRODUCER_GROUP: &str = "CLIENT_INNER_PRODUCER";
/// The template topic of auto-created topics.
pub use comet_protocol::naming::AUTO_CREATE_TOPIC_KEY_TOPIC as AUTO_CREATE_TOPIC_KEY;
/// Queue count asked for when a send auto-creates a topic.
pub const DEFAULT_TOPIC_QUEUE_NUMS: i32 = 4;

impl PushConsumerInner {
    /// Hands a failed message back: CONSUMER_SEND_MSG_BACK to the broker the message came from,
    /// falling back to a plain send to the retry topic when that fails.
    pub(crate) async fn send_message_back(
        &self,
        msg: &MessageExt,
        delay_level: i32,
        broker_name: &str,
    ) -> Result<(), ClientError> {
        let Some(rt) = self.runtime() else {
            return Err(ClientError::Client("consumer not started".into()));
        };
        let (group, max_reconsume) = {
            let c = self.config.read();
            (
                c.consumer_group.clone(),
                c.max_reconsume_times_concurrently(),
            )
        };
        let addr = rt
            .instance
            .find_broker_address_in_publish(broker_name)
            .unwrap_or_else(|| msg.store_host.to_string());
        let back = rt
            .instance
            .api()
            .consumer_send_message_back(
                &addr,
                broker_name,
                msg,
                &group,
                delay_level,
                SEND_MESSAGE_BACK_TIMEOUT,
                max_reconsume,
            )
            .await;
        match back {
            Ok(()) => Ok(()),
            Err(e) => {
                tracing::warn!(group = %group, msg_id = %msg.msg_id(), error = %e,
                    "sendMessageBack failed, sending to the retry topic directly");
                self.send_to_retry_topic(
                    &rt,
                    msg,
                    broker_name,
                    msg.reconsume_times.saturating_add(1),
                    max_reconsume,
                )
                .await
            }
        }
    }

    /// Sends a copy of `msg` to `%RETRY%<group>` as a new message (Java's fallback via the
    /// instance's inner producer). The broker applies the delay and moves it to the DLQ once
    /// `reconsume_times` exceeds `max_reconsume`.
    pub(crate) async fn send_to_retry_topic(
        &self,
        rt: &Runtime,
        msg: &MessageExt,
        broker_name: &str,
        reconsume_times: i32,
        max_reconsume: i32,
    ) -> Result<(), ClientError> {
        let group = self.group();
        let retry = retry_topic(&group);
        let mut properties = msg.properties.clone();
        if properties
            .get(keys::ORIGIN_MESSAGE_ID)
            .is_none_or(|id| id.trim().is_empty())
        {
            properties.insert(keys::ORIGIN_MESSAGE_ID, msg.msg_id());
        }
        properties.insert(keys::RETRY_TOPIC, msg.topic.clone());
        properties.insert(keys::RECONSUME_TIME, reconsume_times.to_string());
        properties.insert(keys::MAX_RECONSUME_TIMES, max_reconsume.to_string());
        properties.remove(keys::TRANSACTION_PREPARED);
        properties.remove(keys::MIN_OFFSET);
        properties.remove(keys::MAX_OFFSET);
        properties.remove(keys::CONSUME_START_TIMESTAMP);
        let delay = 3_i32.saturating_add(msg.reconsume_times);
        properties.insert(keys::DELAY_TIME_LEVEL, delay.to_string());

        let addr = match rt.instance.find_broker_address_in_publish(broker_name) {
            Some(addr) => addr,
            None => {
                rt.instance
                    .update_topic_route_info_from_name_server(&retry)
                    .await?;
                rt.instance
                    .find_broker_address_in_publish(broker_name)
                    .ok_or_else(|| {
                        ClientError::Client(format!("The broker[{broker_name}] not exist"))
                    })?
            }
        };
        let mut message = Message::new(retry.clone(), msg.body.clone());
        message.flag = msg.flag;
        *message.properties_mut() = properties.clone();
        let header = SendMessageRequestHeader {
            producer_group: CLIENT_INNER_PRODUCER_GROUP.to_owned(),
            topic: retry,
            default_topic: AUTO_CREATE_TOPIC_KEY.to_owned(),
            default_topic_queue_nums: DEFAULT_TOPIC_QUEUE_NUMS,
            queue_id: 0,
            sys_flag: 0,
            born_timestamp: now_millis(),
            flag: msg.flag,
            properties: Some(properties.encode()),
            reconsume_times: Some(reconsume_times),
            unit_mode: Some(false),
            batch: None,
            max_reconsume_times: Some(max_reconsume),
            rpc: Default::default(),
        };
        rt.instance
            .api()
            .send_message(
                &addr,
                broker_name,
                &message,
                header,
                SEND_MESSAGE_BACK_TIMEOUT,
                CommunicationMode::Sync,
            )
            .await
            .map(|_| ())
    }
}
