//! A topic's message type: the 5.x `message.type` attribute naming the one type of message a
//! topic takes (NORMAL, FIFO, DELAY, TRANSACTION, or MIXED for all four; absent means NORMAL).
//! The admin path checks the attribute's value; the gRPC endpoint checks sends against it.

use comet_protocol::body::TopicConfig;

/// The topic attribute naming the message types a topic takes.
pub const MESSAGE_TYPE_ATTRIBUTE: &str = "message.type";
/// The values `message.type` may take (UNSPECIFIED included, as Apache's attribute allows it).
pub const MESSAGE_TYPE_VALUES: [&str; 6] = [
    "UNSPECIFIED",
    "NORMAL",
    "FIFO",
    "DELAY",
    "TRANSACTION",
    "MIXED",
];
/// The `message.type` value of a topic taking every type.
pub const MIXED: &str = "MIXED";

/// The `message.type` value of `config` (with or without the `+` of an attribute change),
/// `NORMAL` when absent.
pub fn topic_type_name(config: &TopicConfig) -> &str {
    config
        .attributes
        .get(MESSAGE_TYPE_ATTRIBUTE)
        .or_else(|| config.attributes.get(&format!("+{MESSAGE_TYPE_ATTRIBUTE}")))
        .map_or("NORMAL", String::as_str)
}

/// Whether `value` is a `message.type` a topic may be given.
pub fn is_valid_type_name(value: &str) -> bool {
    MESSAGE_TYPE_VALUES.contains(&value)
}
