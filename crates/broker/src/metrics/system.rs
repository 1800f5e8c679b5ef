//! What the metrics label `is_system`: a topic the broker counts as a system topic, and a group
//! with the system prefix (Apache's metrics look at the prefix alone).

use crate::context::BrokerContext;

/// Apache's metrics call a group a system group by its prefix alone.
pub(super) fn is_system_group(group: &str) -> bool {
    comet_protocol::naming::has_system_group_prefix(group)
}

pub(super) fn is_system_topic(ctx: &BrokerContext, topic: &str) -> bool {
    ctx.topic_config.is_system_topic(topic)
}
