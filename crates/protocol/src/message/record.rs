//! The stored-message record: one message in the commit log, and the unit of pull, query
//! and view response bodies.
//!
//! Two decoders serve two readers. [`decode_record_view`] borrows everything and allocates
//! nothing: the store runs it over every record during recovery and dispatch, where building a
//! [`MessageExt`] per record would dominate the cost. [`decode_record`] builds an owned
//! [`MessageExt`] whose body is a zero-copy slice of the input, for consumers.
//!
//! Both validate the record completely — TOTALSIZE against the buffer, the magic, every length
//! against what remains — and require the fields to add up to exactly TOTALSIZE, which is how a
//! torn write at the end of a commit-log segment is told apart from a real record.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::{BufMut, Bytes, BytesMut};

use super::properties::{self, Properties};
use super::{BLANK_MAGIC, MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2, MessageExt, sysflag};
use crate::error::ProtocolError;

/// Longest topic a record can hold: a V2 record's topic length is written as an i16, but the
/// broker caps topics at 255 bytes (`Byte.MAX_VALUE * 2 + 1` in Java's `TopicValidator`).
pub const MAX_RECORD_TOPIC_LEN: usize = 255;
/// Longest topic a V1 record can hold (its topic length is a signed byte).
pub const MAX_V1_TOPIC_LEN: usize = i8::MAX as usize;
/// Longest properties area (PROPLEN is a signed i16).
pub const MAX_RECORD_PROPERTIES_LEN: usize = i16::MAX as usize;
/// Size of an IPv4 host field: 4-byte address + i32 port.
pub const HOST_V4_LEN: usize = 8;
/// Size of an IPv6 host field: 16-byte address + i32 port.
pub const HOST_V6_LEN: usize = 20;
/// Size of a V1 record with IPv4 hosts, an empty body, an empty topic and no properties: the
/// smallest possible record.
pub const MIN_RECORD_SIZE: usize = 91;

/// Records [`decode_records`] reserves room for up front (Java's default pull batch size).
const RECORDS_CAPACITY_HINT: usize = 32;

/// Byte position of TOTALSIZE.
pub const TOTAL_SIZE_POS: usize = 0;
/// Byte position of MAGICCODE.
pub const MAGIC_POS: usize = 4;
/// Byte position of BODYCRC.
pub const BODY_CRC_POS: usize = 8;
/// Byte position of QUEUEID.
pub const QUEUE_ID_POS: usize = 12;
/// Byte position of FLAG.
pub const FLAG_POS: usize = 16;
/// Byte position of QUEUEOFFSET.
pub const QUEUE_OFFSET_POS: usize = 20;
/// Byte position of PHYSICALOFFSET.
pub const PHYSICAL_OFFSET_POS: usize = 28;
/// Byte position of SYSFLAG.
pub const SYS_FLAG_POS: usize = 36;
/// Byte position of BORNTIMESTAMP.
pub const BORN_TIMESTAMP_POS: usize = 40;
/// Byte position of BORNHOST.
pub const BORN_HOST_POS: usize = 48;

/// Size of the fields before BORNHOST.
const FIXED_BEFORE_BORN_HOST: usize = BORN_HOST_POS;
/// STORETIMESTAMP (8) + RECONSUMETIMES (4) + PREPARED_TRANSACTION_OFFSET (8) + BODYLEN (4) +
/// PROPLEN (2): the fixed fields after BORNHOST, hosts and topic length excluded.
const FIXED_AFTER_BORN_HOST: usize = 8 + 4 + 8 + 4 + 2;
/// Width of a V1 topic length.
const TOPIC_LEN_V1_WIDTH: usize = 1;
/// Width of a V2 topic length.
const TOPIC_LEN_V2_WIDTH: usize = 2;

/// `java.util.zip.CRC32(body) & 0x7FFFFFFF`.
pub fn body_crc(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

/// TOTALSIZE of a record with the given parts.
pub fn record_size(
    topic_len: usize,
    body_len: usize,
    props_len: usize,
    born_v6: bool,
    store_v6: bool,
    magic_v2: bool,
) -> usize {
    let host_len = |v6: bool| if v6 { HOST_V6_LEN } else { HOST_V4_LEN };
    let topic_len_width = if magic_v2 {
        TOPIC_LEN_V2_WIDTH
    } else {
        TOPIC_LEN_V1_WIDTH
    };
    FIXED_BEFORE_BORN_HOST
        + host_len(born_v6)
        + host_len(store_v6)
        + FIXED_AFTER_BORN_HOST
        + topic_len_width
        + body_len
        + topic_len
        + props_len
}

/// TOTALSIZE of the record [`encode_record`] would write for `msg`, or why it cannot be written.
pub fn encoded_record_size(msg: &MessageExt) -> Result<usize, ProtocolError> {
    Ok(Layout::of(msg)?.total)
}

/// The sizes and flags of one record about to be written, checked once.
struct Layout {
    total: usize,
    magic: i32,
    sys_flag: i32,
    props_len: usize,
}

impl Layout {
    fn of(msg: &MessageExt) -> Result<Layout, ProtocolError> {
        let topic_len = msg.topic.len();
        if topic_len > MAX_RECORD_TOPIC_LEN {
            return Err(ProtocolError::TooLarge {
                what: "record topic",
                len: topic_len,
                max: MAX_RECORD_TOPIC_LEN,
            });
        }
        let props_len = msg.properties.encoded_len();
        if props_len > MAX_RECORD_PROPERTIES_LEN {
            return Err(ProtocolError::TooLarge {
                what: "record properties",
                len: props_len,
                max: MAX_RECORD_PROPERTIES_LEN,
            });
        }
        let magic_v2 = topic_len > MAX_V1_TOPIC_LEN;
        let born_v6 = msg.born_host.is_ipv6();
        let store_v6 = msg.store_host.is_ipv6();
        let total = record_size(
            topic_len,
            msg.body.len(),
            props_len,
            born_v6,
            store_v6,
            magic_v2,
        );
        if total > i32::MAX as usize {
            return Err(ProtocolError::TooLarge {
                what: "record",
                len: total,
                max: i32::MAX as usize,
            });
        }
        Ok(Layout {
            total,
            magic: if magic_v2 {
                MESSAGE_MAGIC_V2
            } else {
                MESSAGE_MAGIC_V1
            },
            sys_flag: sysflag::with_host_families(msg.sys_flag, born_v6, store_v6),
            props_len,
        })
    }

    /// Writes the record; `dst` must have room for `self.total` bytes.
    fn write<B: BufMut>(&self, msg: &MessageExt, dst: &mut B) {
        // Every length below was bounded in `Layout::of`, so these casts cannot truncate.
        dst.put_i32(self.total as i32);
        dst.put_i32(self.magic);
        dst.put_i32(msg.body_crc);
        dst.put_i32(msg.queue_id);
        dst.put_i32(msg.flag);
        dst.put_i64(msg.queue_offset);
        dst.put_i64(msg.commit_log_offset);
        dst.put_i32(self.sys_flag);
        dst.put_i64(msg.born_timestamp);
        put_host(dst, msg.born_host);
        dst.put_i64(msg.store_timestamp);
        put_host(dst, msg.store_host);
        dst.put_i32(msg.reconsume_times);
        dst.put_i64(msg.prepared_transaction_offset);
        dst.put_i32(msg.body.len() as i32);
        dst.put_slice(&msg.body);
        if self.magic == MESSAGE_MAGIC_V2 {
            dst.put_i16(msg.topic.len() as i16);
        } else {
            dst.put_i8(msg.topic.len() as i8);
        }
        dst.put_slice(msg.topic.as_bytes());
        dst.put_i16(self.props_len as i16);
        msg.properties.encode_into(dst);
    }
}

fn put_host<B: BufMut>(dst: &mut B, host: SocketAddr) {
    match host.ip() {
        IpAddr::V4(ip) => dst.put_slice(&ip.octets()),
        IpAddr::V6(ip) => dst.put_slice(&ip.octets()),
    }
    dst.put_i32(i32::from(host.port()));
}

/// Appends `msg` as one record to `dst`.
///
/// Fields are written as given (BODYCRC, offsets, timestamps, hosts): the caller fills them in.
/// TOTALSIZE is computed; the magic is V2 iff the topic is longer than 127 bytes; the IPv6 bits of
/// SYSFLAG are set from the host address families. Fails if the topic exceeds 255 bytes or the
/// properties 32767 bytes.
pub fn encode_record(msg: &MessageExt, dst: &mut BytesMut) -> Result<(), ProtocolError> {
    let layout = Layout::of(msg)?;
    dst.reserve(layout.total);
    layout.write(msg, dst);
    Ok(())
}

/// Writes `msg` as one record at the start of `dst` (a mapped commit-log segment) and returns its
/// size. Same rules as [`encode_record`]; fails without writing if `dst` is too small.
pub fn encode_record_into(msg: &MessageExt, dst: &mut [u8]) -> Result<usize, ProtocolError> {
    let layout = Layout::of(msg)?;
    let available = dst.len();
    let mut window = dst.get_mut(..layout.total).ok_or(ProtocolError::TooLarge {
        what: "record for the destination buffer",
        len: layout.total,
        max: available,
    })?;
    layout.write(msg, &mut window);
    debug_assert!(
        window.is_empty(),
        "record layout size disagrees with writer"
    );
    Ok(layout.total)
}

/// Writes a BLANK entry at the start of `dst`: `free_space` (the whole remaining size of
/// the segment) then [`BLANK_MAGIC`]. Returns the bytes written ([`super::BLANK_ENTRY_LEN`]).
pub fn encode_blank_into(free_space: usize, dst: &mut [u8]) -> Result<usize, ProtocolError> {
    let free = i32::try_from(free_space).map_err(|_| ProtocolError::TooLarge {
        what: "blank entry",
        len: free_space,
        max: i32::MAX as usize,
    })?;
    let available = dst.len();
    let mut window = dst
        .get_mut(..super::BLANK_ENTRY_LEN)
        .ok_or(ProtocolError::TooLarge {
            what: "blank entry for the destination buffer",
            len: super::BLANK_ENTRY_LEN,
            max: available,
        })?;
    window.put_i32(free);
    window.put_i32(BLANK_MAGIC);
    Ok(super::BLANK_ENTRY_LEN)
}

/// TOTALSIZE of the record (or BLANK entry) at the start of `buf`, if 4 bytes are there.
pub fn peek_total_size(buf: &[u8]) -> Option<i32> {
    read_i32_at(buf, TOTAL_SIZE_POS)
}

/// MAGICCODE of the record (or BLANK entry) at the start of `buf`, if 8 bytes are there.
pub fn peek_magic(buf: &[u8]) -> Option<i32> {
    read_i32_at(buf, MAGIC_POS)
}

fn read_i32_at(buf: &[u8], pos: usize) -> Option<i32> {
    let bytes = buf.get(pos..pos.checked_add(4)?)?;
    Some(i32::from_be_bytes(bytes.try_into().ok()?))
}

/// One record, borrowed from the buffer it was decoded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub total_size: i32,
    pub magic: i32,
    pub body_crc: i32,
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub commit_log_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_timestamp: i64,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: &'a [u8],
    pub topic: &'a str,
    /// The raw properties string; see [`RecordView::property`] and
    /// [`RecordView::properties`].
    pub properties: &'a [u8],
}

impl<'a> RecordView<'a> {
    /// The value of one property, without parsing the others.
    pub fn property(&self, key: &str) -> Option<&'a str> {
        properties::find_property(self.properties, key)
    }

    /// The values of several properties, in one pass over the others (see
    /// [`properties::find_properties`]).
    pub fn properties_of<const N: usize>(&self, keys: [&str; N]) -> [Option<&'a str>; N] {
        properties::find_properties(self.properties, keys)
    }

    /// All properties, parsed.
    pub fn properties(&self) -> Result<Properties, ProtocolError> {
        Properties::parse_bytes(self.properties)
    }

    /// Whether BODYCRC matches the body.
    pub fn body_crc_matches(&self) -> bool {
        body_crc(self.body) == self.body_crc
    }

    /// TOTALSIZE as a length: where the next record starts (validated non-negative by the
    /// decoder).
    pub fn size(&self) -> usize {
        usize::try_from(self.total_size).unwrap_or(0)
    }
}

#[cold]
fn truncated(field: &'static str, pos: usize) -> ProtocolError {
    ProtocolError::Message(format!("record truncated at {field} (byte {pos})"))
}

#[cold]
fn negative_length(field: &'static str, len: i32) -> ProtocolError {
    ProtocolError::Message(format!("{field} {len} is negative"))
}

#[cold]
fn port_out_of_range(field: &'static str, port: i32) -> ProtocolError {
    ProtocolError::Message(format!("{field} port {port} is out of range"))
}

/// A length field read as `i32`, which must be non-negative.
fn non_negative(raw: i32, field: &'static str) -> Result<usize, ProtocolError> {
    usize::try_from(raw).map_err(|_| negative_length(field, raw))
}

/// Width of a host field.
fn host_len(v6: bool) -> usize {
    if v6 { HOST_V6_LEN } else { HOST_V4_LEN }
}

/// The big-endian i32 at `pos`; the caller has checked that `buf` holds it (0 otherwise, which
/// no caller can observe).
fn be_i32(buf: &[u8], pos: usize) -> i32 {
    buf.get(pos..pos + 4)
        .and_then(|b| b.try_into().ok())
        .map_or(0, i32::from_be_bytes)
}

/// The big-endian i16 at `pos`; see [`be_i32`].
fn be_i16(buf: &[u8], pos: usize) -> i16 {
    buf.get(pos..pos + 2)
        .and_then(|b| b.try_into().ok())
        .map_or(0, i16::from_be_bytes)
}

/// The big-endian i64 at `pos`; see [`be_i32`].
fn be_i64(buf: &[u8], pos: usize) -> i64 {
    buf.get(pos..pos + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, i64::from_be_bytes)
}

/// The host field of `len` bytes ([`HOST_V4_LEN`] or [`HOST_V6_LEN`]) at `pos`, which the caller
/// has checked `buf` holds (a shorter `buf` reads as zeros, which no caller can observe).
fn host_at(
    buf: &[u8],
    pos: usize,
    len: usize,
    field: &'static str,
) -> Result<SocketAddr, ProtocolError> {
    let ip = if len == HOST_V6_LEN {
        let octets: [u8; 16] = buf
            .get(pos..pos + 16)
            .and_then(|b| b.try_into().ok())
            .unwrap_or_default();
        IpAddr::V6(Ipv6Addr::from(octets))
    } else {
        let octets: [u8; 4] = buf
            .get(pos..pos + 4)
            .and_then(|b| b.try_into().ok())
            .unwrap_or_default();
        IpAddr::V4(Ipv4Addr::from(octets))
    };
    let port = be_i32(buf, pos + len - 4);
    let port = u16::try_from(port).map_err(|_| port_out_of_range(field, port))?;
    Ok(SocketAddr::new(ip, port))
}

/// Decodes the record at the start of `buf` without allocating. `buf` may extend past the record
/// (a mapped segment, a pull body); the record's own TOTALSIZE bounds the parse.
pub fn decode_record_view(buf: &[u8]) -> Result<RecordView<'_>, ProtocolError> {
    let total_size = peek_total_size(buf).ok_or_else(|| truncated("TOTALSIZE", 0))?;
    let magic = peek_magic(buf).ok_or_else(|| truncated("MAGICCODE", MAGIC_POS))?;
    let magic_v2 = match magic {
        MESSAGE_MAGIC_V1 => false,
        MESSAGE_MAGIC_V2 => true,
        BLANK_MAGIC => {
            return Err(ProtocolError::Message(
                "BLANK entry (end of commit-log segment), not a record".to_owned(),
            ));
        }
        other => {
            return Err(ProtocolError::Message(format!(
                "unknown record magic {other:#010x}"
            )));
        }
    };
    let total = usize::try_from(total_size)
        .ok()
        .filter(|t| *t >= MIN_RECORD_SIZE)
        .ok_or_else(|| {
            ProtocolError::Message(format!("record TOTALSIZE {total_size} is too small"))
        })?;
    let record = buf.get(..total).ok_or_else(|| {
        ProtocolError::Message(format!(
            "record TOTALSIZE {total} exceeds the {} bytes available",
            buf.len()
        ))
    })?;

    // The fixed-width fields up to BODYLEN: their extent depends only on the two host widths,
    // so one length check covers them all and each read below is a constant-offset load.
    let sys_flag = be_i32(record, SYS_FLAG_POS);
    let born_host_len = host_len(sys_flag & sysflag::BORNHOST_V6 != 0);
    let store_host_len = host_len(sys_flag & sysflag::STOREHOSTADDRESS_V6 != 0);
    let store_timestamp_pos = BORN_HOST_POS + born_host_len;
    let store_host_pos = store_timestamp_pos + 8;
    let reconsume_times_pos = store_host_pos + store_host_len;
    let body_len_pos = reconsume_times_pos + 4 + 8;
    if record.len() < body_len_pos + 4 {
        return Err(truncated("BODYLEN", record.len()));
    }
    let born_host = host_at(record, BORN_HOST_POS, born_host_len, "BORNHOST")?;
    let store_host = host_at(record, store_host_pos, store_host_len, "STOREHOST")?;
    let body_crc = be_i32(record, BODY_CRC_POS);
    let queue_id = be_i32(record, QUEUE_ID_POS);
    let flag = be_i32(record, FLAG_POS);
    let queue_offset = be_i64(record, QUEUE_OFFSET_POS);
    let commit_log_offset = be_i64(record, PHYSICAL_OFFSET_POS);
    let born_timestamp = be_i64(record, BORN_TIMESTAMP_POS);
    let store_timestamp = be_i64(record, store_timestamp_pos);
    let reconsume_times = be_i32(record, reconsume_times_pos);
    let prepared_transaction_offset = be_i64(record, reconsume_times_pos + 4);
    // The variable-length tail: BODY, TOPIC and PROPERTIES, each after its length. Positions
    // are checked against the record before each read (`be_*` read zeros past the end, so the
    // checks are what makes a short record an error rather than a misread).
    let body_len = non_negative(be_i32(record, body_len_pos), "BODYLEN")?;
    let body_start = body_len_pos + 4;
    let topic_len_pos = body_start
        .checked_add(body_len)
        .filter(|end| *end <= total)
        .ok_or_else(|| truncated("BODY", body_start))?;
    let body = record.get(body_start..topic_len_pos).unwrap_or_default();
    let (topic_len, topic_start) = if magic_v2 {
        if topic_len_pos + 2 > total {
            return Err(truncated("TOPICLEN", topic_len_pos));
        }
        (i32::from(be_i16(record, topic_len_pos)), topic_len_pos + 2)
    } else {
        let len = record
            .get(topic_len_pos)
            .ok_or_else(|| truncated("TOPICLEN", topic_len_pos))?;
        (i32::from(*len as i8), topic_len_pos + 1)
    };
    let topic_len = non_negative(topic_len, "TOPICLEN")?;
    let props_len_pos = topic_start + topic_len;
    if props_len_pos + 2 > total {
        return Err(truncated("TOPIC", topic_start));
    }
    let topic = record.get(topic_start..props_len_pos).unwrap_or_default();
    let topic = std::str::from_utf8(topic)
        .map_err(|e| ProtocolError::Message(format!("record topic is not valid UTF-8: {e}")))?;
    let props_len = non_negative(i32::from(be_i16(record, props_len_pos)), "PROPLEN")?;
    let props_start = props_len_pos + 2;
    let end = props_start + props_len;
    if end > total {
        return Err(truncated("PROPERTIES", props_start));
    }
    if end != total {
        return Err(ProtocolError::Message(format!(
            "record fields end at byte {end} but TOTALSIZE is {total}"
        )));
    }
    let properties = record.get(props_start..end).unwrap_or_default();

    Ok(RecordView {
        total_size,
        magic,
        body_crc,
        queue_id,
        flag,
        queue_offset,
        commit_log_offset,
        sys_flag,
        born_timestamp,
        born_host,
        store_timestamp,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        body,
        topic,
        properties,
    })
}

/// Decodes the record at the start of `buf` into an owned message whose body shares `buf`'s
/// memory. With `check_crc`, a BODYCRC mismatch is an error.
pub fn decode_record(buf: &Bytes, check_crc: bool) -> Result<MessageExt, ProtocolError> {
    decode_owned(buf, buf, check_crc, "")
}

/// Decodes concatenated records filling all of `buf` (a pull, query or view response body).
pub fn decode_records(buf: &Bytes, check_crc: bool) -> Result<Vec<MessageExt>, ProtocolError> {
    decode_records_with(buf, check_crc, "")
}

/// [`decode_records`], with the properties string `extra` added to every message's properties
/// (see [`Properties::parse_joined`]): a pull consumer's MIN_OFFSET and MAX_OFFSET, formatted
/// once per response instead of inserted into each message.
pub fn decode_records_with(
    buf: &Bytes,
    check_crc: bool,
    extra: &str,
) -> Result<Vec<MessageExt>, ProtocolError> {
    // Reserve for a typical pull, not for the worst case the buffer length would allow: a
    // 16 MiB body of minimal records would otherwise reserve tens of MiB before any validation.
    let mut messages = Vec::with_capacity((buf.len() / MIN_RECORD_SIZE).min(RECORDS_CAPACITY_HINT));
    let mut rest: &[u8] = buf.as_ref();
    while !rest.is_empty() {
        let msg = decode_owned(buf, rest, check_crc, extra)?;
        let size = usize::try_from(msg.store_size).unwrap_or(0);
        rest = rest.get(size..).ok_or_else(|| truncated("TOTALSIZE", 0))?;
        messages.push(msg);
    }
    Ok(messages)
}

/// Decodes the record at the start of `window`, a sub-slice of `source`.
fn decode_owned(
    source: &Bytes,
    window: &[u8],
    check_crc: bool,
    extra: &str,
) -> Result<MessageExt, ProtocolError> {
    let view = decode_record_view(window)?;
    if check_crc && !view.body_crc_matches() {
        return Err(ProtocolError::Message(format!(
            "record body CRC {} does not match stored BODYCRC {}",
            body_crc(view.body),
            view.body_crc
        )));
    }
    Ok(MessageExt {
        topic: view.topic.to_owned(),
        flag: view.flag,
        // `view.body` was cut from `window`, which lies inside `source`.
        body: source.slice_ref(view.body),
        properties: Properties::parse_bytes_joined(view.properties, extra)?,
        queue_id: view.queue_id,
        store_size: view.total_size,
        queue_offset: view.queue_offset,
        sys_flag: view.sys_flag,
        born_timestamp: view.born_timestamp,
        born_host: view.born_host,
        store_timestamp: view.store_timestamp,
        store_host: view.store_host,
        commit_log_offset: view.commit_log_offset,
        body_crc: view.body_crc,
        reconsume_times: view.reconsume_times,
        prepared_transaction_offset: view.prepared_transaction_offset,
    })
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddrV4;

    use super::*;
    use crate::message::properties::keys;

    fn v4(a: u8, port: u16) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, a), port))
    }

    fn v6(port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1)), port)
    }

    fn sample(topic: &str, body: &'static [u8]) -> MessageExt {
        let mut msg = MessageExt::new(topic, Bytes::from_static(body));
        msg.flag = 3;
        msg.queue_id = 2;
        msg.queue_offset = 42;
        msg.commit_log_offset = 4096;
        msg.sys_flag = sysflag::MULTI_TAGS;
        msg.born_timestamp = 1_700_000_000_000;
        msg.born_host = v4(1, 50_000);
        msg.store_timestamp = 1_700_000_000_123;
        msg.store_host = v4(2, 10_911);
        msg.reconsume_times = 1;
        msg.prepared_transaction_offset = 7;
        msg.body_crc = body_crc(body);
        msg.properties.insert(keys::TAGS, "TagA");
        msg
    }

    fn encode(msg: &MessageExt) -> Bytes {
        let mut buf = BytesMut::new();
        assert!(encode_record(msg, &mut buf).is_ok());
        buf.freeze()
    }

    #[test]
    fn body_crc_of_the_check_string() {
        // CRC-32 check value of "123456789" is 0xCBF43926; the sign bit is cleared.
        assert_eq!(body_crc(b"123456789"), 0x4BF4_3926);
        assert_eq!(body_crc(b""), 0);
    }

    #[test]
    fn fixed_part_is_91_bytes_with_ipv4_hosts() {
        assert_eq!(record_size(0, 0, 0, false, false, false), MIN_RECORD_SIZE);
        assert_eq!(MIN_RECORD_SIZE, 91);
        assert_eq!(record_size(0, 0, 0, true, true, true), 91 + 12 + 12 + 1);
        assert_eq!(record_size(5, 10, 7, false, false, false), 91 + 22);
    }

    #[test]
    fn hand_computed_layout() {
        let msg = sample("T1", b"hello");
        let buf = encode(&msg);
        // props "TAGS\x01TagA\x02" = 10 bytes.
        let total = 91 + 2 + 5 + 10;
        assert_eq!(buf.len(), total);
        let int = |pos: usize| read_i32_at(&buf, pos);
        let long = |pos: usize| {
            buf.get(pos..pos + 8)
                .and_then(|b| b.try_into().ok())
                .map(i64::from_be_bytes)
        };
        assert_eq!(int(TOTAL_SIZE_POS), Some(total as i32));
        assert_eq!(int(MAGIC_POS), Some(MESSAGE_MAGIC_V1));
        assert_eq!(int(BODY_CRC_POS), Some(body_crc(b"hello")));
        assert_eq!(int(QUEUE_ID_POS), Some(2));
        assert_eq!(int(FLAG_POS), Some(3));
        assert_eq!(long(QUEUE_OFFSET_POS), Some(42));
        assert_eq!(long(PHYSICAL_OFFSET_POS), Some(4096));
        assert_eq!(int(SYS_FLAG_POS), Some(sysflag::MULTI_TAGS));
        assert_eq!(long(BORN_TIMESTAMP_POS), Some(1_700_000_000_000));
        assert_eq!(buf.get(48..52), Some(&[10, 0, 0, 1][..]));
        assert_eq!(int(52), Some(50_000));
        assert_eq!(long(56), Some(1_700_000_000_123));
        assert_eq!(buf.get(64..68), Some(&[10, 0, 0, 2][..]));
        assert_eq!(int(68), Some(10_911));
        assert_eq!(int(72), Some(1));
        assert_eq!(long(76), Some(7));
        assert_eq!(int(84), Some(5));
        assert_eq!(buf.get(88..93), Some(&b"hello"[..]));
        assert_eq!(buf.get(93), Some(&2));
        assert_eq!(buf.get(94..96), Some(&b"T1"[..]));
        assert_eq!(buf.get(96..98), Some(&[0, 10][..]));
        assert_eq!(buf.get(98..), Some(&b"TAGS\x01TagA\x02"[..]));
    }

    #[test]
    fn round_trip_v1_ipv4() {
        let msg = sample("TopicTest", b"body bytes");
        let buf = encode(&msg);
        let decoded = decode_record(&buf, true);
        let mut expected = msg.clone();
        expected.store_size = buf.len() as i32;
        assert_eq!(decoded.as_ref().ok(), Some(&expected));
        // The body shares the input's memory.
        let body_ptr = decoded.ok().map(|m| m.body.as_ptr() as usize);
        assert_eq!(body_ptr, Some(buf.as_ptr() as usize + 88));
    }

    #[test]
    fn long_topic_uses_v2_and_ipv6_sets_flags() {
        let topic = "%RETRY%".to_owned() + &"g".repeat(200);
        let mut msg = sample(&topic, b"x");
        msg.born_host = v6(1);
        msg.store_host = v6(2);
        let buf = encode(&msg);
        assert_eq!(peek_magic(&buf), Some(MESSAGE_MAGIC_V2));
        assert_eq!(buf.len(), record_size(topic.len(), 1, 10, true, true, true));
        let view = decode_record_view(&buf);
        let view = view.as_ref().ok();
        assert_eq!(view.map(|v| v.topic), Some(topic.as_str()));
        assert_eq!(
            view.map(|v| v.sys_flag),
            Some(sysflag::MULTI_TAGS | sysflag::BORNHOST_V6 | sysflag::STOREHOSTADDRESS_V6)
        );
        assert_eq!(view.map(|v| v.store_host), Some(v6(2)));
        assert_eq!(view.and_then(|v| v.property(keys::TAGS)), Some("TagA"));
        // Stale V6 bits on an IPv4 message are cleared.
        let mut stale = sample("T", b"");
        stale.sys_flag |= sysflag::BORNHOST_V6;
        let view_flag = decode_record_view(&encode(&stale)).ok().map(|v| v.sys_flag);
        assert_eq!(view_flag, Some(sysflag::MULTI_TAGS));
    }

    #[test]
    fn topic_of_exactly_127_bytes_stays_v1() {
        let buf = encode(&sample(&"t".repeat(127), b""));
        assert_eq!(peek_magic(&buf), Some(MESSAGE_MAGIC_V1));
        let buf = encode(&sample(&"t".repeat(128), b""));
        assert_eq!(peek_magic(&buf), Some(MESSAGE_MAGIC_V2));
    }

    #[test]
    fn encoder_limits() {
        let too_long = sample(&"t".repeat(MAX_RECORD_TOPIC_LEN + 1), b"");
        assert!(encode_record(&too_long, &mut BytesMut::new()).is_err());
        assert!(encode(&sample(&"t".repeat(MAX_RECORD_TOPIC_LEN), b"")).len() > 255);
        let mut big_props = sample("T", b"");
        big_props
            .properties
            .insert("K", "v".repeat(MAX_RECORD_PROPERTIES_LEN));
        assert!(matches!(
            encode_record(&big_props, &mut BytesMut::new()),
            Err(ProtocolError::TooLarge { .. })
        ));
    }

    #[test]
    fn encode_into_slice_matches_and_checks_room() {
        let msg = sample("T", b"abc");
        let expected = encode(&msg);
        let mut slot = vec![0xEE_u8; expected.len() + 5];
        assert_eq!(
            encode_record_into(&msg, &mut slot).ok(),
            Some(expected.len())
        );
        assert_eq!(slot.get(..expected.len()), Some(&expected[..]));
        assert_eq!(slot.get(expected.len()..), Some(&[0xEE; 5][..]));
        let mut small = vec![0_u8; expected.len() - 1];
        assert!(encode_record_into(&msg, &mut small).is_err());
        assert!(small.iter().all(|b| *b == 0));
        assert_eq!(encoded_record_size(&msg).ok(), Some(expected.len()));
    }

    #[test]
    fn blank_entry() {
        let mut seg = [0_u8; 16];
        assert_eq!(encode_blank_into(16, &mut seg).ok(), Some(8));
        assert_eq!(peek_total_size(&seg), Some(16));
        assert_eq!(peek_magic(&seg), Some(BLANK_MAGIC));
        assert!(decode_record_view(&seg).is_err());
        assert!(encode_blank_into(16, &mut [0_u8; 7]).is_err());
    }

    #[test]
    fn decoder_rejects_inconsistent_records() {
        let good = encode(&sample("T", b"abc")).to_vec();
        // Truncated buffer.
        assert!(decode_record_view(good.get(..good.len() - 1).unwrap_or_default()).is_err());
        // TOTALSIZE larger than the fields (with the extra byte present).
        let mut padded = good.clone();
        padded.push(0);
        padded[3] += 1;
        assert!(decode_record_view(&padded).is_err());
        // Bad magic.
        let mut bad_magic = good.clone();
        bad_magic[7] ^= 1;
        assert!(decode_record_view(&bad_magic).is_err());
        // Negative body length.
        let mut negative = good.clone();
        negative[84] = 0x80;
        assert!(decode_record_view(&negative).is_err());
        // Port out of range.
        let mut port = good.clone();
        port[52] = 1;
        assert!(decode_record_view(&port).is_err());
        // CRC mismatch only matters when asked.
        let mut crc = good.clone();
        crc[11] ^= 1;
        let crc = Bytes::from(crc);
        assert!(decode_record(&crc, false).is_ok());
        assert!(decode_record(&crc, true).is_err());
        assert!(decode_record_view(&[]).is_err());
    }

    /// BODYLEN + TOPICLEN + PROPLEN and the fixed fields of an accepted view add up to its
    /// TOTALSIZE, and its slices are exactly where the lengths say.
    fn assert_tiles(record: &[u8], view: &RecordView<'_>, topic_len_width: usize) {
        let hosts = host_len(view.sys_flag & sysflag::BORNHOST_V6 != 0)
            + host_len(view.sys_flag & sysflag::STOREHOSTADDRESS_V6 != 0);
        let fixed = BORN_HOST_POS + hosts + 8 + 4 + 8 + 4 + topic_len_width + 2;
        assert_eq!(
            fixed + view.body.len() + view.topic.len() + view.properties.len(),
            view.size()
        );
        let body_start = BORN_HOST_POS + hosts + 8 + 4 + 8 + 4;
        assert_eq!(
            record.get(body_start..body_start + view.body.len()),
            Some(view.body)
        );
        let end = view.size();
        assert_eq!(
            record.get(end - view.properties.len()..end),
            Some(view.properties)
        );
    }

    #[test]
    fn decoder_never_panics_and_accepts_only_consistent_lengths() {
        // A 128-byte topic makes a V2 record (two-byte TOPICLEN).
        for topic in ["TopicA".to_owned(), "t".repeat(128)] {
            let good = encode(&sample(&topic, b"body bytes")).to_vec();
            let width = if peek_magic(&good) == Some(MESSAGE_MAGIC_V2) {
                2
            } else {
                1
            };
            assert_eq!(width == 2, topic.len() > 127);
            let view = decode_record_view(&good).expect("the sample decodes");
            assert_tiles(&good, &view, width);
            // Every length field set to values around its true one, negative and huge: no
            // panic, and whatever is accepted tiles its TOTALSIZE.
            let body_len_pos = BORN_HOST_POS + HOST_V4_LEN + 8 + HOST_V4_LEN + 4 + 8;
            let topic_len_pos = body_len_pos + 4 + view.body.len();
            let props_len_pos = topic_len_pos + width + view.topic.len();
            for (pos, field_width) in [
                (body_len_pos, 4),
                (topic_len_pos, width),
                (props_len_pos, 2),
            ] {
                for value in [
                    -1_i64,
                    0,
                    1,
                    2,
                    5,
                    9,
                    10,
                    11,
                    127,
                    128,
                    32_767,
                    65_535,
                    1 << 30,
                ] {
                    let mut bad = good.clone();
                    let bytes = value.to_be_bytes();
                    bad[pos..pos + field_width].copy_from_slice(&bytes[8 - field_width..]);
                    if let Ok(v) = decode_record_view(&bad) {
                        assert_tiles(&bad, &v, width);
                    }
                }
            }
            // Every byte replaced by a few values, and every prefix: no panic.
            for i in 0..good.len() {
                for b in [0x00_u8, 0x01, 0x7F, 0x80, 0xFF] {
                    let mut bad = good.clone();
                    bad[i] = b;
                    let _ = decode_record_view(&bad);
                }
                assert!(decode_record_view(&good[..i]).is_err(), "prefix {i}");
            }
        }
    }

    #[test]
    fn concatenated_records() {
        let mut buf = BytesMut::new();
        let first = sample("A", b"1");
        let second = sample(&"B".repeat(130), b"22");
        assert!(encode_record(&first, &mut buf).is_ok());
        assert!(encode_record(&second, &mut buf).is_ok());
        let buf = buf.freeze();
        let decoded = decode_records(&buf, true).unwrap_or_default();
        let topics: Vec<_> = decoded.iter().map(|m| m.topic.as_str()).collect();
        assert_eq!(topics, vec!["A", second.topic.as_str()]);
        assert_eq!(
            decoded.get(1).map(|m| m.body.clone()),
            Some(Bytes::from_static(b"22"))
        );
        assert!(decode_records(&buf.slice(..buf.len() - 1), false).is_err());
        assert_eq!(decode_records(&Bytes::new(), false).ok(), Some(Vec::new()));
    }
}
