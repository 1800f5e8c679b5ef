//! Explicit bounds on everything the protocol decodes.
//!
//! Every decoder checks its input against one of these before it allocates, so a hostile peer
//! can never make us reserve more than a frame's worth of memory or index past a buffer.

/// Largest frame accepted or produced (the Java default `com.rocketmq.remoting.frameMaxLength`).
pub const MAX_FRAME_LEN: usize = 16 * 1024 * 1024;
/// Largest header (the low 24 bits of the second frame int can express at most this).
pub const MAX_HEADER_LEN: usize = 0x00FF_FFFF;
/// Largest message body a broker accepts (`maxMessageSize`, 4 MiB).
pub const MAX_MESSAGE_SIZE: usize = 4 * 1024 * 1024;
/// Longest topic name (RocketMQ `TOPIC_MAX_LENGTH`).
pub const MAX_TOPIC_LEN: usize = 127;
/// Longest consumer/producer group name.
pub const MAX_GROUP_LEN: usize = 255;
/// Longest properties string of one message (RocketMQ `maxPropertiesSize`: stored as a u16 length).
pub const MAX_PROPERTIES_LEN: usize = i16::MAX as usize;
/// Most ext fields one header may carry; well above any real command.
pub const MAX_EXT_FIELDS: usize = 1024;
/// Most messages in one batch send.
pub const MAX_BATCH_MESSAGES: usize = 16 * 1024;
