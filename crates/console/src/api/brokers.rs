//! One broker: its runtime figures (GET_BROKER_RUNTIME_INFO), its settings (GET_BROKER_CONFIG)
//! and the change of one setting while it runs (UPDATE_BROKER_CONFIG).
//!
//! A broker is named by its address, and only an address the name servers list is accepted (a
//! 404 otherwise), so the console never connects anywhere a caller picks. Which keys a broker
//! changes at runtime is the broker's decision: its refusal is passed on with its own words.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::parse_json;
use crate::error::{ApiError, ApiResult};
use crate::sampler::brokers_of;
use crate::state::AppState;

/// Longest setting name accepted.
pub const MAX_CONFIG_KEY_LEN: usize = 128;
/// Longest setting value accepted.
pub const MAX_CONFIG_VALUE_LEN: usize = 4096;

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/brokers/{addr}", get(detail))
        .route("/api/brokers/{addr}/config", post(update_config))
}

/// `(cluster, broker name, id)` of the broker at `addr`, when the name servers list it.
async fn identify(state: &AppState, addr: &str) -> ApiResult<(String, String, i64)> {
    if addr.is_empty() || addr.len() > super::MAX_PARAM_LEN {
        return Err(ApiError::bad_request("a broker address is required"));
    }
    let info = state.admin.cluster_info().await?;
    brokers_of(&info)
        .into_iter()
        .find(|(_, _, _, a)| a == addr)
        .map(|(cluster, name, id, _)| (cluster, name, id))
        .ok_or_else(|| ApiError::not_found(format!("no broker at {addr} in the cluster")))
}

fn map_json(map: &BTreeMap<String, String>) -> Value {
    Value::Object(
        map.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

async fn detail(
    State(state): State<Arc<AppState>>,
    Path(addr): Path<String>,
) -> ApiResult<Json<Value>> {
    let (cluster, name, id) = identify(&state, &addr).await?;
    let (runtime, config) = futures::join!(
        state.admin.broker_runtime_info(&addr),
        state.admin.broker_config(&addr)
    );
    let (runtime, runtime_error) = match runtime {
        Ok(map) => (map_json(&map), None),
        Err(e) => (json!({}), Some(e.to_string())),
    };
    let (config, config_error) = match config {
        Ok(map) => (map_json(&map), None),
        Err(e) => (json!({}), Some(e.to_string())),
    };
    Ok(Json(json!({
        "addr": addr, "cluster": cluster, "brokerName": name, "brokerId": id,
        "role": if id == 0 { "master" } else { "slave" },
        "runtime": runtime, "runtimeError": runtime_error,
        "config": config, "configError": config_error,
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigForm {
    key: String,
    value: String,
}

/// Checks one setting: a key of letters, digits, `.`, `_` and `-`, and a value on one line
/// (the request carries Java properties text, where a line break would start another key).
fn check_setting(form: &ConfigForm) -> ApiResult<()> {
    let key_ok = !form.key.is_empty()
        && form.key.len() <= MAX_CONFIG_KEY_LEN
        && form
            .key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !key_ok {
        return Err(ApiError::bad_request(format!(
            "a setting name is 1 to {MAX_CONFIG_KEY_LEN} letters, digits, '.', '_' or '-'"
        )));
    }
    if form.value.len() > MAX_CONFIG_VALUE_LEN || form.value.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!(
            "a setting value is one line of at most {MAX_CONFIG_VALUE_LEN} bytes"
        )));
    }
    Ok(())
}

async fn update_config(
    State(state): State<Arc<AppState>>,
    Path(addr): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let form: ConfigForm = parse_json(&body)?;
    check_setting(&form)?;
    let (_, name, id) = identify(&state, &addr).await?;
    let settings = BTreeMap::from([(form.key.clone(), form.value.trim().to_owned())]);
    state.admin.update_broker_config(&addr, &settings).await?;
    tracing::info!(broker = %addr, key = %form.key, "console: broker setting changed");
    let now = state
        .admin
        .broker_config(&addr)
        .await
        .ok()
        .and_then(|c| c.get(&form.key).cloned());
    Ok(Json(json!({
        "addr": addr, "brokerName": name, "brokerId": id,
        "key": form.key, "value": form.value.trim(), "nowReads": now,
    })))
}
