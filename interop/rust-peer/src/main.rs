//! One scenario of Comet's interop matrix (interop/matrix.sh), run by the third-party Rust client
//! `rocketmq-client-rust` 1.0 against a running name server and broker.
//!
//! Usage: `matrix-rust <scenario> <namesrv host:port> <suffix>`, with the broker address in
//! `MATRIX_BROKER_ADDR` (topics are created there, as the Go runner does). Every topic and group
//! name ends with the suffix so that rows run in parallel against one broker. The last lines
//! printed are `CHECKS <n>` and `PASS <scenario>`, or `FAIL <scenario>: <first failing check>`;
//! the exit code is 0 only on PASS, and the harness also requires n > 0.
//!
//! Why a third client: the Java and Go clients are the reference implementations Comet was built
//! against; this one was written independently from the same protocol, so it exercises corners
//! (header spelling, optional fields, timing) that the reference clients happen not to.
//!
//! Waits are condition polls bounded by [`STEP_TIMEOUT`]; nothing passes because time went by.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use cheetah_string::CheetahString;
use rocketmq_client_rust::{
    AclClientRPCHook, AllocateMessageQueueAveragely, AllocateMessageQueueStrategy, ClientConfig,
    ClientError, ClientRuntime, ClientRuntimeConfig, ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus, ConsumeOrderlyContext, ConsumeOrderlyStatus, DefaultMQAdminExt,
    DefaultMQProducer, DefaultMQPushConsumer, LocalTransactionState, MQPushConsumer,
    MessageListenerConcurrently, MessageListenerOrderly, SendResult, SendStatus,
    SessionCredentials, TopicAdmin, TransactionListener, TransactionMQProducer,
};
// Classic pull reads the dead-letter queue at explicit offsets, as the Java and Go rows do.
#[allow(
    deprecated,
    reason = "classic pull is the client's API for reading at explicit offsets"
)]
use rocketmq_client_rust::DefaultMQPullConsumer;
use rocketmq_model::common::config::TopicConfig;
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_protocol::protocol::heartbeat::message_model::MessageModel;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};

/// Queues of every topic a scenario creates.
const QUEUES: u32 = 4;
/// Upper bound of every wait for a condition (delivery, route, rebalance).
const STEP_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a waiting condition is re-evaluated.
const POLL_EVERY: Duration = Duration::from_millis(50);
/// Send timeout: generous, the two cores are shared by several clients.
const SEND_TIMEOUT_MS: u64 = 10_000;
/// How long the clients get to shut down after the verdict is printed.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);
/// Body length of the compression scenario; the client compresses bodies over 4096 bytes.
const BIG_BODY_LEN: usize = 8 * 1024;
/// Delay level of the delay scenario and the shortest delay it must have (matrix broker: 5 s).
const DELAY_LEVEL: i32 = 2;
const DELAY_LEVEL_MIN_MS: i64 = 5_000;
/// maxReconsumeTimes of the retry/DLQ scenario.
const MAX_RECONSUME: i32 = 2;
/// Name prefix of a group's dead-letter topic.
const DLQ_PREFIX: &str = "%DLQ%";
/// Most messages one pull asks for.
const PULL_BATCH: i32 = 32;
/// PermName.PERM_READ | PermName.PERM_WRITE.
const PERM_READ_WRITE: u32 = 6;
/// Name prefix of a group's retry topic.
const RETRY_PREFIX: &str = "%RETRY%";
/// Message property holding the producer-assigned message id.
const UNIQ_KEY: &str = "UNIQ_KEY";
/// ResponseCode.NO_PERMISSION: an ACL broker's refusal.
const NO_PERMISSION: i32 = 16;
/// "accessKey:secretKey" of the ACL broker's ordinary and admin accounts (acl-* rows).
const ACL_USER_ENV: &str = "MATRIX_ACL_USER";
const ACL_ADMIN_ENV: &str = "MATRIX_ACL_ADMIN";
/// Scenarios that run against the ACL broker start with this.
const ACL_SCENARIO_PREFIX: &str = "acl-";

/// The row's first failing assertion (as opposed to an error of the client itself).
#[derive(Debug)]
struct CheckFailed(String);

impl std::fmt::Display for CheckFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CheckFailed {}

fn client(context: &'static str) -> impl FnOnce(ClientError) -> anyhow::Error {
    move |e| anyhow!("{context}: {e}")
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn property(m: &MessageExt, key: &str) -> Option<String> {
    m.properties()
        .iter()
        .find(|(k, _)| k.as_str() == key)
        .map(|(_, v)| v.to_string())
}

fn body(m: &MessageExt) -> String {
    m.body()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// Everything a concurrently consuming listener received, duplicates included.
#[derive(Default, Clone)]
struct Collector(Arc<Mutex<Vec<MessageExt>>>);

impl Collector {
    fn all(&self) -> Vec<MessageExt> {
        lock(&self.0).clone()
    }

    fn bodies(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for m in lock(&self.0).iter() {
            *out.entry(body(m)).or_insert(0) += 1;
        }
        out
    }

    fn unique(&self) -> BTreeSet<String> {
        self.bodies().into_keys().collect()
    }
}

impl MessageListenerConcurrently for Collector {
    fn consume_message(
        &self,
        msgs: &[&MessageExt],
        _context: &ConsumeConcurrentlyContext,
    ) -> rocketmq_client_rust::ClientResult<ConsumeConcurrentlyStatus> {
        lock(&self.0).extend(msgs.iter().map(|m| (*m).clone()));
        Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
    }
}

/// Records every delivery's (keys, reconsumeTimes) and asks for redelivery, to drive a message
/// through the retry topic into the dead-letter queue.
#[derive(Default, Clone)]
struct RetryRecorder {
    attempts: Arc<Mutex<BTreeMap<String, BTreeSet<i32>>>>,
    unexpected: Arc<Mutex<Vec<String>>>,
}

impl MessageListenerConcurrently for RetryRecorder {
    fn consume_message(
        &self,
        msgs: &[&MessageExt],
        _context: &ConsumeConcurrentlyContext,
    ) -> rocketmq_client_rust::ClientResult<ConsumeConcurrentlyStatus> {
        for m in msgs {
            let key = m.get_keys().map(|k| k.to_string()).unwrap_or_default();
            let times = m.reconsume_times();
            let fresh = lock(&self.attempts)
                .entry(key.clone())
                .or_default()
                .insert(times);
            if !fresh || times > MAX_RECONSUME {
                lock(&self.unexpected).push(format!("{key} reconsumeTimes={times}"));
            }
        }
        Ok(ConsumeConcurrentlyStatus::ReconsumeLater)
    }
}

/// Everything an orderly listener received, in delivery order.
#[derive(Default, Clone)]
struct OrderlyCollector(Arc<Mutex<Vec<MessageExt>>>);

impl MessageListenerOrderly for OrderlyCollector {
    fn consume_message(
        &self,
        msgs: &[&MessageExt],
        _context: &mut ConsumeOrderlyContext,
    ) -> rocketmq_client_rust::ClientResult<ConsumeOrderlyStatus> {
        lock(&self.0).extend(msgs.iter().map(|m| (*m).clone()));
        Ok(ConsumeOrderlyStatus::Success)
    }
}

/// Java's String.hashCode, so keys map to queues the way the other runners' selectors do.
fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// `yyyyMMddHHmmss` (UTC) of a Unix time in seconds: the consumeTimestamp format.
fn consume_timestamp(unix_secs: u64) -> String {
    const SECS_PER_DAY: u64 = 86_400;
    let (days, rem) = (unix_secs / SECS_PER_DAY, unix_secs % SECS_PER_DAY);
    // Days since 1970-01-01 to a civil date (proleptic Gregorian), in 400-year eras.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}{:02}{:02}{:02}",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

/// AllocateMessageQueueAveragely that remembers its last answer for the scenario topic, to see
/// when a rebalance settled.
#[derive(Default)]
struct Tracker {
    last: Mutex<(BTreeSet<i32>, usize)>,
}

impl AllocateMessageQueueStrategy for Tracker {
    fn allocate(
        &self,
        consumer_group: &CheetahString,
        current_cid: &CheetahString,
        mq_all: &[MessageQueue],
        cid_all: &[CheetahString],
    ) -> rocketmq_error::Result<Vec<MessageQueue>> {
        let result =
            AllocateMessageQueueAveragely.allocate(consumer_group, current_cid, mq_all, cid_all)?;
        // Clustering consumers also rebalance their group's retry topic; only the scenario
        // topic's allocation says whether the rebalance settled.
        if mq_all
            .first()
            .is_some_and(|mq| !mq.topic_str().starts_with(RETRY_PREFIX))
        {
            *lock(&self.last) = (
                result.iter().map(MessageQueue::queue_id).collect(),
                cid_all.len(),
            );
        }
        Ok(result)
    }

    fn get_name(&self) -> &'static str {
        AllocateMessageQueueAveragely.get_name()
    }
}

impl Tracker {
    fn state(&self) -> (BTreeSet<i32>, usize) {
        lock(&self.last).clone()
    }
}

/// Answers the local transaction by body; a check back gets the final outcome (rolled back for
/// txn-rollback, committed for the others), and every check is recorded.
#[derive(Default, Clone)]
struct TxnListener {
    checked: Arc<Mutex<Vec<(String, String)>>>,
}

fn first_answer(body: &str) -> LocalTransactionState {
    match body {
        "txn-commit" => LocalTransactionState::CommitMessage,
        "txn-unknown" => LocalTransactionState::Unknown,
        _ => LocalTransactionState::RollbackMessage,
    }
}

impl TransactionListener for TxnListener {
    fn execute_local_transaction(
        &self,
        msg: &dyn MessageTrait,
        _arg: Option<&(dyn std::any::Any + Send + Sync)>,
    ) -> LocalTransactionState {
        let body = msg
            .get_body()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default();
        first_answer(&body)
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        let b = body(msg);
        lock(&self.checked).push((property(msg, UNIQ_KEY).unwrap_or_default(), b.clone()));
        if b == "txn-rollback" {
            LocalTransactionState::RollbackMessage
        } else {
            LocalTransactionState::CommitMessage
        }
    }
}

struct Runner {
    scenario: String,
    namesrv: String,
    suffix: String,
    topic: String,
    group: String,
    broker_addr: String,
    checks: usize,
    instances: AtomicU32,
    runtime: Arc<ClientRuntime>,
    producers: Vec<DefaultMQProducer>,
    txn_producers: Vec<TransactionMQProducer>,
    consumers: Vec<DefaultMQPushConsumer>,
    admins: Vec<DefaultMQAdminExt>,
    /// Signing accounts of the acl-* scenarios (None otherwise).
    user_creds: Option<(String, String)>,
    admin_creds: Option<(String, String)>,
}

fn acl_credentials(env: &str) -> Option<(String, String)> {
    let value = std::env::var(env).ok()?;
    let (ak, sk) = value.split_once(':')?;
    (!ak.is_empty()).then(|| (ak.to_owned(), sk.to_owned()))
}

fn hook(creds: &(String, String), spoil: &str) -> Arc<AclClientRPCHook> {
    Arc::new(AclClientRPCHook::new(SessionCredentials::with_keys(
        creds.0.clone(),
        format!("{}{spoil}", creds.1),
    )))
}

impl Runner {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) -> Result<()> {
        self.checks += 1;
        if ok {
            Ok(())
        } else {
            Err(CheckFailed(what()).into())
        }
    }

    /// Polls `cond` until it holds or [`STEP_TIMEOUT`] passes.
    async fn await_until(
        &mut self,
        mut cond: impl FnMut() -> bool,
        what: impl FnOnce() -> String,
    ) -> Result<()> {
        let deadline = Instant::now() + STEP_TIMEOUT;
        while !cond() {
            if Instant::now() > deadline {
                let what = what();
                return self.check(false, || {
                    format!("{what} (timed out after {STEP_TIMEOUT:?})")
                });
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
        self.checks += 1;
        Ok(())
    }

    async fn await_unique(&mut self, c: &Collector, n: usize, what: &str) -> Result<()> {
        let probe = c.clone();
        let shown = c.clone();
        self.await_until(
            || probe.unique().len() >= n,
            || format!("{what} ({n} messages; got {:?})", shown.unique()),
        )
        .await
    }

    fn instance(&self) -> String {
        format!(
            "mx{}_{}",
            std::process::id(),
            self.instances.fetch_add(1, Ordering::Relaxed) + 1
        )
    }

    fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set_namesrv_addr(self.namesrv.clone().into());
        config.set_instance_name(self.instance().into());
        config.set_vip_channel_enabled(false);
        config
    }

    fn producer_group(&self) -> String {
        format!("MxP_{}_{}", self.scenario.replace('-', "_"), self.suffix)
    }

    async fn producer(&mut self) -> Result<usize> {
        let group = self.producer_group();
        let hook = self.user_creds.as_ref().map(|c| hook(c, ""));
        self.producer_with(group, hook).await
    }

    async fn producer_with(
        &mut self,
        group: String,
        rpc_hook: Option<Arc<AclClientRPCHook>>,
    ) -> Result<usize> {
        let mut builder = DefaultMQProducer::builder(self.runtime.clone())
            .client_config(self.client_config())
            .producer_group(group)
            .name_server_addr(self.namesrv.clone())
            .send_msg_timeout(SEND_TIMEOUT_MS as u32)
            .retry_times_when_send_failed(2);
        if let Some(h) = rpc_hook {
            builder = builder.rpc_hook(h);
        }
        let mut p = builder.build();
        p.start().await.map_err(client("producer start"))?;
        self.producers.push(p);
        Ok(self.producers.len() - 1)
    }

    async fn push_consumer(
        &mut self,
        sink: &Collector,
        expression: &str,
        model: MessageModel,
        strategy: Option<Arc<Tracker>>,
    ) -> Result<()> {
        let mut c = self
            .consumer_builder(model, ConsumeFromWhere::ConsumeFromFirstOffset, strategy)
            .build();
        c.subscribe(&self.topic, expression)
            .await
            .map_err(client("subscribe"))?;
        c.register_message_listener_concurrently(sink.clone());
        c.start().await.map_err(client("consumer start"))?;
        self.consumers.push(c);
        Ok(())
    }

    fn consumer_builder(
        &self,
        model: MessageModel,
        from: ConsumeFromWhere,
        strategy: Option<Arc<Tracker>>,
    ) -> rocketmq_client_rust::DefaultMQPushConsumerBuilder {
        let mut builder = DefaultMQPushConsumer::builder(self.runtime.clone())
            .client_config(self.client_config())
            .consumer_group(self.group.clone())
            .name_server_addr(self.namesrv.clone())
            .message_model(model)
            .consume_from_where(from);
        if let Some(s) = strategy {
            builder = builder.allocate_message_queue_strategy(s);
        }
        if let Some(c) = &self.user_creds {
            builder = builder.rpc_hook(Some(hook(c, "")));
        }
        builder
    }

    /// Creates `topic` with [`QUEUES`] queues at MATRIX_BROKER_ADDR (as the admin account on the
    /// ACL rows) and waits until the name server publishes its route.
    async fn create_topic(&mut self, topic: &str) -> Result<()> {
        let addr = self.broker_addr.clone();
        self.check(!addr.is_empty(), || "MATRIX_BROKER_ADDR is set".into())?;
        let mut admin = match &self.admin_creds {
            Some(c) => DefaultMQAdminExt::with_rpc_hook(self.runtime.clone(), hook(c, "")),
            None => DefaultMQAdminExt::new(self.runtime.clone()),
        };
        admin.set_namesrv_addr(self.namesrv.clone());
        admin
            .client_config_mut()
            .set_instance_name(self.instance().into());
        admin.start().await.map_err(client("admin start"))?;
        let created = admin
            .create_and_update_topic_config(
                addr.into(),
                TopicConfig::with_perm(topic, QUEUES, QUEUES, PERM_READ_WRITE),
            )
            .await;
        self.check(created.is_ok(), || {
            format!("create topic {topic}: {:?}", created.err())
        })?;
        let deadline = Instant::now() + STEP_TIMEOUT;
        loop {
            let route = admin.examine_topic_route_info(topic.into()).await;
            if matches!(&route, Ok(Some(r)) if !r.queue_datas.is_empty()) {
                self.checks += 1;
                break;
            }
            if Instant::now() > deadline {
                self.check(false, || {
                    format!("route of the new topic {topic} is published: {route:?}")
                })?;
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
        self.admins.push(admin);
        Ok(())
    }

    async fn send_ok(&mut self, p: usize, m: Message) -> Result<SendResult> {
        let res = self.producers[p]
            .send_with_timeout(m, SEND_TIMEOUT_MS)
            .await;
        let res = match res {
            Ok(Some(r)) => r,
            Ok(None) => return Err(CheckFailed("send returned no result".into()).into()),
            Err(e) => return Err(CheckFailed(format!("send: {e}")).into()),
        };
        let status = res.send_status;
        self.check(status == SendStatus::SendOk, || {
            format!("send status {status:?}")
        })?;
        Ok(res)
    }

    fn message(&self, body: &str) -> Message {
        Message::builder()
            .topic(self.topic.as_str())
            .body_slice(body.as_bytes())
            .build_unchecked()
    }

    async fn send_numbered(
        &mut self,
        p: usize,
        prefix: &str,
        n: usize,
    ) -> Result<BTreeSet<String>> {
        let mut out = BTreeSet::new();
        for i in 0..n {
            let b = format!("{prefix}{i}");
            let m = self.message(&b);
            self.send_ok(p, m).await?;
            out.insert(b);
        }
        Ok(out)
    }

    async fn run(&mut self) -> Result<()> {
        if self.scenario.starts_with(ACL_SCENARIO_PREFIX) {
            let ok = self.user_creds.is_some() && self.admin_creds.is_some();
            self.check(ok, || {
                format!("{ACL_USER_ENV} and {ACL_ADMIN_ENV} hold accessKey:secretKey")
            })?;
        }
        match self.scenario.as_str() {
            "send-sync" => self.send_sync().await,
            "send-async" => self.send_async().await,
            "send-oneway" => self.send_oneway().await,
            "send-batch" => self.send_batch().await,
            "properties" => self.properties().await,
            "compressed-body" => self.compressed_body().await,
            "clustering" => self.clustering().await,
            "broadcasting" => self.broadcasting().await,
            "delay-level" => self.delay_level().await,
            "from-first-offset" => self.first_offset_start().await,
            "from-last-offset" => {
                self.new_group_start("last", ConsumeFromWhere::ConsumeFromLastOffset)
                    .await
            }
            "from-timestamp" => {
                self.new_group_start("ts", ConsumeFromWhere::ConsumeFromTimestamp)
                    .await
            }
            "orderly" => self.orderly().await,
            "retry-dlq" => self.retry_dlq().await,
            "lite-pull-seek" => self.pull_seek().await,
            "pull-offset-restart" => self.pull_offset_restart().await,
            "tag-filter" => self.tag_filter().await,
            "transactions" => self.transactions().await,
            "acl-send-consume" => self.acl_send_consume().await,
            "acl-denied" => self.acl_denied().await,
            other => Err(CheckFailed(format!("unknown scenario {other}")).into()),
        }
    }

    // ------------------------------------------------------------ scenarios: produce side

    async fn send_sync(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let p = self.producer().await?;
        let count = 8;
        let mut sent = HashMap::new();
        let mut offsets: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
        for i in 0..count {
            let b = format!("sync-{i}");
            let m = self.message(&b);
            let res = self.send_ok(p, m).await?;
            let msg_id = res
                .msg_id
                .as_ref()
                .map(|s| s.to_string())
                .unwrap_or_default();
            self.check(!msg_id.is_empty(), || format!("send {i} has a msgId"))?;
            let offset_id = res.offset_msg_id.clone().unwrap_or_default();
            self.check(!offset_id.is_empty(), || {
                format!("send {i} has an offsetMsgId")
            })?;
            let queue = res.message_queue.clone();
            self.check(
                queue.as_ref().is_some_and(|q| q.topic_str() == topic),
                || format!("send {i} queue topic, got {queue:?}"),
            )?;
            if let Some(q) = queue {
                offsets
                    .entry(q.queue_id())
                    .or_default()
                    .push(res.queue_offset);
            }
            sent.insert(msg_id, b);
        }
        for (q, offs) in &offsets {
            for (i, o) in offs.iter().enumerate() {
                self.check(*o == i as u64, || {
                    format!("queue {q} offsets {offs:?} are 0,1,2...")
                })?;
            }
        }
        let c = Collector::default();
        self.push_consumer(&c, "*", MessageModel::Clustering, None)
            .await?;
        self.await_unique(&c, count, "sync messages delivered")
            .await?;
        for m in c.all() {
            let id = property(&m, UNIQ_KEY).unwrap_or_default();
            let b = body(&m);
            self.check(sent.get(&id) == Some(&b), || {
                format!("delivered {b} has the msgId returned by its send")
            })?;
        }
        Ok(())
    }

    async fn send_async(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let p = self.producer().await?;
        let count = 8;
        let results: Arc<Mutex<Vec<std::result::Result<String, String>>>> = Arc::default();
        for i in 0..count {
            let m = self.message(&format!("async-{i}"));
            let sink = results.clone();
            let accepted = self.producers[p]
                .send_with_callback_timeout(
                    m,
                    move |res: Option<&SendResult>, err: Option<&ClientError>| {
                        let outcome = match (res, err) {
                            (_, Some(e)) => Err(e.to_string()),
                            (Some(r), None) if r.send_status == SendStatus::SendOk => {
                                Ok(r.msg_id.as_ref().map(|s| s.to_string()).unwrap_or_default())
                            }
                            (Some(r), None) => Err(format!("status {:?}", r.send_status)),
                            (None, None) => Err("callback without result or error".into()),
                        };
                        lock(&sink).push(outcome);
                    },
                    SEND_TIMEOUT_MS,
                )
                .await;
            self.check(accepted.is_ok(), || {
                format!("async send {i} accepted: {:?}", accepted.err())
            })?;
        }
        let probe = results.clone();
        self.await_until(
            || lock(&probe).len() >= count,
            || "all async callbacks ran".into(),
        )
        .await?;
        let outcomes = lock(&results).clone();
        let failures: Vec<_> = outcomes.iter().filter_map(|r| r.as_ref().err()).collect();
        self.check(failures.is_empty(), || {
            format!("async sends succeeded: {failures:?}")
        })?;
        let ids: BTreeSet<String> = outcomes.into_iter().filter_map(|r| r.ok()).collect();
        self.check(ids.len() == count && !ids.contains(""), || {
            format!("async sends returned {count} distinct msgIds, got {ids:?}")
        })?;
        let c = Collector::default();
        self.push_consumer(&c, "*", MessageModel::Clustering, None)
            .await?;
        self.await_unique(&c, count, "async messages delivered")
            .await?;
        let delivered: BTreeSet<String> = c
            .all()
            .iter()
            .filter_map(|m| property(m, UNIQ_KEY))
            .collect();
        self.check(delivered == ids, || {
            format!("delivered msgIds {delivered:?} equal the async send results {ids:?}")
        })
    }

    async fn send_oneway(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let p = self.producer().await?;
        let count = 8;
        let mut want = BTreeSet::new();
        for i in 0..count {
            let b = format!("oneway-{i}");
            let m = self.message(&b);
            let sent = self.producers[p].send_oneway(m).await;
            self.check(sent.is_ok(), || {
                format!("oneway send {i}: {:?}", sent.err())
            })?;
            want.insert(b);
        }
        let c = Collector::default();
        self.push_consumer(&c, "*", MessageModel::Clustering, None)
            .await?;
        self.await_unique(&c, count, "oneway messages delivered")
            .await?;
        self.check(c.unique() == want, || {
            "delivered bodies equal the oneway sends".into()
        })
    }

    async fn send_batch(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let p = self.producer().await?;
        let count = 8;
        let batch: Vec<Message> = (0..count)
            .map(|i| {
                Message::builder()
                    .topic(topic.as_str())
                    .tags("TagBatch")
                    .key(format!("BatchKey{i}"))
                    .body_slice(format!("batch-{i}").as_bytes())
                    .build_unchecked()
            })
            .collect();
        let res = self.producers[p]
            .send_batch_with_timeout(batch, SEND_TIMEOUT_MS)
            .await;
        let res = match res {
            Ok(r) => r,
            Err(e) => return Err(CheckFailed(format!("batch send: {e}")).into()),
        };
        let status = res.send_status;
        self.check(status == SendStatus::SendOk, || {
            format!("batch status {status:?}")
        })?;
        let ids: Vec<String> = res
            .msg_id
            .as_ref()
            .map(|s| s.as_str().split(',').map(str::to_owned).collect())
            .unwrap_or_default();
        self.check(ids.len() == count, || {
            format!("batch result lists {count} msgIds, got {ids:?}")
        })?;
        let c = Collector::default();
        self.push_consumer(&c, "*", MessageModel::Clustering, None)
            .await?;
        self.await_unique(&c, count, "batch messages delivered")
            .await?;
        let mut queues = BTreeSet::new();
        let mut offsets = BTreeSet::new();
        for m in c.all() {
            queues.insert(m.queue_id());
            offsets.insert(m.queue_offset());
            let b = body(&m);
            let i: usize = b
                .strip_prefix("batch-")
                .and_then(|s| s.parse().ok())
                .unwrap_or(count);
            self.check(i < count, || format!("batch body {b}"))?;
            let keys = m.get_keys().map(|k| k.to_string());
            self.check(
                keys.as_deref() == Some(format!("BatchKey{i}").as_str()),
                || format!("batch message {i} keeps its key, got {keys:?}"),
            )?;
            let tags = m.get_tags().map(|t| t.to_string());
            self.check(tags.as_deref() == Some("TagBatch"), || {
                format!("batch message {i} keeps its tag, got {tags:?}")
            })?;
            let id = property(&m, UNIQ_KEY).unwrap_or_default();
            self.check(ids.get(i) == Some(&id), || {
                format!(
                    "batch message {i} has msgId {:?} from the send result, got {id}",
                    ids.get(i)
                )
            })?;
        }
        self.check(queues.len() == 1, || {
            format!("a batch lands in one queue, got {queues:?}")
        })?;
        let expected: BTreeSet<i64> = (0..count as i64).collect();
        self.check(offsets == expected, || {
            format!(
                "batch messages have consecutive offsets 0..{}, got {offsets:?}",
                count - 1
            )
        })
    }

    async fn properties(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let p = self.producer().await?;
        let m = Message::builder()
            .topic(topic.as_str())
            .tags("TagProps")
            .keys(vec!["KeyOne".into(), "KeyTwo".into()])
            .body_slice(b"props")
            .raw_property("cometPlain", "value1")
            .and_then(|b| b.raw_property("cometSpaces", "a value with spaces"))
            .and_then(|b| b.raw_property("cometUnicode", "h\u{e9}llo \u{4e16}\u{754c}"))
            .map_err(|e| anyhow!("building the message: {e}"))?
            .build_unchecked();
        self.send_ok(p, m).await?;
        let c = Collector::default();
        self.push_consumer(&c, "*", MessageModel::Clustering, None)
            .await?;
        self.await_unique(&c, 1, "message delivered").await?;
        let got = c
            .all()
            .into_iter()
            .next()
            .context("collector lost the message")?;
        let tags = got.get_tags().map(|t| t.to_string());
        self.check(tags.as_deref() == Some("TagProps"), || {
            format!("tag round-trips, got {tags:?}")
        })?;
        let keys = got.get_keys().map(|t| t.to_string());
        self.check(keys.as_deref() == Some("KeyOne KeyTwo"), || {
            format!("keys round-trip, got {keys:?}")
        })?;
        for (k, v) in [
            ("cometPlain", "value1"),
            ("cometSpaces", "a value with spaces"),
            ("cometUnicode", "h\u{e9}llo \u{4e16}\u{754c}"),
        ] {
            let got_v = property(&got, k);
            self.check(got_v.as_deref() == Some(v), || {
                format!("property {k}, got {got_v:?}")
            })?;
        }
        let (born, stored) = (got.born_timestamp(), got.store_timestamp());
        self.check(born > 0 && stored >= born, || {
            format!("born/store timestamps set and ordered: {born} / {stored}")
        })
    }

    async fn compressed_body(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let p = self.producer().await?;
        let mut text = String::new();
        let mut i = 0;
        while text.len() < BIG_BODY_LEN {
            text.push_str(&format!("comet compressible line {i}\n"));
            i += 1;
        }
        text.truncate(BIG_BODY_LEN);
        let m = self.message(&text);
        self.send_ok(p, m).await?;
        let c = Collector::default();
        self.push_consumer(&c, "*", MessageModel::Clustering, None)
            .await?;
        self.await_unique(&c, 1, "message delivered").await?;
        let got = c
            .all()
            .into_iter()
            .next()
            .context("collector lost the message")?;
        self.check(body(&got) == text, || {
            format!("decompressed body equals the {BIG_BODY_LEN}-byte original")
        })?;
        let (size, flag) = (got.store_size(), got.sys_flag());
        self.check(size < BIG_BODY_LEN as i32, || {
            format!("stored record ({size} bytes, sysFlag {flag}) is smaller than the body")
        })
    }

    // ------------------------------------------------------------ scenarios: push consumers

    async fn clustering(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let (a, b) = (Collector::default(), Collector::default());
        let (ta, tb) = (Arc::new(Tracker::default()), Arc::new(Tracker::default()));
        self.push_consumer(&a, "*", MessageModel::Clustering, Some(ta.clone()))
            .await?;
        self.push_consumer(&b, "*", MessageModel::Clustering, Some(tb.clone()))
            .await?;
        self.await_balanced(2, &[ta.clone(), tb.clone()]).await?;
        let p = self.producer().await?;
        let count = 40;
        let want = self.send_numbered(p, "cluster-", count).await?;
        let (pa, pb) = (a.clone(), b.clone());
        self.await_until(
            || pa.unique().union(&pb.unique()).count() >= count,
            || format!("both consumers together received {count}"),
        )
        .await?;
        let (na, nb) = (a.all().len(), b.all().len());
        self.check(na + nb == count, || {
            format!(
                "every message delivered exactly once, deliveries {}",
                na + nb
            )
        })?;
        self.check(na > 0 && nb > 0, || {
            format!("both consumers got messages: {na}/{nb}")
        })?;
        let all: BTreeSet<String> = a.unique().union(&b.unique()).cloned().collect();
        self.check(all == want, || "delivered exactly what was sent".into())?;
        for (name, c, t) in [("A", &a, &ta), ("B", &b, &tb)] {
            let (own, _) = t.state();
            for m in c.all() {
                let q = m.queue_id();
                self.check(own.contains(&q), || {
                    format!("consumer {name} only sees its own queues {own:?}, got queue {q}")
                })?;
            }
        }
        Ok(())
    }

    async fn await_balanced(&mut self, consumers: usize, trackers: &[Arc<Tracker>]) -> Result<()> {
        let probe: Vec<Arc<Tracker>> = trackers.to_vec();
        self.await_until(
            || {
                let mut union = BTreeSet::new();
                let mut total = 0;
                for t in &probe {
                    let (ids, cids) = t.state();
                    if cids != consumers {
                        return false;
                    }
                    total += ids.len();
                    union.extend(ids);
                }
                union.len() == QUEUES as usize && total == QUEUES as usize
            },
            || {
                format!(
                    "rebalance gives the {consumers} consumer(s) all {QUEUES} queues without overlap"
                )
            },
        )
        .await
    }

    async fn broadcasting(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let (a, b) = (Collector::default(), Collector::default());
        self.push_consumer(&a, "*", MessageModel::Broadcasting, None)
            .await?;
        self.push_consumer(&b, "*", MessageModel::Broadcasting, None)
            .await?;
        let p = self.producer().await?;
        let want = self.send_numbered(p, "broadcast-", 20).await?;
        self.await_unique(&a, want.len(), "consumer A received every message")
            .await?;
        self.await_unique(&b, want.len(), "consumer B received every message")
            .await?;
        self.check(a.unique() == want, || {
            "consumer A got exactly the sent bodies".into()
        })?;
        self.check(b.unique() == want, || {
            "consumer B got exactly the sent bodies".into()
        })
    }

    async fn delay_level(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let c = Collector::default();
        self.push_consumer(&c, "*", MessageModel::Clustering, None)
            .await?;
        let p = self.producer().await?;
        let m = Message::builder()
            .topic(topic.as_str())
            .tags("TagDelay")
            .delay_level(DELAY_LEVEL)
            .body_slice(b"delayed")
            .build_unchecked();
        self.send_ok(p, m).await?;
        self.await_unique(&c, 1, "delayed message delivered")
            .await?;
        let got = c
            .all()
            .into_iter()
            .next()
            .context("collector lost the message")?;
        let waited = got.store_timestamp() - got.born_timestamp();
        self.check(waited >= DELAY_LEVEL_MIN_MS, || {
            format!(
                "stored in the topic at least {DELAY_LEVEL_MIN_MS} ms after birth, got {waited} ms"
            )
        })?;
        let got_topic = got.topic().to_string();
        self.check(got_topic == topic, || {
            format!("delivered on the real topic, got {got_topic}")
        })?;
        let tags = got.get_tags().map(|t| t.to_string());
        self.check(tags.as_deref() == Some("TagDelay"), || {
            format!("tag survives the schedule topic, got {tags:?}")
        })
    }

    async fn first_offset_start(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let p = self.producer().await?;
        let before = self.send_numbered(p, "first-before-", 8).await?;
        let c = Collector::default();
        self.push_consumer(&c, "*", MessageModel::Clustering, None)
            .await?;
        self.await_unique(
            &c,
            before.len(),
            "messages sent before the group existed are delivered",
        )
        .await?;
        let after = self.send_numbered(p, "first-after-", 4).await?;
        let all: BTreeSet<String> = before.union(&after).cloned().collect();
        self.await_unique(&c, all.len(), "messages sent afterwards are delivered")
            .await?;
        self.check(c.unique() == all, || {
            "delivered exactly what was sent".into()
        })
    }

    /// from-last-offset / from-timestamp: no client sends setZeroIfNotFound, so a broker that
    /// still holds a queue's first message answers offset 0 to QUERY_CONSUMER_OFFSET and a new
    /// group starts there (Apache's rule): every message, before and after the boundary, arrives.
    async fn new_group_start(&mut self, prefix: &str, from: ConsumeFromWhere) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let p = self.producer().await?;
        let before = self
            .send_numbered(p, &format!("{prefix}-before-"), 8)
            .await?;
        // consumeTimestamp has a one-second resolution: the boundary is the next whole second.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .context("clock before 1970")?;
        let boundary = now.as_secs() + 1;
        tokio::time::sleep(Duration::from_secs(boundary) - now).await;
        let after = self
            .send_numbered(p, &format!("{prefix}-after-"), 4)
            .await?;
        let c = Collector::default();
        let t = Arc::new(Tracker::default());
        let mut consumer = self
            .consumer_builder(MessageModel::Clustering, from, Some(t.clone()))
            .consume_timestamp(consume_timestamp(boundary))
            .build();
        consumer
            .subscribe(&topic, "*")
            .await
            .map_err(client("subscribe"))?;
        consumer.register_message_listener_concurrently(c.clone());
        consumer.start().await.map_err(client("consumer start"))?;
        self.consumers.push(consumer);
        self.await_balanced(1, &[t]).await?;
        let all: BTreeSet<String> = before.union(&after).cloned().collect();
        self.await_unique(
            &c,
            all.len(),
            "new group starts at offset 0 of queues whose first message is present",
        )
        .await?;
        self.check(c.unique() == all, || {
            "delivered exactly what was sent".into()
        })
    }

    async fn orderly(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let seen = OrderlyCollector::default();
        let mut consumer = self
            .consumer_builder(
                MessageModel::Clustering,
                ConsumeFromWhere::ConsumeFromFirstOffset,
                None,
            )
            .build();
        consumer
            .subscribe(&topic, "*")
            .await
            .map_err(client("subscribe"))?;
        consumer.register_message_listener_orderly(seen.clone());
        consumer.start().await.map_err(client("consumer start"))?;
        self.consumers.push(consumer);
        let p = self.producer().await?;
        let (keys, per_key) = (8, 10);
        let mut queue_of_key: HashMap<String, i32> = HashMap::new();
        for seq in 0..per_key {
            for k in 0..keys {
                let key = format!("order-{k}");
                let m = self.message(&format!("{key}:{seq}"));
                let res = self.producers[p]
                    .send_with_selector_timeout(
                        m,
                        |mqs: &[MessageQueue], _m: &Message, key: &String| {
                            let n = i32::try_from(mqs.len()).ok().filter(|n| *n > 0)?;
                            let i = usize::try_from(java_hash(key).rem_euclid(n)).ok()?;
                            mqs.get(i).cloned()
                        },
                        key.clone(),
                        SEND_TIMEOUT_MS,
                    )
                    .await;
                let q = match &res {
                    Ok(Some(r)) if r.send_status == SendStatus::SendOk => {
                        r.message_queue.as_ref().map(MessageQueue::queue_id)
                    }
                    _ => None,
                };
                self.check(q.is_some(), || format!("send {key}:{seq}: {res:?}"))?;
                let q = q.unwrap_or_default();
                let first = *queue_of_key.entry(key.clone()).or_insert(q);
                self.check(first == q, || format!("selector keeps {key} on one queue"))?;
            }
        }
        let total = keys * per_key;
        let probe = seen.clone();
        self.await_until(
            || lock(&probe.0).len() >= total,
            || format!("orderly consumer received {total}"),
        )
        .await?;
        let got = lock(&seen.0).clone();
        let mut next_seq: HashMap<String, usize> = HashMap::new();
        let mut last_offset: HashMap<i32, i64> = HashMap::new();
        for m in &got {
            let b = body(m);
            let parsed = b
                .split_once(':')
                .and_then(|(k, s)| s.parse::<usize>().ok().map(|s| (k.to_owned(), s)));
            self.check(parsed.is_some(), || format!("orderly body {b}"))?;
            let (key, seq) = parsed.unwrap_or_default();
            let expected = next_seq.get(&key).copied().unwrap_or(0);
            self.check(seq == expected, || {
                format!("{key} delivered in order: expected seq {expected}, got {seq}")
            })?;
            next_seq.insert(key.clone(), seq + 1);
            let q = m.queue_id();
            self.check(queue_of_key.get(&key) == Some(&q), || {
                format!("{key} delivered from its selected queue")
            })?;
            if let Some(prev) = last_offset.get(&q).copied() {
                let off = m.queue_offset();
                self.check(off == prev + 1, || {
                    format!("queue {q} offsets consecutive in delivery order: {prev} then {off}")
                })?;
            }
            last_offset.insert(q, m.queue_offset());
        }
        let n = got.len();
        self.check(n == total, || format!("no duplicates, got {n}"))
    }

    /// RECONSUME_LATER with maxReconsumeTimes 2: deliveries with reconsumeTimes 0, 1, 2, then the
    /// message is pulled from %DLQ%group, still carrying its body and original topic.
    async fn retry_dlq(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let recorder = RetryRecorder::default();
        let mut consumer = self
            .consumer_builder(
                MessageModel::Clustering,
                ConsumeFromWhere::ConsumeFromFirstOffset,
                None,
            )
            .max_reconsume_times(MAX_RECONSUME)
            .build();
        consumer
            .subscribe(&topic, "*")
            .await
            .map_err(client("subscribe"))?;
        consumer.register_message_listener_concurrently(recorder.clone());
        consumer.start().await.map_err(client("consumer start"))?;
        self.consumers.push(consumer);
        let p = self.producer().await?;
        let keys = ["dlq-key-0", "dlq-key-1"];
        for k in keys {
            let m = Message::builder()
                .topic(topic.as_str())
                .tags("TagDlq")
                .key(k)
                .body_slice(format!("dlq-body-{k}").as_bytes())
                .build_unchecked();
            self.send_ok(p, m).await?;
        }
        let want: BTreeSet<i32> = (0..=MAX_RECONSUME).collect();
        let probe = recorder.clone();
        self.await_until(
            || {
                let attempts = lock(&probe.attempts);
                keys.iter().all(|k| attempts.get(*k) == Some(&want))
            },
            || format!("each message delivered with reconsumeTimes 0..{MAX_RECONSUME}"),
        )
        .await?;
        let dlq = format!("{DLQ_PREFIX}{}", self.group);
        let dead = self.pull_all(&dlq, keys.len()).await?;
        let mut dead_keys = BTreeSet::new();
        for m in &dead {
            let key = m.get_keys().map(|k| k.to_string()).unwrap_or_default();
            let (got_topic, b) = (m.topic().to_string(), body(m));
            self.check(got_topic == dlq, || {
                format!("dead message topic is {dlq}, got {got_topic}")
            })?;
            self.check(b == format!("dlq-body-{key}"), || {
                format!("dead message {key} keeps its body, got {b}")
            })?;
            let retry_topic = property(m, "RETRY_TOPIC");
            self.check(retry_topic.as_deref() == Some(topic.as_str()), || {
                format!(
                    "dead message records its original topic in RETRY_TOPIC, got {retry_topic:?}"
                )
            })?;
            dead_keys.insert(key);
        }
        let want_keys: BTreeSet<String> = keys.iter().map(|k| (*k).to_owned()).collect();
        self.check(dead_keys == want_keys, || {
            format!("both messages are in {dlq}, got {dead_keys:?}")
        })?;
        let unexpected = lock(&recorder.unexpected).clone();
        self.check(unexpected.is_empty(), || {
            format!("no delivery repeated or beyond maxReconsumeTimes: {unexpected:?}")
        })
    }

    /// The Rust row of the lite-pull-with-seek scenario, like the Go one: "seek" is a classic
    /// pull at an explicit offset of one queue.
    #[allow(
        deprecated,
        reason = "classic pull is the client's API for reading at explicit offsets"
    )]
    async fn pull_seek(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let p = self.producer().await?;
        let count: i64 = 10;
        let queues = self.producers[p]
            .fetch_publish_message_queues(&topic)
            .await
            .map_err(client("fetch publish queues"))?;
        let mq = queues
            .iter()
            .find(|q| q.queue_id() == 0)
            .cloned()
            .context("queue 0 is published")?;
        for i in 0..count {
            let m = self.message(&format!("seek-{i}"));
            let res = self.producers[p]
                .send_to_queue_with_timeout(m, mq.clone(), SEND_TIMEOUT_MS)
                .await;
            let ok = matches!(&res, Ok(Some(r)) if r.send_status == SendStatus::SendOk);
            self.check(ok, || format!("send seek-{i} to queue 0: {res:?}"))?;
        }
        // Acknowledged sends reach the ConsumeQueue by asynchronous dispatch: wait until all are
        // pullable before reading at explicit offsets.
        self.pull_all(&topic, count as usize).await?;
        let puller = DefaultMQPullConsumer::builder(self.runtime.clone())
            .consumer_group(self.group.clone())
            .name_server_addr(self.namesrv.clone())
            .build()
            .map_err(client("pull consumer"))?;
        puller
            .start()
            .await
            .map_err(client("pull consumer start"))?;
        let from_five = puller.pull(&mq, "*", 5, count as i32).await;
        let got: Vec<MessageExt> = match &from_five {
            Ok(r) => r.msg_found_list().unwrap_or_default().to_vec(),
            Err(_) => Vec::new(),
        };
        self.check(got.len() == 5, || {
            format!(
                "pull from offset 5 yields 5, got {} ({:?})",
                got.len(),
                from_five.err()
            )
        })?;
        for (i, m) in (5..).zip(&got) {
            let (off, b) = (m.queue_offset(), body(m));
            self.check(off == i && b == format!("seek-{i}"), || {
                format!("message after seek(5) at offset {i} is seek-{i}, got {b} at {off}")
            })?;
        }
        let again = puller.pull(&mq, "*", 2, 1).await;
        let first = match &again {
            Ok(r) => r.msg_found_list().unwrap_or_default().first().cloned(),
            Err(_) => None,
        };
        let rewound = first
            .as_ref()
            .map(|m| (m.queue_offset(), body(m)))
            .unwrap_or_default();
        let _ = puller.shutdown().await;
        self.check(rewound == (2, "seek-2".to_owned()), || {
            format!("seek(2) rewinds to seek-2, got {rewound:?}")
        })
    }

    /// A pull consumer commits offset 4 of 10 and shuts down; a new one of the same group reads
    /// the committed offset from the broker and pulls exactly the 6 unconsumed messages.
    #[allow(
        deprecated,
        reason = "classic pull is the client's API for reading at explicit offsets"
    )]
    async fn pull_offset_restart(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let p = self.producer().await?;
        let (count, committed): (i64, i64) = (10, 4);
        let queues = self.producers[p]
            .fetch_publish_message_queues(&topic)
            .await
            .map_err(client("fetch publish queues"))?;
        let mq = queues
            .iter()
            .find(|q| q.queue_id() == 0)
            .cloned()
            .context("queue 0 is published")?;
        for i in 0..count {
            let m = self.message(&format!("pull-{i}"));
            let res = self.producers[p]
                .send_to_queue_with_timeout(m, mq.clone(), SEND_TIMEOUT_MS)
                .await;
            let ok = matches!(&res, Ok(Some(r)) if r.send_status == SendStatus::SendOk);
            self.check(ok, || format!("send pull-{i} to queue 0: {res:?}"))?;
        }
        // Acknowledged sends reach the ConsumeQueue by asynchronous dispatch: wait until all are
        // pullable before reading at explicit offsets.
        self.pull_all(&topic, count as usize).await?;
        let (runtime, group, namesrv) = (
            self.runtime.clone(),
            self.group.clone(),
            self.namesrv.clone(),
        );
        let puller = move || {
            DefaultMQPullConsumer::builder(runtime.clone())
                .consumer_group(group.clone())
                .name_server_addr(namesrv.clone())
                .build()
                .map_err(client("pull consumer"))
        };
        let first = puller()?;
        first.start().await.map_err(client("pull consumer start"))?;
        let r = first
            .pull(&mq, "*", 0, committed as i32)
            .await
            .map_err(client("first pull"))?;
        let n = r.msg_found_list().map_or(0, <[MessageExt]>::len);
        self.check(n == committed as usize, || {
            format!("pull of {committed} returns {committed}, got {n}")
        })?;
        let (next, max) = (r.next_begin_offset(), r.max_offset());
        self.check(next == committed as u64, || {
            format!("nextBeginOffset {committed}, got {next}")
        })?;
        self.check(max == count as u64, || {
            format!("maxOffset {count}, got {max}")
        })?;
        let updated = first.update_consume_offset(&mq, committed).await;
        self.check(updated.is_ok(), || {
            format!("update offset: {:?}", updated.err())
        })?;
        let stopped = first.shutdown().await;
        self.check(stopped.is_ok(), || {
            format!(
                "first consumer shuts down (persisting its offset): {:?}",
                stopped.err()
            )
        })?;
        let second = puller()?;
        second
            .start()
            .await
            .map_err(client("pull consumer start"))?;
        // The first consumer may persist its offset oneway at shutdown (Java's client does): poll
        // the broker until it has the offset, within the step deadline.
        let deadline = Instant::now() + STEP_TIMEOUT;
        let stored = loop {
            let stored = second.fetch_consume_offset(&mq, true).await;
            if matches!(stored, Ok(o) if o == committed) || Instant::now() > deadline {
                break stored;
            }
            tokio::time::sleep(POLL_EVERY).await;
        };
        let stored_ok = matches!(stored, Ok(o) if o == committed);
        let rest = second.pull(&mq, "*", committed, count as i32).await;
        let end = second.pull(&mq, "*", count, count as i32).await;
        let _ = second.shutdown().await;
        self.check(stored_ok, || {
            format!("restarted consumer reads committed offset {committed}, got {stored:?}")
        })?;
        let msgs: Vec<String> = match &rest {
            Ok(r) => r
                .msg_found_list()
                .unwrap_or_default()
                .iter()
                .map(body)
                .collect(),
            Err(_) => Vec::new(),
        };
        let want: Vec<String> = (committed..count).map(|i| format!("pull-{i}")).collect();
        self.check(msgs == want, || {
            format!(
                "second pull returns the unconsumed {want:?}, got {msgs:?} ({:?})",
                rest.err()
            )
        })?;
        let end_status = end.as_ref().map(|r| format!("{:?}", r.pull_status()));
        self.check(
            matches!(&end, Ok(r) if r.msg_found_list().unwrap_or_default().is_empty()),
            || format!("pull at the end finds nothing, got {end_status:?}"),
        )
    }

    /// Pulls every queue of `topic` from offset 0 until `expected` messages are in.
    #[allow(
        deprecated,
        reason = "classic pull is the client's API for reading at explicit offsets"
    )]
    async fn pull_all(&mut self, topic: &str, expected: usize) -> Result<Vec<MessageExt>> {
        let mut builder = DefaultMQPullConsumer::builder(self.runtime.clone())
            .consumer_group(format!("MxPull_{}", self.suffix))
            .name_server_addr(self.namesrv.clone());
        if let Some(c) = &self.user_creds {
            builder = builder.rpc_hook(hook(c, ""));
        }
        let puller = builder.build().map_err(client("pull consumer"))?;
        puller
            .start()
            .await
            .map_err(client("pull consumer start"))?;
        let deadline = Instant::now() + STEP_TIMEOUT;
        let mut last = String::from("nothing pulled yet");
        let found = loop {
            let mut out = Vec::new();
            match puller.fetch_subscribe_message_queues(topic).await {
                Ok(queues) => {
                    for mq in &queues {
                        match puller.pull(mq, "*", 0, PULL_BATCH).await {
                            Ok(r) => {
                                out.extend(r.msg_found_list().unwrap_or_default().iter().cloned())
                            }
                            Err(e) => last = e.to_string(),
                        }
                    }
                    if out.len() < expected {
                        last = format!("found {}", out.len());
                    }
                }
                Err(e) => last = e.to_string(),
            }
            if out.len() >= expected {
                break Some(out);
            }
            if Instant::now() > deadline {
                break None;
            }
            tokio::time::sleep(POLL_EVERY * 4).await;
        };
        let _ = puller.shutdown().await;
        match found {
            Some(out) => {
                self.checks += 1;
                Ok(out)
            }
            None => {
                Err(CheckFailed(format!("pull {expected} messages from {topic}: {last}")).into())
            }
        }
    }

    async fn tag_filter(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let p = self.producer().await?;
        let queues = self.producers[p]
            .fetch_publish_message_queues(&topic)
            .await
            .map_err(client("fetch publish queues"))?;
        self.check(queues.len() == QUEUES as usize, || {
            format!("{QUEUES} publish queues, got {}", queues.len())
        })?;
        let tags = [
            "TagA", "TagC", "TagB", "TagC", "TagA", "TagB", "TagC", "TagA",
        ];
        let mut want = BTreeSet::new();
        let mut sends: Vec<(String, &str, usize)> = Vec::new();
        for (i, tag) in tags.iter().enumerate() {
            let b = format!("{tag}-{i}");
            if *tag != "TagC" {
                want.insert(b.clone());
            }
            sends.push((b, tag, i % QUEUES as usize));
        }
        // The last message of every queue is a wanted one: once all wanted ones are in, every
        // TagC message has been passed over by the broker's or the client's filter.
        for q in 0..QUEUES as usize {
            let b = format!("TagB-tail-{q}");
            want.insert(b.clone());
            sends.push((b, "TagB", q));
        }
        for (b, tag, q) in sends {
            let mq = queues
                .iter()
                .find(|mq| mq.queue_id() == q as i32)
                .cloned()
                .context("publish queue missing")?;
            let m = Message::builder()
                .topic(topic.as_str())
                .tags(tag)
                .body_slice(b.as_bytes())
                .build_unchecked();
            let res = self.producers[p]
                .send_to_queue_with_timeout(m, mq, SEND_TIMEOUT_MS)
                .await;
            let ok = matches!(&res, Ok(Some(r)) if r.send_status == SendStatus::SendOk);
            self.check(ok, || format!("send {b} to queue {q}: {res:?}"))?;
        }
        // Written without spaces: rocketmq-client-rust 1.0.0 hashes each tag of "TagA || TagB"
        // before trimming it (FilterAPI::build_subscription_data), so with spaces its codeSet
        // matches no stored tag and no broker, Apache's included, delivers anything.
        let c = Collector::default();
        self.push_consumer(&c, "TagA||TagB", MessageModel::Clustering, None)
            .await?;
        self.await_unique(&c, want.len(), "every TagA/TagB message delivered")
            .await?;
        self.check(c.unique() == want, || {
            format!(
                "exactly the TagA/TagB messages delivered, got {:?}",
                c.unique()
            )
        })?;
        for m in c.all() {
            let tag = m.get_tags().map(|t| t.to_string()).unwrap_or_default();
            self.check(tag == "TagA" || tag == "TagB", || {
                format!("delivered tag {tag}")
            })?;
        }
        Ok(())
    }

    // ------------------------------------------------------------ scenarios: transactions

    /// One half message committed, one rolled back, one UNKNOWN and committed on the broker's
    /// check: exactly the two committed ones are delivered, the broker asks about the UNKNOWN one
    /// only, and the rolled-back one never reaches the topic's queues.
    async fn transactions(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let c = Collector::default();
        self.push_consumer(&c, "*", MessageModel::Clustering, None)
            .await?;
        let listener = TxnListener::default();
        let mut producer = TransactionMQProducer::builder(self.runtime.clone())
            .client_config(self.client_config())
            .producer_group(self.producer_group())
            .name_server_addr(self.namesrv.clone())
            .send_msg_timeout(SEND_TIMEOUT_MS as u32)
            .transaction_listener(listener.clone())
            .build();
        producer
            .start()
            .await
            .map_err(client("transaction producer start"))?;
        self.txn_producers.push(producer);
        let mut id_of = HashMap::new();
        for b in ["txn-commit", "txn-rollback", "txn-unknown"] {
            let m = Message::builder()
                .topic(topic.as_str())
                .tags("TagTxn")
                .body_slice(b.as_bytes())
                .build_unchecked();
            let sent = match self.txn_producers.last() {
                Some(p) => p.send_message_in_transaction::<(), _>(m, None).await,
                None => return Err(anyhow!("transaction producer missing")),
            };
            let res = match sent {
                Ok(r) => r,
                Err(e) => return Err(CheckFailed(format!("{b}: send half message: {e}")).into()),
            };
            let status = res.send_result.as_ref().map(|r| r.send_status);
            self.check(status == Some(SendStatus::SendOk), || {
                format!("{b}: half message stored, got {status:?}")
            })?;
            let state = res.local_transaction_state;
            self.check(state == Some(first_answer(b)), || {
                format!(
                    "{b}: local transaction state {:?}, got {state:?}",
                    first_answer(b)
                )
            })?;
            let id = res
                .send_result
                .as_ref()
                .and_then(|r| r.msg_id.as_ref())
                .map(|s| s.to_string())
                .unwrap_or_default();
            self.check(!id.is_empty(), || format!("{b}: send result has a msgId"))?;
            id_of.insert(b.to_owned(), id);
        }
        self.await_unique(
            &c,
            2,
            "the committed and the checked-then-committed messages delivered",
        )
        .await?;
        let want: BTreeSet<String> = ["txn-commit", "txn-unknown"].map(String::from).into();
        self.check(c.unique() == want, || {
            format!(
                "exactly the committed messages delivered, got {:?}",
                c.bodies()
            )
        })?;
        for m in c.all() {
            let b = body(&m);
            let got_topic = m.topic().to_string();
            self.check(got_topic == topic, || {
                format!("delivered on the real topic, got {got_topic}")
            })?;
            let id = property(&m, UNIQ_KEY);
            self.check(id.as_ref() == id_of.get(&b), || {
                format!("{b} delivered with the msgId of its half message")
            })?;
        }
        let checked = lock(&listener.checked).clone();
        let unknown_id = id_of.get("txn-unknown").cloned().unwrap_or_default();
        self.check(checked.iter().any(|(id, _)| *id == unknown_id), || {
            format!("the broker asked the producer about the UNKNOWN transaction, asked about {checked:?}")
        })?;
        self.check(checked.iter().all(|(_, b)| b == "txn-unknown"), || {
            format!("only the UNKNOWN transaction was checked, asked about {checked:?}")
        })?;
        let p = self.producer().await?;
        let queues = self.producers[p]
            .fetch_publish_message_queues(&topic)
            .await
            .map_err(client("fetch publish queues"))?;
        let mut total = 0;
        for mq in &queues {
            total += self.producers[p]
                .max_offset(mq)
                .await
                .map_err(client("max offset"))?;
        }
        self.check(total == 2, || {
            format!("the topic's queues hold the 2 committed messages only, max offsets add up to {total}")
        })
    }

    // ------------------------------------------------------------ scenarios: ACL

    /// Signed sends and a signed consumer on a topic and group the account is granted.
    async fn acl_send_consume(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        self.create_topic(&topic).await?;
        let p = self.producer().await?;
        let want = self.send_numbered(p, "acl-", 8).await?;
        let c = Collector::default();
        self.push_consumer(&c, "*", MessageModel::Clustering, None)
            .await?;
        self.await_unique(&c, want.len(), "signed consumer received the signed sends")
            .await?;
        self.check(c.unique() == want, || {
            "delivered exactly what was sent".into()
        })?;
        let n = c.all().len();
        self.check(n == want.len(), || {
            format!("every message delivered once, deliveries {n}")
        })
    }

    /// A granted send first (the account works), then two refusals: a topic outside the
    /// account's topicPerms, and a producer signing with a wrong secret key.
    async fn acl_denied(&mut self) -> Result<()> {
        let topic = self.topic.clone();
        let forbidden = format!("MxT_acl_forbidden_{}", self.suffix);
        self.create_topic(&topic).await?;
        self.create_topic(&forbidden).await?;
        let p = self.producer().await?;
        let m = self.message("granted");
        self.send_ok(p, m).await?;
        let m = Message::builder()
            .topic(forbidden.as_str())
            .body_slice(b"forbidden")
            .build_unchecked();
        let res = self.producers[p]
            .send_with_timeout(m, SEND_TIMEOUT_MS)
            .await;
        self.expect_denied(res, &format!("send to {forbidden} (not in topicPerms)"))?;
        let wrong = self
            .user_creds
            .as_ref()
            .map(|c| hook(c, "-wrong"))
            .context("no ACL account")?;
        let w = self
            .producer_with(format!("MxP_acl_wrong_{}", self.suffix), Some(wrong))
            .await?;
        let m = self.message("wrong-secret");
        let res = self.producers[w]
            .send_with_timeout(m, SEND_TIMEOUT_MS)
            .await;
        self.expect_denied(res, "send signed with a wrong secret key")
    }

    /// The send must fail with NO_PERMISSION. Unlike the Java and Go rows, the error text is not
    /// checked for the refused rule: rocketmq-client-rust 1.0.0 keeps the broker's remark
    /// in a redacted field of its error (visibility SecretPresenceOnly), so only the code reaches
    /// the application.
    fn expect_denied(
        &mut self,
        res: rocketmq_client_rust::ClientResult<Option<SendResult>>,
        what: &str,
    ) -> Result<()> {
        let err = match res {
            Ok(r) => return self.check(false, || format!("{what} was accepted: {r:?}")),
            Err(e) => e,
        };
        let code = err.broker_response_code();
        self.check(code == Some(NO_PERMISSION), || {
            format!("{what} fails with NO_PERMISSION (16), got code {code:?}: {err}")
        })
    }

    /// Shuts every client down; the verdict is already printed.
    async fn shutdown(&mut self) {
        for c in &mut self.consumers {
            c.shutdown().await;
        }
        for p in &mut self.producers {
            p.shutdown().await;
        }
        for p in &mut self.txn_producers {
            p.shutdown().await;
        }
        for a in &mut self.admins {
            a.shutdown().await;
        }
    }
}

/// The client's runtime, as the crate's own examples set it up: a runtime owner, telemetry, and
/// the client runtime every builder takes.
struct ClientHome {
    owner: RuntimeOwner,
    runtime: Arc<ClientRuntime>,
    telemetry: rocketmq_observability::TelemetryRuntimeGuard,
}

impl ClientHome {
    fn new() -> Result<Self> {
        let owner = RuntimeOwner::plan(RuntimeConfig {
            thread_name: "matrix-rust".into(),
            ..Default::default()
        })
        .map_err(|e| anyhow!("runtime plan: {e}"))?
        .build()
        .map_err(|e| anyhow!("runtime build: {e}"))?;
        let telemetry = rocketmq_observability::install_global(
            &rocketmq_observability::TelemetryBootstrapConfig::default(),
        )
        .map_err(|e| anyhow!("telemetry: {e}"))?;
        let runtime = ClientRuntime::try_new(
            owner.root_context().component("client"),
            ClientRuntimeConfig::default(),
            telemetry.handle(),
        )
        .map_err(client("client runtime"))?;
        Ok(Self {
            owner,
            runtime,
            telemetry,
        })
    }

    async fn shutdown(self) {
        let _ = self.runtime.shutdown().await;
        let _ = self.owner.shutdown_tasks().await;
        let _ = self.owner.shutdown_background();
        let _ = self.telemetry.shutdown();
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, scenario, namesrv, suffix] = args.as_slice() else {
        eprintln!("usage: matrix-rust <scenario> <namesrv> <suffix>");
        return ExitCode::from(2);
    };
    let home = match ClientHome::new() {
        Ok(h) => h,
        Err(e) => {
            println!("CHECKS 0");
            println!("FAIL {scenario}: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let tag = scenario.replace('-', "_");
    let acl = scenario.starts_with(ACL_SCENARIO_PREFIX);
    let mut runner = Runner {
        scenario: scenario.clone(),
        namesrv: namesrv.clone(),
        suffix: suffix.clone(),
        topic: format!("MxT_{tag}_{suffix}"),
        group: format!("MxG_{tag}_{suffix}"),
        broker_addr: std::env::var("MATRIX_BROKER_ADDR").unwrap_or_default(),
        checks: 0,
        instances: AtomicU32::new(0),
        runtime: home.runtime.clone(),
        producers: Vec::new(),
        txn_producers: Vec::new(),
        consumers: Vec::new(),
        admins: Vec::new(),
        user_creds: acl.then(|| acl_credentials(ACL_USER_ENV)).flatten(),
        admin_creds: acl.then(|| acl_credentials(ACL_ADMIN_ENV)).flatten(),
    };
    let outcome = runner.run().await;
    println!("CHECKS {}", runner.checks);
    let code = match outcome {
        Ok(()) => {
            println!("PASS {scenario}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            let text = format!("{e:#}").replace('\n', " ");
            println!("FAIL {scenario}: {text}");
            ExitCode::FAILURE
        }
    };
    let _ = tokio::time::timeout(SHUTDOWN_WAIT, async {
        runner.shutdown().await;
        drop(runner);
        home.shutdown().await;
    })
    .await;
    code
}

#[cfg(test)]
mod tests {
    use super::consume_timestamp;

    #[test]
    fn consume_timestamp_is_utc_civil_time() {
        assert_eq!(consume_timestamp(0), "19700101000000");
        // 2026-11-30T09:00:43Z, and the last second of a leap day.
        assert_eq!(consume_timestamp(1_796_029_243), "20261130090043");
        assert_eq!(consume_timestamp(951_868_799), "20000229235959");
    }
}
