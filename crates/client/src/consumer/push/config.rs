//! `PushConsumerConfig`: the settings of a push consumer, their defaults and the range check a
//! start runs on them (Java's `DefaultMQPushConsumerImpl.checkConfig`).
//!
//! The defaults and bounds keep the Java client's values, because brokers and operators are tuned
//! for them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::pull::PULL_TIME_DELAY_WHEN_EXCEPTION;
use crate::config::ClientConfig;
use crate::consumer::offset_store::OffsetStore;
use crate::consumer::rebalance::{AllocateMessageQueueAveragely, AllocateMessageQueueStrategy};
use crate::consumer::{ConsumeFromWhere, MessageModel};
use crate::error::ClientError;

/// `maxReconsumeTimes` when the user leaves it at -1.
pub const DEFAULT_MAX_RECONSUME_TIMES: i32 = 16;
/// Upper bound of `consume_thread_max` (Java's check).
pub const MAX_CONSUME_THREADS: usize = 1000;
/// Upper bound of the per-queue count thresholds and the max span (Java's check).
pub const MAX_QUEUE_THRESHOLD: i64 = 65_535;
/// Upper bound of `pull_threshold_size_for_queue`, in MiB (Java's check).
pub const MAX_QUEUE_THRESHOLD_SIZE_MIB: i64 = 1024;
/// Upper bound of `consume_message_batch_max_size` (Java's check).
pub const MAX_BATCH_SIZE: usize = 1024;
/// Upper bound of `pull_batch_size` (Java's check).
pub const MAX_PULL_BATCH_SIZE: i32 = 1024;
/// Upper bound of `pull_interval` (Java's check: 65535 ms).
pub const MAX_PULL_INTERVAL: Duration = Duration::from_millis(65_535);

/// Settings of a push consumer; the defaults are those of the Java client's
/// `DefaultMQPushConsumer`.
#[derive(Clone)]
pub struct PushConsumerConfig {
    pub client: ClientConfig,
    pub consumer_group: String,
    pub message_model: MessageModel,
    pub consume_from_where: ConsumeFromWhere,
    /// Start point of CONSUME_FROM_TIMESTAMP, epoch ms; `None` = 30 minutes before start.
    pub consume_timestamp: Option<i64>,
    pub allocate_message_queue_strategy: Arc<dyn AllocateMessageQueueStrategy>,
    /// A user-provided offset store replacing the default one of the message model.
    pub offset_store: Option<Arc<dyn OffsetStore>>,
    /// Java's thread pool floor; kept for configuration parity (concurrent consumption runs
    /// `consume_thread_max` workers, orderly consumption up to that many listener calls).
    pub consume_thread_min: usize,
    /// Most listener invocations running at once.
    pub consume_thread_max: usize,
    /// Concurrent only: pause pulling a queue whose cached offsets span more than this.
    pub consume_concurrently_max_span: i64,
    /// Pause pulling a queue caching more than this many messages.
    pub pull_threshold_for_queue: i64,
    /// Pause pulling a queue caching more than this many MiB of bodies.
    pub pull_threshold_size_for_queue: i64,
    /// Per-topic message limit, split evenly over the owned queues; -1 disables.
    pub pull_threshold_for_topic: i64,
    /// Per-topic MiB limit, split evenly over the owned queues; -1 disables.
    pub pull_threshold_size_for_topic: i64,
    /// Pause between pulls of a queue that found messages (0 = pull again at once).
    pub pull_interval: Duration,
    /// Messages per listener call (concurrent) or per orderly batch.
    pub consume_message_batch_max_size: usize,
    /// Messages per pull.
    pub pull_batch_size: i32,
    /// Send the subscription with every pull instead of relying on the heartbeat's.
    pub post_subscription_when_pull: bool,
    pub unit_mode: bool,
    /// -1 = 16 for concurrent consumption, unlimited for orderly consumption.
    pub max_reconsume_times: i32,
    /// Orderly: how long a queue pauses after SUSPEND_CURRENT_QUEUE_A_MOMENT.
    pub suspend_current_queue_time_millis: i64,
    /// A message whose consumption started longer ago is sent back (concurrent only).
    pub consume_timeout: Duration,
    /// Delay of a pull after an error.
    pub pull_time_delay_when_exception: Duration,
    /// Base directory of the broadcasting offset files; `None` = `~/.rocketmq_offsets` (or the
    /// `ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR` environment variable).
    pub local_offset_store_dir: Option<PathBuf>,
    /// On shutdown, how long to wait for running listener calls.
    pub await_termination_when_shutdown: Duration,
    /// Record SubBefore/SubAfter trace events of every consumed message in the trace topic (see
    /// [`crate::trace`]); Java's `enableMsgTrace`.
    pub enable_msg_trace: bool,
    /// The trace topic; `None` = `RMQ_SYS_TRACE_TOPIC`. Java's `customizedTraceTopic`.
    pub custom_trace_topic: Option<String>,
}

impl std::fmt::Debug for PushConsumerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConsumerConfig")
            .field("consumer_group", &self.consumer_group)
            .field("message_model", &self.message_model)
            .field("consume_from_where", &self.consume_from_where)
            .field(
                "allocate_message_queue_strategy",
                &self.allocate_message_queue_strategy.name(),
            )
            .field("pull_batch_size", &self.pull_batch_size)
            .finish_non_exhaustive()
    }
}

impl PushConsumerConfig {
    /// Java's defaults for `consumer_group`.
    pub fn new(consumer_group: impl Into<String>) -> Self {
        PushConsumerConfig {
            client: ClientConfig::default(),
            consumer_group: consumer_group.into(),
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            consume_timestamp: None,
            allocate_message_queue_strategy: Arc::new(AllocateMessageQueueAveragely),
            offset_store: None,
            consume_thread_min: 20,
            consume_thread_max: 64,
            consume_concurrently_max_span: 2000,
            pull_threshold_for_queue: 1000,
            pull_threshold_size_for_queue: 100,
            pull_threshold_for_topic: -1,
            pull_threshold_size_for_topic: -1,
            pull_interval: Duration::ZERO,
            consume_message_batch_max_size: 1,
            pull_batch_size: 32,
            post_subscription_when_pull: false,
            unit_mode: false,
            max_reconsume_times: -1,
            suspend_current_queue_time_millis: 1000,
            consume_timeout: Duration::from_secs(15 * 60),
            pull_time_delay_when_exception: PULL_TIME_DELAY_WHEN_EXCEPTION,
            local_offset_store_dir: None,
            await_termination_when_shutdown: Duration::ZERO,
            enable_msg_trace: false,
            custom_trace_topic: None,
        }
    }

    /// Java's `checkConfig`: refuses a group name it reserves and settings out of range.
    pub(crate) fn check(&self) -> Result<(), ClientError> {
        let bad = |what: String| Err(ClientError::IllegalArgument(what));
        if self.consumer_group.is_empty() {
            return bad("consumerGroup is empty".into());
        }
        if self.consumer_group == "DEFAULT_CONSUMER" {
            return bad(
                "consumerGroup can not equal DEFAULT_CONSUMER, please specify another one".into(),
            );
        }
        if !(1..=MAX_CONSUME_THREADS).contains(&self.consume_thread_max) {
            return bad(format!(
                "consumeThreadMax {} out of range [1, {MAX_CONSUME_THREADS}]",
                self.consume_thread_max
            ));
        }
        if self.consume_thread_min > self.consume_thread_max {
            return bad("consumeThreadMin can't be larger than consumeThreadMax".into());
        }
        if !(1..=MAX_QUEUE_THRESHOLD).contains(&self.consume_concurrently_max_span) {
            return bad(format!(
                "consumeConcurrentlyMaxSpan out of range [1, {MAX_QUEUE_THRESHOLD}]"
            ));
        }
        if !(1..=MAX_QUEUE_THRESHOLD).contains(&self.pull_threshold_for_queue) {
            return bad(format!(
                "pullThresholdForQueue out of range [1, {MAX_QUEUE_THRESHOLD}]"
            ));
        }
        if !(0..=MAX_QUEUE_THRESHOLD_SIZE_MIB).contains(&self.pull_threshold_size_for_queue) {
            return bad(format!(
                "pullThresholdSizeForQueue out of range [0, {MAX_QUEUE_THRESHOLD_SIZE_MIB}] MiB"
            ));
        }
        if !(1..=MAX_BATCH_SIZE).contains(&self.consume_message_batch_max_size) {
            return bad(format!(
                "consumeMessageBatchMaxSize out of range [1, {MAX_BATCH_SIZE}]"
            ));
        }
        if !(1..=MAX_PULL_BATCH_SIZE).contains(&self.pull_batch_size) {
            return bad(format!(
                "pullBatchSize out of range [1, {MAX_PULL_BATCH_SIZE}]"
            ));
        }
        if self.pull_interval > MAX_PULL_INTERVAL {
            return bad(format!("pullInterval above {MAX_PULL_INTERVAL:?}"));
        }
        Ok(())
    }

    /// The effective max reconsume times for concurrent consumption.
    pub fn max_reconsume_times_concurrently(&self) -> i32 {
        if self.max_reconsume_times == -1 {
            DEFAULT_MAX_RECONSUME_TIMES
        } else {
            self.max_reconsume_times
        }
    }

    /// The effective max reconsume times for orderly consumption (Java: unlimited at -1).
    pub fn max_reconsume_times_orderly(&self) -> i32 {
        if self.max_reconsume_times == -1 {
            i32::MAX
        } else {
            self.max_reconsume_times
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_javas_and_pass_the_check() {
        let config = PushConsumerConfig::new("g");
        config.check().expect("defaults are valid");
        assert_eq!(config.pull_batch_size, 32);
        assert_eq!(config.pull_threshold_for_queue, 1000);
        assert_eq!(config.pull_threshold_size_for_queue, 100);
        assert_eq!(config.consume_concurrently_max_span, 2000);
        assert_eq!(config.consume_thread_min, 20);
        assert_eq!(config.consume_thread_max, 64);
        assert_eq!(config.consume_message_batch_max_size, 1);
        assert_eq!(config.consume_timeout, Duration::from_secs(900));
        assert_eq!(config.allocate_message_queue_strategy.name(), "AVG");
        assert_eq!(config.max_reconsume_times_concurrently(), 16);
        assert_eq!(config.max_reconsume_times_orderly(), i32::MAX);
    }

    #[test]
    fn out_of_range_settings_are_refused() {
        let cases: [fn(&mut PushConsumerConfig); 8] = [
            |c| c.consumer_group.clear(),
            |c| c.consumer_group = "DEFAULT_CONSUMER".into(),
            |c| c.consume_thread_max = 0,
            |c| c.consume_thread_min = c.consume_thread_max + 1,
            |c| c.pull_threshold_for_queue = MAX_QUEUE_THRESHOLD + 1,
            |c| c.pull_batch_size = 0,
            |c| c.consume_message_batch_max_size = MAX_BATCH_SIZE + 1,
            |c| c.pull_interval = MAX_PULL_INTERVAL + Duration::from_millis(1),
        ];
        for (i, tweak) in cases.iter().enumerate() {
            let mut config = PushConsumerConfig::new("g");
            tweak(&mut config);
            assert!(
                matches!(config.check(), Err(ClientError::IllegalArgument(_))),
                "case {i}"
            );
        }
        let mut explicit = PushConsumerConfig::new("g");
        explicit.max_reconsume_times = 3;
        assert_eq!(explicit.max_reconsume_times_concurrently(), 3);
        assert_eq!(explicit.max_reconsume_times_orderly(), 3);
    }
}
