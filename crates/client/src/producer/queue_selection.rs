//! Where a send goes: the topic's publish info (its writable queues) and the queue picked for
//! each attempt — round-robin, avoiding the broker of the previous failed attempt, and with
//! `send_latency_fault_enable` also brokers in their isolation window ([`super::fault`]).

use std::sync::Arc;
use std::time::Instant;

use comet_protocol::body::{MessageQueue, TopicRouteData};

use super::ProducerInner;
use crate::error::{ClientError, NoRouteReason, Result};
use crate::route::TopicPublishInfo;

impl ProducerInner {
    /// The publish info of `topic`: cached, else from the name server, else from the route of
    /// the auto-creation template topic (`create_topic_key`, TBW102), so that the broker creates
    /// the topic on the first send.
    pub(super) async fn find_publish_info(&self, topic: &str) -> Result<Arc<TopicPublishInfo>> {
        if let Some(info) = self.cached_publish_info(topic) {
            return Ok(info);
        }
        let instance = self.instance()?;
        self.publish_info
            .write()
            .entry(topic.to_string())
            .or_insert_with(|| Arc::new(placeholder(topic)));
        let mut unreachable = None;
        let mut known = false;
        match instance.refresh_topic_route(topic).await {
            Ok(lookup) => known = lookup.is_some(),
            Err(e) => {
                tracing::debug!(topic, error = %e, "route lookup failed");
                unreachable = e.is_remoting().then(|| e.to_string());
            }
        }
        if let Some(info) = self.cached_publish_info(topic) {
            return Ok(info);
        }
        // Known to the name servers, yet without a writable queue: auto-creation would not
        // help (the broker keeps the topic's own permission). A route the client instance holds
        // from the auto-creation template does not count: the name servers do not know it.
        if known {
            return Err(self.no_route(topic, NoRouteReason::NotWritable));
        }
        if let Err(e) = instance
            .update_topic_route_info_from_default(
                topic,
                &self.config.create_topic_key,
                self.config.default_topic_queue_nums,
            )
            .await
        {
            tracing::debug!(topic, error = %e, "auto-create template route lookup failed");
            if e.is_remoting() {
                unreachable.get_or_insert_with(|| e.to_string());
            }
        }
        self.cached_publish_info(topic).ok_or_else(|| {
            let reason = match unreachable {
                Some(why) => NoRouteReason::NameServerUnreachable(why),
                None => NoRouteReason::TopicNotExist,
            };
            self.no_route(topic, reason)
        })
    }

    fn cached_publish_info(&self, topic: &str) -> Option<Arc<TopicPublishInfo>> {
        self.publish_info
            .read()
            .get(topic)
            .filter(|info| info.ok())
            .cloned()
    }

    pub(super) fn no_route(&self, topic: &str, reason: NoRouteReason) -> ClientError {
        ClientError::NoRoute {
            topic: topic.to_string(),
            namesrv: self.config.client.namesrv_addr.clone(),
            reason,
        }
    }

    pub(super) fn select_queue(
        &self,
        info: &TopicPublishInfo,
        last_broker: Option<&str>,
    ) -> Option<MessageQueue> {
        if self.config.send_latency_fault_enable {
            self.fault.select_one_message_queue(info, last_broker)
        } else {
            info.select_one_avoiding(last_broker)
        }
    }

    /// Records an attempt that started at `started` (the clock is read only when the latency
    /// fault tolerance is on: the default send path reads it enough already).
    pub(super) fn update_fault(&self, broker: &str, started: Instant, failed: bool) {
        if self.config.send_latency_fault_enable {
            let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.fault.update_fault_item(broker, ms, failed);
        }
    }
}

/// Publish info for a topic whose route is not known yet.
pub(super) fn placeholder(topic: &str) -> TopicPublishInfo {
    let mut info = TopicPublishInfo::from_route(topic, &TopicRouteData::default());
    info.have_topic_router_info = false;
    info
}
