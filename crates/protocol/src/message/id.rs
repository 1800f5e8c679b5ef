//! Message ids.
//!
//! RocketMQ has two ids per message. The *offset message id* is derived from where the broker
//! stored the record (store host + commit-log offset), so a broker can find a record from its id
//! alone. The *unique id* (`UNIQ_KEY`) is made by the producer before sending, so it survives
//! retries, re-sends to `%RETRY%` topics and DLQ moves; it is what users see as the message id.
//! Only uniqueness of the latter matters to peers, but its layout is kept so that tools decoding
//! Java ids (ip, pid, time) also decode ours.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};

use crate::error::ProtocolError;
use crate::time::{MILLIS_PER_DAY, civil_from_days, days_from_civil, now_millis};

/// Hex length of an offset message id with an IPv4 store host (4 + 4 + 8 bytes).
pub const OFFSET_MSG_ID_V4_LEN: usize = 32;
/// Hex length of an offset message id with an IPv6 store host (16 + 4 + 8 bytes).
pub const OFFSET_MSG_ID_V6_LEN: usize = 56;
/// Hex length of a unique id with an IPv4 address (4 + 2 + 4 + 4 + 2 bytes).
pub const UNIQ_ID_V4_LEN: usize = 32;
/// Hex length of a unique id with an IPv6 address (16 + 2 + 4 + 4 + 2 bytes).
pub const UNIQ_ID_V6_LEN: usize = 56;
/// Java resets a slightly negative time span (the clock stepped back, e.g. by NTP) to zero when
/// it is within this many milliseconds; larger negative spans are kept as they are.
const CLOCK_STEP_BACK_TOLERANCE_MS: i64 = 1_000_000;
/// Uppercase hex digits.
const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// The offset message id: uppercase hex of store IP, store port (i32) and commit-log offset (i64).
pub fn offset_msg_id(store_host: SocketAddr, commit_log_offset: i64) -> String {
    let mut out = String::with_capacity(OFFSET_MSG_ID_V6_LEN);
    push_ip_hex(&mut out, store_host.ip());
    push_hex(&mut out, &i32::from(store_host.port()).to_be_bytes());
    push_hex(&mut out, &commit_log_offset.to_be_bytes());
    out
}

/// Splits an offset message id into store host and commit-log offset. 32 hex characters mean an
/// IPv4 host, 56 an IPv6 host; anything else is malformed.
pub fn decode_offset_msg_id(id: &str) -> Result<(SocketAddr, i64), ProtocolError> {
    let bytes = decode_hex(id, "offset message id")?;
    let ip_len = match id.len() {
        OFFSET_MSG_ID_V4_LEN => 4,
        OFFSET_MSG_ID_V6_LEN => 16,
        other => return Err(malformed_id("offset message id", id, other)),
    };
    let mut cur = IdReader { bytes: &bytes };
    let ip = cur.ip(ip_len)?;
    let port = cur.i32()?;
    let offset = cur.i64()?;
    let port = u16::try_from(port).map_err(|_| ProtocolError::MalformedField {
        field: "offset message id",
        value: id.to_owned(),
    })?;
    Ok((SocketAddr::new(ip, port), offset))
}

/// The parts of a unique id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UniqIdParts {
    /// The producer's address (or a "fake IP" made from the clock if it had none).
    pub ip: IpAddr,
    /// The producer's process id, truncated to 16 bits.
    pub pid: i16,
    /// Per-process random value (Java: the class loader's hash code).
    pub client_hash: i32,
    /// Milliseconds since the start of the calendar month the id was made in, as Java writes it:
    /// truncated to 32 bits, so it turns negative after about 24.8 days into a month. Read it as
    /// `u32` (as [`UniqIdParts::approx_timestamp`] does) to get the real span.
    pub millis_since_month_start: i32,
    /// Per-process sequence number, wrapping.
    pub counter: i16,
}

impl UniqIdParts {
    /// Approximate creation time in epoch milliseconds, given the current time: the id only
    /// records an offset into "its" month, assumed to be the current month unless that would put
    /// the id in the future, in which case the previous month. Months are taken in UTC.
    pub fn approx_timestamp(&self, now_ms: i64) -> i64 {
        // A month (at most 2 678 400 000 ms) fits in u32 but not in i32.
        let span = i64::from(self.millis_since_month_start as u32);
        let (month_start, _) = month_bounds(now_ms);
        if month_start + span >= now_ms {
            let (previous_month_start, _) = month_bounds(month_start - 1);
            previous_month_start + span
        } else {
            month_start + span
        }
    }
}

/// Splits a unique id into its parts. 32 hex characters mean an IPv4 address, 56 an IPv6 one.
pub fn decode_uniq_id(id: &str) -> Result<UniqIdParts, ProtocolError> {
    let bytes = decode_hex(id, "unique message id")?;
    let ip_len = match id.len() {
        UNIQ_ID_V4_LEN => 4,
        UNIQ_ID_V6_LEN => 16,
        other => return Err(malformed_id("unique message id", id, other)),
    };
    let mut cur = IdReader { bytes: &bytes };
    Ok(UniqIdParts {
        ip: cur.ip(ip_len)?,
        pid: cur.i16()?,
        client_hash: cur.i32()?,
        millis_since_month_start: cur.i32()?,
        counter: cur.i16()?,
    })
}

/// Makes unique ids for one producer process. Thread-safe without locks: the counter and the
/// month bounds are atomics, and racing month roll-overs all store the same values.
#[derive(Debug)]
pub struct UniqIdGenerator {
    /// Hex of ip + pid + client hash, fixed for the generator's life.
    prefix: String,
    counter: AtomicU32,
    month_start_ms: AtomicI64,
    next_month_start_ms: AtomicI64,
}

impl Default for UniqIdGenerator {
    fn default() -> Self {
        Self::new()
    }
}

impl UniqIdGenerator {
    /// A generator using Java's "fake IP" (bytes 4..8 of the current epoch milliseconds). This
    /// crate does no I/O, so it cannot look at network interfaces; a client that knows its address
    /// should use [`UniqIdGenerator::with_ip`].
    pub fn new() -> Self {
        let millis = now_millis().to_be_bytes();
        let fake = Ipv4Addr::new(millis[4], millis[5], millis[6], millis[7]);
        Self::with_ip(IpAddr::V4(fake))
    }

    /// A generator for a producer at `ip`.
    pub fn with_ip(ip: IpAddr) -> Self {
        let pid = std::process::id() as i16;
        // A per-process random value, standing in for Java's class-loader hash: it separates two
        // generators of one process (and processes whose pids collide in 16 bits).
        let client_hash = RandomState::new().build_hasher().finish() as i32;
        Self::with_parts(ip, pid, client_hash)
    }

    /// A generator with every fixed part given (tests, or a client that wants Java's exact
    /// process identity).
    pub fn with_parts(ip: IpAddr, pid: i16, client_hash: i32) -> Self {
        let mut prefix = String::with_capacity(UNIQ_ID_V6_LEN);
        push_ip_hex(&mut prefix, ip);
        push_hex(&mut prefix, &pid.to_be_bytes());
        push_hex(&mut prefix, &client_hash.to_be_bytes());
        let (start, next) = month_bounds(now_millis());
        UniqIdGenerator {
            prefix,
            counter: AtomicU32::new(0),
            month_start_ms: AtomicI64::new(start),
            next_month_start_ms: AtomicI64::new(next),
        }
    }

    /// The next unique id, made at the current time.
    pub fn next_id(&self) -> String {
        self.next_id_at(now_millis())
    }

    /// The next unique id, as if made at `now_ms` (epoch milliseconds).
    pub fn next_id_at(&self, now_ms: i64) -> String {
        if now_ms >= self.next_month_start_ms.load(Ordering::Acquire)
            || now_ms < self.month_start_ms.load(Ordering::Acquire) - CLOCK_STEP_BACK_TOLERANCE_MS
        {
            let (start, next) = month_bounds(now_ms);
            self.month_start_ms.store(start, Ordering::Release);
            self.next_month_start_ms.store(next, Ordering::Release);
        }
        let mut span = now_ms - self.month_start_ms.load(Ordering::Acquire);
        if span < 0 && span > -CLOCK_STEP_BACK_TOLERANCE_MS {
            span = 0;
        }
        // A month is under 2^32 ms, so the span fits in 32 bits, but past day 24.8 it no longer
        // fits in i32: Java's `(int)` cast wraps it negative, and so does this one.
        let span = span as i32;
        let counter = self.counter.fetch_add(1, Ordering::Relaxed) as u16;
        let mut id = String::with_capacity(self.prefix.len() + 12);
        id.push_str(&self.prefix);
        push_hex(&mut id, &span.to_be_bytes());
        push_hex(&mut id, &counter.to_be_bytes());
        id
    }
}

/// Start of the UTC calendar month containing `ms`, and start of the next one (epoch ms).
fn month_bounds(ms: i64) -> (i64, i64) {
    let days = ms.div_euclid(MILLIS_PER_DAY);
    let (year, month, _) = civil_from_days(days);
    let (next_year, next_month) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    (
        days_from_civil(year, month, 1) * MILLIS_PER_DAY,
        days_from_civil(next_year, next_month, 1) * MILLIS_PER_DAY,
    )
}

fn push_ip_hex(out: &mut String, ip: IpAddr) {
    match ip {
        IpAddr::V4(ip) => push_hex(out, &ip.octets()),
        IpAddr::V6(ip) => push_hex(out, &ip.octets()),
    }
}

fn push_hex(out: &mut String, bytes: &[u8]) {
    for byte in bytes {
        out.push(char::from(HEX_UPPER[usize::from(byte >> 4)]));
        out.push(char::from(HEX_UPPER[usize::from(byte & 0x0F)]));
    }
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

/// Decodes hex (either case); only called with ids whose length is checked afterwards, and ids
/// are at most 56 characters, so the output is small.
fn decode_hex(s: &str, what: &'static str) -> Result<Vec<u8>, ProtocolError> {
    let invalid = || ProtocolError::MalformedField {
        field: what,
        value: s.chars().take(OFFSET_MSG_ID_V6_LEN * 2).collect(),
    };
    if s.len() > OFFSET_MSG_ID_V6_LEN.max(UNIQ_ID_V6_LEN) || !s.len().is_multiple_of(2) {
        return Err(invalid());
    }
    s.as_bytes()
        .chunks_exact(2)
        .map(|pair| match pair {
            [high, low] => Some((hex_value(*high)? << 4) | hex_value(*low)?),
            _ => None,
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(invalid)
}

fn malformed_id(what: &'static str, id: &str, len: usize) -> ProtocolError {
    ProtocolError::Message(format!(
        "{what} {:?} has {len} characters",
        id.chars().take(UNIQ_ID_V6_LEN * 2).collect::<String>()
    ))
}

/// Big-endian reads over a decoded id whose length was already checked.
struct IdReader<'a> {
    bytes: &'a [u8],
}

impl IdReader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], ProtocolError> {
        let (head, rest) = self
            .bytes
            .split_first_chunk::<N>()
            .ok_or_else(|| ProtocolError::Message("message id is too short".to_owned()))?;
        self.bytes = rest;
        Ok(*head)
    }

    fn ip(&mut self, len: usize) -> Result<IpAddr, ProtocolError> {
        if len == 4 {
            Ok(IpAddr::V4(Ipv4Addr::from(self.take::<4>()?)))
        } else {
            Ok(IpAddr::V6(Ipv6Addr::from(self.take::<16>()?)))
        }
    }

    fn i16(&mut self) -> Result<i16, ProtocolError> {
        Ok(i16::from_be_bytes(self.take()?))
    }

    fn i32(&mut self) -> Result<i32, ProtocolError> {
        Ok(i32::from_be_bytes(self.take()?))
    }

    fn i64(&mut self) -> Result<i64, ProtocolError> {
        Ok(i64::from_be_bytes(self.take()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::net::SocketAddrV4;
    use std::sync::Arc;

    #[test]
    fn offset_msg_id_known_value() {
        let host = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 10911));
        let id = offset_msg_id(host, 0x1234);
        // 0A000001 | 10911 = 0x2A9F | offset.
        assert_eq!(id, "0A00000100002A9F0000000000001234");
        assert_eq!(decode_offset_msg_id(&id).ok(), Some((host, 0x1234)));
        assert_eq!(
            decode_offset_msg_id(&id.to_lowercase()).ok(),
            Some((host, 0x1234))
        );
    }

    #[test]
    fn offset_msg_id_ipv6() {
        let host: SocketAddr = "[2001:db8::7]:10911"
            .parse()
            .unwrap_or(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 1)));
        let id = offset_msg_id(host, -1);
        assert_eq!(id.len(), OFFSET_MSG_ID_V6_LEN);
        assert!(id.starts_with("20010DB8"));
        assert!(id.ends_with("FFFFFFFFFFFFFFFF"));
        assert_eq!(decode_offset_msg_id(&id).ok(), Some((host, -1)));
    }

    #[test]
    fn malformed_ids_are_rejected() {
        for bad in [
            "",
            "0A00000100002A9F000000000000123",
            "0A00000100002A9F00000000000012345",
            "0A00000100002A9F000000000000123G",
            "0A000001FFFFFFFF0000000000001234",
            "é0000001000000000000000000000000",
        ] {
            assert!(decode_offset_msg_id(bad).is_err(), "{bad}");
        }
        assert!(decode_uniq_id("ABC").is_err());
    }

    #[test]
    fn uniq_id_layout_and_month_span() {
        let ip = IpAddr::V4(Ipv4Addr::new(192, 168, 1, 2));
        let generator = UniqIdGenerator::with_parts(ip, 0x1234, -2);
        // 2024-03-05T00:00:01.5Z; March 2024 starts at 1709251200000.
        let now = 1_709_596_801_500;
        let id = generator.next_id_at(now);
        let span = now - 1_709_251_200_000;
        assert_eq!(id, format!("C0A801021234FFFFFFFE{span:08X}0000"));
        let parts = decode_uniq_id(&id).ok();
        assert_eq!(
            parts,
            Some(UniqIdParts {
                ip,
                pid: 0x1234,
                client_hash: -2,
                millis_since_month_start: span as i32,
                counter: 0,
            })
        );
        assert_eq!(parts.map(|p| p.approx_timestamp(now + 10)), Some(now));
        // Counter advances.
        assert!(generator.next_id_at(now).ends_with("0001"));
        // Late in a 31-day month the span passes i32::MAX and is written wrapped, as Java does;
        // the decoded timestamp is still right. 2024-03-31T12:00:00Z:
        let late = 1_711_886_400_000;
        let late_id = generator.next_id_at(late);
        let late_parts = decode_uniq_id(&late_id).ok();
        assert!(late_parts.is_some_and(|p| p.millis_since_month_start < 0));
        assert_eq!(late_parts.map(|p| p.approx_timestamp(late + 1)), Some(late));
    }

    #[test]
    fn month_bounds_handle_year_end_and_leap_years() {
        // 2023-12-31T23:59:59.999Z.
        assert_eq!(
            month_bounds(1_704_067_199_999),
            (1_701_388_800_000, 1_704_067_200_000)
        );
        // 2024-02-29T12:00:00Z: February 2024 has 29 days.
        assert_eq!(
            month_bounds(1_709_208_000_000),
            (1_706_745_600_000, 1_709_251_200_000)
        );
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }

    #[test]
    fn ids_are_unique_across_threads() {
        let generator = Arc::new(UniqIdGenerator::new());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let generator = Arc::clone(&generator);
                std::thread::spawn(move || {
                    (0..1000).map(|_| generator.next_id()).collect::<Vec<_>>()
                })
            })
            .collect();
        let mut seen = HashSet::new();
        for handle in threads {
            for id in handle.join().unwrap_or_default() {
                assert_eq!(id.len(), UNIQ_ID_V4_LEN);
                assert!(seen.insert(id));
            }
        }
        assert_eq!(seen.len(), 4000);
    }
}
