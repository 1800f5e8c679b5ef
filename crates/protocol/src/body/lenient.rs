//! A lenient reader for the JSON that fastjson 1.2.x writes, and the entry points of the writer.
//!
//! Java peers serialize bodies with fastjson, which departs from standard JSON in two ways that
//! serde_json rejects:
//!
//! * non-string map keys are written bare: `{0:"10.0.0.1:10911"}`;
//! * object map keys are written as an object in key position:
//!   `{{"brokerName":"b","queueId":0,"topic":"t"}:5}`.
//!
//! [`normalize`] rewrites such text into standard, compact JSON: bare keys are quoted and object keys
//! become a string holding their compact JSON text. Types keyed by `MessageQueue` accept that string
//! form when deserializing, so after normalization plain serde does the rest. The reader is a small
//! recursive-descent parser bounded by [`MAX_JSON_DEPTH`]; any malformed input is a
//! [`ProtocolError::Body`], never a panic.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::json_string::write_json_string;
use crate::error::{ProtocolError, Result};

pub use super::writer::{to_fastjson, to_fastjson_bytes, to_standard_json, to_standard_json_bytes};

/// Deepest nesting of objects/arrays accepted. Real bodies nest at most five levels.
pub const MAX_JSON_DEPTH: usize = 64;

/// Rewrites fastjson text (bare keys, object keys, whitespace) into compact standard JSON.
pub fn normalize(input: &[u8]) -> Result<String> {
    let text = std::str::from_utf8(input).map_err(|e| body_err(format!("not UTF-8: {e}")))?;
    let mut parser = Parser {
        src: text,
        bytes: text.as_bytes(),
        pos: 0,
        depth: 0,
    };
    let mut out = String::with_capacity(input.len() + input.len() / 8);
    parser.skip_ws();
    parser.value(&mut out)?;
    parser.skip_ws();
    if parser.pos != parser.bytes.len() {
        return Err(parser.error("trailing characters after the JSON value"));
    }
    Ok(out)
}

/// Parses a body written by fastjson (or by any standard JSON writer) into `T`.
///
/// Standard JSON is parsed directly; only text serde_json rejects goes through [`normalize`].
pub fn from_fastjson<T: DeserializeOwned>(input: &[u8]) -> Result<T> {
    match serde_json::from_slice(input) {
        Ok(v) => Ok(v),
        Err(_) => {
            let normalized = normalize(input)?;
            serde_json::from_str(&normalized).map_err(|e| body_err(e.to_string()))
        }
    }
}

/// Serializes `value` in fastjson's default form (see [`super::writer`]). Alias kept next to the
/// reader so both directions are found in one place.
pub fn write_fastjson<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    to_fastjson(value)
}

fn body_err(msg: impl Into<String>) -> ProtocolError {
    ProtocolError::Body(msg.into())
}

struct Parser<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> ProtocolError {
        body_err(format!("{what} at byte {}", self.pos))
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect(&mut self, b: u8) -> Result<()> {
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected `{}`", b as char)))
        }
    }

    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_JSON_DEPTH {
            return Err(self.error(&format!("nesting deeper than {MAX_JSON_DEPTH}")));
        }
        Ok(())
    }

    fn value(&mut self, out: &mut String) -> Result<()> {
        match self.peek() {
            Some(b'{') => self.object(out),
            Some(b'[') => self.array(out),
            Some(q @ (b'"' | b'\'')) => {
                let s = self.string(q)?;
                write_json_string(out, &s);
                Ok(())
            }
            Some(b'-' | b'0'..=b'9') => self.number(out),
            Some(b't') => self.literal("true", out),
            Some(b'f') => self.literal("false", out),
            Some(b'n') => self.literal("null", out),
            Some(_) => Err(self.error("unexpected character")),
            None => Err(self.error("unexpected end of input")),
        }
    }

    fn object(&mut self, out: &mut String) -> Result<()> {
        self.enter()?;
        self.expect(b'{')?;
        out.push('{');
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                self.key(out)?;
                self.skip_ws();
                self.expect(b':')?;
                out.push(':');
                self.skip_ws();
                self.value(out)?;
                self.skip_ws();
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        out.push(',');
                        self.skip_ws();
                    }
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.error("expected `,` or `}` in object")),
                }
            }
        }
        out.push('}');
        self.depth -= 1;
        Ok(())
    }

    /// A key in any of the three forms, always written out as a JSON string.
    fn key(&mut self, out: &mut String) -> Result<()> {
        match self.peek() {
            Some(q @ (b'"' | b'\'')) => {
                let s = self.string(q)?;
                write_json_string(out, &s);
            }
            Some(b'{') => {
                let mut inner = String::new();
                self.object(&mut inner)?;
                write_json_string(out, &inner);
            }
            Some(b) if is_bare_key_byte(b) => {
                let start = self.pos;
                while self.peek().is_some_and(is_bare_key_byte) {
                    self.pos += 1;
                }
                out.push('"');
                out.push_str(&self.src[start..self.pos]);
                out.push('"');
            }
            Some(_) => return Err(self.error("malformed object key")),
            None => return Err(self.error("unexpected end of input in object")),
        }
        Ok(())
    }

    fn array(&mut self, out: &mut String) -> Result<()> {
        self.enter()?;
        self.expect(b'[')?;
        out.push('[');
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
        } else {
            loop {
                self.value(out)?;
                self.skip_ws();
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        out.push(',');
                        self.skip_ws();
                    }
                    Some(b']') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.error("expected `,` or `]` in array")),
                }
            }
        }
        out.push(']');
        self.depth -= 1;
        Ok(())
    }

    /// Reads a string literal delimited by `quote` and returns its decoded text.
    fn string(&mut self, quote: u8) -> Result<String> {
        self.expect(quote)?;
        let mut s = String::new();
        let mut run = self.pos;
        loop {
            match self.peek() {
                None => return Err(self.error("unterminated string")),
                Some(b) if b == quote => {
                    s.push_str(&self.src[run..self.pos]);
                    self.pos += 1;
                    return Ok(s);
                }
                Some(b'\\') => {
                    s.push_str(&self.src[run..self.pos]);
                    self.pos += 1;
                    self.escape(&mut s)?;
                    run = self.pos;
                }
                Some(b) if b < 0x20 => return Err(self.error("control character in string")),
                Some(_) => self.pos += 1,
            }
        }
    }

    fn escape(&mut self, s: &mut String) -> Result<()> {
        let c = self
            .peek()
            .ok_or_else(|| self.error("unterminated escape"))?;
        self.pos += 1;
        match c {
            b'"' => s.push('"'),
            b'\'' => s.push('\''),
            b'\\' => s.push('\\'),
            b'/' => s.push('/'),
            b'b' => s.push('\u{8}'),
            b'f' => s.push('\u{c}'),
            b'n' => s.push('\n'),
            b'r' => s.push('\r'),
            b't' => s.push('\t'),
            b'u' => {
                let hi = self.hex4()?;
                let ch = if (0xD800..0xDC00).contains(&hi) {
                    // A high surrogate must be followed by `\u` and a low surrogate.
                    if self.bytes.get(self.pos..self.pos + 2) != Some(b"\\u") {
                        return Err(self.error("lone high surrogate"));
                    }
                    self.pos += 2;
                    let lo = self.hex4()?;
                    if !(0xDC00..0xE000).contains(&lo) {
                        return Err(self.error("invalid low surrogate"));
                    }
                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                } else {
                    hi
                };
                let ch = char::from_u32(ch).ok_or_else(|| self.error("invalid \\u escape"))?;
                s.push(ch);
            }
            _ => return Err(self.error("invalid escape")),
        }
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32> {
        let digits = self
            .src
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.error("truncated \\u escape"))?;
        let v = u32::from_str_radix(digits, 16).map_err(|_| self.error("invalid \\u escape"))?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(self.error("invalid \\u escape"));
        }
        self.pos += 4;
        Ok(v)
    }

    /// Validates a number against the JSON grammar and copies it verbatim.
    fn number(&mut self, out: &mut String) -> Result<()> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.error("malformed number")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
                return Err(self.error("malformed number fraction"));
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
                return Err(self.error("malformed number exponent"));
            }
            self.digits();
        }
        out.push_str(&self.src[start..self.pos]);
        Ok(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &str, out: &mut String) -> Result<()> {
        if self.bytes.get(self.pos..self.pos + word.len()) == Some(word.as_bytes()) {
            self.pos += word.len();
            out.push_str(word);
            Ok(())
        } else {
            Err(self.error("unknown literal"))
        }
    }
}

/// Characters fastjson may write in an unquoted key (numbers, and identifier-like names).
fn is_bare_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'-' | b'+' | b'.')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn quotes_bare_integer_keys() {
        assert_eq!(
            normalize(b"{0:250, 1 : -3}").unwrap(),
            r#"{"0":250,"1":-3}"#
        );
        let m: BTreeMap<i64, i64> = from_fastjson(b"{0:250,1:248}").unwrap();
        assert_eq!(m.get(&1), Some(&248));
    }

    #[test]
    fn object_keys_become_string_keys() {
        let got = normalize(br#"{{"brokerName":"b","queueId":0,"topic":"t"}:5}"#).unwrap();
        assert_eq!(
            got,
            r#"{"{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"t\"}":5}"#
        );
        // and the result is standard JSON
        let v: serde_json::Value = serde_json::from_str(&got).unwrap();
        assert_eq!(v.as_object().map(|o| o.len()), Some(1));
    }

    #[test]
    fn pretty_printed_config_is_compacted() {
        let src = b"{\n\t\"offsetTable\":{\n\t\t\"T@g\":{0:1,1:2}\n\t}\n}";
        assert_eq!(
            normalize(src).unwrap(),
            r#"{"offsetTable":{"T@g":{"0":1,"1":2}}}"#
        );
    }

    #[test]
    fn strings_are_decoded_and_reescaped() {
        let got = normalize(br#"["a\"b", "\u00e9\ud83d\ude00", 'single', "x\/y"]"#).unwrap();
        assert_eq!(got, "[\"a\\\"b\",\"é😀\",\"single\",\"x/y\"]");
    }

    #[test]
    fn numbers_and_literals_are_kept() {
        assert_eq!(
            normalize(b"[0, -1, 2.5, 1.0E10, true, false, null]").unwrap(),
            "[0,-1,2.5,1.0E10,true,false,null]"
        );
    }

    #[test]
    fn malformed_input_is_an_error() {
        for bad in [
            &b""[..],
            b"{",
            b"{0:}",
            b"{\"a\" 1}",
            b"[1,]",
            b"[01x]",
            b"\"abc",
            b"\"\\ud800\"",
            b"\"\\uzzzz\"",
            b"tru",
            b"{} x",
            b"[-]",
            b"[1.]",
            b"[1e]",
            b"{[1]:2}",
            b"\xff",
            b"\"a\x01\"",
        ] {
            assert!(
                normalize(bad).is_err(),
                "accepted {:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let ok = format!(
            "{}{}",
            "[".repeat(MAX_JSON_DEPTH),
            "]".repeat(MAX_JSON_DEPTH)
        );
        assert!(normalize(ok.as_bytes()).is_ok());
        let deep = format!(
            "{}{}",
            "[".repeat(MAX_JSON_DEPTH + 1),
            "]".repeat(MAX_JSON_DEPTH + 1)
        );
        assert!(normalize(deep.as_bytes()).is_err());
        let keys = "{{".repeat(MAX_JSON_DEPTH + 1);
        assert!(normalize(keys.as_bytes()).is_err());
    }
}
