//! gRPC clients in the broker's producer and consumer tables, as Apache's proxy registers them.
//!
//! Each client with a Telemetry stream gets a detached remoting channel
//! ([`comet_remoting::Channel::detached`]) carrying its client id, language (`x-mq-language`) and
//! version (`x-mq-client-version` when it names a RocketMQ version, else the broker's own). With
//! it the client is registered like a remoting client: a producer under each topic it publishes
//! to (the producer group of gRPC sends is the topic), a push or simple consumer in its group with
//! its subscriptions (clustering, from the last offset). Admin connection listings and the
//! client metrics therefore see gRPC clients too, and the transaction check reaches a gRPC
//! producer through the same table: what the broker sends to the channel is read back here, and
//! a CHECK_TRANSACTION_STATE becomes a RecoverOrphanedTransactionCommand on the client's
//! Telemetry stream (anything else sent to the channel is dropped).
//!
//! Settings register the client, every Heartbeat registers it again (which keeps it from
//! expiring), and NotifyClientTermination or the end of its Telemetry stream removes it from
//! both tables.

use std::net::SocketAddr;
use std::sync::Arc;

use comet_grpc_proto::v2;
use comet_grpc_proto::v2::settings::PubSub;
use comet_grpc_proto::v2::telemetry_command::Command;
use comet_protocol::RemotingCommand;
use comet_protocol::body::heartbeat::{
    ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData,
};
use comet_protocol::code::RequestCode;
use comet_protocol::command::{COMET_VERSION, LanguageCode};
use comet_remoting::{Channel, Outbox};
use tokio::sync::mpsc;
use tonic::Status;

use super::transaction::{self, GrpcTransactions};
use super::{message_view, status};
use crate::client::{ClientChannelInfo, notify_consumer_ids_changed};
use crate::context::BrokerContext;

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

/// The channel standing for `meta`'s client, and the task that forwards what the broker sends to
/// it onto the client's Telemetry stream `outbound`.
pub fn open_channel(
    ctx: &BrokerContext,
    meta: &ClientMeta,
    transactions: Arc<GrpcTransactions>,
    outbound: mpsc::Sender<Result<v2::TelemetryCommand, Status>>,
) -> Channel {
    let (channel, outbox) = Channel::detached(meta.peer, SocketAddr::new(ctx.store_host.ip(), 0));
    tokio::spawn(forward(outbox, transactions, outbound));
    channel
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
            if outcome.changed() && crate::processor::client_manage::notify_enabled(ctx, group) {
                notify_consumer_ids_changed(group, outcome.channels);
            }
        }
        None => {}
    }
}

/// Removes the client of `channel` from both tables and closes the channel.
pub fn unregister(ctx: &BrokerContext, channel: &Channel) {
    crate::client::housekeeping::channel_gone(ctx, channel);
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

/// Forwards what the broker sends to a client's channel until the channel closes or the stream
/// is gone.
async fn forward(
    mut outbox: Outbox,
    transactions: Arc<GrpcTransactions>,
    outbound: mpsc::Sender<Result<v2::TelemetryCommand, Status>>,
) {
    while let Some(command) = outbox.recv().await {
        let Some(recover) = recover_command(&transactions, &command) else {
            continue;
        };
        let telemetry = v2::TelemetryCommand {
            status: Some(status::ok()),
            command: Some(Command::RecoverOrphanedTransactionCommand(recover)),
        };
        if outbound.send(Ok(telemetry)).await.is_err() {
            return;
        }
    }
}

/// The RecoverOrphanedTransactionCommand standing for a CHECK_TRANSACTION_STATE sent to a gRPC
/// producer, the checked half remembered for its EndTransaction; `None` for any other command.
fn recover_command(
    transactions: &GrpcTransactions,
    command: &RemotingCommand,
) -> Option<v2::RecoverOrphanedTransactionCommand> {
    if command.code != RequestCode::CheckTransactionState.code() {
        return None;
    }
    let checked = match transaction::checked_half(command) {
        Ok(checked) => checked,
        Err(e) => {
            tracing::warn!(error = %e, "a transaction check for a gRPC producer is unreadable");
            return None;
        }
    };
    transactions.remember(&checked.group, &checked.transaction_id, checked.location);
    Some(v2::RecoverOrphanedTransactionCommand {
        message: Some(message_view::to_v2(
            &checked.message,
            v2::MessageType::Transaction,
        )),
        transaction_id: checked.transaction_id,
    })
}
