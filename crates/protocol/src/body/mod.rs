//! JSON bodies of the remoting protocol, as serde types.
//!
//! Java peers write bodies with fastjson, whose output is not always standard JSON (bare integer
//! keys, objects as map keys). Reading goes through [`lenient::from_fastjson`], which accepts both
//! forms; writing goes through [`writer`], which produces fastjson's form (alphabetical keys, nulls
//! omitted, compact) or, on request, the standard form. Encode bodies with these functions rather
//! than with `serde_json::to_vec`, which cannot express the fastjson key forms.

pub mod acl;
pub mod controller;
pub mod heartbeat;
mod json_string;
pub mod lenient;
pub mod lock;
pub mod queue;
pub mod register;
pub mod route;
pub mod running;
pub mod stats;
pub mod topic;
pub mod writer;

pub use heartbeat::{
    ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, MessageModel, ProducerData,
    SubscriptionData,
};
pub use lenient::{
    from_fastjson, normalize, to_fastjson, to_fastjson_bytes, to_standard_json,
    to_standard_json_bytes,
};
pub use lock::{LockBatchRequestBody, LockBatchResponseBody, UnlockBatchRequestBody};
pub use queue::MessageQueue;
pub use register::RegisterBrokerBody;
pub use route::{BrokerData, ClusterInfo, QueueData, TopicRouteData};
pub use running::{
    CMResult, ConsumeMessageDirectlyResult, ConsumeStatus, ConsumerRunningInfo,
    PopProcessQueueInfo, ProcessQueueInfo,
};
pub use stats::{
    BrokerStatsData, BrokerStatsItem, Connection, ConsumeStats, ConsumeStatsList,
    ConsumerConnection, GetConsumerListByGroupResponseBody, GroupList, KvTable, OffsetWrapper,
    ProducerConnection, ProducerInfo, ProducerTableInfo, ResetOffsetBody, SubscriptionGroupWrapper,
    TopicList, TopicOffset, TopicStatsTable,
};
pub use topic::{
    DataVersion, SubscriptionGroupConfig, TopicConfig, TopicConfigSerializeWrapper,
    TopicFilterType, perm,
};
