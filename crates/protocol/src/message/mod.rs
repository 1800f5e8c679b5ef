//! The message codec: stored-message records, body CRC, sys flags, the
//! properties string, batch bodies, message ids and body (de)compression.
//!
//! The same record layout is used in the commit log and in pull/query/view response bodies, so the
//! store and the client share this code. Decoders take untrusted bytes (a peer's pull body, a
//! commit-log file that may be torn) and never panic; encoders check every length field against
//! the width it is written with, because a silently truncated length corrupts every record after it.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use bytes::Bytes;

pub mod batch;
pub mod compress;
pub mod id;
pub mod properties;
pub mod record;
pub mod sysflag;

pub use properties::Properties;

/// MAGICCODE of a V1 record (1-byte topic length).
pub const MESSAGE_MAGIC_V1: i32 = 0xDAA3_20A7_u32 as i32;
/// MAGICCODE of a V2 record (2-byte topic length, for topics longer than 127 bytes).
pub const MESSAGE_MAGIC_V2: i32 = 0xDAA3_20AB_u32 as i32;
/// MAGICCODE of the BLANK entry that pads the end of a commit-log segment.
pub const BLANK_MAGIC: i32 = 0xCBD4_3194_u32 as i32;
/// Size of a BLANK entry's meaningful part (TOTALSIZE + MAGICCODE). A segment must always keep this
/// much room after its last record so that a BLANK entry fits.
pub const BLANK_ENTRY_LEN: usize = 8;

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

impl MessageExt {
    /// A message with the given topic and body and every other field zero (hosts `0.0.0.0:0`),
    /// ready for the broker to fill in.
    pub fn new(topic: impl Into<String>, body: Bytes) -> Self {
        let unspecified = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        MessageExt {
            topic: topic.into(),
            flag: 0,
            body,
            properties: Properties::new(),
            queue_id: 0,
            store_size: 0,
            queue_offset: 0,
            sys_flag: 0,
            born_timestamp: 0,
            born_host: unspecified,
            store_timestamp: 0,
            store_host: unspecified,
            commit_log_offset: 0,
            body_crc: 0,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        }
    }

    /// The TAGS property.
    pub fn tags(&self) -> Option<&str> {
        self.properties.get(properties::keys::TAGS)
    }

    /// The KEYS property split on spaces (empty keys dropped).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.properties
            .get(properties::keys::KEYS)
            .unwrap_or("")
            .split(' ')
            .filter(|k| !k.is_empty())
    }

    /// The client message id (UNIQ_KEY property), if the producer set one.
    pub fn uniq_key(&self) -> Option<&str> {
        self.properties.get(properties::keys::UNIQ_KEY)
    }

    /// The offset message id of this record, derived from the store host and the
    /// commit-log offset.
    pub fn offset_msg_id(&self) -> String {
        id::offset_msg_id(self.store_host, self.commit_log_offset)
    }

    /// What Java's `MessageExt.getMsgId()` returns on the consumer side: the UNIQ_KEY if present,
    /// otherwise the offset message id.
    pub fn msg_id(&self) -> String {
        match self.uniq_key() {
            Some(uniq) => uniq.to_owned(),
            None => self.offset_msg_id(),
        }
    }
}

/// Java `String.hashCode()` of the tags, widened to i64: the tag code a ConsumeQueue entry stores
/// and a subscription's code set is compared against. It is computed over UTF-16 code units with
/// wrapping i32 arithmetic, so non-ASCII tags hash exactly as they do in Java.
pub fn tags_hash(tags: &str) -> i64 {
    let hash = tags.encode_utf16().fold(0_i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    i64::from(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_values_match_the_fact_sheet() {
        assert_eq!(MESSAGE_MAGIC_V1, -626_843_481);
        assert_eq!(MESSAGE_MAGIC_V2, -626_843_477);
        assert_eq!(BLANK_MAGIC, -875_286_124);
    }

    #[test]
    fn tags_hash_matches_java_string_hash_code() {
        // "TagA": ((84*31 + 97)*31 + 103)*31 + 65 = 2598919.
        assert_eq!(tags_hash("TagA"), 2_598_919);
        // "a" = 97, "" = 0.
        assert_eq!(tags_hash("a"), 97);
        assert_eq!(tags_hash(""), 0);
        // "TagA||TagB" overflows i32: 2598919 * 31^6 ... wraps. Computed in i64 then truncated.
        let wide = "TagA||TagB"
            .bytes()
            .fold(0_i64, |h, b| (h * 31 + i64::from(b)) & 0xFFFF_FFFF);
        assert_eq!(tags_hash("TagA||TagB"), i64::from(wide as u32 as i32));
        // Non-BMP characters hash as two UTF-16 surrogates: U+1F600 = D83D DE00.
        assert_eq!(tags_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
        // A negative Java hash stays negative after widening ("polygenelubricants" is the classic
        // String whose hashCode is i32::MIN).
        assert_eq!(tags_hash("polygenelubricants"), i64::from(i32::MIN));
    }

    #[test]
    fn msg_id_prefers_uniq_key() {
        let mut msg = MessageExt::new("T", Bytes::new());
        msg.commit_log_offset = 1;
        assert_eq!(msg.msg_id(), "00000000000000000000000000000001");
        msg.properties.insert(properties::keys::UNIQ_KEY, "ABC");
        assert_eq!(msg.msg_id(), "ABC");
        msg.properties.insert(properties::keys::KEYS, " k1  k2 ");
        assert_eq!(msg.keys().collect::<Vec<_>>(), vec!["k1", "k2"]);
    }
}
