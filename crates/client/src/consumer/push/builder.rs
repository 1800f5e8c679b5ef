//! [`PushConsumerBuilder`]: a push consumer configured, subscribed and started in one
//! expression.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{DefaultMQPushConsumer, PushConsumerConfig};
use crate::builder::client_options;
use crate::consumer::offset_store::OffsetStore;
use crate::consumer::rebalance::AllocateMessageQueueStrategy;
use crate::consumer::{ConsumeFromWhere, MessageListener, MessageModel};
use crate::error::ClientError;

/// Builds a [`DefaultMQPushConsumer`]: the settings of [`PushConsumerConfig`], the
/// subscriptions and the listener. [`Self::build`] checks the settings as a start would;
/// [`Self::start`] also starts the consumer.
///
/// # Example
///
/// ```no_run
/// # async fn demo() -> Result<(), comet_client::ClientError> {
/// use comet_client::prelude::*;
///
/// let consumer = DefaultMQPushConsumer::builder("my_group")
///     .namesrv("127.0.0.1:9876")
///     .subscribe("MyTopic", "TagA || TagB")
///     .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
///     .listener(MessageListener::concurrently_async(|msgs, _ctx| async move {
///         for msg in &msgs {
///             println!("{}", String::from_utf8_lossy(&msg.body));
///         }
///         ConsumeConcurrentlyStatus::ConsumeSuccess
///     }))
///     .start()
///     .await?;
/// # consumer.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "a builder does nothing until built or started"]
pub struct PushConsumerBuilder {
    config: PushConsumerConfig,
    subscriptions: Vec<(String, String)>,
    listener: Option<MessageListener>,
}

impl DefaultMQPushConsumer {
    /// A builder of a push consumer of `consumer_group`, with the Java client's defaults.
    pub fn builder(consumer_group: impl Into<String>) -> PushConsumerBuilder {
        PushConsumerBuilder {
            config: PushConsumerConfig::new(consumer_group),
            subscriptions: Vec::new(),
            listener: None,
        }
    }
}

impl PushConsumerBuilder {
    client_options!(config.client);

    /// Subscribes to `topic` with a tag expression (`*`, `TagA || TagB`); may be called once
    /// per topic.
    pub fn subscribe(
        mut self,
        topic: impl Into<String>,
        sub_expression: impl Into<String>,
    ) -> Self {
        self.subscriptions
            .push((topic.into(), sub_expression.into()));
        self
    }

    /// The listener that consumes the messages; its kind (concurrently or orderly) picks how.
    pub fn listener(mut self, listener: MessageListener) -> Self {
        self.listener = Some(listener);
        self
    }

    /// Clustering (queues shared out among the group's members, the default) or broadcasting
    /// (every member reads every queue).
    pub fn message_model(mut self, model: MessageModel) -> Self {
        self.config.message_model = model;
        self
    }

    /// Where a queue the group has no offset for starts.
    pub fn consume_from_where(mut self, from: ConsumeFromWhere) -> Self {
        self.config.consume_from_where = from;
        self
    }

    /// The start point (epoch ms) of `ConsumeFromTimestamp`.
    pub fn consume_timestamp(mut self, epoch_millis: i64) -> Self {
        self.config.consume_timestamp = Some(epoch_millis);
        self
    }

    /// Most listener calls running at once (Java `consumeThreadMax`).
    pub fn consume_thread_max(mut self, max: usize) -> Self {
        self.config.consume_thread_max = max;
        self.config.consume_thread_min = self.config.consume_thread_min.min(max);
        self
    }

    /// Most messages per listener call (Java `consumeMessageBatchMaxSize`).
    pub fn consume_message_batch_max_size(mut self, size: usize) -> Self {
        self.config.consume_message_batch_max_size = size;
        self
    }

    /// Messages asked for per pull (Java `pullBatchSize`).
    pub fn pull_batch_size(mut self, size: i32) -> Self {
        self.config.pull_batch_size = size;
        self
    }

    /// Deliveries of a failing message before it goes to the dead-letter queue (Java
    /// `maxReconsumeTimes`; -1 means 16 for concurrent and unlimited for orderly consumption).
    pub fn max_reconsume_times(mut self, times: i32) -> Self {
        self.config.max_reconsume_times = times;
        self
    }

    /// How long an orderly queue pauses after `SuspendCurrentQueueAMoment`.
    pub fn suspend_current_queue_time(mut self, time: Duration) -> Self {
        self.config.suspend_current_queue_time_millis = crate::consumer::duration_millis(time);
        self
    }

    /// How the group's queues are shared out among its members (Java
    /// `allocateMessageQueueStrategy`; averagely by default).
    pub fn allocate_strategy(mut self, strategy: Arc<dyn AllocateMessageQueueStrategy>) -> Self {
        self.config.allocate_message_queue_strategy = strategy;
        self
    }

    /// An offset store replacing the default of the message model.
    pub fn offset_store(mut self, store: Arc<dyn OffsetStore>) -> Self {
        self.config.offset_store = Some(store);
        self
    }

    /// Base directory of the broadcasting offset files.
    pub fn local_offset_store_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.config.local_offset_store_dir = Some(dir.into());
        self
    }

    /// Any other setting of [`PushConsumerConfig`].
    pub fn configure(mut self, f: impl FnOnce(&mut PushConsumerConfig)) -> Self {
        f(&mut self.config);
        self
    }

    /// The consumer, not started: settings checked as a start checks them, subscriptions
    /// recorded and the listener registered.
    pub async fn build(self) -> Result<DefaultMQPushConsumer, ClientError> {
        // Every rule but the listener's, which the start checks (a listener may be registered
        // after building).
        self.config.check_with(true)?;
        let consumer = DefaultMQPushConsumer::new(self.config);
        for (topic, expression) in &self.subscriptions {
            consumer.subscribe(topic, expression).await?;
        }
        if let Some(listener) = self.listener {
            consumer.register_message_listener(listener);
        }
        Ok(consumer)
    }

    /// The consumer, built and started (a start fails without a listener).
    pub async fn start(self) -> Result<DefaultMQPushConsumer, ClientError> {
        let consumer = self.build().await?;
        consumer.start().await?;
        Ok(consumer)
    }
}
