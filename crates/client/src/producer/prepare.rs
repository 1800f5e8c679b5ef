//! Turning what the application sends into its wire form: the message id (UNIQ_KEY, from the
//! client's id generator), body compression above `compress_msg_body_over_howmuch` (zlib, with
//! the sys flag telling the broker), the transaction and reconsume fields, and for a batch the
//! SEND_BATCH_MESSAGE body with the comma-joined ids of its messages.

use std::borrow::Cow;

use bytes::{Bytes, BytesMut};
use comet_protocol::message::batch::{BatchEntry, encode_batch};
use comet_protocol::message::compress::{self, CompressionType};
use comet_protocol::message::properties::keys;
use comet_protocol::message::sysflag;

use super::{ProducerInner, check_topic};
use crate::api::RETRY_GROUP_TOPIC_PREFIX;
use crate::error::{ClientError, Result};
use crate::message::Message;

/// Separator of message ids of a batch.
const BATCH_ID_SEPARATOR: &str = ",";

/// A message ready for the wire: id assigned, body compressed, flags computed.
pub(super) struct Outgoing {
    pub(super) msg: Message,
    pub(super) sys_flag: i32,
    pub(super) batch: bool,
    /// What `SendResult::msg_id` reports (comma-joined ids for a batch).
    pub(super) msg_id: String,
    pub(super) reconsume_times: Option<i32>,
    pub(super) max_reconsume_times: Option<i32>,
}

impl ProducerInner {
    /// Validates `msg` and turns it into its wire form.
    pub(super) fn prepare(&self, mut msg: Message) -> Result<Outgoing> {
        self.instance()?;
        check_topic(&msg.topic)?;
        self.check_body(&msg)?;
        if let Cow::Owned(topic) = self.config.client.namespaced(&msg.topic) {
            msg.topic = topic;
        }
        let msg_id = match msg.uniq_key() {
            Some(id) => id.to_string(),
            None => {
                let id = self.uniq.next_id();
                msg.put_property(keys::UNIQ_KEY, id.clone());
                id
            }
        };
        let mut sys_flag = 0;
        if msg.body.len() >= self.config.compress_msg_body_over_howmuch {
            let packed =
                compress::compress(CompressionType::Zlib, self.config.compress_level, &msg.body)?;
            msg.body = Bytes::from(packed);
            sys_flag = CompressionType::Zlib.mark(sys_flag);
        }
        if msg.property(keys::TRANSACTION_PREPARED) == Some("true") {
            sys_flag = sysflag::with_transaction_type(sys_flag, sysflag::TRANSACTION_PREPARED_TYPE);
        }
        let (mut reconsume_times, mut max_reconsume_times) = (None, None);
        if msg.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            reconsume_times = msg
                .remove_property(keys::RECONSUME_TIME)
                .and_then(|v| v.parse().ok());
            max_reconsume_times = msg
                .remove_property(keys::MAX_RECONSUME_TIMES)
                .and_then(|v| v.parse().ok());
        }
        Ok(Outgoing {
            msg,
            sys_flag,
            batch: false,
            msg_id,
            reconsume_times,
            max_reconsume_times,
        })
    }

    /// Validates a batch and encodes it into one wire message.
    pub(super) fn prepare_batch(&self, msgs: Vec<Message>) -> Result<Outgoing> {
        self.instance()?;
        let Some(first) = msgs.first() else {
            return Err(ClientError::IllegalArgument(
                "the batch is empty".to_string(),
            ));
        };
        let topic = first.topic.clone();
        let wait = first.wait_store_msg_ok();
        check_topic(&topic)?;
        let mut entries = Vec::with_capacity(msgs.len());
        let mut ids = Vec::with_capacity(msgs.len());
        for mut msg in msgs {
            if msg.topic != topic {
                return Err(ClientError::IllegalArgument(format!(
                    "all messages of a batch must have the same topic ({topic} and {})",
                    msg.topic
                )));
            }
            if msg.delay_level() > 0 {
                return Err(ClientError::IllegalArgument(
                    "delayed messages are not supported in a batch".to_string(),
                ));
            }
            if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
                return Err(ClientError::IllegalArgument(
                    "retry topics are not supported in a batch".to_string(),
                ));
            }
            if msg.wait_store_msg_ok() != wait {
                return Err(ClientError::IllegalArgument(
                    "all messages of a batch must have the same WAIT flag".to_string(),
                ));
            }
            self.check_body(&msg)?;
            let id = match msg.uniq_key() {
                Some(id) => id.to_string(),
                None => {
                    let id = self.uniq.next_id();
                    msg.put_property(keys::UNIQ_KEY, id.clone());
                    id
                }
            };
            ids.push(id);
            entries.push(BatchEntry {
                flag: msg.flag,
                body: msg.body.clone(),
                properties: msg.properties().clone(),
            });
        }
        let mut encoded = BytesMut::new();
        encode_batch(&entries, &mut encoded)?;
        if encoded.len() > self.config.max_message_size {
            return Err(ClientError::IllegalArgument(format!(
                "the encoded batch is {} bytes, over the maximum message size {}",
                encoded.len(),
                self.config.max_message_size
            )));
        }
        let mut batch = Message::new(self.config.client.with_namespace(&topic), encoded.freeze());
        batch.set_wait_store_msg_ok(wait);
        batch.put_property(keys::UNIQ_KEY, self.uniq.next_id());
        Ok(Outgoing {
            msg: batch,
            sys_flag: 0,
            batch: true,
            msg_id: ids.join(BATCH_ID_SEPARATOR),
            reconsume_times: None,
            max_reconsume_times: None,
        })
    }

    fn check_body(&self, msg: &Message) -> Result<()> {
        if msg.body.is_empty() {
            return Err(ClientError::IllegalArgument(
                "the message body is empty".to_string(),
            ));
        }
        if msg.body.len() > self.config.max_message_size {
            return Err(ClientError::IllegalArgument(format!(
                "the message body is {} bytes, over the maximum message size {}",
                msg.body.len(),
                self.config.max_message_size
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{DefaultMQProducer, ProducerConfig};
    use super::*;

    #[test]
    fn unstarted_producer_refuses_to_send() {
        let producer = DefaultMQProducer::new(ProducerConfig::new("pg", "127.0.0.1:1"));
        let err = producer
            .inner
            .prepare(Message::new("T", "x"))
            .err()
            .expect("refused");
        assert!(matches!(err, ClientError::ServiceState { .. }));
    }
}
