//! Request and response codes.
//!
//! RocketMQ defines its codes as plain `int` constants, and peers of other versions send codes this
//! build has never heard of. Both enums therefore keep an `Unknown(i32)` fallback so that any code
//! survives a decode/encode round trip unchanged, and dispatch can answer
//! `REQUEST_CODE_NOT_SUPPORTED` instead of failing to parse. Build values with `From<i32>` (never
//! `Unknown(n)` for a known `n`, which would not compare equal to its named variant).
//!
//! Version notes: the POP codes are the 5.x `200050+` values, which do not fit the ROCKETMQ binary
//! header's i16. 4.x brokers reused response codes 209–211 for ACL 1.0 failures
//! (`UPDATE_AND_CREATE_ACL_CONFIG_FAILED`, `DELETE_ACL_CONFIG_FAILED`,
//! `UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED`); they decode here under their 5.x names. Negative
//! `RPC_*` response codes are client-local and never travel on the wire.

use std::fmt;

macro_rules! code_enum {
    (
        $(#[$meta:meta])*
        $name:ident {
            $($variant:ident = $value:literal => $text:literal,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $(
                #[doc = concat!("`", $text, "` (", stringify!($value), ")")]
                $variant,
            )*
            /// A code this build does not know, kept as received.
            Unknown(i32),
        }

        impl $name {
            /// Every named code, in ascending numeric order within each group.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The wire value.
            pub const fn code(self) -> i32 {
                match self {
                    $($name::$variant => $value,)*
                    $name::Unknown(code) => code,
                }
            }

            /// The named code for `code`, or `Unknown(code)`.
            pub const fn from_code(code: i32) -> Self {
                match code {
                    $($value => $name::$variant,)*
                    other => $name::Unknown(other),
                }
            }

            /// The RocketMQ constant name, e.g. `SEND_MESSAGE_V2`; `UNKNOWN` for unknown codes.
            pub const fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                    $name::Unknown(_) => "UNKNOWN",
                }
            }

            /// The code with the given RocketMQ constant name.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($text => Some($name::$variant),)*
                    _ => None,
                }
            }

            pub const fn is_known(self) -> bool {
                !matches!(self, $name::Unknown(_))
            }
        }

        impl From<i32> for $name {
            fn from(code: i32) -> Self {
                $name::from_code(code)
            }
        }

        impl From<$name> for i32 {
            fn from(code: $name) -> i32 {
                code.code()
            }
        }

        impl fmt::Display for $name {
            /// `NAME(code)`, e.g. `SEND_MESSAGE_V2(310)`.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", self.name(), self.code())
            }
        }
    };
}

code_enum! {
    /// `RequestCode`: what a request asks for.
    RequestCode {
        SendMessage = 10 => "SEND_MESSAGE",
        PullMessage = 11 => "PULL_MESSAGE",
        QueryMessage = 12 => "QUERY_MESSAGE",
        QueryBrokerOffset = 13 => "QUERY_BROKER_OFFSET",
        QueryConsumerOffset = 14 => "QUERY_CONSUMER_OFFSET",
        UpdateConsumerOffset = 15 => "UPDATE_CONSUMER_OFFSET",
        UpdateAndCreateTopic = 17 => "UPDATE_AND_CREATE_TOPIC",
        UpdateAndCreateTopicList = 18 => "UPDATE_AND_CREATE_TOPIC_LIST",
        GetAllTopicConfig = 21 => "GET_ALL_TOPIC_CONFIG",
        GetTopicConfigList = 22 => "GET_TOPIC_CONFIG_LIST",
        GetTopicNameList = 23 => "GET_TOPIC_NAME_LIST",
        UpdateBrokerConfig = 25 => "UPDATE_BROKER_CONFIG",
        GetBrokerConfig = 26 => "GET_BROKER_CONFIG",
        TriggerDeleteFiles = 27 => "TRIGGER_DELETE_FILES",
        GetBrokerRuntimeInfo = 28 => "GET_BROKER_RUNTIME_INFO",
        SearchOffsetByTimestamp = 29 => "SEARCH_OFFSET_BY_TIMESTAMP",
        GetMaxOffset = 30 => "GET_MAX_OFFSET",
        GetMinOffset = 31 => "GET_MIN_OFFSET",
        GetEarliestMsgStoretime = 32 => "GET_EARLIEST_MSG_STORETIME",
        ViewMessageById = 33 => "VIEW_MESSAGE_BY_ID",
        HeartBeat = 34 => "HEART_BEAT",
        UnregisterClient = 35 => "UNREGISTER_CLIENT",
        ConsumerSendMsgBack = 36 => "CONSUMER_SEND_MSG_BACK",
        EndTransaction = 37 => "END_TRANSACTION",
        GetConsumerListByGroup = 38 => "GET_CONSUMER_LIST_BY_GROUP",
        CheckTransactionState = 39 => "CHECK_TRANSACTION_STATE",
        NotifyConsumerIdsChanged = 40 => "NOTIFY_CONSUMER_IDS_CHANGED",
        LockBatchMq = 41 => "LOCK_BATCH_MQ",
        UnlockBatchMq = 42 => "UNLOCK_BATCH_MQ",
        GetAllConsumerOffset = 43 => "GET_ALL_CONSUMER_OFFSET",
        GetAllDelayOffset = 45 => "GET_ALL_DELAY_OFFSET",
        CheckClientConfig = 46 => "CHECK_CLIENT_CONFIG",
        GetClientConfig = 47 => "GET_CLIENT_CONFIG",
        UpdateAndCreateAclConfig = 50 => "UPDATE_AND_CREATE_ACL_CONFIG",
        DeleteAclConfig = 51 => "DELETE_ACL_CONFIG",
        GetBrokerClusterAclInfo = 52 => "GET_BROKER_CLUSTER_ACL_INFO",
        UpdateGlobalWhiteAddrsConfig = 53 => "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG",
        GetBrokerClusterAclConfig = 54 => "GET_BROKER_CLUSTER_ACL_CONFIG",
        GetTimerCheckPoint = 60 => "GET_TIMER_CHECK_POINT",
        GetTimerMetrics = 61 => "GET_TIMER_METRICS",
        PutKvConfig = 100 => "PUT_KV_CONFIG",
        GetKvConfig = 101 => "GET_KV_CONFIG",
        DeleteKvConfig = 102 => "DELETE_KV_CONFIG",
        RegisterBroker = 103 => "REGISTER_BROKER",
        UnregisterBroker = 104 => "UNREGISTER_BROKER",
        GetRouteinfoByTopic = 105 => "GET_ROUTEINFO_BY_TOPIC",
        GetBrokerClusterInfo = 106 => "GET_BROKER_CLUSTER_INFO",
        UpdateAndCreateSubscriptiongroup = 200 => "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
        GetAllSubscriptiongroupConfig = 201 => "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
        GetTopicStatsInfo = 202 => "GET_TOPIC_STATS_INFO",
        GetConsumerConnectionList = 203 => "GET_CONSUMER_CONNECTION_LIST",
        GetProducerConnectionList = 204 => "GET_PRODUCER_CONNECTION_LIST",
        WipeWritePermOfBroker = 205 => "WIPE_WRITE_PERM_OF_BROKER",
        GetAllTopicListFromNameserver = 206 => "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
        DeleteSubscriptiongroup = 207 => "DELETE_SUBSCRIPTIONGROUP",
        GetConsumeStats = 208 => "GET_CONSUME_STATS",
        SuspendConsumer = 209 => "SUSPEND_CONSUMER",
        ResumeConsumer = 210 => "RESUME_CONSUMER",
        ResetConsumerOffsetInConsumer = 211 => "RESET_CONSUMER_OFFSET_IN_CONSUMER",
        ResetConsumerOffsetInBroker = 212 => "RESET_CONSUMER_OFFSET_IN_BROKER",
        AdjustConsumerThreadPool = 213 => "ADJUST_CONSUMER_THREAD_POOL",
        WhoConsumeTheMessage = 214 => "WHO_CONSUME_THE_MESSAGE",
        DeleteTopicInBroker = 215 => "DELETE_TOPIC_IN_BROKER",
        DeleteTopicInNamesrv = 216 => "DELETE_TOPIC_IN_NAMESRV",
        RegisterTopicInNamesrv = 217 => "REGISTER_TOPIC_IN_NAMESRV",
        GetKvlistByNamespace = 219 => "GET_KVLIST_BY_NAMESPACE",
        ResetConsumerClientOffset = 220 => "RESET_CONSUMER_CLIENT_OFFSET",
        GetConsumerStatusFromClient = 221 => "GET_CONSUMER_STATUS_FROM_CLIENT",
        InvokeBrokerToResetOffset = 222 => "INVOKE_BROKER_TO_RESET_OFFSET",
        InvokeBrokerToGetConsumerStatus = 223 => "INVOKE_BROKER_TO_GET_CONSUMER_STATUS",
        GetTopicsByCluster = 224 => "GET_TOPICS_BY_CLUSTER",
        UpdateAndCreateSubscriptiongroupList = 225 => "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST",
        QueryTopicConsumeByWho = 300 => "QUERY_TOPIC_CONSUME_BY_WHO",
        RegisterFilterServer = 301 => "REGISTER_FILTER_SERVER",
        RegisterMessageFilterClass = 302 => "REGISTER_MESSAGE_FILTER_CLASS",
        QueryConsumeTimeSpan = 303 => "QUERY_CONSUME_TIME_SPAN",
        GetSystemTopicListFromNs = 304 => "GET_SYSTEM_TOPIC_LIST_FROM_NS",
        GetSystemTopicListFromBroker = 305 => "GET_SYSTEM_TOPIC_LIST_FROM_BROKER",
        CleanExpiredConsumequeue = 306 => "CLEAN_EXPIRED_CONSUMEQUEUE",
        GetConsumerRunningInfo = 307 => "GET_CONSUMER_RUNNING_INFO",
        QueryCorrectionOffset = 308 => "QUERY_CORRECTION_OFFSET",
        ConsumeMessageDirectly = 309 => "CONSUME_MESSAGE_DIRECTLY",
        SendMessageV2 = 310 => "SEND_MESSAGE_V2",
        GetUnitTopicList = 311 => "GET_UNIT_TOPIC_LIST",
        GetHasUnitSubTopicList = 312 => "GET_HAS_UNIT_SUB_TOPIC_LIST",
        GetHasUnitSubUnunitTopicList = 313 => "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST",
        CloneGroupOffset = 314 => "CLONE_GROUP_OFFSET",
        ViewBrokerStatsData = 315 => "VIEW_BROKER_STATS_DATA",
        CleanUnusedTopic = 316 => "CLEAN_UNUSED_TOPIC",
        GetBrokerConsumeStats = 317 => "GET_BROKER_CONSUME_STATS",
        UpdateNamesrvConfig = 318 => "UPDATE_NAMESRV_CONFIG",
        GetNamesrvConfig = 319 => "GET_NAMESRV_CONFIG",
        SendBatchMessage = 320 => "SEND_BATCH_MESSAGE",
        QueryConsumeQueue = 321 => "QUERY_CONSUME_QUEUE",
        QueryDataVersion = 322 => "QUERY_DATA_VERSION",
        ResumeCheckHalfMessage = 323 => "RESUME_CHECK_HALF_MESSAGE",
        SendReplyMessage = 324 => "SEND_REPLY_MESSAGE",
        SendReplyMessageV2 = 325 => "SEND_REPLY_MESSAGE_V2",
        PushReplyMessageToClient = 326 => "PUSH_REPLY_MESSAGE_TO_CLIENT",
        AddWritePermOfBroker = 327 => "ADD_WRITE_PERM_OF_BROKER",
        GetAllProducerInfo = 328 => "GET_ALL_PRODUCER_INFO",
        DeleteExpiredCommitlog = 329 => "DELETE_EXPIRED_COMMITLOG",
        QueryTopicsByConsumer = 343 => "QUERY_TOPICS_BY_CONSUMER",
        QuerySubscriptionByConsumer = 345 => "QUERY_SUBSCRIPTION_BY_CONSUMER",
        GetTopicConfig = 351 => "GET_TOPIC_CONFIG",
        GetSubscriptiongroupConfig = 352 => "GET_SUBSCRIPTIONGROUP_CONFIG",
        UpdateAndGetGroupForbidden = 353 => "UPDATE_AND_GET_GROUP_FORBIDDEN",
        CheckRocksdbCqWriteProgress = 354 => "CHECK_ROCKSDB_CQ_WRITE_PROGRESS",
        LitePullMessage = 361 => "LITE_PULL_MESSAGE",
        RecallMessage = 370 => "RECALL_MESSAGE",
        QueryAssignment = 400 => "QUERY_ASSIGNMENT",
        SetMessageRequestMode = 401 => "SET_MESSAGE_REQUEST_MODE",
        GetAllMessageRequestMode = 402 => "GET_ALL_MESSAGE_REQUEST_MODE",
        UpdateAndCreateStaticTopic = 513 => "UPDATE_AND_CREATE_STATIC_TOPIC",
        GetBrokerMemberGroup = 901 => "GET_BROKER_MEMBER_GROUP",
        AddBroker = 902 => "ADD_BROKER",
        RemoveBroker = 903 => "REMOVE_BROKER",
        BrokerHeartbeat = 904 => "BROKER_HEARTBEAT",
        NotifyMinBrokerIdChange = 905 => "NOTIFY_MIN_BROKER_ID_CHANGE",
        ExchangeBrokerHaInfo = 906 => "EXCHANGE_BROKER_HA_INFO",
        GetBrokerHaStatus = 907 => "GET_BROKER_HA_STATUS",
        ResetMasterFlushOffset = 908 => "RESET_MASTER_FLUSH_OFFSET",
        ControllerAlterSyncStateSet = 1001 => "CONTROLLER_ALTER_SYNC_STATE_SET",
        ControllerElectMaster = 1002 => "CONTROLLER_ELECT_MASTER",
        ControllerRegisterBroker = 1003 => "CONTROLLER_REGISTER_BROKER",
        ControllerGetReplicaInfo = 1004 => "CONTROLLER_GET_REPLICA_INFO",
        ControllerGetMetadataInfo = 1005 => "CONTROLLER_GET_METADATA_INFO",
        ControllerGetSyncStateData = 1006 => "CONTROLLER_GET_SYNC_STATE_DATA",
        GetBrokerEpochCache = 1007 => "GET_BROKER_EPOCH_CACHE",
        NotifyBrokerRoleChanged = 1008 => "NOTIFY_BROKER_ROLE_CHANGED",
        UpdateControllerConfig = 1009 => "UPDATE_CONTROLLER_CONFIG",
        GetControllerConfig = 1010 => "GET_CONTROLLER_CONFIG",
        CleanBrokerData = 1011 => "CLEAN_BROKER_DATA",
        ControllerGetNextBrokerId = 1012 => "CONTROLLER_GET_NEXT_BROKER_ID",
        ControllerApplyBrokerId = 1013 => "CONTROLLER_APPLY_BROKER_ID",
        // Comet's own codes: openraft's messages between the controllers of one quorum (Apache's
        // controllers speak DLedger there instead, so the two never share a quorum).
        CometRaftAppend = 1101 => "COMET_RAFT_APPEND_ENTRIES",
        CometRaftVote = 1102 => "COMET_RAFT_VOTE",
        CometRaftSnapshot = 1103 => "COMET_RAFT_INSTALL_SNAPSHOT",
        UpdateColdDataFlowCtrConfig = 2001 => "UPDATE_COLD_DATA_FLOW_CTR_CONFIG",
        RemoveColdDataFlowCtrConfig = 2002 => "REMOVE_COLD_DATA_FLOW_CTR_CONFIG",
        GetColdDataFlowCtrInfo = 2003 => "GET_COLD_DATA_FLOW_CTR_INFO",
        SetCommitlogReadMode = 2004 => "SET_COMMITLOG_READ_MODE",
        AuthCreateUser = 3001 => "AUTH_CREATE_USER",
        AuthUpdateUser = 3002 => "AUTH_UPDATE_USER",
        AuthDeleteUser = 3003 => "AUTH_DELETE_USER",
        AuthGetUser = 3004 => "AUTH_GET_USER",
        AuthListUser = 3005 => "AUTH_LIST_USER",
        AuthCreateAcl = 3006 => "AUTH_CREATE_ACL",
        AuthUpdateAcl = 3007 => "AUTH_UPDATE_ACL",
        AuthDeleteAcl = 3008 => "AUTH_DELETE_ACL",
        AuthGetAcl = 3009 => "AUTH_GET_ACL",
        AuthListAcl = 3010 => "AUTH_LIST_ACL",
        PopMessage = 200050 => "POP_MESSAGE",
        AckMessage = 200051 => "ACK_MESSAGE",
        PeekMessage = 200052 => "PEEK_MESSAGE",
        ChangeMessageInvisibletime = 200053 => "CHANGE_MESSAGE_INVISIBLETIME",
        Notification = 200054 => "NOTIFICATION",
        PollingInfo = 200055 => "POLLING_INFO",
        PopRollback = 200056 => "POP_ROLLBACK",
        BatchAckMessage = 200151 => "BATCH_ACK_MESSAGE",
    }
}

code_enum! {
    /// `ResponseCode`: the outcome carried by a response.
    ResponseCode {
        Success = 0 => "SUCCESS",
        SystemError = 1 => "SYSTEM_ERROR",
        SystemBusy = 2 => "SYSTEM_BUSY",
        RequestCodeNotSupported = 3 => "REQUEST_CODE_NOT_SUPPORTED",
        TransactionFailed = 4 => "TRANSACTION_FAILED",
        FlushDiskTimeout = 10 => "FLUSH_DISK_TIMEOUT",
        SlaveNotAvailable = 11 => "SLAVE_NOT_AVAILABLE",
        FlushSlaveTimeout = 12 => "FLUSH_SLAVE_TIMEOUT",
        MessageIllegal = 13 => "MESSAGE_ILLEGAL",
        ServiceNotAvailable = 14 => "SERVICE_NOT_AVAILABLE",
        VersionNotSupported = 15 => "VERSION_NOT_SUPPORTED",
        NoPermission = 16 => "NO_PERMISSION",
        TopicNotExist = 17 => "TOPIC_NOT_EXIST",
        TopicExistAlready = 18 => "TOPIC_EXIST_ALREADY",
        PullNotFound = 19 => "PULL_NOT_FOUND",
        PullRetryImmediately = 20 => "PULL_RETRY_IMMEDIATELY",
        PullOffsetMoved = 21 => "PULL_OFFSET_MOVED",
        QueryNotFound = 22 => "QUERY_NOT_FOUND",
        SubscriptionParseFailed = 23 => "SUBSCRIPTION_PARSE_FAILED",
        SubscriptionNotExist = 24 => "SUBSCRIPTION_NOT_EXIST",
        SubscriptionNotLatest = 25 => "SUBSCRIPTION_NOT_LATEST",
        SubscriptionGroupNotExist = 26 => "SUBSCRIPTION_GROUP_NOT_EXIST",
        FilterDataNotExist = 27 => "FILTER_DATA_NOT_EXIST",
        FilterDataNotLatest = 28 => "FILTER_DATA_NOT_LATEST",
        InvalidParameter = 29 => "INVALID_PARAMETER",
        TransactionShouldCommit = 200 => "TRANSACTION_SHOULD_COMMIT",
        TransactionShouldRollback = 201 => "TRANSACTION_SHOULD_ROLLBACK",
        TransactionStateUnknow = 202 => "TRANSACTION_STATE_UNKNOW",
        TransactionStateGroupWrong = 203 => "TRANSACTION_STATE_GROUP_WRONG",
        NoBuyerId = 204 => "NO_BUYER_ID",
        NotInCurrentUnit = 205 => "NOT_IN_CURRENT_UNIT",
        ConsumerNotOnline = 206 => "CONSUMER_NOT_ONLINE",
        ConsumeMsgTimeout = 207 => "CONSUME_MSG_TIMEOUT",
        NoMessage = 208 => "NO_MESSAGE",
        PollingFull = 209 => "POLLING_FULL",
        PollingTimeout = 210 => "POLLING_TIMEOUT",
        BrokerNotExist = 211 => "BROKER_NOT_EXIST",
        BrokerDispatchNotComplete = 212 => "BROKER_DISPATCH_NOT_COMPLETE",
        BroadcastConsumption = 213 => "BROADCAST_CONSUMPTION",
        FlowControl = 215 => "FLOW_CONTROL",
        NotLeaderForQueue = 501 => "NOT_LEADER_FOR_QUEUE",
        IllegalOperation = 604 => "ILLEGAL_OPERATION",
        GoAway = 1500 => "GO_AWAY",
        ControllerFencedMasterEpoch = 2000 => "CONTROLLER_FENCED_MASTER_EPOCH",
        ControllerFencedSyncStateSetEpoch = 2001 => "CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH",
        ControllerInvalidMaster = 2002 => "CONTROLLER_INVALID_MASTER",
        ControllerInvalidReplicas = 2003 => "CONTROLLER_INVALID_REPLICAS",
        ControllerMasterNotAvailable = 2004 => "CONTROLLER_MASTER_NOT_AVAILABLE",
        ControllerInvalidRequest = 2005 => "CONTROLLER_INVALID_REQUEST",
        ControllerBrokerNotAlive = 2006 => "CONTROLLER_BROKER_NOT_ALIVE",
        ControllerNotLeader = 2007 => "CONTROLLER_NOT_LEADER",
        ControllerBrokerMetadataNotExist = 2008 => "CONTROLLER_BROKER_METADATA_NOT_EXIST",
        ControllerInvalidCleanBrokerMetadata = 2009 => "CONTROLLER_INVALID_CLEAN_BROKER_METADATA",
        ControllerBrokerNeedToBeRegistered = 2010 => "CONTROLLER_BROKER_NEED_TO_BE_REGISTERED",
        ControllerMasterStillExist = 2011 => "CONTROLLER_MASTER_STILL_EXIST",
        ControllerElectMasterFailed = 2012 => "CONTROLLER_ELECT_MASTER_FAILED",
        ControllerAlterSyncStateSetFailed = 2013 => "CONTROLLER_ALTER_SYNC_STATE_SET_FAILED",
        ControllerBrokerIdInvalid = 2014 => "CONTROLLER_BROKER_ID_INVALID",
        ControllerJraftInternalError = 2015 => "CONTROLLER_JRAFT_INTERNAL_ERROR",
        ControllerBrokerLiveInfoNotExists = 2016 => "CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS",
        UserNotExist = 3001 => "USER_NOT_EXIST",
        PolicyNotExist = 3002 => "POLICY_NOT_EXIST",
        RpcUnknown = -1000 => "RPC_UNKNOWN",
        RpcAddrIsNull = -1002 => "RPC_ADDR_IS_NULL",
        RpcSendToChannelFailed = -1004 => "RPC_SEND_TO_CHANNEL_FAILED",
        RpcTimeOut = -1006 => "RPC_TIME_OUT",
    }
}

impl ResponseCode {
    pub const fn is_success(self) -> bool {
        matches!(self, ResponseCode::Success)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::RemotingCommand;
    use std::collections::HashSet;

    #[test]
    fn every_known_request_code_round_trips() {
        let mut seen = HashSet::new();
        for &code in RequestCode::ALL {
            let n: i32 = code.into();
            assert!(seen.insert(n), "duplicate value {n}");
            assert_eq!(RequestCode::from(n), code);
            assert_eq!(RequestCode::from_name(code.name()), Some(code));
            assert!(code.is_known());
        }
        assert!(RequestCode::ALL.len() > 150);
    }

    #[test]
    fn every_known_response_code_round_trips() {
        let mut seen = HashSet::new();
        for &code in ResponseCode::ALL {
            let n: i32 = code.into();
            assert!(seen.insert(n), "duplicate value {n}");
            assert_eq!(ResponseCode::from(n), code);
            assert_eq!(ResponseCode::from_name(code.name()), Some(code));
        }
    }

    #[test]
    fn fact_sheet_values() {
        assert_eq!(i32::from(RequestCode::SendMessageV2), 310);
        assert_eq!(RequestCode::SendBatchMessage.code(), 320);
        assert_eq!(RequestCode::GetRouteinfoByTopic.code(), 105);
        assert_eq!(RequestCode::LitePullMessage.code(), 361);
        assert_eq!(RequestCode::PopMessage.code(), 200_050);
        assert_eq!(
            RequestCode::NotifyConsumerIdsChanged.name(),
            "NOTIFY_CONSUMER_IDS_CHANGED"
        );
        assert_eq!(ResponseCode::TransactionStateUnknow.code(), 202);
        assert_eq!(ResponseCode::GoAway.code(), 1500);
        assert_eq!(ResponseCode::RpcTimeOut.code(), -1006);
        assert!(ResponseCode::from(0).is_success());
    }

    #[test]
    fn unknown_codes_are_kept() {
        for n in [-5, 16, 44, 9999, i32::MAX, i32::MIN] {
            let c = RequestCode::from(n);
            assert_eq!(c, RequestCode::Unknown(n));
            assert_eq!(i32::from(c), n);
            assert_eq!(c.name(), "UNKNOWN");
        }
        assert_eq!(i32::from(ResponseCode::from(777)), 777);
        assert_eq!(RequestCode::from_name("NO_SUCH_CODE"), None);
        assert_eq!(RequestCode::HeartBeat.to_string(), "HEART_BEAT(34)");
    }

    #[test]
    fn commands_accept_codes() {
        let req = RemotingCommand::request(RequestCode::HeartBeat);
        assert_eq!(req.code, 34);
        let rsp = RemotingCommand::response(ResponseCode::TopicNotExist, None);
        assert_eq!(rsp.code, 17);
    }
}
