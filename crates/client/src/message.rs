//! The user-facing `Message`: what a producer sends.
//!
//! As in RocketMQ, tags, keys, the delay level and the "wait for store" switch are not separate
//! wire fields but properties (the `key 0x01 value 0x02` string every message carries), so
//! `Message` keeps them in its [`Properties`] and offers typed accessors. This keeps the wire form
//! the single source of truth: what `properties()` shows is exactly what the broker stores and a
//! consumer reads back.

use bytes::Bytes;
use comet_protocol::message::Properties;
use comet_protocol::message::properties::keys;

use crate::error::ClientError;

pub use comet_protocol::body::MessageQueue;
pub use comet_protocol::message::MessageExt;

/// Separator of several keys in the KEYS property.
pub const KEY_SEPARATOR: &str = " ";

/// Property keys the client manages itself; user properties may not use them.
pub const RESERVED_PROPERTY_KEYS: &[&str] = &[
    keys::TAGS,
    keys::KEYS,
    keys::WAIT_STORE_MSG_OK,
    keys::DELAY_TIME_LEVEL,
    keys::RETRY_TOPIC,
    keys::REAL_TOPIC,
    keys::REAL_QUEUE_ID,
    keys::TRANSACTION_PREPARED,
    keys::PRODUCER_GROUP,
    keys::MIN_OFFSET,
    keys::MAX_OFFSET,
    keys::UNIQ_KEY,
    keys::RECONSUME_TIME,
    keys::MAX_RECONSUME_TIMES,
    keys::MSG_REGION,
    keys::TRACE_SWITCH,
];

/// A message to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The topic the message is sent to.
    pub topic: String,
    /// User flag, stored as-is by the broker.
    pub flag: i32,
    /// The payload.
    pub body: Bytes,
    properties: Properties,
    /// Set by a transaction producer.
    pub transaction_id: Option<String>,
}

impl Message {
    /// A message to `topic` with `body`. Like Java's constructors, it asks the broker to wait for
    /// the store (`WAIT=true`).
    pub fn new(topic: impl Into<String>, body: impl Into<Bytes>) -> Self {
        let mut properties = Properties::new();
        properties.insert(keys::WAIT_STORE_MSG_OK, "true");
        Message {
            topic: topic.into(),
            flag: 0,
            body: body.into(),
            properties,
            transaction_id: None,
        }
    }

    /// Builder form of [`Message::set_tags`].
    pub fn with_tags(mut self, tags: impl Into<String>) -> Self {
        self.set_tags(tags);
        self
    }

    /// Builder form of [`Message::set_keys`] for one key.
    pub fn with_keys<I, S>(mut self, keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.set_keys(keys);
        self
    }

    /// Builder form of [`Message::set_delay_level`].
    pub fn with_delay_level(mut self, level: i32) -> Self {
        self.set_delay_level(level);
        self
    }

    /// The message's tags (`TAGS`), which consumers filter on.
    pub fn tags(&self) -> Option<&str> {
        self.properties.get(keys::TAGS)
    }

    /// Sets the tags (an empty string removes them).
    pub fn set_tags(&mut self, tags: impl Into<String>) {
        let tags = tags.into();
        if tags.is_empty() {
            self.properties.remove(keys::TAGS);
        } else {
            self.properties.insert(keys::TAGS, tags);
        }
    }

    /// The KEYS property split on spaces.
    pub fn keys(&self) -> Vec<&str> {
        self.properties
            .get(keys::KEYS)
            .unwrap_or("")
            .split(KEY_SEPARATOR)
            .filter(|k| !k.is_empty())
            .collect()
    }

    /// Sets the index keys (joined with spaces, as RocketMQ stores them).
    pub fn set_keys<I, S>(&mut self, keys_iter: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let joined = keys_iter
            .into_iter()
            .map(|k| k.as_ref().trim().to_string())
            .filter(|k| !k.is_empty())
            .collect::<Vec<_>>()
            .join(KEY_SEPARATOR);
        if joined.is_empty() {
            self.properties.remove(keys::KEYS);
        } else {
            self.properties.insert(keys::KEYS, joined);
        }
    }

    /// The delay level, 0 when none.
    pub fn delay_level(&self) -> i32 {
        self.properties
            .get(keys::DELAY_TIME_LEVEL)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// Sets the delay level (1..=18 with the default broker levels); 0 clears it.
    pub fn set_delay_level(&mut self, level: i32) {
        if level == 0 {
            self.properties.remove(keys::DELAY_TIME_LEVEL);
        } else {
            self.properties
                .insert(keys::DELAY_TIME_LEVEL, level.to_string());
        }
    }

    /// Asks for delivery at `epoch_ms` (ms since the epoch) through the broker's timer wheel
    /// (TIMER_DELIVER_MS; RocketMQ 5.x `setDeliverTimeMs`). A time already passed is delivered
    /// at once; one further ahead than the broker's `timerMaxDelaySec` is refused.
    pub fn set_deliver_time_ms(&mut self, epoch_ms: i64) {
        self.properties
            .insert(keys::TIMER_DELIVER_MS, epoch_ms.to_string());
    }

    /// The delivery time set by [`Message::set_deliver_time_ms`].
    pub fn deliver_time_ms(&self) -> Option<i64> {
        self.properties
            .get(keys::TIMER_DELIVER_MS)
            .and_then(|v| v.parse().ok())
    }

    /// Asks for delivery `delay_ms` after the broker receives the message (TIMER_DELAY_MS;
    /// RocketMQ 5.x `setDelayTimeMs`).
    pub fn set_delay_time_ms(&mut self, delay_ms: i64) {
        self.properties
            .insert(keys::TIMER_DELAY_MS, delay_ms.to_string());
    }

    /// Asks for delivery `delay_sec` seconds after the broker receives the message
    /// (TIMER_DELAY_SEC; RocketMQ 5.x `setDelayTimeSec`).
    pub fn set_delay_time_sec(&mut self, delay_sec: i64) {
        self.properties
            .insert(keys::TIMER_DELAY_SEC, delay_sec.to_string());
    }

    /// Whether the broker answers only after the store (flush/replication) completed.
    pub fn wait_store_msg_ok(&self) -> bool {
        self.properties
            .get(keys::WAIT_STORE_MSG_OK)
            .is_none_or(|v| v != "false")
    }

    /// Whether the broker should answer only after the store completed (`WAIT`; on by default).
    pub fn set_wait_store_msg_ok(&mut self, wait: bool) {
        self.properties
            .insert(keys::WAIT_STORE_MSG_OK, if wait { "true" } else { "false" });
    }

    /// Sets an application property. Keys the client manages ([`RESERVED_PROPERTY_KEYS`]) and
    /// empty keys or values are refused: they would change how the message is routed or be
    /// dropped by the properties codec.
    pub fn put_user_property(
        &mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<(), ClientError> {
        let key = key.into();
        let value = value.into();
        if key.trim().is_empty() || value.trim().is_empty() {
            return Err(ClientError::IllegalArgument(
                "user property key and value must not be blank".to_string(),
            ));
        }
        if RESERVED_PROPERTY_KEYS.contains(&key.as_str()) {
            return Err(ClientError::IllegalArgument(format!(
                "the property {key} is reserved by the client"
            )));
        }
        self.properties.insert(key, value);
        Ok(())
    }

    /// An application property.
    pub fn user_property(&self, key: &str) -> Option<&str> {
        self.properties.get(key)
    }

    /// Any property, including the ones the client manages (used by the producer and tests).
    pub fn property(&self, key: &str) -> Option<&str> {
        self.properties.get(key)
    }

    /// Sets any property, including reserved ones (the producer's own bookkeeping).
    pub fn put_property(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) {
        self.properties.insert(key, value);
    }

    /// Removes a property, returning its value.
    pub fn remove_property(&mut self, key: &str) -> Option<String> {
        self.properties.remove(key)
    }

    /// Every property.
    pub fn properties(&self) -> &Properties {
        &self.properties
    }

    /// Every property, to change.
    pub fn properties_mut(&mut self) -> &mut Properties {
        &mut self.properties
    }

    /// The client message id, once the producer assigned one.
    pub fn uniq_key(&self) -> Option<&str> {
        self.properties.get(keys::UNIQ_KEY)
    }
}

impl From<MessageExt> for Message {
    /// A received message as a message to send again (e.g. forwarding); broker-side fields drop.
    fn from(ext: MessageExt) -> Self {
        Message {
            topic: ext.topic,
            flag: ext.flag,
            body: ext.body,
            properties: ext.properties,
            transaction_id: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_setters_write_the_5x_properties() {
        let mut m = Message::new("T", b"x".to_vec());
        assert_eq!(m.deliver_time_ms(), None);
        m.set_deliver_time_ms(1_700_000_000_000);
        m.set_delay_time_ms(1500);
        m.set_delay_time_sec(3);
        assert_eq!(m.deliver_time_ms(), Some(1_700_000_000_000));
        assert_eq!(m.property("TIMER_DELIVER_MS"), Some("1700000000000"));
        assert_eq!(m.property("TIMER_DELAY_MS"), Some("1500"));
        assert_eq!(m.property("TIMER_DELAY_SEC"), Some("3"));
    }

    #[test]
    fn tags_keys_and_delay_live_in_properties() {
        let msg = Message::new("T", "body")
            .with_tags("TagA")
            .with_keys(["k1", " k2 ", ""])
            .with_delay_level(3);
        let mut msg = msg;
        msg.put_user_property("color", "red")
            .expect("user property");
        assert!(msg.put_user_property(keys::TAGS, "x").is_err());
        assert!(msg.put_user_property("k", " ").is_err());
        assert_eq!(msg.tags(), Some("TagA"));
        assert_eq!(msg.keys(), vec!["k1", "k2"]);
        assert_eq!(msg.properties().get(keys::KEYS), Some("k1 k2"));
        assert_eq!(msg.delay_level(), 3);
        assert_eq!(msg.user_property("color"), Some("red"));
        assert!(msg.wait_store_msg_ok());
        let mut cleared = msg.clone();
        cleared.set_delay_level(0);
        cleared.set_tags("");
        assert_eq!(cleared.delay_level(), 0);
        assert_eq!(cleared.tags(), None);
    }

    #[test]
    fn wait_flag_round_trips() {
        let mut msg = Message::new("T", Bytes::new());
        msg.set_wait_store_msg_ok(false);
        assert!(!msg.wait_store_msg_ok());
        assert_eq!(msg.properties().get(keys::WAIT_STORE_MSG_OK), Some("false"));
    }
}
