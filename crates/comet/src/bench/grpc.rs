//! `comet bench grpc-send` and `comet bench grpc-receive`: the RocketMQ 5.x gRPC protocol
//! (`apache.rocketmq.v2.MessagingService`) as the 5.x SDKs call it, against Comet's gRPC endpoint
//! or Apache's proxy, so both are measured by the same client.
//!
//! `grpc-send` runs `--producers` concurrent callers of SendMessage (one message per call, as the
//! SDKs send) over one HTTP/2 connection. `grpc-receive` announces a simple consumer over a
//! Telemetry stream (Apache's proxy refuses receives from a client it has no settings for), then
//! runs `--receivers` concurrent loops of ReceiveMessage followed by one AckMessage for the
//! messages received; it stops after `--count` acked messages or at the deadline. The topic is
//! created through the name server first, as the remoting commands do.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use comet_grpc_proto::v2;
use comet_grpc_proto::v2::messaging_service_client::MessagingServiceClient;
use comet_grpc_proto::v2::receive_message_response::Content;
use comet_grpc_proto::v2::settings::PubSub;
use comet_grpc_proto::v2::telemetry_command::Command;
use futures::StreamExt;
use hdrhistogram::Histogram;
use serde_json::json;
use tokio::time::Instant;
use tonic::transport::Channel;

use super::report::{
    Counters, LatencySummary, Planned, Progress, Report, nanos_of, new_histogram, record_nanos,
};
use super::stamp::{stamped_body, unix_nanos};
use super::{TargetArgs, TopicSetupArgs, ensure_topic, positive_secs, retry_until};

/// Largest message accepted from the server (the SDKs' limit is the same order).
pub const MAX_DECODING_BYTES: usize = 64 * 1024 * 1024;
/// Deadline of a send or an ack.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Most messages one receive asks for (the protocol's limit).
pub const MAX_RECEIVE_BATCH: i32 = 32;
/// Longest a receive waits for messages before answering MESSAGE_NOT_FOUND.
pub const RECEIVE_POLL: Duration = Duration::from_secs(5);
/// Distinct failure causes kept for the report.
pub const MAX_REPORTED_ERRORS: usize = 8;

/// Options of the gRPC endpoint.
#[derive(Debug, Clone, Args)]
pub struct EndpointArgs {
    /// The gRPC endpoint (`host:port`): Comet's `grpcServerPort` or Apache's proxy.
    #[arg(long)]
    pub endpoint: String,
    /// Retry topic creation for up to this many seconds (broker starting).
    #[arg(long)]
    pub wait_ready: Option<f64>,
}

#[derive(Debug, Args)]
pub struct GrpcSendArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub topic_setup: TopicSetupArgs,
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    /// Concurrent callers of SendMessage.
    #[arg(short = 'p', long, default_value_t = 32)]
    pub producers: usize,
    /// Body size in bytes.
    #[arg(short = 's', long, default_value_t = 1024)]
    pub size: usize,
    /// Run length in seconds.
    #[arg(short = 'd', long, default_value_t = 10.0)]
    pub duration: f64,
}

#[derive(Debug, Args)]
pub struct GrpcReceiveArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    /// Consumer group.
    #[arg(short = 'g', long, default_value = "CometBenchGrpcGroup")]
    pub group: String,
    /// Concurrent receive-and-ack loops.
    #[arg(short = 'p', long, default_value_t = 8)]
    pub receivers: usize,
    /// Messages asked for per receive (at most 32).
    #[arg(long, default_value_t = MAX_RECEIVE_BATCH)]
    pub batch: i32,
    /// Invisible time of received messages, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    pub invisible_ms: u64,
    /// Stop after this many acked messages.
    #[arg(short = 'c', long)]
    pub count: Option<u64>,
    /// Longest run, in seconds.
    #[arg(short = 'd', long, default_value_t = 60.0)]
    pub duration: f64,
}

/// Connects to `endpoint` over plaintext HTTP/2.
async fn connect(endpoint: &str) -> Result<MessagingServiceClient<Channel>> {
    let client = MessagingServiceClient::connect(format!("http://{endpoint}"))
        .await
        .with_context(|| format!("connecting to the gRPC endpoint {endpoint}"))?;
    Ok(client.max_decoding_message_size(MAX_DECODING_BYTES))
}

/// This run's client id, as the SDKs form it (`host@pid@n@nanos`).
fn client_id() -> String {
    format!("comet-bench@{}@0@{:x}", std::process::id(), unix_nanos())
}

/// `message` with the metadata a 5.x SDK sends on every call.
fn request<T>(message: T, client_id: &str, timeout: Duration) -> Result<tonic::Request<T>> {
    let mut request = tonic::Request::new(message);
    let meta = request.metadata_mut();
    meta.insert("x-mq-client-id", client_id.parse()?);
    meta.insert("x-mq-language", "RUST".parse()?);
    meta.insert("x-mq-protocol", "v2".parse()?);
    meta.insert("x-mq-client-version", "5.0.0".parse()?);
    request.set_timeout(timeout);
    Ok(request)
}

fn resource(name: &str) -> Option<v2::Resource> {
    Some(v2::Resource {
        resource_namespace: String::new(),
        name: name.to_owned(),
    })
}

fn code(status: Option<&v2::Status>) -> v2::Code {
    status.map_or(v2::Code::Unspecified, v2::Status::code)
}

/// A message id as the SDKs make them (32 hex digits, unique per message).
fn message_id(run: u64, n: u64) -> String {
    format!("{run:016X}{n:016X}")
}

/// Creates the topic (retrying while the broker starts) unless told not to.
async fn setup_topic(target: &TargetArgs, setup: &TopicSetupArgs, wait: Option<f64>) -> Result<()> {
    if setup.no_create {
        return Ok(());
    }
    let patience = wait.map(|s| positive_secs(s, "--wait-ready")).transpose()?;
    let client = target.client_config();
    retry_until(patience, || {
        ensure_topic(&client, &target.topic, setup.queues)
    })
    .await
}

/// Keeps distinct failure causes, at most [`MAX_REPORTED_ERRORS`].
#[derive(Default)]
struct Errors(std::sync::Mutex<Vec<String>>);

impl Errors {
    fn note(&self, cause: String) {
        let mut seen = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen.len() < MAX_REPORTED_ERRORS && !seen.contains(&cause) {
            seen.push(cause);
        }
    }

    fn list(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

pub async fn run_send(args: GrpcSendArgs) -> Result<()> {
    if args.producers == 0 || args.size == 0 {
        bail!("--producers and --size must be positive");
    }
    let duration = positive_secs(args.duration, "--duration")?;
    setup_topic(&args.target, &args.topic_setup, args.endpoint.wait_ready).await?;
    let client = connect(&args.endpoint.endpoint).await?;
    let id = Arc::new(client_id());
    let counters = Arc::new(Counters::default());
    let errors = Arc::new(Errors::default());
    let next = Arc::new(AtomicU64::new(0));
    let run = unix_nanos();
    let progress = Progress::start(
        "grpc-send",
        Arc::clone(&counters),
        args.target.report_interval()?,
        Planned::Duration(duration),
    );
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::with_capacity(args.producers);
    for _ in 0..args.producers {
        let (mut client, id, counters, errors, next) = (
            client.clone(),
            Arc::clone(&id),
            Arc::clone(&counters),
            Arc::clone(&errors),
            Arc::clone(&next),
        );
        let (topic, size) = (args.target.topic.clone(), args.size);
        tasks.push(tokio::spawn(async move {
            let mut rt = new_histogram()?;
            while Instant::now() < deadline {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let message = v2::Message {
                    topic: resource(&topic),
                    user_properties: HashMap::new(),
                    system_properties: Some(v2::SystemProperties {
                        message_id: message_id(run, n),
                        message_type: v2::MessageType::Normal as i32,
                        body_encoding: v2::Encoding::Identity as i32,
                        ..Default::default()
                    }),
                    body: stamped_body(size, 1, unix_nanos()).to_vec(),
                };
                let began = Instant::now();
                let call = v2::SendMessageRequest {
                    messages: vec![message],
                };
                match client.send_message(request(call, &id, CALL_TIMEOUT)?).await {
                    Ok(answer) if code(answer.get_ref().status.as_ref()) == v2::Code::Ok => {
                        record_nanos(&mut rt, nanos_of(began.elapsed()));
                        counters.add_ok(1, size as u64);
                    }
                    Ok(answer) => {
                        counters.add_failed(1);
                        errors.note(format!("{:?}", answer.get_ref().status));
                    }
                    Err(status) => {
                        counters.add_failed(1);
                        errors.note(format!("{:?}: {}", status.code(), status.message()));
                    }
                }
            }
            Ok::<_, anyhow::Error>(rt)
        }));
    }
    let rt = join_histograms(tasks).await?;
    let elapsed = started.elapsed();
    progress.finish();
    let mut extra = serde_json::Map::new();
    if let Some(s) = LatencySummary::of(&rt) {
        extra.insert("send_rt".to_owned(), s.to_json());
    }
    let errors = errors.list();
    if !errors.is_empty() {
        extra.insert("errors".to_owned(), json!(errors));
    }
    Report {
        command: "grpc-send",
        settings: json!({
            "endpoint": args.endpoint.endpoint,
            "topic": args.target.topic,
            "producers": args.producers,
            "size": args.size,
            "duration_secs": duration.as_secs_f64(),
        }),
        elapsed,
        messages: counters.ok(),
        failed: counters.failed(),
        bytes: counters.bytes(),
        latency: LatencySummary::of(&rt).map(|s| ("send_rt", s)),
        extra,
    }
    .print(args.target.json);
    Ok(())
}

/// Waits for every task and merges their histograms.
async fn join_histograms(
    tasks: Vec<tokio::task::JoinHandle<Result<Histogram<u64>>>>,
) -> Result<Histogram<u64>> {
    let mut all = new_histogram()?;
    for task in tasks {
        let hist = task.await.context("a bench task panicked")??;
        all.add(&hist).context("merging histograms")?;
    }
    Ok(all)
}

/// An open Telemetry stream announcing a simple consumer; dropping it ends the stream.
struct Announced {
    _inbound: tonic::Streaming<v2::TelemetryCommand>,
    _close: tokio::sync::oneshot::Sender<()>,
}

/// Announces a simple consumer of `group` on `topic` and waits for the server's settings.
async fn announce(
    client: &mut MessagingServiceClient<Channel>,
    id: &str,
    group: &str,
    topic: &str,
) -> Result<Announced> {
    let settings = v2::TelemetryCommand {
        status: None,
        command: Some(Command::Settings(v2::Settings {
            client_type: Some(v2::ClientType::SimpleConsumer as i32),
            request_timeout: Some(prost_types::Duration {
                seconds: 3,
                nanos: 0,
            }),
            pub_sub: Some(PubSub::Subscription(v2::Subscription {
                group: resource(group),
                subscriptions: vec![v2::SubscriptionEntry {
                    topic: resource(topic),
                    expression: Some(v2::FilterExpression {
                        r#type: v2::FilterType::Tag as i32,
                        expression: "*".to_owned(),
                    }),
                }],
                long_polling_timeout: Some(to_proto(RECEIVE_POLL)),
                ..Default::default()
            })),
            ..Default::default()
        })),
    };
    let (close, closed) = tokio::sync::oneshot::channel::<()>();
    let until_closed = futures::stream::once(closed).filter_map(|_| async { None });
    let outbound = futures::stream::iter(vec![settings]).chain(until_closed);
    let mut inbound = client
        .telemetry(request(outbound, id, Duration::from_secs(24 * 3600))?)
        .await
        .context("opening the Telemetry stream")?
        .into_inner();
    let answer = tokio::time::timeout(CALL_TIMEOUT, inbound.message())
        .await
        .context("no settings answer")?
        .context("Telemetry stream failed")?
        .context("Telemetry stream ended before answering")?;
    if code(answer.status.as_ref()) != v2::Code::Ok && answer.status.is_some() {
        bail!("settings refused: {:?}", answer.status);
    }
    Ok(Announced {
        _inbound: inbound,
        _close: close,
    })
}

fn to_proto(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// The broker a receive reads from: any queue of the topic's route (the receive reads only its
/// broker name).
async fn route_queue(
    client: &mut MessagingServiceClient<Channel>,
    id: &str,
    topic: &str,
) -> Result<v2::MessageQueue> {
    let route = client
        .query_route(request(
            v2::QueryRouteRequest {
                topic: resource(topic),
                endpoints: None,
            },
            id,
            CALL_TIMEOUT,
        )?)
        .await
        .context("QueryRoute")?
        .into_inner();
    if code(route.status.as_ref()) != v2::Code::Ok {
        bail!("QueryRoute answered {:?}", route.status);
    }
    route
        .message_queues
        .into_iter()
        .find(|q| {
            q.permission == v2::Permission::ReadWrite as i32
                || q.permission == v2::Permission::Read as i32
        })
        .context("no readable queue in the route")
}

/// What one receive brought: (message id, receipt handle) per message.
async fn receive_once(
    client: &mut MessagingServiceClient<Channel>,
    id: &str,
    ask: &v2::ReceiveMessageRequest,
) -> Result<Vec<(String, String)>> {
    let mut stream = client
        .receive_message(request(ask.clone(), id, RECEIVE_POLL + CALL_TIMEOUT)?)
        .await
        .context("ReceiveMessage")?
        .into_inner();
    let mut got = Vec::new();
    while let Some(item) = stream.message().await.context("ReceiveMessage stream")? {
        match item.content {
            Some(Content::Message(m)) => {
                let sys = m.system_properties.unwrap_or_default();
                got.push((sys.message_id, sys.receipt_handle.unwrap_or_default()));
            }
            Some(Content::Status(s)) => match s.code() {
                v2::Code::Ok | v2::Code::MessageNotFound => {}
                other => bail!("ReceiveMessage answered {other:?}: {}", s.message),
            },
            _ => {}
        }
    }
    Ok(got)
}

/// One receive-and-ack loop of `grpc-receive`.
struct Receiver {
    client: MessagingServiceClient<Channel>,
    id: Arc<String>,
    ask: Arc<v2::ReceiveMessageRequest>,
    counters: Arc<Counters>,
    errors: Arc<Errors>,
    rt: Arc<std::sync::Mutex<Histogram<u64>>>,
    last_ack_nanos: Arc<AtomicU64>,
    reached: Arc<tokio::sync::Notify>,
    group: String,
    topic: String,
    started: Instant,
    deadline: Instant,
    target: u64,
}

impl Receiver {
    async fn run(mut self) {
        while Instant::now() < self.deadline && self.counters.ok() < self.target {
            let began = Instant::now();
            let got = match receive_once(&mut self.client, &self.id, &self.ask).await {
                Ok(got) => got,
                Err(e) => {
                    self.errors.note(format!("{e:#}"));
                    continue;
                }
            };
            if !got.is_empty() {
                self.ack(got, began).await;
            }
        }
    }

    /// Acks what one receive brought, in one AckMessage.
    async fn ack(&mut self, got: Vec<(String, String)>, began: Instant) {
        let received = got.len() as u64;
        let entries = got
            .into_iter()
            .map(|(message_id, receipt_handle)| v2::AckMessageEntry {
                message_id,
                receipt_handle,
            })
            .collect();
        let ack = v2::AckMessageRequest {
            group: resource(&self.group),
            topic: resource(&self.topic),
            entries,
        };
        let call = match request(ack, &self.id, CALL_TIMEOUT) {
            Ok(call) => call,
            Err(e) => return self.errors.note(format!("{e:#}")),
        };
        match self.client.ack_message(call).await {
            Ok(answer) => {
                let answer = answer.into_inner();
                let acked = answer
                    .entries
                    .iter()
                    .filter(|e| code(e.status.as_ref()) == v2::Code::Ok)
                    .count() as u64;
                record_nanos(
                    &mut self
                        .rt
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner),
                    nanos_of(began.elapsed()),
                );
                self.counters.add_ok(acked, 0);
                self.last_ack_nanos
                    .fetch_max(nanos_of(self.started.elapsed()), Ordering::Relaxed);
                if acked < received {
                    self.counters.add_failed(received - acked);
                    self.errors
                        .note(format!("ack refused: {:?}", answer.status));
                }
                if self.counters.ok() >= self.target {
                    self.reached.notify_one();
                }
            }
            Err(status) => {
                self.counters.add_failed(received);
                self.errors
                    .note(format!("{:?}: {}", status.code(), status.message()));
            }
        }
    }
}

pub async fn run_receive(args: GrpcReceiveArgs) -> Result<()> {
    if args.receivers == 0 || !(1..=MAX_RECEIVE_BATCH).contains(&args.batch) {
        bail!("--receivers must be positive and --batch between 1 and {MAX_RECEIVE_BATCH}");
    }
    let duration = positive_secs(args.duration, "--duration")?;
    let mut client = connect(&args.endpoint.endpoint).await?;
    let id = Arc::new(client_id());
    let topic = args.target.topic.clone();
    let _announced = announce(&mut client, &id, &args.group, &topic).await?;
    let queue = route_queue(&mut client, &id, &topic).await?;
    let ask = Arc::new(v2::ReceiveMessageRequest {
        group: resource(&args.group),
        message_queue: Some(queue),
        filter_expression: Some(v2::FilterExpression {
            r#type: v2::FilterType::Tag as i32,
            expression: "*".to_owned(),
        }),
        batch_size: args.batch,
        invisible_duration: Some(to_proto(Duration::from_millis(args.invisible_ms))),
        auto_renew: false,
        long_polling_timeout: Some(to_proto(RECEIVE_POLL)),
        ..Default::default()
    });
    let counters = Arc::new(Counters::default());
    let errors = Arc::new(Errors::default());
    let planned = args
        .count
        .map_or(Planned::Duration(duration), Planned::Messages);
    let progress = Progress::start(
        "grpc-receive",
        Arc::clone(&counters),
        args.target.report_interval()?,
        planned,
    );
    let started = Instant::now();
    let deadline = started + duration;
    let target = args.count.unwrap_or(u64::MAX);
    let rt = Arc::new(std::sync::Mutex::new(new_histogram()?));
    // Nanoseconds from the start to the last ack: with --count the run ends there, not when the
    // last loop's long poll comes back empty.
    let last_ack_nanos = Arc::new(AtomicU64::new(0));
    let reached = Arc::new(tokio::sync::Notify::new());
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..args.receivers {
        let worker = Receiver {
            client: client.clone(),
            id: Arc::clone(&id),
            ask: Arc::clone(&ask),
            counters: Arc::clone(&counters),
            errors: Arc::clone(&errors),
            rt: Arc::clone(&rt),
            last_ack_nanos: Arc::clone(&last_ack_nanos),
            reached: Arc::clone(&reached),
            group: args.group.clone(),
            topic: topic.clone(),
            started,
            deadline,
            target,
        };
        tasks.spawn(worker.run());
    }
    tokio::select! {
        () = reached.notified() => tasks.abort_all(),
        () = async { while tasks.join_next().await.is_some() {} } => {}
    }
    while let Some(done) = tasks.join_next().await {
        if let Err(e) = done
            && !e.is_cancelled()
        {
            bail!("a receive loop panicked: {e}");
        }
    }
    let elapsed = match (args.count, last_ack_nanos.load(Ordering::Relaxed)) {
        (Some(_), nanos) if nanos > 0 => Duration::from_nanos(nanos),
        _ => started.elapsed(),
    };
    progress.finish();
    let rt = rt
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let mut extra = serde_json::Map::new();
    let errors = errors.list();
    if !errors.is_empty() {
        extra.insert("errors".to_owned(), json!(errors));
    }
    Report {
        command: "grpc-receive",
        settings: json!({
            "endpoint": args.endpoint.endpoint,
            "topic": args.target.topic,
            "group": args.group,
            "receivers": args.receivers,
            "batch": args.batch,
            "invisible_ms": args.invisible_ms,
            "count": args.count,
        }),
        elapsed,
        messages: counters.ok(),
        failed: counters.failed(),
        bytes: counters.bytes(),
        latency: LatencySummary::of(&rt).map(|s| ("receive_ack_rt", s)),
        extra,
    }
    .print(args.target.json);
    Ok(())
}
