//! The push consumer's answers to the two admin requests a broker forwards to one client:
//! GET_CONSUMER_RUNNING_INFO (its configuration, subscriptions, process queues and statistics,
//! as Java's `ConsumerRunningInfo`) and CONSUME_MESSAGE_DIRECTLY (one stored message handed to
//! the listener once, outside the pull loop, as Java's consume services do).

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::time::Instant;

use comet_protocol::body::running::{
    PROP_CONSUME_ORDERLY, PROP_CONSUMER_START_TIMESTAMP, PROP_THREADPOOL_CORE_SIZE,
};
use comet_protocol::body::{
    CMResult, ConsumeMessageDirectlyResult, ConsumeStatus, ConsumerRunningInfo,
};
use futures::FutureExt;

use super::{PushConsumerConfig, PushConsumerInner};
use crate::consumer::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, ConsumeOrderlyContext,
    ConsumeOrderlyStatus, MessageExt, MessageListener, MessageQueue,
};

impl PushConsumerInner {
    /// The consumer's running info: configuration properties, subscriptions, one
    /// [`ProcessQueueInfo`] per owned queue and the consume statistics of each subscribed topic.
    /// The client instance adds the name server, consume type and version properties.
    pub(super) fn consumer_running_info(&self) -> ConsumerRunningInfo {
        let config = self.config.read().clone();
        let mut info = ConsumerRunningInfo {
            properties: config_properties(&config),
            ..Default::default()
        };
        info.properties.insert(
            PROP_CONSUME_ORDERLY.to_owned(),
            self.is_orderly().to_string(),
        );
        // The consume pool's core size: the listener calls that run at once (Java reports its
        // thread pool's core size, `consumeThreadMin` unless changed while running).
        let core_size = self
            .runtime()
            .map(|rt| match &rt.consume_service {
                super::ConsumeService::Concurrently(s) => s.core_pool_size(),
                super::ConsumeService::Orderly(s) => s.core_pool_size(),
            })
            .unwrap_or(config.consume_thread_min);
        info.properties.insert(
            PROP_THREADPOOL_CORE_SIZE.to_owned(),
            core_size.max(1).to_string(),
        );
        info.properties.insert(
            PROP_CONSUMER_START_TIMESTAMP.to_owned(),
            self.consumer_start_timestamp.to_string(),
        );
        let Some(rt) = self.runtime() else {
            return info;
        };
        let mut subscriptions = rt.rebalance.subscriptions();
        subscriptions.sort_by(|a, b| (&a.topic, &a.sub_string).cmp(&(&b.topic, &b.sub_string)));
        let offsets = rt.offset_store.clone_offset_table("");
        for (mq, pq) in rt.rebalance.process_queue_table() {
            let mut pq_info = pq.info();
            pq_info.commit_offset = offsets.get(&mq).copied().unwrap_or(-1);
            info.mq_table.insert(mq, pq_info);
        }
        for sub in &subscriptions {
            let s = self.stats.consume_status(&sub.topic);
            info.status_table.insert(
                sub.topic.clone(),
                ConsumeStatus {
                    pull_rt: s.pull_rt,
                    pull_tps: s.pull_tps,
                    consume_rt: s.consume_rt,
                    consume_ok_tps: s.consume_ok_tps,
                    consume_failed_tps: s.consume_failed_tps,
                    consume_failed_msgs: i64::try_from(s.consume_failed_msgs).unwrap_or(i64::MAX),
                },
            );
        }
        info.subscription_set = subscriptions;
        info
    }

    /// Hands `msg` to the listener once, outside the pull loop: nothing is committed, sent back
    /// or counted, whatever the listener answers. `None` when the consumer has no listener.
    pub(super) async fn consume_message_directly(
        &self,
        msg: MessageExt,
        broker_name: &str,
    ) -> Option<ConsumeMessageDirectlyResult> {
        let listener = self.listener.read().clone()?;
        let mq = MessageQueue::new(msg.topic.clone(), broker_name, msg.queue_id);
        let msgs = vec![msg];
        let mut result = ConsumeMessageDirectlyResult::default();
        let begin = Instant::now();
        let outcome = match listener {
            MessageListener::Concurrently(listener) => {
                result.order = false;
                let mut ctx = ConsumeConcurrentlyContext::new(mq);
                AssertUnwindSafe(listener.consume_message(&msgs, &mut ctx))
                    .catch_unwind()
                    .await
                    .map(|status| match status {
                        ConsumeConcurrentlyStatus::ConsumeSuccess => CMResult::Success,
                        ConsumeConcurrentlyStatus::ReconsumeLater => CMResult::Later,
                    })
            }
            MessageListener::Orderly(listener) => {
                result.order = true;
                let mut ctx = ConsumeOrderlyContext::new(mq);
                let outcome = AssertUnwindSafe(listener.consume_message(&msgs, &mut ctx))
                    .catch_unwind()
                    .await
                    .map(|status| match status {
                        ConsumeOrderlyStatus::Success => CMResult::Success,
                        ConsumeOrderlyStatus::SuspendCurrentQueueAMoment => CMResult::Later,
                    });
                result.auto_commit = ctx.auto_commit;
                outcome
            }
        };
        match outcome {
            Ok(status) => result.consume_result = Some(status),
            Err(panic) => {
                result.consume_result = Some(CMResult::ThrowException);
                result.remark = Some(panic_text(panic.as_ref()));
            }
        }
        result.spent_time_mills = i64::try_from(begin.elapsed().as_millis()).unwrap_or(i64::MAX);
        tracing::info!(group = %self.group(), result = %result, "consumeMessageDirectly done");
        Some(result)
    }
}

/// What a listener panicked with, as text.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        format!("listener panicked: {s}")
    } else if let Some(s) = panic.downcast_ref::<String>() {
        format!("listener panicked: {s}")
    } else {
        "listener panicked".to_owned()
    }
}

/// The consumer's settings under the Java client's property names (what `MixAll
/// .object2Properties` lists for a `DefaultMQPushConsumer`), every value as text.
fn config_properties(config: &PushConsumerConfig) -> BTreeMap<String, String> {
    let client = &config.client;
    let millis = |d: std::time::Duration| d.as_millis().to_string();
    let mut p: Vec<(&str, String)> = vec![
        ("consumerGroup", config.consumer_group.clone()),
        ("messageModel", model_name(config)),
        ("consumeFromWhere", where_name(config)),
        (
            "allocateMessageQueueStrategy",
            config.allocate_message_queue_strategy.name().to_owned(),
        ),
        ("consumeThreadMin", config.consume_thread_min.to_string()),
        ("consumeThreadMax", config.consume_thread_max.to_string()),
        (
            "consumeConcurrentlyMaxSpan",
            config.consume_concurrently_max_span.to_string(),
        ),
        (
            "pullThresholdForQueue",
            config.pull_threshold_for_queue.to_string(),
        ),
        (
            "pullThresholdSizeForQueue",
            config.pull_threshold_size_for_queue.to_string(),
        ),
        (
            "pullThresholdForTopic",
            config.pull_threshold_for_topic.to_string(),
        ),
        (
            "pullThresholdSizeForTopic",
            config.pull_threshold_size_for_topic.to_string(),
        ),
        ("pullInterval", millis(config.pull_interval)),
        (
            "consumeMessageBatchMaxSize",
            config.consume_message_batch_max_size.to_string(),
        ),
        ("pullBatchSize", config.pull_batch_size.to_string()),
        (
            "postSubscriptionWhenPull",
            config.post_subscription_when_pull.to_string(),
        ),
        ("unitMode", config.unit_mode.to_string()),
        ("maxReconsumeTimes", config.max_reconsume_times.to_string()),
        (
            "suspendCurrentQueueTimeMillis",
            config.suspend_current_queue_time_millis.to_string(),
        ),
        // Java's consumeTimeout is in minutes.
        (
            "consumeTimeout",
            (config.consume_timeout.as_secs() / 60).to_string(),
        ),
        (
            "awaitTerminationMillisWhenShutdown",
            millis(config.await_termination_when_shutdown),
        ),
        (
            "pullTimeDelayMillsWhenException",
            millis(config.pull_time_delay_when_exception),
        ),
        ("namesrvAddr", client.namesrv_addr.clone()),
        ("clientIP", client.client_ip.clone()),
        ("instanceName", client.instance_name.clone()),
        (
            "pollNameServerInterval",
            millis(client.poll_name_server_interval),
        ),
        (
            "heartbeatBrokerInterval",
            millis(client.heartbeat_broker_interval),
        ),
        (
            "persistConsumerOffsetInterval",
            millis(client.persist_consumer_offset_interval),
        ),
        ("mqClientApiTimeout", millis(client.mq_client_api_timeout)),
        ("language", client.language.name().to_owned()),
        ("useTLS", client.tls.is_some().to_string()),
    ];
    if let Some(ts) = config.consume_timestamp {
        p.push(("consumeTimestamp", ts.to_string()));
    }
    if let Some(unit) = &client.unit_name {
        p.push(("unitName", unit.clone()));
    }
    if let Some(ns) = &client.namespace {
        p.push(("namespace", ns.clone()));
    }
    p.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

fn model_name(config: &PushConsumerConfig) -> String {
    serde_name(&config.message_model)
}

fn where_name(config: &PushConsumerConfig) -> String {
    serde_name(&config.consume_from_where)
}

/// The wire name of a protocol enum (e.g. `CLUSTERING`, `CONSUME_FROM_LAST_OFFSET`).
fn serde_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}
