//! The rows of the interop matrix for "Comet's client against Apache RocketMQ".
//!
//! Each scenario drives the public API a RocketMQ user would use and checks the outcome against
//! what the Apache broker stored or delivered, not against what the client believes it sent:
//! sends are read back with a pull consumer, push deliveries are counted per body, admin answers
//! are compared with offsets the broker reports. Names are suffixed (see [`Ctx`]), so scenarios
//! may run concurrently against one broker.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use comet_client::admin::MessageIdKind;
use comet_client::consumer::lite::{DefaultLitePullConsumer, LitePullConsumerConfig};
use comet_client::consumer::pull::{DefaultMQPullConsumer, PullConsumerConfig};
use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{
    ConsumeConcurrentlyStatus, ConsumeFromWhere, ConsumeOrderlyStatus, MessageModel, orderly_fn,
};
use comet_client::producer::ProducerConfig;
use comet_client::producer::selector::SelectMessageQueueByHash;
use comet_client::{
    LocalTransactionState, Message, MessageExt, MessageQueue, PullStatus, SendResult, SendStatus,
    TransactionListener, TransactionProducer,
};
use comet_protocol::headers::QueryConsumerOffsetRequestHeader;
use comet_protocol::message::sysflag;
use tokio::sync::mpsc;

use crate::ensure;
use crate::support::{
    Ctx, DEADLINE, Delivery, Outcome, QUEUES, Step, body_counts, body_text, collect_until,
    now_millis, push_consumer, read_queue, reporting_listener, shutdown_all, wait_until,
    wait_until_for,
};

type ScenarioFuture = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// One row: its name (the `--scenario` value), how long it may take, and its body.
pub struct Scenario {
    pub name: &'static str,
    /// What the row checks, for the results table.
    pub title: &'static str,
    pub budget: Duration,
    pub run: fn(Ctx) -> ScenarioFuture,
}

/// Budget of a scenario without delays.
const QUICK: Duration = Duration::from_secs(60);
/// Budget of a scenario that waits for delayed or retried messages.
const SLOW: Duration = Duration::from_secs(120);

macro_rules! scenario {
    ($name:literal, $title:literal, $budget:expr, $f:path) => {
        Scenario {
            name: $name,
            title: $title,
            budget: $budget,
            run: |ctx| Box::pin($f(ctx)),
        }
    };
}

/// Every row, in the order of the results table.
pub const ALL: &[Scenario] = &[
    scenario!(
        "send_sync",
        "send sync (stored where the SendResult says, ids match)",
        QUICK,
        send_sync
    ),
    scenario!(
        "send_async",
        "send async (futures and callback)",
        QUICK,
        send_async
    ),
    scenario!("send_oneway", "send oneway", QUICK, send_oneway),
    scenario!(
        "send_batch",
        "send batch (consecutive offsets, per-message offset ids)",
        QUICK,
        send_batch
    ),
    scenario!(
        "properties_roundtrip",
        "tags, keys, user properties round-trip",
        QUICK,
        properties_roundtrip
    ),
    scenario!(
        "compressed_body",
        "16 KiB body compressed by the client, decompressed on read",
        QUICK,
        compressed_body
    ),
    scenario!(
        "push_clustering",
        "push concurrently, clustering, two consumers: each message exactly once",
        QUICK,
        push_clustering
    ),
    scenario!(
        "push_broadcasting",
        "push broadcasting: every consumer gets every message once",
        QUICK,
        push_broadcasting
    ),
    scenario!(
        "orderly_hash_selector",
        "orderly with SelectMessageQueueByHash: per-queue and per-order order",
        QUICK,
        orderly_hash_selector
    ),
    scenario!(
        "retry_then_dlq",
        "RECONSUME_LATER -> retry (times 0,1,2) -> %DLQ% after maxReconsumeTimes 2",
        SLOW,
        retry_then_dlq
    ),
    scenario!(
        "delay_level_2",
        "delay level 2 delivered >= 5 s after the send",
        SLOW,
        delay_level_2
    ),
    scenario!(
        "consume_from_first",
        "new group CONSUME_FROM_FIRST_OFFSET",
        QUICK,
        consume_from_first
    ),
    scenario!(
        "consume_from_last",
        "new group CONSUME_FROM_LAST_OFFSET",
        QUICK,
        consume_from_last
    ),
    scenario!(
        "consume_from_timestamp",
        "new group CONSUME_FROM_TIMESTAMP",
        QUICK,
        consume_from_timestamp
    ),
    scenario!(
        "lite_pull_seek",
        "lite pull consumer: assign, seek, seek_to_end, commit",
        QUICK,
        lite_pull_seek
    ),
    scenario!(
        "pull_offsets_survive_restart",
        "pull consumer: committed offsets survive a restart",
        QUICK,
        pull_offsets_survive_restart
    ),
    scenario!("tag_filter", "tag filter `TagA || TagB`", QUICK, tag_filter),
    scenario!(
        "admin_create_topic_route",
        "admin: create topic, topic route, topic list, topic stats",
        QUICK,
        admin_create_topic_route
    ),
    scenario!(
        "admin_consumer_lag",
        "admin: consumer progress/lag equals unconsumed count",
        QUICK,
        admin_consumer_lag
    ),
    scenario!(
        "admin_query_key_and_id",
        "admin: query message by key, by offset id and by unique id",
        QUICK,
        admin_query_key_and_id
    ),
    scenario!(
        "admin_reset_offset_by_time",
        "admin: reset offset by time redelivers to a running consumer",
        SLOW,
        admin_reset_offset_by_time
    ),
    scenario!(
        "transactions",
        "transactional send: commit delivered, rollback never, unknown resolved by the broker's check",
        SLOW,
        transactions
    ),
    scenario!(
        "message_trace",
        "message trace on: Pub, SubBefore, SubAfter stored; read by Comet's decoder and Apache's mqadmin",
        QUICK,
        crate::trace_row::message_trace
    ),
    scenario!(
        "builder_async_reset_by_timestamp",
        "builders and async listeners: two consumers of one group in one process; reset by timestamp mid-backlog",
        QUICK,
        crate::builder_row::builder_async_reset_by_timestamp
    ),
];

/// Messages of the plain send scenarios.
const SEND_COUNT: usize = 8;
/// Messages per consumer-group scenario.
const GROUP_COUNT: usize = 40;
/// Orders of the orderly scenario, and steps per order.
const ORDERS: i64 = 4;
const STEPS: usize = 10;
/// Reconsume limit of the retry scenario: deliveries = limit + 1, then the DLQ.
const MAX_RECONSUME: i32 = 2;
/// Level 2 is configured as 5 s by run.sh (`messageDelayLevel=1s 5s 1s ...`).
const DELAY_LEVEL: i32 = 2;
const DELAY_MILLIS: i64 = 5_000;
/// Route poll and rebalance period of the retry scenario's consumer.
const FAST_CLIENT_INTERVAL: Duration = Duration::from_secs(1);
/// Longest wait for a consumer to learn its group's retry topic route (route refresh is 30 s).
const RETRY_ROUTE_DEADLINE: Duration = Duration::from_secs(40);
/// Longest wait for a reset offset to reach a running push consumer.
const RESET_DEADLINE: Duration = Duration::from_secs(45);
/// Body length of the compression scenario (above the 4 KiB default threshold).
const BIG_BODY_LEN: usize = 16 * 1024;

// ---------------------------------------------------------------------------------------------
// Sends

fn expect_ok(result: &SendResult) -> Outcome {
    ensure!(
        result.send_status == SendStatus::SendOk,
        "send status {:?}, expected SendOk",
        result.send_status
    );
    ensure!(!result.msg_id.is_empty(), "send result without msgId");
    Ok(())
}

/// Reads `topic` back and checks that each `(body, result)` is stored exactly once at the queue
/// and offset the send result reported, under the reported ids.
async fn verify_stored(ctx: &Ctx, topic: &str, sent: &[(String, SendResult)]) -> Outcome {
    let stored = ctx.read_topic(topic, sent.len()).await?;
    ensure!(
        stored.len() == sent.len(),
        "{} messages stored, {} sent",
        stored.len(),
        sent.len()
    );
    for (body, result) in sent {
        let found: Vec<&MessageExt> = stored.iter().filter(|m| body_text(m) == *body).collect();
        ensure!(found.len() == 1, "body {body} stored {} times", found.len());
        let msg = found[0];
        ensure!(
            msg.queue_id == result.message_queue.queue_id
                && msg.queue_offset == result.queue_offset,
            "{body} stored at queue {} offset {}, send result said {} offset {}",
            msg.queue_id,
            msg.queue_offset,
            result.message_queue.queue_id,
            result.queue_offset
        );
        ensure!(
            msg.uniq_key() == Some(result.msg_id.as_str()),
            "{body}: UNIQ_KEY {:?} != send result msgId {}",
            msg.uniq_key(),
            result.msg_id
        );
        ensure!(
            msg.offset_msg_id() == result.offset_msg_id,
            "{body}: offset msgId {} != send result {}",
            msg.offset_msg_id(),
            result.offset_msg_id
        );
    }
    Ok(())
}

async fn send_sync(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("SendSync");
    ctx.create_topic(&topic, QUEUES).await?;
    let producer = ctx.producer("send_sync").await?;
    let mut sent = Vec::new();
    for i in 0..SEND_COUNT {
        let body = format!("sync-{i}");
        let result = producer
            .send(Message::new(topic.clone(), body.clone()))
            .await
            .step("sync send")?;
        expect_ok(&result)?;
        sent.push((body, result));
    }
    producer.shutdown().await;
    let queues: HashSet<i32> = sent.iter().map(|(_, r)| r.message_queue.queue_id).collect();
    ensure!(
        queues.len() == usize::try_from(QUEUES).unwrap_or(0),
        "round-robin used queues {queues:?} of {QUEUES}"
    );
    verify_stored(&ctx, &topic, &sent).await
}

async fn send_async(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("SendAsync");
    ctx.create_topic(&topic, QUEUES).await?;
    let producer = ctx.producer("send_async").await?;
    let pending: Vec<_> = (0..SEND_COUNT)
        .map(|i| {
            let body = format!("async-{i}");
            let fut = producer.send_async(Message::new(topic.clone(), body.clone()));
            (body, fut)
        })
        .collect();
    let mut sent = Vec::new();
    for (body, fut) in pending {
        let result = fut.await.step("async send")?;
        expect_ok(&result)?;
        sent.push((body, result));
    }
    // The callback form reports through its closure.
    let (tx, rx) = tokio::sync::oneshot::channel();
    producer.send_with_callback(
        Message::new(topic.clone(), "async-callback"),
        move |result| {
            let _ = tx.send(result);
        },
    );
    let result = tokio::time::timeout(DEADLINE, rx)
        .await
        .step("send callback")?
        .step("send callback dropped")?
        .step("callback send")?;
    expect_ok(&result)?;
    sent.push(("async-callback".to_owned(), result));
    producer.shutdown().await;
    verify_stored(&ctx, &topic, &sent).await
}

async fn send_oneway(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("SendOneway");
    ctx.create_topic(&topic, QUEUES).await?;
    let producer = ctx.producer("send_oneway").await?;
    let bodies: Vec<String> = (0..SEND_COUNT).map(|i| format!("oneway-{i}")).collect();
    for body in &bodies {
        producer
            .send_oneway(Message::new(topic.clone(), body.clone()))
            .await
            .step("oneway send")?;
    }
    producer.shutdown().await;
    let stored = ctx.read_topic(&topic, bodies.len()).await?;
    let mut got: Vec<String> = stored.iter().map(body_text).collect();
    got.sort();
    let mut want = bodies.clone();
    want.sort();
    ensure!(got == want, "stored bodies {got:?}, sent {want:?}");
    Ok(())
}

async fn send_batch(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("SendBatch");
    ctx.create_topic(&topic, QUEUES).await?;
    let producer = ctx.producer("send_batch").await?;
    let bodies: Vec<String> = (0..SEND_COUNT).map(|i| format!("batch-{i}")).collect();
    let batch = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| {
            Message::new(topic.clone(), b.clone())
                .with_tags("TagBatch")
                .with_keys([format!("batch-key-{i}")])
        })
        .collect();
    let result = producer.send_batch(batch).await.step("batch send")?;
    producer.shutdown().await;
    expect_ok(&result)?;
    let ids: Vec<&str> = result.msg_id.split(',').collect();
    let offset_ids: Vec<&str> = result.offset_msg_id.split(',').collect();
    ensure!(
        ids.len() == bodies.len() && offset_ids.len() == bodies.len(),
        "batch result has {} msgIds and {} offset msgIds for {} messages",
        ids.len(),
        offset_ids.len(),
        bodies.len()
    );
    let mut stored = ctx.read_topic(&topic, bodies.len()).await?;
    stored.sort_by_key(|m| m.queue_offset);
    ensure!(
        stored.len() == bodies.len(),
        "{} of {} batch messages stored",
        stored.len(),
        bodies.len()
    );
    for (i, msg) in stored.iter().enumerate() {
        let want_offset = result.queue_offset + i64::try_from(i).unwrap_or(i64::MAX);
        ensure!(
            msg.queue_id == result.message_queue.queue_id && msg.queue_offset == want_offset,
            "batch message {i} at queue {} offset {}, expected queue {} offset {want_offset}",
            msg.queue_id,
            msg.queue_offset,
            result.message_queue.queue_id
        );
        ensure!(
            body_text(msg) == bodies[i],
            "batch message {i} body {:?}",
            body_text(msg)
        );
        // Apache 5.3.3 appends the batch's own properties (with the batch-level UNIQ_KEY) after
        // each inner message's properties; like Java's decoder the client keeps the last
        // duplicate, so every message reads the batch's id, not its own.
        ensure!(
            msg.uniq_key().is_some() && msg.uniq_key() == stored[0].uniq_key(),
            "batch message {i}: UNIQ_KEY {:?}, message 0 has {:?}",
            msg.uniq_key(),
            stored[0].uniq_key()
        );
        ensure!(
            !ids.iter().any(|id| Some(*id) == msg.uniq_key()),
            "batch message {i}: UNIQ_KEY {:?} is a per-message id; Apache 5.3.3 appends the \
             batch-level UNIQ_KEY, which a Java decoder reads",
            msg.uniq_key()
        );
        ensure!(
            Some(msg.offset_msg_id().as_str()) == offset_ids.get(i).copied(),
            "batch message {i}: offset msgId {}, result {:?}",
            msg.offset_msg_id(),
            offset_ids.get(i)
        );
        ensure!(
            msg.tags() == Some("TagBatch") && msg.keys().eq([format!("batch-key-{i}").as_str()]),
            "batch message {i}: tags {:?} keys {:?}",
            msg.tags(),
            msg.keys().collect::<Vec<_>>()
        );
    }
    Ok(())
}

async fn properties_roundtrip(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("Props");
    ctx.create_topic(&topic, QUEUES).await?;
    let producer = ctx.producer("props").await?;
    // KEYS is one property with the keys separated by spaces, so a key holds no space.
    let keys = [format!("order-{}", ctx.suffix), "second-key".to_owned()];
    let mut msg = Message::new(topic.clone(), "with properties")
        .with_tags("TagProps")
        .with_keys(keys.clone());
    msg.put_user_property("color", "blue")
        .step("user property")?;
    msg.put_user_property("unicode", "grüße €")
        .step("user property")?;
    let result = producer.send(msg).await.step("send")?;
    producer.shutdown().await;
    expect_ok(&result)?;
    let stored = ctx.read_topic(&topic, 1).await?;
    ensure!(
        stored.len() == 1,
        "{} messages stored, 1 sent",
        stored.len()
    );
    let got = &stored[0];
    ensure!(
        got.tags() == Some("TagProps"),
        "tags {:?}, sent TagProps",
        got.tags()
    );
    let got_keys: Vec<&str> = got.keys().collect();
    ensure!(
        got_keys == [keys[0].as_str(), keys[1].as_str()],
        "keys {got_keys:?}, sent {keys:?}"
    );
    ensure!(
        got.properties.get("color") == Some("blue"),
        "user property color = {:?}",
        got.properties.get("color")
    );
    ensure!(
        got.properties.get("unicode") == Some("grüße €"),
        "user property unicode = {:?}",
        got.properties.get("unicode")
    );
    ensure!(
        got.uniq_key() == Some(result.msg_id.as_str()),
        "UNIQ_KEY {:?} != msgId {}",
        got.uniq_key(),
        result.msg_id
    );
    Ok(())
}

async fn compressed_body(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("Compressed");
    ctx.create_topic(&topic, QUEUES).await?;
    let producer = ctx.producer("compressed").await?;
    let mut body = String::with_capacity(BIG_BODY_LEN);
    let mut i = 0;
    while body.len() < BIG_BODY_LEN {
        body.push_str(&format!("comet interop compressible line {i}\n"));
        i += 1;
    }
    let result = producer
        .send(Message::new(topic.clone(), body.clone()))
        .await
        .step("send")?;
    producer.shutdown().await;
    expect_ok(&result)?;
    let stored = ctx.read_topic(&topic, 1).await?;
    ensure!(
        stored.len() == 1,
        "{} messages stored, 1 sent",
        stored.len()
    );
    let got = &stored[0];
    ensure!(
        got.body.as_ref() == body.as_bytes(),
        "decompressed body differs ({} bytes, sent {})",
        got.body.len(),
        body.len()
    );
    // The broker's record is smaller than the body only if the body travelled compressed.
    let stored_size = usize::try_from(got.store_size).unwrap_or(usize::MAX);
    ensure!(
        stored_size < body.len(),
        "stored record is {stored_size} bytes for a {} byte body: not compressed",
        body.len()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Push consumers

/// Waits until the consumers' queues of `topic` are what `ok` wants, as the outcome of
/// rebalances every member ran after all of them had started. The retry topic's queue (owned by
/// one member) is left out.
///
/// Looking at the owned sets alone is not enough. A member applies a rebalance queue by queue, and
/// the first rebalance of a member that started alone is computed over itself only: while it is
/// still adding queues (each waits for a start-offset query), the sets can look split — member 0
/// owning queues 0-1, member 1 owning 2-3 — although member 0 goes on to add queues 2 and 3, pulls
/// them from the group's start offset alongside member 1, and gives them up only at its next
/// rebalance. Messages sent in that gap reach both members. The official Java client (4.9.8 and
/// 5.3.3) does the same (its `updateProcessQueueTableInRebalance` adds the queues of an allocation
/// one by one), so this is the at-least-once delivery RocketMQ allows while a queue changes owners,
/// not a client defect. `do_rebalance` waits for a rebalance already running in the member and
/// then applies the membership the broker reports now: once it has returned on every member, no
/// rebalance from an older membership is left and the owned sets stay as they are until the
/// membership changes.
async fn wait_rebalanced(
    consumers: &[Arc<DefaultMQPushConsumer>],
    topic: &str,
    ok: impl Fn(&[HashSet<MessageQueue>]) -> bool,
) -> Outcome {
    let owned_of = || -> Vec<HashSet<MessageQueue>> {
        consumers
            .iter()
            .map(|c| {
                c.owned_queues()
                    .into_iter()
                    .filter(|q| q.topic == topic)
                    .collect()
            })
            .collect()
    };
    let settled = wait_until(|| async {
        for consumer in consumers {
            consumer.do_rebalance().await;
        }
        ok(&owned_of())
    })
    .await;
    let owned: Vec<usize> = owned_of().iter().map(HashSet::len).collect();
    ensure!(
        settled,
        "rebalance of {topic} did not settle: queues owned {owned:?}"
    );
    Ok(())
}

fn queue_count() -> usize {
    usize::try_from(QUEUES).unwrap_or(0)
}

fn from_first(group: String) -> PushConsumerConfig {
    let mut config = PushConsumerConfig::new(group);
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    config
}

async fn send_bodies(ctx: &Ctx, producer_name: &str, topic: &str, bodies: &[String]) -> Outcome {
    let producer = ctx.producer(producer_name).await?;
    for body in bodies {
        let result = producer
            .send(Message::new(topic.to_owned(), body.clone()))
            .await
            .step("send")?;
        expect_ok(&result)?;
    }
    producer.shutdown().await;
    Ok(())
}

/// [`send_bodies`], then reads the topic until every body is in its queues: acknowledged sends
/// reach the ConsumeQueues by asynchronous dispatch, and the callers work queue by queue.
async fn send_all_and_wait_stored(
    ctx: &Ctx,
    producer_name: &str,
    topic: &str,
    bodies: &[String],
) -> Outcome {
    send_bodies(ctx, producer_name, topic, bodies).await?;
    let stored_all = ctx.read_topic(topic, bodies.len()).await?;
    ensure!(
        stored_all.len() == bodies.len(),
        "{} of {} messages stored",
        stored_all.len(),
        bodies.len()
    );
    Ok(())
}

async fn push_clustering(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("Clustering");
    let group = ctx.group("clustering");
    ctx.create_topic(&topic, QUEUES).await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut consumers = Vec::new();
    for who in 0..2 {
        let listener =
            reporting_listener(who, tx.clone(), ConsumeConcurrentlyStatus::ConsumeSuccess);
        let c = push_consumer(
            from_first(group.clone()),
            ctx.client("clustering"),
            &topic,
            "*",
            listener,
        )
        .await?;
        consumers.push(Arc::new(c));
    }
    let outcome = async {
        wait_rebalanced(&consumers, &topic, |owned| {
            owned.iter().all(|s| !s.is_empty())
                && owned.iter().map(HashSet::len).sum::<usize>() == queue_count()
                && owned[0].is_disjoint(&owned[1])
        })
        .await?;
        let bodies: Vec<String> = (0..GROUP_COUNT).map(|i| format!("cluster-{i}")).collect();
        send_bodies(&ctx, "clustering", &topic, &bodies).await?;
        let got = collect_until(&mut rx, DEADLINE, |got| {
            body_counts(got).len() >= bodies.len()
        })
        .await;
        exactly_once_per_record(&got, &bodies)?;
        for who in 0..2 {
            ensure!(
                got.iter().any(|(w, _)| *w == who),
                "consumer {who} received nothing although it owns queues"
            );
        }
        Ok(())
    }
    .await;
    shutdown_all(&consumers).await;
    outcome
}

/// What clustering consumption promises while every queue keeps one owner: each stored message
/// (queue, offset) reaches the group once, and every body was delivered. RocketMQ's redelivery
/// (at-least-once) comes from a queue changing owners or a failed consumption; the callers send
/// only after [`wait_rebalanced`] made the split final, with listeners that always succeed, so a
/// record delivered twice here is a client defect. A body stored twice is allowed only as a
/// producer retry (a sync send that timed out on a loaded box after the broker had stored it):
/// both copies then carry the one UNIQ_KEY the producer gave the message. A failure lists every
/// delivery of the body.
fn exactly_once_per_record(got: &[Delivery], bodies: &[String]) -> Outcome {
    let mut per_record: HashMap<(i32, i64), usize> = HashMap::new();
    for (_, msg) in got {
        *per_record
            .entry((msg.queue_id, msg.queue_offset))
            .or_insert(0) += 1;
    }
    let of_body = |body: &str| {
        let body = body.to_owned();
        got.iter().filter(move |(_, m)| body_text(m) == body)
    };
    let deliveries_of = |body: &str| -> String {
        of_body(body)
            .map(|(who, m)| {
                format!(
                    "consumer {who} queue {} offset {} UNIQ_KEY {:?} reconsume {}",
                    m.queue_id,
                    m.queue_offset,
                    m.uniq_key(),
                    m.reconsume_times
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    for (_, msg) in got {
        let n = per_record
            .get(&(msg.queue_id, msg.queue_offset))
            .copied()
            .unwrap_or(0);
        let body = body_text(msg);
        ensure!(
            n == 1,
            "stored message {body} delivered {n} times to the group: {}",
            deliveries_of(&body)
        );
    }
    let counts = body_counts(got);
    for body in bodies {
        let n = counts.get(body).copied().unwrap_or(0);
        ensure!(n >= 1, "{body} never delivered to the group");
        if n > 1 {
            let keys: HashSet<Option<&str>> = of_body(body).map(|(_, m)| m.uniq_key()).collect();
            ensure!(
                keys.len() == 1 && !keys.contains(&None),
                "{body} stored {n} times under different ids (not a producer retry): {}",
                deliveries_of(body)
            );
            eprintln!(
                "note: {body} stored {n} times by producer retries: {}",
                deliveries_of(body)
            );
        }
    }
    Ok(())
}

async fn push_broadcasting(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("Broadcast");
    let group = ctx.group("broadcast");
    ctx.create_topic(&topic, QUEUES).await?;
    let offsets_dir = tempfile::tempdir().step("temp dir")?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut consumers = Vec::new();
    for who in 0..2 {
        let mut config = from_first(group.clone());
        config.message_model = MessageModel::Broadcasting;
        config.local_offset_store_dir = Some(offsets_dir.path().to_path_buf());
        let listener =
            reporting_listener(who, tx.clone(), ConsumeConcurrentlyStatus::ConsumeSuccess);
        let c = push_consumer(config, ctx.client("broadcast"), &topic, "*", listener).await?;
        consumers.push(Arc::new(c));
    }
    let outcome = async {
        wait_rebalanced(&consumers, &topic, |owned| {
            owned.iter().all(|s| s.len() == queue_count())
        })
        .await?;
        let bodies: Vec<String> = (0..GROUP_COUNT / 2)
            .map(|i| format!("broadcast-{i}"))
            .collect();
        send_bodies(&ctx, "broadcast", &topic, &bodies).await?;
        let per_consumer = |got: &[Delivery], who: usize| -> HashMap<String, usize> {
            let mine: Vec<Delivery> = got.iter().filter(|(w, _)| *w == who).cloned().collect();
            body_counts(&mine)
        };
        let got = collect_until(&mut rx, DEADLINE, |got| {
            (0..2).all(|who| per_consumer(got, who).len() >= bodies.len())
        })
        .await;
        for who in 0..2 {
            let counts = per_consumer(&got, who);
            for body in &bodies {
                let n = counts.get(body).copied().unwrap_or(0);
                ensure!(n == 1, "consumer {who} received {body} {n} times");
            }
        }
        Ok(())
    }
    .await;
    shutdown_all(&consumers).await;
    outcome
}

async fn orderly_hash_selector(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("Orderly");
    let group = ctx.group("orderly");
    ctx.create_topic(&topic, QUEUES).await?;
    let producer = ctx.producer("orderly").await?;
    let mut queue_of_order: HashMap<i64, i32> = HashMap::new();
    for step in 0..STEPS {
        for order in 0..ORDERS {
            let msg = Message::new(topic.clone(), format!("order-{order}-step-{step}"))
                .with_keys([format!("order-{order}")]);
            let result = producer
                .send_with_selector(msg, &SelectMessageQueueByHash, &order)
                .await
                .step("selector send")?;
            expect_ok(&result)?;
            let q = *queue_of_order
                .entry(order)
                .or_insert(result.message_queue.queue_id);
            ensure!(
                q == result.message_queue.queue_id,
                "order {order} went to queues {q} and {}",
                result.message_queue.queue_id
            );
            // Java's SelectMessageQueueByHash: |hashCode(arg) % size|, Long.hashCode = low bits.
            ensure!(
                i64::from(q) == order % i64::from(QUEUES),
                "order {order} selected queue {q}, expected {}",
                order % i64::from(QUEUES)
            );
        }
    }
    producer.shutdown().await;

    let (tx, mut rx) = mpsc::unbounded_channel::<Delivery>();
    let listener = orderly_fn(move |msgs, _ctx| {
        for msg in msgs {
            let _ = tx.send((0, msg.clone()));
        }
        ConsumeOrderlyStatus::Success
    });
    let consumer = Arc::new(
        push_consumer(
            from_first(group),
            ctx.client("orderly"),
            &topic,
            "*",
            listener,
        )
        .await?,
    );
    let total = STEPS * usize::try_from(ORDERS).unwrap_or(0);
    let got = collect_until(&mut rx, DEADLINE, |got| body_counts(got).len() >= total).await;
    shutdown_all(&[consumer]).await;
    let counts = body_counts(&got);
    ensure!(
        counts.len() == total && got.len() == total,
        "{} deliveries of {} distinct bodies, expected {total} once each",
        got.len(),
        counts.len()
    );
    let mut last_offset: HashMap<i32, i64> = HashMap::new();
    let mut next_step: HashMap<String, usize> = HashMap::new();
    for (_, msg) in &got {
        let prev = last_offset.insert(msg.queue_id, msg.queue_offset);
        ensure!(
            prev.is_none_or(|p| p < msg.queue_offset),
            "queue {} delivered offset {} after {:?}",
            msg.queue_id,
            msg.queue_offset,
            prev
        );
        let text = body_text(msg);
        let Some((order, step)) = text.rsplit_once("-step-") else {
            return Err(format!("unexpected body {text}"));
        };
        let step: usize = step.parse().step("step number")?;
        let want = next_step.entry(order.to_owned()).or_insert(0);
        ensure!(
            step == *want,
            "{order}: step {step} delivered, expected step {want}"
        );
        *want += 1;
    }
    Ok(())
}

async fn retry_then_dlq(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("Retry");
    let group = ctx.group("retry");
    ctx.create_topic(&topic, QUEUES).await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut config = from_first(group.clone());
    config.max_reconsume_times = MAX_RECONSUME;
    let listener = reporting_listener(0, tx, ConsumeConcurrentlyStatus::ReconsumeLater);
    // Apache creates %RETRY%<group> on the group's first heartbeat, which comes after the
    // consumer fetched its routes at start; like the Java client it learns the route at the next
    // name-server poll and owns the queue at the next rebalance (30 s and 20 s by default, user
    // settings in both clients). Short intervals keep the row fast.
    let mut client = ctx.client("retry");
    client.poll_name_server_interval = FAST_CLIENT_INTERVAL;
    client.rebalance_interval = FAST_CLIENT_INTERVAL;
    let consumer = Arc::new(push_consumer(config, client, &topic, "*", listener).await?);
    let outcome = async {
        let retry = comet_client::consumer::retry_topic(&group);
        let owns_retry = wait_until_for(RETRY_ROUTE_DEADLINE, || async {
            consumer.owned_queues().iter().any(|q| q.topic == retry)
        })
        .await;
        ensure!(owns_retry, "the consumer never owned a queue of {retry}");
        let body = format!("retry-me-{}", ctx.suffix);
        send_bodies(&ctx, "retry", &topic, std::slice::from_ref(&body)).await?;
        let deliveries = usize::try_from(MAX_RECONSUME + 1).unwrap_or(0);
        let got = collect_until(&mut rx, DEADLINE, |got| got.len() >= deliveries).await;
        let times: Vec<i32> = got.iter().map(|(_, m)| m.reconsume_times).collect();
        let want: Vec<i32> = (0..=MAX_RECONSUME).collect();
        ensure!(
            times == want,
            "reconsume times of the deliveries {times:?}, expected {want:?}"
        );
        for (_, msg) in &got {
            ensure!(
                msg.topic == topic && body_text(msg) == body,
                "a retry delivery came as topic {} body {:?}",
                msg.topic,
                body_text(msg)
            );
        }
        let admin = ctx.admin()?;
        let in_dlq = wait_until(|| async {
            admin
                .dlq_messages(&group, 16)
                .await
                .is_ok_and(|m| m.iter().any(|m| body_text(m) == body))
        })
        .await;
        let dlq = admin.dlq_messages(&group, 16).await.step("DLQ listing");
        admin.shutdown().await;
        ensure!(
            in_dlq,
            "message not in %DLQ%{group}: {:?}",
            dlq.map(|m| m.len())
        );
        let extra = collect_until(&mut rx, Duration::ZERO, |_| false).await;
        ensure!(
            extra.is_empty(),
            "{} deliveries after the message was dead-lettered",
            extra.len()
        );
        Ok(())
    }
    .await;
    shutdown_all(&[consumer]).await;
    outcome
}

async fn delay_level_2(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("Delay");
    let group = ctx.group("delay");
    ctx.create_topic(&topic, QUEUES).await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let listener = reporting_listener(0, tx, ConsumeConcurrentlyStatus::ConsumeSuccess);
    let consumer = Arc::new(
        push_consumer(
            from_first(group),
            ctx.client("delay"),
            &topic,
            "*",
            listener,
        )
        .await?,
    );
    let outcome = async {
        wait_rebalanced(std::slice::from_ref(&consumer), &topic, |owned| {
            owned[0].len() == queue_count()
        })
        .await?;
        let producer = ctx.producer("delay").await?;
        let sent_at = now_millis();
        let body = format!("delayed-{}", ctx.suffix);
        let result = producer
            .send(Message::new(topic.clone(), body.clone()).with_delay_level(DELAY_LEVEL))
            .await
            .step("delayed send")?;
        producer.shutdown().await;
        expect_ok(&result)?;
        let got = collect_until(&mut rx, DEADLINE, |got| !got.is_empty()).await;
        let received_at = now_millis();
        let Some((_, msg)) = got.first() else {
            return Err("delayed message never delivered".to_owned());
        };
        ensure!(
            msg.topic == topic && body_text(msg) == body,
            "delivered topic {} body {:?}",
            msg.topic,
            body_text(msg)
        );
        ensure!(
            received_at - sent_at >= DELAY_MILLIS,
            "delivered {} ms after the send, delay level {DELAY_LEVEL} is {DELAY_MILLIS} ms",
            received_at - sent_at
        );
        Ok(())
    }
    .await;
    shutdown_all(&[consumer]).await;
    outcome
}

// ---------------------------------------------------------------------------------------------
// Where a new group starts

async fn consume_from_first(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("FromFirst");
    ctx.create_topic(&topic, QUEUES).await?;
    let old: Vec<String> = (0..SEND_COUNT).map(|i| format!("first-old-{i}")).collect();
    send_bodies(&ctx, "from_first", &topic, &old).await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let listener = reporting_listener(0, tx, ConsumeConcurrentlyStatus::ConsumeSuccess);
    let consumer = Arc::new(
        push_consumer(
            from_first(ctx.group("from_first")),
            ctx.client("from_first"),
            &topic,
            "*",
            listener,
        )
        .await?,
    );
    let got = collect_until(&mut rx, DEADLINE, |got| body_counts(got).len() >= old.len()).await;
    shutdown_all(&[consumer]).await;
    let counts = body_counts(&got);
    for body in &old {
        let n = counts.get(body).copied().unwrap_or(0);
        ensure!(
            n == 1,
            "{body} (sent before the group existed) delivered {n} times"
        );
    }
    Ok(())
}

/// The broker's answer to QUERY_CONSUMER_OFFSET for each queue of `topic` for `group`, `None`
/// when it has none (QUERY_NOT_FOUND).
///
/// A new group starts a queue where the broker says when it says anything, whatever
/// consumeFromWhere is: the Java client sends no `setZeroIfNotFound`, and Apache answers 0 for an
/// unknown group while the queue's first message is still in memory. Only without an answer do
/// LAST_OFFSET (max offset) and TIMESTAMP (search by time) apply; both put every message sent
/// before the consumer started (LAST) or stored before the timestamp (TIMESTAMP) out of reach.
async fn broker_start_offsets(
    ctx: &Ctx,
    group: &str,
    topic: &str,
) -> Result<HashMap<i32, Option<i64>>, String> {
    let admin = ctx.admin()?;
    let route = admin.topic_route(topic).await.step("route")?;
    let mut start_of = HashMap::new();
    for (_, addr) in comet_client::admin::route_masters(&route) {
        for queue_id in 0..QUEUES {
            let header = QueryConsumerOffsetRequestHeader {
                consumer_group: group.to_owned(),
                topic: topic.to_owned(),
                queue_id,
                ..Default::default()
            };
            let answer = admin
                .api()
                .query_consumer_offset(&addr, header, admin.timeout())
                .await
                .ok();
            start_of.insert(queue_id, answer);
        }
    }
    admin.shutdown().await;
    Ok(start_of)
}

async fn consume_from_last(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("FromLast");
    let group = ctx.group("from_last");
    ctx.create_topic(&topic, QUEUES).await?;
    let old: Vec<String> = (0..SEND_COUNT).map(|i| format!("last-old-{i}")).collect();
    send_bodies(&ctx, "from_last", &topic, &old).await?;
    let stored_old = ctx.read_topic(&topic, old.len()).await?;
    ensure!(
        stored_old.len() == old.len(),
        "{} old messages stored",
        stored_old.len()
    );

    let start_of = broker_start_offsets(&ctx, &group, &topic).await?;
    let expected_old: HashSet<String> = stored_old
        .iter()
        .filter(|m| {
            start_of
                .get(&m.queue_id)
                .copied()
                .flatten()
                .is_some_and(|start| m.queue_offset >= start)
        })
        .map(body_text)
        .collect();

    let (tx, mut rx) = mpsc::unbounded_channel();
    let listener = reporting_listener(0, tx, ConsumeConcurrentlyStatus::ConsumeSuccess);
    let mut config = PushConsumerConfig::new(group);
    config.consume_from_where = ConsumeFromWhere::ConsumeFromLastOffset;
    let consumer =
        Arc::new(push_consumer(config, ctx.client("from_last"), &topic, "*", listener).await?);
    let outcome = async {
        wait_rebalanced(std::slice::from_ref(&consumer), &topic, |owned| {
            owned[0].len() == queue_count()
        })
        .await?;
        // Let the start offsets be computed before new messages arrive: every owned queue has
        // pulled at least once when its process queue records a pull.
        let pulled = crate::support::wait_until(|| async {
            consumer.owned_queues().iter().all(|mq| {
                consumer
                    .process_queue(mq)
                    .is_some_and(|pq| pq.last_pull_timestamp() > 0)
            })
        })
        .await;
        ensure!(pulled, "the consumer never pulled all its queues");
        let new: Vec<String> = (0..SEND_COUNT).map(|i| format!("last-new-{i}")).collect();
        send_bodies(&ctx, "from_last", &topic, &new).await?;
        let got = collect_until(&mut rx, DEADLINE, |got| {
            let counts = body_counts(got);
            new.iter()
                .chain(expected_old.iter())
                .all(|b| counts.contains_key(b))
        })
        .await;
        let counts = body_counts(&got);
        for body in &new {
            let n = counts.get(body).copied().unwrap_or(0);
            ensure!(n == 1, "{body} (sent after start) delivered {n} times");
        }
        for body in &old {
            let n = counts.get(body).copied().unwrap_or(0);
            let want = usize::from(expected_old.contains(body));
            ensure!(
                n == want,
                "{body} (sent before start) delivered {n} times, expected {want} from the broker's \
                 offsets {start_of:?}"
            );
        }
        Ok(())
    }
    .await;
    shutdown_all(&[consumer]).await;
    outcome
}

async fn consume_from_timestamp(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("FromTimestamp");
    let group = ctx.group("from_ts");
    ctx.create_topic(&topic, QUEUES).await?;
    let old: Vec<String> = (0..SEND_COUNT).map(|i| format!("ts-old-{i}")).collect();
    send_bodies(&ctx, "from_ts", &topic, &old).await?;
    let boundary = now_millis() + 1;
    let passed = wait_until(|| async { now_millis() > boundary }).await;
    ensure!(passed, "clock did not advance");
    let new: Vec<String> = (0..SEND_COUNT).map(|i| format!("ts-new-{i}")).collect();
    send_bodies(&ctx, "from_ts", &topic, &new).await?;
    let stored = ctx.read_topic(&topic, old.len() + new.len()).await?;
    ensure!(
        stored.len() == old.len() + new.len(),
        "{} messages stored",
        stored.len()
    );
    let start_of = broker_start_offsets(&ctx, &group, &topic).await?;
    // Without a broker answer the queue starts at the first message stored at or after the
    // timestamp, which leaves out exactly the messages stored before it.
    let expected: HashSet<String> = stored
        .iter()
        .filter(|m| match start_of.get(&m.queue_id).copied().flatten() {
            Some(start) => m.queue_offset >= start,
            None => m.store_timestamp >= boundary,
        })
        .map(body_text)
        .collect();

    let (tx, mut rx) = mpsc::unbounded_channel();
    let listener = reporting_listener(0, tx, ConsumeConcurrentlyStatus::ConsumeSuccess);
    let mut config = PushConsumerConfig::new(group);
    config.consume_from_where = ConsumeFromWhere::ConsumeFromTimestamp;
    config.consume_timestamp = Some(boundary);
    let consumer =
        Arc::new(push_consumer(config, ctx.client("from_ts"), &topic, "*", listener).await?);
    let got = collect_until(&mut rx, DEADLINE, |got| {
        let counts = body_counts(got);
        new.iter()
            .chain(expected.iter())
            .all(|b| counts.contains_key(b))
    })
    .await;
    shutdown_all(&[consumer]).await;
    let counts = body_counts(&got);
    for body in &new {
        let n = counts.get(body).copied().unwrap_or(0);
        ensure!(
            n == 1,
            "{body} (stored after the timestamp) delivered {n} times"
        );
    }
    for body in &old {
        let n = counts.get(body).copied().unwrap_or(0);
        let want = usize::from(expected.contains(body));
        ensure!(
            n == want,
            "{body} (stored before the timestamp) delivered {n} times, expected {want} from the \
             broker's offsets {start_of:?}"
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Pull consumers

async fn lite_pull_seek(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("LiteSeek");
    ctx.create_topic(&topic, QUEUES).await?;
    let producer = ctx.producer("lite").await?;
    let queues = producer
        .fetch_publish_message_queues(&topic)
        .await
        .step("publish queues")?;
    let Some(mq) = queues.into_iter().find(|q| q.queue_id == 0) else {
        return Err("topic has no queue 0".to_owned());
    };
    for i in 0..SEND_COUNT {
        let result = producer
            .send_to_queue(Message::new(topic.clone(), format!("lite-{i}")), &mq)
            .await
            .step("send to queue")?;
        expect_ok(&result)?;
    }
    producer.shutdown().await;

    let mut config = LitePullConsumerConfig::new(ctx.group("lite"), ctx.client("lite"));
    config.auto_commit = false;
    let consumer = DefaultLitePullConsumer::new(config);
    consumer.assign(vec![mq.clone()]).await.step("assign")?;
    consumer.start().await.step("lite start")?;
    let outcome = async {
        consumer.seek_to_begin(&mq).await.step("seek to begin")?;
        let first = poll_offsets(&consumer, SEND_COUNT).await?;
        let all: Vec<i64> = (0..i64::try_from(SEND_COUNT).unwrap_or(0)).collect();
        ensure!(first == all, "after seek_to_begin polled offsets {first:?}");
        let target = 3;
        consumer.seek(&mq, target).await.step("seek")?;
        let again = poll_offsets(&consumer, SEND_COUNT - 3).await?;
        let want: Vec<i64> = (target..i64::try_from(SEND_COUNT).unwrap_or(0)).collect();
        ensure!(
            again == want,
            "after seek({target}) polled offsets {again:?}"
        );
        let max = i64::try_from(SEND_COUNT).unwrap_or(0);
        consumer.seek_to_end(&mq).await.step("seek to end")?;
        let rest = consumer
            .poll(Duration::from_millis(500))
            .await
            .step("poll")?;
        ensure!(
            rest.is_empty(),
            "after seek_to_end polled {} messages",
            rest.len()
        );
        consumer
            .commit_offsets(&HashMap::from([(mq.clone(), max)]), true)
            .await
            .step("commit")?;
        let committed = consumer.committed(&mq).await.step("committed")?;
        ensure!(
            committed == max,
            "committed offset {committed}, expected {max}"
        );
        Ok(())
    }
    .await;
    consumer.shutdown().await;
    outcome
}

/// Polls until `want` messages arrived; returns their offsets in poll order.
async fn poll_offsets(consumer: &DefaultLitePullConsumer, want: usize) -> Result<Vec<i64>, String> {
    let begin = Instant::now();
    let mut offsets = Vec::new();
    while offsets.len() < want && begin.elapsed() < DEADLINE {
        let msgs = consumer.poll(Duration::from_secs(1)).await.step("poll")?;
        offsets.extend(msgs.iter().map(|m| m.queue_offset));
    }
    Ok(offsets)
}

async fn pull_offsets_survive_restart(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("PullRestart");
    let group = ctx.group("pull_restart");
    ctx.create_topic(&topic, QUEUES).await?;
    let bodies: Vec<String> = (0..SEND_COUNT * 2).map(|i| format!("pull-{i}")).collect();
    send_all_and_wait_stored(&ctx, "pull_restart", &topic, &bodies).await?;
    // Each queue holds 4 messages (round-robin); the first run consumes 2 of each.
    let first_take = 2;
    let mut seen = Vec::new();
    let mut committed: BTreeMap<i32, i64> = BTreeMap::new();
    {
        let consumer = DefaultMQPullConsumer::new(PullConsumerConfig::new(
            group.clone(),
            ctx.client("pull_restart"),
        ));
        consumer.start().await.step("pull consumer start")?;
        let outcome = async {
            let queues = consumer
                .fetch_subscribe_message_queues(&topic)
                .await
                .step("queues")?;
            for mq in &queues {
                let stored = consumer
                    .fetch_consume_offset(mq, true)
                    .await
                    .step("offset")?;
                // Apache answers 0 for an unknown group while the queue's first message is
                // in memory (no setZeroIfNotFound, like the Java client), else "not found".
                ensure!(stored <= 0, "new group has offset {stored} on {mq}");
                let result = consumer.pull(mq, "*", 0, first_take).await.step("pull")?;
                ensure!(
                    result.pull_status == PullStatus::Found,
                    "pull of {mq}: {:?}",
                    result.pull_status
                );
                seen.extend(result.msg_found_list.iter().map(body_text));
                consumer
                    .update_consume_offset(mq, result.next_begin_offset)
                    .step("update offset")?;
                committed.insert(mq.queue_id, result.next_begin_offset);
            }
            Ok(())
        }
        .await;
        // Shutdown persists the offsets, as the Java client does.
        consumer.shutdown().await;
        outcome?;
    }
    let consumer =
        DefaultMQPullConsumer::new(PullConsumerConfig::new(group, ctx.client("pull_restart")));
    consumer.start().await.step("restarted consumer start")?;
    let outcome = async {
        let queues = consumer
            .fetch_subscribe_message_queues(&topic)
            .await
            .step("queues")?;
        for mq in &queues {
            let offset = consumer
                .fetch_consume_offset(mq, true)
                .await
                .step("offset")?;
            let want = committed.get(&mq.queue_id).copied();
            ensure!(
                Some(offset) == want,
                "after restart {mq} has offset {offset}, committed {want:?}"
            );
            let result = consumer.pull(mq, "*", offset, 32).await.step("pull")?;
            seen.extend(result.msg_found_list.iter().map(body_text));
        }
        Ok(())
    }
    .await;
    consumer.shutdown().await;
    outcome?;
    seen.sort();
    let mut want = bodies.clone();
    want.sort();
    ensure!(
        seen == want,
        "messages read across the restart {seen:?}, sent {want:?}"
    );
    Ok(())
}

async fn tag_filter(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("Tags");
    ctx.create_topic(&topic, QUEUES).await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let listener = reporting_listener(0, tx, ConsumeConcurrentlyStatus::ConsumeSuccess);
    let consumer = Arc::new(
        push_consumer(
            from_first(ctx.group("tags")),
            ctx.client("tags"),
            &topic,
            "TagA || TagB",
            listener,
        )
        .await?,
    );
    let outcome = async {
        let producer = ctx.producer("tags").await?;
        let mut wanted = Vec::new();
        for i in 0..SEND_COUNT {
            for tag in ["TagA", "TagB", "TagC"] {
                let body = format!("{tag}-{i}");
                producer
                    .send(Message::new(topic.clone(), body.clone()).with_tags(tag))
                    .await
                    .step("send")?;
                if tag != "TagC" {
                    wanted.push(body);
                }
            }
        }
        // One last TagA message per queue: once all of them arrived, every earlier message of
        // every queue was either delivered or filtered.
        let queues = producer
            .fetch_publish_message_queues(&topic)
            .await
            .step("queues")?;
        for mq in &queues {
            let body = format!("TagA-last-{}", mq.queue_id);
            producer
                .send_to_queue(
                    Message::new(topic.clone(), body.clone()).with_tags("TagA"),
                    mq,
                )
                .await
                .step("send to queue")?;
            wanted.push(body);
        }
        producer.shutdown().await;
        let got = collect_until(&mut rx, DEADLINE, |got| {
            body_counts(got).len() >= wanted.len()
        })
        .await;
        let counts = body_counts(&got);
        for body in &wanted {
            let n = counts.get(body).copied().unwrap_or(0);
            ensure!(n == 1, "{body} delivered {n} times to `TagA || TagB`");
        }
        let stray: Vec<&String> = counts.keys().filter(|b| b.starts_with("TagC")).collect();
        ensure!(stray.is_empty(), "TagC messages delivered: {stray:?}");
        Ok(())
    }
    .await;
    shutdown_all(&[consumer]).await;
    outcome
}

// ---------------------------------------------------------------------------------------------
// Admin

async fn admin_create_topic_route(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("AdminCreate");
    let queues = 3;
    ctx.create_topic(&topic, queues).await?;
    let admin = ctx.admin()?;
    let outcome = async {
        let masters = admin.master_addrs(None).await.step("cluster info")?;
        let route = admin.topic_route(&topic).await.step("route")?;
        ensure!(
            route.queue_datas.len() == masters.len(),
            "route has {} queue datas for {} masters",
            route.queue_datas.len(),
            masters.len()
        );
        for q in &route.queue_datas {
            ensure!(
                q.read_queue_nums == queues && q.write_queue_nums == queues,
                "queue data {q:?}, created with {queues} queues"
            );
            ensure!(q.perm == 6, "perm {} of a read-write topic", q.perm);
        }
        for (name, addr) in &masters {
            let routed = comet_client::admin::route_masters(&route);
            ensure!(
                routed.contains(&(name.clone(), addr.clone())),
                "master {name} at {addr} missing from the route {routed:?}"
            );
        }
        let list = admin.topic_list().await.step("topic list")?;
        ensure!(list.contains(&topic), "topic list lacks {topic}");
        let stats = admin.topic_stats(&topic).await.step("topic stats")?;
        ensure!(
            stats.offset_table.len() == usize::try_from(queues).unwrap_or(0) * masters.len(),
            "topic stats list {} queues",
            stats.offset_table.len()
        );
        Ok(())
    }
    .await;
    admin.shutdown().await;
    outcome
}

async fn admin_consumer_lag(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("AdminLag");
    let group = ctx.group("lag");
    ctx.create_topic(&topic, QUEUES).await?;
    let bodies: Vec<String> = (0..SEND_COUNT * 2).map(|i| format!("lag-{i}")).collect();
    send_all_and_wait_stored(&ctx, "lag", &topic, &bodies).await?;
    let consumer =
        DefaultMQPullConsumer::new(PullConsumerConfig::new(group.clone(), ctx.client("lag")));
    consumer.start().await.step("pull consumer start")?;
    let admin = ctx.admin()?;
    let outcome = async {
        let queues = consumer
            .fetch_subscribe_message_queues(&topic)
            .await
            .step("queues")?;
        // Consume (read and commit) queue by queue a different number of messages.
        let mut unconsumed = 0usize;
        let mut consumed = 0usize;
        for (i, mq) in queues.iter().enumerate() {
            let take = i32::try_from(i % 3).unwrap_or(0);
            let stored = read_queue(&consumer, mq, "*").await?;
            let offset = if take == 0 {
                0
            } else {
                let result = consumer.pull(mq, "*", 0, take).await.step("pull")?;
                consumed += result.msg_found_list.len();
                result.next_begin_offset
            };
            unconsumed += stored
                .len()
                .saturating_sub(usize::try_from(offset).unwrap_or(0));
            consumer
                .update_consume_offset(mq, offset)
                .step("update offset")?;
            consumer
                .persist_consume_offset(mq)
                .await
                .step("persist offset")?;
        }
        ensure!(
            consumed + unconsumed == bodies.len(),
            "consumed {consumed} + unconsumed {unconsumed} != {} sent",
            bodies.len()
        );
        let want = i64::try_from(unconsumed).unwrap_or(i64::MAX);
        let stats = admin
            .consume_stats(&group, Some(&topic))
            .await
            .step("consume stats")?;
        ensure!(
            stats.diff_total() == want,
            "consume stats lag {}, unconsumed {want} ({:?})",
            stats.diff_total(),
            stats.offset_table
        );
        let progress = admin
            .consumer_progress(&group, Some(&topic))
            .await
            .step("consumer progress")?;
        let lag: i64 = progress.iter().map(|p| p.lag()).sum();
        ensure!(
            lag == want,
            "consumer progress lag {lag}, unconsumed {want}"
        );
        Ok(())
    }
    .await;
    admin.shutdown().await;
    consumer.shutdown().await;
    outcome
}

async fn admin_query_key_and_id(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("AdminQuery");
    ctx.create_topic(&topic, QUEUES).await?;
    let producer = ctx.producer("query").await?;
    let mut sent = Vec::new();
    for i in 0..3 {
        let key = format!("query-key-{i}-{}", ctx.suffix);
        let body = format!("query-{i}");
        let result = producer
            .send(Message::new(topic.clone(), body.clone()).with_keys([key.clone()]))
            .await
            .step("send")?;
        expect_ok(&result)?;
        sent.push((key, body, result));
    }
    producer.shutdown().await;
    let admin = ctx.admin()?;
    let outcome = async {
        let (key, body, result) = &sent[1];
        // The broker builds its index asynchronously.
        let indexed = wait_until(|| async {
            admin
                .query_message_by_key(&topic, key, 32, 0, i64::MAX)
                .await
                .is_ok_and(|f| !f.is_empty())
        })
        .await;
        let found = admin
            .query_message_by_key(&topic, key, 32, 0, i64::MAX)
            .await
            .step("query by key")?;
        ensure!(
            indexed,
            "key {key} never found (last answer {} messages)",
            found.len()
        );
        ensure!(
            found.len() == 1 && body_text(&found[0]) == *body,
            "query by key {key} found {:?}",
            found.iter().map(body_text).collect::<Vec<_>>()
        );
        let (kind, by_offset) = admin
            .view_message(&result.offset_msg_id, None)
            .await
            .step("view by offset msgId")?;
        ensure!(
            kind == MessageIdKind::Offset && body_text(&by_offset) == *body,
            "offset msgId {} resolved as {kind:?} to {:?}",
            result.offset_msg_id,
            body_text(&by_offset)
        );
        let (kind, by_uniq) = admin
            .view_message(&result.msg_id, Some(&topic))
            .await
            .step("view by unique msgId")?;
        ensure!(
            kind == MessageIdKind::Unique && body_text(&by_uniq) == *body,
            "unique msgId {} resolved as {kind:?} to {:?}",
            result.msg_id,
            body_text(&by_uniq)
        );
        Ok(())
    }
    .await;
    admin.shutdown().await;
    outcome
}

async fn admin_reset_offset_by_time(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("AdminReset");
    let group = ctx.group("reset");
    ctx.create_topic(&topic, QUEUES).await?;
    let old: Vec<String> = (0..SEND_COUNT).map(|i| format!("reset-old-{i}")).collect();
    send_bodies(&ctx, "reset", &topic, &old).await?;
    let boundary = now_millis() + 1;
    let passed = wait_until(|| async { now_millis() > boundary }).await;
    ensure!(passed, "clock did not advance");
    let new: Vec<String> = (0..SEND_COUNT).map(|i| format!("reset-new-{i}")).collect();
    send_bodies(&ctx, "reset", &topic, &new).await?;

    // An online push consumer reads everything, then the admin rewinds it to the boundary: the
    // broker tells the client (RESET_CONSUMER_CLIENT_OFFSET) and the new messages come again.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let listener = reporting_listener(0, tx, ConsumeConcurrentlyStatus::ConsumeSuccess);
    let consumer = Arc::new(
        push_consumer(
            from_first(group.clone()),
            ctx.client("reset"),
            &topic,
            "*",
            listener,
        )
        .await?,
    );
    let admin = ctx.admin()?;
    let outcome = async {
        let all = old.len() + new.len();
        let first = collect_until(&mut rx, DEADLINE, |got| body_counts(got).len() >= all).await;
        ensure!(
            body_counts(&first).len() == all,
            "first pass delivered {} of {all} messages",
            body_counts(&first).len()
        );
        // Commit the first pass so the broker knows the group is at the end.
        consumer.persist_consumer_offset().await;
        let reset = admin
            .reset_offset_by_time(&group, &topic, boundary, true)
            .await
            .step("reset offset by time")?;
        ensure!(
            reset.len() == queue_count(),
            "reset answered {} queues: {reset:?}",
            reset.len()
        );
        // Apache 5.x resets server-side: the consumer learns it from the PULL_OFFSET_MOVED
        // answer to its next pull, which may be a long poll held up to 15 s (+ 5 s check).
        let again = collect_until(&mut rx, RESET_DEADLINE, |got| {
            let counts = body_counts(got);
            new.iter().all(|b| counts.contains_key(b))
        })
        .await;
        let counts = body_counts(&again);
        for body in &new {
            ensure!(
                counts.contains_key(body),
                "{body} (stored after the reset time) not redelivered after the reset"
            );
        }
        for body in &old {
            ensure!(
                !counts.contains_key(body),
                "{body} (stored before the reset time) redelivered after the reset"
            );
        }
        Ok(())
    }
    .await;
    admin.shutdown().await;
    shutdown_all(&[consumer]).await;
    outcome
}

/// Decides each local transaction by the message's tag and answers checks the same way
/// (`unknown` is committed when checked).
#[derive(Default)]
struct TagTransactions {
    checked: std::sync::Mutex<Vec<String>>,
}

impl TransactionListener for TagTransactions {
    fn execute_local_transaction(
        &self,
        msg: &Message,
        _arg: &(dyn std::any::Any + Send + Sync),
    ) -> LocalTransactionState {
        match msg.tags() {
            Some("commit") => LocalTransactionState::CommitMessage,
            Some("rollback") => LocalTransactionState::RollbackMessage,
            _ => LocalTransactionState::Unknown,
        }
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        if let Ok(mut checked) = self.checked.lock() {
            checked.push(msg.uniq_key().unwrap_or_default().to_owned());
        }
        match msg.tags() {
            Some("rollback") => LocalTransactionState::RollbackMessage,
            _ => LocalTransactionState::CommitMessage,
        }
    }
}

/// How long the unknown transaction may take to be checked: Apache checks halves older than
/// `transactionTimeOut` (6 s) every `transactionCheckInterval` (run.sh sets 5 s).
const TRANSACTION_CHECK_DEADLINE: Duration = Duration::from_secs(90);

async fn transactions(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("Transactions");
    ctx.create_topic(&topic, QUEUES).await?;
    let mut config = ProducerConfig::new(ctx.group("tx"), ctx.namesrv.clone());
    config.client = ctx.client("tx");
    let listener = Arc::new(TagTransactions::default());
    let producer = TransactionProducer::new(config, Arc::clone(&listener) as _);
    producer.start().await.step("transaction producer start")?;
    let outcome = async {
        let mut sent = Vec::new();
        for (body, tag, state) in [
            ("tx-commit", "commit", LocalTransactionState::CommitMessage),
            (
                "tx-rollback",
                "rollback",
                LocalTransactionState::RollbackMessage,
            ),
            ("tx-unknown", "unknown", LocalTransactionState::Unknown),
        ] {
            let msg = Message::new(topic.clone(), body.to_owned()).with_tags(tag);
            let result = producer
                .send_message_in_transaction(msg, &())
                .await
                .step("send in transaction")?;
            expect_ok(&result.send_result)?;
            ensure!(
                result.local_transaction_state == state,
                "{body}: local state {:?}, expected {state:?}",
                result.local_transaction_state
            );
            sent.push(result.send_result.msg_id);
        }
        let begin = Instant::now();
        let found = loop {
            let found = ctx.read_topic(&topic, 2).await?;
            let bodies: HashSet<String> = found.iter().map(body_text).collect();
            ensure!(
                !bodies.contains("tx-rollback"),
                "the rolled-back message is visible"
            );
            if bodies.contains("tx-commit") && bodies.contains("tx-unknown") {
                break found;
            }
            ensure!(
                begin.elapsed() < TRANSACTION_CHECK_DEADLINE,
                "after {:?} the topic holds {bodies:?}; checks answered: {:?}",
                begin.elapsed(),
                listener
                    .checked
                    .lock()
                    .map(|c| c.clone())
                    .unwrap_or_default()
            );
        };
        ensure!(
            found.len() == 2,
            "{} messages visible, expected the 2 committed",
            found.len()
        );
        // Apache keeps TRAN_MSG (and REAL_TOPIC/REAL_QID) in the committed record: it clears them
        // after serializing the properties. The transaction type says "committed" either way.
        for msg in &found {
            ensure!(
                sysflag::transaction_type(msg.sys_flag) == sysflag::TRANSACTION_COMMIT_TYPE,
                "{}: sysflag {:#x} is not a COMMIT",
                body_text(msg),
                msg.sys_flag
            );
        }
        let checked = listener
            .checked
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default();
        ensure!(
            checked.contains(&sent[2]),
            "the unknown transaction {} was never checked (checks: {checked:?})",
            sent[2]
        );
        Ok(())
    }
    .await;
    producer.shutdown().await;
    outcome
}

#[cfg(test)]
mod tests {
    use comet_protocol::message::MessageExt;

    use super::*;

    fn delivery(who: usize, body: &str, queue: i32, offset: i64, key: &str) -> Delivery {
        let mut msg = MessageExt::new("T", Default::default());
        msg.body = body.as_bytes().to_vec().into();
        msg.queue_id = queue;
        msg.queue_offset = offset;
        msg.properties.insert("UNIQ_KEY", key);
        (who, msg)
    }

    #[test]
    fn a_record_delivered_twice_fails_and_a_producer_retry_passes() {
        let bodies = vec!["b0".to_owned(), "b1".to_owned()];
        let clean = [delivery(0, "b0", 0, 0, "K0"), delivery(1, "b1", 1, 0, "K1")];
        assert!(exactly_once_per_record(&clean, &bodies).is_ok());

        let mut twice = clean.to_vec();
        twice.push(delivery(1, "b0", 0, 0, "K0"));
        let err = exactly_once_per_record(&twice, &bodies).unwrap_err();
        assert!(err.contains("delivered 2 times"), "{err}");

        let mut retried = clean.to_vec();
        retried.push(delivery(1, "b0", 2, 0, "K0"));
        assert!(exactly_once_per_record(&retried, &bodies).is_ok());

        let mut forged = clean.to_vec();
        forged.push(delivery(1, "b0", 2, 0, "OTHER"));
        let err = exactly_once_per_record(&forged, &bodies).unwrap_err();
        assert!(err.contains("different ids"), "{err}");

        let missing = [delivery(0, "b0", 0, 0, "K0")];
        assert!(exactly_once_per_record(&missing, &bodies).is_err());
    }
}
