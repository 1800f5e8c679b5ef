//! The broker's [`ResponseFence`]: what a connection does before it writes responses.

use std::sync::Arc;

use comet_remoting::{ResponseFence, Settled};
use comet_store::MessageStore;

use crate::ha::Replication;
use crate::long_polling::PullRequestHoldService;

/// The broker's [`ResponseFence`]: commits the CommitLog appends the send processor deferred,
/// before a connection writes the answers to them.
///
/// Committing dispatches the records, which answers the pulls held for them (on tasks of their
/// own): the fence tells the writer so, and a producer's answer and the pull response of a
/// consumer on the same connection (one client instance, as Java's and ours share) then leave
/// in one write.
pub struct CommitBeforeReply {
    store: Arc<MessageStore>,
    pull_hold: Arc<PullRequestHoldService>,
    replication: Arc<Replication>,
}

impl CommitBeforeReply {
    pub fn new(
        store: Arc<MessageStore>,
        pull_hold: Arc<PullRequestHoldService>,
        replication: Arc<Replication>,
    ) -> Self {
        Self {
            store,
            pull_hold,
            replication,
        }
    }
}

impl ResponseFence for CommitBeforeReply {
    fn settle(&self) -> Result<Settled, String> {
        let answered = self.pull_hold.answered_count();
        let wrote = self
            .store
            .write_pending()
            .map_err(|e| format!("commit log write failed: {e}"))?;
        if wrote {
            // The slave connections send what was just written.
            self.replication.master.wake(self.store.max_phy_offset());
        }
        Ok(Settled {
            // Another connection's commit may have woken them: a needless yield, no harm.
            woke_responders: self.pull_hold.answered_count() != answered,
        })
    }

    /// SYNC_MASTER answers wait for enough copies (and the master's flush under SYNC_FLUSH);
    /// SYNC_FLUSH answers for the flushed offset.
    fn released(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.replication
            .released()
            .or_else(|| Some(self.store.flushed_watch()))
    }

    /// SYNC_FLUSH: has the flush thread flush what `settle` wrote. Whether this writer holds
    /// answers does not matter: the msync never runs on a connection's thread (see
    /// `comet_store::flush::PollWindow` for why).
    fn release(&self, _held: bool) {
        self.store.flush_pending();
    }

    fn hold_timeout(&self) -> std::time::Duration {
        self.replication
            .slave_timeout()
            .unwrap_or_else(|| self.store.sync_flush_timeout())
    }

    fn on_hold_expired(&self, until: u64) {
        let until = i64::try_from(until).unwrap_or(i64::MAX);
        if self.replication.waits_for_slaves() {
            self.replication.note_slave_timeout(until);
        } else {
            self.store.note_flush_timeout(until);
        }
    }
}
