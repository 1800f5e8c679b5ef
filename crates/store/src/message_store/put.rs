//! The put path: a send's record appended to the CommitLog, then dispatched and, under
//! SYNC_FLUSH, waited on until durable.

use std::sync::atomic::Ordering;
use std::time::Instant;

use comet_protocol::message::MessageExt;
use comet_protocol::message::properties::keys;

use super::MessageStore;
use crate::commit_log::{Commit, MessageExtBatch, PutMessageResult, PutMessageStatus};
use crate::config::FlushDiskType;
use crate::error::StoreError;

/// Whether the WAIT property asks for durability (missing means true).
fn wait_store_msg_ok(props: &comet_protocol::message::Properties) -> bool {
    props.get(keys::WAIT_STORE_MSG_OK) != Some("false")
}

impl MessageStore {
    fn check_store_status(&self) -> Result<(), PutMessageStatus> {
        if !self.running.load(Ordering::Acquire) {
            tracing::warn!("message store is shut down; put refused");
            return Err(PutMessageStatus::ServiceNotAvailable);
        }
        if self.disk_full.load(Ordering::Acquire) {
            tracing::warn!("commit log disk is full; put refused");
            return Err(PutMessageStatus::ServiceNotAvailable);
        }
        Ok(())
    }

    /// Stores one message (see [`CommitLog::put_message`](crate::commit_log::CommitLog::put_message) for what the caller fills in).
    ///
    /// Under SYNC_FLUSH with `WAIT` not `false`, resolves once the record is durable, or with
    /// FLUSH_DISK_TIMEOUT after `sync_flush_timeout` (the timeout needs a Tokio runtime; outside
    /// one the put waits for the flush thread's answer).
    pub async fn put_message(&self, msg: MessageExt) -> PutMessageResult {
        self.put_message_with(msg, Commit::Now).await
    }

    /// [`MessageStore::put_message`] whose record may be left pending ([`Commit::Deferred`]):
    /// it is neither readable nor dispatched until [`MessageStore::commit_pending`] (or the flush
    /// thread, at its next round) writes it. The broker answers sends this way and commits
    /// before their responses leave (`comet_remoting::ResponseFence`). Under SYNC_FLUSH a
    /// deferred put that asks to wait returns at once with [`PutMessageResult::flush_until`]:
    /// the caller answers only once [`MessageStore::flushed_watch`] reaches it, or after
    /// [`MessageStore::sync_flush_timeout`] with FLUSH_DISK_TIMEOUT (reporting it through
    /// [`MessageStore::note_flush_timeout`]).
    pub async fn put_message_with(&self, msg: MessageExt, commit: Commit) -> PutMessageResult {
        let wait = wait_store_msg_ok(&msg.properties);
        self.put_one(msg, commit, wait).await
    }

    /// [`MessageStore::put_message`] of a message the broker moves by itself (a delay or timer
    /// message falling due): answered once written, never held for a SYNC_FLUSH, without a
    /// `WAIT` property added to what is stored.
    pub async fn put_message_unawaited(&self, msg: MessageExt) -> PutMessageResult {
        self.put_one(msg, Commit::Now, false).await
    }

    async fn put_one(&self, msg: MessageExt, commit: Commit, wait: bool) -> PutMessageResult {
        if let Err(status) = self.check_store_status() {
            return self.failed(status);
        }
        let began = Instant::now();
        let result = match self.commit_log.put_message_with(msg, commit) {
            Ok(append) => self.after_append(append, wait, commit).await,
            Err(status) => self.failed(status),
        };
        self.stats.record_put_time(began.elapsed());
        result
    }

    /// Stores a batch as consecutive records (one segment, consecutive queue offsets).
    pub async fn put_messages(&self, batch: MessageExtBatch) -> PutMessageResult {
        self.put_messages_with(batch, Commit::Now).await
    }

    /// [`MessageStore::put_messages`], committed now or left pending (see
    /// [`MessageStore::put_message_with`]).
    pub async fn put_messages_with(
        &self,
        batch: MessageExtBatch,
        commit: Commit,
    ) -> PutMessageResult {
        if let Err(status) = self.check_store_status() {
            return self.failed(status);
        }
        let began = Instant::now();
        let wait = batch
            .messages
            .first()
            .is_none_or(|m| wait_store_msg_ok(&m.properties));
        let result = match self.commit_log.put_messages_with(batch, commit) {
            Ok(append) => self.after_append(append, wait, commit).await,
            Err(status) => self.failed(status),
        };
        self.stats.record_put_time(began.elapsed());
        result
    }

    /// Writes the records deferred puts left pending and, under ASYNC_FLUSH, dispatches them
    /// (under SYNC_FLUSH the flush after this does: the flush thread is woken for it).
    /// On return every put made before the call is readable, unless the write failed (then the
    /// records stay pending and the next commit retries them).
    pub fn commit_pending(&self) -> Result<(), StoreError> {
        if self.write_pending()? {
            self.flush_pending();
        }
        Ok(())
    }

    /// [`MessageStore::commit_pending`] without the SYNC_FLUSH wake-up: the caller calls
    /// [`MessageStore::flush_pending`] next. Returns whether it wrote anything.
    pub fn write_pending(&self) -> Result<bool, StoreError> {
        let wrote = self.commit_log.commit()?;
        if wrote && self.flusher.mode() == FlushDiskType::AsyncFlush {
            self.reput.dispatch_now();
            self.flusher.wake_if_needed();
            self.prepare_ahead_if_needed();
        }
        Ok(wrote)
    }

    /// SYNC_FLUSH: sees that what is written gets flushed (and then dispatched): wakes the flush
    /// thread, which runs the next group commit (under load it is polling for it, so this costs
    /// a flag). Nothing to do under ASYNC_FLUSH or when everything is flushed.
    pub fn flush_pending(&self) {
        if self.flusher.mode() != FlushDiskType::SyncFlush
            || self.commit_log.flushed_where() >= self.commit_log.max_offset()
        {
            return;
        }
        // The flush thread leaves pending records to their writers, so it learns of written
        // ones here.
        self.flusher.wake();
    }

    /// Under ASYNC_FLUSH the appends, not the flush, tell the prepare-ahead thread they came
    /// closer (the timed flush runs every 500 ms, tens of MiB apart at full rate).
    fn prepare_ahead_if_needed(&self) {
        if let Some(zero_ahead) = &self.zero_ahead {
            zero_ahead.wake_if_needed();
        }
    }

    fn failed(&self, status: PutMessageStatus) -> PutMessageResult {
        self.stats
            .put_message_failed_times
            .fetch_add(1, Ordering::Relaxed);
        PutMessageResult::failed(status)
    }

    async fn after_append(
        &self,
        append: crate::commit_log::AppendMessageResult,
        wait: bool,
        commit: Commit,
    ) -> PutMessageResult {
        self.stats
            .put_message_times_total
            .fetch_add(append.msg_num as u64, Ordering::Relaxed);
        self.stats
            .put_message_size_total
            .fetch_add(append.wrote_bytes as u64, Ordering::Relaxed);
        let mut status = PutMessageStatus::PutOk;
        match self.flusher.mode() {
            // A deferred record is dispatched by whoever commits it.
            FlushDiskType::AsyncFlush if commit == Commit::Deferred => {}
            FlushDiskType::AsyncFlush => {
                self.reput.dispatch_now();
                self.flusher.wake_if_needed();
                self.prepare_ahead_if_needed();
            }
            FlushDiskType::SyncFlush if wait => {
                let end =
                    append.wrote_offset + i64::try_from(append.wrote_bytes).unwrap_or(i64::MAX);
                if commit == Commit::Deferred {
                    // The caller holds its answer; whoever writes the record sees it flushed
                    // (`flush_pending` after `write_pending`, or `commit_pending`).
                    return PutMessageResult {
                        status,
                        append: Some(append),
                        flush_until: Some(end),
                    };
                }
                let rx = self.flusher.request(end);
                let durable = if tokio::runtime::Handle::try_current().is_ok() {
                    matches!(
                        tokio::time::timeout(self.live.get().sync_flush_timeout, rx).await,
                        Ok(Ok(true))
                    )
                } else {
                    // Outside a Tokio runtime there is no timer: wait for the flush thread, which
                    // always answers (on success, failure or shutdown).
                    matches!(rx.await, Ok(true))
                };
                if !durable {
                    self.note_flush_timeout(end);
                    status = PutMessageStatus::FlushDiskTimeout;
                }
            }
            FlushDiskType::SyncFlush => self.flusher.wake(),
        }
        PutMessageResult {
            status,
            append: Some(append),
            flush_until: None,
        }
    }

    /// The CommitLog's flushed offset, published by the flush thread after each flush: what the
    /// answers of deferred SYNC_FLUSH puts wait for ([`PutMessageResult::flush_until`]).
    pub fn flushed_watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.flusher.flushed_watch()
    }

    /// How long a SYNC_FLUSH put waits for its flush before it answers FLUSH_DISK_TIMEOUT.
    pub fn sync_flush_timeout(&self) -> std::time::Duration {
        self.live.get().sync_flush_timeout
    }

    /// Counts and logs a SYNC_FLUSH put whose flush to `until` did not complete in time (the
    /// record is still stored).
    pub fn note_flush_timeout(&self, until: i64) {
        tracing::warn!(until, "sync flush did not complete in time");
        self.stats
            .put_message_flush_timeouts
            .fetch_add(1, Ordering::Relaxed);
    }
}
