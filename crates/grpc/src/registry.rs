//! gRPC clients in the broker's producer and consumer tables, as Apache's proxy registers them.
//!
//! Each client with a Telemetry stream gets a detached remoting channel
//! ([`comet_remoting::Channel::detached`]) carrying its client id, language (`x-mq-language`) and
//! version (`x-mq-client-version` when it names a RocketMQ version, else the broker's own). With
//! it the client is registered like a remoting client: a producer under each topic it publishes
//! to (the producer group of gRPC sends is the topic), a push or simple consumer in its group with
//! its subscriptions (clustering, from the last offset). Admin connection listings and the
//! client metrics therefore see gRPC clients too, and the transaction check reaches a gRPC
//! producer through the same table: the client is registered as a local client of the broker
//! ([`comet_broker::client::LocalClient`]), so a check of one of its halves arrives here typed and
//! becomes a RecoverOrphanedTransactionCommand on the client's Telemetry stream. Anything the
//! broker sends to the channel itself (requests meant for remoting clients) is dropped.
//!
//! Settings register the client, every Heartbeat registers it again (which keeps it from
//! expiring), and NotifyClientTermination or the end of its Telemetry stream removes it from
//! both tables.

use std::net::SocketAddr;
use std::sync::Arc;

use comet_grpc_proto::v2;
use comet_grpc_proto::v2::settings::PubSub;
use comet_grpc_proto::v2::telemetry_command::Command;
use comet_protocol::body::heartbeat::{
    ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData,
};
use comet_protocol::command::{COMET_VERSION, LanguageCode};
use comet_remoting::{Channel, Outbox};
use tokio::sync::mpsc;
use tonic::Status;

use super::transaction::{self, GrpcTransactions};
use super::{message_view, status};
use comet_broker::client::{ClientChannelInfo, LocalClient, notify_consumer_ids_changed};
use comet_broker::context::BrokerContext;
use comet_broker::transaction::check::TransactionCheck;

/// The request header naming the client's language.
pub const LANGUAGE_HEADER: &str = "x-mq-language";
/// The request header naming the client's version.
pub const VERSION_HEADER: &str = "x-mq-client-version";
/// Expression type of SQL92 subscriptions.
const SQL92: &str = "SQL92";

/// Who a client is, from its request headers.
#[derive(Debug, Clone)]
pub struct ClientMeta {
    /// `x-mq-client-id`.
    pub client_id: String,
    /// `x-mq-language` as a remoting language code (OTHER when unknown).
    pub language: LanguageCode,
    /// The remoting version ordinal to announce.
    pub version: i32,
    /// The client's address.
    pub peer: SocketAddr,
}

impl ClientMeta {
    /// The client of a request with these headers.
    pub fn of<T>(request: &tonic::Request<T>, client_id: String) -> Self {
        let header = |name| {
            request
                .metadata()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
        };
        ClientMeta {
            client_id,
            language: LanguageCode::from_name(&header(LANGUAGE_HEADER).to_ascii_uppercase()),
            version: version_ordinal(header(VERSION_HEADER)),
            peer: super::peer(request),
        }
    }
}

/// The remoting version ordinal of a client version string: Apache's proxy looks the string up
/// among RocketMQ's `MQVersion` names (which 5.x SDK versions such as `5.0.8` are not) and uses
/// its own version otherwise; so does this.
pub fn version_ordinal(_version: &str) -> i32 {
    COMET_VERSION
}

/// The channel standing for `meta`'s client (registered with the broker as a local client that
/// forwards transaction checks onto the client's Telemetry stream `outbound`), and the task that
/// drains what the broker sends to the channel itself.
pub fn open_channel(
    ctx: &BrokerContext,
    meta: &ClientMeta,
    transactions: Arc<GrpcTransactions>,
    outbound: mpsc::Sender<Result<v2::TelemetryCommand, Status>>,
) -> Channel {
    let (channel, outbox) = Channel::detached(meta.peer, SocketAddr::new(ctx.store_host.ip(), 0));
    ctx.local_clients.insert(
        &channel,
        Arc::new(TelemetryClient {
            transactions,
            outbound,
        }),
    );
    tokio::spawn(drain(outbox));
    channel
}

/// A gRPC client as the broker's local client: its transaction checks go out on its Telemetry
/// stream.
struct TelemetryClient {
    transactions: Arc<GrpcTransactions>,
    outbound: mpsc::Sender<Result<v2::TelemetryCommand, Status>>,
}

impl LocalClient for TelemetryClient {
    fn check_transaction(&self, check: TransactionCheck) {
        let recover = recover_command(&self.transactions, check);
        let telemetry = v2::TelemetryCommand {
            status: Some(status::ok()),
            command: Some(Command::RecoverOrphanedTransactionCommand(recover)),
        };
        // A full stream drops the check: the broker checks the half again later.
        if let Err(e) = self.outbound.try_send(Ok(telemetry)) {
            tracing::debug!(error = %e, "a transaction check for a gRPC producer was not queued");
        }
    }
}

/// Registers the client of `channel` as its `settings` say (see the module docs).
pub fn register(
    ctx: &BrokerContext,
    meta: &ClientMeta,
    channel: &Channel,
    settings: &v2::Settings,
) {
    let info = ClientChannelInfo::new(
        channel.clone(),
        meta.client_id.clone(),
        meta.language,
        meta.version,
    );
    match &settings.pub_sub {
        Some(PubSub::Publishing(publishing)) => {
            for topic in &publishing.topics {
                ctx.producers.register_producer(&topic.name, info.clone());
            }
        }
        Some(PubSub::Subscription(subscription)) => {
            let Some(group) = subscription.group.as_ref().map(|g| g.name.as_str()) else {
                return;
            };
            let consume_type = if settings.client_type() == v2::ClientType::SimpleConsumer {
                ConsumeType::ConsumeActively
            } else {
                ConsumeType::ConsumePassively
            };
            let now = comet_protocol::time::now_millis();
            let subscriptions: Vec<SubscriptionData> = subscription
                .subscriptions
                .iter()
                .filter_map(|entry| subscription_data(entry, now))
                .collect();
            let outcome = ctx.consumers.register_consumer(
                group,
                info,
                consume_type,
                MessageModel::Clustering,
                ConsumeFromWhere::ConsumeFromLastOffset,
                Some(&subscriptions),
            );
            if outcome.changed()
                && comet_broker::processor::client_manage::notify_enabled(ctx, group)
            {
                notify_consumer_ids_changed(group, outcome.channels);
            }
        }
        None => {}
    }
}

/// Removes the client of `channel` from both tables and closes the channel.
pub fn unregister(ctx: &BrokerContext, channel: &Channel) {
    ctx.local_clients.remove(channel);
    comet_broker::client::housekeeping::channel_gone(ctx, channel);
    channel.close();
}

/// The subscription of one v2 subscription entry (a TAG or SQL92 filter on a topic).
fn subscription_data(entry: &v2::SubscriptionEntry, now: i64) -> Option<SubscriptionData> {
    let topic = entry.topic.as_ref()?.name.clone();
    let filter = entry.expression.clone().unwrap_or_default();
    if filter.r#type() == v2::FilterType::Sql {
        return Some(SubscriptionData {
            topic,
            sub_string: filter.expression,
            sub_version: now,
            expression_type: SQL92.to_owned(),
            ..SubscriptionData::default()
        });
    }
    Some(SubscriptionData::from_tag_expression(
        topic,
        &filter.expression,
        now,
    ))
}

/// Drops what the broker sends to a gRPC client's channel (requests meant for remoting clients)
/// until the channel closes.
async fn drain(mut outbox: Outbox) {
    while outbox.recv().await.is_some() {}
}

/// The RecoverOrphanedTransactionCommand of a transaction check, the checked half remembered
/// for the producer's EndTransaction.
fn recover_command(
    transactions: &GrpcTransactions,
    check: TransactionCheck,
) -> v2::RecoverOrphanedTransactionCommand {
    let checked = transaction::checked_half(check);
    transactions.remember(&checked.group, &checked.transaction_id, checked.location);
    v2::RecoverOrphanedTransactionCommand {
        message: Some(message_view::to_v2(
            &checked.message,
            v2::MessageType::Transaction,
        )),
        transaction_id: checked.transaction_id,
    }
}
