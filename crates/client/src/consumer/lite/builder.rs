//! [`LitePullConsumerBuilder`]: a lite pull consumer configured, subscribed (or assigned) and
//! started in one expression.

use std::sync::Arc;
use std::time::Duration;

use super::{DefaultLitePullConsumer, LitePullConsumerConfig};
use crate::builder::client_options;
use crate::config::ClientConfig;
use crate::consumer::rebalance::AllocateMessageQueueStrategy;
use crate::consumer::{ConsumeFromWhere, MessageModel, MessageQueue};
use crate::error::Result;

/// Builds a [`DefaultLitePullConsumer`] (Java `DefaultLitePullConsumer`): the settings of
/// [`LitePullConsumerConfig`] and either subscriptions (queues from the group's rebalance) or
/// an assignment (queues the application names). [`Self::start`] also starts it (a start
/// checks the group name and batch size).
///
/// # Example
///
/// ```no_run
/// # async fn demo() -> Result<(), comet_client::ClientError> {
/// use comet_client::prelude::*;
///
/// let consumer = DefaultLitePullConsumer::builder("my_lite_group")
///     .namesrv("127.0.0.1:9876")
///     .subscribe("MyTopic", "*")
///     .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
///     .start()
///     .await?;
/// for msg in consumer.poll(std::time::Duration::from_secs(1)).await? {
///     println!("{}", String::from_utf8_lossy(&msg.body));
/// }
/// consumer.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until built or started"]
pub struct LitePullConsumerBuilder {
    config: LitePullConsumerConfig,
    subscriptions: Vec<(String, String)>,
    assignment: Vec<MessageQueue>,
}

impl DefaultLitePullConsumer {
    /// A builder of a lite pull consumer of `consumer_group`, with RocketMQ's defaults (the
    /// name servers default to the `NAMESRV_ADDR` environment variable).
    pub fn builder(consumer_group: impl Into<String>) -> LitePullConsumerBuilder {
        LitePullConsumerBuilder {
            config: LitePullConsumerConfig::new(consumer_group, ClientConfig::default()),
            subscriptions: Vec::new(),
            assignment: Vec::new(),
        }
    }
}

impl LitePullConsumerBuilder {
    client_options!(config.client);

    /// Subscribes to `topic` with a tag expression; excludes [`Self::assign`].
    pub fn subscribe(
        mut self,
        topic: impl Into<String>,
        sub_expression: impl Into<String>,
    ) -> Self {
        self.subscriptions
            .push((topic.into(), sub_expression.into()));
        self
    }

    /// Reads exactly these queues, without rebalance; excludes [`Self::subscribe`].
    pub fn assign(mut self, queues: impl IntoIterator<Item = MessageQueue>) -> Self {
        self.assignment.extend(queues);
        self
    }

    /// Clustering (the default) or broadcasting.
    pub fn message_model(mut self, model: MessageModel) -> Self {
        self.config.message_model = model;
        self
    }

    /// Where a queue without a committed offset starts.
    pub fn consume_from_where(mut self, from: ConsumeFromWhere) -> Self {
        self.config.consume_from_where = from;
        self
    }

    /// The start point (epoch ms) of `ConsumeFromTimestamp`.
    pub fn consume_timestamp(mut self, epoch_millis: i64) -> Self {
        self.config.consume_timestamp = Some(epoch_millis);
        self
    }

    /// Messages asked for per pull (Java `pullBatchSize`).
    pub fn pull_batch_size(mut self, size: i32) -> Self {
        self.config.pull_batch_size = size;
        self
    }

    /// Commit polled offsets periodically (the default) or only on
    /// [`DefaultLitePullConsumer::commit_sync`].
    pub fn auto_commit(mut self, enable: bool) -> Self {
        self.config.auto_commit = enable;
        self
    }

    /// Period of auto-commit.
    pub fn auto_commit_interval(mut self, interval: Duration) -> Self {
        self.config.auto_commit_interval = interval;
        self
    }

    /// How the group's queues are shared out among its members in subscribe mode.
    pub fn allocate_strategy(mut self, strategy: Arc<dyn AllocateMessageQueueStrategy>) -> Self {
        self.config.allocate_strategy = strategy;
        self
    }

    /// Any other setting of [`LitePullConsumerConfig`].
    pub fn configure(mut self, f: impl FnOnce(&mut LitePullConsumerConfig)) -> Self {
        f(&mut self.config);
        self
    }

    /// The consumer, not started, with its subscriptions or assignment recorded.
    pub async fn build(self) -> Result<DefaultLitePullConsumer> {
        let consumer = DefaultLitePullConsumer::new(self.config);
        for (topic, expression) in &self.subscriptions {
            consumer.subscribe(topic, expression).await?;
        }
        if !self.assignment.is_empty() {
            consumer.assign(self.assignment).await?;
        }
        Ok(consumer)
    }

    /// The consumer, built and started.
    pub async fn start(self) -> Result<DefaultLitePullConsumer> {
        let consumer = self.build().await?;
        consumer.start().await?;
        Ok(consumer)
    }
}
