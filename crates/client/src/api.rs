//! `MQClientApi`: one async function per RPC a client makes, mapping responses to typed results.
//!
//! Every call takes the address to talk to and a timeout, and fails in one of two typed ways
//! (see [`ClientError`]): the server answered with a non-success code (`ClientError::Broker`,
//! RocketMQ's `MQBrokerException`, carrying the code so callers can react to e.g.
//! QUERY_NOT_FOUND), or the transport failed (`ClientError::Remoting`). Keeping these apart is
//! what lets the producer retry on another broker only when retrying can help.
//!
//! Pull responses are post-processed here, once, for every consumer kind: bodies are decompressed
//! (and the COMPRESSED flag cleared), `%RETRY%` messages get their original topic back (from their
//! RETRY_TOPIC property), and MIN_OFFSET/MAX_OFFSET are set from the response header.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use comet_protocol::body::{
    GetConsumerListByGroupResponseBody, HeartbeatData, LockBatchRequestBody, LockBatchResponseBody,
    MessageQueue, TopicRouteData, UnlockBatchRequestBody, from_fastjson, to_fastjson_bytes,
};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CommandHeader, CommandHeaderExt, ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader, GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader, GetMaxOffsetRequestHeader, GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader, GetMinOffsetResponseHeader, GetRouteInfoRequestHeader,
    LockBatchMqRequestHeader, PullMessageRequestHeader, PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader, QueryConsumerOffsetResponseHeader, QueryMessageRequestHeader,
    SearchOffsetRequestHeader, SearchOffsetResponseHeader, SendMessageRequestHeader,
    SendMessageRequestHeaderV2, SendMessageResponseHeader, UNIQUE_KEY_QUERY,
    UnregisterClientRequestHeader, UpdateConsumerOffsetRequestHeader, ViewMessageRequestHeader,
    pull_sys_flag,
};
use comet_protocol::limits::MAX_MESSAGE_SIZE;
use comet_protocol::message::properties::{Properties, keys};
use comet_protocol::message::{MessageExt, compress, record, sysflag};
use comet_protocol::{LanguageCode, RemotingCommand};
use comet_remoting::RemotingClient;
use parking_lot::RwLock;

use crate::error::{ClientError, Result};
use crate::message::Message;

/// Largest body a compressed message may inflate to on the client. Producers compress bodies of
/// at most [`MAX_MESSAGE_SIZE`]; the margin covers peers with a larger configured limit while
/// still bounding what a hostile broker can make us allocate.
pub const MAX_INFLATED_BODY_LEN: usize = 4 * MAX_MESSAGE_SIZE;
/// Prefix of retry topics (`%RETRY%<group>`).
pub use comet_protocol::naming::RETRY_GROUP_TOPIC_PREFIX;
/// Region reported when a broker sends none.
const DEFAULT_REGION: &str = comet_protocol::headers::DEFAULT_MSG_REGION;

/// How a request is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommunicationMode {
    /// Wait for the response.
    Sync,
    /// Wait for the response on a spawned task (the producer drives it); same wire exchange.
    Async,
    /// Send without a response.
    Oneway,
}

/// Outcome of a successful send. Anything but `SendOk` means the message is stored on the
/// master but a flush or replication guarantee was not met in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendStatus {
    /// Stored, and every guarantee asked for was met (Java `SEND_OK`).
    SendOk,
    /// Stored, but the synchronous flush to disk timed out (Java `FLUSH_DISK_TIMEOUT`).
    FlushDiskTimeout,
    /// Stored, but the synchronous replication to the slave timed out (Java `FLUSH_SLAVE_TIMEOUT`).
    FlushSlaveTimeout,
    /// Stored, but no slave was available for synchronous replication (Java `SLAVE_NOT_AVAILABLE`).
    SlaveNotAvailable,
}

/// What a send returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendResult {
    /// How well the message is stored.
    pub send_status: SendStatus,
    /// The client message id (UNIQ_KEY; comma-joined for a batch).
    pub msg_id: String,
    /// The broker's offset message id (comma-joined for a batch).
    pub offset_msg_id: String,
    /// The queue the message went to.
    pub message_queue: MessageQueue,
    /// ConsumeQueue offset of the (first) message.
    pub queue_offset: i64,
    /// The transaction id the broker assigned (transactional sends only).
    pub transaction_id: Option<String>,
    /// The region of the broker (`MSG_REGION`), or the default region when it sent none.
    pub region_id: String,
    /// Whether the broker has message tracing on (`TRACE_ON`).
    pub trace_on: bool,
}

/// Result kind of a pull.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PullStatus {
    /// Messages were found.
    Found,
    /// No message at or after the offset yet.
    NoNewMsg,
    /// Messages exist but none matched the subscription.
    NoMatchedMsg,
    /// The offset is outside the queue; use `next_begin_offset`.
    OffsetIllegal,
}

/// A decoded pull response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullResultExt {
    /// What the pull found.
    pub pull_status: PullStatus,
    /// Offset to pull next.
    pub next_begin_offset: i64,
    /// Smallest offset of the queue.
    pub min_offset: i64,
    /// Largest offset (next to be written) of the queue.
    pub max_offset: i64,
    /// Broker id to pull from next time (0 = master).
    pub suggest_which_broker_id: i64,
    /// The messages, decompressed and with retry topics restored.
    pub msg_found_list: Vec<MessageExt>,
}

/// The RPCs of a client, over one shared [`RemotingClient`].
pub struct MQClientApi {
    remoting: RemotingClient,
    language: LanguageCode,
    namesrv_addrs: RwLock<Vec<String>>,
    /// Index of the name server to ask first; moves on when one fails.
    namesrv_index: AtomicUsize,
}

impl MQClientApi {
    /// An API over `remoting`, asking the name servers in `namesrv_addrs`.
    pub fn new(
        remoting: RemotingClient,
        language: LanguageCode,
        namesrv_addrs: Vec<String>,
    ) -> Self {
        MQClientApi {
            remoting,
            language,
            namesrv_addrs: RwLock::new(namesrv_addrs),
            namesrv_index: AtomicUsize::new(0),
        }
    }

    /// The transport, for calls this type does not wrap (admin commands).
    pub fn remoting(&self) -> &RemotingClient {
        &self.remoting
    }

    /// Replaces the name server list.
    pub fn update_name_server_address_list(&self, addrs: Vec<String>) {
        *self.namesrv_addrs.write() = addrs;
    }

    /// The name server addresses in use.
    pub fn name_server_address_list(&self) -> Vec<String> {
        self.namesrv_addrs.read().clone()
    }

    /// A request with `code` announcing this client's language (version is COMET_VERSION).
    pub fn request(&self, code: impl Into<i32>) -> RemotingCommand {
        let mut cmd = RemotingCommand::request(code);
        cmd.language = self.language;
        cmd
    }

    /// A request with `code` carrying `header`.
    pub fn request_with<H: CommandHeader>(
        &self,
        code: impl Into<i32>,
        header: &H,
    ) -> RemotingCommand {
        let mut cmd = self.request(code);
        cmd.encode_header(header);
        cmd
    }

    /// Sends `header` as a `code` request and decodes the success response's header.
    async fn call<Q: CommandHeader, R: CommandHeader>(
        &self,
        addr: &str,
        code: RequestCode,
        header: &Q,
        timeout: Duration,
    ) -> Result<R> {
        let request = self.request_with(code, header);
        let response = self.invoke_success(addr, request, timeout).await?;
        Ok(response.decode_header::<R>()?)
    }

    /// Sends `request` and returns the response if its code is SUCCESS, else `Broker` error.
    pub async fn invoke_success(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        let response = self.remoting.invoke(addr, request, timeout).await?;
        if response.code == i32::from(ResponseCode::Success) {
            Ok(response)
        } else {
            Err(broker_error(addr, &response))
        }
    }

    /// Sends `request` to the name servers, starting with the current one and moving on when
    /// one cannot be reached. Answers (whatever their code) end the search.
    pub async fn invoke_name_server(
        &self,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<(String, RemotingCommand)> {
        let addrs = self.name_server_address_list();
        if addrs.is_empty() {
            return Err(ClientError::NoNameServer);
        }
        let start = self.namesrv_index.load(Ordering::Relaxed);
        let mut last_error = None;
        for step in 0..addrs.len() {
            let index = (start + step) % addrs.len();
            let Some(addr) = addrs.get(index) else {
                continue;
            };
            match self.remoting.invoke(addr, request.clone(), timeout).await {
                Ok(response) => {
                    self.namesrv_index.store(index, Ordering::Relaxed);
                    return Ok((addr.clone(), response));
                }
                Err(e) => {
                    tracing::debug!(namesrv = %addr, error = %e, "name server unreachable, trying the next");
                    last_error = Some(e);
                }
            }
        }
        Err(last_error.map_or(ClientError::NoNameServer, ClientError::Remoting))
    }

    /// The route of `topic`, or `None` when the name server does not know it (TOPIC_NOT_EXIST).
    pub async fn get_topic_route_info_from_name_server(
        &self,
        topic: &str,
        timeout: Duration,
    ) -> Result<Option<TopicRouteData>> {
        let header = GetRouteInfoRequestHeader {
            topic: topic.to_string(),
            accept_standard_json_only: Some(true),
            ..Default::default()
        };
        let request = self.request_with(RequestCode::GetRouteinfoByTopic, &header);
        let (addr, response) = self.invoke_name_server(request, timeout).await?;
        match ResponseCode::from(response.code) {
            ResponseCode::Success => {
                let body = response.body.as_deref().unwrap_or_default();
                Ok(Some(TopicRouteData::decode(body)?))
            }
            ResponseCode::TopicNotExist => Ok(None),
            _ => Err(broker_error(&addr, &response)),
        }
    }

    /// Sends one message (or a batch: `header.batch == Some(true)` and `msg.body` the encoded
    /// batch) to the broker at `addr`. `None` only for oneway sends. Uses SEND_MESSAGE_V2 /
    /// SEND_BATCH_MESSAGE with the short keys, as the Java client does.
    pub async fn send_message(
        &self,
        addr: &str,
        broker_name: &str,
        msg: &Message,
        mut header: SendMessageRequestHeader,
        timeout: Duration,
        mode: CommunicationMode,
    ) -> Result<Option<SendResult>> {
        let topic = header.topic.clone();
        let batch = header.batch.unwrap_or(false);
        header.rpc.broker_name = Some(broker_name.to_string());
        let code = if batch {
            RequestCode::SendBatchMessage
        } else {
            RequestCode::SendMessageV2
        };
        let v2 = SendMessageRequestHeaderV2::from(header);
        let request = self.request_with(code, &v2).with_body(msg.body.clone());
        match mode {
            CommunicationMode::Oneway => {
                self.remoting.invoke_oneway(addr, request).await?;
                Ok(None)
            }
            CommunicationMode::Sync | CommunicationMode::Async => {
                // Sends come from many tasks at once: let them share the connection's writes.
                let response = self
                    .remoting
                    .invoke_gathered(addr, request, timeout)
                    .await?;
                process_send_response(addr, broker_name, &topic, msg, &response).map(Some)
            }
        }
    }

    /// PULL_MESSAGE (or LITE_PULL_MESSAGE when the LITE_PULL bit is set).
    pub async fn pull_message(
        &self,
        addr: &str,
        header: PullMessageRequestHeader,
        timeout: Duration,
    ) -> Result<PullResultExt> {
        let code = if pull_sys_flag::has_lite_pull(header.sys_flag) {
            RequestCode::LitePullMessage
        } else {
            RequestCode::PullMessage
        };
        let request = self.request_with(code, &header);
        let response = self.remoting.invoke(addr, request, timeout).await?;
        process_pull_response(addr, &response)
    }

    /// The group's committed offset of a queue. QUERY_NOT_FOUND is `Err(Broker { code: 22 })`.
    pub async fn query_consumer_offset(
        &self,
        addr: &str,
        header: QueryConsumerOffsetRequestHeader,
        timeout: Duration,
    ) -> Result<i64> {
        let request = self.request_with(RequestCode::QueryConsumerOffset, &header);
        let response = self.invoke_success(addr, request, timeout).await?;
        Ok(response
            .decode_header::<QueryConsumerOffsetResponseHeader>()?
            .offset)
    }

    /// UPDATE_CONSUMER_OFFSET: commits a group's offset of a queue and waits for the answer.
    pub async fn update_consumer_offset(
        &self,
        addr: &str,
        header: UpdateConsumerOffsetRequestHeader,
        timeout: Duration,
    ) -> Result<()> {
        let request = self.request_with(RequestCode::UpdateConsumerOffset, &header);
        self.invoke_success(addr, request, timeout).await?;
        Ok(())
    }

    /// UPDATE_CONSUMER_OFFSET without waiting for an answer (how consumers persist offsets).
    pub async fn update_consumer_offset_oneway(
        &self,
        addr: &str,
        header: UpdateConsumerOffsetRequestHeader,
    ) -> Result<()> {
        let request = self.request_with(RequestCode::UpdateConsumerOffset, &header);
        self.remoting.invoke_oneway(addr, request).await?;
        Ok(())
    }

    /// The client ids of the group's consumers connected to the broker at `addr`.
    pub async fn get_consumer_id_list_by_group(
        &self,
        addr: &str,
        group: &str,
        timeout: Duration,
    ) -> Result<Vec<String>> {
        let header = GetConsumerListByGroupRequestHeader {
            consumer_group: group.to_string(),
            ..Default::default()
        };
        let request = self.request_with(RequestCode::GetConsumerListByGroup, &header);
        let response = self.invoke_success(addr, request, timeout).await?;
        let body = response.body.as_deref().unwrap_or_default();
        if body.is_empty() {
            return Ok(Vec::new());
        }
        let list: GetConsumerListByGroupResponseBody = from_fastjson(body)?;
        Ok(list.consumer_id_list)
    }

    /// Locks queues for an orderly consumer; returns the queues actually locked.
    pub async fn lock_batch_mq(
        &self,
        addr: &str,
        body: LockBatchRequestBody,
        timeout: Duration,
    ) -> Result<HashSet<MessageQueue>> {
        let request = self
            .request_with(
                RequestCode::LockBatchMq,
                &LockBatchMqRequestHeader::default(),
            )
            .with_body(to_fastjson_bytes(&body)?);
        let response = self.invoke_success(addr, request, timeout).await?;
        let bytes = response.body.as_deref().unwrap_or_default();
        if bytes.is_empty() {
            return Ok(HashSet::new());
        }
        let locked: LockBatchResponseBody = from_fastjson(bytes)?;
        Ok(locked.lock_ok_mq_set.into_iter().collect())
    }

    /// Unlocks queues of an orderly consumer on the broker; `oneway` does not wait for the answer.
    pub async fn unlock_batch_mq(
        &self,
        addr: &str,
        body: UnlockBatchRequestBody,
        timeout: Duration,
        oneway: bool,
    ) -> Result<()> {
        let request = self
            .request_with(
                RequestCode::UnlockBatchMq,
                &LockBatchMqRequestHeader::default(),
            )
            .with_body(to_fastjson_bytes(&body)?);
        if oneway {
            self.remoting.invoke_oneway(addr, request).await?;
        } else {
            self.invoke_success(addr, request, timeout).await?;
        }
        Ok(())
    }

    /// Hands a message the consumer failed to process back to the broker (retry topic / DLQ).
    #[allow(clippy::too_many_arguments)]
    pub async fn consumer_send_message_back(
        &self,
        addr: &str,
        broker_name: &str,
        msg: &MessageExt,
        group: &str,
        delay_level: i32,
        timeout: Duration,
        max_reconsume_times: i32,
    ) -> Result<()> {
        let mut header = ConsumerSendMsgBackRequestHeader {
            offset: msg.commit_log_offset,
            group: group.to_string(),
            delay_level,
            origin_msg_id: Some(msg.msg_id()),
            origin_topic: Some(msg.topic.clone()),
            unit_mode: Some(false),
            max_reconsume_times: Some(max_reconsume_times),
            ..Default::default()
        };
        header.rpc.broker_name = Some(broker_name.to_string());
        let request = self.request_with(RequestCode::ConsumerSendMsgBack, &header);
        self.invoke_success(addr, request, timeout).await?;
        Ok(())
    }

    /// The next offset to be written in a queue.
    pub async fn get_max_offset(
        &self,
        addr: &str,
        topic: &str,
        queue_id: i32,
        timeout: Duration,
    ) -> Result<i64> {
        let header = GetMaxOffsetRequestHeader {
            topic: topic.to_string(),
            queue_id,
            ..Default::default()
        };
        let response: GetMaxOffsetResponseHeader = self
            .call(addr, RequestCode::GetMaxOffset, &header, timeout)
            .await?;
        Ok(response.offset)
    }

    /// The smallest offset still in a queue.
    pub async fn get_min_offset(
        &self,
        addr: &str,
        topic: &str,
        queue_id: i32,
        timeout: Duration,
    ) -> Result<i64> {
        let header = GetMinOffsetRequestHeader {
            topic: topic.to_string(),
            queue_id,
            ..Default::default()
        };
        let response: GetMinOffsetResponseHeader = self
            .call(addr, RequestCode::GetMinOffset, &header, timeout)
            .await?;
        Ok(response.offset)
    }

    /// The offset of the first message stored at or after `timestamp` (ms).
    pub async fn search_offset(
        &self,
        addr: &str,
        topic: &str,
        queue_id: i32,
        timestamp: i64,
        timeout: Duration,
    ) -> Result<i64> {
        let header = SearchOffsetRequestHeader {
            topic: topic.to_string(),
            queue_id,
            timestamp,
            ..Default::default()
        };
        let response: SearchOffsetResponseHeader = self
            .call(addr, RequestCode::SearchOffsetByTimestamp, &header, timeout)
            .await?;
        Ok(response.offset)
    }

    /// The store time of the oldest message of a queue.
    pub async fn get_earliest_msg_storetime(
        &self,
        addr: &str,
        topic: &str,
        queue_id: i32,
        timeout: Duration,
    ) -> Result<i64> {
        let header = GetEarliestMsgStoretimeRequestHeader {
            topic: topic.to_string(),
            queue_id,
            ..Default::default()
        };
        let response: GetEarliestMsgStoretimeResponseHeader = self
            .call(addr, RequestCode::GetEarliestMsgStoretime, &header, timeout)
            .await?;
        Ok(response.timestamp)
    }

    /// HEART_BEAT; returns the broker's version, which a broker gives in the `version` field of
    /// its response.
    pub async fn send_heartbeat(
        &self,
        addr: &str,
        heartbeat: &HeartbeatData,
        timeout: Duration,
    ) -> Result<i32> {
        let request = self
            .request(RequestCode::HeartBeat)
            .with_body(heartbeat.encode()?);
        let response = self.invoke_success(addr, request, timeout).await?;
        Ok(response.version)
    }

    /// UNREGISTER_CLIENT for one producer and/or consumer group of this client.
    pub async fn unregister_client(
        &self,
        addr: &str,
        client_id: &str,
        producer_group: Option<&str>,
        consumer_group: Option<&str>,
        timeout: Duration,
    ) -> Result<()> {
        let header = UnregisterClientRequestHeader {
            client_id: client_id.to_string(),
            producer_group: producer_group.map(str::to_string),
            consumer_group: consumer_group.map(str::to_string),
            ..Default::default()
        };
        let request = self.request_with(RequestCode::UnregisterClient, &header);
        self.invoke_success(addr, request, timeout).await?;
        Ok(())
    }

    /// The message stored at commit-log offset `phy_offset` of the broker at `addr`.
    pub async fn view_message(
        &self,
        addr: &str,
        phy_offset: i64,
        timeout: Duration,
    ) -> Result<MessageExt> {
        let header = ViewMessageRequestHeader {
            offset: phy_offset,
            ..Default::default()
        };
        let request = self.request_with(RequestCode::ViewMessageById, &header);
        let response = self.invoke_success(addr, request, timeout).await?;
        let body = response.body.unwrap_or_default();
        let mut messages = decode_messages(&body)?;
        messages.truncate(1);
        messages.pop().ok_or_else(|| {
            ClientError::Client(format!(
                "broker {addr} answered VIEW_MESSAGE_BY_ID with no message"
            ))
        })
    }

    /// Messages indexed under `header.key` (a UNIQ_KEY when `unique_key`). QUERY_NOT_FOUND is an
    /// empty list.
    pub async fn query_message(
        &self,
        addr: &str,
        header: QueryMessageRequestHeader,
        unique_key: bool,
        timeout: Duration,
    ) -> Result<Vec<MessageExt>> {
        let mut request = self.request_with(RequestCode::QueryMessage, &header);
        if unique_key {
            request.ext_mut().insert(UNIQUE_KEY_QUERY, "true");
        }
        let response = self.remoting.invoke(addr, request, timeout).await?;
        match ResponseCode::from(response.code) {
            ResponseCode::Success => decode_messages(&response.body.unwrap_or_default()),
            ResponseCode::QueryNotFound => Ok(Vec::new()),
            _ => Err(broker_error(addr, &response)),
        }
    }
}

/// A `Broker` error from a non-success response.
pub(crate) fn broker_error(addr: &str, response: &RemotingCommand) -> ClientError {
    ClientError::Broker {
        addr: addr.to_string(),
        code: response.code,
        remark: response
            .remark
            .clone()
            .unwrap_or_else(|| ResponseCode::from(response.code).name().to_string()),
    }
}

/// Maps a send response to a [`SendResult`] (Java `processSendResponse`).
fn process_send_response(
    addr: &str,
    broker_name: &str,
    topic: &str,
    msg: &Message,
    response: &RemotingCommand,
) -> Result<SendResult> {
    let send_status = match ResponseCode::from(response.code) {
        ResponseCode::Success => SendStatus::SendOk,
        ResponseCode::FlushDiskTimeout => SendStatus::FlushDiskTimeout,
        ResponseCode::FlushSlaveTimeout => SendStatus::FlushSlaveTimeout,
        ResponseCode::SlaveNotAvailable => SendStatus::SlaveNotAvailable,
        _ => return Err(broker_error(addr, response)),
    };
    let header: SendMessageResponseHeader = response.decode_header()?;
    let region_id = header
        .msg_region
        .clone()
        .unwrap_or_else(|| DEFAULT_REGION.to_string());
    Ok(SendResult {
        send_status,
        msg_id: msg.uniq_key().unwrap_or_default().to_string(),
        offset_msg_id: header.msg_id,
        message_queue: MessageQueue::new(topic, broker_name, header.queue_id),
        queue_offset: header.queue_offset,
        transaction_id: header.transaction_id,
        region_id,
        trace_on: header.trace_on.unwrap_or(true),
    })
}

/// Maps a pull response to a [`PullResultExt`] with decoded, post-processed messages.
fn process_pull_response(addr: &str, response: &RemotingCommand) -> Result<PullResultExt> {
    let pull_status = match ResponseCode::from(response.code) {
        ResponseCode::Success => PullStatus::Found,
        ResponseCode::PullNotFound => PullStatus::NoNewMsg,
        ResponseCode::PullRetryImmediately => PullStatus::NoMatchedMsg,
        ResponseCode::PullOffsetMoved => PullStatus::OffsetIllegal,
        _ => return Err(broker_error(addr, response)),
    };
    let header: PullMessageResponseHeader = response.decode_header()?;
    let mut msg_found_list = Vec::new();
    if pull_status == PullStatus::Found
        && let Some(body) = &response.body
    {
        // Formatted once per response and parsed with each message's properties, not inserted
        // into each message.
        let mut offsets = Properties::new();
        offsets.insert(keys::MIN_OFFSET, header.min_offset.to_string());
        offsets.insert(keys::MAX_OFFSET, header.max_offset.to_string());
        msg_found_list = decode_messages_with(body, &offsets.encode())?;
    }
    Ok(PullResultExt {
        pull_status,
        next_begin_offset: header.next_begin_offset,
        min_offset: header.min_offset,
        max_offset: header.max_offset,
        suggest_which_broker_id: header.suggest_which_broker_id,
        msg_found_list,
    })
}

/// Decodes concatenated stored records and post-processes each one (see [`restore_message`]).
pub fn decode_messages(body: &Bytes) -> Result<Vec<MessageExt>> {
    decode_messages_with(body, "")
}

/// [`decode_messages`], with the properties string `extra` added to each message's properties.
fn decode_messages_with(body: &Bytes, extra: &str) -> Result<Vec<MessageExt>> {
    let mut messages = record::decode_records_with(body, false, extra)?;
    for msg in &mut messages {
        restore_message(msg)?;
    }
    Ok(messages)
}

/// Undoes what the producer and broker did to a message for transport and storage: inflates a
/// compressed body (clearing the flag, so the body and flag agree), and gives a message from a
/// retry topic its original topic back (from its RETRY_TOPIC property).
pub fn restore_message(msg: &mut MessageExt) -> Result<()> {
    if sysflag::is_compressed(msg.sys_flag) {
        let inflated = compress::decompress(msg.sys_flag, &msg.body, MAX_INFLATED_BODY_LEN)?;
        msg.body = Bytes::from(inflated);
        msg.sys_flag = sysflag::clear_compression(msg.sys_flag);
    }
    if msg.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
        && let Some(original) = msg.properties.get(keys::RETRY_TOPIC)
    {
        msg.topic = original.to_string();
    }
    // The transaction type is checked first: copying UNIQ_KEY for every pulled message only to
    // find it is not transactional was a measurable share of a push consumer's allocations.
    if sysflag::transaction_type(msg.sys_flag) != sysflag::TRANSACTION_NOT_TYPE
        && !msg.properties.contains_key(keys::TRANSACTION_ID)
        && let Some(tx) = msg.properties.get(keys::UNIQ_KEY).map(str::to_string)
    {
        msg.properties.insert(keys::TRANSACTION_ID, tx);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use bytes::BytesMut;
    use comet_protocol::headers::response_with_header;
    use comet_protocol::message::compress::CompressionType;

    use super::*;

    fn stored(topic: &str, body: &[u8], sys_flag: i32) -> MessageExt {
        let host: SocketAddr = "127.0.0.1:10911".parse().expect("literal address");
        let mut msg = MessageExt::new(topic, Bytes::copy_from_slice(body));
        msg.sys_flag = sys_flag;
        msg.born_host = host;
        msg.store_host = host;
        msg.properties.insert(keys::UNIQ_KEY, "ABC");
        msg
    }

    fn encode(messages: &[MessageExt]) -> Bytes {
        let mut buf = BytesMut::new();
        for m in messages {
            record::encode_record(m, &mut buf).expect("encodes");
        }
        buf.freeze()
    }

    #[test]
    fn pull_response_is_decompressed_and_retry_topic_restored() {
        let plain = vec![b'x'; 10_000];
        let packed = compress::compress(CompressionType::Zlib, 5, &plain).expect("compresses");
        let compressed = stored("T", &packed, CompressionType::Zlib.mark(0));
        let mut retry = stored("%RETRY%g", b"again", 0);
        retry.properties.insert(keys::RETRY_TOPIC, "Orig");
        let header = PullMessageResponseHeader {
            suggest_which_broker_id: 0,
            next_begin_offset: 2,
            min_offset: 0,
            max_offset: 2,
            ..Default::default()
        };
        let response = response_with_header(ResponseCode::Success, &header)
            .with_body(encode(&[compressed, retry]));
        let result = process_pull_response("b", &response).expect("decodes");
        assert_eq!(result.pull_status, PullStatus::Found);
        assert_eq!(result.next_begin_offset, 2);
        let [first, second] = result.msg_found_list.as_slice() else {
            panic!("two messages expected");
        };
        assert_eq!(first.body.as_ref(), plain.as_slice());
        assert!(!sysflag::is_compressed(first.sys_flag));
        assert_eq!(first.properties.get(keys::MAX_OFFSET), Some("2"));
        assert_eq!(first.properties.get(keys::MIN_OFFSET), Some("0"));
        assert_eq!(first.msg_id(), "ABC");
        assert_eq!(second.topic, "Orig");
    }

    #[test]
    fn pull_codes_map_to_statuses_and_errors() {
        let header = PullMessageResponseHeader {
            next_begin_offset: 5,
            ..Default::default()
        };
        for (code, status) in [
            (ResponseCode::PullNotFound, PullStatus::NoNewMsg),
            (ResponseCode::PullRetryImmediately, PullStatus::NoMatchedMsg),
            (ResponseCode::PullOffsetMoved, PullStatus::OffsetIllegal),
        ] {
            let response = response_with_header(code, &header);
            let result = process_pull_response("b", &response).expect("maps");
            assert_eq!(result.pull_status, status);
            assert_eq!(result.next_begin_offset, 5);
            assert!(result.msg_found_list.is_empty());
        }
        let refused = RemotingCommand::response(
            ResponseCode::SubscriptionNotExist,
            Some("no sub".to_string()),
        );
        let err = process_pull_response("b", &refused).expect_err("refused");
        assert_eq!(err.response_code(), Some(24));
    }

    #[test]
    fn send_response_codes() {
        let msg = {
            let mut m = Message::new("T", "b");
            m.put_property(keys::UNIQ_KEY, "U1");
            m
        };
        let header = SendMessageResponseHeader::new("OFFSETID", 3, 42);
        for (code, status) in [
            (ResponseCode::Success, SendStatus::SendOk),
            (ResponseCode::FlushDiskTimeout, SendStatus::FlushDiskTimeout),
            (
                ResponseCode::FlushSlaveTimeout,
                SendStatus::FlushSlaveTimeout,
            ),
            (
                ResponseCode::SlaveNotAvailable,
                SendStatus::SlaveNotAvailable,
            ),
        ] {
            let response = response_with_header(code, &header);
            let result = process_send_response("a", "broker-a", "T", &msg, &response).expect("ok");
            assert_eq!(result.send_status, status);
            assert_eq!(result.msg_id, "U1");
            assert_eq!(result.offset_msg_id, "OFFSETID");
            assert_eq!(result.message_queue, MessageQueue::new("T", "broker-a", 3));
            assert_eq!(result.queue_offset, 42);
            assert_eq!(result.region_id, "DefaultRegion");
            assert!(result.trace_on);
        }
        let refused =
            RemotingCommand::response(ResponseCode::TopicNotExist, Some("no topic".to_string()));
        let err = process_send_response("a", "broker-a", "T", &msg, &refused).expect_err("refused");
        assert!(matches!(err, ClientError::Broker { code: 17, .. }));
    }

    /// Apache RocketMQ 5.3.3's answer (captured by interop/comet-client) to a pull after
    /// `resetOffsetByTime` with the broker's default server-side reset: PULL_OFFSET_MOVED (21),
    /// remark OFFSET_RESET, `nextBeginOffset` = the reset offset. The push consumer must see it
    /// as OFFSET_ILLEGAL and move to `nextBeginOffset`.
    #[test]
    fn apache_offset_reset_pull_answer_is_offset_illegal() {
        let captured: &[u8] =
            include_bytes!("../tests/fixtures/apache-5.3.3/pull-offset-moved-after-reset.bin");
        let mut buf = BytesMut::from(captured);
        let response = comet_protocol::frame::decode_frame(&mut buf)
            .expect("a valid frame")
            .expect("a whole frame");
        assert!(buf.is_empty());
        assert_eq!(response.code, 21);
        assert_eq!(response.remark.as_deref(), Some("OFFSET_RESET"));
        let result = process_pull_response("127.0.0.1:10911", &response).expect("decoded");
        assert_eq!(result.pull_status, PullStatus::OffsetIllegal);
        assert_eq!(result.next_begin_offset, 0);
        assert_eq!(result.min_offset, 0);
        assert_eq!(result.max_offset, 4);
        assert_eq!(result.suggest_which_broker_id, 0);
        assert!(result.msg_found_list.is_empty());
    }
}
