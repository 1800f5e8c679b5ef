//! `PushConsumerConfig`: the settings of a push consumer, their defaults and the range check a
//! start runs on them (Java's `DefaultMQPushConsumerImpl.checkConfig`).
//!
//! The defaults and bounds keep the Java client's values, because brokers and operators are tuned
//! for them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::pull::PULL_TIME_DELAY_WHEN_EXCEPTION;
use super::pull_result::OFFSET_ILLEGAL_FIX_DELAY;
use crate::config::{ClientConfig, millis_from_env};
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
/// Upper bound of `pull_threshold_for_topic` when it is not -1 (Java's check).
pub const MAX_TOPIC_THRESHOLD: i64 = 6_553_500;
/// Upper bound of `pull_threshold_size_for_topic` in MiB when it is not -1 (Java's check).
pub const MAX_TOPIC_THRESHOLD_SIZE_MIB: i64 = 102_400;
/// The group name reserved for the Java client's own use, which a consumer may not take.
pub const DEFAULT_CONSUMER_GROUP: &str = "DEFAULT_CONSUMER";

/// Environment name (a Java system property name) of the default of
/// [`PushConsumerConfig::lock_max_live_ms`]; see [`crate::config::millis_from_env`].
pub const LOCK_MAX_LIVE_TIME_PROPERTY: &str = "rocketmq.client.rebalance.lockMaxLiveTime";
/// Environment name of the default of [`PushConsumerConfig::lock_interval_ms`].
pub const LOCK_INTERVAL_PROPERTY: &str = "rocketmq.client.rebalance.lockInterval";
/// Environment name of the default of [`PushConsumerConfig::pull_max_idle_ms`].
pub const PULL_MAX_IDLE_TIME_PROPERTY: &str = "rocketmq.client.pull.pullMaxIdleTime";
/// Environment name of the default of [`PushConsumerConfig::unlock_delay_ms`].
pub const UNLOCK_DELAY_TIME_PROPERTY: &str = "rocketmq.client.unlockDelayTimeMills";
/// Environment name of the default of [`PushConsumerConfig::max_time_consume_continuously_ms`].
pub const MAX_TIME_CONSUME_CONTINUOUSLY_PROPERTY: &str =
    "rocketmq.client.maxTimeConsumeContinuously";

/// Settings of a push consumer; the defaults are those of the Java client's
/// `DefaultMQPushConsumer`.
#[derive(Clone)]
pub struct PushConsumerConfig {
    /// Name servers and client identity.
    pub client: ClientConfig,
    /// The consumer group (Java `consumerGroup`).
    pub consumer_group: String,
    /// Clustering (queues shared out among the group's members) or broadcasting (every member reads
    /// every queue).
    pub message_model: MessageModel,
    /// Where a queue the group has no offset for starts.
    pub consume_from_where: ConsumeFromWhere,
    /// Start point of CONSUME_FROM_TIMESTAMP, epoch ms; `None` = 30 minutes before start.
    pub consume_timestamp: Option<i64>,
    /// How the group's queues are shared out among its members (averagely by default).
    pub allocate_message_queue_strategy: Arc<dyn AllocateMessageQueueStrategy>,
    /// A user-provided offset store replacing the default one of the message model.
    pub offset_store: Option<Arc<dyn OffsetStore>>,
    /// How many listener calls run at once, concurrent and orderly alike: the Java consume
    /// thread pool's core size. Java's pool queues work without bound, so it never grows past
    /// its core size and this, not `consume_thread_max`, is the consumer's real concurrency.
    pub consume_thread_min: usize,
    /// Upper bound of `consume_thread_min` and of
    /// [`DefaultMQPushConsumer::update_core_pool_size`](super::DefaultMQPushConsumer::update_core_pool_size)
    /// (the Java pool's maximum, which an unbounded work queue never reaches).
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
    /// Java's `unitMode`. The Java client only reports it: the heartbeat's consumer data carries
    /// it (brokers keep it in the group's consumer info) and filter hooks see it in their
    /// context; it changes no topic name, pull flag or send-back field. Comet does the same.
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
    /// After a pull answered OFFSET_ILLEGAL, how long the dropped queue waits before the
    /// broker's corrected offset is stored and persisted and the queue is removed, for the next
    /// rebalance to re-create it from there. Ten seconds by default, as in the Java client
    /// (4.9.x to 5.1.x): a queue whose offset keeps turning illegal is retried at that pace
    /// instead of in a tight loop. Zero fixes the offset at once.
    pub offset_illegal_fix_delay: Duration,
    /// Orderly, clustering: how long a broker lock is trusted after it was last taken or renewed;
    /// a queue whose lock is older is not consumed until it is locked again. Default 30 000, or
    /// the environment's [`LOCK_MAX_LIVE_TIME_PROPERTY`].
    pub lock_max_live_ms: u64,
    /// Orderly, clustering: period of the renewal of every owned queue's broker lock. Default
    /// 20 000, or the environment's [`LOCK_INTERVAL_PROPERTY`].
    pub lock_interval_ms: u64,
    /// A queue nobody pulled for this long is dropped by the next rebalance and re-created.
    /// Default 120 000, or the environment's [`PULL_MAX_IDLE_TIME_PROPERTY`].
    pub pull_max_idle_ms: u64,
    /// Orderly, clustering: delay of the broker unlock of a given-up queue that still caches
    /// messages. Default 20 000, or the environment's [`UNLOCK_DELAY_TIME_PROPERTY`].
    pub unlock_delay_ms: u64,
    /// Orderly: one consume task yields its queue after running this long, so other queues get
    /// their turn. Default 60 000, or the environment's
    /// [`MAX_TIME_CONSUME_CONTINUOUSLY_PROPERTY`].
    pub max_time_consume_continuously_ms: u64,
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
            offset_illegal_fix_delay: OFFSET_ILLEGAL_FIX_DELAY,
            lock_max_live_ms: millis_from_env(LOCK_MAX_LIVE_TIME_PROPERTY, 30_000),
            lock_interval_ms: millis_from_env(LOCK_INTERVAL_PROPERTY, 20_000),
            pull_max_idle_ms: millis_from_env(PULL_MAX_IDLE_TIME_PROPERTY, 120_000),
            unlock_delay_ms: millis_from_env(UNLOCK_DELAY_TIME_PROPERTY, 20_000),
            max_time_consume_continuously_ms: millis_from_env(
                MAX_TIME_CONSUME_CONTINUOUSLY_PROPERTY,
                60_000,
            ),
            enable_msg_trace: false,
            custom_trace_topic: None,
        }
    }

    /// [`Self::lock_max_live_ms`] as a duration.
    pub fn lock_max_live(&self) -> Duration {
        Duration::from_millis(self.lock_max_live_ms)
    }

    /// [`Self::lock_interval_ms`] as a duration (at least 1 ms: it is a timer period).
    pub fn lock_interval(&self) -> Duration {
        Duration::from_millis(self.lock_interval_ms.max(1))
    }

    /// [`Self::pull_max_idle_ms`] as a duration.
    pub fn pull_max_idle(&self) -> Duration {
        Duration::from_millis(self.pull_max_idle_ms)
    }

    /// [`Self::unlock_delay_ms`] as a duration.
    pub fn unlock_delay(&self) -> Duration {
        Duration::from_millis(self.unlock_delay_ms)
    }

    /// [`Self::max_time_consume_continuously_ms`] as a duration.
    pub fn max_time_consume_continuously(&self) -> Duration {
        Duration::from_millis(self.max_time_consume_continuously_ms)
    }

    /// The check of a start without the listener rule (see [`Self::check_with`]).
    #[cfg(test)]
    pub(crate) fn check(&self) -> Result<(), ClientError> {
        self.check_with(true)
    }

    /// Java's `DefaultMQPushConsumerImpl.checkConfig`, rule for rule and in its order: the group
    /// name (not blank, only `%|a-zA-Z0-9_-`, at most 255 bytes, not [`DEFAULT_CONSUMER_GROUP`]),
    /// the consume timestamp, the listener, then the numeric ranges. Java also refuses a null
    /// message model, ConsumeFromWhere, allocation strategy or subscription table, and a listener
    /// of neither kind: none of these can be missing in a Rust value, so they have no rule here.
    /// Java's consume timestamp is a `yyyyMMddHHmmss` string that must parse; here it is epoch
    /// milliseconds, and the counterpart of an unparsable one is a negative value. The pop
    /// settings Java checks belong to pop consumption, which this consumer does not do.
    pub(crate) fn check_with(&self, has_listener: bool) -> Result<(), ClientError> {
        let bad = |what: String| Err(ClientError::IllegalArgument(what));
        let group = &self.consumer_group;
        if let Err(e) = comet_protocol::naming::validate_group(group) {
            return bad(format!("consumerGroup: {e}"));
        }
        if group == DEFAULT_CONSUMER_GROUP {
            return bad(format!(
                "consumerGroup can not equal {DEFAULT_CONSUMER_GROUP}, please specify another one"
            ));
        }
        if let Some(ts) = self.consume_timestamp
            && ts < 0
        {
            return bad(format!(
                "consumeTimestamp is invalid: {ts} is not an epoch millisecond time"
            ));
        }
        if !has_listener {
            return bad("messageListener is null".into());
        }
        self.check_ranges()
    }

    /// The numeric rules of [`Self::check_with`].
    fn check_ranges(&self) -> Result<(), ClientError> {
        let bad = |what: String| Err(ClientError::IllegalArgument(what));
        let out_of =
            |name: &str, low: i64, high: i64| bad(format!("{name} Out of range [{low}, {high}]"));
        let max_threads = i64::try_from(MAX_CONSUME_THREADS).unwrap_or(i64::MAX);
        if !(1..=MAX_CONSUME_THREADS).contains(&self.consume_thread_min) {
            return out_of("consumeThreadMin", 1, max_threads);
        }
        if !(1..=MAX_CONSUME_THREADS).contains(&self.consume_thread_max) {
            return out_of("consumeThreadMax", 1, max_threads);
        }
        if self.consume_thread_min > self.consume_thread_max {
            return bad(format!(
                "consumeThreadMin ({}) is larger than consumeThreadMax ({})",
                self.consume_thread_min, self.consume_thread_max
            ));
        }
        if !(1..=MAX_QUEUE_THRESHOLD).contains(&self.consume_concurrently_max_span) {
            return out_of("consumeConcurrentlyMaxSpan", 1, MAX_QUEUE_THRESHOLD);
        }
        if !(1..=MAX_QUEUE_THRESHOLD).contains(&self.pull_threshold_for_queue) {
            return out_of("pullThresholdForQueue", 1, MAX_QUEUE_THRESHOLD);
        }
        if self.pull_threshold_for_topic != -1
            && !(1..=MAX_TOPIC_THRESHOLD).contains(&self.pull_threshold_for_topic)
        {
            return out_of("pullThresholdForTopic", 1, MAX_TOPIC_THRESHOLD);
        }
        if !(1..=MAX_QUEUE_THRESHOLD_SIZE_MIB).contains(&self.pull_threshold_size_for_queue) {
            return out_of("pullThresholdSizeForQueue", 1, MAX_QUEUE_THRESHOLD_SIZE_MIB);
        }
        if self.pull_threshold_size_for_topic != -1
            && !(1..=MAX_TOPIC_THRESHOLD_SIZE_MIB).contains(&self.pull_threshold_size_for_topic)
        {
            return out_of("pullThresholdSizeForTopic", 1, MAX_TOPIC_THRESHOLD_SIZE_MIB);
        }
        if self.pull_interval > MAX_PULL_INTERVAL {
            return out_of("pullInterval", 0, 65_535);
        }
        if !(1..=MAX_BATCH_SIZE).contains(&self.consume_message_batch_max_size) {
            return out_of("consumeMessageBatchMaxSize", 1, 1024);
        }
        if !(1..=MAX_PULL_BATCH_SIZE).contains(&self.pull_batch_size) {
            return out_of("pullBatchSize", 1, i64::from(MAX_PULL_BATCH_SIZE));
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

    /// One row per rule of Java's `checkConfig`: each setting just outside its range is
    /// refused, and the bounds themselves pass.
    #[test]
    fn every_java_check_rule_is_enforced() {
        type Tweak = fn(&mut PushConsumerConfig);
        let refused: &[(&str, Tweak)] = &[
            ("blank group", |c| c.consumer_group = "  ".into()),
            ("empty group", |c| c.consumer_group.clear()),
            ("illegal group characters", |c| {
                c.consumer_group = "a/b".into()
            }),
            ("group too long", |c| c.consumer_group = "g".repeat(256)),
            ("default group", |c| {
                c.consumer_group = DEFAULT_CONSUMER_GROUP.into()
            }),
            ("negative consume timestamp", |c| {
                c.consume_timestamp = Some(-1)
            }),
            ("consumeThreadMin 0", |c| c.consume_thread_min = 0),
            ("consumeThreadMin 1001", |c| {
                c.consume_thread_min = 1001;
                c.consume_thread_max = 1000;
            }),
            ("consumeThreadMax 0", |c| c.consume_thread_max = 0),
            ("consumeThreadMax 1001", |c| c.consume_thread_max = 1001),
            ("min above max", |c| {
                c.consume_thread_min = c.consume_thread_max + 1
            }),
            ("maxSpan 0", |c| c.consume_concurrently_max_span = 0),
            ("maxSpan 65536", |c| {
                c.consume_concurrently_max_span = 65_536
            }),
            ("pullThresholdForQueue 0", |c| {
                c.pull_threshold_for_queue = 0
            }),
            ("pullThresholdForQueue 65536", |c| {
                c.pull_threshold_for_queue = 65_536
            }),
            ("pullThresholdForTopic 0", |c| {
                c.pull_threshold_for_topic = 0
            }),
            ("pullThresholdForTopic -2", |c| {
                c.pull_threshold_for_topic = -2
            }),
            ("pullThresholdForTopic 6553501", |c| {
                c.pull_threshold_for_topic = 6_553_501
            }),
            ("pullThresholdSizeForQueue 0", |c| {
                c.pull_threshold_size_for_queue = 0
            }),
            ("pullThresholdSizeForQueue 1025", |c| {
                c.pull_threshold_size_for_queue = 1025
            }),
            ("pullThresholdSizeForTopic 0", |c| {
                c.pull_threshold_size_for_topic = 0
            }),
            ("pullThresholdSizeForTopic -2", |c| {
                c.pull_threshold_size_for_topic = -2
            }),
            ("pullThresholdSizeForTopic 102401", |c| {
                c.pull_threshold_size_for_topic = 102_401;
            }),
            ("pullInterval 65536 ms", |c| {
                c.pull_interval = Duration::from_millis(65_536)
            }),
            ("consumeMessageBatchMaxSize 0", |c| {
                c.consume_message_batch_max_size = 0
            }),
            ("consumeMessageBatchMaxSize 1025", |c| {
                c.consume_message_batch_max_size = 1025
            }),
            ("pullBatchSize 0", |c| c.pull_batch_size = 0),
            ("pullBatchSize 1025", |c| c.pull_batch_size = 1025),
        ];
        for (rule, tweak) in refused {
            let mut config = PushConsumerConfig::new("g");
            tweak(&mut config);
            assert!(
                matches!(config.check(), Err(ClientError::IllegalArgument(_))),
                "{rule} is accepted"
            );
        }
        let accepted: &[(&str, Tweak)] = &[
            ("group of 255 bytes", |c| c.consumer_group = "g".repeat(255)),
            ("group with %|-_", |c| c.consumer_group = "%a|b-c_d".into()),
            ("threads 1..1", |c| {
                c.consume_thread_min = 1;
                c.consume_thread_max = 1;
            }),
            ("threads 1000..1000", |c| {
                c.consume_thread_min = 1000;
                c.consume_thread_max = 1000;
            }),
            ("maxSpan 65535", |c| {
                c.consume_concurrently_max_span = 65_535
            }),
            ("pullThresholdForTopic 6553500", |c| {
                c.pull_threshold_for_topic = 6_553_500
            }),
            ("pullThresholdSizeForQueue 1", |c| {
                c.pull_threshold_size_for_queue = 1
            }),
            ("pullThresholdSizeForTopic 102400", |c| {
                c.pull_threshold_size_for_topic = 102_400;
            }),
            ("pullInterval 65535 ms", |c| {
                c.pull_interval = Duration::from_millis(65_535)
            }),
            ("batch sizes 1024", |c| {
                c.consume_message_batch_max_size = 1024;
                c.pull_batch_size = 1024;
            }),
            ("consume timestamp 0", |c| c.consume_timestamp = Some(0)),
        ];
        for (case, tweak) in accepted {
            let mut config = PushConsumerConfig::new("g");
            tweak(&mut config);
            assert!(
                config.check().is_ok(),
                "{case} is refused: {:?}",
                config.check()
            );
        }
        let config = PushConsumerConfig::new("g");
        assert!(
            matches!(config.check_with(false), Err(ClientError::IllegalArgument(ref m)) if m.contains("messageListener")),
            "a missing listener is refused"
        );
    }

    #[test]
    fn timing_knob_defaults_are_javas() {
        let config = PushConsumerConfig::new("g");
        assert_eq!(config.offset_illegal_fix_delay, Duration::from_secs(10));
        // The test environment sets none of the knobs' variables.
        assert_eq!(config.lock_max_live(), Duration::from_secs(30));
        assert_eq!(config.lock_interval(), Duration::from_secs(20));
        assert_eq!(config.pull_max_idle(), Duration::from_secs(120));
        assert_eq!(config.unlock_delay(), Duration::from_secs(20));
        assert_eq!(
            config.max_time_consume_continuously(),
            Duration::from_secs(60)
        );
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
