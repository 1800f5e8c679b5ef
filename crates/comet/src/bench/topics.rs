//! `comet bench topics`: how topic creation and route lookups cost as a broker's topic table
//! grows. One admin connection creates `--count` topics on one master broker, one request after
//! another (UPDATE_AND_CREATE_TOPIC, or UPDATE_AND_CREATE_TOPIC_LIST of `--batch` topics), then
//! waits until the name server routes the last one, then looks up `--lookups` routes of topics
//! picked across the range through the name server. Topic names are `<prefix><index>` from
//! `--start`, so successive runs grow one table (100, then 900 more, ...).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use comet_client::ClientConfig;
use comet_client::admin::{MQAdmin, TopicTarget, topic::default_topic_config};
use serde_json::json;

use super::report::{LatencySummary, nanos_of, new_histogram, record_nanos};

/// Longest wait for the name server to route the last topic created.
pub const ROUTABLE_PATIENCE: Duration = Duration::from_secs(120);
/// Pause between two route lookups while waiting for the last topic.
const ROUTABLE_POLL: Duration = Duration::from_millis(2);
/// Largest `--batch`.
pub const MAX_BATCH: usize = 10_000;

#[derive(Debug, Args)]
pub struct TopicsArgs {
    /// Name server address(es), `;`-separated.
    #[arg(short = 'n', long = "namesrv", env = "NAMESRV_ADDR", default_value = crate::cli::DEFAULT_NAMESRV)]
    pub namesrv: String,
    /// Topics to create.
    #[arg(long, default_value_t = 1000)]
    pub count: usize,
    /// Index of the first topic (names are `<prefix><index>`).
    #[arg(long, default_value_t = 0)]
    pub start: usize,
    /// Topic name prefix.
    #[arg(long, default_value = "BenchTopic")]
    pub prefix: String,
    /// Read and write queues of each topic.
    #[arg(long, default_value_t = super::DEFAULT_BENCH_QUEUES)]
    pub queues: i32,
    /// Topics per request: 1 sends UPDATE_AND_CREATE_TOPIC, more send
    /// UPDATE_AND_CREATE_TOPIC_LIST (RocketMQ 5.x brokers).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Route lookups through the name server after the creates.
    #[arg(long, default_value_t = 2000)]
    pub lookups: usize,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: TopicsArgs) -> Result<()> {
    if args.count == 0 {
        bail!("--count must be at least 1");
    }
    if !(1..=MAX_BATCH).contains(&args.batch) {
        bail!(
            "--batch must be between 1 and {MAX_BATCH}, got {}",
            args.batch
        );
    }
    if !(1..=super::MAX_BENCH_QUEUES).contains(&args.queues) {
        bail!(
            "--queues must be between 1 and {}, got {}",
            super::MAX_BENCH_QUEUES,
            args.queues
        );
    }
    let admin = MQAdmin::new(ClientConfig::new(args.namesrv.clone()))
        .context("creating the admin client")?;
    let outcome = measure(&admin, &args).await;
    admin.shutdown().await;
    let report = outcome?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        println!("{}", report.to_text());
    }
    Ok(())
}

/// What one run measured.
#[derive(Debug)]
struct TopicsReport {
    broker: String,
    created: usize,
    table_size_after: usize,
    batch: usize,
    elapsed: Duration,
    create: Option<LatencySummary>,
    routable_after: Duration,
    lookup: Option<LatencySummary>,
}

impl TopicsReport {
    fn topics_per_sec(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.created as f64 / secs
        } else {
            0.0
        }
    }

    fn to_json(&self) -> serde_json::Value {
        json!({
            "command": "topics",
            "broker": self.broker,
            "topics_created": self.created,
            "table_size_after": self.table_size_after,
            "batch": self.batch,
            "elapsed_secs": self.elapsed.as_secs_f64(),
            "topics_per_sec": self.topics_per_sec(),
            "create_request_latency": self.create.map(LatencySummary::to_json),
            "routable_after_ms": self.routable_after.as_secs_f64() * 1e3,
            "route_lookup_latency": self.lookup.map(LatencySummary::to_json),
        })
    }

    fn to_text(&self) -> String {
        let summary = |s: Option<LatencySummary>| s.map_or("-".to_owned(), LatencySummary::to_text);
        format!(
            "created {} topics on {} in {:.2} s ({:.1} topics/s, {} per request); table now {} topics\n\
             create request: {}\n\
             last topic routable {:.1} ms after its create\n\
             route lookup:   {}",
            self.created,
            self.broker,
            self.elapsed.as_secs_f64(),
            self.topics_per_sec(),
            self.batch,
            self.table_size_after,
            summary(self.create),
            self.routable_after.as_secs_f64() * 1e3,
            summary(self.lookup),
        )
    }
}

fn name(args: &TopicsArgs, index: usize) -> String {
    format!("{}{index}", args.prefix)
}

async fn measure(admin: &MQAdmin, args: &TopicsArgs) -> Result<TopicsReport> {
    let masters = admin
        .master_addrs(None)
        .await
        .context("asking the name server for the brokers")?;
    let Some((broker, addr)) = masters.into_iter().next() else {
        bail!("the name server knows no master broker");
    };
    let mut create_hist = new_histogram()?;
    let began = Instant::now();
    let mut next = args.start;
    let end = args.start + args.count;
    while next < end {
        let upto = (next + args.batch).min(end);
        let configs: Vec<_> = (next..upto)
            .map(|i| {
                let mut config = default_topic_config(name(args, i));
                config.read_queue_nums = args.queues;
                config.write_queue_nums = args.queues;
                config
            })
            .collect();
        let sent = Instant::now();
        if args.batch == 1 {
            admin
                .create_topic(&TopicTarget::Broker(addr.clone()), &configs[0])
                .await
                .with_context(|| {
                    format!("creating {} on {broker} ({addr})", configs[0].topic_name)
                })?;
        } else {
            admin
                .create_topics(&addr, &configs)
                .await
                .with_context(|| format!("creating topics {next}..{upto} on {broker} ({addr})"))?;
        }
        record_nanos(&mut create_hist, nanos_of(sent.elapsed()));
        next = upto;
    }
    let created = began.elapsed();
    let last = name(args, end - 1);
    let waited = Instant::now();
    loop {
        if admin.topic_route(&last).await.is_ok() {
            break;
        }
        if waited.elapsed() > ROUTABLE_PATIENCE {
            bail!("the name server did not route {last} within {ROUTABLE_PATIENCE:?}");
        }
        tokio::time::sleep(ROUTABLE_POLL).await;
    }
    let routable_after = waited.elapsed();
    let mut lookup_hist = new_histogram()?;
    // Spread over the whole table (the topics of earlier runs too), in a fixed scattered order.
    let table = end.max(1);
    for i in 0..args.lookups {
        let topic = name(args, (i * 7919 + 13) % table);
        let asked = Instant::now();
        admin
            .topic_route(&topic)
            .await
            .with_context(|| format!("looking up the route of {topic}"))?;
        record_nanos(&mut lookup_hist, nanos_of(asked.elapsed()));
    }
    Ok(TopicsReport {
        broker,
        created: args.count,
        table_size_after: end,
        batch: args.batch,
        elapsed: created,
        create: LatencySummary::of(&create_hist),
        routable_after,
        lookup: LatencySummary::of(&lookup_hist),
    })
}
