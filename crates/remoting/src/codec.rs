//! `RemotingCodec`: the frame codec as a tokio-util [`Decoder`]/[`Encoder`].
//!
//! All the byte-level work lives in `comet_protocol::frame`, which is I/O free and unit-tested on
//! its own; this adapter only lets `FramedRead`/`FramedWrite` drive it. An announced length over
//! the 16 MiB limit is rejected as soon as the 4-byte prefix is buffered, so a hostile peer cannot
//! make the reader buffer a huge frame before it is refused.

use bytes::{Bytes, BytesMut};
use comet_protocol::frame;
use comet_protocol::limits::MAX_FRAME_LEN;
use comet_protocol::{ProtocolError, RemotingCommand};
use tokio_util::codec::{Decoder, Encoder};

use crate::error::RemotingError;

/// Size of a frame's big-endian length prefix, which counts every byte after itself.
const FRAME_LENGTH_PREFIX: usize = 4;

/// Initial capacity of a frame head: the 8-byte prefix plus a typical JSON header.
const HEAD_CAPACITY_HINT: usize = 256;

/// Stateless codec for RocketMQ remoting frames (both header serialize types).
#[derive(Debug, Clone, Copy, Default)]
pub struct RemotingCodec;

impl RemotingCodec {
    pub fn new() -> Self {
        Self
    }
}

impl Decoder for RemotingCodec {
    type Item = RemotingCommand;
    type Error = RemotingError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<RemotingCommand>, RemotingError> {
        Ok(frame::decode_frame(src)?)
    }
}

/// Appends one frame to `dst`; on failure `dst` is left exactly as it was, so a command that cannot
/// be encoded never leaves a torn frame in front of the next one.
pub fn encode_frame(cmd: &RemotingCommand, dst: &mut BytesMut) -> Result<(), RemotingError> {
    let start = dst.len();
    frame::encode(cmd, dst).map_err(|e| {
        dst.truncate(start);
        RemotingError::from(e)
    })
}

/// One encoded frame as the writer queues it: the length prefix and header in `head`, the body
/// kept as the command's own buffer. A pull body (often a slice of the mapped CommitLog) is
/// therefore never copied just to be queued, and large bodies are written straight from it.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    pub head: Bytes,
    pub body: Option<Bytes>,
    /// Worth one turn of the scheduler before it is written: frames like it are likely being
    /// queued at the same moment, so the writer gathers them first (see
    /// `connection::write_loop`). Set on a server's response to a request that waited, and on
    /// a client's request sent with [`crate::RemotingClient::invoke_gathered`].
    pub gather: bool,
}

impl Frame {
    /// Bytes this frame puts on the wire (and pins in memory until written).
    pub(crate) fn len(&self) -> usize {
        self.head.len() + self.body.as_ref().map_or(0, Bytes::len)
    }
}

/// Encodes `cmd` as a [`Frame`] without copying its body. Same bytes on the wire as
/// [`encode_frame`], same limits.
pub(crate) fn encode_split(mut cmd: RemotingCommand) -> Result<Frame, RemotingError> {
    let body = cmd.body.take();
    let body_len = body.as_ref().map_or(0, Bytes::len);
    let mut head = BytesMut::with_capacity(HEAD_CAPACITY_HINT);
    frame::encode(&cmd, &mut head)?;
    // `head` is a complete body-less frame: patch its length prefix to count the body too.
    let total = head.len().saturating_sub(FRAME_LENGTH_PREFIX) + body_len;
    if total > MAX_FRAME_LEN {
        return Err(ProtocolError::FrameTooLarge {
            len: total,
            max: MAX_FRAME_LEN,
        }
        .into());
    }
    let prefix = u32::try_from(total).map_err(|_| ProtocolError::FrameTooLarge {
        len: total,
        max: MAX_FRAME_LEN,
    })?;
    if let Some(slot) = head.get_mut(..FRAME_LENGTH_PREFIX) {
        slot.copy_from_slice(&prefix.to_be_bytes());
    }
    Ok(Frame {
        head: head.freeze(),
        body,
        gather: false,
    })
}

impl Encoder<RemotingCommand> for RemotingCodec {
    type Error = RemotingError;

    fn encode(&mut self, item: RemotingCommand, dst: &mut BytesMut) -> Result<(), RemotingError> {
        encode_frame(&item, dst)
    }
}

impl Encoder<&RemotingCommand> for RemotingCodec {
    type Error = RemotingError;

    fn encode(&mut self, item: &RemotingCommand, dst: &mut BytesMut) -> Result<(), RemotingError> {
        encode_frame(item, dst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;
    use comet_protocol::SerializeType;

    fn sample(ser: SerializeType, opaque: i32) -> RemotingCommand {
        let mut cmd = RemotingCommand::request(310).with_body(Bytes::from(vec![7u8; 300]));
        cmd.serialize_type = ser;
        cmd.opaque = opaque;
        cmd.ext_mut().insert("b", "TopicTest");
        cmd.ext_mut().insert("e", "3");
        cmd
    }

    #[test]
    fn back_to_back_frames_decode_in_order_from_partial_input() {
        let mut codec = RemotingCodec::new();
        let sent = [
            sample(SerializeType::Json, 1),
            sample(SerializeType::RocketMq, 2),
            RemotingCommand::response(3, Some("nope".into())),
        ];
        let mut wire = BytesMut::new();
        for cmd in &sent {
            codec.encode(cmd, &mut wire).unwrap();
        }
        // Feed the stream in uneven chunks; frames must come out whole and in order.
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for chunk in wire.chunks(7) {
            buf.extend_from_slice(chunk);
            while let Some(cmd) = codec.decode(&mut buf).unwrap() {
                got.push(cmd);
            }
        }
        assert_eq!(got.as_slice(), &sent);
        assert!(buf.is_empty());
    }

    #[test]
    fn oversized_length_is_refused_before_buffering() {
        let mut codec = RemotingCodec::new();
        let mut buf = BytesMut::new();
        buf.put_u32((MAX_FRAME_LEN + 1) as u32);
        let err = codec.decode(&mut buf).unwrap_err();
        assert!(matches!(
            err,
            RemotingError::Protocol(ProtocolError::FrameTooLarge { .. })
        ));
    }

    #[test]
    fn garbage_header_is_an_error() {
        let mut codec = RemotingCodec::new();
        let mut buf = BytesMut::new();
        buf.put_u32(4 + 5);
        buf.put_u32(5); // JSON, header length 5
        buf.put_slice(b"{{{{{");
        assert!(matches!(
            codec.decode(&mut buf),
            Err(RemotingError::Protocol(_))
        ));
    }

    #[test]
    fn split_encoding_matches_the_contiguous_frame() {
        for ser in [SerializeType::Json, SerializeType::RocketMq] {
            for body in [None, Some(Bytes::from(vec![9u8; 70_000]))] {
                let mut cmd = sample(ser, 11);
                cmd.body = body;
                let mut whole = BytesMut::new();
                encode_frame(&cmd, &mut whole).unwrap();
                let split = encode_split(cmd).unwrap();
                let mut joined = split.head.to_vec();
                joined.extend_from_slice(split.body.as_deref().unwrap_or_default());
                assert_eq!(joined, whole.to_vec());
                assert_eq!(split.len(), whole.len());
            }
        }
    }

    #[test]
    fn split_encoding_refuses_an_oversized_body() {
        let cmd = RemotingCommand::request(310).with_body(Bytes::from(vec![0u8; MAX_FRAME_LEN]));
        assert!(matches!(
            encode_split(cmd),
            Err(RemotingError::Protocol(ProtocolError::FrameTooLarge { .. }))
        ));
    }

    #[test]
    fn encoding_an_unrepresentable_command_fails() {
        let mut codec = RemotingCodec::new();
        let mut cmd = RemotingCommand::request(200_050);
        cmd.serialize_type = SerializeType::RocketMq;
        let mut dst = BytesMut::new();
        assert!(codec.encode(cmd, &mut dst).is_err());
        assert!(dst.is_empty());
    }
}
