//! `PullConsumerConfig`: the settings of a pull consumer and their defaults (those of the Java
//! client's `DefaultMQPullConsumer`).

use std::time::Duration;

use super::{
    DEFAULT_BROKER_SUSPEND_MAX_TIME, DEFAULT_CONSUMER_PULL_TIMEOUT,
    DEFAULT_CONSUMER_TIMEOUT_WHEN_SUSPEND, DEFAULT_MAX_RECONSUME_TIMES,
};
use crate::config::ClientConfig;
use crate::consumer::MessageModel;

/// Settings of a [`DefaultMQPullConsumer`](super::DefaultMQPullConsumer).
#[derive(Debug, Clone)]
pub struct PullConsumerConfig {
    /// The consumer group (Java `consumerGroup`).
    pub consumer_group: String,
    /// Clustering (offsets on the broker) or broadcasting (offsets in a local file).
    pub message_model: MessageModel,
    /// Topics announced in heartbeats before the first pull (Java `registerTopics`).
    pub register_topics: Vec<String>,
    /// How long the broker holds a long-polling pull that finds nothing (Java
    /// `brokerSuspendMaxTimeMillis`).
    pub broker_suspend_max_time: Duration,
    /// Client-side timeout of a long-polling pull (Java `consumerTimeoutMillisWhenSuspend`).
    pub consumer_timeout_when_suspend: Duration,
    /// Timeout of a pull that does not wait for messages (Java `consumerPullTimeoutMillis`).
    pub consumer_pull_timeout: Duration,
    /// Deliveries of a message sent back before it goes to the dead-letter queue (Java
    /// `maxReconsumeTimes`).
    pub max_reconsume_times: i32,
    /// Name servers and client identity.
    pub client: ClientConfig,
}

impl PullConsumerConfig {
    /// Defaults for `group` (clustering) with the name servers of `client`.
    pub fn new(consumer_group: impl Into<String>, client: ClientConfig) -> Self {
        PullConsumerConfig {
            consumer_group: consumer_group.into(),
            message_model: MessageModel::Clustering,
            register_topics: Vec::new(),
            broker_suspend_max_time: DEFAULT_BROKER_SUSPEND_MAX_TIME,
            consumer_timeout_when_suspend: DEFAULT_CONSUMER_TIMEOUT_WHEN_SUSPEND,
            consumer_pull_timeout: DEFAULT_CONSUMER_PULL_TIMEOUT,
            max_reconsume_times: DEFAULT_MAX_RECONSUME_TIMES,
            client,
        }
    }
}
