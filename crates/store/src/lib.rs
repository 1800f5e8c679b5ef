//! # comet-store
//!
//! The broker's local message store, laid out on disk exactly like Apache RocketMQ's so a store
//! directory can be inspected with the same tools: a CommitLog of fixed-size segments holding every
//! message back to back, one ConsumeQueue per (topic, queue id) indexing it, an IndexFile for key
//! lookups, a checkpoint and an abort marker for crash recovery.
//!
//! Why this shape: every put is one sequential append to one file ([`commit_log`]), whatever the
//! topic, so writes stay sequential with thousands of queues. Everything consumers look up by
//! queue offset or key is *derived* from the CommitLog by one dispatch thread ([`dispatch`]), and
//! can therefore always be rebuilt from it ([`recovery`]). Durability is a separate concern
//! ([`flush`]): ASYNC_FLUSH acknowledges from the page cache, SYNC_FLUSH batches concurrent
//! writers into one msync (group commit).
//!
//! Entry point: [`MessageStore`] ([`message_store`]). Building blocks: [`mapped_file`] and
//! [`mapped_file_queue`] (memory-mapped segments), [`consume_queue`], [`index_service`],
//! [`checkpoint`], [`cleanup`] (retention decisions), [`page_release`] (bounding the mapped
//! pages in the resident set).
//!
//! The broker's metadata (topics, groups, offsets) is not kept here: the store keeps messages.
//!
//! Unsafe code is denied crate-wide and allowed in three modules only, each `unsafe` block there
//! with a `// SAFETY:` comment: [`mapped_file`] (creating memory mappings and reading and writing
//! through them), [`index_file`] (the same for an IndexFile's mapping) and `os` (the operating
//! system calls the standard library does not offer: local time, filesystem space, physical
//! memory, `fallocate`, `sync_file_range`, `posix_fadvise`). Everything else calls their safe
//! functions.

#![deny(unsafe_code)]

pub mod checkpoint;
pub mod cleanup;
pub mod commit_log;
pub mod config;
pub mod consume_queue;
pub mod dispatch;
pub mod error;
pub mod flush;
#[allow(unsafe_code)]
pub mod index_file;
pub mod index_service;
pub mod live;
#[allow(unsafe_code)]
pub mod mapped_file;
pub mod mapped_file_queue;
pub mod message_store;
#[allow(unsafe_code)]
mod os;
pub mod page_release;
pub mod page_release_trigger;
pub mod recovery;
pub mod replica;
pub mod service;
pub mod timer;
pub mod zero_ahead;

pub use commit_log::{
    AppendMessageResult, Commit, CommitLog, MessageExtBatch, PutMessageResult, PutMessageStatus,
};
pub use config::{FlushDiskType, MessageStoreConfig};
pub use dispatch::{MessageArrival, MessageArrivingListener};
pub use error::{Result, StoreError};
pub use flush::{FLUSH_LATENCY_BUCKETS_US, FlushStatsSnapshot};
pub use live::LiveStoreSettings;
pub use message_store::{
    GetMessageResult, GetMessageStatus, MessageFilter, MessageStore, PUT_TIME_BUCKETS_MS,
    QueryMessageResult, StoreStatsSnapshot,
};
pub use recovery::RecoveryReport;
