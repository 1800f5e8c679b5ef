//! Telemetry: the bidirectional stream a client opens to each endpoint. Its first command is the
//! client's Settings; the broker answers at once with the settings the client is to run with
//! (the Java client gives up starting when no answer arrives within a few seconds):
//!
//! - a producer gets an exponential retry backoff (3 attempts, 10 ms doubling up to 1 s) and the
//!   largest body the broker stores (`maxMessageSize`), with message-type validation as
//!   `enableTopicMessageTypeCheck` says;
//! - a push or simple consumer gets its group's settings: `fifo` from `consumeMessageOrderly`,
//!   `retryMaxTimes + 1` attempts on a customized backoff (1 s 5 s 10 s 30 s 1 m … 2 h), 32
//!   messages per receive and a 20 s long-polling timeout;
//! - client metrics are switched off.
//!
//! Settings without publishing or subscription close the stream with gRPC INVALID_ARGUMENT. The
//! stream ends when the client closes it or the broker shuts down. While it is open it also
//! carries the broker's calls to the client: a transaction check arrives as a
//! RecoverOrphanedTransactionCommand (see [`super::registry`]).

use std::sync::Arc;
use std::time::Duration;

use comet_grpc_proto::v2;
use comet_grpc_proto::v2::settings::PubSub;
use comet_grpc_proto::v2::telemetry_command::Command;
use tokio::sync::mpsc;
use tonic::{Status, Streaming};

use super::clients::GrpcClients;
use super::registry::{self, ClientMeta};
use super::transaction::GrpcTransactions;
use super::{BoxStream, status};
use comet_broker::context::BrokerContext;

/// Send attempts of a producer (first try included).
const PRODUCER_MAX_ATTEMPTS: i32 = 3;
/// First and longest pause between a producer's attempts.
const PRODUCER_BACKOFF_INITIAL: Duration = Duration::from_millis(10);
const PRODUCER_BACKOFF_MAX: Duration = Duration::from_secs(1);
const PRODUCER_BACKOFF_MULTIPLIER: f32 = 2.0;
/// Retries of a group without a subscription-group config (`retryMaxTimes` default).
const DEFAULT_RETRY_MAX_TIMES: i32 = 16;
/// Pauses before a consumer's redeliveries, in seconds.
pub const CONSUMER_BACKOFF_SECS: [u64; 18] = [
    1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200,
];
/// Messages a consumer asks for per receive.
const RECEIVE_BATCH_SIZE: i32 = 32;
/// How long a receive may wait for messages.
const LONG_POLLING_TIMEOUT: Duration = Duration::from_secs(20);
/// Answers queued for one stream before the reader waits.
const OUTBOUND_QUEUE: usize = 16;

/// Starts serving one Telemetry stream of the client `meta`; returns the broker → client half.
/// Settings also register the client in the broker's client tables ([`super::registry`]); the
/// end of the stream removes it.
pub fn start(
    ctx: Arc<BrokerContext>,
    clients: Arc<GrpcClients>,
    transactions: Arc<GrpcTransactions>,
    meta: ClientMeta,
    mut inbound: Streaming<v2::TelemetryCommand>,
) -> BoxStream<v2::TelemetryCommand> {
    let (tx, rx) = mpsc::channel::<Result<v2::TelemetryCommand, Status>>(OUTBOUND_QUEUE);
    let shutdown = ctx.shutdown.clone();
    let stream = clients.next_stream();
    tokio::spawn(async move {
        loop {
            let command = tokio::select! {
                () = shutdown.cancelled() => break,
                next = inbound.message() => match next {
                    Ok(Some(command)) => command,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!(client_id = %meta.client_id, error = %e, "telemetry stream broke");
                        break;
                    }
                },
            };
            let answer = match command.command {
                Some(Command::Settings(settings)) => match merged_settings(&ctx, &settings) {
                    Ok(merged) => {
                        clients.put(&meta.client_id, merged.clone());
                        register(&ctx, &clients, &transactions, &meta, stream, &tx, &merged);
                        Ok(v2::TelemetryCommand {
                            status: Some(status::ok()),
                            command: Some(Command::Settings(merged)),
                        })
                    }
                    Err(reason) => Err(Status::invalid_argument(reason)),
                },
                other => {
                    tracing::debug!(client_id = %meta.client_id, command = ?other, "telemetry command ignored");
                    continue;
                }
            };
            let failed = answer.is_err();
            if tx.send(answer).await.is_err() || failed {
                break;
            }
        }
        if let Some(channel) = clients.detach(&meta.client_id, Some(stream)) {
            registry::unregister(&ctx, &channel);
        }
    });
    Box::pin(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }))
}

/// Registers the client of `meta` with `settings`, on the channel of this stream (opened on the
/// stream's first Settings).
fn register(
    ctx: &Arc<BrokerContext>,
    clients: &GrpcClients,
    transactions: &Arc<GrpcTransactions>,
    meta: &ClientMeta,
    stream: u64,
    tx: &mpsc::Sender<Result<v2::TelemetryCommand, Status>>,
    settings: &v2::Settings,
) {
    let channel = match clients.attached(&meta.client_id) {
        Some(attached) if attached.stream == stream => attached.channel,
        _ => {
            let channel = registry::open_channel(ctx, meta, Arc::clone(transactions), tx.clone());
            if let Some(old) = clients.attach(stream, channel.clone(), meta.clone()) {
                registry::unregister(ctx, &old);
            }
            channel
        }
    };
    registry::register(ctx, meta, &channel, settings);
}

/// The settings a client runs with, from the ones it sent (see the module docs).
pub fn merged_settings(ctx: &BrokerContext, client: &v2::Settings) -> Result<v2::Settings, String> {
    let mut merged = client.clone();
    match &client.pub_sub {
        Some(PubSub::Publishing(publishing)) => {
            merged.backoff_policy = Some(v2::RetryPolicy {
                max_attempts: PRODUCER_MAX_ATTEMPTS,
                strategy: Some(v2::retry_policy::Strategy::ExponentialBackoff(
                    v2::ExponentialBackoff {
                        initial: Some(duration(PRODUCER_BACKOFF_INITIAL)),
                        max: Some(duration(PRODUCER_BACKOFF_MAX)),
                        multiplier: PRODUCER_BACKOFF_MULTIPLIER,
                    },
                )),
            });
            merged.pub_sub = Some(PubSub::Publishing(v2::Publishing {
                topics: publishing.topics.clone(),
                max_body_size: i32::try_from(ctx.live_config().max_message_size)
                    .unwrap_or(i32::MAX),
                validate_message_type: ctx.live_config().enable_topic_message_type_check,
            }));
        }
        Some(PubSub::Subscription(subscription)) => {
            let group = subscription.group.as_ref().map_or("", |g| g.name.as_str());
            let (fifo, retry_max_times) = ctx
                .subscription_groups
                .find(group)
                .map_or((false, DEFAULT_RETRY_MAX_TIMES), |g| {
                    (g.consume_message_orderly, g.retry_max_times)
                });
            merged.backoff_policy = Some(v2::RetryPolicy {
                max_attempts: retry_max_times.saturating_add(1),
                strategy: Some(v2::retry_policy::Strategy::CustomizedBackoff(
                    v2::CustomizedBackoff {
                        next: CONSUMER_BACKOFF_SECS
                            .iter()
                            .map(|&s| duration(Duration::from_secs(s)))
                            .collect(),
                    },
                )),
            });
            merged.pub_sub = Some(PubSub::Subscription(v2::Subscription {
                group: subscription.group.clone(),
                subscriptions: subscription.subscriptions.clone(),
                fifo: Some(fifo),
                receive_batch_size: Some(RECEIVE_BATCH_SIZE),
                long_polling_timeout: Some(duration(LONG_POLLING_TIMEOUT)),
            }));
        }
        None => {
            return Err("settings carry neither publishing nor subscription".to_owned());
        }
    }
    merged.metric = Some(v2::Metric {
        on: false,
        endpoints: None,
    });
    Ok(merged)
}

/// A protobuf `Duration`.
pub fn duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}
