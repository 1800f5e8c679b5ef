//! GET_BROKER_CONFIG and UPDATE_BROKER_CONFIG (`mqadmin getBrokerConfig` / `updateBrokerConfig`):
//! the broker's settings as Java properties text under RocketMQ's key names, and the runtime
//! change of the settings the broker can apply while running.
//!
//! An update is all or nothing: every key of the body is checked before any is applied. Keys
//! RocketMQ never lets a tool change (its `configBlackList`: `brokerConfigPath`, `rocketmqHome`,
//! `configBlackList`) are refused with NO_PERMISSION, as Java refuses them. `brokerPermission`
//! changes at once: sends, pulls and send-backs check the new bits, and the broker re-registers
//! with the name servers so routes carry them. Every other key the broker knows is read only at
//! start and is refused with INVALID_PARAMETER naming it, as is an unknown key, where Java would
//! accept either silently and change nothing until a restart. A change lasts until the broker
//! stops; `broker.conf` is the place for a lasting one.

use comet_protocol::RemotingCommand;
use comet_protocol::body::to_fastjson;
use comet_protocol::code::ResponseCode;

use crate::config::{BrokerConfig, parse_pairs};
use crate::context::BrokerContext;
use crate::processor::{Answer, reject};

/// Keys no tool may change (Apache's broker `configBlackList` and the keys it always adds).
pub const BLACK_LIST: &[&str] = &["brokerConfigPath", "rocketmqHome", "configBlackList"];

/// The key of the broker permission, the one setting an update applies while running.
const BROKER_PERMISSION: &str = "brokerPermission";

/// Longest UPDATE_BROKER_CONFIG body accepted.
const MAX_UPDATE_BODY_BYTES: usize = 64 * 1024;

/// The settings in force as `key=value` lines, in declaration order: the configuration the
/// broker started with, with the values changed since at runtime.
pub fn properties_text(ctx: &BrokerContext) -> String {
    let permission = ctx.broker_permission().to_string();
    ctx.config
        .entries()
        .into_iter()
        .map(|(key, value)| {
            let value = if key == BROKER_PERMISSION {
                permission.as_str()
            } else {
                value.as_str()
            };
            format!("{key}={value}\n")
        })
        .collect()
}

/// GET_BROKER_CONFIG: the settings as properties text, and the topic table's data version in
/// the `version` header field.
pub fn get_config(ctx: &BrokerContext) -> RemotingCommand {
    let mut response = RemotingCommand::response(ResponseCode::Success, None)
        .with_body(properties_text(ctx).into_bytes());
    let version = to_fastjson(&ctx.topic_config.data_version()).unwrap_or_default();
    response.ext_mut().insert("version", version);
    response
}

/// UPDATE_BROKER_CONFIG: checks every key of the body, then applies them (see the module docs).
pub fn update_config(ctx: &BrokerContext, request: &RemotingCommand) -> Answer {
    let success = RemotingCommand::response(ResponseCode::Success, None);
    let Some(body) = request.body.as_deref() else {
        return Ok(success);
    };
    if body.len() > MAX_UPDATE_BODY_BYTES {
        return Err(reject(
            ResponseCode::InvalidParameter,
            format!(
                "config body of {} bytes is over {MAX_UPDATE_BODY_BYTES}",
                body.len()
            ),
        ));
    }
    let text = std::str::from_utf8(body).map_err(|_| {
        reject(
            ResponseCode::SystemError,
            "string2Properties error: body is not UTF-8",
        )
    })?;
    let pairs = parse_pairs(text).map_err(|e| {
        reject(
            ResponseCode::SystemError,
            format!("string2Properties error: {e}"),
        )
    })?;
    if pairs.iter().any(|(k, _)| BLACK_LIST.contains(&k.as_str())) {
        return Err(reject(
            ResponseCode::NoPermission,
            "Can not update config in black list.",
        ));
    }
    let mut permission = None;
    for (key, value) in &pairs {
        match key.as_str() {
            BROKER_PERMISSION => permission = Some(parse_permission(value)?),
            k if BrokerConfig::KEYS.contains(&k) => {
                return Err(reject(
                    ResponseCode::InvalidParameter,
                    format!("{k} takes effect only when the broker starts; set it in broker.conf"),
                ));
            }
            k => {
                return Err(reject(
                    ResponseCode::InvalidParameter,
                    format!("unknown broker config key `{k}`"),
                ));
            }
        }
    }
    if let Some(value) = permission {
        let previous = ctx.broker_permission();
        ctx.set_broker_permission(value);
        // A new data version makes the name servers take the re-registered table, whose topic
        // permissions are masked with the new bits.
        ctx.topic_config.touch();
        tracing::info!(previous, value, "brokerPermission changed by a tool");
    }
    Ok(success)
}

/// A permission bit set: READ 4, WRITE 2, INHERIT 1.
fn parse_permission(value: &str) -> Result<i32, Box<RemotingCommand>> {
    match value.parse::<i32>() {
        Ok(bits) if (0..=7).contains(&bits) => Ok(bits),
        _ => Err(reject(
            ResponseCode::InvalidParameter,
            format!("{BROKER_PERMISSION} must be a permission bit set from 0 to 7, not `{value}`"),
        )),
    }
}
