//! Requests a broker sends to a client: NOTIFY_CONSUMER_IDS_CHANGED (rebalance now),
//! RESET_CONSUMER_CLIENT_OFFSET, GET_CONSUMER_STATUS_FROM_CLIENT, GET_CONSUMER_RUNNING_INFO,
//! CONSUME_MESSAGE_DIRECTLY and CHECK_TRANSACTION_STATE, each handed to the producer or consumer
//! group it names.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use comet_protocol::RemotingCommand;
use comet_protocol::body::running::{PROP_CLIENT_VERSION, PROP_CONSUME_TYPE, PROP_NAMESERVER_ADDR};
use comet_protocol::body::{
    ConsumeType, MessageQueue, ResetOffsetBody, from_fastjson, to_fastjson_bytes,
};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CheckTransactionStateRequestHeader, CommandHeaderExt,
    ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader, NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
};
use comet_protocol::message::properties::keys;
use comet_remoting::{Channel, RequestProcessor};
use futures::future::BoxFuture;
use serde::Serialize;

use super::MQClientInstance;
use crate::api::{MQClientApi, decode_messages};

/// Registers the processor of `instance` for every request code a broker may send to a client.
pub(super) fn register(api: &MQClientApi, instance: Weak<MQClientInstance>) {
    let processor: Arc<dyn RequestProcessor> = Arc::new(ClientRemotingProcessor { instance });
    for code in [
        RequestCode::NotifyConsumerIdsChanged,
        RequestCode::ResetConsumerClientOffset,
        RequestCode::GetConsumerStatusFromClient,
        RequestCode::GetConsumerRunningInfo,
        RequestCode::CheckTransactionState,
        RequestCode::ConsumeMessageDirectly,
    ] {
        api.remoting().register(code.into(), Arc::clone(&processor));
    }
}

/// Handles the requests a broker sends to this client.
struct ClientRemotingProcessor {
    instance: Weak<MQClientInstance>,
}

impl RequestProcessor for ClientRemotingProcessor {
    fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let instance = self.instance.upgrade();
        let peer = channel.remote_addr().to_string();
        Box::pin(async move {
            let Some(instance) = instance else {
                return Some(RemotingCommand::response(
                    ResponseCode::SystemError,
                    Some("client instance is shut down".to_string()),
                ));
            };
            match RequestCode::from(request.code) {
                RequestCode::NotifyConsumerIdsChanged => {
                    notify_consumer_ids_changed(&instance, &peer, &request);
                    None
                }
                RequestCode::ResetConsumerClientOffset => {
                    reset_offset(&instance, &request).await;
                    None
                }
                RequestCode::GetConsumerStatusFromClient => {
                    Some(consumer_status(&instance, &request))
                }
                RequestCode::GetConsumerRunningInfo => {
                    Some(consumer_running_info(&instance, &request))
                }
                RequestCode::CheckTransactionState => {
                    check_transaction_state(&instance, &peer, &request);
                    None
                }
                RequestCode::ConsumeMessageDirectly => {
                    Some(consume_message_directly(&instance, &request).await)
                }
                _ => Some(RemotingCommand::response(
                    ResponseCode::RequestCodeNotSupported,
                    Some(format!(
                        "request code {} is not supported by the Comet client",
                        request.code
                    )),
                )),
            }
        })
    }
}

fn notify_consumer_ids_changed(instance: &MQClientInstance, peer: &str, request: &RemotingCommand) {
    match request.decode_header::<NotifyConsumerIdsChangedRequestHeader>() {
        Ok(header) => tracing::info!(
            broker = peer,
            group = %header.consumer_group,
            "consumer ids changed; rebalancing now"
        ),
        Err(e) => {
            tracing::debug!(broker = peer, error = %e, "NOTIFY_CONSUMER_IDS_CHANGED without a group")
        }
    }
    instance.rebalance_immediately();
}

async fn reset_offset(instance: &MQClientInstance, request: &RemotingCommand) {
    let header = match request.decode_header::<ResetOffsetRequestHeader>() {
        Ok(header) => header,
        Err(e) => {
            tracing::warn!(error = %e, "malformed RESET_CONSUMER_CLIENT_OFFSET");
            return;
        }
    };
    let offsets = match request.body.as_deref() {
        Some(body) if !body.is_empty() => match from_fastjson::<ResetOffsetBody>(body) {
            Ok(body) => body.offset_table,
            Err(e) => {
                tracing::warn!(error = %e, "malformed RESET_CONSUMER_CLIENT_OFFSET body");
                return;
            }
        },
        _ => HashMap::new(),
    };
    let Some(consumer) = instance.consumer(&header.group) else {
        tracing::debug!(group = %header.group, "reset offset for a group this client does not run");
        return;
    };
    tracing::info!(group = %header.group, topic = %header.topic, queues = offsets.len(), "resetting consumer offsets");
    consumer.reset_offset(&header.topic, offsets).await;
}

/// GET_CONSUMER_STATUS_FROM_CLIENT answer body (Java `GetConsumerStatusBody`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConsumerStatusBody {
    message_queue_table: HashMap<MessageQueue, i64>,
    consumer_table: HashMap<String, HashMap<MessageQueue, i64>>,
}

fn consumer_status(instance: &MQClientInstance, request: &RemotingCommand) -> RemotingCommand {
    let header = match request.decode_header::<GetConsumerStatusRequestHeader>() {
        Ok(header) => header,
        Err(e) => return RemotingCommand::response(ResponseCode::SystemError, Some(e.to_string())),
    };
    let offsets = instance
        .consumer(&header.group)
        .map(|c| c.consumer_offsets(&header.topic))
        .unwrap_or_default();
    let body = ConsumerStatusBody {
        message_queue_table: offsets,
        consumer_table: HashMap::new(),
    };
    json_response(&body)
}

fn consumer_running_info(
    instance: &MQClientInstance,
    request: &RemotingCommand,
) -> RemotingCommand {
    let header = match request.decode_header::<GetConsumerRunningInfoRequestHeader>() {
        Ok(header) => header,
        Err(e) => return RemotingCommand::response(ResponseCode::SystemError, Some(e.to_string())),
    };
    match instance.consumer(&header.consumer_group) {
        Some(consumer) => {
            let mut info = consumer.running_info();
            let name_servers: String = instance
                .api()
                .name_server_address_list()
                .iter()
                .map(|addr| format!("{addr};"))
                .collect();
            info.properties
                .insert(PROP_NAMESERVER_ADDR.to_owned(), name_servers);
            info.properties.insert(
                PROP_CONSUME_TYPE.to_owned(),
                consume_type_name(consumer.consume_type()).to_owned(),
            );
            info.properties.insert(
                PROP_CLIENT_VERSION.to_owned(),
                comet_protocol::version::version_name(comet_protocol::command::COMET_VERSION)
                    .unwrap_or_default()
                    .to_owned(),
            );
            if header.jstack_enable == Some(true) {
                info.jstack = Some(task_dump(instance));
            }
            json_response(&info)
        }
        None => RemotingCommand::response(
            ResponseCode::SystemError,
            Some(format!(
                "The Consumer Group <{}> not exist in this consumer",
                header.consumer_group
            )),
        ),
    }
}

fn consume_type_name(consume_type: ConsumeType) -> &'static str {
    match consume_type {
        ConsumeType::ConsumeActively => "CONSUME_ACTIVELY",
        ConsumeType::ConsumePassively => "CONSUME_PASSIVELY",
        ConsumeType::ConsumePop => "CONSUME_POP",
    }
}

/// What a Rust client can say in place of a JVM thread dump: its runtime's workers and live
/// tasks, and the groups it runs.
fn task_dump(instance: &MQClientInstance) -> String {
    let mut text = format!("Comet client {}\n", instance.client_id());
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        let metrics = handle.metrics();
        text.push_str(&format!(
            "tokio runtime: {} worker threads, {} live tasks\n",
            metrics.num_workers(),
            metrics.num_alive_tasks()
        ));
    }
    text
}

/// CONSUME_MESSAGE_DIRECTLY: the broker put one stored message in the body; the named group's
/// push consumer hands it to its listener once.
async fn consume_message_directly(
    instance: &MQClientInstance,
    request: &RemotingCommand,
) -> RemotingCommand {
    let header = match request.decode_header::<ConsumeMessageDirectlyResultRequestHeader>() {
        Ok(header) => header,
        Err(e) => return RemotingCommand::response(ResponseCode::SystemError, Some(e.to_string())),
    };
    let msg = match request.body.as_ref().map(decode_messages) {
        Some(Ok(mut messages)) if !messages.is_empty() => messages.swap_remove(0),
        Some(Err(e)) => {
            return RemotingCommand::response(
                ResponseCode::SystemError,
                Some(format!(
                    "undecodable message in CONSUME_MESSAGE_DIRECTLY: {e}"
                )),
            );
        }
        _ => {
            return RemotingCommand::response(
                ResponseCode::SystemError,
                Some("CONSUME_MESSAGE_DIRECTLY without a message".to_owned()),
            );
        }
    };
    let broker_name = header.broker_name.clone().unwrap_or_default();
    let result = match instance.consumer(&header.consumer_group) {
        Some(consumer) => consumer.consume_message_directly(msg, &broker_name).await,
        None => None,
    };
    match result {
        Some(result) => json_response(&result),
        None => RemotingCommand::response(
            ResponseCode::SystemError,
            Some(format!(
                "The Consumer Group <{}> not exist in this consumer",
                header.consumer_group
            )),
        ),
    }
}

fn json_response<T: Serialize>(body: &T) -> RemotingCommand {
    match to_fastjson_bytes(body) {
        Ok(bytes) => RemotingCommand::response(ResponseCode::Success, None).with_body(bytes),
        Err(e) => RemotingCommand::response(ResponseCode::SystemError, Some(e.to_string())),
    }
}

fn check_transaction_state(instance: &MQClientInstance, peer: &str, request: &RemotingCommand) {
    let header = match request.decode_header::<CheckTransactionStateRequestHeader>() {
        Ok(header) => header,
        Err(e) => {
            tracing::warn!(broker = peer, error = %e, "malformed CHECK_TRANSACTION_STATE");
            return;
        }
    };
    let msg = match request.body.as_ref().map(decode_messages) {
        Some(Ok(mut messages)) if !messages.is_empty() => messages.swap_remove(0),
        Some(Err(e)) => {
            tracing::warn!(broker = peer, error = %e, "undecodable half message in CHECK_TRANSACTION_STATE");
            return;
        }
        _ => {
            tracing::warn!(
                broker = peer,
                "CHECK_TRANSACTION_STATE without a half message"
            );
            return;
        }
    };
    let Some(group) = msg.properties.get(keys::PRODUCER_GROUP).map(str::to_string) else {
        tracing::warn!(
            broker = peer,
            "half message without a producer group (PGROUP)"
        );
        return;
    };
    match instance.producer(&group) {
        Some(producer) => producer.check_transaction_state(peer, msg, header),
        None => {
            tracing::debug!(broker = peer, group = %group, "transaction check for a group this client does not run")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{RecordingConsumer, config};
    use super::*;

    #[tokio::test]
    async fn broker_requests_reach_the_consumer() {
        let instance = MQClientInstance::new(config("proc"), "x@proc".to_string());
        let consumer = Arc::new(RecordingConsumer::default());
        instance
            .register_consumer("cg", consumer.clone())
            .expect("registers");

        // GET_CONSUMER_RUNNING_INFO answers the consumer's JSON.
        let header = GetConsumerRunningInfoRequestHeader {
            consumer_group: "cg".into(),
            client_id: "x@proc".into(),
            ..Default::default()
        };
        let request = comet_protocol::headers::request_with_header(
            RequestCode::GetConsumerRunningInfo,
            &header,
        );
        let response = consumer_running_info(&instance, &request);
        assert_eq!(response.code, i32::from(ResponseCode::Success));
        let body: serde_json::Value =
            serde_json::from_slice(response.body.as_deref().unwrap_or_default()).expect("json");
        assert_eq!(body["properties"]["PROP_CONSUME_TYPE"], "CONSUME_PASSIVELY");
        assert_eq!(body["properties"]["PROP_CLIENT_VERSION"], "V5_3_3");
        assert_eq!(body["properties"]["consumerGroup"], "cg");
        assert!(body.get("jstack").is_none());
        let unknown = comet_protocol::headers::request_with_header(
            RequestCode::GetConsumerRunningInfo,
            &GetConsumerRunningInfoRequestHeader {
                consumer_group: "nope".into(),
                ..header.clone()
            },
        );
        let response = consumer_running_info(&instance, &unknown);
        assert_eq!(response.code, i32::from(ResponseCode::SystemError));

        // CONSUME_MESSAGE_DIRECTLY for a group this client does not run, or without a message.
        let mut stored = bytes::BytesMut::new();
        comet_protocol::message::record::encode_record(
            &comet_protocol::message::MessageExt::new("T", bytes::Bytes::from_static(b"x")),
            &mut stored,
        )
        .expect("encodes");
        let stored = stored.freeze();
        let direct = |group: &str| {
            comet_protocol::headers::request_with_header(
                RequestCode::ConsumeMessageDirectly,
                &ConsumeMessageDirectlyResultRequestHeader {
                    consumer_group: group.into(),
                    ..Default::default()
                },
            )
        };
        let response =
            consume_message_directly(&instance, &direct("nope").with_body(stored.clone())).await;
        assert_eq!(response.code, i32::from(ResponseCode::SystemError));
        assert_eq!(
            response.remark.as_deref(),
            Some("The Consumer Group <nope> not exist in this consumer")
        );
        // A consumer without a listener (not a push consumer) cannot consume directly.
        let response = consume_message_directly(&instance, &direct("cg").with_body(stored)).await;
        assert_eq!(response.code, i32::from(ResponseCode::SystemError));
        let response = consume_message_directly(&instance, &direct("cg")).await;
        assert_eq!(
            response.remark.as_deref(),
            Some("CONSUME_MESSAGE_DIRECTLY without a message")
        );

        // GET_CONSUMER_STATUS_FROM_CLIENT answers the offsets.
        let status = comet_protocol::headers::request_with_header(
            RequestCode::GetConsumerStatusFromClient,
            &GetConsumerStatusRequestHeader {
                topic: "T".into(),
                group: "cg".into(),
                ..Default::default()
            },
        );
        let response = consumer_status(&instance, &status);
        let text =
            String::from_utf8_lossy(response.body.as_deref().unwrap_or_default()).into_owned();
        assert!(
            text.contains("messageQueueTable") && text.contains(":5"),
            "{text}"
        );

        // RESET_CONSUMER_CLIENT_OFFSET hands the decoded table to the consumer.
        let offsets = HashMap::from([(MessageQueue::new("T", "b", 1), 42_i64)]);
        let body = to_fastjson_bytes(&ResetOffsetBody {
            offset_table: offsets.clone(),
        })
        .expect("body");
        let reset = comet_protocol::headers::request_with_header(
            RequestCode::ResetConsumerClientOffset,
            &ResetOffsetRequestHeader {
                group: "cg".into(),
                topic: "T".into(),
                timestamp: 0,
                is_force: true,
                ..Default::default()
            },
        )
        .with_body(body);
        reset_offset(&instance, &reset).await;
        assert_eq!(
            consumer.resets.lock().as_slice(),
            &[("T".to_string(), offsets)]
        );
    }
}
