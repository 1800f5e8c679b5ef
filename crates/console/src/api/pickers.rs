//! Names for the page's select lists: `GET /api/pickers/{kind}`, sorted, at most
//! [`MAX_PICKER_ITEMS`] (`truncated` says when there were more; `q` narrows them).
//!
//! - `topics`: the topics messages are sent to (no system, retry or dead-letter topic unless
//!   `system=true`, which lists every topic);
//! - `groups`: the consumer groups (system groups only with `system=true`);
//! - `dlq-groups`: the groups that have a dead-letter topic (`%DLQ%<group>`);
//! - `producer-groups`: the producer groups with a producer connected to a master now
//!   (GET_ALL_PRODUCER_INFO);
//! - `trace-topics`: the default trace topic and every topic whose name holds `trace`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::routing::get;
use axum::{Json, Router};
use comet_client::trace::RMQ_SYS_TRACE_TOPIC;
use comet_protocol::naming;
use serde_json::{Value, json};

use super::Params;
use super::producers::online_producers;
use super::show_system;
use super::topics::topic_kind;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Most names one list holds.
pub const MAX_PICKER_ITEMS: usize = 5000;

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new().route("/api/pickers/{kind}", get(picker))
}

async fn picker(
    State(state): State<Arc<AppState>>,
    Path(kind): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let params = Params(q);
    let system = show_system(&params)?;
    let filter = params.text("q")?.map(str::to_lowercase);
    let mut errors = Vec::new();
    let names: BTreeSet<String> = match kind.as_str() {
        "topics" => {
            let (topics, cluster) =
                futures::try_join!(state.admin.topic_list(), state.admin.cluster_info())?;
            topics
                .into_iter()
                .filter(|t| system || topic_kind(t, &cluster) == "normal")
                .collect()
        }
        "groups" => state
            .admin
            .group_list()
            .await?
            .into_iter()
            .filter(|g| system || !naming::is_system_group(g))
            .collect(),
        "dlq-groups" => state
            .admin
            .topic_list()
            .await?
            .iter()
            .filter_map(|t| t.strip_prefix(naming::DLQ_GROUP_TOPIC_PREFIX))
            .map(str::to_owned)
            .collect(),
        "producer-groups" => {
            let (groups, failures) = online_producers(&state).await?;
            errors = failures;
            groups
                .into_keys()
                .filter(|g| system || !naming::is_system_group(g))
                .collect()
        }
        "trace-topics" => {
            let mut topics: BTreeSet<String> = state
                .admin
                .topic_list()
                .await?
                .into_iter()
                .filter(|t| t.to_lowercase().contains("trace"))
                .collect();
            topics.insert(RMQ_SYS_TRACE_TOPIC.to_owned());
            topics
        }
        other => {
            return Err(ApiError::not_found(format!(
                "no list named {other:?}: topics, groups, dlq-groups, producer-groups or trace-topics"
            )));
        }
    };
    let matching: Vec<&String> = names
        .iter()
        .filter(|n| filter.as_ref().is_none_or(|f| n.to_lowercase().contains(f)))
        .collect();
    let items: Vec<&String> = matching.iter().take(MAX_PICKER_ITEMS).copied().collect();
    Ok(Json(json!({
        "kind": kind,
        "total": matching.len(),
        "truncated": matching.len() > items.len(),
        "items": items,
        "errors": errors,
    })))
}
