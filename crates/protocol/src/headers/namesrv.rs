//! Name-server headers: broker registration, route lookup, KV config, topic deletion and
//! the write-permission admin commands.

use crate::headers::command_header;

command_header! {
    /// REGISTER_BROKER (103). The body is a RegisterBrokerBody. A Java broker always sends
    /// `compressed=false` and `bodyCrc32`; both are optional here so older peers still decode.
    pub struct RegisterBrokerRequestHeader [rpc] {
        req broker_name: String => "brokerName",
        /// `ip:port` of the main listener.
        req broker_addr: String => "brokerAddr",
        req cluster_name: String => "clusterName",
        /// `ip:haPort`.
        req ha_server_addr: String => "haServerAddr",
        /// 0 = master.
        req broker_id: i64 => "brokerId",
        /// Broker-specific expiry (5.x).
        opt heartbeat_timeout_millis: i64 => "heartbeatTimeoutMillis",
        /// Absent means a pre-5.x broker.
        opt enable_acting_master: bool => "enableActingMaster",
        opt compressed: bool => "compressed",
        /// `crc32(body) & 0x7FFFFFFF`; 0 skips the check.
        opt body_crc32: i32 => "bodyCrc32",
    }
}

impl RegisterBrokerRequestHeader {
    pub fn is_compressed(&self) -> bool {
        self.compressed.unwrap_or(false)
    }

    pub fn body_crc32(&self) -> i32 {
        self.body_crc32.unwrap_or(0)
    }
}

command_header! {
    /// Response to REGISTER_BROKER; filled for a slave whose master is alive.
    pub struct RegisterBrokerResponseHeader {
        opt ha_server_addr: String => "haServerAddr",
        opt master_addr: String => "masterAddr",
    }
}

command_header! {
    /// UNREGISTER_BROKER (104).
    pub struct UnregisterBrokerRequestHeader [rpc] {
        req broker_name: String => "brokerName",
        req broker_addr: String => "brokerAddr",
        req cluster_name: String => "clusterName",
        req broker_id: i64 => "brokerId",
    }
}

command_header! {
    /// GET_ROUTEINFO_BY_TOPIC (105). `acceptStandardJsonOnly=true` (or a request version ≥ 401)
    /// asks for quoted map keys in the TopicRouteData body.
    pub struct GetRouteInfoRequestHeader [rpc] {
        req topic: String => "topic",
        opt accept_standard_json_only: bool => "acceptStandardJsonOnly",
    }
}

command_header! {
    /// PUT_KV_CONFIG (100).
    pub struct PutKvConfigRequestHeader [rpc] {
        req namespace: String => "namespace",
        req key: String => "key",
        req value: String => "value",
    }
}

command_header! {
    /// GET_KV_CONFIG (101).
    pub struct GetKvConfigRequestHeader [rpc] {
        req namespace: String => "namespace",
        req key: String => "key",
    }
}

command_header! {
    /// Response to GET_KV_CONFIG.
    pub struct GetKvConfigResponseHeader {
        opt value: String => "value",
    }
}

command_header! {
    /// DELETE_KV_CONFIG (102).
    pub struct DeleteKvConfigRequestHeader [rpc] {
        req namespace: String => "namespace",
        req key: String => "key",
    }
}

command_header! {
    /// GET_KVLIST_BY_NAMESPACE (219); the answer is a KVTable body.
    pub struct GetKvListByNamespaceRequestHeader [rpc] {
        req namespace: String => "namespace",
    }
}

command_header! {
    /// DELETE_TOPIC_IN_NAMESRV (216).
    pub struct DeleteTopicFromNamesrvRequestHeader [rpc] {
        req topic: String => "topic",
        opt cluster_name: String => "clusterName",
    }
}

command_header! {
    /// REGISTER_TOPIC_IN_NAMESRV (217); the body is a TopicRouteData.
    pub struct RegisterTopicRequestHeader [rpc] {
        req topic: String => "topic",
    }
}

command_header! {
    /// GET_TOPICS_BY_CLUSTER (224).
    pub struct GetTopicsByClusterRequestHeader [rpc] {
        req cluster: String => "cluster",
    }
}

command_header! {
    /// QUERY_DATA_VERSION (322); the body is the broker's DataVersion.
    pub struct QueryDataVersionRequestHeader [rpc] {
        req broker_name: String => "brokerName",
        req broker_addr: String => "brokerAddr",
        req cluster_name: String => "clusterName",
        req broker_id: i64 => "brokerId",
    }
}

command_header! {
    /// Response to QUERY_DATA_VERSION.
    pub struct QueryDataVersionResponseHeader {
        req changed: bool => "changed",
    }
}

command_header! {
    /// WIPE_WRITE_PERM_OF_BROKER (205).
    pub struct WipeWritePermOfBrokerRequestHeader [rpc] {
        req broker_name: String => "brokerName",
    }
}

command_header! {
    /// Response to WIPE_WRITE_PERM_OF_BROKER.
    pub struct WipeWritePermOfBrokerResponseHeader {
        req wipe_topic_count: i32 => "wipeTopicCount",
    }
}

command_header! {
    /// ADD_WRITE_PERM_OF_BROKER (327).
    pub struct AddWritePermOfBrokerRequestHeader [rpc] {
        req broker_name: String => "brokerName",
    }
}

command_header! {
    /// Response to ADD_WRITE_PERM_OF_BROKER.
    pub struct AddWritePermOfBrokerResponseHeader {
        req add_topic_count: i32 => "addTopicCount",
    }
}
