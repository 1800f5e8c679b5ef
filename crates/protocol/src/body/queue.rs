//! `MessageQueue`: the (topic, brokerName, queueId) triple that names one queue.
//!
//! It appears as a value (lock bodies) and as a map key (ConsumeStats, TopicStatsTable,
//! ResetOffsetBody). As a key, fastjson writes it as an object in key position; after
//! [`super::lenient::normalize`] that becomes a string holding the object's JSON, so the
//! `Deserialize` impl here accepts both an object and such a string. Field order in the output is
//! fastjson's alphabetical order, `brokerName, queueId, topic`, which the Go client's
//! string-splitting parser depends on.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// One queue of a topic on one broker.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueue {
    pub broker_name: String,
    pub queue_id: i32,
    pub topic: String,
}

impl MessageQueue {
    pub fn new(topic: impl Into<String>, broker_name: impl Into<String>, queue_id: i32) -> Self {
        MessageQueue {
            broker_name: broker_name.into(),
            queue_id,
            topic: topic.into(),
        }
    }
}

impl fmt::Display for MessageQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MessageQueue [topic={}, brokerName={}, queueId={}]",
            self.topic, self.broker_name, self.queue_id
        )
    }
}

/// Plain field-wise form, used for the object case and for parsing the string case.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageQueueFields {
    #[serde(default)]
    broker_name: String,
    #[serde(default)]
    queue_id: i32,
    #[serde(default)]
    topic: String,
}

impl From<MessageQueueFields> for MessageQueue {
    fn from(f: MessageQueueFields) -> Self {
        MessageQueue {
            broker_name: f.broker_name,
            queue_id: f.queue_id,
            topic: f.topic,
        }
    }
}

impl<'de> Deserialize<'de> for MessageQueue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MessageQueueVisitor)
    }
}

struct MessageQueueVisitor;

impl<'de> Visitor<'de> for MessageQueueVisitor {
    type Value = MessageQueue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a MessageQueue object, or a string holding one as JSON")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<MessageQueue, E> {
        serde_json::from_str::<MessageQueueFields>(v)
            .map(MessageQueue::from)
            .map_err(|e| E::custom(format!("bad MessageQueue key {v:?}: {e}")))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<MessageQueue, A::Error> {
        MessageQueueFields::deserialize(de::value::MapAccessDeserializer::new(map))
            .map(MessageQueue::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::lenient::{from_fastjson, to_fastjson, to_standard_json};
    use std::collections::HashMap;

    #[test]
    fn value_and_key_forms() {
        let mq = MessageQueue::new("T", "broker-a", 3);
        assert_eq!(
            to_fastjson(&mq).unwrap(),
            r#"{"brokerName":"broker-a","queueId":3,"topic":"T"}"#
        );
        let back: MessageQueue = from_fastjson(to_fastjson(&mq).unwrap().as_bytes()).unwrap();
        assert_eq!(back, mq);

        let table = HashMap::from([(mq.clone(), 42i64)]);
        let legacy = to_fastjson(&table).unwrap();
        assert_eq!(
            legacy,
            r#"{{"brokerName":"broker-a","queueId":3,"topic":"T"}:42}"#
        );
        let standard = to_standard_json(&table).unwrap();
        for text in [legacy, standard] {
            let back: HashMap<MessageQueue, i64> = from_fastjson(text.as_bytes()).unwrap();
            assert_eq!(back, table);
        }
        assert!(from_fastjson::<HashMap<MessageQueue, i64>>(br#"{"nonsense":1}"#).is_err());
    }
}
