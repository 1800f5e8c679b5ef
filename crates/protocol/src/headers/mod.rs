//! Typed request and response headers.
//!
//! On the wire a header is nothing but the command's `extFields` string map; RocketMQ's Java
//! classes map bean fields to keys by reflection. Here every header is a plain struct implementing
//! [`CommandHeader`], which converts to and from [`ExtFields`]:
//!
//! * integers are written in decimal and booleans as `true`/`false`;
//! * a missing required field is [`ProtocolError::MissingField`] naming the key, and a value that
//!   does not parse is [`ProtocolError::MalformedField`] naming the key and the value, so a peer's
//!   mistake is reported precisely instead of surfacing later as a wrong default;
//! * optional fields are `Option<T>` and are omitted when `None` (Java omits nulls).
//!
//! Most headers are declared with the `command_header!` macro, one line per field
//! (`req` required, `opt` optional). Request headers that extend Java's `RpcRequestHeader` embed
//! [`RpcHeader`] for the inherited `ns`/`nsd`/`bname`/`oway`/`lo` keys. The send-v2 header,
//! which is on every produce request, is written by hand to parse in a single pass.
//!
//! [`CommandHeaderExt`] adds `decode_header`/`encode_header` to `RemotingCommand`, and
//! [`request_with_header`]/[`response_with_header`] build commands from a header.

use crate::command::{ExtFields, RemotingCommand};
use crate::error::{ProtocolError, Result};

pub mod admin;
pub mod client;
pub mod controller;
pub mod namesrv;
pub mod offset;
pub mod pop;
pub mod pull;
pub mod send;
pub mod send_back;
pub mod transaction;

pub use admin::*;
pub use client::*;
pub use controller::*;
pub use namesrv::*;
pub use offset::*;
pub use pop::*;
pub use pull::*;
pub use send::*;
pub use send_back::*;
pub use transaction::*;

/// A typed view of a command's ext fields.
pub trait CommandHeader: Sized {
    /// Writes every present field into `ext` (replacing existing keys).
    fn to_ext_fields(&self, ext: &mut ExtFields);
    /// Reads the header, failing on a missing required field or an unparsable value.
    fn from_ext_fields(ext: &ExtFields) -> Result<Self, ProtocolError>;
}

/// The wire shape of a header field value, for introspection (tests, docs, admin tools).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// Any string.
    Text,
    /// Decimal i32.
    Int,
    /// Decimal i64.
    Long,
    /// `true` / `false`.
    Bool,
    /// One of a fixed set of names.
    OneOf(&'static [&'static str]),
}

/// One field of a header: its key, value shape and whether it is required.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldSpec {
    pub key: &'static str,
    pub kind: ValueKind,
    pub required: bool,
}

/// Static description of a header's fields.
pub trait HeaderSpec {
    /// The header's own fields, in declaration order.
    const FIELDS: &'static [FieldSpec];
    /// Whether the header also carries [`RpcHeader`]'s inherited keys.
    const HAS_RPC: bool;
}

/// A scalar that can be carried as a header field value.
pub trait HeaderValue: Sized {
    /// The value's wire shape.
    const KIND: ValueKind;
    /// Parses the wire text of field `field`.
    fn parse(field: &'static str, raw: &str) -> Result<Self>;
    /// Appends the wire text to `out`.
    fn write_text(&self, out: &mut String);
}

fn malformed(field: &'static str, raw: &str) -> ProtocolError {
    ProtocolError::MalformedField {
        field,
        value: raw.to_owned(),
    }
}

impl HeaderValue for String {
    const KIND: ValueKind = ValueKind::Text;
    fn parse(_field: &'static str, raw: &str) -> Result<Self> {
        Ok(raw.to_owned())
    }
    fn write_text(&self, out: &mut String) {
        out.push_str(self);
    }
}

macro_rules! numeric_header_value {
    ($($ty:ty => $kind:ident),*) => {
        $(impl HeaderValue for $ty {
            const KIND: ValueKind = ValueKind::$kind;
            fn parse(field: &'static str, raw: &str) -> Result<Self> {
                raw.parse().map_err(|_| malformed(field, raw))
            }
            fn write_text(&self, out: &mut String) {
                write_decimal(out, i64::from(*self));
            }
        })*
    };
}

/// Appends `v` in decimal, as Java's `String.valueOf` writes it. Every send carries six numbers
/// in its header and its response three; `write!` through `core::fmt` cost ~200 instructions
/// each, this a few dozen.
fn write_decimal(out: &mut String, v: i64) {
    let mut buf = [0u8; 20];
    // The digits (and sign) are ASCII: one copy, not a `push` (with its UTF-8 encoding) each.
    out.push_str(std::str::from_utf8(decimal(&mut buf, v)).unwrap_or_default());
}

/// `v` in decimal, written at the end of `buf` (20 bytes hold `i64::MIN` with its sign).
pub(crate) fn decimal(buf: &mut [u8; 20], v: i64) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}

numeric_header_value!(i32 => Int, i64 => Long);

impl HeaderValue for bool {
    const KIND: ValueKind = ValueKind::Bool;
    /// `true`/`false`, ignoring ASCII case as Java's `Boolean.parseBoolean` does; anything else is
    /// malformed (Java would silently read it as `false`).
    fn parse(field: &'static str, raw: &str) -> Result<Self> {
        if raw.eq_ignore_ascii_case("true") {
            Ok(true)
        } else if raw.eq_ignore_ascii_case("false") {
            Ok(false)
        } else {
            Err(malformed(field, raw))
        }
    }
    fn write_text(&self, out: &mut String) {
        out.push_str(if *self { "true" } else { "false" });
    }
}

/// Reads required field `key`.
pub fn required<T: HeaderValue>(ext: &ExtFields, key: &'static str) -> Result<T> {
    let raw = ext.get(key).ok_or(ProtocolError::MissingField(key))?;
    T::parse(key, raw)
}

/// Reads optional field `key`; absent is `None`, present but unparsable is an error.
pub fn optional<T: HeaderValue>(ext: &ExtFields, key: &'static str) -> Result<Option<T>> {
    ext.get(key).map(|raw| T::parse(key, raw)).transpose()
}

/// Writes field `key`.
pub fn put<T: HeaderValue>(ext: &mut ExtFields, key: &'static str, value: &T) {
    ext.insert_with(key, |out| value.write_text(out));
}

/// Writes field `key` when present.
pub fn put_opt<T: HeaderValue>(ext: &mut ExtFields, key: &'static str, value: &Option<T>) {
    if let Some(v) = value {
        put(ext, key, v);
    }
}

/// Declares a header struct and its [`CommandHeader`] impl: `req` marks a required field, `opt`
/// an optional one (the field becomes `Option<T>`). `[rpc]` after the name embeds [`RpcHeader`].
macro_rules! command_header {
    (@ty req $ty:ty) => { $ty };
    (@ty opt $ty:ty) => { Option<$ty> };
    (@put req $ext:ident, $key:literal, $v:expr) => { $crate::headers::put($ext, $key, $v) };
    (@put opt $ext:ident, $key:literal, $v:expr) => { $crate::headers::put_opt($ext, $key, $v) };
    (@get req $ext:ident, $key:literal, $ty:ty) => { $crate::headers::required::<$ty>($ext, $key) };
    (@get opt $ext:ident, $key:literal, $ty:ty) => { $crate::headers::optional::<$ty>($ext, $key) };
    (@required req) => { true };
    (@required opt) => { false };
    (@has_rpc) => { false };
    (@has_rpc $rpc:ident) => { true };
    (
        $(#[$meta:meta])*
        pub struct $name:ident $([$rpc:ident])? {
            $( $(#[$fmeta:meta])* $kind:ident $field:ident : $ty:ty => $key:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: command_header!(@ty $kind $ty), )*
            $(
                /// Inherited `RpcRequestHeader` fields.
                pub $rpc: $crate::headers::RpcHeader,
            )?
        }

        impl $crate::headers::HeaderSpec for $name {
            const FIELDS: &'static [$crate::headers::FieldSpec] = &[
                $($crate::headers::FieldSpec {
                    key: $key,
                    kind: <$ty as $crate::headers::HeaderValue>::KIND,
                    required: command_header!(@required $kind),
                },)*
            ];
            const HAS_RPC: bool = command_header!(@has_rpc $($rpc)?);
        }

        impl $crate::headers::CommandHeader for $name {
            fn to_ext_fields(&self, ext: &mut $crate::command::ExtFields) {
                $( command_header!(@put $kind ext, $key, &self.$field); )*
                $( $crate::headers::CommandHeader::to_ext_fields(&self.$rpc, ext); )?
            }

            fn from_ext_fields(
                ext: &$crate::command::ExtFields,
            ) -> ::std::result::Result<Self, $crate::error::ProtocolError> {
                Ok($name {
                    $( $field: command_header!(@get $kind ext, $key, $ty)?, )*
                    $( $rpc: $crate::headers::CommandHeader::from_ext_fields(ext)?, )?
                })
            }
        }
    };
}

pub(crate) use command_header;

command_header! {
    /// Keys every `RpcRequestHeader` (and `TopicRequestHeader`, for `lo`) may carry. Servers
    /// ignore them unless they implement static topics or a proxy; clients set `bname`.
    pub struct RpcHeader {
        /// Namespace.
        opt namespace: String => "ns",
        /// The resource names are already namespaced.
        opt namespaced: bool => "nsd",
        /// Target broker name.
        opt broker_name: String => "bname",
        /// Sent oneway.
        opt oneway: bool => "oway",
        /// Logical queue (static topic) request.
        opt logical: bool => "lo",
    }
}

/// Typed access to a command's header.
pub trait CommandHeaderExt {
    /// Parses the ext fields as `H` (an absent map reads as empty, so required keys are reported).
    fn decode_header<H: CommandHeader>(&self) -> Result<H>;
    /// Writes `header` into the ext fields, creating the map if needed.
    fn encode_header<H: CommandHeader>(&mut self, header: &H);
}

impl CommandHeaderExt for RemotingCommand {
    fn decode_header<H: CommandHeader>(&self) -> Result<H> {
        match &self.ext_fields {
            Some(ext) => H::from_ext_fields(ext),
            None => H::from_ext_fields(&ExtFields::new()),
        }
    }

    fn encode_header<H: CommandHeader>(&mut self, header: &H) {
        header.to_ext_fields(self.ext_mut());
    }
}

/// A request with `code` carrying `header`.
pub fn request_with_header<H: CommandHeader>(code: impl Into<i32>, header: &H) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(code);
    cmd.encode_header(header);
    cmd
}

/// A response with `code` carrying `header`.
pub fn response_with_header<H: CommandHeader>(code: impl Into<i32>, header: &H) -> RemotingCommand {
    let mut cmd = RemotingCommand::response(code, None);
    cmd.encode_header(header);
    cmd
}

/// Parses `T` from `ext`, for headers whose fields are all optional (never fails on absence).
pub fn decode_or_default<T: CommandHeader + Default>(ext: Option<&ExtFields>) -> Result<T> {
    ext.map_or_else(|| Ok(T::default()), T::from_ext_fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::RequestCode;

    command_header! {
        /// Test header.
        pub struct Probe [rpc] {
            req topic: String => "topic",
            req queue_id: i32 => "queueId",
            opt offset: i64 => "offset",
            opt flag: bool => "flag",
        }
    }

    #[test]
    fn numbers_are_written_as_display_writes_them() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut samples = vec![
            0,
            1,
            -1,
            9,
            10,
            -10,
            i64::MAX,
            i64::MIN,
            i64::from(i32::MIN),
        ];
        for _ in 0..2_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            // Every magnitude, both signs.
            samples.push((seed as i64) >> (seed % 64));
        }
        for v in samples {
            let mut out = String::from("x");
            write_decimal(&mut out, v);
            assert_eq!(out, format!("x{v}"));
            if let Ok(small) = i32::try_from(v) {
                let mut out = String::new();
                small.write_text(&mut out);
                assert_eq!(out, small.to_string());
            }
        }
    }

    #[test]
    fn required_optional_and_errors() {
        let mut ext = ExtFields::new();
        assert_eq!(
            Probe::from_ext_fields(&ext),
            Err(ProtocolError::MissingField("topic"))
        );
        ext.insert("topic", "T");
        assert_eq!(
            Probe::from_ext_fields(&ext),
            Err(ProtocolError::MissingField("queueId"))
        );
        ext.insert("queueId", "x1");
        assert_eq!(
            Probe::from_ext_fields(&ext),
            Err(ProtocolError::MalformedField {
                field: "queueId",
                value: "x1".into()
            })
        );
        ext.insert("queueId", "-3");
        ext.insert("flag", "TRUE");
        ext.insert("bname", "broker-a");
        let p = Probe::from_ext_fields(&ext).unwrap();
        assert_eq!(p.queue_id, -3);
        assert_eq!(p.offset, None);
        assert_eq!(p.flag, Some(true));
        assert_eq!(p.rpc.broker_name.as_deref(), Some("broker-a"));
        ext.insert("flag", "yes");
        assert!(matches!(
            Probe::from_ext_fields(&ext),
            Err(ProtocolError::MalformedField { field: "flag", .. })
        ));
        ext.insert("flag", "false");
        ext.insert("offset", "99999999999");
        assert_eq!(
            Probe::from_ext_fields(&ext).unwrap().offset,
            Some(99_999_999_999)
        );
    }

    #[test]
    fn writes_decimal_and_omits_none() {
        let p = Probe {
            topic: "T".into(),
            queue_id: 2,
            offset: None,
            flag: Some(false),
            rpc: RpcHeader::default(),
        };
        let cmd = request_with_header(RequestCode::PullMessage, &p);
        let fields: Vec<_> = cmd.ext_fields.as_ref().unwrap().iter().collect();
        assert_eq!(
            fields,
            vec![("topic", "T"), ("queueId", "2"), ("flag", "false")]
        );
        assert_eq!(cmd.decode_header::<Probe>().unwrap(), p);
        let empty = RemotingCommand::request(1);
        assert_eq!(
            empty.decode_header::<Probe>(),
            Err(ProtocolError::MissingField("topic"))
        );
        assert_eq!(
            decode_or_default::<RpcHeader>(None).unwrap(),
            RpcHeader::default()
        );
    }
}
