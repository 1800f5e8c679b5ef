//! JSON header codec (serialize type 0), byte-compatible with fastjson 1.2.83 as used by Java.
//!
//! Encoding is hand-written rather than derived: fastjson sorts keys alphabetically and omits nulls,
//! and writing straight into the output buffer avoids an intermediate value tree on the hot path.
//! Decoding accepts any key order, unknown keys, and scalar (non-string) ext field values.

use std::fmt;

use bytes::{BufMut, BytesMut};
use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};

use crate::command::{ExtFields, LanguageCode, RemotingCommand, SerializeType};
use crate::error::{ProtocolError, Result};
use crate::header::json_scan::find_special;
use crate::limits::MAX_EXT_FIELDS;

/// Appends `cmd`'s header as fastjson would write it.
pub fn encode(cmd: &RemotingCommand, dst: &mut BytesMut) {
    dst.put_slice(b"{\"code\":");
    put_int(dst, cmd.code as i64);
    if let Some(ext) = &cmd.ext_fields {
        dst.put_slice(b",\"extFields\":{");
        for (i, (k, v)) in ext.iter().enumerate() {
            if i > 0 {
                dst.put_u8(b',');
            }
            put_str(dst, k);
            dst.put_u8(b':');
            put_str(dst, v);
        }
        dst.put_u8(b'}');
    }
    dst.put_slice(b",\"flag\":");
    put_int(dst, cmd.flag as i64);
    dst.put_slice(b",\"language\":\"");
    dst.put_slice(cmd.language.name().as_bytes());
    dst.put_slice(b"\",\"opaque\":");
    put_int(dst, cmd.opaque as i64);
    if let Some(remark) = &cmd.remark {
        dst.put_slice(b",\"remark\":");
        put_str(dst, remark);
    }
    dst.put_slice(b",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":");
    put_int(dst, cmd.version as i64);
    dst.put_u8(b'}');
}

fn put_int(dst: &mut BytesMut, v: i64) {
    let mut buf = [0u8; 20];
    dst.put_slice(crate::headers::decimal(&mut buf, v));
}

/// Writes a JSON string literal with fastjson's escaping (quotes, backslash, control characters).
///
/// Runs of plain bytes are found eight at a time ([`find_special`], the decoder's scan: the bytes
/// that need escaping are exactly the ones that end a plain run there) and copied in one piece;
/// header values are almost always plain, so most strings are one scan and one copy.
pub(crate) fn put_str(dst: &mut BytesMut, s: &str) {
    dst.reserve(s.len() + 2);
    dst.put_u8(b'"');
    let mut rest = s.as_bytes();
    while let Some(i) = find_special(rest) {
        let (plain, tail) = rest.split_at(i);
        dst.put_slice(plain);
        let Some((&b, tail)) = tail.split_first() else {
            break;
        };
        match b {
            b'"' => dst.put_slice(b"\\\""),
            b'\\' => dst.put_slice(b"\\\\"),
            b'\n' => dst.put_slice(b"\\n"),
            b'\r' => dst.put_slice(b"\\r"),
            b'\t' => dst.put_slice(b"\\t"),
            0x08 => dst.put_slice(b"\\b"),
            0x0c => dst.put_slice(b"\\f"),
            _ => {
                // One copy per escape: a message's properties carry two (\u0001, \u0002) per
                // entry.
                const HEX: &[u8; 16] = b"0123456789abcdef";
                dst.put_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 0xf) as usize],
                ]);
            }
        }
        rest = tail;
    }
    dst.put_slice(rest);
    dst.put_u8(b'"');
}

#[derive(Deserialize)]
struct JsonHeader {
    code: Option<i32>,
    language: Option<String>,
    version: Option<i32>,
    opaque: Option<i32>,
    flag: Option<i32>,
    remark: Option<String>,
    #[serde(rename = "extFields")]
    ext_fields: Option<JsonExtFields>,
}

struct JsonExtFields(ExtFields);

impl<'de> Deserialize<'de> for JsonExtFields {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_map(ExtVisitor)
    }
}

struct ExtVisitor;

/// A string that borrows from the input when it has no escapes.
enum Text<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Text<'_> {
    fn as_str(&self) -> &str {
        match self {
            Text::Borrowed(s) => s,
            Text::Owned(s) => s,
        }
    }
}

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(
                self,
                v: &'de str,
            ) -> std::result::Result<Text<'de>, E> {
                Ok(Text::Borrowed(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Text<'de>, E> {
                Ok(Text::Owned(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> std::result::Result<Text<'de>, E> {
                Ok(Text::Owned(v))
            }
        }
        d.deserialize_str(V)
    }
}

/// An ext field value: Java writes strings, but accept any scalar and keep its text.
enum Scalar<'de> {
    Text(Text<'de>),
    Null,
}

impl<'de> Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scalar<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, number, boolean or null")
            }
            fn visit_borrowed_str<E: de::Error>(
                self,
                v: &'de str,
            ) -> std::result::Result<Scalar<'de>, E> {
                Ok(Scalar::Text(Text::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Scalar<'de>, E> {
                Ok(Scalar::Text(Text::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> std::result::Result<Scalar<'de>, E> {
                Ok(Scalar::Text(Text::Owned(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Scalar<'de>, E> {
                Ok(Scalar::Text(Text::Owned(v.to_string())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Scalar<'de>, E> {
                Ok(Scalar::Text(Text::Owned(v.to_string())))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<Scalar<'de>, E> {
                Ok(Scalar::Text(Text::Owned(v.to_string())))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<Scalar<'de>, E> {
                Ok(Scalar::Text(Text::Borrowed(if v {
                    "true"
                } else {
                    "false"
                })))
            }
            fn visit_unit<E: de::Error>(self) -> std::result::Result<Scalar<'de>, E> {
                Ok(Scalar::Null)
            }
            fn visit_none<E: de::Error>(self) -> std::result::Result<Scalar<'de>, E> {
                Ok(Scalar::Null)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Visitor<'de> for ExtVisitor {
    type Value = JsonExtFields;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of string fields")
    }

    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut ext = ExtFields::with_capacity(map.size_hint().unwrap_or(16).min(32));
        while let Some(key) = map.next_key::<Text<'de>>()? {
            if ext.len() >= MAX_EXT_FIELDS {
                return Err(de::Error::custom(format!(
                    "more than {MAX_EXT_FIELDS} ext fields"
                )));
            }
            match map.next_value::<Scalar<'de>>()? {
                Scalar::Text(v) => ext.insert(key.as_str(), v.as_str()),
                Scalar::Null => {}
            }
        }
        Ok(JsonExtFields(ext))
    }

    fn visit_unit<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
        Ok(JsonExtFields(ExtFields::new()))
    }
}

/// Decodes a JSON header. `code` is required; other missing numbers default to 0.
///
/// Headers of the usual shape are read by [`super::json_scan`]; anything else (and every error)
/// goes through `serde_json`.
pub fn decode(src: &[u8]) -> Result<RemotingCommand> {
    match super::json_scan::decode(src) {
        Some(cmd) => Ok(cmd),
        None => decode_with_serde(src),
    }
}

/// The general decoder: any key order, unknown keys, any scalar ext field value.
pub(crate) fn decode_with_serde(src: &[u8]) -> Result<RemotingCommand> {
    let h: JsonHeader =
        serde_json::from_slice(src).map_err(|e| ProtocolError::JsonHeader(e.to_string()))?;
    let code = h.code.ok_or(ProtocolError::MissingField("code"))?;
    Ok(RemotingCommand {
        code,
        language: h
            .language
            .as_deref()
            .map(LanguageCode::from_name)
            .unwrap_or(LanguageCode::Other),
        version: h.version.unwrap_or(0),
        opaque: h.opaque.unwrap_or(0),
        flag: h.flag.unwrap_or(0),
        remark: h.remark,
        ext_fields: h.ext_fields.map(|e| e.0),
        body: None,
        body_parts: Vec::new(),
        serialize_type: SerializeType::Json,
        hold: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_fastjson() {
        let mut cmd = RemotingCommand::request(105);
        cmd.language = LanguageCode::Java;
        cmd.opaque = 3;
        cmd.ext_mut().insert("topic", "TopicTest");
        let mut out = BytesMut::new();
        encode(&cmd, &mut out);
        assert_eq!(
            &out[..],
            br#"{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":3,"serializeTypeCurrentRPC":"JSON","version":479}"#
        );
    }

    #[test]
    fn escapes_strings() {
        let mut out = BytesMut::new();
        put_str(&mut out, "a\"b\\c\n\u{1}é");
        assert_eq!(&out[..], "\"a\\\"b\\\\c\\n\\u0001é\"".as_bytes());
    }

    /// fastjson's escaping written out one byte at a time (what `put_str` did before it scanned
    /// eight bytes at a time).
    fn put_str_bytewise(s: &str) -> Vec<u8> {
        let mut out = vec![b'"'];
        for &b in s.as_bytes() {
            match b {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0c => out.extend_from_slice(b"\\f"),
                0x00..=0x1f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
                _ => out.push(b),
            }
        }
        out.push(b'"');
        out
    }

    proptest::proptest! {
        #[test]
        fn put_str_escapes_like_fastjson(s in r#"(.|[\\"\x00-\x1f]){0,40}"#) {
            let mut out = BytesMut::new();
            put_str(&mut out, &s);
            proptest::prop_assert_eq!(&out[..], &put_str_bytewise(&s)[..]);
            let back: String = serde_json::from_slice(&out).map_err(|e| {
                proptest::test_runner::TestCaseError::fail(e.to_string())
            })?;
            proptest::prop_assert_eq!(back, s);
        }
    }

    #[test]
    fn decodes_numbers_in_ext_fields_and_unknown_keys() {
        let cmd = decode(br#"{"code":10,"extFields":{"a":1,"b":true,"c":null,"d":"x"},"opaque":7,"flag":2,"language":"GO","remark":"","zzz":[1]}"#).unwrap();
        assert_eq!(cmd.code, 10);
        assert_eq!(cmd.language, LanguageCode::Go);
        assert_eq!(cmd.ext("a"), Some("1"));
        assert_eq!(cmd.ext("b"), Some("true"));
        assert_eq!(cmd.ext("c"), None);
        assert_eq!(cmd.ext("d"), Some("x"));
        assert!(cmd.is_oneway());
        assert_eq!(cmd.remark.as_deref(), Some(""));
    }

    #[test]
    fn rejects_garbage() {
        assert!(decode(b"{").is_err());
        assert!(decode(b"[]").is_err());
        assert!(decode(b"{}").is_err());
        assert!(decode(&[0xff, 0xfe]).is_err());
    }
}
