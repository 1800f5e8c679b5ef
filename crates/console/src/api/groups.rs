//! Consumer groups: the list (system groups only when asked for), one group's clients,
//! subscriptions and queues, offset reset including offline groups, skip backlog, delete.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use comet_client::ClientError;
use comet_client::admin::RESET_TO_END;
use comet_protocol::body::ConsumerConnection;
use comet_protocol::naming;
use comet_protocol::time::now_millis;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

use super::producers::version_text;
use super::show_system;
use super::{Params, check_group, check_topic, parse_json};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Groups whose figures are asked for at once when a page of the list is built.
const LIST_CONCURRENCY: usize = 8;

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/groups", get(list))
        .route("/api/groups/{group}", get(detail).delete(delete))
        .route("/api/groups/{group}/reset", post(reset))
        .route("/api/groups/{group}/skip", post(skip))
}

/// The release name shared by a group's clients, or `mixed: V4_9_8, V5_3_3`.
fn versions_text(conn: &ConsumerConnection) -> Option<String> {
    let names: BTreeSet<String> = conn
        .connection_set
        .iter()
        .map(|c| version_text(c.version))
        .collect();
    match names.len() {
        0 => None,
        1 => names.into_iter().next(),
        _ => Some(format!(
            "mixed: {}",
            names.into_iter().collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The enum's name as the client reports it (`CONSUME_PASSIVELY`, `CLUSTERING`).
fn enum_text<T: serde::Serialize>(value: Option<&T>) -> Option<String> {
    serde_json::to_value(value?)
        .ok()?
        .as_str()
        .map(str::to_owned)
}

async fn list(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let params = Params(q);
    let paging = params.paging()?;
    let kind = params.text("type")?.unwrap_or("all");
    if !["all", "user", "system"].contains(&kind) {
        return Err(ApiError::bad_request(format!(
            "type must be all, user or system, got {kind:?}"
        )));
    }
    let system = show_system(&params)?;
    let filter = params.text("q")?.map(str::to_lowercase);
    let groups: Vec<String> = state
        .admin
        .group_list()
        .await?
        .into_iter()
        .filter(|g| match kind {
            "user" => !naming::is_system_group(g),
            "system" => naming::is_system_group(g),
            _ => system || !naming::is_system_group(g),
        })
        .filter(|g| filter.as_ref().is_none_or(|f| g.to_lowercase().contains(f)))
        .collect();
    let page = paging.slice(&groups);
    let admin = &state.admin;
    let history = &state.history;
    let items: Vec<Value> = futures::stream::iter(page)
        .map(|group| async move {
            let (stats, conn) = futures::join!(
                admin.consume_stats(&group, None),
                admin.consumer_connections(&group)
            );
            let lag = stats.as_ref().ok().map(|s| s.diff_total());
            // The brokers' figure (messages the group pulled per second over the last minute),
            // as Apache's dashboard shows it; the console's own measure where no broker answered.
            let tps = stats
                .as_ref()
                .ok()
                .map(|s| s.consume_tps)
                .or_else(|| history.latest(&format!("group/{group}/tps"), now_millis()));
            let conn = conn.ok();
            json!({
                "group": group, "system": naming::is_system_group(&group),
                "lag": lag, "consumeTps": tps,
                "clients": conn.as_ref().map_or(0, |c| c.connection_set.len()),
                "version": conn.as_ref().and_then(versions_text),
                "consumeType": enum_text(conn.as_ref().and_then(|c| c.consume_type.as_ref())),
                "messageModel": enum_text(conn.as_ref().and_then(|c| c.message_model.as_ref())),
            })
        })
        .buffered(LIST_CONCURRENCY)
        .collect()
        .await;
    Ok(Json(paging.wrap(groups.len(), items)))
}

async fn detail(
    State(state): State<Arc<AppState>>,
    Path(group): Path<String>,
) -> ApiResult<Json<Value>> {
    check_group(&group)?;
    let known = state.admin.group_list().await?;
    let mut modes = (None, None);
    let (connections, subscriptions, online_error) =
        match state.admin.consumer_connections(&group).await {
            Ok(conn) => {
                modes = (
                    enum_text(conn.consume_type.as_ref()),
                    enum_text(conn.message_model.as_ref()),
                );
                let subs: Vec<Value> = conn
                    .subscription_table
                    .values()
                    .map(|s| {
                        json!({
                            "topic": s.topic, "expression": s.sub_string,
                            "type": s.expression_type, "subVersion": s.sub_version,
                        })
                    })
                    .collect();
                let clients: Vec<Value> = conn
                    .connection_set
                    .iter()
                    .map(|c| {
                        json!({
                            "clientId": c.client_id, "clientAddr": c.client_addr,
                            "language": c.language, "version": c.version,
                            "versionName": version_text(c.version),
                        })
                    })
                    .collect();
                (clients, subs, None)
            }
            Err(e) => (Vec::new(), Vec::new(), Some(e.to_string())),
        };
    let progress = match state.admin.consumer_progress(&group, None).await {
        Ok(lines) => lines,
        Err(ClientError::Broker { .. }) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    if !known.contains(&group) && progress.is_empty() && connections.is_empty() {
        return Err(ApiError::not_found(format!(
            "no consumer group named {group:?}"
        )));
    }
    let total_lag: i64 = progress.iter().map(|p| p.lag()).sum();
    let mut topics: Vec<String> = progress.iter().map(|p| p.queue.topic.clone()).collect();
    topics.dedup();
    let queues: Vec<Value> = progress
        .iter()
        .map(|p| {
            json!({
                "topic": p.queue.topic, "brokerName": p.queue.broker_name,
                "queueId": p.queue.queue_id, "brokerOffset": p.broker_offset,
                "consumerOffset": p.consumer_offset, "lag": p.lag(),
                "lastTimestamp": p.last_timestamp,
            })
        })
        .collect();
    Ok(Json(json!({
        "group": group,
        "online": online_error.is_none(),
        "offlineReason": online_error,
        "consumeType": modes.0,
        "messageModel": modes.1,
        "clients": connections,
        "subscriptions": subscriptions,
        "topics": topics,
        "queues": queues,
        "lag": total_lag,
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResetForm {
    topic: String,
    /// Milliseconds since the epoch.
    timestamp: i64,
    #[serde(default = "yes")]
    force: bool,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SkipForm {
    topic: String,
}

/// Resets `group`'s offsets of `topic` (see [`comet_client::admin::window`]); `timestamp` -1
/// skips the backlog.
async fn do_reset(
    state: &AppState,
    group: &str,
    topic: &str,
    timestamp: i64,
    force: bool,
) -> ApiResult<Json<Value>> {
    check_group(group)?;
    check_topic(topic)?;
    if naming::is_retry_or_dlq(topic) {
        return Err(ApiError::bad_request(
            "reset the group's own topics, not retry or DLQ topics",
        ));
    }
    state.admin.topic_route(topic).await?;
    let outcome = state
        .admin
        .reset_offset(group, topic, timestamp, force)
        .await?;
    let mut queues: Vec<Value> = outcome
        .offsets
        .iter()
        .map(|(mq, offset)| json!({ "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": offset }))
        .collect();
    queues.sort_by_key(|q| (q["brokerName"].to_string(), q["queueId"].as_i64()));
    tracing::info!(group, topic, timestamp, "console: offsets reset");
    Ok(Json(json!({
        "group": group, "topic": topic, "queues": queues,
        "committedOffline": outcome.offline,
    })))
}

async fn reset(
    State(state): State<Arc<AppState>>,
    Path(group): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let form: ResetForm = parse_json(&body)?;
    if form.timestamp < 0 {
        return Err(ApiError::bad_request(
            "timestamp must be milliseconds since the epoch",
        ));
    }
    do_reset(&state, &group, &form.topic, form.timestamp, form.force).await
}

async fn skip(
    State(state): State<Arc<AppState>>,
    Path(group): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let form: SkipForm = parse_json(&body)?;
    do_reset(&state, &group, &form.topic, RESET_TO_END, true).await
}

async fn delete(
    State(state): State<Arc<AppState>>,
    Path(group): Path<String>,
) -> ApiResult<Json<Value>> {
    check_group(&group)?;
    if !state.admin.group_list().await?.contains(&group) {
        return Err(ApiError::not_found(format!(
            "no consumer group named {group:?}"
        )));
    }
    state.admin.delete_group(&group, true).await?;
    tracing::info!(group, "console: group deleted");
    Ok(Json(json!({ "group": group })))
}
