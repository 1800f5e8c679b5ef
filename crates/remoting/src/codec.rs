//! `RemotingCodec`: the frame codec as a tokio-util [`Decoder`]/[`Encoder`].
//!
//! All the byte-level work lives in `comet_protocol::frame`, which is I/O free and unit-tested on
//! its own; this adapter only lets `FramedRead`/`FramedWrite` drive it. An announced length over
//! the 16 MiB limit is rejected as soon as the 4-byte prefix is buffered, so a hostile peer cannot
//! make the reader buffer a huge frame before it is refused.

use bytes::{Bytes, BytesMut};
use comet_protocol::frame;
use comet_protocol::limits::MAX_FRAME_LEN;
use comet_protocol::{ProtocolError, RemotingCommand, ResponseHold};
use tokio_util::codec::{Decoder, Encoder};

use crate::error::RemotingError;
use crate::limits::READ_BUFFER_GROWTH;

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

    /// A frame that does not fit grows the read buffer by at least [`READ_BUFFER_GROWTH`].
    /// Decoded frames keep sharing the buffer (a pull response's messages are slices of it), so
    /// growing it allocates anew and copies the partial frame over. Grown by the missing bytes
    /// alone, that happened for almost every pull response of a consumer catching up (6,257
    /// copies for 6,250 responses of 32 KiB, 14 % of its instructions); a larger step leaves room
    /// for the next frames too.
    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<RemotingCommand>, RemotingError> {
        Ok(frame::decode_frame_growing(src, READ_BUFFER_GROWTH)?)
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
/// kept as the command's own buffers (`body`, then `body_parts`). A pull body (slices of the
/// mapped CommitLog) is therefore never copied just to be queued, and large bodies are written
/// straight from them.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    pub head: Bytes,
    pub body: Option<Bytes>,
    /// The command's [`RemotingCommand::body_parts`], written after `body`.
    pub body_parts: Vec<Bytes>,
    /// Worth one turn of the scheduler before it is written: frames like it are likely being
    /// queued at the same moment, so the writer gathers them first (see
    /// `connection::write_loop`). Set on a server's response to a request that waited, and on
    /// a client's request sent with [`crate::RemotingClient::invoke_gathered`].
    pub gather: bool,
    /// A response that may leave only once the server's fence released this (see
    /// [`ResponseHold`]; `connection::write_loop`).
    pub hold: Option<ResponseHold>,
}

impl Frame {
    /// Bytes this frame puts on the wire (and pins in memory until written).
    pub(crate) fn len(&self) -> usize {
        self.head.len() + self.bodies().map(Bytes::len).sum::<usize>()
    }

    /// The body buffers in wire order.
    pub(crate) fn bodies(&self) -> impl Iterator<Item = &Bytes> {
        self.body.iter().chain(&self.body_parts)
    }
}

/// Encodes `cmd` as a [`Frame`] without copying its body. Same bytes on the wire as
/// [`encode_frame`], same limits.
pub(crate) fn encode_split(mut cmd: RemotingCommand) -> Result<Frame, RemotingError> {
    let body_len = cmd.body_len();
    let body = cmd.body.take();
    let body_parts = std::mem::take(&mut cmd.body_parts);
    let hold = cmd.hold.take();
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
        body_parts,
        gather: false,
        hold,
    })
}

/// `frame` with its header's code replaced by `code`, bodies kept: the answer a held response
/// gives when its hold expires. The head is decoded again, so the header is otherwise exactly
/// what the processor built.
pub(crate) fn recode(frame: &Frame, code: i32) -> Result<Frame, RemotingError> {
    let header_frame = frame
        .head
        .slice(FRAME_LENGTH_PREFIX.min(frame.head.len())..);
    let mut cmd = frame::decode(header_frame)?;
    cmd.code = code;
    cmd.body = frame.body.clone();
    cmd.body_parts = frame.body_parts.clone();
    let mut recoded = encode_split(cmd)?;
    recoded.gather = frame.gather;
    Ok(recoded)
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

    /// Frames of 32 KiB arriving in 8 KiB reads, as `FramedRead` drives the codec (reserve one
    /// byte, read into the spare capacity, decode what is complete), while every decoded frame
    /// stays alive as a consumer's messages do: the buffer moves (allocates anew and copies the
    /// partial frame) once per [`READ_BUFFER_GROWTH`] bytes, not once per frame.
    #[test]
    fn large_frames_kept_alive_move_the_read_buffer_rarely() {
        const FRAMES: usize = 64;
        const READ: usize = 8 * 1024;
        let frames: Vec<RemotingCommand> = (0..FRAMES)
            .map(|i| {
                let opaque = i32::try_from(i).unwrap_or(i32::MAX);
                let mut cmd =
                    RemotingCommand::response(0, None).with_body(vec![i as u8; 32 * 1024]);
                cmd.opaque = opaque;
                cmd
            })
            .collect();
        let mut wire = BytesMut::new();
        for f in &frames {
            encode_frame(f, &mut wire).unwrap_or_else(|e| panic!("encode: {e}"));
        }
        let mut codec = RemotingCodec::new();
        let mut src = BytesMut::with_capacity(crate::limits::READ_BUFFER_CAPACITY);
        let mut kept = Vec::new();
        let mut moves = 0;
        let mut arrived = 0;
        while arrived < wire.len() {
            // Decoding splits frames off the front; only a new allocation moves the end.
            let end = |b: &BytesMut| b.as_ptr() as usize + b.capacity();
            src.reserve(1);
            let before = end(&src);
            let n = READ
                .min(src.capacity() - src.len())
                .min(wire.len() - arrived);
            src.extend_from_slice(&wire[arrived..arrived + n]);
            arrived += n;
            while let Some(cmd) = codec
                .decode(&mut src)
                .unwrap_or_else(|e| panic!("decode: {e}"))
            {
                kept.push(cmd);
            }
            if end(&src) != before {
                moves += 1;
            }
        }
        assert_eq!(kept, frames);
        let bound = wire.len() / READ_BUFFER_GROWTH + 2;
        assert!(
            moves <= bound,
            "{moves} buffer moves for {FRAMES} frames (at most {bound})"
        );
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
