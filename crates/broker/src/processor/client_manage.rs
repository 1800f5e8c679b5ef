//! Client registration: HEART_BEAT (34), UNREGISTER_CLIENT (35) and CHECK_CLIENT_CONFIG (46).
//!
//! A heartbeat is how a client joins: for every consumer group it runs, the broker makes sure the
//! group's config exists (auto-created when allowed), creates the group's `%RETRY%` topic so
//! failed messages have somewhere to go, and registers the channel and subscriptions; producer
//! groups are registered for transaction checks. When a consumer group's membership or
//! subscriptions change, every member is told (NOTIFY_CONSUMER_IDS_CHANGED) so it rebalances at
//! once. The response carries our version, which Java clients record as the broker version.
//!
//! Heartbeat V2 (fingerprints, heartbeats without subscriptions) is not advertised, so clients
//! keep sending full heartbeats; one that sends `withoutSub` anyway keeps its stored
//! subscriptions rather than losing them.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::body::{HeartbeatData, SubscriptionData, from_fastjson, perm};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CommandHeaderExt, HeartbeatResponseHeader, UnregisterClientRequestHeader,
};
use comet_remoting::{Channel, RequestProcessor};
use futures::future::BoxFuture;
use serde::Deserialize;

use crate::client::{ClientChannelInfo, notify_consumer_ids_changed};
use crate::context::BrokerContext;
use crate::filter::is_tag_type;
use crate::processor::{Answer, answer, decode_header, error_response};
use comet_protocol::naming::retry_topic;

/// `TopicSysFlag` bit of a unit-sub topic (a retry topic of a unit-mode consumer).
pub const TOPIC_SYS_FLAG_UNIT_SUB: i32 = 0x2;

/// CHECK_CLIENT_CONFIG body.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckClientRequestBody {
    #[serde(default)]
    pub client_id: String,
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub subscription_data: Option<SubscriptionData>,
}

/// Whether `group`'s config allows NOTIFY_CONSUMER_IDS_CHANGED (an unknown group: yes).
pub fn notify_enabled(ctx: &BrokerContext, group: &str) -> bool {
    ctx.subscription_groups
        .find(group)
        .is_none_or(|c| c.notify_consumer_ids_changed_enable)
}

/// Handles codes 34, 35 and 46.
#[derive(Debug)]
pub struct ClientManageProcessor {
    ctx: Arc<BrokerContext>,
}

impl ClientManageProcessor {
    pub fn new(ctx: Arc<BrokerContext>) -> Self {
        Self { ctx }
    }

    fn handle(&self, channel: &Channel, request: &RemotingCommand) -> RemotingCommand {
        match RequestCode::from_code(request.code) {
            RequestCode::HeartBeat => self.heartbeat(channel, request),
            RequestCode::UnregisterClient => answer(self.unregister(channel, request)),
            RequestCode::CheckClientConfig => self.check_client_config(request),
            other => error_response(
                ResponseCode::RequestCodeNotSupported,
                format!("request type {} not supported", other.code()),
            ),
        }
    }

    fn heartbeat(&self, channel: &Channel, request: &RemotingCommand) -> RemotingCommand {
        let Some(body) = request.body.as_deref() else {
            return error_response(
                ResponseCode::SystemError,
                "bad request: HEART_BEAT body (HeartbeatData) is missing",
            );
        };
        let data = match HeartbeatData::decode(body) {
            Ok(d) => d,
            Err(e) => {
                return error_response(
                    ResponseCode::SystemError,
                    format!("bad request: HEART_BEAT body is not a HeartbeatData: {e}"),
                );
            }
        };
        let info = ClientChannelInfo::new(
            channel.clone(),
            data.client_id.clone(),
            request.language,
            request.version,
        );
        for consumer in &data.consumer_data_set {
            let group = consumer.group_name.as_str();
            let config = self.ctx.subscription_groups.find_or_create(group);
            let mut notify = true;
            if let Some(config) = &config {
                notify = config.notify_consumer_ids_changed_enable;
                let topic_sys_flag = if consumer.unit_mode {
                    TOPIC_SYS_FLAG_UNIT_SUB
                } else {
                    0
                };
                let created = self.ctx.topic_config.create_topic_in_send_message_back(
                    &retry_topic(group),
                    config.retry_queue_nums,
                    perm::PERM_READ_WRITE,
                    topic_sys_flag,
                );
                if created.is_none() {
                    tracing::warn!(group, "retry topic could not be created on heartbeat");
                }
            }
            let subscriptions =
                (!data.without_sub).then_some(consumer.subscription_data_set.as_slice());
            let outcome = self.ctx.consumers.register_consumer(
                group,
                info.clone(),
                consumer.consume_type,
                consumer.message_model,
                consumer.consume_from_where,
                subscriptions,
            );
            if outcome.changed() {
                tracing::info!(group, client = %data.client_id,
                    membership = outcome.membership_changed,
                    subscription = outcome.subscription_changed, "consumer group changed");
                if notify {
                    notify_consumer_ids_changed(group, outcome.channels);
                }
            }
        }
        for producer in &data.producer_data_set {
            self.ctx
                .producers
                .register_producer(&producer.group_name, info.clone());
        }
        let mut response = RemotingCommand::response(ResponseCode::Success, None);
        response.encode_header(&HeartbeatResponseHeader {
            support_heartbeat_v2: Some(false),
            sub_change: Some(true),
        });
        response
    }

    fn unregister(&self, channel: &Channel, request: &RemotingCommand) -> Answer {
        let header: UnregisterClientRequestHeader = decode_header(request)?;
        if let Some(group) = header.producer_group.as_deref().filter(|g| !g.is_empty()) {
            self.ctx.producers.unregister_producer(group, channel);
        }
        if let Some(group) = header.consumer_group.as_deref().filter(|g| !g.is_empty())
            && let Some(change) = self.ctx.consumers.unregister_consumer(group, channel)
            && notify_enabled(&self.ctx, group)
        {
            notify_consumer_ids_changed(group, change.remaining);
        }
        Ok(RemotingCommand::response(ResponseCode::Success, None))
    }

    fn check_client_config(&self, request: &RemotingCommand) -> RemotingCommand {
        let Some(body) = request.body.as_deref() else {
            return error_response(
                ResponseCode::SystemError,
                "bad request: CHECK_CLIENT_CONFIG body is missing",
            );
        };
        let body: CheckClientRequestBody = match from_fastjson(body) {
            Ok(b) => b,
            Err(e) => {
                return error_response(
                    ResponseCode::SystemError,
                    format!(
                        "bad request: CHECK_CLIENT_CONFIG body is not a CheckClientRequestBody: {e}"
                    ),
                );
            }
        };
        if let Some(sub) = &body.subscription_data
            && !is_tag_type(Some(sub.expression_type.as_str()))
        {
            return error_response(
                ResponseCode::SystemError,
                format!(
                    "The broker does not support consumer to filter message by {}",
                    sub.expression_type
                ),
            );
        }
        RemotingCommand::response(ResponseCode::Success, None)
    }
}

impl RequestProcessor for ClientManageProcessor {
    fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let response = self.handle(channel, &request);
        Box::pin(async move { Some(response) })
    }
}
