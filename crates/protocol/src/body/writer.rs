//! A serde serializer that writes JSON the way fastjson 1.2.x does, so Java and Go peers parse our
//! bodies exactly as they parse a Java broker's.
//!
//! The output is compact (no whitespace), struct fields and map entries are sorted by key, and
//! `None` fields and map values are omitted. The form of a map key follows its
//! Rust type, as fastjson's follows the Java type:
//!
//! | key type | legacy (fastjson default) | standard (`BrowserCompatible`) |
//! |---|---|---|
//! | string | `"k"` | `"k"` |
//! | integer | `0` (unquoted) | `"0"` |
//! | struct, e.g. `MessageQueue` | `{"brokerName":..}` in key position | the same text as a string |
//!
//! Standard mode also escapes non-ASCII characters as `\uXXXX`, as BrowserCompatible does. Type
//! information is what makes this work: a `HashMap<i64, String>` gets bare keys while a
//! `HashMap<String, _>` whose keys merely look numeric stays quoted, which a post-processing pass
//! over generic JSON could not tell apart.

use std::fmt::{self, Display, Write as _};

use serde::ser::{self, Impossible, Serialize};

use super::json_string::{push_unicode_escape, write_json_string};
use crate::error::{ProtocolError, Result};

/// Serializes `value` in fastjson's default (legacy) form: bare integer keys, object keys.
pub fn to_fastjson<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    render(value, Mode::Legacy)
}

/// [`to_fastjson`] as bytes, ready to be a command body.
pub fn to_fastjson_bytes<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    to_fastjson(value).map(String::into_bytes)
}

/// Serializes `value` in fastjson's standard-JSON form: every key quoted, non-ASCII escaped.
pub fn to_standard_json<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    render(value, Mode::Standard)
}

/// [`to_standard_json`] as bytes.
pub fn to_standard_json_bytes<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    to_standard_json(value).map(String::into_bytes)
}

fn render<T: Serialize + ?Sized>(value: &T, mode: Mode) -> Result<String> {
    let mut out = String::with_capacity(128);
    let emitted = value
        .serialize(ValueWriter {
            out: &mut out,
            mode,
        })
        .map_err(|e| ProtocolError::Body(e.0))?;
    if emitted == Emitted::Null {
        out.push_str("null");
    }
    Ok(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Legacy,
    Standard,
}

/// Whether a value wrote text or was null (and wrote nothing, so the caller can omit it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Emitted {
    Value,
    Null,
}

#[derive(Debug)]
struct WriteError(String);

impl Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WriteError {}

impl ser::Error for WriteError {
    fn custom<T: Display>(msg: T) -> Self {
        WriteError(msg.to_string())
    }
}

type WResult<T> = std::result::Result<T, WriteError>;

fn write_str(out: &mut String, s: &str, mode: Mode) {
    match mode {
        Mode::Legacy => write_json_string(out, s),
        Mode::Standard => {
            let mut tmp = String::with_capacity(s.len() + 2);
            write_json_string(&mut tmp, s);
            for c in tmp.chars() {
                if c.is_ascii() {
                    out.push(c);
                } else {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        push_unicode_escape(out, u32::from(*u));
                    }
                }
            }
        }
    }
}

/// Java's `Double.toString` style: always a fraction or exponent (`0.0`, `1.5`, `1.0E21`).
fn write_float(out: &mut String, v: f64) -> Emitted {
    if !v.is_finite() {
        return Emitted::Null;
    }
    let s = format!("{v:?}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            out.push_str(mantissa);
            if !mantissa.contains('.') {
                out.push_str(".0");
            }
            out.push('E');
            out.push_str(exp);
        }
        None => out.push_str(&s),
    }
    Emitted::Value
}

struct ValueWriter<'a> {
    out: &'a mut String,
    mode: Mode,
}

macro_rules! write_display {
    ($($name:ident: $ty:ty),* $(,)?) => {
        $(fn $name(self, v: $ty) -> WResult<Emitted> {
            let _ = write!(self.out, "{v}");
            Ok(Emitted::Value)
        })*
    };
}

impl<'a> ser::Serializer for ValueWriter<'a> {
    type Ok = Emitted;
    type Error = WriteError;
    type SerializeSeq = SeqWriter<'a>;
    type SerializeTuple = SeqWriter<'a>;
    type SerializeTupleStruct = SeqWriter<'a>;
    type SerializeTupleVariant = Impossible<Emitted, WriteError>;
    type SerializeMap = MapWriter<'a>;
    type SerializeStruct = MapWriter<'a>;
    type SerializeStructVariant = Impossible<Emitted, WriteError>;

    write_display!(
        serialize_bool: bool,
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_i128: i128,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32,
        serialize_u64: u64,
        serialize_u128: u128,
    );

    fn serialize_f32(self, v: f32) -> WResult<Emitted> {
        Ok(write_float(self.out, f64::from(v)))
    }

    fn serialize_f64(self, v: f64) -> WResult<Emitted> {
        Ok(write_float(self.out, v))
    }

    fn serialize_char(self, v: char) -> WResult<Emitted> {
        let mut buf = [0u8; 4];
        self.serialize_str(v.encode_utf8(&mut buf))
    }

    fn serialize_str(self, v: &str) -> WResult<Emitted> {
        write_str(self.out, v, self.mode);
        Ok(Emitted::Value)
    }

    fn serialize_bytes(self, v: &[u8]) -> WResult<Emitted> {
        let mut seq = ser::Serializer::serialize_seq(self, Some(v.len()))?;
        for b in v {
            ser::SerializeSeq::serialize_element(&mut seq, b)?;
        }
        ser::SerializeSeq::end(seq)
    }

    fn serialize_none(self) -> WResult<Emitted> {
        Ok(Emitted::Null)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> WResult<Emitted> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> WResult<Emitted> {
        Ok(Emitted::Null)
    }

    fn serialize_unit_struct(self, _name: &'static str) -> WResult<Emitted> {
        self.out.push_str("{}");
        Ok(Emitted::Value)
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> WResult<Emitted> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> WResult<Emitted> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> WResult<Emitted> {
        let mut map = MapWriter::new(self.out, self.mode);
        ser::SerializeStruct::serialize_field(&mut map, variant, value)?;
        ser::SerializeStruct::end(map)
    }

    fn serialize_seq(self, _len: Option<usize>) -> WResult<SeqWriter<'a>> {
        self.out.push('[');
        Ok(SeqWriter {
            out: self.out,
            mode: self.mode,
            first: true,
        })
    }

    fn serialize_tuple(self, len: usize) -> WResult<SeqWriter<'a>> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> WResult<SeqWriter<'a>> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> WResult<Self::SerializeTupleVariant> {
        Err(WriteError(format!(
            "tuple variant of {name} has no fastjson form"
        )))
    }

    fn serialize_map(self, _len: Option<usize>) -> WResult<MapWriter<'a>> {
        Ok(MapWriter::new(self.out, self.mode))
    }

    fn serialize_struct(self, _name: &'static str, _len: usize) -> WResult<MapWriter<'a>> {
        Ok(MapWriter::new(self.out, self.mode))
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> WResult<Self::SerializeStructVariant> {
        Err(WriteError(format!(
            "struct variant of {name} has no fastjson form"
        )))
    }
}

struct SeqWriter<'a> {
    out: &'a mut String,
    mode: Mode,
    first: bool,
}

impl SeqWriter<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> WResult<()> {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        let emitted = value.serialize(ValueWriter {
            out: self.out,
            mode: self.mode,
        })?;
        if emitted == Emitted::Null {
            self.out.push_str("null");
        }
        Ok(())
    }

    fn finish(self) -> WResult<Emitted> {
        self.out.push(']');
        Ok(Emitted::Value)
    }
}

impl ser::SerializeSeq for SeqWriter<'_> {
    type Ok = Emitted;
    type Error = WriteError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> WResult<()> {
        self.element(value)
    }
    fn end(self) -> WResult<Emitted> {
        self.finish()
    }
}

impl ser::SerializeTuple for SeqWriter<'_> {
    type Ok = Emitted;
    type Error = WriteError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> WResult<()> {
        self.element(value)
    }
    fn end(self) -> WResult<Emitted> {
        self.finish()
    }
}

impl ser::SerializeTupleStruct for SeqWriter<'_> {
    type Ok = Emitted;
    type Error = WriteError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> WResult<()> {
        self.element(value)
    }
    fn end(self) -> WResult<Emitted> {
        self.finish()
    }
}

/// How a rendered key sorts: integers numerically, everything else by its text.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum SortKey {
    Int(i128),
    Text(String),
}

/// Collects entries of a map or struct, then writes them sorted by key with nulls left out.
struct MapWriter<'a> {
    out: &'a mut String,
    mode: Mode,
    entries: Vec<(SortKey, String, String)>,
    pending_key: Option<(SortKey, String)>,
}

impl<'a> MapWriter<'a> {
    fn new(out: &'a mut String, mode: Mode) -> Self {
        MapWriter {
            out,
            mode,
            entries: Vec::new(),
            pending_key: None,
        }
    }

    fn push_value<T: Serialize + ?Sized>(
        &mut self,
        key: (SortKey, String),
        value: &T,
    ) -> WResult<()> {
        if let Some(text) = render_value(value, self.mode)? {
            self.entries.push((key.0, key.1, text));
        }
        Ok(())
    }

    fn finish(mut self) -> WResult<Emitted> {
        write_sorted_object(self.out, &mut self.entries);
        Ok(Emitted::Value)
    }
}

/// Renders one value on its own; `None` when it is null and must be omitted.
fn render_value<T: Serialize + ?Sized>(value: &T, mode: Mode) -> WResult<Option<String>> {
    let mut text = String::new();
    let emitted = value.serialize(ValueWriter {
        out: &mut text,
        mode,
    })?;
    Ok((emitted == Emitted::Value).then_some(text))
}

fn write_sorted_object(out: &mut String, entries: &mut [(SortKey, String, String)]) {
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    out.push('{');
    for (i, (_, key, value)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(key);
        out.push(':');
        out.push_str(value);
    }
    out.push('}');
}

impl ser::SerializeMap for MapWriter<'_> {
    type Ok = Emitted;
    type Error = WriteError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> WResult<()> {
        self.pending_key = Some(key.serialize(KeyWriter { mode: self.mode })?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> WResult<()> {
        let key = self
            .pending_key
            .take()
            .ok_or_else(|| WriteError("map value without a key".into()))?;
        self.push_value(key, value)
    }

    fn end(self) -> WResult<Emitted> {
        self.finish()
    }
}

impl ser::SerializeStruct for MapWriter<'_> {
    type Ok = Emitted;
    type Error = WriteError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> WResult<()> {
        let mut text = String::with_capacity(key.len() + 2);
        write_str(&mut text, key, self.mode);
        self.push_value((SortKey::Text(key.to_owned()), text), value)
    }

    fn end(self) -> WResult<Emitted> {
        self.finish()
    }
}

/// Renders a map key: returns its sort key and its text in key position.
struct KeyWriter {
    mode: Mode,
}

impl KeyWriter {
    fn int(self, v: i128) -> WResult<(SortKey, String)> {
        let text = match self.mode {
            Mode::Legacy => v.to_string(),
            Mode::Standard => format!("\"{v}\""),
        };
        Ok((SortKey::Int(v), text))
    }

    fn unsupported(what: &str) -> WriteError {
        WriteError(format!("{what} cannot be a map key"))
    }
}

macro_rules! key_int {
    ($($name:ident: $ty:ty),* $(,)?) => {
        $(fn $name(self, v: $ty) -> WResult<(SortKey, String)> {
            self.int(i128::from(v))
        })*
    };
}

impl ser::Serializer for KeyWriter {
    type Ok = (SortKey, String);
    type Error = WriteError;
    type SerializeSeq = Impossible<Self::Ok, WriteError>;
    type SerializeTuple = Impossible<Self::Ok, WriteError>;
    type SerializeTupleStruct = Impossible<Self::Ok, WriteError>;
    type SerializeTupleVariant = Impossible<Self::Ok, WriteError>;
    type SerializeMap = Impossible<Self::Ok, WriteError>;
    type SerializeStruct = StructKeyWriter;
    type SerializeStructVariant = Impossible<Self::Ok, WriteError>;

    key_int!(
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32,
        serialize_u64: u64,
    );

    fn serialize_i128(self, v: i128) -> WResult<Self::Ok> {
        self.int(v)
    }

    fn serialize_u128(self, v: u128) -> WResult<Self::Ok> {
        let v = i128::try_from(v).map_err(|_| Self::unsupported("u128 above i128::MAX"))?;
        self.int(v)
    }

    fn serialize_bool(self, v: bool) -> WResult<Self::Ok> {
        let text = match self.mode {
            Mode::Legacy => v.to_string(),
            Mode::Standard => format!("\"{v}\""),
        };
        Ok((SortKey::Text(v.to_string()), text))
    }

    fn serialize_f32(self, _v: f32) -> WResult<Self::Ok> {
        Err(Self::unsupported("a float"))
    }

    fn serialize_f64(self, _v: f64) -> WResult<Self::Ok> {
        Err(Self::unsupported("a float"))
    }

    fn serialize_char(self, v: char) -> WResult<Self::Ok> {
        let mut buf = [0u8; 4];
        self.serialize_str(v.encode_utf8(&mut buf))
    }

    fn serialize_str(self, v: &str) -> WResult<Self::Ok> {
        let mut text = String::with_capacity(v.len() + 2);
        write_str(&mut text, v, self.mode);
        Ok((SortKey::Text(v.to_owned()), text))
    }

    fn serialize_bytes(self, _v: &[u8]) -> WResult<Self::Ok> {
        Err(Self::unsupported("a byte array"))
    }

    fn serialize_none(self) -> WResult<Self::Ok> {
        Err(Self::unsupported("null"))
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> WResult<Self::Ok> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> WResult<Self::Ok> {
        Err(Self::unsupported("null"))
    }

    fn serialize_unit_struct(self, name: &'static str) -> WResult<Self::Ok> {
        Err(Self::unsupported(name))
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> WResult<Self::Ok> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> WResult<Self::Ok> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> WResult<Self::Ok> {
        Err(Self::unsupported(name))
    }

    fn serialize_seq(self, _len: Option<usize>) -> WResult<Self::SerializeSeq> {
        Err(Self::unsupported("a sequence"))
    }

    fn serialize_tuple(self, _len: usize) -> WResult<Self::SerializeTuple> {
        Err(Self::unsupported("a tuple"))
    }

    fn serialize_tuple_struct(
        self,
        name: &'static str,
        _len: usize,
    ) -> WResult<Self::SerializeTupleStruct> {
        Err(Self::unsupported(name))
    }

    fn serialize_tuple_variant(
        self,
        name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> WResult<Self::SerializeTupleVariant> {
        Err(Self::unsupported(name))
    }

    fn serialize_map(self, _len: Option<usize>) -> WResult<Self::SerializeMap> {
        Err(Self::unsupported("a map"))
    }

    fn serialize_struct(self, _name: &'static str, _len: usize) -> WResult<StructKeyWriter> {
        Ok(StructKeyWriter {
            mode: self.mode,
            entries: Vec::new(),
        })
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> WResult<Self::SerializeStructVariant> {
        Err(Self::unsupported(name))
    }
}

/// A struct in key position (a `MessageQueue`): rendered as a compact object, then placed bare
/// (legacy) or as a string (standard). The object itself always uses legacy rules, as fastjson
/// renders it with the same writer.
struct StructKeyWriter {
    mode: Mode,
    entries: Vec<(SortKey, String, String)>,
}

impl ser::SerializeStruct for StructKeyWriter {
    type Ok = (SortKey, String);
    type Error = WriteError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> WResult<()> {
        if let Some(text) = render_value(value, Mode::Legacy)? {
            let mut key_text = String::with_capacity(key.len() + 2);
            write_json_string(&mut key_text, key);
            self.entries
                .push((SortKey::Text(key.to_owned()), key_text, text));
        }
        Ok(())
    }

    fn end(mut self) -> WResult<Self::Ok> {
        let mut object = String::new();
        write_sorted_object(&mut object, &mut self.entries);
        let key_text = match self.mode {
            Mode::Legacy => object.clone(),
            Mode::Standard => {
                let mut quoted = String::with_capacity(object.len() + 8);
                write_str(&mut quoted, &object, Mode::Standard);
                quoted
            }
        };
        Ok((SortKey::Text(object), key_text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;
    use std::collections::HashMap;

    #[derive(Serialize, PartialEq, Eq, Hash)]
    #[serde(rename_all = "camelCase")]
    struct Mq {
        topic: String,
        broker_name: String,
        queue_id: i32,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Doc {
        zeta: Option<i32>,
        alpha: Vec<Option<i32>>,
        by_id: HashMap<i64, String>,
        by_name: HashMap<String, i32>,
        by_mq: HashMap<Mq, i64>,
        tps: f64,
        text: String,
    }

    fn doc() -> Doc {
        Doc {
            zeta: None,
            alpha: vec![Some(1), None],
            by_id: HashMap::from([(10, "x".into()), (2, "y".into())]),
            by_name: HashMap::from([("10".into(), 1), ("2".into(), 2)]),
            by_mq: HashMap::from([(
                Mq {
                    topic: "T".into(),
                    broker_name: "b".into(),
                    queue_id: 0,
                },
                7,
            )]),
            tps: 0.0,
            text: "é\"".into(),
        }
    }

    #[test]
    fn legacy_form_matches_fastjson() {
        assert_eq!(
            to_fastjson(&doc()).unwrap(),
            r#"{"alpha":[1,null],"byId":{2:"y",10:"x"},"byMq":{{"brokerName":"b","queueId":0,"topic":"T"}:7},"byName":{"10":1,"2":2},"text":"é\"","tps":0.0}"#
        );
    }

    #[test]
    fn standard_form_quotes_keys_and_escapes_non_ascii() {
        assert_eq!(
            to_standard_json(&doc()).unwrap(),
            r#"{"alpha":[1,null],"byId":{"2":"y","10":"x"},"byMq":{"{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"T\"}":7},"byName":{"10":1,"2":2},"text":"\u00e9\"","tps":0.0}"#
        );
    }

    #[test]
    fn floats_look_like_java() {
        let mut s = String::new();
        write_float(&mut s, 1.5);
        s.push(' ');
        write_float(&mut s, 1e21);
        s.push(' ');
        write_float(&mut s, 2.5e-7);
        assert_eq!(s, "1.5 1.0E21 2.5E-7");
        assert_eq!(to_fastjson(&f64::NAN).unwrap(), "null");
    }

    #[test]
    fn legacy_output_reads_back_through_the_lenient_reader() {
        let text = to_fastjson(&doc()).unwrap();
        let v: serde_json::Value = super::super::lenient::from_fastjson(text.as_bytes()).unwrap();
        assert_eq!(v["byId"]["10"], "x");
        assert_eq!(v["tps"], 0.0);
    }
}
