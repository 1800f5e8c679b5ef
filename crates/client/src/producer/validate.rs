//! Name rules of topics and producer groups, checked before anything is sent.

use comet_protocol::limits::MAX_TOPIC_LEN;
use comet_protocol::naming::{
    AUTO_CREATE_TOPIC_KEY_TOPIC, SCHEDULE_TOPIC, validate_group, validate_topic_within,
};

use super::DEFAULT_PRODUCER_GROUP;
use crate::error::{ClientError, Result};

/// Topic rules of the Java `Validators.checkTopic`: not blank, only `%|a-zA-Z0-9_-`, at most
/// [`MAX_TOPIC_LEN`] bytes (retry topics included, unlike the broker's rule), and not a system
/// topic a producer may not send to (TBW102, SCHEDULE_TOPIC_XXXX).
pub fn check_topic(topic: &str) -> Result<()> {
    validate_topic_within(topic, MAX_TOPIC_LEN)
        .map_err(|e| ClientError::IllegalArgument(e.to_string()))?;
    if topic == AUTO_CREATE_TOPIC_KEY_TOPIC || topic == SCHEDULE_TOPIC {
        return Err(ClientError::IllegalArgument(format!(
            "sending to the system topic {topic} is not allowed"
        )));
    }
    Ok(())
}

/// Group rules of the Java `Validators.checkGroup`, and the default group is refused.
pub fn check_group(group: &str) -> Result<()> {
    validate_group(group).map_err(|e| ClientError::IllegalArgument(e.to_string()))?;
    if group == DEFAULT_PRODUCER_GROUP {
        return Err(ClientError::IllegalArgument(format!(
            "the producer group may not be {DEFAULT_PRODUCER_GROUP}; name your group"
        )));
    }
    Ok(())
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
