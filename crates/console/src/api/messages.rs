//! Messages (by key, by id, by topic and time window, trace) and dead-letter queues (list,
//! resend to the original topic, export).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use comet_client::admin::MQAdmin;
use comet_client::admin::message::DEFAULT_QUERY_MAX_NUM;
use comet_client::trace::{self, RMQ_SYS_TRACE_TOPIC};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{MAX_MESSAGE_RESULTS, Params, check_group, check_topic, message_json, parse_json};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Dead letters listed when no limit is asked for.
const DEFAULT_DLQ_LIMIT: i64 = 100;

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/messages/by-key", get(by_key))
        .route("/api/messages/by-id", get(by_id))
        .route("/api/messages/by-time", get(by_time))
        .route("/api/messages/trace", get(trace_of))
        .route("/api/dlq/{group}", get(dlq_list))
        .route("/api/dlq/{group}/resend", post(dlq_resend))
        .route("/api/dlq/{group}/export", get(dlq_export))
}

fn max_results() -> i64 {
    MAX_MESSAGE_RESULTS as i64
}

async fn by_key(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let params = Params(q);
    let topic = params.required("topic")?;
    let key = params.required("key")?;
    let limit = params.number("limit", DEFAULT_QUERY_MAX_NUM.into(), 1, max_results())?;
    check_topic(topic)?;
    let found = state
        .admin
        .query_message_by_key(topic, key, i32::try_from(limit).unwrap_or(64), 0, i64::MAX)
        .await?;
    let items: Vec<Value> = found.iter().map(message_json).collect();
    Ok(Json(json!({ "total": items.len(), "items": items })))
}

async fn by_id(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let params = Params(q);
    let id = params.required("id")?;
    let topic = params.text("topic")?;
    if let Some(t) = topic {
        check_topic(t)?;
    }
    if id.len() > 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::bad_request(
            "a message id is up to 64 hex characters",
        ));
    }
    let (kind, msg) = state
        .admin
        .view_message(id, topic)
        .await
        .map_err(|e| ApiError::not_found(format!("message {id} not found: {e}")))?;
    Ok(Json(json!({
        "kind": format!("{kind:?}").to_lowercase(),
        "items": [message_json(&msg)],
        "total": 1,
    })))
}

async fn by_time(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let params = Params(q);
    let topic = params.required("topic")?;
    check_topic(topic)?;
    let begin = params.number("begin", 0, 0, i64::MAX)?;
    let end = params.number("end", i64::MAX, 0, i64::MAX)?;
    if begin > end {
        return Err(ApiError::bad_request("begin is after end"));
    }
    let paging = params.paging()?;
    let (found, truncated) = state
        .admin
        .messages_by_time(topic, begin, end, MAX_MESSAGE_RESULTS)
        .await?;
    let items = paging.slice(&found).iter().map(message_json).collect();
    let mut page = paging.wrap(found.len(), items);
    page["truncated"] = Value::Bool(truncated);
    page["max"] = json!(MAX_MESSAGE_RESULTS);
    Ok(Json(page))
}

async fn trace_of(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let params = Params(q);
    let id = params.required("id")?;
    if id.len() > 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::bad_request(
            "a message id is up to 64 hex characters",
        ));
    }
    let trace_topic = params.text("traceTopic")?.unwrap_or(RMQ_SYS_TRACE_TOPIC);
    check_topic(trace_topic)?;
    let records = match trace::query_traces(&state.admin, trace_topic, id).await {
        Ok(records) => records,
        Err(comet_client::ClientError::NoRoute { .. }) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let mut records = records;
    records.sort_by_key(|r| r.time_stamp);
    let items: Vec<Value> = records.iter().map(trace::record_json).collect();
    Ok(Json(
        json!({ "traceTopic": trace_topic, "msgId": id, "items": items }),
    ))
}

/// The dead letters of `group`, at most `limit`, each with the topic a resend goes to.
async fn dead_letters(admin: &MQAdmin, group: &str, limit: usize) -> ApiResult<Vec<Value>> {
    check_group(group)?;
    let found = admin.dlq_messages(group, limit).await?;
    Ok(found
        .iter()
        .map(|m| {
            let mut v = message_json(m);
            v["originTopic"] = json!(MQAdmin::dlq_origin_topic(m));
            v
        })
        .collect())
}

async fn dlq_list(
    State(state): State<Arc<AppState>>,
    Path(group): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let limit = Params(q).number("limit", DEFAULT_DLQ_LIMIT, 1, max_results())?;
    let items = dead_letters(&state.admin, &group, usize::try_from(limit).unwrap_or(100)).await?;
    Ok(Json(
        json!({ "group": group, "total": items.len(), "items": items }),
    ))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResendForm {
    /// The ids (as listed) of the messages to resend.
    msg_ids: Vec<String>,
}

async fn dlq_resend(
    State(state): State<Arc<AppState>>,
    Path(group): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    check_group(&group)?;
    let form: ResendForm = parse_json(&body)?;
    if form.msg_ids.is_empty() {
        return Err(ApiError::bad_request("msgIds is empty"));
    }
    if form.msg_ids.len() > MAX_MESSAGE_RESULTS {
        return Err(ApiError::bad_request(format!(
            "at most {MAX_MESSAGE_RESULTS} messages at once"
        )));
    }
    let wanted: BTreeSet<&str> = form.msg_ids.iter().map(String::as_str).collect();
    let found = state
        .admin
        .dlq_messages(&group, MAX_MESSAGE_RESULTS)
        .await?;
    let chosen: Vec<_> = found
        .iter()
        .filter(|m| wanted.contains(m.msg_id().as_str()))
        .collect();
    if chosen.is_empty() {
        return Err(ApiError::not_found(
            "none of these messages is in the group's DLQ",
        ));
    }
    let producer = state.producer().await?;
    let mut outcomes = Vec::new();
    for msg in chosen {
        let o = state.admin.resend_dlq_message(msg, producer).await;
        outcomes.push(json!({ "msgId": o.msg_id, "topic": o.topic, "error": o.error }));
    }
    tracing::info!(
        group,
        count = outcomes.len(),
        "console: dead letters resent"
    );
    Ok(Json(json!({ "group": group, "results": outcomes })))
}

async fn dlq_export(
    State(state): State<Arc<AppState>>,
    Path(group): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let limit = Params(q).number("limit", max_results(), 1, max_results())?;
    let items = dead_letters(&state.admin, &group, usize::try_from(limit).unwrap_or(100)).await?;
    let body = serde_json::to_vec_pretty(&json!({ "group": group, "messages": items }))
        .map_err(|e| ApiError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let filename = format!("attachment; filename=\"dlq-{group}.json\"");
    Ok((
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (header::CONTENT_DISPOSITION, filename),
        ],
        body,
    )
        .into_response())
}
