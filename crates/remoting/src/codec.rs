//! `RemotingCodec`: the frame codec as a tokio-util [`Decoder`]/[`Encoder`].
//!
//! All the byte-level work lives in `comet_protocol::frame`, which is I/O free and unit-tested on
//! its own; this adapter only lets `FramedRead`/`FramedWrite` drive it. An announced length over
//! the 16 MiB limit is rejected as soon as the 4-byte prefix is buffered, so a hostile peer cannot
//! make the reader buffer a huge frame before it is refused.

use bytes::BytesMut;
use comet_protocol::RemotingCommand;
use comet_protocol::frame;
use tokio_util::codec::{Decoder, Encoder};

use crate::error::RemotingError;

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
    use bytes::{BufMut, Bytes};
    use comet_protocol::limits::MAX_FRAME_LEN;
    use comet_protocol::{ProtocolError, SerializeType};

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
    fn encoding_an_unrepresentable_command_fails() {
        let mut codec = RemotingCodec::new();
        let mut cmd = RemotingCommand::request(200_050);
        cmd.serialize_type = SerializeType::RocketMq;
        let mut dst = BytesMut::new();
        assert!(codec.encode(cmd, &mut dst).is_err());
        assert!(dst.is_empty());
    }
}
