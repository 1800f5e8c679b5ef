//! Errors of the protocol layer. Every decoder returns one of these instead of panicking.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("frame length {len} exceeds the limit of {max} bytes")]
    FrameTooLarge { len: usize, max: usize },
    /// The peer answered in HTTP (its first bytes read `HTTP`), so it is a web server, not a
    /// RocketMQ one.
    #[error("the peer answered in HTTP, not in RocketMQ's remoting protocol")]
    HttpPeer,
    #[error("frame length {0} is too small to hold a header length")]
    FrameTooSmall(usize),
    #[error("header length {header_len} does not fit in frame of {frame_len} bytes")]
    HeaderLength { header_len: usize, frame_len: usize },
    #[error("unknown serialize type {0}")]
    UnknownSerializeType(u8),
    #[error("malformed JSON header: {0}")]
    JsonHeader(String),
    #[error("malformed ROCKETMQ header: {0}")]
    BinaryHeader(String),
    #[error("header field `{0}` is missing")]
    MissingField(&'static str),
    #[error("header field `{field}` has malformed value {value:?}")]
    MalformedField { field: &'static str, value: String },
    #[error("code {0} does not fit the ROCKETMQ binary header (i16)")]
    CodeOutOfRange(i32),
    #[error("malformed message: {0}")]
    Message(String),
    #[error("malformed body: {0}")]
    Body(String),
    #[error("{what} of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        what: &'static str,
        len: usize,
        max: usize,
    },
}

pub type Result<T, E = ProtocolError> = std::result::Result<T, E>;
