//! The properties string: `key 0x01 value 0x02` repeated (with a trailing 0x02), §5.4.
//!
//! Properties travel twice in RocketMQ: as the `properties` header field of a send and as the
//! PROPERTIES area of every stored record. Both carry the same string, so this one type parses and
//! encodes both. Parsing follows the Java rules exactly (split on 0x02, split each segment at its
//! first 0x01, drop segments with an empty key or value, last duplicate wins) because a record
//! written by any client must read back the same way a Java consumer reads it.

use bytes::BufMut;

use crate::error::ProtocolError;

/// Separates a key from its value.
pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
/// Ends every key/value pair, the last one included.
pub const PROPERTY_SEPARATOR: char = '\u{2}';
/// [`NAME_VALUE_SEPARATOR`] as a byte.
const NAME_VALUE_SEPARATOR_BYTE: u8 = 0x01;
/// [`PROPERTY_SEPARATOR`] as a byte.
const PROPERTY_SEPARATOR_BYTE: u8 = 0x02;

/// Property keys (Java `MessageConst`), named after the Java constants without `PROPERTY_`.
pub mod keys {
    pub const TAGS: &str = "TAGS";
    pub const KEYS: &str = "KEYS";
    /// `"true"`/`"false"`; missing means true.
    pub const WAIT_STORE_MSG_OK: &str = "WAIT";
    pub const DELAY_TIME_LEVEL: &str = "DELAY";
    pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    pub const REAL_QUEUE_ID: &str = "REAL_QID";
    pub const TRANSACTION_PREPARED: &str = "TRAN_MSG";
    pub const PRODUCER_GROUP: &str = "PGROUP";
    pub const TRANSACTION_PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
    pub const TRANSACTION_ID: &str = "__transactionId__";
    pub const TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
    pub const CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
    /// The client message id (§5.7).
    pub const UNIQ_KEY: &str = "UNIQ_KEY";
    pub const MIN_OFFSET: &str = "MIN_OFFSET";
    pub const MAX_OFFSET: &str = "MAX_OFFSET";
    pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
    pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
    pub const CONSUME_START_TIMESTAMP: &str = "CONSUME_START_TIME";
    pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
    pub const CLUSTER: &str = "CLUSTER";
    pub const MSG_REGION: &str = "MSG_REGION";
    pub const TRACE_SWITCH: &str = "TRACE_ON";
    pub const INSTANCE_ID: &str = "INSTANCE_ID";
    pub const CORRELATION_ID: &str = "CORRELATION_ID";
    pub const MESSAGE_REPLY_TO_CLIENT: &str = "REPLY_TO_CLIENT";
    pub const MESSAGE_TTL: &str = "TTL";
    pub const REPLY_MESSAGE_ARRIVE_TIME: &str = "ARRIVE_TIME";
    pub const PUSH_REPLY_TIME: &str = "PUSH_REPLY_TIME";
    /// Value `"reply"` ([`REPLY_MESSAGE_TYPE`]) marks a reply message.
    pub const MESSAGE_TYPE: &str = "MSG_TYPE";
    pub const BUYER_ID: &str = "BUYER_ID";
    pub const TRANSFER_FLAG: &str = "TRANSFER_FLAG";
    pub const CORRECTION_FLAG: &str = "CORRECTION_FLAG";
    pub const MQ2_FLAG: &str = "MQ2_FLAG";
    pub const EXTEND_UNIQ_INFO: &str = "EXTEND_UNIQ_INFO";
    pub const POP_CK: &str = "POP_CK";
    pub const POP_CK_OFFSET: &str = "POP_CK_OFFSET";
    pub const FIRST_POP_TIME: &str = "1ST_POP_TIME";
    pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
    pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
    pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
    pub const TIMER_OUT_MS: &str = "TIMER_OUT_MS";
    pub const TIMER_ENQUEUE_MS: &str = "TIMER_ENQUEUE_MS";
    pub const TIMER_DEQUEUE_MS: &str = "TIMER_DEQUEUE_MS";
    pub const TIMER_ROLL_TIMES: &str = "TIMER_ROLL_TIMES";
    pub const TIMER_DEL_UNIQKEY: &str = "TIMER_DEL_UNIQKEY";
    pub const TIMER_DELAY_LEVEL: &str = "TIMER_DELAY_LEVEL";
    pub const INNER_NUM: &str = "INNER_NUM";
    pub const INNER_BASE: &str = "INNER_BASE";
    pub const SHARDING_KEY: &str = "__SHARDINGKEY";
    pub const DLQ_ORIGIN_TOPIC: &str = "DLQ_ORIGIN_TOPIC";
    pub const DLQ_ORIGIN_MESSAGE_ID: &str = "DLQ_ORIGIN_MESSAGE_ID";
    pub const BORN_HOST: &str = "__BORNHOST";
    pub const BORN_TIMESTAMP: &str = "BORN_TIMESTAMP";
    /// 5.x `enabledAppendPropCRC`: whole-record CRC appended inside the properties area.
    pub const CRC32: &str = "__CRC32#";
    /// Keys starting with this prefix are never stored.
    pub const TRANSIENT_PREFIX: &str = "__RMQ.TRANSIENT.";
    /// The [`MESSAGE_TYPE`] value of a reply message.
    pub const REPLY_MESSAGE_TYPE: &str = "reply";
}

/// Message properties in insertion order; setting an existing key replaces it in place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Properties {
    entries: Vec<(String, String)>,
}

impl Properties {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let key = key.into();
        let value = value.into();
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.entries.push((key, value)),
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<String> {
        let idx = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(idx).1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.entries.iter().any(|(k, _)| k == key)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Parses a properties string with the Java rules (see the module docs). Never fails: malformed
    /// segments are dropped, exactly as Java drops them.
    pub fn parse(s: &str) -> Properties {
        let separators = s.bytes().filter(|b| *b == PROPERTY_SEPARATOR_BYTE).count();
        let mut props = Properties {
            entries: Vec::with_capacity(separators + 1),
        };
        for (key, value) in pairs(s.as_bytes()) {
            // Both halves were cut from a &str at ASCII separators, so they are valid UTF-8.
            if let (Ok(key), Ok(value)) = (std::str::from_utf8(key), std::str::from_utf8(value)) {
                props.insert(key, value);
            }
        }
        props
    }

    /// Parses the raw PROPERTIES area of a record. Fails only if the bytes are not UTF-8.
    pub fn parse_bytes(bytes: &[u8]) -> Result<Properties, ProtocolError> {
        let s = std::str::from_utf8(bytes)
            .map_err(|e| ProtocolError::Message(format!("properties are not valid UTF-8: {e}")))?;
        Ok(Properties::parse(s))
    }

    /// The properties string, with a trailing 0x02 after the last pair (empty if there are no
    /// properties).
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(self.encoded_len());
        for (k, v) in &self.entries {
            out.push_str(k);
            out.push(NAME_VALUE_SEPARATOR);
            out.push_str(v);
            out.push(PROPERTY_SEPARATOR);
        }
        out
    }

    /// Writes [`Properties::encode`]'s bytes straight into `dst`, without an intermediate string.
    pub fn encode_into<B: BufMut>(&self, dst: &mut B) {
        for (k, v) in &self.entries {
            dst.put_slice(k.as_bytes());
            dst.put_u8(NAME_VALUE_SEPARATOR_BYTE);
            dst.put_slice(v.as_bytes());
            dst.put_u8(PROPERTY_SEPARATOR_BYTE);
        }
    }

    /// Byte length of [`Properties::encode`]'s output.
    pub fn encoded_len(&self) -> usize {
        self.entries
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2)
            .sum()
    }

    /// Drops every key that must never be stored (those starting with
    /// [`keys::TRANSIENT_PREFIX`]).
    pub fn remove_transient(&mut self) {
        self.entries
            .retain(|(k, _)| !k.starts_with(keys::TRANSIENT_PREFIX));
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Properties {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut props = Properties::new();
        props.extend(iter);
        props
    }
}

impl<K: Into<String>, V: Into<String>> Extend<(K, V)> for Properties {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

/// The value of `key` in a raw properties area, without building a [`Properties`] (the store
/// reads TAGS, KEYS and UNIQ_KEY of every record it dispatches). Same rules as
/// [`Properties::parse`], so the last duplicate wins; `None` if absent or not UTF-8.
pub fn find_property<'a>(raw: &'a [u8], key: &str) -> Option<&'a str> {
    pairs(raw)
        .filter(|(k, _)| *k == key.as_bytes())
        .last()
        .and_then(|(_, v)| std::str::from_utf8(v).ok())
}

/// The key/value pairs Java keeps: segments split on 0x02, each split at its first 0x01, with
/// both halves non-empty.
fn pairs(raw: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    raw.split(|b| *b == PROPERTY_SEPARATOR_BYTE)
        .filter_map(|segment| {
            let sep = segment
                .iter()
                .position(|b| *b == NAME_VALUE_SEPARATOR_BYTE)?;
            let (key, rest) = segment.split_at(sep);
            let value = rest.get(1..)?;
            (!key.is_empty() && !value.is_empty()).then_some((key, value))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_has_trailing_separator() {
        let mut props = Properties::new();
        props.insert(keys::TAGS, "TagA");
        props.insert(keys::KEYS, "k1 k2");
        let s = props.encode();
        assert_eq!(s, "TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2\u{2}");
        assert_eq!(s.len(), props.encoded_len());
        let mut buf = Vec::new();
        props.encode_into(&mut buf);
        assert_eq!(buf, s.as_bytes());
        assert_eq!(Properties::new().encode(), "");
    }

    #[test]
    fn parse_follows_java_rules() {
        // Missing trailing separator, an empty key, an empty value, a segment without 0x01, a
        // value that contains 0x01 and a duplicate key.
        let s = "A\u{1}1\u{2}\u{1}x\u{2}B\u{1}\u{2}junk\u{2}C\u{1}v\u{1}w\u{2}A\u{1}2";
        let props = Properties::parse(s);
        assert_eq!(props.len(), 2);
        assert_eq!(props.get("A"), Some("2"));
        assert_eq!(props.get("B"), None);
        assert_eq!(props.get("C"), Some("v\u{1}w"));
        assert!(Properties::parse("").is_empty());
        assert!(Properties::parse("\u{2}\u{2}\u{1}").is_empty());
    }

    #[test]
    fn parse_bytes_rejects_invalid_utf8() {
        assert!(Properties::parse_bytes(b"K\x01\xff\x02").is_err());
        let props = Properties::parse_bytes("K\u{1}值\u{2}".as_bytes());
        assert_eq!(props.ok().as_ref().and_then(|p| p.get("K")), Some("值"));
    }

    #[test]
    fn find_property_matches_parse() {
        let raw = b"TAGS\x01a\x02KEYS\x01k\x02TAGS\x01b\x02";
        assert_eq!(find_property(raw, "TAGS"), Some("b"));
        assert_eq!(find_property(raw, "KEYS"), Some("k"));
        assert_eq!(find_property(raw, "TAG"), None);
        assert_eq!(find_property(b"X\x01\xff\x02", "X"), None);
    }

    #[test]
    fn insert_replaces_in_place_and_transient_keys_are_dropped() {
        let mut props: Properties = [("a", "1"), ("__RMQ.TRANSIENT.x", "y"), ("b", "2")]
            .into_iter()
            .collect();
        props.insert("a", "3");
        props.remove_transient();
        let collected: Vec<_> = props.iter().collect();
        assert_eq!(collected, vec![("a", "3"), ("b", "2")]);
        assert!(props.contains_key("b"));
        assert_eq!(props.remove("b").as_deref(), Some("2"));
    }
}
