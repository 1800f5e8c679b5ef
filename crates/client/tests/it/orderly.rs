//! Orderly push consumption against a real broker: queues are locked on the broker, each queue's
//! messages are delivered in queue order — also while a second member joins and takes over some
//! queues — and a suspended batch is offered again, in order, after the suspension.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use comet_client::consumer::push::DefaultMQPushConsumer;
use comet_client::consumer::{
    ConsumeOrderlyContext, ConsumeOrderlyStatus, MessageExt, MessageListener,
    MessageListenerOrderly, MessageQueue,
};
use comet_testkit::client::*;
use futures::future::BoxFuture;
use parking_lot::Mutex;

const QUEUES: i32 = 4;
const PER_QUEUE: usize = 40;
/// Sequences of each queue sent before the second member joins; the rest follow once the queues
/// are split, so the queues it takes over change hands mid-stream however fast the box is.
const SENT_BEFORE_JOIN: usize = PER_QUEUE / 2;
/// Time the listener spends per message, so that the first member usually still has messages
/// cached when it gives queues up (its broker lock is then released only after a delay).
const SLOW_PACE: Duration = Duration::from_millis(20);

/// Every delivery, in delivery order, shared by all members.
#[derive(Default)]
struct Journal {
    /// (member, queue id, sequence number within the queue, reconsume times)
    entries: Mutex<Vec<(String, i32, usize, i32)>>,
    /// queue id → sequence numbers whose first delivery was refused once.
    refused: Mutex<HashMap<i32, Vec<usize>>>,
}

struct OrderlyRecorder {
    name: String,
    journal: Arc<Journal>,
    /// Refuse (suspend) the first delivery of messages whose sequence is a multiple of this.
    refuse_every: usize,
    /// Time spent per message, so that a member can join while queues are mid-stream.
    pace: Duration,
}

fn seq_of(msg: &MessageExt) -> usize {
    let body = String::from_utf8_lossy(&msg.body);
    body.rsplit('-')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(usize::MAX)
}

impl MessageListenerOrderly for OrderlyRecorder {
    fn consume_message<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        ctx: &'a mut ConsumeOrderlyContext,
    ) -> BoxFuture<'a, ConsumeOrderlyStatus> {
        Box::pin(async move {
            for msg in msgs {
                let seq = seq_of(msg);
                if self.refuse_every > 0
                    && seq.is_multiple_of(self.refuse_every)
                    && msg.reconsume_times == 0
                {
                    let mut refused = self.journal.refused.lock();
                    let list = refused.entry(msg.queue_id).or_default();
                    if !list.contains(&seq) {
                        list.push(seq);
                        ctx.suspend_current_queue_time_millis = Some(50);
                        self.journal.entries.lock().push((
                            self.name.clone(),
                            msg.queue_id,
                            seq,
                            msg.reconsume_times,
                        ));
                        return ConsumeOrderlyStatus::SuspendCurrentQueueAMoment;
                    }
                }
                self.journal.entries.lock().push((
                    self.name.clone(),
                    msg.queue_id,
                    seq,
                    msg.reconsume_times,
                ));
                tokio::time::sleep(self.pace).await;
            }
            ConsumeOrderlyStatus::Success
        })
    }
}

async fn orderly_member(
    cluster: &Cluster,
    group: &str,
    topic: &str,
    name: &str,
    journal: &Arc<Journal>,
    refuse_every: usize,
    pace: Duration,
) -> DefaultMQPushConsumer {
    let mut config = consumer_config(cluster, group, &unique_instance(name));
    config.consume_message_batch_max_size = 3;
    let listener = MessageListener::Orderly(Arc::new(OrderlyRecorder {
        name: name.to_owned(),
        journal: Arc::clone(journal),
        refuse_every,
        pace,
    }));
    start_consumer(config, topic, listener).await
}

/// Checks the orderly guarantee: whenever sequence `s` of a queue is delivered, every sequence
/// before it has already been delivered (successfully) at least once; redeliveries of already
/// delivered messages after a queue changes hands are allowed.
fn assert_in_queue_order(entries: &[(String, i32, usize, i32)], refused_first: bool) {
    let mut delivered: HashMap<i32, Vec<bool>> = HashMap::new();
    let mut refused_once: HashMap<(i32, usize), bool> = HashMap::new();
    for (member, queue, seq, _) in entries {
        let seen = delivered
            .entry(*queue)
            .or_insert_with(|| vec![false; PER_QUEUE]);
        assert!(*seq < PER_QUEUE, "unexpected body");
        let gap = seen.iter().take(*seq).position(|d| !d);
        assert!(
            gap.is_none(),
            "queue {queue}: {member} got #{seq} before #{} was ever delivered",
            gap.unwrap_or_default()
        );
        if refused_first && seq.is_multiple_of(10) && !refused_once.contains_key(&(*queue, *seq)) {
            // The first delivery of this one was refused: it does not count as delivered.
            refused_once.insert((*queue, *seq), true);
            continue;
        }
        if let Some(slot) = seen.get_mut(*seq) {
            *slot = true;
        }
    }
}

/// Sends sequence numbers `seqs` of every queue, in sequence order.
async fn send_sequences(cluster: &Cluster, topic: &str, seqs: Range<usize>) {
    let producer = producer(cluster).await;
    let broker = cluster.broker_name();
    for seq in seqs {
        for q in 0..QUEUES {
            let msg =
                comet_client::message::Message::new(topic, format!("q{q}-{seq}").into_bytes());
            producer
                .send_to_queue(msg, &MessageQueue::new(topic, &broker, q))
                .await
                .expect("send");
        }
    }
    producer.shutdown().await;
}

async fn wait_all_delivered(journal: &Journal) {
    assert!(
        wait_until(|| {
            let entries = journal.entries.lock();
            let mut done: HashMap<i32, Vec<bool>> = HashMap::new();
            for (_, q, s, _) in entries.iter() {
                if let Some(slot) = done
                    .entry(*q)
                    .or_insert_with(|| vec![false; PER_QUEUE])
                    .get_mut(*s)
                {
                    *slot = true;
                }
            }
            let complete =
                done.len() == QUEUES as usize && done.values().all(|v| v.iter().all(|d| *d));
            async move { complete }
        })
        .await,
        "every message delivered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_queue_order_is_kept_while_a_member_joins() {
    let cluster = Cluster::start().await;
    let topic = "OrderlyJoin";
    let group = "orderly_join_group";
    cluster.create_topic(topic, QUEUES).await;
    let journal = Arc::new(Journal::default());

    let first = orderly_member(&cluster, group, topic, "o1", &journal, 0, SLOW_PACE).await;
    assert!(
        wait_until(|| {
            let locked = first
                .owned_queues()
                .iter()
                .filter(|q| q.topic == topic)
                .filter_map(|q| first.process_queue(q))
                .filter(|pq| pq.is_locked())
                .count();
            async move { locked == QUEUES as usize }
        })
        .await,
        "the first member locks every queue on the broker"
    );
    send_sequences(&cluster, topic, 0..SENT_BEFORE_JOIN).await;
    // Join once the first member has delivered from every queue (usually still consuming).
    assert!(
        wait_until(|| {
            let queues: HashSet<i32> = journal
                .entries
                .lock()
                .iter()
                .map(|(_, queue, _, _)| *queue)
                .collect();
            async move { queues.len() == QUEUES as usize }
        })
        .await,
        "the first member delivers from every queue"
    );
    let second = orderly_member(&cluster, group, topic, "o2", &journal, 0, SLOW_PACE).await;
    assert!(
        wait_until(|| {
            let a = first
                .owned_queues()
                .iter()
                .filter(|q| q.topic == topic)
                .count();
            let b = second
                .owned_queues()
                .iter()
                .filter(|q| q.topic == topic)
                .count();
            async move { a == 2 && b == 2 }
        })
        .await,
        "the queues were split between the members"
    );
    // Only the new owner can deliver the rest of the queues it took over.
    send_sequences(&cluster, topic, SENT_BEFORE_JOIN..PER_QUEUE).await;
    wait_all_delivered(&journal).await;
    let entries = journal.entries.lock().clone();
    assert_in_queue_order(&entries, false);
    // The queues the second member took over changed hands mid-stream (the old owner gave up its
    // broker lock once no batch of it was running, after a delay if messages were still cached;
    // the new owner continued from the committed offset).
    let handed_over = (0..QUEUES).any(|q| {
        let by = |m: &str| entries.iter().any(|(who, eq, _, _)| who == m && *eq == q);
        by("o1") && by("o2")
    });
    assert!(handed_over, "no queue changed hands: {entries:?}");
    first.shutdown().await;
    second.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_batch_is_offered_again_in_order() {
    let cluster = Cluster::start().await;
    let topic = "OrderlySuspend";
    let group = "orderly_suspend_group";
    cluster.create_topic(topic, QUEUES).await;
    let journal = Arc::new(Journal::default());
    let consumer = orderly_member(&cluster, group, topic, "s1", &journal, 10, Duration::ZERO).await;
    send_sequences(&cluster, topic, 0..PER_QUEUE).await;
    wait_all_delivered(&journal).await;
    let entries = journal.entries.lock().clone();
    assert_in_queue_order(&entries, true);
    // Each refused message came back with its reconsume count raised.
    for q in 0..QUEUES {
        for seq in [0, 10, 20, 30] {
            let tries: Vec<i32> = entries
                .iter()
                .filter(|(_, eq, es, _)| *eq == q && *es == seq)
                .map(|(_, _, _, rt)| *rt)
                .collect();
            assert_eq!(tries, vec![0, 1], "queue {q} #{seq}");
        }
    }
    // The committed offsets reach the end of every queue.
    let store = consumer.offset_store().expect("started");
    assert!(
        wait_until(|| {
            let t = store.clone_offset_table(topic);
            async move { t.len() == QUEUES as usize && t.values().all(|o| *o == PER_QUEUE as i64) }
        })
        .await
    );
    consumer.shutdown().await;
    // Shutdown persists the offsets with oneway updates: the broker applies them shortly after.
    for q in 0..QUEUES {
        cluster
            .wait_committed(group, topic, q, PER_QUEUE as i64)
            .await;
    }
    cluster.shutdown().await;
}

/// Suspends every delivery of "poison"; records every delivery.
struct Poisoned {
    seen: Arc<Mutex<Vec<(String, i32)>>>,
}

impl MessageListenerOrderly for Poisoned {
    fn consume_message<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        _ctx: &'a mut ConsumeOrderlyContext,
    ) -> BoxFuture<'a, ConsumeOrderlyStatus> {
        Box::pin(async move {
            let mut status = ConsumeOrderlyStatus::Success;
            for msg in msgs {
                let body = String::from_utf8_lossy(&msg.body).into_owned();
                if body == "poison" {
                    status = ConsumeOrderlyStatus::SuspendCurrentQueueAMoment;
                }
                self.seen.lock().push((body, msg.reconsume_times));
            }
            status
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_reconsume_times_an_orderly_message_goes_to_the_dlq() {
    let cluster = Cluster::start().await;
    let topic = "OrderlyPoison";
    let group = "orderly_poison_group";
    cluster.create_topic(topic, 1).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut config = consumer_config(&cluster, group, &unique_instance("poison"));
    config.max_reconsume_times = 1;
    config.suspend_current_queue_time_millis = 10;
    let listener = MessageListener::Orderly(Arc::new(Poisoned {
        seen: Arc::clone(&seen),
    }));
    let consumer = start_consumer(config, topic, listener).await;

    let producer = producer(&cluster).await;
    let mq = MessageQueue::new(topic, cluster.broker_name(), 0);
    for body in ["first", "poison", "after"] {
        producer
            .send_to_queue(
                comet_client::message::Message::new(topic, body.as_bytes().to_vec()),
                &mq,
            )
            .await
            .expect("send");
    }
    assert!(
        wait_until(|| {
            let done = seen.lock().iter().any(|(b, _)| b == "after");
            async move { done }
        })
        .await,
        "the queue moves on past the poison message"
    );
    let deliveries = seen.lock().clone();
    assert_eq!(
        deliveries,
        vec![
            ("first".to_owned(), 0),
            ("poison".to_owned(), 0),
            ("poison".to_owned(), 1),
            ("after".to_owned(), 0),
        ]
    );
    // The message was re-published to the group's retry path with its reconsume count and budget. A
    // broker implementing the rule "a send to the retry topic of a group that holds an orderly lock
    // goes to the DLQ directly" (Java 5.x) stores it in %DLQ%<group>; one applying only
    // "reconsumeTimes > max" parks it in SCHEDULE_TOPIC_XXXX for the retry topic. Either way it
    // left the ordered queue exactly once.
    let dlq = format!("%DLQ%{group}");
    assert!(
        wait_until(|| {
            let scheduled: i64 = (0..18)
                .map(|q| cluster.max_offset("SCHEDULE_TOPIC_XXXX", q).max(0))
                .sum();
            let handed_off = cluster.max_offset(&dlq, 0).max(0) + scheduled;
            async move { handed_off == 1 }
        })
        .await,
        "the poison message was handed off once"
    );
    consumer.shutdown().await;
    cluster.wait_committed(group, topic, 0, 3).await;
    producer.shutdown().await;
    cluster.shutdown().await;
}
