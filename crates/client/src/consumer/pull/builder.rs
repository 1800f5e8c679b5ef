//! [`PullConsumerBuilder`]: a pull consumer configured and started in one expression.

use std::time::Duration;

use super::{DefaultMQPullConsumer, PullConsumerConfig};
use crate::builder::client_options;
use crate::config::ClientConfig;
use crate::consumer::MessageModel;
use crate::error::Result;

/// Builds a [`DefaultMQPullConsumer`] from the settings of [`PullConsumerConfig`];
/// [`Self::start`] also starts it (a start checks the group name).
///
/// # Example
///
/// ```no_run
/// # async fn demo() -> Result<(), comet_client::ClientError> {
/// use comet_client::prelude::*;
///
/// let consumer = DefaultMQPullConsumer::builder("my_pull_group")
///     .namesrv("127.0.0.1:9876")
///     .register_topic("MyTopic")
///     .start()
///     .await?;
/// for mq in consumer.fetch_subscribe_message_queues("MyTopic").await? {
///     let offset = consumer.fetch_consume_offset(&mq, true).await?.max(0);
///     let result = consumer.pull(&mq, "*", offset, 32).await?;
///     consumer.update_consume_offset(&mq, result.next_begin_offset)?;
/// }
/// consumer.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until built or started"]
pub struct PullConsumerBuilder {
    config: PullConsumerConfig,
}

impl DefaultMQPullConsumer {
    /// A builder of a pull consumer of `consumer_group`, with the Java client's defaults (the
    /// name servers default to the `NAMESRV_ADDR` environment variable).
    pub fn builder(consumer_group: impl Into<String>) -> PullConsumerBuilder {
        PullConsumerBuilder {
            config: PullConsumerConfig::new(consumer_group, ClientConfig::default()),
        }
    }
}

impl PullConsumerBuilder {
    client_options!(config.client);

    /// Clustering (offsets on the broker, the default) or broadcasting (offsets in a local
    /// file).
    pub fn message_model(mut self, model: MessageModel) -> Self {
        self.config.message_model = model;
        self
    }

    /// Announces `topic` in the group's heartbeats from the start (Java `registerTopics`).
    pub fn register_topic(mut self, topic: impl Into<String>) -> Self {
        self.config.register_topics.push(topic.into());
        self
    }

    /// Timeout of a pull that does not wait for messages (Java `consumerPullTimeoutMillis`).
    pub fn consumer_pull_timeout(mut self, timeout: Duration) -> Self {
        self.config.consumer_pull_timeout = timeout;
        self
    }

    /// How long the broker holds a long-polling pull that finds nothing (Java
    /// `brokerSuspendMaxTimeMillis`).
    pub fn broker_suspend_max_time(mut self, time: Duration) -> Self {
        self.config.broker_suspend_max_time = time;
        self
    }

    /// Any other setting of [`PullConsumerConfig`].
    pub fn configure(mut self, f: impl FnOnce(&mut PullConsumerConfig)) -> Self {
        f(&mut self.config);
        self
    }

    /// The consumer, not started.
    pub fn build(self) -> DefaultMQPullConsumer {
        DefaultMQPullConsumer::new(self.config)
    }

    /// The consumer, built and started.
    pub async fn start(self) -> Result<DefaultMQPullConsumer> {
        let consumer = self.build();
        consumer.start().await?;
        Ok(consumer)
    }
}
