//! The message codec: stored-message records (§5.1), body CRC (§5.2), sys flags (§5.3), the
//! properties string (§5.4), batch bodies (§5.6), message ids (§5.7) and body decompression.
//!
//! The same record layout is used in the commit log and in pull/query/view response bodies, so the
//! store and the client share this code.

use std::net::SocketAddr;

use bytes::Bytes;

pub mod properties;
pub use properties::Properties;

/// A message as stored: the fields of one commit-log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageExt {
    pub topic: String,
    pub flag: i32,
    pub body: Bytes,
    pub properties: Properties,
    pub queue_id: i32,
    /// TOTALSIZE of the record this was decoded from (0 before encoding).
    pub store_size: i32,
    pub queue_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_timestamp: i64,
    pub store_host: SocketAddr,
    pub commit_log_offset: i64,
    pub body_crc: i32,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
}
