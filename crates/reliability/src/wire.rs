//! Raw protocol calls the harness makes itself, with [`RemotingClient`] and typed headers.
//!
//! The crash loop deliberately avoids the SDK's retries and caches: every send is one request
//! whose answer is known exactly (acknowledged with a queue offset, refused, or unanswered), and
//! every read goes straight to one queue, so what the checks see is what the broker stored.

use std::time::Duration;

use bytes::Bytes;
use comet_protocol::RemotingCommand;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CommandHeaderExt, CreateTopicRequestHeader, GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader, PullMessageRequestHeader, PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader, QueryConsumerOffsetResponseHeader, SendMessageRequestHeader,
    SendMessageRequestHeaderV2, SendMessageResponseHeader, UpdateConsumerOffsetRequestHeader,
    pull_sys_flag, request_with_header,
};
use comet_protocol::message::record::decode_records;
use comet_protocol::message::{MessageExt, Properties};
use comet_protocol::naming::AUTO_CREATE_TOPIC_KEY_TOPIC;
use comet_protocol::time::now_millis;
use comet_remoting::RemotingClient;

use crate::error::{Error, Result};

/// Timeout of one request made by the harness.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(5);
/// Messages asked for by one pull.
pub const PULL_BATCH: i32 = 32;
/// Producer group of the harness's raw sends.
pub const PRODUCER_GROUP: &str = "reliability_producer";

/// A SEND_MESSAGE_V2 request of `body` to `topic`/`queue_id`; the topic is auto-created with
/// `queue_count` queues if it does not exist.
pub fn send_request(topic: &str, queue_id: i32, queue_count: i32, body: Bytes) -> RemotingCommand {
    let props: Properties = [("WAIT", "true")].into_iter().collect();
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: PRODUCER_GROUP.to_owned(),
        topic: topic.to_owned(),
        default_topic: AUTO_CREATE_TOPIC_KEY_TOPIC.to_owned(),
        default_topic_queue_nums: queue_count,
        queue_id,
        sys_flag: 0,
        born_timestamp: now_millis(),
        flag: 0,
        properties: Some(props.encode()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: None,
        max_reconsume_times: None,
        rpc: Default::default(),
    });
    request_with_header(RequestCode::SendMessageV2, &header).with_body(body)
}

/// Where the broker says it stored a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Stored {
    pub queue_id: i32,
    pub queue_offset: i64,
}

/// The outcome of one synchronous send.
#[derive(Debug)]
pub enum SendOutcome {
    /// SUCCESS with the stored position: the broker promised durability per its flush mode.
    Acked(Stored),
    /// The broker answered with an error code: nothing promised.
    Refused { code: i32, remark: String },
    /// No answer (connection closed, timeout): nothing promised, the message may be stored.
    Unanswered(comet_remoting::RemotingError),
}

pub async fn send(
    client: &RemotingClient,
    addr: &str,
    request: RemotingCommand,
    timeout: Duration,
) -> SendOutcome {
    let rsp = match client.invoke(addr, request, timeout).await {
        Ok(rsp) => rsp,
        Err(e) => return SendOutcome::Unanswered(e),
    };
    if rsp.code != i32::from(ResponseCode::Success) {
        return SendOutcome::Refused {
            code: rsp.code,
            remark: rsp.remark.unwrap_or_default(),
        };
    }
    match rsp.decode_header::<SendMessageResponseHeader>() {
        Ok(h) => SendOutcome::Acked(Stored {
            queue_id: h.queue_id,
            queue_offset: h.queue_offset,
        }),
        Err(e) => SendOutcome::Refused {
            code: rsp.code,
            remark: format!("undecodable send response header: {e}"),
        },
    }
}

fn check_success(rsp: &RemotingCommand) -> Result<()> {
    if rsp.code == i32::from(ResponseCode::Success) {
        Ok(())
    } else {
        Err(Error::Response {
            code: rsp.code,
            remark: rsp.remark.clone().unwrap_or_default(),
        })
    }
}

/// One pull's result: the messages found and where to continue.
#[derive(Debug, Default)]
pub struct PullBatch {
    pub messages: Vec<MessageExt>,
    pub next_offset: i64,
    pub max_offset: i64,
    /// `false` when the broker answered anything but FOUND (no new message, offset moved...).
    pub found: bool,
}

/// One non-suspending pull of `topic`/`queue_id` from `offset` for `group` (which the broker
/// auto-creates). Never commits an offset.
pub async fn pull(
    client: &RemotingClient,
    addr: &str,
    group: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
) -> Result<PullBatch> {
    let header = PullMessageRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: PULL_BATCH,
        sys_flag: pull_sys_flag::build(false, false, true, false),
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".to_owned()),
        sub_version: now_millis(),
        expression_type: Some("TAG".to_owned()),
        ..Default::default()
    };
    let rsp = client
        .invoke(
            addr,
            request_with_header(RequestCode::PullMessage, &header),
            RPC_TIMEOUT,
        )
        .await?;
    let found = rsp.code == i32::from(ResponseCode::Success);
    let h: PullMessageResponseHeader = rsp.decode_header()?;
    let messages = if found {
        decode_records(&rsp.body.clone().unwrap_or_default(), true)?
    } else {
        Vec::new()
    };
    Ok(PullBatch {
        messages,
        next_offset: h.next_begin_offset,
        max_offset: h.max_offset,
        found,
    })
}

/// Every message of one queue, from its first offset to its end, in queue order.
pub async fn pull_all(
    client: &RemotingClient,
    addr: &str,
    group: &str,
    topic: &str,
    queue_id: i32,
) -> Result<Vec<MessageExt>> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let batch = pull(client, addr, group, topic, queue_id, offset).await?;
        if batch.found {
            if batch.next_offset <= offset {
                return Err(Error::Violation(format!(
                    "{topic}/{queue_id}: pull from {offset} found messages but next offset is {}",
                    batch.next_offset
                )));
            }
            out.extend(batch.messages);
        } else if batch.next_offset <= offset || batch.next_offset >= batch.max_offset {
            return Ok(out);
        }
        offset = batch.next_offset;
    }
}

/// The group's committed offset of a queue; `None` when the broker has none.
pub async fn query_offset(
    client: &RemotingClient,
    addr: &str,
    group: &str,
    topic: &str,
    queue_id: i32,
) -> Result<Option<i64>> {
    let header = QueryConsumerOffsetRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id,
        ..Default::default()
    };
    let rsp = client
        .invoke(
            addr,
            request_with_header(RequestCode::QueryConsumerOffset, &header),
            RPC_TIMEOUT,
        )
        .await?;
    if rsp.code == i32::from(ResponseCode::QueryNotFound) {
        return Ok(None);
    }
    check_success(&rsp)?;
    let h: QueryConsumerOffsetResponseHeader = rsp.decode_header()?;
    Ok((h.offset >= 0).then_some(h.offset))
}

/// Commits `offset` for the group and waits for the broker's answer.
pub async fn commit_offset(
    client: &RemotingClient,
    addr: &str,
    group: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
) -> Result<()> {
    let header = UpdateConsumerOffsetRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id,
        commit_offset: offset,
        rpc: Default::default(),
    };
    let rsp = client
        .invoke(
            addr,
            request_with_header(RequestCode::UpdateConsumerOffset, &header),
            RPC_TIMEOUT,
        )
        .await?;
    check_success(&rsp)
}

/// The next offset to be written in a queue (its message count if nothing was ever deleted).
pub async fn max_offset(
    client: &RemotingClient,
    addr: &str,
    topic: &str,
    queue_id: i32,
) -> Result<i64> {
    let header = GetMaxOffsetRequestHeader {
        topic: topic.to_owned(),
        queue_id,
        committed: None,
        rpc: Default::default(),
    };
    let rsp = client
        .invoke(
            addr,
            request_with_header(RequestCode::GetMaxOffset, &header),
            RPC_TIMEOUT,
        )
        .await?;
    check_success(&rsp)?;
    let h: GetMaxOffsetResponseHeader = rsp.decode_header()?;
    Ok(h.offset)
}

/// GET_BROKER_RUNTIME_INFO's table.
pub async fn runtime_info(
    client: &RemotingClient,
    addr: &str,
) -> Result<std::collections::HashMap<String, String>> {
    let rsp = client
        .invoke(
            addr,
            RemotingCommand::request(RequestCode::GetBrokerRuntimeInfo),
            RPC_TIMEOUT,
        )
        .await?;
    check_success(&rsp)?;
    let kv: comet_protocol::body::KvTable =
        comet_protocol::body::from_fastjson(&rsp.body.clone().unwrap_or_default())?;
    Ok(kv.table)
}

/// Where a broker's CommitLog starts and ends, and how much of it is not dispatched yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogState {
    pub min_offset: i64,
    pub max_offset: i64,
    /// Bytes appended to the CommitLog but not yet dispatched to ConsumeQueues.
    pub dispatch_behind: i64,
}

/// The [`LogState`] of the broker at `addr`, from its runtime info.
pub async fn log_state(client: &RemotingClient, addr: &str) -> Result<LogState> {
    let table = runtime_info(client, addr).await?;
    let field = |key: &str| {
        table
            .get(key)
            .and_then(|v| v.parse::<i64>().ok())
            .ok_or_else(|| Error::Violation(format!("runtime info of {addr} without {key}")))
    };
    Ok(LogState {
        min_offset: field("commitLogMinOffset")?,
        max_offset: field("commitLogMaxOffset")?,
        dispatch_behind: field("dispatchBehindBytes")?,
    })
}

/// Bytes appended to the CommitLog but not yet dispatched to ConsumeQueues, from
/// GET_BROKER_RUNTIME_INFO's `dispatchBehindBytes`. Under ASYNC_FLUSH a send is acknowledged
/// before its dispatch, so a check that counts ConsumeQueue entries waits for this to reach 0.
pub async fn dispatch_behind_bytes(client: &RemotingClient, addr: &str) -> Result<i64> {
    Ok(log_state(client, addr).await?.dispatch_behind)
}

/// Creates `topic` with `queues` read and write queues on the broker at `addr`
/// (UPDATE_AND_CREATE_TOPIC).
pub async fn create_topic(
    client: &RemotingClient,
    addr: &str,
    topic: &str,
    queues: i32,
) -> Result<()> {
    let header = CreateTopicRequestHeader {
        topic: topic.to_owned(),
        default_topic: AUTO_CREATE_TOPIC_KEY_TOPIC.to_owned(),
        read_queue_nums: queues,
        write_queue_nums: queues,
        perm: comet_protocol::body::topic::perm::PERM_READ_WRITE,
        ..Default::default()
    };
    let rsp = client
        .invoke(
            addr,
            request_with_header(RequestCode::UpdateAndCreateTopic, &header),
            RPC_TIMEOUT,
        )
        .await?;
    check_success(&rsp)
}

/// Whether the broker at `addr` has a configuration for `topic` (GET_ALL_TOPIC_CONFIG); a slave
/// copies its master's table every few seconds and serves no pull of a topic it lacks.
pub async fn knows_topic(client: &RemotingClient, addr: &str, topic: &str) -> Result<bool> {
    let rsp = client
        .invoke(
            addr,
            RemotingCommand::request(RequestCode::GetAllTopicConfig),
            RPC_TIMEOUT,
        )
        .await?;
    check_success(&rsp)?;
    let table: comet_protocol::body::topic::TopicConfigSerializeWrapper =
        comet_protocol::body::from_fastjson(&rsp.body.clone().unwrap_or_default())?;
    Ok(table.topic_config_table.contains_key(topic))
}

/// The route of `topic` as the name server at `addr` answers it; `None` when it knows no route.
pub async fn topic_route(
    client: &RemotingClient,
    addr: &str,
    topic: &str,
) -> Result<Option<comet_protocol::body::TopicRouteData>> {
    let header = comet_protocol::headers::GetRouteInfoRequestHeader {
        topic: topic.to_owned(),
        ..Default::default()
    };
    let rsp = client
        .invoke(
            addr,
            request_with_header(RequestCode::GetRouteinfoByTopic, &header),
            RPC_TIMEOUT,
        )
        .await?;
    if rsp.code == i32::from(ResponseCode::TopicNotExist) {
        return Ok(None);
    }
    check_success(&rsp)?;
    Ok(Some(comet_protocol::body::from_fastjson(
        &rsp.body.clone().unwrap_or_default(),
    )?))
}
