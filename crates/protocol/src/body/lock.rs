//! Queue lock bodies used by orderly consumers: LOCK_BATCH_MQ asks the broker to lock a set
//! of queues for one client; the answer lists the queues actually locked.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::queue::MessageQueue;

/// Broker-side lock expiry (ms).
pub const BROKER_LOCK_MAX_LIVE_TIME_MILLIS: i64 = 60_000;
/// Client-side lock validity (ms).
pub const CLIENT_LOCK_MAX_LIVE_TIME_MILLIS: i64 = 30_000;
/// Client re-lock interval (ms).
pub const CLIENT_LOCK_INTERVAL_MILLIS: i64 = 20_000;

/// LOCK_BATCH_MQ request body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockBatchRequestBody {
    #[serde(default)]
    pub consumer_group: String,
    #[serde(default)]
    pub client_id: String,
    #[serde(default)]
    pub only_this_broker: bool,
    #[serde(default)]
    pub mq_set: BTreeSet<MessageQueue>,
}

/// LOCK_BATCH_MQ response body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LockBatchResponseBody {
    #[serde(rename = "lockOKMQSet", default)]
    pub lock_ok_mq_set: BTreeSet<MessageQueue>,
}

/// UNLOCK_BATCH_MQ request body (same keys as the lock request).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnlockBatchRequestBody {
    #[serde(default)]
    pub consumer_group: String,
    #[serde(default)]
    pub client_id: String,
    #[serde(default)]
    pub only_this_broker: bool,
    #[serde(default)]
    pub mq_set: BTreeSet<MessageQueue>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::lenient::{from_fastjson, to_fastjson};

    #[test]
    fn lock_bodies() {
        let req = LockBatchRequestBody {
            consumer_group: "g".into(),
            client_id: "c".into(),
            only_this_broker: false,
            mq_set: [
                MessageQueue::new("T", "b", 1),
                MessageQueue::new("T", "b", 0),
            ]
            .into(),
        };
        let text = to_fastjson(&req).unwrap();
        assert_eq!(
            text,
            r#"{"clientId":"c","consumerGroup":"g","mqSet":[{"brokerName":"b","queueId":0,"topic":"T"},{"brokerName":"b","queueId":1,"topic":"T"}],"onlyThisBroker":false}"#
        );
        let back: UnlockBatchRequestBody = from_fastjson(text.as_bytes()).unwrap();
        assert_eq!(back.mq_set, req.mq_set);
        let rsp = LockBatchResponseBody {
            lock_ok_mq_set: req.mq_set.clone(),
        };
        assert!(
            to_fastjson(&rsp)
                .unwrap()
                .starts_with(r#"{"lockOKMQSet":[{"brokerName""#)
        );
    }
}
