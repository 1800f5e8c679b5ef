//! The latency stamp at the head of every bench message body.
//!
//! The broker's `bornTimestamp` has millisecond resolution, too coarse for sub-millisecond
//! end-to-end latencies, so the producer writes its own: a magic number (so foreign messages are
//! recognised and skipped), a run id (so an `e2e` run ignores messages of an earlier run that sit
//! in the same topic) and the wall-clock time of the send in nanoseconds since the Unix epoch.
//! Wall-clock time (not a monotonic clock) lets a consumer in another process on the same machine
//! read it too. The rest of the body is filler up to the requested size.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};

/// First bytes of a stamped body: "CMTBENCH" in ASCII.
pub const STAMP_MAGIC: u64 = u64::from_be_bytes(*b"CMTBENCH");
/// Length of the stamp: magic (8), run id (4), nanoseconds (8).
pub const STAMP_LEN: usize = 20;
/// Filler byte after the stamp.
const FILLER: u8 = b'x';

/// Nanoseconds in a millisecond.
pub const NANOS_PER_MILLI: u64 = 1_000_000;

/// A decoded stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub run_id: u32,
    pub sent_unix_nanos: u64,
}

/// Nanoseconds since the Unix epoch now (0 if the clock is before 1970; saturating past 2554).
pub fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A body of `size` bytes starting with a stamp of `run_id` and `sent_unix_nanos`. Bodies shorter
/// than the stamp get a truncated stamp, which [`read_stamp`] then does not recognise.
pub fn stamped_body(size: usize, run_id: u32, sent_unix_nanos: u64) -> Bytes {
    let mut buf = BytesMut::with_capacity(size.max(STAMP_LEN));
    buf.put_u64(STAMP_MAGIC);
    buf.put_u32(run_id);
    buf.put_u64(sent_unix_nanos);
    buf.resize(size.max(STAMP_LEN), FILLER);
    buf.truncate(size);
    buf.freeze()
}

/// The stamp at the head of `body`, if it carries one.
pub fn read_stamp(body: &[u8]) -> Option<Stamp> {
    let magic = u64::from_be_bytes(body.get(0..8)?.try_into().ok()?);
    if magic != STAMP_MAGIC {
        return None;
    }
    let run_id = u32::from_be_bytes(body.get(8..12)?.try_into().ok()?);
    let sent_unix_nanos = u64::from_be_bytes(body.get(12..20)?.try_into().ok()?);
    Some(Stamp {
        run_id,
        sent_unix_nanos,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_round_trips_and_body_has_the_requested_size() {
        for size in [STAMP_LEN, 100, 1024, 4096] {
            let body = stamped_body(size, 7, 1_234_567_890_123);
            assert_eq!(body.len(), size);
            assert_eq!(
                read_stamp(&body),
                Some(Stamp {
                    run_id: 7,
                    sent_unix_nanos: 1_234_567_890_123
                })
            );
        }
    }

    #[test]
    fn short_and_foreign_bodies_carry_no_stamp() {
        let short = stamped_body(STAMP_LEN - 1, 1, 2);
        assert_eq!(short.len(), STAMP_LEN - 1);
        assert_eq!(read_stamp(&short), None);
        assert_eq!(read_stamp(b""), None);
        assert_eq!(read_stamp(&[b'y'; 64]), None);
    }

    #[test]
    fn clock_is_after_the_epoch() {
        assert!(unix_nanos() > 0);
    }
}
