//! One consumer client, reached through a broker: its running info (GET_CONSUMER_RUNNING_INFO)
//! and direct delivery of a stored message to its listener (CONSUME_MESSAGE_DIRECTLY).
//!
//! The broker relays both requests to the client's connection and returns the client's answer,
//! so any broker the client sends heartbeats to will do. As the Java tools do, the running info is
//! asked of a master of the group's retry topic (every clustering push consumer subscribes to
//! it); failing that, each master in turn. A direct delivery goes to the broker that stores the
//! message, named by its offset msgId.

use comet_protocol::body::{ConsumeMessageDirectlyResult, ConsumerRunningInfo, from_fastjson};
use comet_protocol::code::RequestCode;
use comet_protocol::headers::{
    ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader,
};
use comet_protocol::naming::retry_topic;

use super::{MQAdmin, route_masters};
use crate::error::{ClientError, Result};

impl MQAdmin {
    /// The running info of the client `client_id` of `group` (with a task dump when `jstack`).
    /// Fails with the broker's SYSTEM_ERROR "The Consumer <group> <id> not online" when no
    /// broker has that client connected.
    pub async fn consumer_running_info(
        &self,
        group: &str,
        client_id: &str,
        jstack: bool,
    ) -> Result<ConsumerRunningInfo> {
        let header = GetConsumerRunningInfoRequestHeader {
            consumer_group: group.to_owned(),
            client_id: client_id.to_owned(),
            jstack_enable: Some(jstack),
            ..Default::default()
        };
        let mut masters = match self.topic_route(&retry_topic(group)).await {
            Ok(route) => route_masters(&route),
            Err(_) => Vec::new(),
        };
        if masters.is_empty() {
            masters = self.master_addrs(None).await?;
        }
        let mut last_error = None;
        for (_, addr) in masters {
            let request = self
                .api()
                .request_with(RequestCode::GetConsumerRunningInfo, &header);
            match self.invoke_broker(&addr, request).await {
                Ok(response) => {
                    return Ok(from_fastjson(response.body.as_deref().unwrap_or_default())?);
                }
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error
            .unwrap_or_else(|| ClientError::Client(format!("no broker serves group {group}"))))
    }

    /// Has the client `client_id` of `group` consume the message `msg_id` once (an offset msgId,
    /// or a unique id looked up in `topic`). The client's listener runs on that one message;
    /// nothing is committed. The result names the listener's outcome (`CR_SUCCESS`, ...).
    pub async fn consume_message_directly(
        &self,
        group: &str,
        client_id: &str,
        msg_id: &str,
        topic: Option<&str>,
    ) -> Result<ConsumeMessageDirectlyResult> {
        let (_, msg) = self.view_message(msg_id, topic).await?;
        let header = ConsumeMessageDirectlyResultRequestHeader {
            consumer_group: group.to_owned(),
            client_id: Some(client_id.to_owned()),
            msg_id: Some(msg.offset_msg_id()),
            topic: Some(topic.map_or_else(|| msg.topic.clone(), str::to_owned)),
            ..Default::default()
        };
        let request = self
            .api()
            .request_with(RequestCode::ConsumeMessageDirectly, &header);
        let response = self
            .invoke_broker(&msg.store_host.to_string(), request)
            .await?;
        Ok(from_fastjson(response.body.as_deref().unwrap_or_default())?)
    }
}
