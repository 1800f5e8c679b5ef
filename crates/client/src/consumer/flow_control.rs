//! Flow control of pulls: the admission check a consumer runs before each pull of a queue.
//!
//! A consumer caches what it pulled until the application has consumed it. To keep a slow
//! application from growing that cache without bound, a pull is not sent while the cache is over
//! a threshold; the queue's pull is retried [`PULL_TIME_DELAY_WHEN_FLOW_CONTROL`] (50 ms) later
//! instead, so a slow consumer slows its pulls and nothing is dropped. The rules, checked in this
//! order, each switched on by its consumer kind:
//!
//! - the whole consumer caches more than its limit of messages (the lite pull consumer's
//!   `pull_threshold_for_all`);
//! - the queue caches more messages than `pull_threshold_for_queue`;
//! - the queue caches more body bytes than `pull_threshold_size_for_queue` (the push consumer
//!   counts that threshold in whole MiB, the lite pull consumer in bytes);
//! - the queue's cached offsets span more than `consume_concurrently_max_span` (push consumer with
//!   concurrent consumption only: one stuck message holds back the committed offset, so the span
//!   bounds how much is redelivered after a crash).
//!
//! Every refusal is counted per rule. The push consumer logs a warning on the first refusal of a
//! rule and then once per [`FLOW_CONTROL_WARN_EVERY`] (1000) refusals of it, as the Java client
//! does; the lite pull consumer waits silently.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::consumer::MessageQueue;
use crate::consumer::process_queue::ProcessQueue;

/// Delay of a pull that flow control refused.
pub const PULL_TIME_DELAY_WHEN_FLOW_CONTROL: Duration = Duration::from_millis(50);
/// Flow control logs one warning per this many refusals.
pub const FLOW_CONTROL_WARN_EVERY: u64 = 1000;
/// One MiB, the unit of the push consumer's size thresholds.
pub(crate) const MIB: i64 = 1024 * 1024;

/// How often pulls were refused by each flow-control rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowControlTimes {
    /// Cached message count above `pull_threshold_for_queue`.
    pub cached_count: u64,
    /// Cached body size above `pull_threshold_size_for_queue`.
    pub cached_size: u64,
    /// Offset span above `consume_concurrently_max_span` (concurrent only).
    pub max_span: u64,
}

/// The thresholds of one admission check. A rule given as `None` is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FlowControlLimits {
    /// Most messages the whole consumer may cache.
    pub(crate) count_for_consumer: Option<i64>,
    /// Most messages one queue may cache.
    pub(crate) count_for_queue: i64,
    /// Most body bytes one queue may cache, in units of `size_unit` bytes. The cached size is
    /// divided by the unit (rounding down) before the comparison, so with a unit of one MiB a
    /// queue is refused only once it caches a whole MiB more than the threshold.
    pub(crate) size_for_queue: i64,
    /// Bytes per unit of `size_for_queue`: [`MIB`] or 1.
    pub(crate) size_unit: i64,
    /// Most offsets between the lowest and the highest cached message of one queue.
    pub(crate) max_span: Option<i64>,
}

/// What a queue (and its consumer) caches, as flow control sees it. Each number is read only
/// when its rule is checked.
pub(crate) trait CachedMessages {
    /// Messages the whole consumer caches; read only when `count_for_consumer` is set.
    fn consumer_count(&self) -> i64 {
        0
    }
    /// Messages the queue caches.
    fn count(&self) -> i64;
    /// Body bytes the queue caches.
    fn size(&self) -> i64;
    /// Highest minus lowest cached offset of the queue; read only when `max_span` is set.
    fn span(&self) -> i64 {
        0
    }
    /// Lowest and highest cached offset of the queue, for the warning.
    fn offset_range(&self) -> Option<(i64, i64)> {
        None
    }
}

impl CachedMessages for ProcessQueue {
    fn count(&self) -> i64 {
        self.msg_count()
    }

    fn size(&self) -> i64 {
        self.msg_size()
    }

    fn span(&self) -> i64 {
        self.max_span()
    }

    fn offset_range(&self) -> Option<(i64, i64)> {
        ProcessQueue::offset_range(self)
    }
}

/// Cache numbers read beforehand (the lite pull consumer reads them under its own locks). Sizes
/// and counts of memory saturate at `i64::MAX`, which no cache reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CachedCounts {
    pub(crate) consumer_count: i64,
    pub(crate) count: i64,
    pub(crate) size: i64,
}

impl CachedCounts {
    /// Counts of `usize` quantities (messages, bytes).
    pub(crate) fn of(consumer_count: usize, count: usize, size: usize) -> Self {
        CachedCounts {
            consumer_count: saturating_i64(consumer_count),
            count: saturating_i64(count),
            size: saturating_i64(size),
        }
    }
}

impl CachedMessages for CachedCounts {
    fn consumer_count(&self) -> i64 {
        self.consumer_count
    }

    fn count(&self) -> i64 {
        self.count
    }

    fn size(&self) -> i64 {
        self.size
    }
}

/// `n` as i64, saturating (thresholds given as `usize` may be `usize::MAX` to switch a rule off,
/// which stays above every cache).
pub(crate) fn saturating_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The rule that refused a pull.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FlowControlRule {
    ConsumerCount,
    QueueCount,
    QueueSize,
    MaxSpan,
}

impl FlowControlRule {
    /// The reason the warning gives.
    fn reason(self) -> &'static str {
        match self {
            FlowControlRule::ConsumerCount => {
                "the consumer's cached message count exceeds the threshold"
            }
            FlowControlRule::QueueCount => "the cached message count exceeds the threshold",
            FlowControlRule::QueueSize => "the cached message size exceeds the threshold",
            FlowControlRule::MaxSpan => "the queue's messages span too long",
        }
    }
}

/// The admission check of one consumer, with its refusal counters.
#[derive(Debug)]
pub(crate) struct FlowControl {
    consumer_count: AtomicU64,
    cached_count: AtomicU64,
    cached_size: AtomicU64,
    max_span: AtomicU64,
    /// Whether refusals are logged (the first of each rule and every
    /// [`FLOW_CONTROL_WARN_EVERY`]-th after it).
    warn: bool,
}

impl FlowControl {
    /// A check that logs its refusals (the push consumer's).
    pub(crate) fn warning() -> Self {
        Self::new(true)
    }

    /// A check that refuses without logging (the lite pull consumer's).
    pub(crate) fn silent() -> Self {
        Self::new(false)
    }

    fn new(warn: bool) -> Self {
        FlowControl {
            consumer_count: AtomicU64::new(0),
            cached_count: AtomicU64::new(0),
            cached_size: AtomicU64::new(0),
            max_span: AtomicU64::new(0),
            warn,
        }
    }

    /// The first rule of `limits` that `cache` breaks, if any; nothing is counted.
    pub(crate) fn broken_rule(
        limits: &FlowControlLimits,
        cache: &impl CachedMessages,
    ) -> Option<FlowControlRule> {
        if limits
            .count_for_consumer
            .is_some_and(|limit| cache.consumer_count() > limit)
        {
            return Some(FlowControlRule::ConsumerCount);
        }
        if cache.count() > limits.count_for_queue {
            return Some(FlowControlRule::QueueCount);
        }
        if cache.size() / limits.size_unit.max(1) > limits.size_for_queue {
            return Some(FlowControlRule::QueueSize);
        }
        if limits.max_span.is_some_and(|limit| cache.span() > limit) {
            return Some(FlowControlRule::MaxSpan);
        }
        None
    }

    /// Whether a pull of `mq` may be sent now. A refusal is counted under its rule and, for a
    /// warning check, logged on the rule's first refusal and every [`FLOW_CONTROL_WARN_EVERY`]
    /// refusals after; the caller retries the pull after [`PULL_TIME_DELAY_WHEN_FLOW_CONTROL`].
    pub(crate) fn admit(
        &self,
        mq: &MessageQueue,
        limits: &FlowControlLimits,
        cache: &impl CachedMessages,
    ) -> bool {
        let Some(rule) = Self::broken_rule(limits, cache) else {
            return true;
        };
        let times = self.counter(rule).fetch_add(1, Ordering::Relaxed);
        if self.warn && times.is_multiple_of(FLOW_CONTROL_WARN_EVERY) {
            let (min, max) = cache.offset_range().unwrap_or((0, 0));
            tracing::warn!(
                mq = %mq, min_offset = min, max_offset = max,
                count = cache.count(), size_mib = cache.size() / MIB,
                flow_control_times = times + 1,
                "{}, so do flow control", rule.reason()
            );
        }
        false
    }

    fn counter(&self, rule: FlowControlRule) -> &AtomicU64 {
        match rule {
            FlowControlRule::ConsumerCount => &self.consumer_count,
            FlowControlRule::QueueCount => &self.cached_count,
            FlowControlRule::QueueSize => &self.cached_size,
            FlowControlRule::MaxSpan => &self.max_span,
        }
    }

    /// How often each queue rule refused a pull so far.
    pub(crate) fn times(&self) -> FlowControlTimes {
        FlowControlTimes {
            cached_count: self.cached_count.load(Ordering::Relaxed),
            cached_size: self.cached_size.load(Ordering::Relaxed),
            max_span: self.max_span.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fixed cache numbers.
    struct Load {
        all: i64,
        count: i64,
        size: i64,
        span: i64,
    }

    impl CachedMessages for Load {
        fn consumer_count(&self) -> i64 {
            self.all
        }
        fn count(&self) -> i64 {
            self.count
        }
        fn size(&self) -> i64 {
            self.size
        }
        fn span(&self) -> i64 {
            self.span
        }
    }

    const PUSH: FlowControlLimits = FlowControlLimits {
        count_for_consumer: None,
        count_for_queue: 1000,
        size_for_queue: 100,
        size_unit: MIB,
        max_span: Some(2000),
    };

    const LITE: FlowControlLimits = FlowControlLimits {
        count_for_consumer: Some(10_000),
        count_for_queue: 1000,
        size_for_queue: 100 * MIB,
        size_unit: 1,
        max_span: None,
    };

    fn load(all: i64, count: i64, size: i64, span: i64) -> Load {
        Load {
            all,
            count,
            size,
            span,
        }
    }

    #[test]
    fn each_rule_refuses_only_above_its_threshold() {
        let rule = FlowControl::broken_rule;
        assert_eq!(rule(&PUSH, &load(0, 1000, 100 * MIB, 2000)), None);
        assert_eq!(
            rule(&PUSH, &load(0, 1001, 0, 0)),
            Some(FlowControlRule::QueueCount)
        );
        // The push threshold compares whole MiB: 100 MiB and a bit more is not yet over 100.
        assert_eq!(rule(&PUSH, &load(0, 0, 101 * MIB - 1, 0)), None);
        assert_eq!(
            rule(&PUSH, &load(0, 0, 101 * MIB, 0)),
            Some(FlowControlRule::QueueSize)
        );
        assert_eq!(
            rule(&PUSH, &load(0, 0, 0, 2001)),
            Some(FlowControlRule::MaxSpan)
        );
        // The push consumer has no consumer-wide limit, the lite one no span limit.
        assert_eq!(rule(&PUSH, &load(i64::MAX, 0, 0, 0)), None);
        assert_eq!(rule(&LITE, &load(10_000, 0, 0, i64::MAX)), None);
        assert_eq!(
            rule(&LITE, &load(10_001, 0, 0, 0)),
            Some(FlowControlRule::ConsumerCount)
        );
        // The lite threshold compares bytes.
        assert_eq!(
            rule(&LITE, &load(0, 0, 100 * MIB + 1, 0)),
            Some(FlowControlRule::QueueSize)
        );
        // Rules are checked in order: count before size before span.
        assert_eq!(
            rule(&PUSH, &load(0, 1001, 200 * MIB, 3000)),
            Some(FlowControlRule::QueueCount)
        );
    }

    #[test]
    fn refusals_are_counted_per_rule() {
        let mq = MessageQueue::new("T", "b", 0);
        let check = FlowControl::warning();
        assert!(check.admit(&mq, &PUSH, &load(0, 1, 1, 1)));
        assert!(!check.admit(&mq, &PUSH, &load(0, 1001, 0, 0)));
        assert!(!check.admit(&mq, &PUSH, &load(0, 1001, 0, 0)));
        assert!(!check.admit(&mq, &PUSH, &load(0, 0, 0, 2001)));
        assert_eq!(
            check.times(),
            FlowControlTimes {
                cached_count: 2,
                cached_size: 0,
                max_span: 1,
            }
        );
        let silent = FlowControl::silent();
        assert!(!silent.admit(&mq, &LITE, &load(10_001, 0, 0, 0)));
        assert!(!silent.admit(&mq, &LITE, &load(0, 0, 100 * MIB + 1, 0)));
        assert_eq!(silent.times().cached_size, 1);
    }
}
