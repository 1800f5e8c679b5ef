//! Controller-mode bodies, as fastjson writes them (fields sorted, integer map keys bare).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// A group's SyncStateSet and its epoch (`SyncStateSet`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncStateSet {
    #[serde(default)]
    pub sync_state_set: BTreeSet<i64>,
    #[serde(default)]
    pub sync_state_set_epoch: i32,
}

/// A group's registered replicas (`BrokerMemberGroup`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerMemberGroup {
    pub cluster: String,
    pub broker_name: String,
    pub broker_addrs: BTreeMap<i64, String>,
}

/// The body of a successful CONTROLLER_ELECT_MASTER (`ElectMasterResponseBody`); a
/// MASTER_STILL_EXIST answer carries only the set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElectMasterResponseBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_member_group: Option<BrokerMemberGroup>,
    #[serde(default)]
    pub sync_state_set: BTreeSet<i64>,
}

/// One replica in CONTROLLER_GET_SYNC_STATE_DATA's answer (`ReplicaIdentity`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaIdentity {
    pub broker_name: String,
    pub broker_id: i64,
    pub broker_address: String,
    pub alive: bool,
}

/// One group in CONTROLLER_GET_SYNC_STATE_DATA's answer (`ReplicasInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicasInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_broker_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_address: Option<String>,
    pub master_epoch: i32,
    pub sync_state_set_epoch: i32,
    pub in_sync_replicas: Vec<ReplicaIdentity>,
    pub not_in_sync_replicas: Vec<ReplicaIdentity>,
}

/// CONTROLLER_GET_SYNC_STATE_DATA's answer (`BrokerReplicasInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerReplicasInfo {
    pub replicas_info_table: BTreeMap<String, ReplicasInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::writer::to_fastjson;

    #[test]
    fn bodies_are_written_as_apache_writes_them() {
        let body = ElectMasterResponseBody {
            broker_member_group: Some(BrokerMemberGroup {
                cluster: "DefaultCluster".into(),
                broker_name: "broker-a".into(),
                broker_addrs: BTreeMap::from([
                    (1, "127.0.0.1:10911".into()),
                    (2, "127.0.0.1:10921".into()),
                ]),
            }),
            sync_state_set: BTreeSet::from([2]),
        };
        assert_eq!(
            to_fastjson(&body).expect("encodes"),
            r#"{"brokerMemberGroup":{"brokerAddrs":{1:"127.0.0.1:10911",2:"127.0.0.1:10921"},"brokerName":"broker-a","cluster":"DefaultCluster"},"syncStateSet":[2]}"#
        );
        let set = SyncStateSet {
            sync_state_set: BTreeSet::from([1, 2]),
            sync_state_set_epoch: 3,
        };
        assert_eq!(
            to_fastjson(&set).expect("encodes"),
            r#"{"syncStateSet":[1,2],"syncStateSetEpoch":3}"#
        );
        let info = BrokerReplicasInfo {
            replicas_info_table: BTreeMap::from([(
                "broker-a".to_owned(),
                ReplicasInfo {
                    master_broker_id: Some(1),
                    master_address: Some("127.0.0.1:10911".into()),
                    master_epoch: 3,
                    sync_state_set_epoch: 5,
                    in_sync_replicas: vec![ReplicaIdentity {
                        broker_name: "broker-a".into(),
                        broker_id: 1,
                        broker_address: "127.0.0.1:10911".into(),
                        alive: true,
                    }],
                    not_in_sync_replicas: vec![ReplicaIdentity {
                        broker_name: "broker-a".into(),
                        broker_id: 2,
                        broker_address: "127.0.0.1:10921".into(),
                        alive: false,
                    }],
                },
            )]),
        };
        assert_eq!(
            to_fastjson(&info).expect("encodes"),
            r#"{"replicasInfoTable":{"broker-a":{"inSyncReplicas":[{"alive":true,"brokerAddress":"127.0.0.1:10911","brokerId":1,"brokerName":"broker-a"}],"masterAddress":"127.0.0.1:10911","masterBrokerId":1,"masterEpoch":3,"notInSyncReplicas":[{"alive":false,"brokerAddress":"127.0.0.1:10921","brokerId":2,"brokerName":"broker-a"}],"syncStateSetEpoch":5}}}"#
        );
    }
}
