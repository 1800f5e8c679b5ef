//! Controller-mode headers (RocketMQ 5.x): what brokers and admin tools send a controller, and
//! what the controller sends brokers. Apache's controller reads every field leniently (a missing
//! one keeps its default), so every field here is optional and the controller applies the
//! defaults; a value that does not parse is still refused.

use crate::headers::command_header;

command_header! {
    /// BROKER_HEARTBEAT (904), sent oneway to every controller every second.
    pub struct BrokerHeartbeatRequestHeader {
        opt cluster_name: String => "clusterName",
        opt broker_addr: String => "brokerAddr",
        opt broker_name: String => "brokerName",
        opt broker_id: i64 => "brokerId",
        /// The newest epoch in the broker's epoch file (-1 before any).
        opt epoch: i32 => "epoch",
        opt max_offset: i64 => "maxOffset",
        opt confirm_offset: i64 => "confirmOffset",
        opt heartbeat_timeout_mills: i64 => "heartbeatTimeoutMills",
        /// `brokerElectionPriority`: lower is preferred.
        opt election_priority: i32 => "electionPriority",
    }
}

command_header! {
    /// CONTROLLER_ALTER_SYNC_STATE_SET (1001); the body is the new SyncStateSet with the epoch
    /// it was based on.
    pub struct AlterSyncStateSetRequestHeader {
        opt broker_name: String => "brokerName",
        opt master_broker_id: i64 => "masterBrokerId",
        opt master_epoch: i32 => "masterEpoch",
        opt invoke_time: i64 => "invokeTime",
    }
}

command_header! {
    /// Response to CONTROLLER_ALTER_SYNC_STATE_SET.
    pub struct AlterSyncStateSetResponseHeader {
        req new_sync_state_set_epoch: i32 => "newSyncStateSetEpoch",
    }
}

command_header! {
    /// CONTROLLER_ELECT_MASTER (1002). `brokerId` -1 (or absent) is the controller's own
    /// election; `designateElect` is an operator naming the new master.
    pub struct ElectMasterRequestHeader {
        opt cluster_name: String => "clusterName",
        opt broker_name: String => "brokerName",
        opt broker_id: i64 => "brokerId",
        opt designate_elect: bool => "designateElect",
        opt invoke_time: i64 => "invokeTime",
    }
}

command_header! {
    /// Response to CONTROLLER_ELECT_MASTER (and the master part of other answers).
    pub struct ElectMasterResponseHeader {
        opt master_broker_id: i64 => "masterBrokerId",
        opt master_address: String => "masterAddress",
        opt master_epoch: i32 => "masterEpoch",
        opt sync_state_set_epoch: i32 => "syncStateSetEpoch",
    }
}

command_header! {
    /// CONTROLLER_REGISTER_BROKER (1003).
    pub struct RegisterBrokerToControllerRequestHeader {
        opt cluster_name: String => "clusterName",
        opt broker_name: String => "brokerName",
        opt broker_id: i64 => "brokerId",
        opt broker_address: String => "brokerAddress",
        opt invoke_time: i64 => "invokeTime",
    }
}

command_header! {
    /// Response to CONTROLLER_REGISTER_BROKER: the master only when it is alive.
    pub struct RegisterBrokerToControllerResponseHeader {
        opt cluster_name: String => "clusterName",
        opt broker_name: String => "brokerName",
        opt master_broker_id: i64 => "masterBrokerId",
        opt master_address: String => "masterAddress",
        opt master_epoch: i32 => "masterEpoch",
        opt sync_state_set_epoch: i32 => "syncStateSetEpoch",
    }
}

command_header! {
    /// CONTROLLER_GET_REPLICA_INFO (1004).
    pub struct GetReplicaInfoRequestHeader {
        opt broker_name: String => "brokerName",
    }
}

command_header! {
    /// Response to CONTROLLER_GET_REPLICA_INFO; the body is the SyncStateSet.
    pub struct GetReplicaInfoResponseHeader {
        opt master_broker_id: i64 => "masterBrokerId",
        opt master_address: String => "masterAddress",
        req master_epoch: i32 => "masterEpoch",
    }
}

command_header! {
    /// Response to CONTROLLER_GET_METADATA_INFO (1005): the quorum and its leader.
    pub struct GetMetaDataResponseHeader {
        opt group: String => "group",
        opt controller_leader_id: String => "controllerLeaderId",
        opt controller_leader_address: String => "controllerLeaderAddress",
        req is_leader: bool => "isLeader",
        opt peers: String => "peers",
    }
}

command_header! {
    /// NOTIFY_BROKER_ROLE_CHANGED (1008), controller → broker, oneway; the body is the
    /// SyncStateSet.
    pub struct NotifyBrokerRoleChangedRequestHeader {
        opt master_address: String => "masterAddress",
        opt master_epoch: i32 => "masterEpoch",
        opt sync_state_set_epoch: i32 => "syncStateSetEpoch",
        opt master_broker_id: i64 => "masterBrokerId",
    }
}

command_header! {
    /// CLEAN_BROKER_DATA (1011). `brokerControllerIdsToClean` is `1;2;3`; empty means the
    /// whole group.
    pub struct CleanControllerBrokerDataRequestHeader {
        opt cluster_name: String => "clusterName",
        opt broker_name: String => "brokerName",
        opt broker_controller_ids_to_clean: String => "brokerControllerIdsToClean",
        opt is_clean_living_broker: bool => "isCleanLivingBroker",
        opt invoke_time: i64 => "invokeTime",
    }
}

command_header! {
    /// CONTROLLER_GET_NEXT_BROKER_ID (1012).
    pub struct GetNextBrokerIdRequestHeader {
        opt cluster_name: String => "clusterName",
        opt broker_name: String => "brokerName",
    }
}

command_header! {
    /// Response to CONTROLLER_GET_NEXT_BROKER_ID.
    pub struct GetNextBrokerIdResponseHeader {
        opt cluster_name: String => "clusterName",
        opt broker_name: String => "brokerName",
        req next_broker_id: i64 => "nextBrokerId",
    }
}

command_header! {
    /// CONTROLLER_APPLY_BROKER_ID (1013). `registerCheckCode` is `ip:port;timestamp`.
    pub struct ApplyBrokerIdRequestHeader {
        opt cluster_name: String => "clusterName",
        opt broker_name: String => "brokerName",
        opt applied_broker_id: i64 => "appliedBrokerId",
        opt register_check_code: String => "registerCheckCode",
    }
}

command_header! {
    /// Response to CONTROLLER_APPLY_BROKER_ID (and to a refused one, which echoes the names).
    pub struct ApplyBrokerIdResponseHeader {
        opt cluster_name: String => "clusterName",
        opt broker_name: String => "brokerName",
    }
}
