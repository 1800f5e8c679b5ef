//! Frame layout: `length: i32 | serType<<24 | headerLen: i32 | header | body`, where `length`
//! counts everything after itself. [`decode_frame`] is incremental: it returns `Ok(None)` until a
//! whole frame is buffered, and rejects an announced length over [`MAX_FRAME_LEN`] before buffering it.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::command::{RemotingCommand, SerializeType};
use crate::error::{ProtocolError, Result};
use crate::header;
use crate::limits::{MAX_FRAME_LEN, MAX_HEADER_LEN};

/// Appends one whole frame for `cmd` to `dst`.
pub fn encode(cmd: &RemotingCommand, dst: &mut BytesMut) -> Result<()> {
    let start = dst.len();
    dst.reserve(8 + 160 + cmd.body_len());
    dst.put_u64(0); // length and serType/headerLen, patched below
    if let Err(e) = header::encode(cmd, dst) {
        dst.truncate(start);
        return Err(e);
    }
    let header_len = dst.len() - start - 8;
    if header_len > MAX_HEADER_LEN {
        dst.truncate(start);
        return Err(ProtocolError::TooLarge {
            what: "header",
            len: header_len,
            max: MAX_HEADER_LEN,
        });
    }
    let total = 4 + header_len + cmd.body_len();
    if total > MAX_FRAME_LEN {
        dst.truncate(start);
        return Err(ProtocolError::FrameTooLarge {
            len: total,
            max: MAX_FRAME_LEN,
        });
    }
    for part in cmd.body.iter().chain(&cmd.body_parts) {
        dst.put_slice(part);
    }
    let mark = ((cmd.serialize_type.code() as u32) << 24) | header_len as u32;
    dst[start..start + 4].copy_from_slice(&(total as u32).to_be_bytes());
    dst[start + 4..start + 8].copy_from_slice(&mark.to_be_bytes());
    Ok(())
}

/// Encodes `cmd` into a fresh buffer.
pub fn encode_to_bytes(cmd: &RemotingCommand) -> Result<Bytes> {
    let mut buf = BytesMut::new();
    encode(cmd, &mut buf)?;
    Ok(buf.freeze())
}

/// Takes one frame off the front of `src` if a whole one is buffered; otherwise makes room in
/// `src` for the rest of the frame.
pub fn decode_frame(src: &mut BytesMut) -> Result<Option<RemotingCommand>> {
    decode_frame_growing(src, 0)
}

/// [`decode_frame`] that, when a partly buffered frame does not fit in `src`, grows it by at
/// least `min_growth` bytes. Decoded frames share `src`'s memory, so growing it allocates anew and
/// copies the partial frame: a reader of large frames grows in larger steps to do that rarely.
pub fn decode_frame_growing(
    src: &mut BytesMut,
    min_growth: usize,
) -> Result<Option<RemotingCommand>> {
    if src.len() < 4 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([src[0], src[1], src[2], src[3]]) as usize;
    if len > MAX_FRAME_LEN {
        // An HTTP server's answer to a frame begins with `HTTP/1.1 ...`; read as a length
        // prefix it is 1.2 GB. Said plainly, it tells a user the port is a web one.
        if src.starts_with(b"HTTP") {
            return Err(ProtocolError::HttpPeer);
        }
        return Err(ProtocolError::FrameTooLarge {
            len,
            max: MAX_FRAME_LEN,
        });
    }
    if len < 4 {
        return Err(ProtocolError::FrameTooSmall(len));
    }
    if src.len() < 4 + len {
        let missing = 4 + len - src.len();
        if missing > src.capacity() - src.len() {
            src.reserve(missing.max(min_growth));
        }
        return Ok(None);
    }
    src.advance(4);
    let frame = src.split_to(len).freeze();
    decode(frame).map(Some)
}

/// Decodes a frame whose length prefix has already been stripped.
pub fn decode(mut frame: Bytes) -> Result<RemotingCommand> {
    if frame.len() < 4 {
        return Err(ProtocolError::FrameTooSmall(frame.len()));
    }
    let mark = frame.get_u32();
    let ser_code = (mark >> 24) as u8;
    let header_len = (mark & 0x00FF_FFFF) as usize;
    let ser =
        SerializeType::from_code(ser_code).ok_or(ProtocolError::UnknownSerializeType(ser_code))?;
    if header_len > frame.len() {
        return Err(ProtocolError::HeaderLength {
            header_len,
            frame_len: frame.len() + 4,
        });
    }
    let header_bytes = frame.split_to(header_len);
    let mut cmd = header::decode(ser, &header_bytes)?;
    cmd.body = if frame.is_empty() { None } else { Some(frame) };
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::LanguageCode;

    fn sample(ser: SerializeType) -> RemotingCommand {
        let mut cmd = RemotingCommand::request(11).with_body(Bytes::from_static(b"payload"));
        cmd.serialize_type = ser;
        cmd.language = LanguageCode::Go;
        cmd.opaque = 9;
        cmd.ext_mut().insert("topic", "T");
        cmd
    }

    #[test]
    fn body_parts_encode_as_one_body() {
        let mut parts = sample(SerializeType::Json);
        parts.body = Some(Bytes::from_static(b"first"));
        parts.body_parts = vec![
            Bytes::from_static(b"-second"),
            Bytes::from_static(b"-third"),
        ];
        let mut joined = parts.clone();
        joined.body = Some(Bytes::from_static(b"first-second-third"));
        joined.body_parts.clear();
        assert_eq!(parts.body_len(), 18);
        assert_eq!(parts.body_bytes(), joined.body);
        let (mut a, mut b) = (BytesMut::new(), BytesMut::new());
        assert!(encode(&parts, &mut a).is_ok() && encode(&joined, &mut b).is_ok());
        assert_eq!(a, b);
        let decoded = decode_frame(&mut a).ok().flatten();
        assert_eq!(decoded, Some(joined), "decoded, the parts are the body");
    }

    #[test]
    fn roundtrip_both_codecs_incrementally() {
        for ser in [SerializeType::Json, SerializeType::RocketMq] {
            let cmd = sample(ser);
            let bytes = encode_to_bytes(&cmd).unwrap();
            let mut buf = BytesMut::new();
            for (i, b) in bytes.iter().enumerate() {
                buf.put_u8(*b);
                let got = decode_frame(&mut buf).unwrap();
                if i + 1 < bytes.len() {
                    assert!(got.is_none());
                } else {
                    assert_eq!(got, Some(cmd.clone()));
                }
            }
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn an_http_answer_is_named_as_such() {
        let mut buf = BytesMut::from(&b"HTTP/1.1 400 Bad Request\r\n\r\n"[..]);
        assert_eq!(decode_frame(&mut buf), Err(ProtocolError::HttpPeer));
    }

    #[test]
    fn oversized_and_bad_frames_are_errors() {
        let mut buf = BytesMut::from(&((MAX_FRAME_LEN + 1) as u32).to_be_bytes()[..]);
        assert!(matches!(
            decode_frame(&mut buf),
            Err(ProtocolError::FrameTooLarge { .. })
        ));
        let mut buf = BytesMut::from(&[0u8, 0, 0, 2, 0, 0][..]);
        assert!(decode_frame(&mut buf).is_err());
        // header length pointing past the frame
        let mut buf = BytesMut::new();
        buf.put_u32(8);
        buf.put_u32(100);
        buf.put_u32(0);
        assert!(decode_frame(&mut buf).is_err());
        // unknown serialize type
        let mut buf = BytesMut::new();
        buf.put_u32(4);
        buf.put_u32(7 << 24);
        assert!(matches!(
            decode_frame(&mut buf),
            Err(ProtocolError::UnknownSerializeType(7))
        ));
    }
}
