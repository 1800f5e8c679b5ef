//! GET_BROKER_CONFIG and UPDATE_BROKER_CONFIG (`mqadmin getBrokerConfig` / `updateBrokerConfig`):
//! the broker's settings as Java properties text under RocketMQ's key names, and their change
//! while the broker runs.
//!
//! An update is all or nothing ([`crate::config::runtime`]): every key of the body is checked
//! before any is applied, the changed keys are written to the broker's config file
//! (`brokerConfigPath`: the `-c` file, else `<storePathRootDir>/config/broker.properties`), and
//! only then put in force, so GET_BROKER_CONFIG shows them at once and a restart keeps them.
//!
//! Answers, matching Apache's where Apache refuses: a key of the black list (`brokerConfigPath`,
//! `rocketmqHome`, `configBlackList` and what `configBlackList` lists) is refused with
//! NO_PERMISSION and Apache's remark. Where Apache accepts an update silently and changes
//! nothing, Comet refuses it with INVALID_PARAMETER naming the key: an unknown key (a typo, or an
//! Apache setting Comet does not have), a value that does not parse or is out of range, and a key
//! read only at start (Apache writes that one to its file and shows it while the running broker
//! keeps the old value). A config file that cannot be written refuses the update with
//! SYSTEM_ERROR.

use std::sync::Arc;
use std::time::Duration;

use comet_protocol::RemotingCommand;
use comet_protocol::body::to_fastjson;
use comet_protocol::code::ResponseCode;
use comet_store::LiveStoreSettings;

use crate::config::{BrokerConfig, ConfigChange, UpdateError, parse_pairs};
use crate::context::BrokerContext;
use crate::processor::{Answer, Rejection, reject};

/// Longest UPDATE_BROKER_CONFIG body accepted.
const MAX_UPDATE_BODY_BYTES: usize = 64 * 1024;

/// The settings in force as `key=value` lines, in declaration order: the configuration the
/// broker started with, with the values changed since at runtime.
pub fn properties_text(ctx: &BrokerContext) -> String {
    ctx.live_config().to_properties()
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

/// UPDATE_BROKER_CONFIG: checks every key of the body, writes them to the config file, then puts
/// them in force (see the module docs).
pub async fn update_config(ctx: &Arc<BrokerContext>, request: &RemotingCommand) -> Answer {
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
    let change = ctx.runtime.update(&pairs).map_err(|e| {
        let code = match &e {
            UpdateError::BlackListed { .. } => ResponseCode::NoPermission,
            UpdateError::Persist { .. } => ResponseCode::SystemError,
            UpdateError::AtStart { .. } | UpdateError::Unknown { .. } | UpdateError::Invalid(_) => {
                ResponseCode::InvalidParameter
            }
        };
        tracing::warn!(error = %e, "updateBrokerConfig refused");
        reject(code, e.to_string())
    })?;
    if !change.keys.is_empty() {
        put_in_force(ctx, &change).await?;
    }
    Ok(success)
}

/// Tells the services that keep their own copy of a live key about `change`; the request
/// handlers read the others from the configuration in force on each use, and the tasks that
/// wait on the configuration's changes (the timer checkpoint, the registration) are woken by the
/// swap itself. Fails only when the update sets `timerWheelEnable=true` and the timer wheel could
/// not be opened (the change stays in force and in the file; timer messages are refused
/// meanwhile).
async fn put_in_force(ctx: &Arc<BrokerContext>, change: &ConfigChange) -> Result<(), Rejection> {
    let (before, now) = (&*change.previous, &*change.current);
    tracing::info!(keys = ?change.keys, file = %change.file.display(),
        "broker settings changed while running and written to the config file");
    let store_now = store_settings(now);
    if store_settings(before) != store_now {
        ctx.store.set_live_settings(store_now);
    }
    ctx.pull_hold
        .set_polling(now.long_polling_enable, now.short_polling_time_ms);
    ctx.subscription_groups
        .set_auto_create(now.auto_create_subscription_group);
    // The copies a SYNC_MASTER's sends wait for; the HA connections read their keys themselves.
    ctx.replication.config_changed(now);
    let expiry = Duration::from_millis(now.channel_expired_timeout_ms);
    ctx.consumers.set_channel_expired_timeout(expiry);
    ctx.producers.set_channel_expired_timeout(expiry);
    // Re-registers itself when TBW102 changes.
    ctx.topic_config
        .set_auto_create_topic_enable(now.auto_create_topic_enable);
    if before.broker_permission != now.broker_permission {
        // A new data version makes the name servers take the re-registered table, whose topic
        // permissions are masked with the new bits.
        ctx.topic_config.touch();
        tracing::info!(
            previous = before.broker_permission,
            value = now.broker_permission,
            "brokerPermission changed by a tool"
        );
    }
    ctx.listener_idle_timeout.set(now.server_idle_timeout());
    // Turned on (or asked again after a failed opening) in a broker without an open wheel.
    let asks_for_timers = change
        .keys
        .iter()
        .any(|(key, _)| *key == "timerWheelEnable");
    if asks_for_timers && now.timer_wheel_enable && ctx.timer.store().is_none() {
        ctx.timer.turn_on(ctx).await.map_err(|e| {
            tracing::error!(error = %e, "timerWheelEnable turned on but the timer wheel could not be opened");
            reject(
                ResponseCode::SystemError,
                format!(
                    "timerWheelEnable=true is in force and written to {}, but the timer wheel \
                     could not be opened: {e}; timer messages and POPs are refused until it opens \
                     (at the next start, or when timerWheelEnable=true is sent again)",
                    change.file.display()
                ),
            )
        })?;
    }
    Ok(())
}

/// The store's share of `config`.
fn store_settings(config: &BrokerConfig) -> LiveStoreSettings {
    LiveStoreSettings::of(&config.to_store_config())
}
