//! The properties string: `key 0x01 value 0x02` repeated (with a trailing 0x02).
//!
//! Properties travel twice in RocketMQ: as the `properties` header field of a send and as the
//! PROPERTIES area of every stored record. Both carry the same string, so this one type parses and
//! encodes both. Parsing follows the Java rules exactly (split on 0x02, split each segment at its
//! first 0x01, drop segments with an empty key or value, last duplicate wins) because a record
//! written by any client must read back the same way a Java consumer reads it.

use std::sync::OnceLock;

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
    /// The client message id.
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
///
/// The entries are found on first use, not when a string is parsed: a consumer that reads only
/// the bodies of the messages it pulls never pays for splitting their properties (half of a
/// pulled message's decode).
#[derive(Clone)]
pub struct Properties {
    /// Keys and values of the entries (and of replaced ones, until the next compaction), or,
    /// until the index is built, the properties string as parsed.
    buf: String,
    /// The entries of `buf`, built from it on first use (see [`Index::parse`]).
    index: OnceLock<Index>,
}

/// Where the entries of a [`Properties`] string are.
#[derive(Clone, Default)]
struct Index {
    /// The entries, in insertion order.
    spans: Vec<Span>,
    /// Bytes of the string that belong to live entries.
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

    /// Whether this entry's key in `buf` is `key`: lengths first, then bytes (a consumer looks
    /// up and sets keys on every message; `str` slicing would check char boundaries each time).
    fn key_is(&self, buf: &str, key: &[u8]) -> bool {
        self.key.1 - self.key.0 == key.len()
            && buf.as_bytes().get(self.key.0..self.key.1) == Some(key)
    }
}

impl Index {
    /// The entries of a properties string by the Java rules (see the module docs): malformed
    /// segments are dropped, the last duplicate wins in the position of the first.
    fn parse(buf: &str) -> Index {
        let mut index = Index {
            spans: Vec::with_capacity(PARSE_ENTRIES_HINT + PARSE_SPARE_ENTRIES),
            live: 0,
        };
        let bytes = buf.as_bytes();
        for (key, value) in pair_ranges(bytes) {
            // Both ranges were cut at ASCII separators, so they are char boundaries of `buf`.
            let span = Span { key, value };
            match index.position(buf, &bytes[key.0..key.1]) {
                Some(idx) => index.set_value(idx, value),
                None => index.push(span),
            }
        }
        index
    }

    fn position(&self, buf: &str, key: &[u8]) -> Option<usize> {
        self.spans.iter().position(|s| s.key_is(buf, key))
    }

    fn push(&mut self, span: Span) {
        self.live += span.len();
        self.spans.push(span);
    }

    /// Points entry `idx` at a new value.
    fn set_value(&mut self, idx: usize, value: (usize, usize)) {
        let old = self.spans[idx].value;
        self.spans[idx].value = value;
        self.live = self.live - (old.1 - old.0) + (value.1 - value.0);
    }
}

impl Default for Properties {
    fn default() -> Self {
        Properties {
            buf: String::new(),
            index: OnceLock::from(Index::default()),
        }
    }
}

/// `range` of `buf`. Ranges are only ever built at char boundaries of `buf`; `get` keeps this
/// total anyway.
fn text_in(buf: &str, range: (usize, usize)) -> &str {
    buf.get(range.0..range.1).unwrap_or_default()
}

/// Appends `text` to `buf`; returns its range there.
fn push_text(buf: &mut String, text: &str) -> (usize, usize) {
    let start = buf.len();
    buf.push_str(text);
    (start, buf.len())
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

    fn index(&self) -> &Index {
        self.index.get_or_init(|| Index::parse(&self.buf))
    }

    /// The string and the index (built if need be), for an edit of both. The index is edited in
    /// place: putting a taken one back into a `OnceLock` runs its one-time initialisation again,
    /// which cost a broker about 1 % of its CPU on the three edits of every stored message.
    fn parts_mut(&mut self) -> (&mut String, &mut Index) {
        if self.index.get().is_none() {
            let _ = self.index.set(Index::parse(&self.buf));
        }
        match self.index.get_mut() {
            Some(index) => (&mut self.buf, index),
            None => unreachable!("the index was set above"),
        }
    }

    fn text(&self, range: (usize, usize)) -> &str {
        text_in(&self.buf, range)
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.index().position(&self.buf, key.as_bytes())
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.index()
            .spans
            .iter()
            .find(|s| s.key_is(&self.buf, key.as_bytes()))
            .map(|s| self.text(s.value))
    }

    pub fn insert(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) {
        let (key, value) = (key.as_ref(), value.as_ref());
        let (buf, index) = self.parts_mut();
        match index.position(buf, key.as_bytes()) {
            Some(idx) => {
                let range = push_text(buf, value);
                index.set_value(idx, range);
                self.compact_if_sparse();
            }
            None => {
                let key = push_text(buf, key);
                let value = push_text(buf, value);
                index.push(Span { key, value });
            }
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<String> {
        let (buf, index) = self.parts_mut();
        let removed = index.position(buf, key.as_bytes()).map(|idx| {
            let span = index.spans.remove(idx);
            index.live -= span.len();
            text_in(buf, span.value).to_owned()
        });
        if removed.is_some() {
            self.compact_if_sparse();
        }
        removed
    }

    /// Rebuilds the string from the live entries once dead bytes dominate it.
    fn compact_if_sparse(&mut self) {
        let live = self.index().live;
        if self.buf.len() <= live.saturating_mul(2) + COMPACT_SLACK {
            return;
        }
        let mut buf = String::with_capacity(live);
        let mut index = Index {
            spans: Vec::with_capacity(self.len()),
            live: 0,
        };
        for (k, v) in self.iter() {
            let key = push_text(&mut buf, k);
            let value = push_text(&mut buf, v);
            index.push(Span { key, value });
        }
        *self = Properties {
            buf,
            index: OnceLock::from(index),
        };
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    pub fn len(&self) -> usize {
        self.index().spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index().spans.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.index()
            .spans
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
        Self::parse_joined(s, "")
    }

    /// Parses `head` followed by `tail`, both properties strings, as one: a key of `tail` replaces
    /// the same key of `head` in its place, as [`Properties::insert`] would. A consumer appends
    /// MIN_OFFSET and MAX_OFFSET to every pulled message this way, formatted once per pull.
    pub fn parse_joined(head: &str, tail: &str) -> Properties {
        let mut buf = String::with_capacity(head.len() + 1 + tail.len() + PARSE_SPARE_BYTES);
        buf.push_str(head);
        if !tail.is_empty() && !head.is_empty() && !head.ends_with(PROPERTY_SEPARATOR) {
            buf.push(PROPERTY_SEPARATOR);
        }
        buf.push_str(tail);
        Properties {
            buf,
            index: OnceLock::new(),
        }
    }

    /// Parses the raw PROPERTIES area of a record. Fails only if the bytes are not UTF-8.
    pub fn parse_bytes(bytes: &[u8]) -> Result<Properties, ProtocolError> {
        Self::parse_bytes_joined(bytes, "")
    }

    /// [`Properties::parse_joined`] of a raw PROPERTIES area and `tail`. Fails only if the bytes
    /// are not UTF-8.
    pub fn parse_bytes_joined(bytes: &[u8], tail: &str) -> Result<Properties, ProtocolError> {
        let s = std::str::from_utf8(bytes)
            .map_err(|e| ProtocolError::Message(format!("properties are not valid UTF-8: {e}")))?;
        Ok(Properties::parse_joined(s, tail))
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
        let index = self.index();
        index.live + 2 * index.spans.len()
    }

    /// Drops every key that must never be stored (those starting with
    /// [`keys::TRANSIENT_PREFIX`]).
    pub fn remove_transient(&mut self) {
        let (buf, index) = self.parts_mut();
        let before = index.spans.len();
        let mut dropped = 0;
        index.spans.retain(|s| {
            let keep = !buf
                .get(s.key.0..s.key.1)
                .unwrap_or_default()
                .starts_with(keys::TRANSIENT_PREFIX);
            if !keep {
                dropped += s.len();
            }
            keep
        });
        let changed = index.spans.len() != before;
        index.live -= dropped;
        if changed {
            self.compact_if_sparse();
        }
    }
}

impl PartialEq for Properties {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
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

/// The value of `key` in a raw properties area, without building a [`Properties`] (a query
/// checks the keys of each record it finds); [`find_properties`] of one key.
pub fn find_property<'a>(raw: &'a [u8], key: &str) -> Option<&'a str> {
    let [value] = find_properties(raw, [key]);
    value
}

/// The values of several keys in a raw properties area, in one pass (the store's dispatch reads
/// TAGS, UNIQ_KEY and KEYS of every record; a [`find_property`] each scanned the area three
/// times). Same rules as [`Properties::parse`] for each key: the last duplicate wins; `None` if
/// absent or not UTF-8.
pub fn find_properties<'a, const N: usize>(raw: &'a [u8], keys: [&str; N]) -> [Option<&'a str>; N] {
    let mut found: [Option<&'a [u8]>; N] = [None; N];
    for (k, v) in pairs(raw) {
        if let Some(i) = keys.iter().position(|key| key.as_bytes() == k) {
            found[i] = Some(v);
        }
    }
    found.map(|v| v.and_then(|v| std::str::from_utf8(v).ok()))
}

/// The key/value pairs Java keeps: segments split on 0x02, each split at its first 0x01, with
/// both halves non-empty.
fn pairs(raw: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    pair_ranges(raw).map(|(k, v)| (&raw[k.0..k.1], &raw[v.0..v.1]))
}

/// [`pairs`] as byte ranges of `raw`: `(key, value)`, each `(start, end)`, in one pass over the
/// separators [`separators`] finds.
fn pair_ranges(raw: &[u8]) -> impl Iterator<Item = ((usize, usize), (usize, usize))> + '_ {
    let mut separators = separators(raw);
    // Start of the current segment, and its first name/value separator once seen.
    let mut start = 0;
    let mut name_end: Option<usize> = None;
    let mut done = false;
    std::iter::from_fn(move || {
        while !done {
            let end = match separators.next() {
                Some((pos, NAME_VALUE_SEPARATOR_BYTE)) => {
                    name_end.get_or_insert(pos);
                    continue;
                }
                Some((pos, _)) => pos,
                None => {
                    done = true;
                    raw.len()
                }
            };
            let segment_start = std::mem::replace(&mut start, end + 1);
            if let Some(sep) = name_end.take() {
                let key = (segment_start, sep);
                let value = (sep + 1, end);
                if key.1 > key.0 && value.1 > value.0 {
                    return Some((key, value));
                }
            }
        }
        None
    })
}

/// Word of `0x01` bytes, for the below-3 test of [`separators`].
const LOW_BYTES: u64 = u64::from_ne_bytes([0x01; 8]);
/// Word of `0x80` bytes.
const HIGH_BITS: u64 = u64::from_ne_bytes([0x80; 8]);

/// Positions and values of the 0x01 and 0x02 bytes of `raw`, eight bytes at a time.
///
/// A properties area is about 110 bytes with a separator every 7 on average; `memchr` pays a
/// call's set-up per separator (twelve calls were a tenth of a pulled message's decode). A word
/// with any byte below 3 has `(w - 0x0303..) & !w & 0x8080..` non-zero, and its lowest set bit
/// marks the first such byte exactly (a borrow only moves towards higher bytes, so bits above
/// the first hit may be false and the scan restarts right after it).
fn separators(raw: &[u8]) -> impl Iterator<Item = (usize, u8)> + '_ {
    let mut pos = 0;
    std::iter::from_fn(move || {
        while let Some(word) = raw.get(pos..pos + 8) {
            let word = u64::from_le_bytes(word.try_into().unwrap_or([0xff; 8]));
            let below_three = word.wrapping_sub(LOW_BYTES * 3) & !word & HIGH_BITS;
            if below_three == 0 {
                pos += 8;
                continue;
            }
            let at = pos + (below_three.trailing_zeros() / 8) as usize;
            pos = at + 1;
            match raw[at] {
                sep @ (NAME_VALUE_SEPARATOR_BYTE | PROPERTY_SEPARATOR_BYTE) => {
                    return Some((at, sep));
                }
                _ => continue,
            }
        }
        while let Some(&byte) = raw.get(pos) {
            pos += 1;
            if byte == NAME_VALUE_SEPARATOR_BYTE || byte == PROPERTY_SEPARATOR_BYTE {
                return Some((pos - 1, byte));
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
        fn parse_matches_javas_rules(s in "[AB\u{0}\u{1}\u{2}\u{3}é]{0,80}") {
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
            // Present and absent keys alike, against the model.
            let keys = ["A", "B", "é", "AB"];
            let found = find_properties(s.as_bytes(), keys);
            for (key, value) in keys.iter().zip(found) {
                let expected = model.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
                proptest::prop_assert_eq!(value, expected);
            }
        }
    }

    proptest::proptest! {
        /// The word-at-a-time scan finds exactly the 0x01 and 0x02 bytes, whatever surrounds them.
        #[test]
        fn separators_match_a_byte_scan(raw in proptest::collection::vec(
            proptest::sample::select(vec![0u8, 1, 2, 3, 0x41, 0x7f, 0x80, 0x81, 0x82, 0x83, 0xff]),
            0..80,
        )) {
            let expected: Vec<(usize, u8)> = raw
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == 1 || **b == 2)
                .map(|(i, b)| (i, *b))
                .collect();
            proptest::prop_assert_eq!(separators(&raw).collect::<Vec<_>>(), expected);
        }
    }

    proptest::proptest! {
        /// Parsing two strings joined reads like parsing the first and inserting the pairs of
        /// the second (how a consumer adds MIN_OFFSET and MAX_OFFSET).
        #[test]
        fn parse_joined_matches_parse_then_insert(
            head in "[AB\u{1}\u{2}é]{0,30}",
            tail in "[AC\u{1}\u{2}]{0,20}",
        ) {
            let mut model = Properties::parse(&head);
            for (k, v) in Properties::parse(&tail).iter() {
                model.insert(k, v);
            }
            let joined = Properties::parse_joined(&head, &tail);
            proptest::prop_assert_eq!(
                joined.iter().collect::<Vec<_>>(),
                model.iter().collect::<Vec<_>>()
            );
            proptest::prop_assert_eq!(joined.encoded_len(), joined.encode().len());
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
                    props.buf.len() <= 2 * props.index().live + COMPACT_SLACK + 64,
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

    /// Edits of a parsed string before anything reads it build the entries first, so they act
    /// on the parsed entries (duplicates resolved, malformed segments dropped), not on raw text.
    #[test]
    fn edits_before_the_first_read_see_the_parsed_entries() {
        let raw = "a\u{1}1\u{2}junk\u{2}__RMQ.TRANSIENT.x\u{1}y\u{2}a\u{1}2\u{2}b\u{1}3";
        let mut removed = Properties::parse(raw);
        assert_eq!(removed.remove("a").as_deref(), Some("2"));
        assert_eq!(
            removed.iter().collect::<Vec<_>>(),
            vec![("__RMQ.TRANSIENT.x", "y"), ("b", "3")]
        );
        let mut inserted = Properties::parse(raw);
        inserted.insert("b", "4");
        assert_eq!(
            inserted.encode(),
            "a\u{1}2\u{2}__RMQ.TRANSIENT.x\u{1}y\u{2}b\u{1}4\u{2}"
        );
        let mut transient = Properties::parse(raw);
        transient.remove_transient();
        assert_eq!(transient.encode(), "a\u{1}2\u{2}b\u{1}3\u{2}");
        assert_eq!(transient.encoded_len(), transient.encode().len());
    }
}
