//! The frames of RocketMQ's classic HA protocol, byte for byte (big-endian, as Java's
//! `ByteBuffer`):
//!
//! - slave → master, a *report*: 8 bytes, the i64 end of the slave's CommitLog. The first report
//!   on a connection also says where the master should start sending.
//! - master → slave, a *transfer*: a 12-byte header (i64 CommitLog offset of the first body
//!   byte, i32 body size) followed by that many raw CommitLog bytes. A body never crosses the
//!   end of a CommitLog segment and may cut a record anywhere. A header with size 0 is a
//!   heartbeat naming the offset the master will send next.
//!
//! There is no handshake, magic number or version: a connection starts with the slave's first
//! report.

use std::fmt;

use super::MAX_FRAME_BODY;

/// Length of a slave's offset report.
pub const REPORT_LEN: usize = 8;
/// Length of a transfer header.
pub const HEADER_LEN: usize = 12;

/// A report's bytes.
pub fn encode_report(offset: i64) -> [u8; REPORT_LEN] {
    offset.to_be_bytes()
}

/// A transfer header's bytes.
pub fn encode_header(offset: i64, size: usize) -> [u8; HEADER_LEN] {
    let size = i32::try_from(size).unwrap_or(i32::MAX);
    let mut out = [0u8; HEADER_LEN];
    out[..8].copy_from_slice(&offset.to_be_bytes());
    out[8..].copy_from_slice(&size.to_be_bytes());
    out
}

/// A decoded transfer header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferHeader {
    /// CommitLog offset of the first body byte (of the next data, for a heartbeat).
    pub offset: i64,
    /// Body bytes that follow; 0 for a heartbeat.
    pub size: usize,
}

/// A header no master sends: the stream cannot be trusted past it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadHeader {
    NegativeOffset(i64),
    NegativeSize(i32),
    TooLarge(usize),
}

impl fmt::Display for BadHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadHeader::NegativeOffset(o) => write!(f, "negative offset {o}"),
            BadHeader::NegativeSize(s) => write!(f, "negative body size {s}"),
            BadHeader::TooLarge(s) => {
                write!(
                    f,
                    "body of {s} bytes, more than the {MAX_FRAME_BODY} a frame may carry"
                )
            }
        }
    }
}

/// Decodes a transfer header.
pub fn decode_header(bytes: &[u8; HEADER_LEN]) -> Result<TransferHeader, BadHeader> {
    let mut offset = [0u8; 8];
    offset.copy_from_slice(&bytes[..8]);
    let mut size = [0u8; 4];
    size.copy_from_slice(&bytes[8..]);
    let offset = i64::from_be_bytes(offset);
    let size = i32::from_be_bytes(size);
    if offset < 0 {
        return Err(BadHeader::NegativeOffset(offset));
    }
    let size = usize::try_from(size).map_err(|_| BadHeader::NegativeSize(size))?;
    if size > MAX_FRAME_BODY {
        return Err(BadHeader::TooLarge(size));
    }
    Ok(TransferHeader { offset, size })
}

/// The reports whole in `buf`: the last one (only the newest offset matters, as in Apache's
/// master, which reads the last 8-byte-aligned value of its buffer) and the bytes consumed.
pub fn last_report(buf: &[u8]) -> (Option<i64>, usize) {
    let whole = buf.len() - buf.len() % REPORT_LEN;
    let last = whole.checked_sub(REPORT_LEN).map(|start| {
        let mut b = [0u8; REPORT_LEN];
        b.copy_from_slice(&buf[start..whole]);
        i64::from_be_bytes(b)
    });
    (last, whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_big_endian() {
        assert_eq!(encode_report(0x0102), [0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(
            encode_header(1 << 30, 32768),
            [0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0x80, 0]
        );
        assert_eq!(
            decode_header(&encode_header(1 << 30, 32768)),
            Ok(TransferHeader {
                offset: 1 << 30,
                size: 32768
            })
        );
    }

    #[test]
    fn headers_no_master_sends_are_refused() {
        let mut h = encode_header(5, 0);
        h[0] = 0x80;
        assert!(matches!(
            decode_header(&h),
            Err(BadHeader::NegativeOffset(_))
        ));
        let mut h = encode_header(5, 0);
        h[8] = 0xFF;
        assert!(matches!(decode_header(&h), Err(BadHeader::NegativeSize(_))));
        let h = encode_header(5, MAX_FRAME_BODY + 1);
        assert!(matches!(decode_header(&h), Err(BadHeader::TooLarge(_))));
    }

    #[test]
    fn the_last_whole_report_counts() {
        assert_eq!(last_report(&[0; 7]), (None, 0));
        let mut buf = Vec::new();
        buf.extend_from_slice(&encode_report(10));
        buf.extend_from_slice(&encode_report(20));
        buf.extend_from_slice(&[0, 0, 0]);
        assert_eq!(last_report(&buf), (Some(20), 16));
    }
}
