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
///
/// Every message a broker stores or a consumer receives has its properties parsed once, so the
/// representation is built for that: all keys and values live back to back in one string and the
/// entries are byte ranges into it. Parsing a properties area costs two allocations instead of
/// two per pair, and dropping the message two frees. A replaced or removed entry leaves its
/// bytes behind until they outweigh the live ones ([`COMPACT_SLACK`]); then the string is rebuilt,
/// so repeated updates of one key (a retried message's RECONSUME_TIME) cannot grow it without
/// bound.
#[derive(Clone, Default)]
pub struct Properties {
    /// Keys and values of the entries (and of replaced ones, until the next compaction).
    buf: String,
    /// The entries, in insertion order.
    spans: Vec<Span>,
    /// Bytes of `buf` that belong to live entries.
    live: usize,
}

/// One entry: `buf[key.0..key.1]` and `buf[value.0..value.1]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    key: (usize, usize),
    value: (usize, usize),
}

impl Span {
    fn len(&self) -> usize {
        (self.key.1 - self.key.0) + (self.value.1 - self.value.0)
    }
}

/// Dead bytes tolerated in [`Properties`]' string beyond the live ones before it is rebuilt.
const COMPACT_SLACK: usize = 256;
/// Entries [`Properties::parse`] expects: a Java producer's message carries four to six
/// (WAIT, UNIQ_KEY, TAGS, KEYS, and 5.x's MSG_REGION, TRACE_ON; the broker adds CLUSTER).
const PARSE_ENTRIES_HINT: usize = 8;
/// Entries [`Properties::parse`] leaves room for beyond the expected ones.
pub const PARSE_SPARE_ENTRIES: usize = 3;
/// Bytes [`Properties::parse`] leaves room for beyond the parsed string: MIN_OFFSET, MAX_OFFSET
/// and CONSUME_START_TIME with 19-, 19- and 13-digit values.
pub const PARSE_SPARE_BYTES: usize = 96;

impl Properties {
    pub fn new() -> Self {
        Self::default()
    }

    fn text(&self, range: (usize, usize)) -> &str {
        // Ranges are only ever built at char boundaries of `buf`; `get` keeps this total anyway.
        self.buf.get(range.0..range.1).unwrap_or_default()
    }

    /// Whether `span`'s key is `key`: lengths first, then bytes (a consumer looks up and sets
    /// keys on every message; `str` slicing would check char boundaries each time).
    fn key_is(&self, span: &Span, key: &[u8]) -> bool {
        span.key.1 - span.key.0 == key.len()
            && self.buf.as_bytes().get(span.key.0..span.key.1) == Some(key)
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.spans
            .iter()
            .position(|s| self.key_is(s, key.as_bytes()))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.spans
            .iter()
            .find(|s| self.key_is(s, key.as_bytes()))
            .map(|s| self.text(s.value))
    }

    /// Appends `text` to the string; returns its range.
    fn push_text(&mut self, text: &str) -> (usize, usize) {
        let start = self.buf.len();
        self.buf.push_str(text);
        (start, self.buf.len())
    }

    pub fn insert(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) {
        let (key, value) = (key.as_ref(), value.as_ref());
        match self.position(key) {
            Some(idx) => {
                let old = self.spans[idx];
                let range = self.push_text(value);
                self.spans[idx].value = range;
                self.live = self.live - (old.value.1 - old.value.0) + value.len();
                self.compact_if_sparse();
            }
            None => {
                let key = self.push_text(key);
                let value = self.push_text(value);
                let span = Span { key, value };
                self.live += span.len();
                self.spans.push(span);
            }
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<String> {
        let idx = self.position(key)?;
        let span = self.spans.remove(idx);
        let value = self.text(span.value).to_owned();
        self.live -= span.len();
        self.compact_if_sparse();
        Some(value)
    }

    /// Rebuilds the string from the live entries once dead bytes dominate it.
    fn compact_if_sparse(&mut self) {
        if self.buf.len() <= self.live.saturating_mul(2) + COMPACT_SLACK {
            return;
        }
        let mut rebuilt = Properties {
            buf: String::with_capacity(self.live),
            spans: Vec::with_capacity(self.spans.len()),
            live: 0,
        };
        for (k, v) in self.iter() {
            let key = rebuilt.push_text(k);
            let value = rebuilt.push_text(v);
            let span = Span { key, value };
            rebuilt.live += span.len();
            rebuilt.spans.push(span);
        }
        *self = rebuilt;
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.spans
            .iter()
            .map(|s| (self.text(s.key), self.text(s.value)))
    }

    /// Parses a properties string with the Java rules (see the module docs). Never fails: malformed
    /// segments are dropped, exactly as Java drops them.
    ///
    /// The string and the entry list get room for [`PARSE_SPARE_ENTRIES`] more entries of up to
    /// [`PARSE_SPARE_BYTES`] bytes in all: a consumer adds MIN_OFFSET and MAX_OFFSET (and a push
    /// consumer CONSUME_START_TIME) to every message it receives, which otherwise grew both.
    pub fn parse(s: &str) -> Properties {
        let bytes = s.as_bytes();
        let mut buf = String::with_capacity(s.len() + PARSE_SPARE_BYTES);
        buf.push_str(s);
        let mut props = Properties {
            buf,
            spans: Vec::with_capacity(PARSE_ENTRIES_HINT + PARSE_SPARE_ENTRIES),
            live: 0,
        };
        for (key, value) in pair_ranges(bytes) {
            // Both ranges were cut at ASCII separators, so they are char boundaries of the copy.
            let span = Span { key, value };
            // Java's last duplicate wins, in the position of the first.
            let key_bytes = &bytes[key.0..key.1];
            let duplicate = props
                .spans
                .iter()
                .position(|old| props.key_is(old, key_bytes));
            match duplicate {
                Some(idx) => {
                    let old = props.spans[idx];
                    props.spans[idx].value = span.value;
                    props.live = props.live - (old.value.1 - old.value.0) + (value.1 - value.0);
                }
                None => {
                    props.live += span.len();
                    props.spans.push(span);
                }
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
        for (k, v) in self.iter() {
            out.push_str(k);
            out.push(NAME_VALUE_SEPARATOR);
            out.push_str(v);
            out.push(PROPERTY_SEPARATOR);
        }
        out
    }

    /// Writes [`Properties::encode`]'s bytes straight into `dst`, without an intermediate string.
    pub fn encode_into<B: BufMut>(&self, dst: &mut B) {
        for (k, v) in self.iter() {
            dst.put_slice(k.as_bytes());
            dst.put_u8(NAME_VALUE_SEPARATOR_BYTE);
            dst.put_slice(v.as_bytes());
            dst.put_u8(PROPERTY_SEPARATOR_BYTE);
        }
    }

    /// Byte length of [`Properties::encode`]'s output.
    pub fn encoded_len(&self) -> usize {
        self.live + 2 * self.spans.len()
    }

    /// Drops every key that must never be stored (those starting with
    /// [`keys::TRANSIENT_PREFIX`]).
    pub fn remove_transient(&mut self) {
        let before = self.spans.len();
        let buf = &self.buf;
        let mut dropped = 0;
        self.spans.retain(|s| {
            let keep = !buf
                .get(s.key.0..s.key.1)
                .unwrap_or_default()
                .starts_with(keys::TRANSIENT_PREFIX);
            if !keep {
                dropped += s.len();
            }
            keep
        });
        if self.spans.len() != before {
            self.live -= dropped;
            self.compact_if_sparse();
        }
    }
}

impl PartialEq for Properties {
    fn eq(&self, other: &Self) -> bool {
        self.spans.len() == other.spans.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Properties {}

impl std::fmt::Debug for Properties {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Properties {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut props = Properties::new();
        props.extend(iter);
        props
    }
}

impl<K: AsRef<str>, V: AsRef<str>> Extend<(K, V)> for Properties {
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
    pair_ranges(raw).map(|(k, v)| (&raw[k.0..k.1], &raw[v.0..v.1]))
}

/// [`pairs`] as byte ranges of `raw`: `(key, value)`, each `(start, end)`. The separators are
/// found with `memchr` (half the instructions of a byte-by-byte split on a 110-byte area).
fn pair_ranges(raw: &[u8]) -> impl Iterator<Item = ((usize, usize), (usize, usize))> + '_ {
    let mut start = 0;
    std::iter::from_fn(move || {
        while let Some(rest) = raw.get(start..).filter(|rest| !rest.is_empty()) {
            let segment = (
                start,
                start + memchr::memchr(PROPERTY_SEPARATOR_BYTE, rest).unwrap_or(rest.len()),
            );
            start = segment.1 + 1;
            let Some(sep) = memchr::memchr(NAME_VALUE_SEPARATOR_BYTE, &raw[segment.0..segment.1])
            else {
                continue;
            };
            let key = (segment.0, segment.0 + sep);
            let value = (key.1 + 1, segment.1);
            if key.1 > key.0 && value.1 > value.0 {
                return Some((key, value));
            }
        }
        None
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

    proptest::proptest! {
        /// The parser against Java's `string2messageProperties` written out plainly: split on
        /// 0x02, cut each segment at its first 0x01, keep both halves only when non-empty, a
        /// later duplicate replaces the value in the first one's place.
        #[test]
        fn parse_matches_javas_rules(s in "[AB\u{1}\u{2}é]{0,40}") {
            let mut model: Vec<(&str, &str)> = Vec::new();
            for segment in s.split(PROPERTY_SEPARATOR) {
                let Some((k, v)) = segment.split_once(NAME_VALUE_SEPARATOR) else { continue };
                if k.is_empty() || v.is_empty() {
                    continue;
                }
                match model.iter_mut().find(|(old, _)| *old == k) {
                    Some(slot) => slot.1 = v,
                    None => model.push((k, v)),
                }
            }
            let props = Properties::parse(&s);
            proptest::prop_assert_eq!(props.iter().collect::<Vec<_>>(), model.clone());
            proptest::prop_assert_eq!(props.encoded_len(), props.encode().len());
            for (k, v) in &model {
                proptest::prop_assert_eq!(find_property(s.as_bytes(), k), Some(*v));
            }
        }
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

    /// Random inserts, replacements, removals and transient drops against a plain list of pairs:
    /// the compacting string representation must always read like the list.
    #[test]
    fn random_edits_match_a_list_of_pairs() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let key_names = [
            "TAGS",
            "KEYS",
            "a",
            "__RMQ.TRANSIENT.x",
            "RECONSUME_TIME",
            "中",
        ];
        for _ in 0..200 {
            let mut props = Properties::new();
            let mut model: Vec<(String, String)> = Vec::new();
            for step in 0..200 {
                let key = key_names[next(key_names.len() as u64) as usize];
                match next(10) {
                    0..=5 => {
                        let value = "v".repeat(1 + next(40) as usize) + &step.to_string();
                        props.insert(key, &value);
                        match model.iter_mut().find(|(k, _)| k == key) {
                            Some(slot) => slot.1 = value,
                            None => model.push((key.to_owned(), value)),
                        }
                    }
                    6..=7 => {
                        let expected = model
                            .iter()
                            .position(|(k, _)| k == key)
                            .map(|i| model.remove(i).1);
                        assert_eq!(props.remove(key), expected);
                    }
                    8 => {
                        props.remove_transient();
                        model.retain(|(k, _)| !k.starts_with(keys::TRANSIENT_PREFIX));
                    }
                    _ => {
                        props = Properties::parse(&props.encode());
                    }
                }
                let listed: Vec<(&str, &str)> = model
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                assert_eq!(props.iter().collect::<Vec<_>>(), listed);
                assert_eq!(props.encoded_len(), props.encode().len());
                assert!(
                    props.buf.len() <= 2 * props.live + COMPACT_SLACK + 64,
                    "dead bytes are bounded"
                );
                for (k, v) in &listed {
                    assert_eq!(props.get(k), Some(*v));
                }
            }
        }
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
