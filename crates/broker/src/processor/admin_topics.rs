//! Topic creation and update: UPDATE_AND_CREATE_TOPIC (one topic, its settings in the header)
//! and UPDATE_AND_CREATE_TOPIC_LIST (RocketMQ 5.x: many topics in one request, the body a
//! `{"topicConfigList": [...]}` of topic configurations). Both check each topic the same way;
//! the list is refused whole when one of its topics is refused, and written and registered
//! once. A topic whose configuration equals the one in force is left alone.

use std::collections::HashMap;

use comet_protocol::RemotingCommand;
use comet_protocol::body::{TopicConfig, from_fastjson, perm};
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::CreateTopicRequestHeader;
use comet_protocol::naming::validate_topic;
use serde::Deserialize;

use crate::config::MAX_QUEUE_NUMS;
use crate::context::BrokerContext;
use crate::processor::{Answer, Rejection, decode_header, reject};

/// Topics one UPDATE_AND_CREATE_TOPIC_LIST may carry.
pub const MAX_TOPICS_PER_LIST: usize = 10_000;

/// The body of UPDATE_AND_CREATE_TOPIC_LIST.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateTopicListBody {
    #[serde(default)]
    topic_config_list: Vec<TopicConfig>,
}

pub(super) fn update_and_create_topic(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let header: CreateTopicRequestHeader = decode_header(request)?;
    let requested = TopicConfig {
        topic_name: header.topic,
        read_queue_nums: header.read_queue_nums,
        write_queue_nums: header.write_queue_nums,
        perm: header.perm,
        topic_filter_type: header.topic_filter_type,
        topic_sys_flag: header.topic_sys_flag.unwrap_or(0),
        order: header.order,
        attributes: HashMap::new(),
    };
    let config = checked_topic(ctx, requested, header.attributes.as_deref())?;
    ctx.topic_config.update(config);
    Ok(RemotingCommand::response(ResponseCode::Success, None))
}

/// UPDATE_AND_CREATE_TOPIC_LIST: every topic checked first, then all written at once.
pub(super) fn update_and_create_topic_list(
    ctx: &BrokerContext,
    request: &RemotingCommand,
) -> Answer {
    let body = request.body.as_deref().unwrap_or_default();
    let list: CreateTopicListBody = from_fastjson(body).map_err(|e| {
        reject(
            ResponseCode::InvalidParameter,
            format!("the topic list body is not a topicConfigList: {e}"),
        )
    })?;
    let n = list.topic_config_list.len();
    if n == 0 {
        return Err(reject(
            ResponseCode::InvalidParameter,
            "the topic list is empty",
        ));
    }
    if n > MAX_TOPICS_PER_LIST {
        return Err(reject(
            ResponseCode::InvalidParameter,
            format!("{n} topics in one list; at most {MAX_TOPICS_PER_LIST}"),
        ));
    }
    let mut configs = Vec::with_capacity(n);
    for mut requested in list.topic_config_list {
        // In the list the attribute changes are the map's entries (`+key` → value, `-key`).
        let changes = attribute_changes_of(&std::mem::take(&mut requested.attributes));
        configs.push(checked_topic(ctx, requested, Some(&changes))?);
    }
    ctx.topic_config.update_all(configs);
    Ok(RemotingCommand::response(ResponseCode::Success, None))
}

/// A topic's attribute map as a list carries it, as the header's comma-separated changes
/// (a key without `+` or `-` sets the value, as `+key` does).
fn attribute_changes_of(attributes: &HashMap<String, String>) -> String {
    let mut changes: Vec<String> = attributes
        .iter()
        .map(|(k, v)| match k.strip_prefix('-') {
            Some(_) => k.clone(),
            None => format!("+{}={v}", k.strip_prefix('+').unwrap_or(k)),
        })
        .collect();
    changes.sort();
    changes.join(",")
}

/// The configuration a create or update of `requested.topic_name` leaves in force, checked as
/// RocketMQ checks it: a valid, non-system name, queue counts in range, permission bits, and
/// `attribute_changes` applied to the attributes in force (a valid `message.type`).
fn checked_topic(
    ctx: &BrokerContext,
    requested: TopicConfig,
    attribute_changes: Option<&str>,
) -> Result<TopicConfig, Rejection> {
    let topic = requested.topic_name.as_str();
    if let Err(e) = validate_topic(topic) {
        return Err(reject(ResponseCode::InvalidParameter, e.to_string()));
    }
    if ctx.topic_config.is_system_topic(topic) {
        return Err(reject(
            ResponseCode::InvalidParameter,
            format!("The topic[{topic}] is conflict with system topic."),
        ));
    }
    for (key, n) in [
        ("readQueueNums", requested.read_queue_nums),
        ("writeQueueNums", requested.write_queue_nums),
    ] {
        if !(1..=MAX_QUEUE_NUMS).contains(&n) {
            return Err(reject(
                ResponseCode::InvalidParameter,
                format!("{key} {n} is out of range 1..={MAX_QUEUE_NUMS}"),
            ));
        }
    }
    if !(0..=perm::PERM_PRIORITY | perm::PERM_READ_WRITE | perm::PERM_INHERIT)
        .contains(&requested.perm)
    {
        return Err(reject(
            ResponseCode::InvalidParameter,
            format!("perm {} is not a permission bit set", requested.perm),
        ));
    }
    let mut config = ctx
        .topic_config
        .select(topic)
        .unwrap_or_else(|| TopicConfig::new(topic));
    config.read_queue_nums = requested.read_queue_nums;
    config.write_queue_nums = requested.write_queue_nums;
    config.perm = requested.perm;
    config.topic_filter_type = requested.topic_filter_type;
    config.topic_sys_flag = requested.topic_sys_flag;
    config.order = requested.order;
    if let Some(changes) = attribute_changes.filter(|c| !c.is_empty()) {
        apply_attributes(&mut config.attributes, changes)?;
        check_message_type(
            &config.attributes,
            ctx.live_config().enable_mixed_message_type,
        )?;
    }
    Ok(config)
}

/// Applies 5.x attribute changes (`+key=value` adds or sets, `-key` removes), comma-separated.
fn apply_attributes(
    attributes: &mut HashMap<String, String>,
    changes: &str,
) -> Result<(), Rejection> {
    for change in changes.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        if let Some(kv) = change.strip_prefix('+') {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(reject(
                    ResponseCode::InvalidParameter,
                    format!("attributes: {change:?} is not +key=value"),
                ));
            };
            attributes.insert(k.trim().to_owned(), v.trim().to_owned());
        } else if let Some(k) = change.strip_prefix('-') {
            attributes.remove(k.trim());
        } else {
            return Err(reject(
                ResponseCode::InvalidParameter,
                format!("attributes: {change:?} must start with + or -"),
            ));
        }
    }
    Ok(())
}

/// A topic's `message.type` must be one RocketMQ knows; MIXED only with
/// `enableMixedMessageType` (refused as Apache's broker refuses it).
fn check_message_type(
    attributes: &HashMap<String, String>,
    enable_mixed: bool,
) -> Result<(), Rejection> {
    let Some(value) = attributes.get(crate::topic_message_type::MESSAGE_TYPE_ATTRIBUTE) else {
        return Ok(());
    };
    if !crate::topic_message_type::is_valid_type_name(value) {
        return Err(reject(
            ResponseCode::SystemError,
            format!(
                "value {value:?} of message.type is not in {:?}",
                crate::topic_message_type::MESSAGE_TYPE_VALUES
            ),
        ));
    }
    if value == crate::topic_message_type::MIXED && !enable_mixed {
        return Err(reject(
            ResponseCode::InvalidParameter,
            "MIXED message type is not supported.",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_s_attribute_map_reads_as_header_changes() {
        let map: HashMap<String, String> = [
            ("+message.type".to_owned(), "FIFO".to_owned()),
            ("-old".to_owned(), String::new()),
            ("plain".to_owned(), "1".to_owned()),
        ]
        .into();
        assert_eq!(
            attribute_changes_of(&map),
            "+message.type=FIFO,+plain=1,-old"
        );
    }

    #[test]
    fn attribute_changes() {
        let mut attrs = HashMap::new();
        apply_attributes(&mut attrs, "+message.type=NORMAL, +x=1").unwrap();
        assert_eq!(
            attrs.get("message.type").map(String::as_str),
            Some("NORMAL")
        );
        apply_attributes(&mut attrs, "-x").unwrap();
        assert!(!attrs.contains_key("x"));
        assert!(apply_attributes(&mut attrs, "+novalue").is_err());
        assert!(apply_attributes(&mut attrs, "bare").is_err());
    }

    #[test]
    fn message_type_values_are_checked() {
        let mut attrs = HashMap::new();
        assert!(check_message_type(&attrs, false).is_ok());
        for (value, mixed, ok) in [
            ("FIFO", false, true),
            ("DELAY", false, true),
            ("MIXED", false, false),
            ("MIXED", true, true),
            ("fifo", true, false),
            ("PRIORITY", true, false),
        ] {
            attrs.insert("message.type".to_owned(), value.to_owned());
            assert_eq!(
                check_message_type(&attrs, mixed).is_ok(),
                ok,
                "{value} with enableMixedMessageType={mixed}"
            );
        }
    }
}
