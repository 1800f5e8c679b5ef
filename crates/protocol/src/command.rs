//! `RemotingCommand`: the one message type of the remoting protocol.
//!
//! Requests and responses share the same shape (code, language, version, opaque, flag, remark,
//! extFields, body); the RESPONSE bit of `flag` tells them apart and `opaque` pairs them. The header
//! is serialized by one of two codecs chosen per frame (see [`crate::header`]); the body is opaque
//! bytes. Ext fields keep their insertion order so that a decoded frame re-encodes to the same bytes.

use bytes::Bytes;

/// Bit 0 of `flag`: this command is a response.
pub const FLAG_RESPONSE: i32 = 0x1;
/// Bit 1 of `flag`: the sender expects no response.
pub const FLAG_ONEWAY: i32 = 0x2;

/// The version ordinal Comet announces (`MQVersion.V5_3_3`); Java clients gate features on it.
pub const COMET_VERSION: i32 = 479;

/// How a command's header is serialized (the high byte of the frame's second int).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SerializeType {
    #[default]
    Json,
    RocketMq,
}

impl SerializeType {
    pub const fn code(self) -> u8 {
        match self {
            SerializeType::Json => 0,
            SerializeType::RocketMq => 1,
        }
    }

    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(SerializeType::Json),
            1 => Some(SerializeType::RocketMq),
            _ => None,
        }
    }
}

/// `LanguageCode` of the sender. Unknown bytes/names are kept so nothing is lost on re-encode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LanguageCode {
    Java,
    Cpp,
    Dotnet,
    Python,
    Delphi,
    Erlang,
    Ruby,
    Other,
    Http,
    Go,
    Php,
    Oms,
    #[default]
    Rust,
    NodeJs,
    /// A byte this build does not know (Java decodes it to null).
    Unknown(u8),
}

const LANGUAGES: [(LanguageCode, &str); 14] = [
    (LanguageCode::Java, "JAVA"),
    (LanguageCode::Cpp, "CPP"),
    (LanguageCode::Dotnet, "DOTNET"),
    (LanguageCode::Python, "PYTHON"),
    (LanguageCode::Delphi, "DELPHI"),
    (LanguageCode::Erlang, "ERLANG"),
    (LanguageCode::Ruby, "RUBY"),
    (LanguageCode::Other, "OTHER"),
    (LanguageCode::Http, "HTTP"),
    (LanguageCode::Go, "GO"),
    (LanguageCode::Php, "PHP"),
    (LanguageCode::Oms, "OMS"),
    (LanguageCode::Rust, "RUST"),
    (LanguageCode::NodeJs, "NODE_JS"),
];

impl LanguageCode {
    pub fn code(self) -> u8 {
        match self {
            LanguageCode::Unknown(b) => b,
            known => LANGUAGES.iter().position(|(l, _)| *l == known).unwrap_or(7) as u8,
        }
    }

    pub fn from_code(code: u8) -> Self {
        LANGUAGES
            .get(code as usize)
            .map(|(l, _)| *l)
            .unwrap_or(LanguageCode::Unknown(code))
    }

    /// The enum name used by the JSON codec. Unknown languages are written as `OTHER`.
    pub fn name(self) -> &'static str {
        LANGUAGES
            .iter()
            .find(|(l, _)| *l == self)
            .map(|(_, n)| *n)
            .unwrap_or("OTHER")
    }

    pub fn from_name(name: &str) -> Self {
        LANGUAGES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(l, _)| *l)
            .unwrap_or(LanguageCode::Other)
    }
}

/// The `extFields` map: string keys to string values, in insertion order.
///
/// Real headers hold a handful of fields, so linear lookup beats hashing, and insertion order is
/// kept so that a decoded frame re-encodes to the same bytes (the golden-vector tests rely on it).
/// All keys and values live in one string arena with spans into it: decoding a 13-field header
/// costs two allocations instead of twenty-six. Inserting an existing key replaces its value in
/// place ("last value wins", as the ROCKETMQ codec requires); the old bytes stay in the arena until
/// the map is dropped, which is bounded by the header it came from.
///
/// An insert must first look for its key, and a typed header writes ten to twenty keys into a
/// fresh map (a scan of every earlier field each: ~100 comparisons for SEND_MESSAGE_V2). The map
/// therefore keeps a one-word Bloom filter of its keys ([`key_bit`]): a key whose bit is clear is
/// certainly new and is appended without the scan. Removal leaves bits set, which only costs a
/// later insert its scan.
#[derive(Clone, Default)]
pub struct ExtFields {
    arena: String,
    /// (key start, key end, value start, value end) into `arena`.
    spans: Vec<[u32; 4]>,
    /// The [`key_bit`]s of every key ever added (a superset of the present keys' bits).
    seen: u64,
}

/// A key's bit in [`ExtFields`]' filter: from its length and its first and last bytes, which tell
/// apart the one-letter keys of SEND_MESSAGE_V2 and most named ones.
fn key_bit(key: &str) -> u64 {
    let bytes = key.as_bytes();
    let first = u64::from(bytes.first().copied().unwrap_or(0));
    let last = u64::from(bytes.last().copied().unwrap_or(0));
    let h = (bytes.len() as u64)
        .wrapping_mul(0x9E37_79B9)
        .wrapping_add(first.wrapping_mul(31))
        .wrapping_add(last.wrapping_mul(7));
    1 << (h % 64)
}

/// Fields a request or response header usually has (SEND_MESSAGE_V2 has 14 plus the RPC ones):
/// the first encode then allocates once instead of growing its arena field by field.
const TYPICAL_HEADER_FIELDS: usize = 16;

impl ExtFields {
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty map with room for `n` fields of typical size.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            arena: String::with_capacity(n * 24),
            spans: Vec::with_capacity(n),
            seen: 0,
        }
    }

    fn slice(&self, from: u32, to: u32) -> &str {
        self.arena
            .get(from as usize..to as usize)
            .unwrap_or_default()
    }

    fn key_at(&self, span: &[u32; 4]) -> &str {
        self.slice(span[0], span[1])
    }

    fn value_at(&self, span: &[u32; 4]) -> &str {
        self.slice(span[2], span[3])
    }

    /// The index of `key`'s span. Keys are compared as bytes with the cheap checks first: header
    /// keys are short and often one letter (SEND_MESSAGE_V2's `a`..`n`), so the span's length and
    /// first byte settle almost every mismatch without slicing the arena (a `str` slice checks
    /// both ends for char boundaries) or calling `memcmp`. This runs for every field of every
    /// header: once per lookup, and once per insert to find a repeated key.
    fn find(&self, key: &str) -> Option<usize> {
        if self.seen & key_bit(key) == 0 {
            return None;
        }
        let key = key.as_bytes();
        let arena = self.arena.as_bytes();
        self.spans.iter().position(|sp| {
            let (from, to) = (sp[0] as usize, sp[1] as usize);
            to.wrapping_sub(from) == key.len()
                && (key.is_empty() || arena.get(from) == key.first())
                && arena.get(from..to) == Some(key)
        })
    }

    fn push_str(&mut self, s: &str) -> (u32, u32) {
        let from = self.arena.len();
        self.arena.push_str(s);
        // Frames are at most 16 MiB, so offsets always fit u32; saturate rather than wrap.
        let to = self.arena.len();
        (
            u32::try_from(from).unwrap_or(u32::MAX),
            u32::try_from(to).unwrap_or(u32::MAX),
        )
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        let idx = self.find(key)?;
        self.spans.get(idx).map(|sp| self.value_at(sp))
    }

    pub fn insert(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) {
        let value = value.as_ref();
        self.insert_with(key.as_ref(), |arena| arena.push_str(value));
    }

    /// Like [`ExtFields::insert`], with the value written by `write` straight into the arena
    /// (typed headers format numbers this way, without a `String` per field).
    pub fn insert_with(&mut self, key: &str, write: impl FnOnce(&mut String)) {
        match self.find(key) {
            Some(idx) => {
                let (vs, ve) = self.write_value(write);
                if let Some(sp) = self.spans.get_mut(idx) {
                    sp[2] = vs;
                    sp[3] = ve;
                }
            }
            None => self.push_new_with(key, write),
        }
    }

    /// Appends a key that is not in the map.
    fn push_new_with(&mut self, key: &str, write: impl FnOnce(&mut String)) {
        debug_assert!(
            self.find(key).is_none(),
            "push_new_with of a present key {key:?}"
        );
        self.seen |= key_bit(key);
        let (ks, ke) = self.push_str(key);
        let (vs, ve) = self.write_value(write);
        self.spans.push([ks, ke, vs, ve]);
    }

    /// Appends a value to the arena with `write` and returns its span.
    fn write_value(&mut self, write: impl FnOnce(&mut String)) -> (u32, u32) {
        let start = self.arena.len();
        write(&mut self.arena);
        // Frames are at most 16 MiB, so offsets always fit u32; saturate rather than wrap.
        (
            u32::try_from(start).unwrap_or(u32::MAX),
            u32::try_from(self.arena.len()).unwrap_or(u32::MAX),
        )
    }

    pub fn remove(&mut self, key: &str) -> Option<String> {
        let idx = self.find(key)?;
        let sp = self.spans.remove(idx);
        Some(self.value_at(&sp).to_owned())
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
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
            .map(|sp| (self.key_at(sp), self.value_at(sp)))
    }
}

impl PartialEq for ExtFields {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for ExtFields {}

impl std::fmt::Debug for ExtFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut ext = ExtFields::new();
        for (k, v) in iter {
            ext.insert(k, v);
        }
        ext
    }
}

/// One request or response of the remoting protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotingCommand {
    pub code: i32,
    pub language: LanguageCode,
    pub version: i32,
    pub opaque: i32,
    pub flag: i32,
    pub remark: Option<String>,
    /// `None` when the header carried no `extFields` at all (JSON key absent / binary length 0).
    pub ext_fields: Option<ExtFields>,
    pub body: Option<Bytes>,
    /// More body bytes after `body`, each kept in its own buffer: the frame's body is `body`
    /// followed by every part. A pull response's records are zero-copy slices of the mapped
    /// CommitLog; as parts, the transport hands them to the socket with one vectored write
    /// instead of copying them into one buffer first. Always empty on a decoded command (the
    /// whole body is then `body`); [`RemotingCommand::body_bytes`] joins both.
    pub body_parts: Vec<Bytes>,
    /// The codec this command was decoded with, or will be encoded with.
    pub serialize_type: SerializeType,
    /// Not on the wire: a response the transport may write only once a condition holds (see
    /// [`ResponseHold`]). Always `None` on a decoded command.
    pub hold: Option<ResponseHold>,
}

/// A condition on writing a response, for answers that claim something not yet true when the
/// processor returns them. The broker answers a SYNC_FLUSH send with `until` = the end of its
/// record in the CommitLog: the server connection writes the answer once its fence reports the
/// CommitLog flushed that far (`comet_remoting::ResponseFence::released`), so the send needs no
/// task of its own that waits for the flush, and every answer a group commit releases leaves in
/// one write. An answer still held after the fence's hold timeout leaves with `expired_code`
/// instead of its own code (FLUSH_DISK_TIMEOUT), its header otherwise unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseHold {
    /// Position the fence must have released.
    pub until: u64,
    /// Code answered instead when the hold times out.
    pub expired_code: i32,
}

impl Default for RemotingCommand {
    fn default() -> Self {
        Self {
            code: 0,
            language: LanguageCode::Rust,
            version: COMET_VERSION,
            opaque: 0,
            flag: 0,
            remark: None,
            ext_fields: None,
            body: None,
            body_parts: Vec::new(),
            serialize_type: SerializeType::Json,
            hold: None,
        }
    }
}

impl RemotingCommand {
    /// A request with the given code and no fields. The transport assigns the opaque.
    pub fn request(code: impl Into<i32>) -> Self {
        Self {
            code: code.into(),
            ..Self::default()
        }
    }

    /// A response with the given code and remark. The transport copies the request's opaque.
    pub fn response(code: impl Into<i32>, remark: Option<String>) -> Self {
        Self {
            code: code.into(),
            flag: FLAG_RESPONSE,
            remark,
            ..Self::default()
        }
    }

    /// A response answering `request`: same opaque and serialize type.
    pub fn response_to(
        request: &RemotingCommand,
        code: impl Into<i32>,
        remark: Option<String>,
    ) -> Self {
        let mut rsp = Self::response(code, remark);
        rsp.opaque = request.opaque;
        rsp.serialize_type = request.serialize_type;
        rsp
    }

    pub fn with_ext_fields(mut self, ext: ExtFields) -> Self {
        self.ext_fields = Some(ext);
        self
    }

    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        let body = body.into();
        self.body = if body.is_empty() { None } else { Some(body) };
        self
    }

    pub fn with_remark(mut self, remark: impl Into<String>) -> Self {
        self.remark = Some(remark.into());
        self
    }

    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    pub fn mark_response(&mut self) {
        self.flag |= FLAG_RESPONSE;
    }

    pub fn mark_oneway(&mut self) {
        self.flag |= FLAG_ONEWAY;
    }

    /// The value of an ext field, if present.
    pub fn ext(&self, key: &str) -> Option<&str> {
        self.ext_fields.as_ref().and_then(|e| e.get(key))
    }

    /// The ext field map, created empty on first use.
    pub fn ext_mut(&mut self) -> &mut ExtFields {
        self.ext_fields
            .get_or_insert_with(|| ExtFields::with_capacity(TYPICAL_HEADER_FIELDS))
    }

    /// Bytes of the frame's body: `body` and every part.
    pub fn body_len(&self) -> usize {
        self.body.as_ref().map_or(0, Bytes::len)
            + self.body_parts.iter().map(Bytes::len).sum::<usize>()
    }

    /// The whole body as one buffer: `body` itself when there are no parts (no copy), else
    /// `body` and the parts copied together. `None` when the body is empty.
    pub fn body_bytes(&self) -> Option<Bytes> {
        if self.body_parts.is_empty() {
            return self.body.clone();
        }
        let mut joined = bytes::BytesMut::with_capacity(self.body_len());
        for part in self.body.iter().chain(&self.body_parts) {
            joined.extend_from_slice(part);
        }
        Some(joined.freeze())
    }
}

#[cfg(test)]
mod ext_fields_tests {
    use super::ExtFields;
    use proptest::prelude::*;

    /// What `ExtFields` must behave like: an insertion-ordered list of pairs where inserting an
    /// existing key replaces its value in place.
    #[derive(Default)]
    struct Model(Vec<(String, String)>);

    impl Model {
        fn insert(&mut self, k: &str, v: &str) {
            match self.0.iter_mut().find(|(key, _)| key == k) {
                Some(pair) => pair.1 = v.to_owned(),
                None => self.0.push((k.to_owned(), v.to_owned())),
            }
        }

        fn remove(&mut self, k: &str) -> Option<String> {
            let idx = self.0.iter().position(|(key, _)| key == k)?;
            Some(self.0.remove(idx).1)
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(String, String),
        Remove(String),
    }

    // Keys from a small alphabet with empty, one-letter, shared-first-byte and multi-byte keys,
    // so that repeats, equal lengths and equal first bytes all happen often.
    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            "[a-c]",
            "[a-c]{2}",
            Just("é".to_owned()),
            Just("\u{e9}x".to_owned()),
            Just("ns".to_owned()),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (key(), ".{0,6}").prop_map(|(k, v)| Op::Insert(k, v)),
            1 => key().prop_map(Op::Remove),
        ]
    }

    proptest! {
        #[test]
        fn behaves_like_an_ordered_list_where_the_last_value_wins(
            ops in proptest::collection::vec(op(), 0..40),
            probes in proptest::collection::vec(key(), 0..8),
        ) {
            let mut ext = ExtFields::new();
            let mut model = Model::default();
            for op in &ops {
                match op {
                    Op::Insert(k, v) => {
                        ext.insert(k, v);
                        model.insert(k, v);
                    }
                    Op::Remove(k) => prop_assert_eq!(ext.remove(k), model.remove(k)),
                }
            }
            let pairs: Vec<(&str, &str)> = ext.iter().collect();
            let expected: Vec<(&str, &str)> =
                model.0.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            prop_assert_eq!(pairs, expected);
            for k in probes.iter().chain(ops.iter().map(|op| match op {
                Op::Insert(k, _) | Op::Remove(k) => k,
            })) {
                let want = model.0.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
                prop_assert_eq!(ext.get(k), want);
                prop_assert_eq!(ext.contains_key(k), want.is_some());
            }
        }
    }

    #[test]
    fn keys_sharing_a_filter_bit_are_told_apart() {
        // Same length, first and last byte: the same bit in the map's filter.
        assert_eq!(super::key_bit("abc"), super::key_bit("axc"));
        let mut ext = ExtFields::new();
        ext.insert("abc", "1");
        ext.insert("axc", "2");
        ext.insert("abc", "3");
        assert_eq!(ext.iter().collect::<Vec<_>>(), [("abc", "3"), ("axc", "2")]);
        assert_eq!(ext.remove("abc").as_deref(), Some("3"));
        assert_eq!(ext.get("abc"), None);
        // A removed key's bit stays set: inserting it again still finds no old copy.
        ext.insert("abc", "4");
        let mut copy = ext.clone();
        copy.insert("axc", "5");
        assert_eq!(
            copy.iter().collect::<Vec<_>>(),
            [("axc", "5"), ("abc", "4")]
        );
        assert_eq!(ext.get("axc"), Some("2"));
    }

    #[test]
    fn keys_differing_only_after_the_first_byte_are_distinct() {
        let mut ext = ExtFields::new();
        ext.insert("ab", "1");
        ext.insert("ac", "2");
        ext.insert("a", "3");
        ext.insert("", "4");
        assert_eq!(ext.get("ab"), Some("1"));
        assert_eq!(ext.get("ac"), Some("2"));
        assert_eq!(ext.get("a"), Some("3"));
        assert_eq!(ext.get(""), Some("4"));
        assert_eq!(ext.get("ad"), None);
        assert_eq!(ext.get("b"), None);
        assert_eq!(ext.len(), 4);
    }
}
