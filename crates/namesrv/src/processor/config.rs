//! GET_NAMESRV_CONFIG and UPDATE_NAMESRV_CONFIG (`mqadmin getNamesrvConfig` /
//! `updateNamesrvConfig`): the name server's settings as Java properties text, under RocketMQ's
//! key names, and the runtime change of the one setting that can change without a restart.
//!
//! An update is all or nothing: every key of the body is checked before any is applied. Keys
//! RocketMQ never lets a tool change (`configBlackList`, `configStorePath`, `kvConfigPath`) are
//! refused with NO_PERMISSION, as Java refuses them. Keys that only take effect at start (the
//! listener, the expiry scan) and unknown keys are refused with INVALID_PARAMETER naming the key,
//! where Java would accept them silently and change nothing until a restart. A change lasts
//! until the name server stops; the configuration it starts from is the place for a lasting one.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use comet_protocol::RemotingCommand;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_remoting::{Channel, RequestProcessor};
use futures::future::BoxFuture;

use super::{NamesrvContext, Refusal, Reply, failure, not_supported, respond, success};

pub(crate) const CODES: &[RequestCode] = &[
    RequestCode::GetNamesrvConfig,
    RequestCode::UpdateNamesrvConfig,
];

/// Keys no tool may change (Java's default `configBlackList`).
pub(crate) const BLACK_LIST: &[&str] = &["configBlackList", "configStorePath", "kvConfigPath"];

/// Keys the name server reads only at start.
const START_ONLY: &[&str] = &[
    "listenPort",
    "bindAddress",
    "scanNotActiveBrokerInterval",
    "serverChannelMaxIdleTimeSeconds",
    "writeBufferHighWaterMark",
];

/// Longest UPDATE_NAMESRV_CONFIG body accepted.
const MAX_UPDATE_BODY_BYTES: usize = 64 * 1024;

pub(crate) struct ConfigProcessor {
    ctx: Arc<NamesrvContext>,
}

impl ConfigProcessor {
    pub(crate) fn new(ctx: &Arc<NamesrvContext>) -> Self {
        Self {
            ctx: Arc::clone(ctx),
        }
    }
}

impl RequestProcessor for ConfigProcessor {
    fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        respond(match RequestCode::from(request.code) {
            RequestCode::GetNamesrvConfig => Ok(get_config(&self.ctx)),
            RequestCode::UpdateNamesrvConfig => {
                let reply = update_config(&self.ctx, &request);
                if reply.is_ok() {
                    tracing::info!(caller = %channel.remote_addr(),
                        "name server config updated by a tool");
                }
                reply
            }
            _ => Err(not_supported(request.code)),
        })
    }
}

/// The settings as `key=value` lines, RocketMQ's names, sorted by key.
pub(crate) fn properties_text(ctx: &NamesrvContext) -> String {
    let config = &ctx.config;
    let (bind, port) = match config.listen_addr.rsplit_once(':') {
        Some((host, port)) => (host.trim_matches(['[', ']']).to_owned(), port.to_owned()),
        None => (config.listen_addr.clone(), String::new()),
    };
    let mut pairs = vec![
        ("bindAddress", bind),
        ("configBlackList", BLACK_LIST.join(";")),
        (
            "kvConfigPath",
            config.kv_config_path().display().to_string(),
        ),
        ("listenPort", port),
        (
            "orderMessageEnable",
            ctx.order_message_enable.load(Ordering::Relaxed).to_string(),
        ),
        (
            "scanNotActiveBrokerInterval",
            config.scan_interval.as_millis().to_string(),
        ),
        (
            "serverChannelMaxIdleTimeSeconds",
            config.idle_timeout.map_or(0, |t| t.as_secs()).to_string(),
        ),
        (
            "writeBufferHighWaterMark",
            config.write_buffer_high_water_mark.to_string(),
        ),
    ];
    pairs.sort_by_key(|(k, _)| *k);
    pairs
        .into_iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect()
}

fn get_config(ctx: &NamesrvContext) -> RemotingCommand {
    success().with_body(properties_text(ctx).into_bytes())
}

/// Parses Java properties text: `key=value` or `key:value` lines, `#` and `!` comments, blanks
/// around keys and values trimmed.
fn parse_properties(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .map(|l| match l.split_once(['=', ':']) {
            Some((k, v)) => (k.trim().to_owned(), v.trim().to_owned()),
            None => (l.to_owned(), String::new()),
        })
        .collect()
}

fn parse_bool(key: &str, value: &str) -> Result<bool, Refusal> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(failure(
            ResponseCode::InvalidParameter,
            format!("{key} must be true or false, not `{value}`"),
        )),
    }
}

fn update_config(ctx: &NamesrvContext, request: &RemotingCommand) -> Reply {
    let Some(body) = request.body.as_deref() else {
        return Ok(success());
    };
    if body.len() > MAX_UPDATE_BODY_BYTES {
        return Err(failure(
            ResponseCode::InvalidParameter,
            format!(
                "config body of {} bytes is over {MAX_UPDATE_BODY_BYTES}",
                body.len()
            ),
        ));
    }
    let text = std::str::from_utf8(body).map_err(|_| {
        failure(
            ResponseCode::SystemError,
            "string2Properties error: body is not UTF-8",
        )
    })?;
    let pairs = parse_properties(text);
    if pairs.iter().any(|(k, _)| BLACK_LIST.contains(&k.as_str())) {
        return Err(failure(
            ResponseCode::NoPermission,
            "Can not update config in black list.",
        ));
    }
    let mut order_message_enable = None;
    for (key, value) in &pairs {
        match key.as_str() {
            "orderMessageEnable" => order_message_enable = Some(parse_bool(key, value)?),
            k if START_ONLY.contains(&k) => {
                return Err(failure(
                    ResponseCode::InvalidParameter,
                    format!(
                        "{k} takes effect only when the name server starts; set it in its configuration"
                    ),
                ));
            }
            k => {
                return Err(failure(
                    ResponseCode::InvalidParameter,
                    format!("unknown name server config key `{k}`"),
                ));
            }
        }
    }
    if let Some(enable) = order_message_enable {
        ctx.order_message_enable.store(enable, Ordering::Relaxed);
    }
    Ok(success())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::processor::test_support::context;

    fn update(body: &str) -> RemotingCommand {
        RemotingCommand::request(RequestCode::UpdateNamesrvConfig)
            .with_body(body.as_bytes().to_vec())
    }

    #[test]
    fn the_settings_are_listed_under_rocketmq_s_keys() {
        let (ctx, _dir) = context();
        let text = properties_text(&ctx);
        let pairs = parse_properties(&text);
        let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
        for key in [
            "listenPort",
            "orderMessageEnable",
            "kvConfigPath",
            "scanNotActiveBrokerInterval",
        ] {
            assert!(keys.contains(&key), "{key} missing from {text}");
        }
        let value = |key: &str| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        assert_eq!(value("listenPort").as_deref(), Some("0"));
        assert_eq!(
            value("scanNotActiveBrokerInterval").as_deref(),
            Some("5000")
        );
        assert_eq!(value("orderMessageEnable").as_deref(), Some("true"));
    }

    /// The reference table (`NamesrvConfig::REFERENCE`) lists exactly the keys answered, with
    /// the defaults answered, and says truly which keys an update may change.
    #[test]
    fn the_reference_table_matches_the_settings() {
        use crate::config::{Applied, NamesrvConfig};
        let (ctx, _dir) = context();
        let pairs = parse_properties(&properties_text(&ctx));
        let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
        let documented: Vec<&str> = NamesrvConfig::REFERENCE.iter().map(|d| d.key).collect();
        assert_eq!(keys, documented);
        let defaults = NamesrvConfig::default();
        for doc in NamesrvConfig::REFERENCE {
            let value = match doc.key {
                // The test context listens on an ephemeral port in a temporary directory.
                "bindAddress" | "listenPort" | "kvConfigPath" => None,
                _ => pairs.iter().find(|(k, _)| k == doc.key).map(|(_, v)| v),
            };
            if let Some(value) = value {
                assert_eq!(value, doc.default, "default of {}", doc.key);
            }
            let reply = update_config(&ctx, &update(&format!("{}={}", doc.key, doc.default)));
            match doc.applied {
                Applied::Live => assert!(reply.is_ok(), "{}: {reply:?}", doc.key),
                Applied::Start => assert_eq!(
                    reply.expect_err(doc.key).code,
                    ResponseCode::InvalidParameter
                ),
                Applied::Never => {
                    assert_eq!(reply.expect_err(doc.key).code, ResponseCode::NoPermission)
                }
            }
        }
        let listen = format!(
            "{}:{}",
            NamesrvConfig::REFERENCE[0].default,
            NamesrvConfig::REFERENCE[3].default
        );
        assert_eq!(listen, defaults.listen_addr);
    }

    #[test]
    fn order_message_enable_changes_at_runtime_and_is_listed() {
        let (ctx, _dir) = context();
        let reply = update_config(&ctx, &update("# from a tool\norderMessageEnable = false\n"));
        assert!(reply.is_ok(), "{reply:?}");
        assert!(!ctx.order_message_enable.load(Ordering::Relaxed));
        assert!(properties_text(&ctx).contains("orderMessageEnable=false\n"));
        assert!(update_config(&ctx, &update("orderMessageEnable:TRUE")).is_ok());
        assert!(ctx.order_message_enable.load(Ordering::Relaxed));
    }

    #[test]
    fn refused_updates_change_nothing() {
        let (ctx, _dir) = context();
        let cases = [
            (
                "kvConfigPath=/tmp/elsewhere\norderMessageEnable=false",
                ResponseCode::NoPermission,
            ),
            (
                "orderMessageEnable=false\nlistenPort=1",
                ResponseCode::InvalidParameter,
            ),
            (
                "orderMessageEnable=false\nnoSuchKey=1",
                ResponseCode::InvalidParameter,
            ),
            ("orderMessageEnable=maybe", ResponseCode::InvalidParameter),
        ];
        for (body, code) in cases {
            let refusal = update_config(&ctx, &update(body)).expect_err(body);
            assert_eq!(refusal.code, code, "{body}: {}", refusal.remark);
            assert!(
                ctx.order_message_enable.load(Ordering::Relaxed),
                "{body} changed the setting"
            );
        }
        let not_utf8 =
            RemotingCommand::request(RequestCode::UpdateNamesrvConfig).with_body(vec![0xff, 0xfe]);
        assert_eq!(
            update_config(&ctx, &not_utf8).expect_err("bad").code,
            ResponseCode::SystemError
        );
        let huge = update(&"x".repeat(MAX_UPDATE_BODY_BYTES + 1));
        assert_eq!(
            update_config(&ctx, &huge).expect_err("huge").code,
            ResponseCode::InvalidParameter
        );
    }
}
