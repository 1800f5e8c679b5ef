//! The batch body of SEND_BATCH_MESSAGE: concatenated short records, one per message.
//!
//! A batch entry carries only what differs between the messages of one batch (flag, body,
//! properties); the topic, queue and the rest come from the request header. The broker recomputes
//! the CRC, so MAGICCODE and BODYCRC are written as 0 and ignored on read. The entry count is
//! bounded by [`MAX_BATCH_MESSAGES`] so a hostile body of tiny entries cannot make the broker
//! build an unbounded message list.

use bytes::{BufMut, Bytes, BytesMut};

use super::properties::Properties;
use crate::error::ProtocolError;
use crate::limits::MAX_BATCH_MESSAGES;

/// TOTALSIZE (4) + MAGICCODE (4) + BODYCRC (4) + FLAG (4) + BODYLEN (4) + PROPLEN (2): the size
/// of an entry with an empty body and no properties.
pub const BATCH_ENTRY_FIXED_LEN: usize = 22;
/// Longest properties string of one entry (PROPLEN is a signed i16).
pub const MAX_BATCH_ENTRY_PROPERTIES_LEN: usize = i16::MAX as usize;
/// MAGICCODE and BODYCRC a client writes in every entry.
const CLIENT_PLACEHOLDER: i32 = 0;

/// One message of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BatchEntry {
    pub flag: i32,
    pub body: Bytes,
    pub properties: Properties,
}

/// Splits a batch body into its entries. Bodies are zero-copy slices of `body`.
pub fn decode_batch(body: &Bytes) -> Result<Vec<BatchEntry>, ProtocolError> {
    let mut entries = Vec::new();
    let mut pos = 0_usize;
    while pos < body.len() {
        if entries.len() >= MAX_BATCH_MESSAGES {
            return Err(ProtocolError::TooLarge {
                what: "batch message count",
                len: entries.len() + 1,
                max: MAX_BATCH_MESSAGES,
            });
        }
        let rest = body.get(pos..).unwrap_or_default();
        let (entry, size) = decode_entry(body, rest)?;
        entries.push(entry);
        pos += size;
    }
    Ok(entries)
}

/// Decodes the entry at the start of `window` (a sub-slice of `source`); returns it and its size.
fn decode_entry(source: &Bytes, window: &[u8]) -> Result<(BatchEntry, usize), ProtocolError> {
    let mut cur = Reader {
        buf: window,
        pos: 0,
    };
    let total_size = cur.i32("TOTALSIZE")?;
    let total = usize::try_from(total_size)
        .ok()
        .filter(|t| *t >= BATCH_ENTRY_FIXED_LEN && *t <= window.len())
        .ok_or_else(|| {
            ProtocolError::Body(format!(
                "batch entry TOTALSIZE {total_size} is outside {BATCH_ENTRY_FIXED_LEN}..={}",
                window.len()
            ))
        })?;
    cur.buf = window.get(..total).unwrap_or_default();
    let _magic = cur.i32("MAGICCODE")?;
    let _body_crc = cur.i32("BODYCRC")?;
    let flag = cur.i32("FLAG")?;
    let body_len = cur.i32("BODYLEN")?;
    let body_len = usize::try_from(body_len)
        .map_err(|_| ProtocolError::Body(format!("batch entry BODYLEN {body_len} is negative")))?;
    let body = cur.take(body_len, "BODY")?;
    let props_len = cur.i16("PROPLEN")?;
    let props_len = usize::try_from(props_len)
        .map_err(|_| ProtocolError::Body(format!("batch entry PROPLEN {props_len} is negative")))?;
    let properties = Properties::parse_bytes(cur.take(props_len, "PROPERTIES")?)?;
    if cur.pos != total {
        return Err(ProtocolError::Body(format!(
            "batch entry fields end at byte {} but TOTALSIZE is {total}",
            cur.pos
        )));
    }
    let entry = BatchEntry {
        flag,
        // `body` was cut from `window`, which lies inside `source`.
        body: source.slice_ref(body),
        properties,
    };
    Ok((entry, total))
}

/// Appends `entries` as a batch body to `dst`.
pub fn encode_batch(entries: &[BatchEntry], dst: &mut BytesMut) -> Result<(), ProtocolError> {
    if entries.len() > MAX_BATCH_MESSAGES {
        return Err(ProtocolError::TooLarge {
            what: "batch message count",
            len: entries.len(),
            max: MAX_BATCH_MESSAGES,
        });
    }
    let mut sizes = Vec::with_capacity(entries.len());
    for entry in entries {
        let props_len = entry.properties.encoded_len();
        if props_len > MAX_BATCH_ENTRY_PROPERTIES_LEN {
            return Err(ProtocolError::TooLarge {
                what: "batch entry properties",
                len: props_len,
                max: MAX_BATCH_ENTRY_PROPERTIES_LEN,
            });
        }
        let total = BATCH_ENTRY_FIXED_LEN + entry.body.len() + props_len;
        if total > i32::MAX as usize {
            return Err(ProtocolError::TooLarge {
                what: "batch entry",
                len: total,
                max: i32::MAX as usize,
            });
        }
        sizes.push((total, props_len));
    }
    dst.reserve(sizes.iter().map(|(total, _)| total).sum());
    for (entry, (total, props_len)) in entries.iter().zip(sizes) {
        // Both lengths were bounded above, so the casts cannot truncate.
        dst.put_i32(total as i32);
        dst.put_i32(CLIENT_PLACEHOLDER);
        dst.put_i32(CLIENT_PLACEHOLDER);
        dst.put_i32(entry.flag);
        dst.put_i32(entry.body.len() as i32);
        dst.put_slice(&entry.body);
        dst.put_i16(props_len as i16);
        entry.properties.encode_into(dst);
    }
    Ok(())
}

/// Bounds-checked big-endian reads over one entry.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], ProtocolError> {
        let bytes = self
            .pos
            .checked_add(n)
            .and_then(|end| self.buf.get(self.pos..end))
            .ok_or_else(|| {
                ProtocolError::Body(format!(
                    "batch entry truncated at {field} (byte {})",
                    self.pos
                ))
            })?;
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], ProtocolError> {
        let bytes = self.take(N, field)?;
        bytes
            .try_into()
            .map_err(|_| ProtocolError::Body(format!("batch entry truncated at {field}")))
    }

    fn i16(&mut self, field: &'static str) -> Result<i16, ProtocolError> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }

    fn i32(&mut self, field: &'static str) -> Result<i32, ProtocolError> {
        Ok(i32::from_be_bytes(self.array(field)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::properties::keys;

    fn entry(flag: i32, body: &'static [u8], tags: &str) -> BatchEntry {
        let mut properties = Properties::new();
        properties.insert(keys::TAGS, tags);
        BatchEntry {
            flag,
            body: Bytes::from_static(body),
            properties,
        }
    }

    #[test]
    fn layout_matches_the_fact_sheet() {
        let mut buf = BytesMut::new();
        encode_batch(&[entry(7, b"abc", "T")], &mut buf).ok();
        // props "TAGS\x01T\x02" = 7 bytes; total 22 + 3 + 7.
        assert_eq!(buf.len(), 32);
        assert_eq!(&buf[..4], &32_i32.to_be_bytes());
        assert_eq!(&buf[4..12], &[0; 8]);
        assert_eq!(&buf[12..16], &7_i32.to_be_bytes());
        assert_eq!(&buf[16..20], &3_i32.to_be_bytes());
        assert_eq!(&buf[20..23], b"abc");
        assert_eq!(&buf[23..25], &7_i16.to_be_bytes());
        assert_eq!(&buf[25..], b"TAGS\x01T\x02");
    }

    #[test]
    fn round_trip_keeps_order_and_shares_memory() {
        let entries = vec![
            entry(1, b"first", "A"),
            entry(2, b"", "B"),
            entry(3, b"x", "C"),
        ];
        let mut buf = BytesMut::new();
        assert!(encode_batch(&entries, &mut buf).is_ok());
        let bytes = buf.freeze();
        let decoded = decode_batch(&bytes);
        assert_eq!(decoded.as_ref().ok(), Some(&entries));
        let first_body = decoded
            .ok()
            .and_then(|d| d.into_iter().next())
            .map(|e| e.body);
        let first_ptr = first_body.map(|b| b.as_ptr() as usize);
        assert_eq!(first_ptr, Some(bytes.as_ptr() as usize + 20));
    }

    #[test]
    fn malformed_entries_are_rejected() {
        let mut buf = BytesMut::new();
        assert!(encode_batch(&[entry(1, b"body", "A")], &mut buf).is_ok());
        let good = buf.freeze();
        // Truncated.
        assert!(decode_batch(&good.slice(..good.len() - 1)).is_err());
        // TOTALSIZE one larger than the fields.
        let mut bigger = good.to_vec();
        bigger.push(0);
        bigger[3] += 1;
        assert!(decode_batch(&Bytes::from(bigger)).is_err());
        // Negative BODYLEN.
        let mut negative = good.to_vec();
        negative[16] = 0xFF;
        assert!(decode_batch(&Bytes::from(negative)).is_err());
        assert_eq!(decode_batch(&Bytes::new()).ok(), Some(Vec::new()));
    }

    #[test]
    fn entry_count_is_bounded() {
        let one = {
            let mut buf = BytesMut::new();
            assert!(encode_batch(&[BatchEntry::default()], &mut buf).is_ok());
            buf
        };
        let mut many = BytesMut::new();
        for _ in 0..=MAX_BATCH_MESSAGES {
            many.extend_from_slice(&one);
        }
        assert!(matches!(
            decode_batch(&many.freeze()),
            Err(ProtocolError::TooLarge { .. })
        ));
        let too_many = vec![BatchEntry::default(); MAX_BATCH_MESSAGES + 1];
        assert!(encode_batch(&too_many, &mut BytesMut::new()).is_err());
    }
}
