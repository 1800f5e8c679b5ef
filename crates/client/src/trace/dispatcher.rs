//! The asynchronous trace dispatcher (Java `AsyncTraceDispatcher`).
//!
//! Hooks [`append`](AsyncTraceDispatcher::append) events to a bounded queue and return at once:
//! a full queue drops the event and counts it, so tracing never slows a send or a listener. One
//! worker task takes up to [`TRACE_BATCH_NUM`] queued events at a time, encodes them, groups them
//! by traced topic and sends each group as trace messages of at most [`TRACE_MAX_MSG_SIZE`] bytes
//! (a message is closed once it reaches that size) through its own producer, in its own client
//! instance, to the trace topic. Each trace message's KEYS are the msgIds and keys of the messages
//! it traces, so a query by key on the trace topic finds every record of a message. Shutdown
//! sends what is still queued before stopping the producer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::data::{TraceContext, encode};
use super::{GROUP_NAME_PREFIX, RMQ_SYS_TRACE_TOPIC, TRACE_INSTANCE_NAME};
use crate::config::ClientConfig;
use crate::error::Result;
use crate::message::Message;
use crate::producer::{DefaultMQProducer, ProducerConfig};

/// Events waiting to be sent before new ones are dropped (Java's queue size).
pub const TRACE_QUEUE_CAPACITY: usize = 2048;
/// Most events sent together (the Java producer's default `traceMsgBatchNum`).
pub const TRACE_BATCH_NUM: usize = 10;
/// Size at which a trace message is closed (Java's `maxMsgSize`, also the trace producer's
/// largest message).
pub const TRACE_MAX_MSG_SIZE: usize = 128_000;
/// Deadline of one trace message's send.
pub const TRACE_SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// How long shutdown waits for queued events to be sent.
pub const TRACE_SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// Numbers the internal producers' groups, as Java does, so that several traced clients of one
/// group in one process get distinct trace producer groups.
static TRACE_PRODUCER_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Whose events a dispatcher sends (part of its producer's group name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceDispatcherType {
    /// A producer's Pub and EndTransaction events.
    Produce,
    /// A consumer's SubBefore and SubAfter events.
    Consume,
}

impl TraceDispatcherType {
    fn name(self) -> &'static str {
        match self {
            TraceDispatcherType::Produce => "PRODUCE",
            TraceDispatcherType::Consume => "CONSUME",
        }
    }
}

/// Queues trace events and sends them to the trace topic in the background.
pub struct AsyncTraceDispatcher {
    trace_topic: String,
    producer: DefaultMQProducer,
    sender: Mutex<Option<mpsc::Sender<TraceContext>>>,
    receiver: Mutex<Option<mpsc::Receiver<TraceContext>>>,
    worker: Mutex<Option<JoinHandle<()>>>,
    discarded: AtomicU64,
    counters: Arc<Counters>,
}

#[derive(Default)]
struct Counters {
    sent_messages: AtomicU64,
    failed_messages: AtomicU64,
}

impl std::fmt::Debug for AsyncTraceDispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncTraceDispatcher")
            .field("trace_topic", &self.trace_topic)
            .field("discarded", &self.discard_count())
            .finish_non_exhaustive()
    }
}

impl AsyncTraceDispatcher {
    /// A dispatcher (not started) for the client `group` of kind `kind`, sending to
    /// `trace_topic` (`None` or blank: [`RMQ_SYS_TRACE_TOPIC`]) through the name servers and
    /// credentials of `client`.
    pub fn new(
        group: &str,
        kind: TraceDispatcherType,
        trace_topic: Option<&str>,
        client: &ClientConfig,
    ) -> Self {
        let trace_topic = trace_topic
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .unwrap_or(RMQ_SYS_TRACE_TOPIC)
            .to_owned();
        let n = TRACE_PRODUCER_COUNTER.fetch_add(1, Ordering::Relaxed) + 1;
        let mut config = ProducerConfig::new(
            format!("{GROUP_NAME_PREFIX}-{group}-{}-{n}", kind.name()),
            client.namesrv_addr.clone(),
        );
        config.client = client.clone();
        config.client.instance_name = format!("{TRACE_INSTANCE_NAME}_{}", client.namesrv_addr);
        // System topics keep their names in every namespace; the trace topic is one.
        config.client.namespace = None;
        config.send_msg_timeout = TRACE_SEND_TIMEOUT;
        config.max_message_size = TRACE_MAX_MSG_SIZE;
        config.enable_msg_trace = false;
        let (tx, rx) = mpsc::channel(TRACE_QUEUE_CAPACITY);
        AsyncTraceDispatcher {
            trace_topic,
            producer: DefaultMQProducer::new(config),
            sender: Mutex::new(Some(tx)),
            receiver: Mutex::new(Some(rx)),
            worker: Mutex::new(None),
            discarded: AtomicU64::new(0),
            counters: Arc::new(Counters::default()),
        }
    }

    /// The topic trace messages go to.
    pub fn trace_topic(&self) -> &str {
        &self.trace_topic
    }

    /// The internal producer that sends trace messages.
    pub fn trace_producer(&self) -> &DefaultMQProducer {
        &self.producer
    }

    /// Starts the internal producer and the worker. Events appended before are kept and sent.
    pub async fn start(&self) -> Result<()> {
        let Some(rx) = self.receiver.lock().take() else {
            return Ok(());
        };
        // Boxed: a producer's start starts its dispatcher, whose start starts a producer.
        Box::pin(self.producer.start()).await?;
        let worker = Worker {
            producer: self.producer.clone(),
            trace_topic: self.trace_topic.clone(),
            counters: Arc::clone(&self.counters),
        };
        *self.worker.lock() = Some(tokio::spawn(worker.run(rx)));
        Ok(())
    }

    /// Queues `ctx` without waiting; `false` (and counted as discarded) when the queue is full or
    /// the dispatcher is shut down.
    pub fn append(&self, ctx: TraceContext) -> bool {
        let sender = self.sender.lock().clone();
        let queued = sender.is_some_and(|tx| tx.try_send(ctx).is_ok());
        if !queued {
            let n = self.discarded.fetch_add(1, Ordering::Relaxed) + 1;
            tracing::debug!(discarded = n, "trace queue full; trace event dropped");
        }
        queued
    }

    /// Events dropped because the queue was full.
    pub fn discard_count(&self) -> u64 {
        self.discarded.load(Ordering::Relaxed)
    }

    /// Trace messages sent (stored or not) so far.
    pub fn sent_messages(&self) -> u64 {
        self.counters.sent_messages.load(Ordering::Relaxed)
    }

    /// Trace messages whose send failed so far.
    pub fn failed_messages(&self) -> u64 {
        self.counters.failed_messages.load(Ordering::Relaxed)
    }

    /// Sends what is queued (waiting at most [`TRACE_SHUTDOWN_WAIT`]), then stops the worker and
    /// the internal producer. Later appends are dropped.
    pub async fn shutdown(&self) {
        self.sender.lock().take();
        let worker = self.worker.lock().take();
        if let Some(mut worker) = worker
            && tokio::time::timeout(TRACE_SHUTDOWN_WAIT, &mut worker)
                .await
                .is_err()
        {
            tracing::warn!(topic = %self.trace_topic, "trace events still unsent at shutdown; dropped");
            worker.abort();
        }
        Box::pin(self.producer.shutdown()).await;
    }
}

struct Worker {
    producer: DefaultMQProducer,
    trace_topic: String,
    counters: Arc<Counters>,
}

impl Worker {
    /// Sends batches until the queue is closed and empty.
    async fn run(self, mut rx: mpsc::Receiver<TraceContext>) {
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while batch.len() < TRACE_BATCH_NUM {
                match rx.try_recv() {
                    Ok(ctx) => batch.push(ctx),
                    Err(_) => break,
                }
            }
            for msg in trace_messages(&batch, &self.trace_topic, TRACE_MAX_MSG_SIZE) {
                self.send(msg).await;
            }
        }
    }

    async fn send(&self, msg: Message) {
        match self.producer.send(msg).await {
            Ok(_) => {
                self.counters.sent_messages.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.counters
                    .failed_messages
                    .fetch_add(1, Ordering::Relaxed);
                tracing::warn!(topic = %self.trace_topic, error = %e, "sending trace data failed");
            }
        }
    }
}

/// The trace messages of `batch`: events grouped by the topic they trace (in first-seen order),
/// each group's records concatenated into messages closed once they reach `max_size` bytes, each
/// message keyed by the msgIds and keys of its records. Events without a bean are skipped.
pub fn trace_messages(batch: &[TraceContext], trace_topic: &str, max_size: usize) -> Vec<Message> {
    let mut groups: Vec<(&str, Vec<&TraceContext>)> = Vec::new();
    for ctx in batch {
        let Some(bean) = ctx.beans.first() else {
            continue;
        };
        match groups.iter_mut().find(|(topic, _)| *topic == bean.topic) {
            Some((_, members)) => members.push(ctx),
            None => groups.push((bean.topic.as_str(), vec![ctx])),
        }
    }
    let mut out = Vec::new();
    for (_, members) in groups {
        let mut data = String::new();
        let mut keys: Vec<String> = Vec::new();
        for ctx in members {
            let encoded = encode(ctx);
            data.push_str(&encoded.data);
            for key in encoded.keys {
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
            if data.len() >= max_size {
                out.push(trace_message(trace_topic, std::mem::take(&mut data), &keys));
                keys.clear();
            }
        }
        if !data.is_empty() {
            out.push(trace_message(trace_topic, data, &keys));
        }
    }
    out
}

fn trace_message(trace_topic: &str, data: String, keys: &[String]) -> Message {
    let mut msg = Message::new(trace_topic, data.into_bytes());
    msg.set_keys(keys);
    msg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::data::{TraceBean, TraceType, decode};

    fn pub_event(topic: &str, msg_id: &str, keys: Option<&str>) -> TraceContext {
        let mut ctx = TraceContext::new(TraceType::Pub, 1);
        ctx.region_id = "DefaultRegion".into();
        ctx.beans.push(TraceBean {
            topic: topic.into(),
            msg_id: msg_id.into(),
            keys: keys.map(str::to_owned),
            ..TraceBean::default()
        });
        ctx
    }

    #[test]
    fn a_full_queue_drops_and_counts_without_blocking() {
        let dispatcher = AsyncTraceDispatcher::new(
            "g",
            TraceDispatcherType::Produce,
            None,
            &ClientConfig::new("127.0.0.1:9876"),
        );
        assert_eq!(dispatcher.trace_topic(), RMQ_SYS_TRACE_TOPIC);
        for i in 0..TRACE_QUEUE_CAPACITY {
            assert!(dispatcher.append(pub_event("t", &i.to_string(), None)));
        }
        assert!(!dispatcher.append(pub_event("t", "over", None)));
        assert!(!dispatcher.append(pub_event("t", "over2", None)));
        assert_eq!(dispatcher.discard_count(), 2);
    }

    #[test]
    fn the_internal_producer_is_named_like_javas_and_untraced() {
        let dispatcher = AsyncTraceDispatcher::new(
            "cg",
            TraceDispatcherType::Consume,
            Some("  "),
            &ClientConfig::new("127.0.0.1:9876"),
        );
        assert_eq!(dispatcher.trace_topic(), RMQ_SYS_TRACE_TOPIC);
        let config = dispatcher.trace_producer().config();
        assert!(
            config
                .producer_group
                .starts_with("_INNER_TRACE_PRODUCER-cg-CONSUME-")
        );
        assert_eq!(
            config.client.instance_name,
            "PID_CLIENT_INNER_TRACE_PRODUCER_127.0.0.1:9876"
        );
        assert!(!config.enable_msg_trace);
        assert_eq!(config.max_message_size, TRACE_MAX_MSG_SIZE);
    }

    #[test]
    fn events_are_grouped_by_topic_keyed_and_split_at_the_size_limit() {
        let batch = [
            pub_event("A", "id1", Some("k1 k2")),
            pub_event("B", "id2", None),
            pub_event("A", "id3", Some("k1")),
        ];
        let msgs = trace_messages(&batch, "T", TRACE_MAX_MSG_SIZE);
        assert_eq!(msgs.len(), 2);
        assert!(msgs.iter().all(|m| m.topic == "T"));
        assert_eq!(msgs[0].keys(), ["id1", "k1", "k2", "id3"]);
        assert_eq!(msgs[1].keys(), ["id2"]);
        let body = String::from_utf8(msgs[0].body.to_vec()).unwrap();
        let ids: Vec<String> = decode(&body)
            .unwrap()
            .into_iter()
            .map(|c| c.beans[0].msg_id.clone())
            .collect();
        assert_eq!(ids, ["id1", "id3"]);
        // A limit the first record already reaches closes a message after every record.
        let small = trace_messages(&batch, "T", 1);
        assert_eq!(small.len(), 3);
        assert_eq!(small[1].keys(), ["id3", "k1"]);
    }
}
