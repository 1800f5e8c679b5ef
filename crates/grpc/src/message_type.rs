//! Topic message types as RocketMQ 5.x checks them on gRPC sends.
//!
//! A topic declares the one type of message it takes in its `message.type` attribute: NORMAL,
//! FIFO, DELAY, TRANSACTION, or MIXED for all four (absent means NORMAL; any other value takes
//! nothing). A message's type is read from the properties it is stored with, not from the type
//! the client declared: a prepared transaction half (`TRAN_MSG=true`) is TRANSACTION, else a
//! message with a delay level or a timer property is DELAY, else one with a sharding key
//! (`__SHARDINGKEY`, the message group) is FIFO, else NORMAL. With `enableTopicMessageTypeCheck`
//! on, a message whose type the topic does not take is refused with
//! MESSAGE_PROPERTY_CONFLICT_WITH_TYPE; retry and dead-letter topics take any type.
//!
//! Remoting sends are not checked: Apache's broker stores them whatever the topic's type (only
//! its proxy checks), and Comet's remoting port is the broker's.

use comet_grpc_proto::v2;
use comet_protocol::body::TopicConfig;
use comet_protocol::message::Properties;
use comet_protocol::message::properties::keys;
use comet_protocol::naming::is_retry_or_dlq;

use super::status;
use comet_broker::topic_message_type::{MIXED, topic_type_name};

/// The message types a topic accepts, from its `message.type` attribute.
pub fn accepted_types(config: &TopicConfig) -> Vec<v2::MessageType> {
    match topic_type_name(config).to_ascii_uppercase().as_str() {
        "NORMAL" => vec![v2::MessageType::Normal],
        "FIFO" => vec![v2::MessageType::Fifo],
        "DELAY" => vec![v2::MessageType::Delay],
        "TRANSACTION" => vec![v2::MessageType::Transaction],
        MIXED => vec![
            v2::MessageType::Normal,
            v2::MessageType::Fifo,
            v2::MessageType::Delay,
            v2::MessageType::Transaction,
        ],
        _ => vec![v2::MessageType::Unspecified],
    }
}

/// The type of a message from the properties it is stored with (see the module docs).
pub fn type_of(properties: &Properties) -> v2::MessageType {
    let delay_keys = [
        keys::DELAY_TIME_LEVEL,
        keys::TIMER_DELIVER_MS,
        keys::TIMER_DELAY_SEC,
        keys::TIMER_DELAY_MS,
    ];
    if properties.get(keys::TRANSACTION_PREPARED) == Some("true") {
        v2::MessageType::Transaction
    } else if delay_keys.iter().any(|k| properties.get(k).is_some()) {
        v2::MessageType::Delay
    } else if properties.get(keys::SHARDING_KEY).is_some() {
        v2::MessageType::Fifo
    } else {
        v2::MessageType::Normal
    }
}

/// Refuses a message of `properties` that topic `config` does not take.
pub fn check(topic: &str, config: &TopicConfig, properties: &Properties) -> Result<(), v2::Status> {
    if is_retry_or_dlq(topic) {
        return Ok(());
    }
    let kind = type_of(properties);
    let accepted = accepted_types(config);
    if accepted.contains(&kind) {
        return Ok(());
    }
    Err(status::of(
        v2::Code::MessagePropertyConflictWithType,
        format!(
            "topic {topic} is of message type {}, which does not take {} messages",
            topic_type_name(config),
            kind.as_str_name()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use comet_broker::topic_message_type::MESSAGE_TYPE_ATTRIBUTE;
    use comet_protocol::body::perm;

    fn props(pairs: &[(&str, &str)]) -> Properties {
        let mut p = Properties::new();
        for (k, v) in pairs {
            p.insert(k, v);
        }
        p
    }

    #[test]
    fn type_follows_apache_s_precedence() {
        use v2::MessageType::*;
        assert_eq!(type_of(&props(&[])), Normal);
        assert_eq!(type_of(&props(&[(keys::SHARDING_KEY, "g")])), Fifo);
        assert_eq!(
            type_of(&props(&[
                (keys::SHARDING_KEY, "g"),
                (keys::TIMER_DELIVER_MS, "1")
            ])),
            Delay
        );
        assert_eq!(type_of(&props(&[(keys::DELAY_TIME_LEVEL, "3")])), Delay);
        assert_eq!(
            type_of(&props(&[
                (keys::TRANSACTION_PREPARED, "true"),
                (keys::TIMER_DELAY_SEC, "5")
            ])),
            Transaction
        );
        assert_eq!(
            type_of(&props(&[(keys::TRANSACTION_PREPARED, "false")])),
            Normal
        );
    }

    #[test]
    fn topics_take_only_their_type_unless_mixed() {
        let mut config = TopicConfig::with_queues("T", 1, 1, perm::PERM_READ_WRITE);
        let delay = props(&[(keys::TIMER_DELIVER_MS, "1")]);
        let normal = props(&[]);
        assert!(check("T", &config, &normal).is_ok());
        assert_eq!(
            check("T", &config, &delay).unwrap_err().code(),
            v2::Code::MessagePropertyConflictWithType
        );
        config
            .attributes
            .insert(MESSAGE_TYPE_ATTRIBUTE.to_owned(), "DELAY".to_owned());
        assert!(check("T", &config, &delay).is_ok());
        assert!(check("T", &config, &normal).is_err());
        assert!(check("%RETRY%g", &config, &normal).is_ok());
        config
            .attributes
            .insert(MESSAGE_TYPE_ATTRIBUTE.to_owned(), MIXED.to_owned());
        assert!(check("T", &config, &normal).is_ok());
        assert!(check("T", &config, &delay).is_ok());
        config
            .attributes
            .insert(MESSAGE_TYPE_ATTRIBUTE.to_owned(), "UNSPECIFIED".to_owned());
        assert!(check("T", &config, &normal).is_err());
    }
}
