//! The settings each gRPC client announced over Telemetry, by client id (`x-mq-client-id`).
//!
//! A client is known once its first Settings arrived; Heartbeat refuses unknown clients (a client
//! whose type the broker cannot tell) and NotifyClientTermination forgets them. A client with an
//! open Telemetry stream also has the channel that stands for it in the broker's client tables
//! (see [`super::registry`]), tied to that stream.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use comet_grpc_proto::v2;
use comet_remoting::Channel;
use parking_lot::Mutex;

use super::registry::ClientMeta;

/// The channel of a client and the Telemetry stream it belongs to.
#[derive(Debug, Clone)]
pub struct Attached {
    /// The channel standing for the client in the broker's client tables.
    pub channel: Channel,
    /// Who the client is.
    pub meta: ClientMeta,
    /// The Telemetry stream it belongs to.
    pub stream: u64,
}

/// Client id → the settings the client sent last, and its channel.
#[derive(Debug, Default)]
pub struct GrpcClients {
    settings: Mutex<HashMap<String, v2::Settings>>,
    attached: Mutex<HashMap<String, Attached>>,
    next_stream: AtomicU64,
}

impl GrpcClients {
    /// Records the settings `client_id` sent.
    pub fn put(&self, client_id: &str, settings: v2::Settings) {
        self.settings.lock().insert(client_id.to_owned(), settings);
    }

    /// The settings `client_id` sent last, if any.
    pub fn get(&self, client_id: &str) -> Option<v2::Settings> {
        self.settings.lock().get(client_id).cloned()
    }

    /// Forgets `client_id`; returns whether it was known.
    pub fn remove(&self, client_id: &str) -> bool {
        self.settings.lock().remove(client_id).is_some()
    }

    /// A new id for a Telemetry stream.
    pub fn next_stream(&self) -> u64 {
        self.next_stream.fetch_add(1, Ordering::Relaxed)
    }

    /// Ties `channel` to the client of `meta` and its Telemetry stream `stream`; returns the
    /// channel it had before, which the caller unregisters.
    pub fn attach(&self, stream: u64, channel: Channel, meta: ClientMeta) -> Option<Channel> {
        let client_id = meta.client_id.clone();
        self.attached
            .lock()
            .insert(
                client_id,
                Attached {
                    channel,
                    meta,
                    stream,
                },
            )
            .map(|old| old.channel)
    }

    /// The channel of `client_id`, if it has one.
    pub fn attached(&self, client_id: &str) -> Option<Attached> {
        self.attached.lock().get(client_id).cloned()
    }

    /// The channel of `client_id` on stream `stream` (on any stream when `None`), no longer tied
    /// to it.
    pub fn detach(&self, client_id: &str, stream: Option<u64>) -> Option<Channel> {
        let mut attached = self.attached.lock();
        match attached.get(client_id) {
            Some(a) if stream.is_none_or(|s| s == a.stream) => {
                attached.remove(client_id).map(|a| a.channel)
            }
            _ => None,
        }
    }

    /// How many clients are known.
    pub fn len(&self) -> usize {
        self.settings.lock().len()
    }

    /// Whether no client is known.
    pub fn is_empty(&self) -> bool {
        self.settings.lock().is_empty()
    }
}
