//! Errors of the harness. An [`Error::Violation`] is the interesting one: the broker broke a
//! promise (lost an acknowledged message, invented one, moved an offset backwards too far); every
//! other variant means the harness itself could not do its job.

use std::path::PathBuf;

/// What went wrong while driving or checking the broker.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("I/O on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start {bin}: {source}")]
    Spawn {
        bin: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("comet serve did not become ready: {0}")]
    NotReady(String),
    #[error("remoting: {0}")]
    Remoting(#[from] comet_remoting::RemotingError),
    #[error("protocol: {0}")]
    Protocol(#[from] comet_protocol::ProtocolError),
    #[error("client: {0}")]
    Client(#[from] comet_client::ClientError),
    #[error("unexpected broker response {code}: {remark}")]
    Response { code: i32, remark: String },
    #[error("invariant violated: {0}")]
    Violation(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
