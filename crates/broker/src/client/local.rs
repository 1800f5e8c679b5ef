//! Clients the broker reaches without a remoting connection of their own (the gRPC endpoint's
//! clients). They sit in the producer and consumer tables behind a detached channel like any
//! client, and register here what they do with the requests the broker makes of its clients, so
//! that the broker hands those requests over typed instead of encoding them for a connection
//! that does not exist.

use std::collections::HashMap;
use std::sync::Arc;

use comet_remoting::Channel;
use parking_lot::RwLock;

use crate::transaction::check::TransactionCheck;

/// What a client without a remoting connection does with the broker's requests.
pub trait LocalClient: Send + Sync {
    /// The broker asks about one of the client's open transactions (a remoting producer gets
    /// CHECK_TRANSACTION_STATE).
    fn check_transaction(&self, check: TransactionCheck);
}

/// The local clients, by the id of the channel that stands for each in the client tables.
#[derive(Default)]
pub struct LocalClients {
    by_channel: RwLock<HashMap<u64, Arc<dyn LocalClient>>>,
}

impl std::fmt::Debug for LocalClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalClients")
            .field("clients", &self.by_channel.read().len())
            .finish()
    }
}

impl LocalClients {
    /// `client` stands behind `channel` from now on.
    pub fn insert(&self, channel: &Channel, client: Arc<dyn LocalClient>) {
        self.by_channel.write().insert(channel.id(), client);
    }

    /// The client behind `channel` is gone.
    pub fn remove(&self, channel: &Channel) {
        self.by_channel.write().remove(&channel.id());
    }

    /// The local client behind `channel`, if it stands for one.
    pub fn get(&self, channel: &Channel) -> Option<Arc<dyn LocalClient>> {
        self.by_channel.read().get(&channel.id()).cloned()
    }
}
