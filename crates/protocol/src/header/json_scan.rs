//! Single-pass decoder for the JSON headers real clients send — the fast path of
//! [`super::json::decode`].
//!
//! Every request and response on a JSON connection carries one of these headers, and going
//! through `serde_json` (a generic visitor, an `Option` per field, an owned `String` per escaped
//! value) cost ~9,000 instructions for a SEND_MESSAGE_V2 header: as much as everything else the
//! client does per send. Headers are flat and their shape is fixed (Java's fastjson writes
//! `code`, `extFields`, `flag`, `language`, `opaque`, `remark`, `serializeTypeCurrentRPC`,
//! `version`; Go and Rust clients a subset), so this scanner reads exactly that shape straight
//! into [`ExtFields`].
//!
//! It never decides anything on its own: whatever it does not fully understand (an unknown or
//! repeated top-level key, a non-integer number, a nested value inside `extFields`, invalid
//! UTF-8, trailing bytes, too many fields, a missing `code`) makes it return `None`, and the
//! caller decodes the same bytes with `serde_json`, which accepts or rejects them with its own
//! error. So the two paths cannot disagree on anything but speed (a differential test checks
//! this on every golden frame and on random headers).

use crate::command::{ExtFields, LanguageCode, RemotingCommand, SerializeType};
use crate::limits::MAX_EXT_FIELDS;

/// Decodes `src` if it is a header of the plain shape described in the module docs.
pub(crate) fn decode(src: &[u8]) -> Option<RemotingCommand> {
    // One UTF-8 check for the whole header: every string is then cut at ASCII quotes.
    let text = std::str::from_utf8(src).ok()?;
    let mut s = Scanner {
        text,
        bytes: src,
        pos: 0,
        scratch: String::new(),
    };
    // What serde's path yields for absent keys: language OTHER, numbers 0.
    let mut cmd = RemotingCommand {
        language: LanguageCode::Other,
        version: 0,
        serialize_type: SerializeType::Json,
        ..RemotingCommand::default()
    };
    // Bit per known key, to send a repeated key to serde (which rejects it).
    let mut seen = 0u8;
    s.expect(b'{')?;
    if !s.eat(b'}') {
        loop {
            let key = s.key()?;
            s.expect(b':')?;
            let bit = match key {
                Key::Code => {
                    cmd.code = s.int()?;
                    1
                }
                Key::Language => {
                    if let Some(name) = s.nullable_string()? {
                        cmd.language = LanguageCode::from_name(s.get(name));
                    }
                    2
                }
                Key::Version => {
                    cmd.version = s.int()?;
                    4
                }
                Key::Opaque => {
                    cmd.opaque = s.int()?;
                    8
                }
                Key::Flag => {
                    cmd.flag = s.int()?;
                    16
                }
                Key::Remark => {
                    cmd.remark = s.nullable_string()?.map(|r| s.get(r).to_owned());
                    32
                }
                Key::ExtFields => {
                    cmd.ext_fields = s.ext_fields()?;
                    64
                }
                Key::SerializeType => {
                    s.nullable_string()?;
                    128
                }
            };
            if seen & bit != 0 {
                return None;
            }
            seen |= bit;
            if s.eat(b',') {
                continue;
            }
            s.expect(b'}')?;
            break;
        }
    }
    s.skip_ws();
    // `code` is required: let serde report its absence.
    (s.pos == s.bytes.len() && seen & 1 != 0).then_some(cmd)
}

/// Index of the first byte that ends a run of plain string content: a quote, a backslash or a
/// control character. Eight bytes per step (SWAR): strings are most of a header's bytes, and a
/// byte-at-a-time loop over them was the largest cost left in decoding one.
pub(crate) fn find_special(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut chunks = bytes.chunks_exact(8);
    let mut base = 0;
    for chunk in chunks.by_ref() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        // A byte of `x` is zero → its high bit in `(x - ONES) & !x & HIGH`; bytes >= 0x80 never
        // match. Only the lowest flagged byte is exact (borrows can flag bytes above it), and it is
        // the only one used.
        let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
        let quote = zero(w ^ (ONES * u64::from(b'"')));
        let backslash = zero(w ^ (ONES * u64::from(b'\\')));
        let control = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
        let hits = quote | backslash | control;
        if hits != 0 {
            return Some(base + (hits.trailing_zeros() / 8) as usize);
        }
        base += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|i| base + i)
}

/// The top-level keys this scanner reads.
enum Key {
    Code,
    Language,
    Version,
    Opaque,
    Flag,
    Remark,
    ExtFields,
    SerializeType,
}

/// A decoded string: a range of the input, or the scanner's scratch buffer (had escapes).
#[derive(Clone, Copy)]
enum Str {
    Input(usize, usize),
    Scratch,
}

impl Str {
    /// Only for [`Str::Input`]; a scratch string is read with [`Scanner::get`].
    fn as_str(self, text: &str) -> &str {
        match self {
            Str::Input(a, b) => text.get(a..b).unwrap_or_default(),
            Str::Scratch => "",
        }
    }
}

struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Unescaped text of the last string that had escapes.
    scratch: String,
}

impl<'a> Scanner<'a> {
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    /// Skips whitespace; consumes `b` if it is next.
    fn eat(&mut self, b: u8) -> bool {
        self.skip_ws();
        if self.bytes.get(self.pos) == Some(&b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, b: u8) -> Option<()> {
        self.eat(b).then_some(())
    }

    fn get(&self, s: Str) -> &str {
        match s {
            Str::Input(..) => s.as_str(self.text),
            Str::Scratch => &self.scratch,
        }
    }

    fn key(&mut self) -> Option<Key> {
        let k = self.string()?;
        Some(match self.get(k) {
            "code" => Key::Code,
            "language" => Key::Language,
            "version" => Key::Version,
            "opaque" => Key::Opaque,
            "flag" => Key::Flag,
            "remark" => Key::Remark,
            "extFields" => Key::ExtFields,
            "serializeTypeCurrentRPC" => Key::SerializeType,
            _ => return None,
        })
    }

    /// `null` (consumed, `true`) or not (nothing consumed).
    fn null(&mut self) -> bool {
        self.skip_ws();
        if self.bytes.get(self.pos..self.pos + 4) == Some(b"null") {
            self.pos += 4;
            true
        } else {
            false
        }
    }

    fn nullable_string(&mut self) -> Option<Option<Str>> {
        if self.null() {
            return Some(None);
        }
        self.string().map(Some)
    }

    /// An integer that fits i32 (what serde's `Option<i32>` accepts, minus exotic spellings).
    fn int(&mut self) -> Option<i32> {
        let (a, b) = self.integer_literal()?;
        self.text.get(a..b)?.parse().ok()
    }

    /// The range of a JSON integer literal: `-?(0|[1-9][0-9]*)`, not followed by a fraction or
    /// an exponent (those go to serde).
    fn integer_literal(&mut self) -> Option<(usize, usize)> {
        self.skip_ws();
        let start = self.pos;
        if self.bytes.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        let digits = self.pos;
        while let Some(b'0'..=b'9') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
        let len = self.pos - digits;
        let leading_zero = len > 1 && self.bytes.get(digits) == Some(&b'0');
        let after = self.bytes.get(self.pos).copied();
        if len == 0 || leading_zero || matches!(after, Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some((start, self.pos))
    }

    /// A string literal (the opening quote is next, after whitespace).
    fn string(&mut self) -> Option<Str> {
        self.expect(b'"')?;
        let start = self.pos;
        // One tight pass to the first quote, backslash or control character.
        let stop = find_special(self.bytes.get(start..)?)?;
        self.pos = start + stop;
        match *self.bytes.get(self.pos)? {
            b'"' => {
                self.pos += 1;
                return Some(Str::Input(start, start + stop));
            }
            b'\\' => {}
            _ => return None,
        }
        // Escapes: unescape into the scratch buffer from here on.
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        scratch.push_str(self.text.get(start..self.pos)?);
        let done = self.unescape_rest(&mut scratch);
        self.scratch = scratch;
        done.map(|()| Str::Scratch)
    }

    /// Appends the string literal next (after whitespace) to `out`, unescaped: header values
    /// are written straight into the [`ExtFields`] arena this way, with no scratch copy.
    fn string_into(&mut self, out: &mut String) -> Option<()> {
        self.expect(b'"')?;
        self.unescape_rest(out)
    }

    /// From the cursor, inside a string literal, appends its unescaped content to `out` and
    /// consumes the closing quote.
    fn unescape_rest(&mut self, out: &mut String) -> Option<()> {
        loop {
            let run = self.pos;
            self.pos += find_special(self.bytes.get(run..)?)?;
            out.push_str(self.text.get(run..self.pos)?);
            match *self.bytes.get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    return Some(());
                }
                b'\\' => {
                    self.pos += 1;
                    let c = match *self.bytes.get(self.pos)? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            self.pos += 1;
                            let hi = self.hex4()?;
                            let c = match hi {
                                0xD800..=0xDBFF => {
                                    // A surrogate pair: `\uD83D\uDE00`.
                                    if self.bytes.get(self.pos..self.pos + 2) != Some(b"\\u") {
                                        return None;
                                    }
                                    self.pos += 2;
                                    let lo = self.hex4()?;
                                    if !(0xDC00..=0xDFFF).contains(&lo) {
                                        return None;
                                    }
                                    char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?
                                }
                                _ => char::from_u32(hi)?,
                            };
                            out.push(c);
                            continue;
                        }
                        _ => return None,
                    };
                    self.pos += 1;
                    out.push(c);
                }
                _ => return None,
            }
        }
    }

    /// Four hex digits after `\u` (either case, nothing else: no sign, as JSON says).
    /// Decoded by hand: message properties travel as one header value whose separators (\u0001,
    /// \u0002) are escaped, so a send's header has about two of these per property.
    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes.get(self.pos..self.pos + 4)?;
        let mut v = 0u32;
        for &d in digits {
            let nibble = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return None,
            };
            v = (v << 4) | u32::from(nibble);
        }
        self.pos += 4;
        Some(v)
    }

    /// `null` or an object of string keys to string, integer, boolean or null values.
    fn ext_fields(&mut self) -> Option<Option<ExtFields>> {
        if self.null() {
            return Some(None);
        }
        self.expect(b'{')?;
        let mut ext = ExtFields::with_capacity(16);
        if self.eat(b'}') {
            return Some(Some(ext));
        }
        let text: &'a str = self.text;
        // Only a key with escapes is copied out of the scratch buffer (its value may need it).
        let mut escaped_key = String::new();
        loop {
            if ext.len() >= MAX_EXT_FIELDS {
                return None;
            }
            let key: &str = match self.string()? {
                Str::Input(a, b) => text.get(a..b)?,
                Str::Scratch => {
                    escaped_key.clear();
                    escaped_key.push_str(&self.scratch);
                    &escaped_key
                }
            };
            self.expect(b':')?;
            self.skip_ws();
            match *self.bytes.get(self.pos)? {
                b'"' => {
                    // Unescaped straight into the map's arena.
                    let mut ok = false;
                    // A repeated key replaces its value: last value wins, as with serde.
                    ext.insert_with(key, |arena| ok = self.string_into(arena).is_some());
                    if !ok {
                        return None;
                    }
                }
                b't' if self.bytes.get(self.pos..self.pos + 4) == Some(b"true") => {
                    self.pos += 4;
                    ext.insert_with(key, |arena| arena.push_str("true"));
                }
                b'f' if self.bytes.get(self.pos..self.pos + 5) == Some(b"false") => {
                    self.pos += 5;
                    ext.insert_with(key, |arena| arena.push_str("false"));
                }
                b'n' => {
                    if !self.null() {
                        return None;
                    }
                }
                _ => {
                    let (a, b) = self.integer_literal()?;
                    let literal = self.text.get(a..b)?;
                    // serde reads the number and prints it back: only the plain spellings
                    // of i64 values keep their text ("-0" would become "0").
                    if literal == "-0" || literal.parse::<i64>().is_err() {
                        return None;
                    }
                    ext.insert_with(key, |arena| arena.push_str(literal));
                }
            }
            if self.eat(b',') {
                continue;
            }
            self.expect(b'}')?;
            return Some(Some(ext));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serde_path(src: &[u8]) -> Option<RemotingCommand> {
        super::super::json::decode_with_serde(src).ok()
    }

    /// Where the scanner answers, it must answer exactly what serde answers.
    fn agrees(src: &[u8]) {
        if let Some(fast) = decode(src) {
            assert_eq!(
                Some(fast),
                serde_path(src),
                "{:?}",
                String::from_utf8_lossy(src)
            );
        }
    }

    #[test]
    fn reads_fastjson_and_go_headers() {
        let java = br#"{"code":310,"extFields":{"a":"PG","b":"TopicTest","i":"TAGS\u0001TagA\u0002KEYS\u0001k1\u0002","e":"3","g":"1700000000000","k":"false"},"flag":0,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":479}"#;
        let cmd = decode(java).expect("plain header");
        assert_eq!(cmd.code, 310);
        assert_eq!(cmd.opaque, 42);
        assert_eq!(cmd.language, LanguageCode::Java);
        assert_eq!(cmd.ext("i"), Some("TAGS\u{1}TagA\u{2}KEYS\u{1}k1\u{2}"));
        agrees(java);
        let go = br#"{"code":0,"language":"GO","version":317,"opaque":7,"flag":1,"remark":"","extFields":{"queueOffset":"12","MSG_REGION":"DefaultRegion"}}"#;
        let cmd = decode(go).expect("plain header");
        assert_eq!(cmd.remark.as_deref(), Some(""));
        assert_eq!(cmd.ext("queueOffset"), Some("12"));
        agrees(go);
    }

    #[test]
    fn defers_to_serde_on_anything_unusual() {
        for src in [
            &br#"{"code":1,"zzz":[1]}"#[..],
            br#"{"code":1,"code":2}"#,
            br#"{"code":1.0}"#,
            br#"{"code":1e3}"#,
            br#"{"code":01}"#,
            br#"{"opaque":1}"#,
            br#"{"code":1} x"#,
            br#"{"code":1,"extFields":{"a":{"b":1}}}"#,
            br#"{"code":1,"extFields":{"a":1.5}}"#,
            br#"{"code":1,"extFields":{"a":-0}}"#,
            br#"{"code":1,"extFields":{"a":"\ud800"}}"#,
            br#"{"code":1,"extFields":{"a":"\x"}}"#,
            br#"{"code":1,"extFields":{"a":"\u+0e9"}}"#,
            br#"{"code":1,"extFields":{"a":"\u00g9"}}"#,
            br#"{"code":1,"extFields":{"a":"\u00e"}}"#,
            br#"{"code":1,"remark":"a
b"}"#,
            b"{\"code\":1,\"remark\":\"\xff\"}",
            br#"{"code":99999999999}"#,
        ] {
            assert!(decode(src).is_none(), "{:?}", String::from_utf8_lossy(src));
        }
    }

    #[test]
    fn agrees_with_serde_on_scalars_escapes_and_whitespace() {
        for src in [
            &br#" { "code" : -5 , "extFields" : { "n" : -12 , "t" : true , "f" : false , "z" : null , "s" : "\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00" } , "remark" : null , "language" : null } "#[..],
            br#"{"code":1,"extFields":{}}"#,
            br#"{"code":1,"extFields":{"u":"\u00E9\u00e9\uD83D\uDE00\u0001"}}"#,
            br#"{"code":1,"extFields":null}"#,
            br#"{}"#,
            br#"{"code":1,"extFields":{"a":"1","a":"2"}}"#,
            // A repeated key spelled with an escape, a value then null, escapes in both keys
            // and values around plain ones, and keys that share a Bloom bit.
            br#"{"code":1,"extFields":{"\u0061":"1","b":"x\u0002y","a":"2","\u0062":"3"}}"#,
            br#"{"code":1,"extFields":{"a":"1","a":null,"b":null}}"#,
            br#"{"code":1,"extFields":{"k\u00e9y":"v\u00e9","plain":"p","k\u00e9y":true}}"#,
            br#"{"code":1,"extFields":{"ab":"1","aab":"2","acb":"3","ab":"4"}}"#,
            br#"{"code":2147483647,"flag":-2147483648}"#,
            br#"{"code":1,"extFields":{"big":9223372036854775807}}"#,
        ] {
            agrees(src);
        }
        assert_eq!(
            decode(br#"{"code":1,"extFields":{"a":"1","a":"2"}}"#)
                .and_then(|c| c.ext("a").map(str::to_owned)),
            Some("2".to_owned())
        );
    }

    #[test]
    fn repeated_and_escaped_keys_are_answered_here_as_serde_does() {
        for src in [
            &br#"{"code":1,"extFields":{"\u0061":"1","b":"x\u0002y","a":"2","\u0062":"3"}}"#[..],
            br#"{"code":1,"extFields":{"a":"1","a":null,"b":null}}"#,
            br#"{"code":1,"extFields":{"k\u00e9y":"v\u00e9","plain":"p","k\u00e9y":true}}"#,
            br#"{"code":1,"extFields":{"ab":"1","aab":"2","acb":"3","ab":"4"}}"#,
        ] {
            let fast = decode(src);
            assert!(fast.is_some(), "{:?}", String::from_utf8_lossy(src));
            assert_eq!(fast, serde_path(src), "{:?}", String::from_utf8_lossy(src));
        }
        let ext = decode(br#"{"code":1,"extFields":{"\u0061":"1","b":"x\u0002y","a":"2"}}"#)
            .and_then(|c| c.ext_fields);
        let ext = ext.expect("ext fields");
        assert_eq!(ext.len(), 2);
        assert_eq!(ext.get("a"), Some("2"));
        assert_eq!(ext.get("b"), Some("x\u{2}y"));
    }

    #[test]
    fn find_special_matches_a_byte_loop() {
        let mut seed = 0x1234_5678_9abc_def1_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let interesting = [
            b'"', b'\\', 0x00, 0x1f, 0x20, 0x21, 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, b'a',
        ];
        for _ in 0..20_000 {
            let len = (next() % 40) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| match next() % 4 {
                    0 => interesting[(next() % interesting.len() as u64) as usize],
                    _ => b'a' + (next() % 26) as u8,
                })
                .collect();
            let expected = bytes
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20);
            assert_eq!(find_special(&bytes), expected, "{bytes:?}");
        }
    }

    /// Every JSON header captured from the real Java and Go clients and the Apache broker
    /// (`tests/fixtures`): the scanner reads each one, and reads it as serde does.
    #[test]
    fn reads_every_captured_header_as_serde_does() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut headers = 0;
        for dir in std::fs::read_dir(&root).expect("fixtures").flatten() {
            let Ok(files) = std::fs::read_dir(dir.path()) else {
                continue;
            };
            for file in files.flatten() {
                let path = file.path();
                if path.extension().and_then(|e| e.to_str()) != Some("bin") {
                    continue;
                }
                let frame = std::fs::read(&path).expect("fixture");
                let Some(mark) = frame.get(4..8) else {
                    continue;
                };
                let mark = u32::from_be_bytes([mark[0], mark[1], mark[2], mark[3]]);
                if mark >> 24 != 0 {
                    continue; // ROCKETMQ binary header
                }
                let len = (mark & 0x00FF_FFFF) as usize;
                let header = frame.get(8..8 + len).expect("header within the frame");
                let fast = decode(header)
                    .unwrap_or_else(|| panic!("{}: not read by the scanner", path.display()));
                assert_eq!(Some(fast), serde_path(header), "{}", path.display());
                headers += 1;
            }
        }
        assert!(headers >= 200, "only {headers} JSON headers found");
    }

    /// Random ext fields (any chars, control characters included) written by the fastjson-style
    /// encoder: the scanner must read them back, and agree with serde.
    #[test]
    fn reads_back_what_the_encoder_writes() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let alphabet: Vec<char> = "ab\"\\/\u{1}\u{2}\n\t\u{7f}é中😀 0".chars().collect();
        for _ in 0..500 {
            let mut cmd = RemotingCommand::request(i32::try_from(next(400)).unwrap_or(0));
            cmd.opaque = i32::try_from(next(1 << 30)).unwrap_or(0);
            for f in 0..next(12) {
                let value: String = (0..next(30))
                    .map(|_| alphabet[next(alphabet.len() as u64) as usize])
                    .collect();
                cmd.ext_mut().insert(format!("k{f}"), value);
            }
            if next(2) == 0 {
                cmd.remark = Some("re\"mark\u{1}".into());
            }
            let mut out = bytes::BytesMut::new();
            super::super::json::encode(&cmd, &mut out);
            let fast = decode(&out).expect("the encoder's output is plain");
            assert_eq!(fast.ext_fields, cmd.ext_fields);
            assert_eq!(fast.remark, cmd.remark);
            assert_eq!((fast.code, fast.opaque), (cmd.code, cmd.opaque));
            agrees(&out);
        }
    }
}
