//! Routing bodies: TopicRouteData (GET_ROUTEINFO_BY_TOPIC) and ClusterInfo
//! (GET_BROKER_CLUSTER_INFO).
//!
//! `BrokerData.brokerAddrs` is keyed by broker id (a Java `Long`), which fastjson writes as a
//! bare number. Java clients older than 4.9.4 (request version < 401) and the Go client expect
//! that legacy form in routes; newer ones ask for standard JSON with `acceptStandardJsonOnly`.
//! ClusterInfo always uses the legacy form, as the Java name server does.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::lenient::{from_fastjson, to_fastjson_bytes, to_standard_json_bytes};
use super::topic::perm;
use crate::error::Result;

/// Broker id of a master.
pub const MASTER_ID: i64 = 0;
/// First request `version` (V4_9_4) whose route answer uses standard JSON.
pub const STANDARD_JSON_ROUTE_MIN_VERSION: i32 = 401;

/// A topic's queues on one broker.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueData {
    #[serde(default)]
    pub broker_name: String,
    #[serde(default)]
    pub read_queue_nums: i32,
    #[serde(default)]
    pub write_queue_nums: i32,
    #[serde(default)]
    pub perm: i32,
    #[serde(default)]
    pub topic_sys_flag: i32,
}

impl QueueData {
    pub fn is_readable(&self) -> bool {
        perm::is_readable(self.perm)
    }

    pub fn is_writeable(&self) -> bool {
        perm::is_writeable(self.perm)
    }
}

/// One broker set (a master and its slaves) sharing a broker name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerData {
    #[serde(default)]
    pub cluster: String,
    #[serde(default)]
    pub broker_name: String,
    /// Broker id → `ip:port`; id 0 is the master.
    #[serde(default)]
    pub broker_addrs: BTreeMap<i64, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_name: Option<String>,
    #[serde(default)]
    pub enable_acting_master: bool,
}

impl BrokerData {
    /// The master's address, if the master is registered.
    pub fn master_addr(&self) -> Option<&str> {
        self.broker_addrs.get(&MASTER_ID).map(String::as_str)
    }
}

/// The route of one topic.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicRouteData {
    /// `brokerName:queueNum;...` for ordered topics configured on the name server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_topic_conf: Option<String>,
    #[serde(default)]
    pub queue_datas: Vec<QueueData>,
    #[serde(default)]
    pub broker_datas: Vec<BrokerData>,
    /// Broker address → filter server addresses (always empty today).
    #[serde(default)]
    pub filter_server_table: HashMap<String, Vec<String>>,
    /// 5.x static-topic mapping, kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_queue_mapping_by_broker: Option<serde_json::Value>,
}

impl TopicRouteData {
    /// Parses a route in either key form.
    pub fn decode(body: &[u8]) -> Result<Self> {
        from_fastjson(body)
    }

    /// Encodes the route: standard JSON (quoted keys) when `standard_json`, else fastjson's legacy
    /// bare-key form.
    pub fn encode(&self, standard_json: bool) -> Result<Vec<u8>> {
        if standard_json {
            to_standard_json_bytes(self)
        } else {
            to_fastjson_bytes(self)
        }
    }

    /// Whether a GET_ROUTEINFO_BY_TOPIC request wants standard JSON.
    pub fn wants_standard_json(
        request_version: i32,
        accept_standard_json_only: Option<bool>,
    ) -> bool {
        request_version >= STANDARD_JSON_ROUTE_MIN_VERSION
            || accept_standard_json_only == Some(true)
    }
}

/// The cluster layout (GET_BROKER_CLUSTER_INFO).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInfo {
    /// Broker name → broker data.
    #[serde(default)]
    pub broker_addr_table: HashMap<String, BrokerData>,
    /// Cluster name → broker names.
    #[serde(default)]
    pub cluster_addr_table: HashMap<String, Vec<String>>,
}

impl ClusterInfo {
    pub fn decode(body: &[u8]) -> Result<Self> {
        from_fastjson(body)
    }

    /// Always the legacy form (bare broker-id keys), as Java writes it.
    pub fn encode(&self) -> Result<Vec<u8>> {
        to_fastjson_bytes(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GO_ROUTE: &str = r#"{"brokerDatas":[{"brokerAddrs":{0:"172.17.0.3:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#;

    #[test]
    fn legacy_route_is_byte_identical_to_java() {
        let route = TopicRouteData::decode(GO_ROUTE.as_bytes()).unwrap();
        assert_eq!(
            route.broker_datas[0].master_addr(),
            Some("172.17.0.3:10911")
        );
        assert!(route.queue_datas[0].is_writeable());
        assert_eq!(route.encode(false).unwrap(), GO_ROUTE.as_bytes());
        let standard = String::from_utf8(route.encode(true).unwrap()).unwrap();
        assert_eq!(standard, GO_ROUTE.replace("{0:", "{\"0\":"));
        assert_eq!(TopicRouteData::decode(standard.as_bytes()).unwrap(), route);
    }

    #[test]
    fn standard_json_choice() {
        assert!(TopicRouteData::wants_standard_json(401, None));
        assert!(TopicRouteData::wants_standard_json(317, Some(true)));
        assert!(!TopicRouteData::wants_standard_json(317, Some(false)));
    }

    #[test]
    fn cluster_info_legacy_keys() {
        let src = r#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}"#;
        let info = ClusterInfo::decode(src.as_bytes()).unwrap();
        assert_eq!(info.broker_addr_table["broker-a"].broker_addrs.len(), 2);
        assert_eq!(info.encode().unwrap(), src.as_bytes());
    }
}
