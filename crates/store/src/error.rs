//! Errors of the store crate.
//!
//! Every failure that comes from the disk (I/O, a damaged record, a file of the wrong size) is a
//! [`StoreError`] carrying the path and, where it makes sense, the byte offset, so an operator can
//! find the damage. Recovery never panics on bad data: it reports a [`StoreError::Corrupt`] or
//! truncates and logs.

use std::path::PathBuf;

use comet_protocol::ProtocolError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum StoreError {
    /// An operating-system I/O call failed on `path`.
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Data on disk does not have the expected shape.
    #[error("corrupt data in {file} at offset {offset}: {reason}")]
    Corrupt {
        file: PathBuf,
        offset: i64,
        reason: String,
    },
    /// A record or body failed to encode/decode.
    #[error("protocol error: {0}")]
    Protocol(#[from] ProtocolError),
    /// The configuration is inconsistent or a value is out of range.
    #[error("invalid store configuration: {0}")]
    Config(String),
    /// A mapped file has no room for the requested write.
    #[error("mapped file {path} is full: {needed} bytes needed, {free} free")]
    FileFull {
        path: PathBuf,
        needed: usize,
        free: usize,
    },
    /// An offset is outside of what the structure holds (a logic error of the caller or stale state).
    #[error("offset {offset} out of range: {reason}")]
    OffsetOutOfRange { offset: i64, reason: String },
    /// Replicated bytes do not continue this log's records: the master's log has diverged from
    /// this slave's.
    #[error(
        "replicated bytes at offset {offset} do not continue this log ({reason}): the master's log has diverged from this slave's; empty the slave's store to replicate this master"
    )]
    Diverged { offset: i64, reason: String },
    /// Another process holds the store's `lock` file.
    #[error("store directory {0} is locked by another process")]
    Locked(PathBuf),
    /// The store is shutting down or its services have stopped.
    #[error("the message store is not running")]
    NotRunning,
}

impl StoreError {
    /// Wraps an [`std::io::Error`] with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StoreError::Io {
            path: path.into(),
            source,
        }
    }

    /// Builds a [`StoreError::Corrupt`].
    pub fn corrupt(file: impl Into<PathBuf>, offset: i64, reason: impl Into<String>) -> Self {
        StoreError::Corrupt {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
