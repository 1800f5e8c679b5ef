//! Client management headers: heartbeat, unregister, consumer-list lookup, and the
//! broker-to-client NOTIFY_CONSUMER_IDS_CHANGED. HEART_BEAT, LOCK_BATCH_MQ and UNLOCK_BATCH_MQ
//! carry only the inherited keys; their payloads are JSON bodies (see `crate::body`).

use crate::headers::command_header;

command_header! {
    /// HEART_BEAT (34) request: only the inherited keys; the body is HeartbeatData.
    pub struct HeartbeatRequestHeader [rpc] {}
}

command_header! {
    /// Ext fields of a 5.x HEART_BEAT response.
    pub struct HeartbeatResponseHeader {
        opt support_heartbeat_v2: bool => "IS_SUPPORT_HEART_BEAT_V2",
        opt sub_change: bool => "IS_SUB_CHANGE",
    }
}

command_header! {
    /// UNREGISTER_CLIENT (35).
    pub struct UnregisterClientRequestHeader [rpc] {
        req client_id: String => "clientID",
        opt producer_group: String => "producerGroup",
        opt consumer_group: String => "consumerGroup",
    }
}

command_header! {
    /// GET_CONSUMER_LIST_BY_GROUP (38). The answer is a body
    /// (`GetConsumerListByGroupResponseBody`).
    pub struct GetConsumerListByGroupRequestHeader [rpc] {
        req consumer_group: String => "consumerGroup",
    }
}

command_header! {
    /// NOTIFY_CONSUMER_IDS_CHANGED (40), broker → client, oneway.
    pub struct NotifyConsumerIdsChangedRequestHeader [rpc] {
        req consumer_group: String => "consumerGroup",
    }
}

command_header! {
    /// LOCK_BATCH_MQ (41) / UNLOCK_BATCH_MQ (42): only the inherited keys.
    pub struct LockBatchMqRequestHeader [rpc] {}
}
