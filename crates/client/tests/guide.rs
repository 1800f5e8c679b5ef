//! The SDK guide's examples, checked twice:
//!
//! - **No drift.** `docs/client-sdk.md` shows every file of `crates/client/examples/` verbatim:
//!   each ```` ```rust,no_run ```` block after a `<!-- example: NAME -->` marker must equal
//!   `crates/client/examples/NAME.rs` byte for byte. Edit the example file, then run
//!   `UPDATE_GUIDE=1 cargo test -p comet-client --test guide` to copy it into the guide. (The
//!   blocks are also compiled as doc tests: `cargo test -p comet-client --doc`.)
//! - **End to end.** Each example's `run` works against a real in-process name server and broker,
//!   and what it returns is checked: every message received exactly once, order kept per queue,
//!   both broadcasting members served, only committed transactions visible, signed requests
//!   accepted where unsigned ones are refused.
//! - **The crate docs.** The programs the crate-level guide of `src/lib.rs` shows are files of
//!   `examples/` too, included verbatim: [`the_crate_docs_show_example_files`] checks that each
//!   code block of the crate docs is an included example, so the end-to-end tests here cover
//!   them.
//!
//! The examples use the default client instance name, as applications do, so all their clients
//! in this process share one client instance per name server. The tests therefore run one at a
//! time (each against its own broker), serialized by [`SERIAL`]. Nothing sleeps to synchronize:
//! asynchronous effects are polled until a deadline.

#[allow(dead_code)]
#[path = "../examples/acl.rs"]
mod acl;
#[allow(dead_code)]
#[path = "../examples/admin.rs"]
mod admin;
#[allow(dead_code)]
#[path = "../examples/async_orderly.rs"]
mod async_orderly;
#[allow(dead_code)]
#[path = "../examples/async_transaction.rs"]
mod async_transaction;
#[allow(dead_code)]
#[path = "../examples/broadcasting.rs"]
mod broadcasting;
#[allow(dead_code)]
#[path = "../examples/delay.rs"]
mod delay;
#[allow(dead_code)]
#[path = "../examples/lite_pull.rs"]
mod lite_pull;
#[allow(dead_code)]
#[path = "../examples/producer.rs"]
mod producer;
#[allow(dead_code)]
#[path = "../examples/pull.rs"]
mod pull;
#[allow(dead_code)]
#[path = "../examples/pull_builders.rs"]
mod pull_builders;
#[allow(dead_code)]
#[path = "../examples/push_concurrently.rs"]
mod push_concurrently;
#[allow(dead_code)]
#[path = "../examples/push_orderly.rs"]
mod push_orderly;
#[allow(dead_code)]
#[path = "../examples/quickstart.rs"]
mod quickstart;
#[allow(dead_code)]
#[path = "../examples/trace.rs"]
mod trace;
#[allow(dead_code)]
#[path = "../examples/transaction.rs"]
mod transaction;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use comet_client::admin::topic::default_topic_config;
use comet_client::admin::{MQAdmin, TopicTarget};
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::{
    ClientConfig, LocalTransactionState, Message, SendResult, SendStatus, SessionCredentials,
};
use comet_testkit::client::{Cluster, wait_until};

/// Queues of the topics the tests create.
const QUEUES: i32 = 4;
/// Response code NO_PERMISSION.
const NO_PERMISSION: i32 = 16;

/// One example at a time: see the module docs.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// ---------------------------------------------------------------------------------------------
// The guide and the example files.

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn guide_path() -> PathBuf {
    repo_root().join("docs/client-sdk.md")
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// A fenced block of the guide that follows a `<!-- KIND: NAME -->` marker.
#[derive(Debug)]
struct MarkedBlock {
    name: String,
    /// Byte range of the block's content (after the opening fence line, before the closing one).
    content: std::ops::Range<usize>,
}

/// Every block after a `<!-- kind: NAME -->` marker, whose fence must be `fence`.
fn marked_blocks(text: &str, kind: &str, fence: &str) -> Vec<MarkedBlock> {
    let marker = format!("<!-- {kind}: ");
    let mut blocks = Vec::new();
    let mut lines = text.split_inclusive('\n').scan(0usize, |offset, line| {
        let start = *offset;
        *offset += line.len();
        Some((start, line))
    });
    while let Some((_, line)) = lines.next() {
        let Some(rest) = line.trim_end().strip_prefix(&marker) else {
            continue;
        };
        let name = rest
            .strip_suffix(" -->")
            .unwrap_or_else(|| panic!("malformed marker {line:?}"))
            .to_owned();
        let (_, open) = lines
            .by_ref()
            .find(|(_, l)| !l.trim().is_empty())
            .unwrap_or_else(|| panic!("no block after the marker of {name}"));
        assert_eq!(
            open.trim_end(),
            fence,
            "the block after the marker of {name} must open with {fence}"
        );
        let (start, _) = lines
            .clone()
            .next()
            .unwrap_or_else(|| panic!("the block of {name} never closes"));
        let (end, _) = lines
            .find(|(_, l)| l.trim_end() == "```")
            .unwrap_or_else(|| panic!("the block of {name} never closes"));
        blocks.push(MarkedBlock {
            name,
            content: start..end,
        });
    }
    blocks
}

/// The content of the one block marked `<!-- kind: name -->`.
fn guide_block(kind: &str, name: &str, fence: &str) -> String {
    let text = std::fs::read_to_string(guide_path()).expect("docs/client-sdk.md is readable");
    let block = marked_blocks(&text, kind, fence)
        .into_iter()
        .find(|b| b.name == name)
        .unwrap_or_else(|| panic!("docs/client-sdk.md has no <!-- {kind}: {name} --> block"));
    text[block.content].to_owned()
}

/// Names of the example files (`producer` for `examples/producer.rs`), sorted.
fn example_names() -> BTreeSet<String> {
    std::fs::read_dir(examples_dir())
        .expect("examples directory")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| {
            p.file_stem()
                .and_then(|s| s.to_str())
                .expect("UTF-8 file name")
                .to_owned()
        })
        .collect()
}

/// The first line where two texts differ, for a readable failure.
fn first_difference(guide: &str, file: &str) -> String {
    let mut guide_lines = guide.lines();
    let mut file_lines = file.lines();
    for number in 1.. {
        match (guide_lines.next(), file_lines.next()) {
            (None, None) => return "only line endings differ".to_owned(),
            (g, f) if g != f => {
                return format!("line {number}:\n  guide: {g:?}\n  file:  {f:?}");
            }
            _ => {}
        }
    }
    unreachable!()
}

#[test]
fn the_guide_shows_every_example_file_verbatim() {
    let path = guide_path();
    let text = std::fs::read_to_string(&path).expect("docs/client-sdk.md is readable");
    let blocks = marked_blocks(&text, "example", "```rust,no_run");
    let shown: BTreeSet<String> = blocks.iter().map(|b| b.name.clone()).collect();
    assert_eq!(
        blocks.len(),
        shown.len(),
        "an example is shown twice in docs/client-sdk.md"
    );
    assert_eq!(
        shown,
        example_names(),
        "docs/client-sdk.md must show exactly the files of crates/client/examples/ \
         (one <!-- example: NAME --> block each)"
    );

    if std::env::var_os("UPDATE_GUIDE").is_some() {
        let mut updated = String::with_capacity(text.len());
        let mut copied = 0;
        for block in &blocks {
            let file = examples_dir().join(format!("{}.rs", block.name));
            updated.push_str(&text[copied..block.content.start]);
            updated.push_str(&std::fs::read_to_string(&file).expect("example readable"));
            copied = block.content.end;
        }
        updated.push_str(&text[copied..]);
        if updated != text {
            std::fs::write(&path, updated).expect("docs/client-sdk.md is writable");
            eprintln!("UPDATE_GUIDE: copied the example files into docs/client-sdk.md");
        }
        return;
    }

    let mut stale = Vec::new();
    for block in &blocks {
        let file_path = examples_dir().join(format!("{}.rs", block.name));
        let file = std::fs::read_to_string(&file_path).expect("example readable");
        let shown = &text[block.content.clone()];
        if shown != file {
            stale.push(format!(
                "{}: {}",
                block.name,
                first_difference(shown, &file)
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "docs/client-sdk.md differs from crates/client/examples/ (the files are the source; \
         run `UPDATE_GUIDE=1 cargo test -p comet-client --test guide` to copy them into the \
         guide):\n{}",
        stale.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// What the tests check on the broker of the shared harness's cluster.

/// The guide's view of a test cluster: topics created as `comet topic create` leaves them, and
/// what the broker holds.
trait GuideCluster {
    /// Creates `topic` with [`QUEUES`] queues (signed with `credentials` when given) and waits
    /// until the name server serves its route, as `comet topic create` would leave it.
    async fn create_routed_topic(&self, topic: &str, credentials: Option<SessionCredentials>);
    /// Messages in the topic's queues (sum of the ConsumeQueues' max offsets).
    fn stored(&self, topic: &str) -> i64;
    /// The group's committed offsets of a topic on the broker, by queue id.
    fn committed(&self, group: &str, topic: &str) -> BTreeMap<i32, i64>;
    /// Waits until the topic holds `count` messages, then checks it holds no more.
    async fn expect_stored(&self, topic: &str, count: i64);
    /// Waits until the group's committed offsets of the topic add up to `total`. Consumers
    /// commit oneway (as Java's do), so the broker applies a commit shortly after it returns.
    async fn expect_committed_total(&self, group: &str, topic: &str, total: i64);
}

impl GuideCluster for Cluster {
    async fn create_routed_topic(&self, topic: &str, credentials: Option<SessionCredentials>) {
        let mut client = ClientConfig::new(self.namesrv_addr());
        client.credentials = credentials;
        let admin = MQAdmin::new(client).expect("admin client");
        let mut config = default_topic_config(topic);
        config.read_queue_nums = QUEUES;
        config.write_queue_nums = QUEUES;
        admin
            .create_topic(&TopicTarget::Cluster("DefaultCluster".to_owned()), &config)
            .await
            .expect("topic created");
        let routed = wait_until(|| async {
            admin
                .topic_route(topic)
                .await
                .is_ok_and(|r| r.queue_datas.iter().any(|q| q.write_queue_nums == QUEUES))
        })
        .await;
        admin.shutdown().await;
        assert!(routed, "the route of {topic} never appeared");
    }

    fn stored(&self, topic: &str) -> i64 {
        let store = &self.broker().context().store;
        (0..QUEUES)
            .map(|q| store.get_max_offset_in_queue(topic, q))
            .sum()
    }

    fn committed(&self, group: &str, topic: &str) -> BTreeMap<i32, i64> {
        self.broker()
            .context()
            .consumer_offsets
            .query_offsets(group, topic)
    }

    async fn expect_stored(&self, topic: &str, count: i64) {
        let reached = wait_until(|| async { self.stored(topic) >= count }).await;
        assert!(reached, "{topic} holds {} messages", self.stored(topic));
        assert_eq!(self.stored(topic), count, "messages stored in {topic}");
    }

    async fn expect_committed_total(&self, group: &str, topic: &str, total: i64) {
        let reached =
            wait_until(|| async { self.committed(group, topic).values().sum::<i64>() == total })
                .await;
        assert!(
            reached,
            "{group} committed {:?} on {topic}, expected {total} in all",
            self.committed(group, topic)
        );
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn numbered(prefix: &str, count: usize) -> Vec<String> {
    sorted((0..count).map(|i| format!("{prefix} {i}")).collect())
}

// ---------------------------------------------------------------------------------------------
// The examples, end to end.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_sends_sync_async_oneway_and_batch() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::start().await;
    let topic = "GuideProducerTopic";
    cluster.create_routed_topic(topic, None).await;

    let sent = producer::run(&cluster.namesrv_addr(), topic)
        .await
        .expect("example runs");

    let answered: Vec<&SendResult> = sent
        .sync
        .iter()
        .chain(&sent.sent_async)
        .chain([&sent.batch])
        .collect();
    assert_eq!(sent.sync.len(), 3);
    assert_eq!(sent.sent_async.len(), 3);
    for result in &answered {
        assert_eq!(result.send_status, SendStatus::SendOk, "{result:?}");
        assert_eq!(result.message_queue.topic, topic);
    }
    let ids: Vec<&str> = answered.iter().flat_map(|r| r.msg_id.split(',')).collect();
    assert_eq!(ids.len(), 9, "3 sync + 3 async + a batch of 3: {ids:?}");
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len(),
        9,
        "ids are unique"
    );
    // The oneway sends have no answer: they show up in the topic.
    assert_eq!(sent.oneway, 3);
    cluster.expect_stored(topic, 12).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_consumer_receives_every_message_once_and_commits() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::start().await;
    let topic = "GuidePushTopic";
    cluster.create_routed_topic(topic, None).await;

    let received = push_concurrently::run(&cluster.namesrv_addr(), topic, 20)
        .await
        .expect("example runs");

    assert_eq!(
        sorted(received),
        numbered("Hello Comet", 20),
        "exactly once"
    );
    cluster
        .expect_committed_total(push_concurrently::GROUP, topic, 20)
        .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_consumer_keeps_each_order_in_sequence() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::start().await;
    let topic = "GuideOrderTopic";
    cluster.create_routed_topic(topic, None).await;
    let orders = 6;

    let (queue_of_order, received) = push_orderly::run(&cluster.namesrv_addr(), topic, orders)
        .await
        .expect("example runs");

    let bodies: Vec<String> = received.iter().map(|d| d.body.clone()).collect();
    let expected: Vec<String> = (0..orders)
        .flat_map(|o| push_orderly::STEPS.map(|s| format!("order {o}: {s}")))
        .collect();
    assert_eq!(sorted(bodies), sorted(expected), "exactly once");
    let used: HashSet<i32> = queue_of_order.iter().copied().collect();
    assert!(
        used.len() > 1,
        "orders spread over queues: {queue_of_order:?}"
    );
    for order in 0..orders {
        let prefix = format!("order {order}: ");
        let own: Vec<&push_orderly::Delivery> = received
            .iter()
            .filter(|d| d.body.starts_with(&prefix))
            .collect();
        let steps: Vec<&str> = own.iter().map(|d| &d.body[prefix.len()..]).collect();
        assert_eq!(
            steps,
            push_orderly::STEPS,
            "steps of order {order} in order"
        );
        let queue = queue_of_order[usize::try_from(order).expect("small")];
        assert!(
            own.iter().all(|d| d.queue_id == queue),
            "order {order} stays on queue {queue}: {own:?}"
        );
    }
    for queue in used {
        let offsets: Vec<i64> = received
            .iter()
            .filter(|d| d.queue_id == queue)
            .map(|d| d.queue_offset)
            .collect();
        assert!(
            offsets.windows(2).all(|w| w[0] < w[1]),
            "queue {queue} delivered in offset order: {offsets:?}"
        );
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcasting_members_each_receive_everything() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::start().await;
    let topic = "GuideBroadcastTopic";
    cluster.create_routed_topic(topic, None).await;
    let offsets = tempfile::tempdir().expect("tempdir");

    let received = broadcasting::run(&cluster.namesrv_addr(), topic, 10, offsets.path())
        .await
        .expect("example runs");

    assert_eq!(received.len(), 2, "two members");
    for bodies in received {
        assert_eq!(
            sorted(bodies),
            numbered("broadcast", 10),
            "exactly once each"
        );
    }
    // Broadcasting offsets live in one local file per member, not on the broker.
    let files = count_files(offsets.path(), "offsets.json");
    assert_eq!(files, 2, "one offsets.json per member");
    assert!(cluster.committed(broadcasting::GROUP, topic).is_empty());
    cluster.shutdown().await;
}

fn count_files(dir: &Path, name: &str) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .map(|p| {
                    if p.is_dir() {
                        count_files(&p, name)
                    } else {
                        usize::from(p.file_name().is_some_and(|n| n == name))
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_consumer_pulls_everything_and_commits_its_offsets() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::start().await;
    let topic = "GuidePullTopic";
    cluster.create_routed_topic(topic, None).await;

    let (bodies, next) = pull::run(&cluster.namesrv_addr(), topic, 12)
        .await
        .expect("example runs");

    assert_eq!(sorted(bodies), numbered("pull", 12), "exactly once");
    assert_eq!(next.len(), usize::try_from(QUEUES).expect("small"));
    assert_eq!(next.values().sum::<i64>(), 12);
    let expected: BTreeMap<i32, i64> = next.iter().map(|(mq, o)| (mq.queue_id, *o)).collect();
    let committed =
        wait_until(|| async { cluster.committed(pull::GROUP, topic) == expected }).await;
    assert!(
        committed,
        "committed {:?}, expected {expected:?}",
        cluster.committed(pull::GROUP, topic)
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_consumer_assigns_seeks_and_commits() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::start().await;
    let topic = "GuideLitePullTopic";
    cluster.create_routed_topic(topic, None).await;

    let polled = lite_pull::run(&cluster.namesrv_addr(), topic)
        .await
        .expect("example runs");

    let expected = |range: std::ops::Range<i64>| -> Vec<(i64, String)> {
        range.map(|i| (i, format!("lite {i}"))).collect()
    };
    assert_eq!(polled.first_pass, expected(0..6));
    assert_eq!(polled.committed, 6);
    assert_eq!(polled.replayed, expected(3..6), "read again from the seek");
    cluster
        .expect_committed_total(lite_pull::GROUP, topic, 6)
        .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_deliver_committed_and_checked_messages_only() {
    let _serial = SERIAL.lock().await;
    // Check undecided transactions every 200 ms once they are 500 ms old.
    let cluster = Cluster::start_with(|config| {
        config.transaction_check_interval_ms = 200;
        config.transaction_timeout_ms = 500;
    })
    .await;
    let topic = "GuideTransactionTopic";
    cluster.create_routed_topic(topic, None).await;

    let outcome = transaction::run(&cluster.namesrv_addr(), topic)
        .await
        .expect("example runs");

    let states: Vec<LocalTransactionState> = outcome.executed.iter().map(|(_, s)| *s).collect();
    assert_eq!(
        states,
        [
            LocalTransactionState::CommitMessage,
            LocalTransactionState::RollbackMessage,
            LocalTransactionState::Unknown
        ]
    );
    assert!(!outcome.checked.is_empty(), "the undecided one was checked");
    assert!(
        outcome.checked.iter().all(|b| b == "order 3 pending"),
        "only the undecided transaction is checked: {:?}",
        outcome.checked
    );
    assert_eq!(
        sorted(outcome.received),
        ["order 1 paid", "order 3 pending"],
        "the committed and the checked message, once each; never the rolled-back one"
    );
    // The rolled-back message never reached the topic's queues.
    cluster.expect_stored(topic, 2).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_messages_arrive_after_their_delay() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::start().await;
    let topic = "GuideDelayTopic";
    cluster.create_routed_topic(topic, None).await;

    let received = delay::run(&cluster.namesrv_addr(), topic, 3)
        .await
        .expect("example runs");

    let bodies: Vec<String> = received.iter().map(|(b, _)| b.clone()).collect();
    assert_eq!(sorted(bodies), numbered("delayed", 3), "exactly once");
    for (body, delay_ms) in &received {
        assert!(*delay_ms >= 5000, "{body} stored after {delay_ms} ms");
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traced_clients_leave_pub_sub_before_and_sub_after_records() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::start().await;
    let topic = "GuideTraceTopic";
    cluster.create_routed_topic(topic, None).await;

    let (msg_id, records) = trace::run(&cluster.namesrv_addr(), topic)
        .await
        .expect("example runs");

    let types: BTreeSet<&str> = records.iter().map(|r| r.trace_type.name()).collect();
    assert_eq!(types, BTreeSet::from(["Pub", "SubAfter", "SubBefore"]));
    assert!(records.iter().all(|r| r.beans[0].msg_id == msg_id));
    let publish = records.iter().find(|r| r.trace_type.name() == "Pub");
    assert_eq!(
        publish.and_then(|r| r.beans[0].keys.as_deref()),
        Some("order-42")
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_creates_inspects_and_deletes_a_topic() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::start().await;
    let topic = "GuideAdminTopic";

    let report = admin::run(&cluster.namesrv_addr(), topic, 3, 10)
        .await
        .expect("example runs");

    assert_eq!(
        report.created_on,
        [cluster.broker().local_addr().to_string()]
    );
    assert_eq!(report.write_queues, 3);
    assert!(report.listed);
    assert_eq!(report.stored, 10);
    let admin = MQAdmin::new(ClientConfig::new(cluster.namesrv_addr())).expect("admin client");
    assert!(admin.topic_route(topic).await.is_err(), "the topic is gone");
    admin.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_signed_clients_work_where_unsigned_ones_are_refused() {
    let _serial = SERIAL.lock().await;
    // The broker runs with the guide's plain_acl.yml.
    let acl_file = guide_block("file", "plain_acl.yml", "```yaml");
    let acl_dir = tempfile::tempdir().expect("tempdir");
    let path = acl_dir.path().join("plain_acl.yml");
    let cluster = Cluster::start_with(|config| {
        std::fs::write(&path, &acl_file).expect("ACL file written");
        config.acl_enable = true;
        config.acl_file = Some(path);
    })
    .await;
    let topic = "AclTopic";
    let admin_account = SessionCredentials::new("rocketmq2", "12345678");
    cluster
        .create_routed_topic(topic, Some(admin_account))
        .await;

    // Unsigned, a send is refused (its own instance name: the examples' instance signs).
    let mut config = ProducerConfig::new("guide_unsigned_producer", cluster.namesrv_addr());
    config.client.instance_name = "guide-unsigned".to_owned();
    config.retry_times_when_send_failed = 0;
    let unsigned = DefaultMQProducer::new(config);
    unsigned.start().await.expect("producer starts");
    let refused = unsigned
        .send(Message::new(topic, "unsigned"))
        .await
        .expect_err("an unsigned send is refused");
    assert_eq!(refused.response_code(), Some(NO_PERMISSION), "{refused}");
    unsigned.shutdown().await;

    let credentials = SessionCredentials::new("RocketMQ", "12345678");
    let received = acl::run(&cluster.namesrv_addr(), topic, credentials, 5)
        .await
        .expect("example runs");

    assert_eq!(sorted(received), numbered("signed", 5), "exactly once");
    cluster.expect_stored(topic, 5).await;
    cluster.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// The crate docs, and the builder and async-listener examples they show.

/// Examples the crate-level docs of `src/lib.rs` include.
fn examples_in_crate_docs() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("src/lib.rs is readable");
    let mut shown = BTreeSet::new();
    let mut lines = lib.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() != "//! ```no_run" && line.trim_start().starts_with("//! ```") {
            panic!("a code block of the crate docs that is not a `no_run` example: {line}");
        }
        if line.trim() != "//! ```no_run" {
            continue;
        }
        let include = lines.next().unwrap_or_default();
        let name = include
            .strip_prefix("#![doc = include_str!(\"../examples/")
            .and_then(|rest| rest.strip_suffix(".rs\")]"))
            .unwrap_or_else(|| {
                panic!("a crate-docs code block is not an included example: {include}")
            });
        assert_eq!(
            lines.next().map(str::trim),
            Some("//! ```"),
            "{name}: block closes"
        );
        shown.insert(name.to_owned());
    }
    shown
}

#[test]
fn the_crate_docs_show_example_files() {
    let shown = examples_in_crate_docs();
    let expected: BTreeSet<String> = [
        "async_orderly",
        "async_transaction",
        "pull_builders",
        "quickstart",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(
        shown, expected,
        "the examples of the crate docs, each run below"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quickstart_builders_and_async_listener_receive_everything() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::start().await;
    let topic = "GuideQuickstartTopic";
    cluster.create_routed_topic(topic, None).await;

    let received = quickstart::run(&cluster.namesrv_addr(), topic, 12)
        .await
        .expect("example runs");

    assert_eq!(
        sorted(received.bodies),
        numbered("quickstart", 12),
        "exactly once"
    );
    assert!(
        received.calls >= 12,
        "one call per message: {}",
        received.calls
    );
    cluster
        .expect_committed_total(quickstart::GROUP, topic, 12)
        .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_orderly_listener_applies_each_order_in_sequence() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::start().await;
    let topic = "GuideAsyncOrderTopic";
    cluster.create_routed_topic(topic, None).await;

    let book = async_orderly::run(&cluster.namesrv_addr(), topic, 5)
        .await
        .expect("example runs");

    assert_eq!(book.len(), 5, "every order: {book:?}");
    for (order, steps) in &book {
        assert_eq!(
            steps,
            &async_orderly::STEPS,
            "steps of order {order} in order"
        );
    }
    cluster
        .expect_committed_total(async_orderly::GROUP, topic, 15)
        .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_builders_read_everything() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::start().await;
    let topic = "GuidePullBuildersTopic";
    cluster.create_routed_topic(topic, None).await;

    let read = pull_builders::run(&cluster.namesrv_addr(), topic, 10)
        .await
        .expect("example runs");

    assert_eq!(
        sorted(read.polled),
        numbered("pulled", 10),
        "lite: exactly once"
    );
    assert_eq!(
        sorted(read.pulled),
        numbered("pulled", 10),
        "pull: exactly once"
    );
    cluster
        .expect_committed_total(pull_builders::LITE_GROUP, topic, 10)
        .await;
    cluster
        .expect_committed_total(pull_builders::PULL_GROUP, topic, 10)
        .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_transactions_deliver_committed_and_checked_messages_only() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::start_with(|config| {
        config.transaction_check_interval_ms = 200;
        config.transaction_timeout_ms = 500;
    })
    .await;
    let topic = "GuideAsyncTransactionTopic";
    cluster.create_routed_topic(topic, None).await;

    let outcome = async_transaction::run(&cluster.namesrv_addr(), topic)
        .await
        .expect("example runs");

    let states: Vec<LocalTransactionState> = outcome.executed.iter().map(|(_, s)| *s).collect();
    assert_eq!(
        states,
        [
            LocalTransactionState::CommitMessage,
            LocalTransactionState::RollbackMessage,
            LocalTransactionState::Unknown
        ]
    );
    assert!(!outcome.checked.is_empty(), "the undecided one was checked");
    assert!(
        outcome.checked.iter().all(|o| o == "order-3"),
        "only the undecided transaction is checked: {:?}",
        outcome.checked
    );
    assert_eq!(
        sorted(outcome.received),
        ["order 1 paid", "order 3 pending"],
        "the committed and the checked message, once each; never the rolled-back one"
    );
    cluster.expect_stored(topic, 2).await;
    cluster.shutdown().await;
}
