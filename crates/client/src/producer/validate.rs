//! Name rules of topics and producer groups, checked before anything is sent.

use comet_protocol::headers::AUTO_CREATE_TOPIC_KEY_TOPIC;
use comet_protocol::limits::{MAX_GROUP_LEN, MAX_TOPIC_LEN};

use super::DEFAULT_PRODUCER_GROUP;
use crate::error::{ClientError, Result};

/// The delay-queue topic, which producers may not send to directly.
const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";

/// Topic rules of the Java `Validators.checkTopic` and of the broker: not blank, at most
/// [`MAX_TOPIC_LEN`] characters of `%|a-zA-Z0-9_-`, and not a system topic a producer may not
/// send to (TBW102, SCHEDULE_TOPIC_XXXX).
pub fn check_topic(topic: &str) -> Result<()> {
    if topic.trim().is_empty() {
        return Err(ClientError::IllegalArgument(
            "the topic is blank".to_string(),
        ));
    }
    if topic.len() > MAX_TOPIC_LEN {
        return Err(ClientError::IllegalArgument(format!(
            "the topic {topic} is longer than {MAX_TOPIC_LEN} characters"
        )));
    }
    if !topic.bytes().all(is_legal_name_byte) {
        return Err(ClientError::IllegalArgument(format!(
            "the topic {topic} contains characters other than %|a-zA-Z0-9_-"
        )));
    }
    if topic == AUTO_CREATE_TOPIC_KEY_TOPIC || topic == SCHEDULE_TOPIC {
        return Err(ClientError::IllegalArgument(format!(
            "sending to the system topic {topic} is not allowed"
        )));
    }
    Ok(())
}

/// Group rules of the Java `Validators.checkGroup`.
pub fn check_group(group: &str) -> Result<()> {
    if group.trim().is_empty() {
        return Err(ClientError::IllegalArgument(
            "the producer group is blank".to_string(),
        ));
    }
    if group.len() > MAX_GROUP_LEN {
        return Err(ClientError::IllegalArgument(format!(
            "the group {group} is longer than {MAX_GROUP_LEN} characters"
        )));
    }
    if !group.bytes().all(is_legal_name_byte) {
        return Err(ClientError::IllegalArgument(format!(
            "the group {group} contains characters other than %|a-zA-Z0-9_-"
        )));
    }
    if group == DEFAULT_PRODUCER_GROUP {
        return Err(ClientError::IllegalArgument(format!(
            "the producer group may not be {DEFAULT_PRODUCER_GROUP}; name your group"
        )));
    }
    Ok(())
}

fn is_legal_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_and_group_validation() {
        assert!(check_topic("TopicTest").is_ok());
        assert!(check_topic("%RETRY%group-1").is_ok());
        assert!(check_topic("").is_err());
        assert!(check_topic("bad topic").is_err());
        assert!(check_topic(&"t".repeat(MAX_TOPIC_LEN + 1)).is_err());
        assert!(check_topic("TBW102").is_err());
        assert!(check_group("pg").is_ok());
        assert!(check_group("DEFAULT_PRODUCER").is_err());
        assert!(check_group("a/b").is_err());
    }
}
