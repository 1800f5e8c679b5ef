//! ROCKETMQ binary header codec (serialize type 1).
//!
//! Layout: code i16, language u8, version i16, opaque i32, flag i32, remarkLen i32 + remark,
//! extLen i32 + entries (keyLen i16, key, valLen i32, value). Every length is checked against the
//! bytes that remain before anything is read or allocated.

use bytes::{BufMut, BytesMut};

use crate::command::{ExtFields, LanguageCode, RemotingCommand, SerializeType};
use crate::error::{ProtocolError, Result};
use crate::limits::MAX_EXT_FIELDS;

const FIXED_LEN: usize = 21;

/// Appends `cmd`'s header in the binary codec. Fails only when `code` or `version` exceed i16.
pub fn encode(cmd: &RemotingCommand, dst: &mut BytesMut) -> Result<()> {
    let code = i16::try_from(cmd.code).map_err(|_| ProtocolError::CodeOutOfRange(cmd.code))?;
    let version = i16::try_from(cmd.version).unwrap_or(i16::MAX);
    let remark = cmd.remark.as_deref().unwrap_or("");
    let ext_len: usize = cmd
        .ext_fields
        .as_ref()
        .map(|e| e.iter().map(|(k, v)| 2 + k.len() + 4 + v.len()).sum())
        .unwrap_or(0);
    dst.reserve(FIXED_LEN + remark.len() + 4 + ext_len);
    dst.put_i16(code);
    dst.put_u8(cmd.language.code());
    dst.put_i16(version);
    dst.put_i32(cmd.opaque);
    dst.put_i32(cmd.flag);
    dst.put_i32(remark.len() as i32);
    dst.put_slice(remark.as_bytes());
    dst.put_i32(ext_len as i32);
    if let Some(ext) = &cmd.ext_fields {
        for (k, v) in ext.iter() {
            dst.put_i16(k.len() as i16);
            dst.put_slice(k.as_bytes());
            dst.put_i32(v.len() as i32);
            dst.put_slice(v.as_bytes());
        }
    }
    Ok(())
}

/// A bounds-checked big-endian reader over a byte slice.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| {
                ProtocolError::BinaryHeader(format!(
                    "{what} needs {n} bytes at offset {}, header has {}",
                    self.pos,
                    self.buf.len()
                ))
            })?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn i16(&mut self, what: &str) -> Result<i16> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self, what: &str) -> Result<i32> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn len(&mut self, v: i64, what: &str) -> Result<usize> {
        usize::try_from(v).map_err(|_| ProtocolError::BinaryHeader(format!("negative {what} {v}")))
    }

    fn str(&mut self, n: usize, what: &str) -> Result<&'a str> {
        let b = self.take(n, what)?;
        std::str::from_utf8(b)
            .map_err(|_| ProtocolError::BinaryHeader(format!("{what} is not UTF-8")))
    }
}

/// Decodes a binary header. A remark of length 0 decodes to `None`; duplicate keys keep the last value.
pub fn decode(src: &[u8]) -> Result<RemotingCommand> {
    let mut r = Reader { buf: src, pos: 0 };
    let code = r.i16("code")? as i32;
    let language = LanguageCode::from_code(r.take(1, "language")?[0]);
    let version = r.i16("version")? as i32;
    let opaque = r.i32("opaque")?;
    let flag = r.i32("flag")?;
    let remark_len = r.i32("remark length")?;
    let remark_len = r.len(remark_len as i64, "remark length")?;
    let remark = if remark_len == 0 {
        None
    } else {
        Some(r.str(remark_len, "remark")?.to_owned())
    };
    let ext_len = r.i32("ext fields length")?;
    let ext_len = r.len(ext_len as i64, "ext fields length")?;
    let ext_fields = if ext_len == 0 {
        None
    } else {
        let section = r.take(ext_len, "ext fields")?;
        let mut er = Reader {
            buf: section,
            pos: 0,
        };
        let mut ext = ExtFields::with_capacity(16);
        while er.pos < section.len() {
            if ext.len() >= MAX_EXT_FIELDS {
                return Err(ProtocolError::BinaryHeader(format!(
                    "more than {MAX_EXT_FIELDS} ext fields"
                )));
            }
            let kl = er.i16("key length")?;
            let kl = er.len(kl as i64, "key length")?;
            let key = er.str(kl, "key")?;
            let vl = er.i32("value length")?;
            let vl = er.len(vl as i64, "value length")?;
            let val = er.str(vl, "value")?;
            ext.insert(key, val);
        }
        Some(ext)
    };
    if r.pos != src.len() {
        return Err(ProtocolError::BinaryHeader(format!(
            "{} trailing bytes after header",
            src.len() - r.pos
        )));
    }
    Ok(RemotingCommand {
        code,
        language,
        version,
        opaque,
        flag,
        remark,
        ext_fields,
        body: None,
        body_parts: Vec::new(),
        serialize_type: SerializeType::RocketMq,
        hold: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let mut cmd = RemotingCommand::request(310);
        cmd.serialize_type = SerializeType::RocketMq;
        cmd.language = LanguageCode::Java;
        cmd.opaque = 42;
        cmd.remark = Some("hi".into());
        cmd.ext_mut().insert("a", "grp");
        cmd.ext_mut().insert("b", "TopicTest");
        let mut out = BytesMut::new();
        encode(&cmd, &mut out).unwrap();
        assert_eq!(decode(&out).unwrap(), cmd);
    }

    #[test]
    fn truncated_and_negative_lengths_are_errors() {
        let mut cmd = RemotingCommand::request(11);
        cmd.serialize_type = SerializeType::RocketMq;
        cmd.ext_mut().insert("topic", "t");
        let mut out = BytesMut::new();
        encode(&cmd, &mut out).unwrap();
        for n in 0..out.len() {
            assert!(decode(&out[..n]).is_err(), "prefix {n} decoded");
        }
        let mut bad = out.to_vec();
        bad[13..17].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(decode(&bad).is_err());
    }

    #[test]
    fn code_out_of_range() {
        let mut cmd = RemotingCommand::request(200_050);
        cmd.serialize_type = SerializeType::RocketMq;
        assert!(encode(&cmd, &mut BytesMut::new()).is_err());
    }
}
