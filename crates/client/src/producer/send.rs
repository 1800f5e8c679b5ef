//! The send path: one request per attempt to the master of the picked queue's broker
//! (SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE), retried on another broker when the broker could not be
//! reached or answered a code another broker may not, at most 1 + `retry_times_when_send_failed`
//! attempts (sync) or 1 + `retry_times_when_send_async_failed` (async), all within one deadline.

use std::time::{Duration, Instant};

use comet_protocol::body::MessageQueue;
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::SendMessageRequestHeader;
use comet_protocol::time::now_millis;

use super::prepare::Outgoing;
use super::{CommunicationMode, ProducerInner, SendResult, SendStatus};
use crate::error::{ClientError, NoRouteReason, Result};

/// Broker answers after which another attempt may succeed: the 5.x Java producer's default
/// `retryResponseCodes`. SYSTEM_BUSY is what an Apache broker answers when its send queue is
/// flow-controlled (`[TIMEOUT_CLEAN_QUEUE]broker busy`, `[PCBUSY_CLEAN_QUEUE]`), GO_AWAY what a
/// 5.x broker or proxy answers while shutting down; 4.9 retried on neither.
const RETRIABLE_RESPONSE_CODES: [ResponseCode; 8] = [
    ResponseCode::TopicNotExist,
    ResponseCode::ServiceNotAvailable,
    ResponseCode::SystemError,
    ResponseCode::SystemBusy,
    ResponseCode::NoPermission,
    ResponseCode::NoBuyerId,
    ResponseCode::NotInCurrentUnit,
    ResponseCode::GoAway,
];

impl ProducerInner {
    /// The send with queue selection and retries.
    pub(super) async fn send_default(
        &self,
        outgoing: &Outgoing,
        mode: CommunicationMode,
        timeout: Duration,
    ) -> Result<Option<SendResult>> {
        let begin = Instant::now();
        let topic = outgoing.msg.topic.as_str();
        let info = self.find_publish_info(topic).await?;
        let attempts = match mode {
            CommunicationMode::Sync => 1 + self.config.retry_times_when_send_failed,
            CommunicationMode::Async => 1 + self.config.retry_times_when_send_async_failed,
            CommunicationMode::Oneway => 1,
        };
        let mut last_broker: Option<String> = None;
        let mut last_error: Option<ClientError> = None;
        let mut not_stored: Option<SendResult> = None;
        let mut made = 0_u32;
        let mut all_topic_not_exist = true;
        for _ in 0..attempts {
            let Some(mq) = self.select_queue(&info, last_broker.as_deref()) else {
                break;
            };
            // One clock read per attempt: the time spent so far and the attempt's start.
            let started = Instant::now();
            let elapsed = started.saturating_duration_since(begin);
            if elapsed >= timeout {
                last_error = Some(send_timeout(topic, timeout));
                all_topic_not_exist = false;
                break;
            }
            made += 1;
            let outcome = self
                .send_kernel(outgoing, &mq, mode, timeout - elapsed)
                .await;
            self.update_fault(&mq.broker_name, started, outcome.is_err());
            last_broker = Some(mq.broker_name.clone());
            match outcome {
                Ok(Some(result))
                    if mode == CommunicationMode::Sync
                        && result.send_status != SendStatus::SendOk
                        && self.config.retry_another_broker_when_not_store_ok =>
                {
                    not_stored = Some(result);
                }
                Ok(result) => return Ok(result),
                Err(e) if is_retriable(&e) => {
                    tracing::debug!(topic, broker = %mq.broker_name, error = %e, "send attempt failed, retrying");
                    all_topic_not_exist &=
                        e.response_code() == Some(ResponseCode::TopicNotExist.into());
                    last_error = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(result) = not_stored {
            return Ok(Some(result));
        }
        Err(match last_error {
            // Every broker said the topic does not exist: auto-creation is off.
            Some(_) if all_topic_not_exist => self.no_route(topic, NoRouteReason::TopicNotExist),
            Some(e @ ClientError::Timeout { .. }) if made == 0 => e,
            Some(e) => ClientError::SendFailed {
                topic: topic.to_string(),
                attempts: made,
                last: Box::new(e),
            },
            None => self.no_route(topic, NoRouteReason::NotWritable),
        })
    }

    /// One attempt: the request to the master of `mq`'s broker.
    pub(super) async fn send_kernel(
        &self,
        outgoing: &Outgoing,
        mq: &MessageQueue,
        mode: CommunicationMode,
        timeout: Duration,
    ) -> Result<Option<SendResult>> {
        let instance = self.instance()?;
        let addr = match instance.find_broker_address_in_publish(&mq.broker_name) {
            Some(addr) => addr,
            None => {
                instance
                    .update_topic_route_info_from_name_server(&mq.topic)
                    .await?;
                instance
                    .find_broker_address_in_publish(&mq.broker_name)
                    .ok_or_else(|| {
                        ClientError::Client(format!(
                            "the broker {} of topic {} has no known master address",
                            mq.broker_name, mq.topic
                        ))
                    })?
            }
        };
        let header = SendMessageRequestHeader {
            producer_group: self
                .config
                .client
                .with_namespace(&self.config.producer_group),
            topic: mq.topic.clone(),
            default_topic: self.config.create_topic_key.clone(),
            default_topic_queue_nums: self.config.default_topic_queue_nums,
            queue_id: mq.queue_id,
            sys_flag: outgoing.sys_flag,
            born_timestamp: now_millis(),
            flag: outgoing.msg.flag,
            properties: Some(outgoing.msg.properties().encode()),
            reconsume_times: Some(outgoing.reconsume_times.unwrap_or(0)),
            unit_mode: Some(false),
            batch: outgoing.batch.then_some(true),
            max_reconsume_times: outgoing.max_reconsume_times,
            ..Default::default()
        };
        let hooks = self.send_hooks_before(outgoing, mq, &addr, mode);
        let outcome = instance
            .api()
            .send_message(&addr, &mq.broker_name, &outgoing.msg, header, timeout, mode)
            .await
            .map(|result| {
                result.map(|mut r| {
                    r.msg_id.clone_from(&outgoing.msg_id);
                    let user_topic = self.config.client.without_namespace(&r.message_queue.topic);
                    if user_topic.len() != r.message_queue.topic.len() {
                        r.message_queue.topic = user_topic.to_string();
                    }
                    r
                })
            });
        self.send_hooks_after(hooks, &outcome);
        outcome
    }
}

pub(super) fn expect_result(result: Option<SendResult>) -> Result<SendResult> {
    result.ok_or_else(|| ClientError::Client("a sync send returned no result".to_string()))
}

fn send_timeout(topic: &str, timeout: Duration) -> ClientError {
    ClientError::Timeout {
        operation: format!("send to topic {topic}"),
        timeout,
    }
}

pub(super) fn remaining(begin: Instant, timeout: Duration, topic: &str) -> Result<Duration> {
    timeout
        .checked_sub(begin.elapsed())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| send_timeout(topic, timeout))
}

/// Whether another attempt (on another broker) may succeed after `error`.
fn is_retriable(error: &ClientError) -> bool {
    match error {
        ClientError::Remoting(_) | ClientError::Client(_) => true,
        ClientError::Broker { code, .. } => RETRIABLE_RESPONSE_CODES
            .iter()
            .any(|c| i32::from(*c) == *code),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retriable_errors() {
        let broker = |code: ResponseCode| ClientError::Broker {
            addr: "a".into(),
            code: code.into(),
            remark: String::new(),
        };
        assert!(is_retriable(&broker(ResponseCode::SystemError)));
        assert!(is_retriable(&broker(ResponseCode::TopicNotExist)));
        assert!(!is_retriable(&broker(ResponseCode::MessageIllegal)));
        assert!(is_retriable(&broker(ResponseCode::GoAway)));
        assert!(is_retriable(&ClientError::Remoting(
            comet_remoting::RemotingError::Shutdown
        )));
        assert!(!is_retriable(&ClientError::IllegalArgument("x".into())));
    }

    /// What Apache RocketMQ 5.3.3 answered a sync send while its send queue was flow-controlled
    /// (seen by interop/comet-client on a loaded machine): SYSTEM_BUSY (2) with this remark. The
    /// 5.x Java producer retries it, so the send must be retried, not failed.
    #[test]
    fn apache_broker_busy_answer_is_retried() {
        let busy = comet_protocol::RemotingCommand::response(
            ResponseCode::SystemBusy,
            Some(
                "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, \
                 period in queue: 770ms, size of queue: 1"
                    .to_string(),
            ),
        );
        assert_eq!(busy.code, 2);
        let error = crate::api::broker_error("127.0.0.1:10911", &busy);
        assert!(matches!(error, ClientError::Broker { code: 2, .. }));
        assert!(is_retriable(&error));
    }
}
