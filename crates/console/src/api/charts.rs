//! The sampled series for the charts: `GET /api/history?kind=...&name=...` (see
//! [`crate::history`]).
//!
//! - `kind=cluster`: messages in and out per second of the whole cluster;
//! - `kind=brokers`: messages in per second of every broker;
//! - `kind=broker&name=<addr>`: messages in and out per second of one broker;
//! - `kind=topic&name=<topic>`: messages in per second of a topic;
//! - `kind=group&name=<group>`: a group's lag and consume rate.
//!
//! Asking for a topic or a group watches it (it is sampled from then on); the first time, it is
//! sampled at once, so a group's lag has a point immediately and the rates have their base.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};
use comet_protocol::time::now_millis;
use serde_json::{Value, json};

use super::{Params, check_group, check_topic};
use crate::error::{ApiError, ApiResult};
use crate::history::{HISTORY_POINTS, Watched};
use crate::sampler;
use crate::state::AppState;

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new().route("/api/history", get(history))
}

async fn history(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let params = Params(q);
    let kind = params.required("kind")?;
    let keys: Vec<String> = match kind {
        "cluster" => vec!["cluster/in".to_owned(), "cluster/out".to_owned()],
        "brokers" => state.history.keys_like("broker/", "/in"),
        "broker" => {
            let addr = params.required("name")?;
            vec![format!("broker/{addr}/in"), format!("broker/{addr}/out")]
        }
        "topic" => {
            let topic = params.required("name")?;
            check_topic(topic)?;
            if state.history.watch(Watched::Topic, topic) {
                sampler::sample_topic(&state, topic).await;
            }
            vec![format!("topic/{topic}/in")]
        }
        "group" => {
            let group = params.required("name")?;
            check_group(group)?;
            if state.history.watch(Watched::Group, group) {
                sampler::sample_group(&state, group).await;
            }
            vec![format!("group/{group}/lag"), format!("group/{group}/tps")]
        }
        other => {
            return Err(ApiError::bad_request(format!(
                "kind must be cluster, brokers, broker, topic or group, got {other:?}"
            )));
        }
    };
    Ok(Json(json!({
        "kind": kind,
        "intervalSecs": state.history.interval().as_secs(),
        "maxPoints": HISTORY_POINTS,
        "now": now_millis(),
        "series": state.history.get(&keys),
    })))
}
