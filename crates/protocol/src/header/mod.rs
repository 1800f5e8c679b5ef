//! The two header codecs of the remoting protocol.
//!
//! A frame's second int carries the serialize type in its high byte; each frame is decoded by its
//! own type, whatever the connection used before (Java servers answer in their process default, not
//! in the request's codec). [`json`] is fastjson-compatible (alphabetical keys, nulls omitted) and is
//! what we send by default; [`binary`] is the compact ROCKETMQ codec.

pub mod binary;
pub mod json;
mod json_scan;

use bytes::BytesMut;

use crate::command::{RemotingCommand, SerializeType};
use crate::error::Result;

/// Appends the serialized header of `cmd`, in `cmd.serialize_type`, to `dst`.
pub fn encode(cmd: &RemotingCommand, dst: &mut BytesMut) -> Result<()> {
    match cmd.serialize_type {
        SerializeType::Json => {
            json::encode(cmd, dst);
            Ok(())
        }
        SerializeType::RocketMq => binary::encode(cmd, dst),
    }
}

/// Decodes a header of the given type into a command without body.
pub fn decode(ser: SerializeType, src: &[u8]) -> Result<RemotingCommand> {
    match ser {
        SerializeType::Json => json::decode(src),
        SerializeType::RocketMq => binary::decode(src),
    }
}
