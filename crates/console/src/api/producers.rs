//! Producers: the connections of one producer group on one topic
//! (GET_PRODUCER_CONNECTION_LIST) and every producer connected to the masters now, by group
//! (GET_ALL_PRODUCER_INFO, answered by 5.x brokers).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};
use comet_protocol::body::ProducerConnection;
use comet_protocol::naming;
use comet_protocol::version::version_name;
use futures::future::join_all;
use serde_json::{Value, json};

use super::show_system;
use super::{Params, check_group, check_topic};
use crate::error::ApiResult;
use crate::state::AppState;

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/producers", get(producers))
        .route("/api/producers/online", get(online))
}

/// A client version ordinal as its release name (`V5_3_3`), or the number when it is beyond the
/// known releases.
pub fn version_text(version: i32) -> String {
    version_name(version).map_or_else(|| version.to_string(), str::to_owned)
}

/// The producers connected to every master, by producer group, and the brokers that did not
/// answer (with why).
pub async fn online_producers(
    state: &AppState,
) -> ApiResult<(BTreeMap<String, Vec<Value>>, Vec<String>)> {
    let masters = state.admin.master_addrs(None).await?;
    let answers = join_all(
        masters
            .iter()
            .map(|(_, addr)| state.admin.all_producers(addr)),
    )
    .await;
    let mut groups: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut errors = Vec::new();
    for ((name, addr), answer) in masters.iter().zip(answers) {
        let table = match answer {
            Ok(table) => table,
            Err(e) => {
                errors.push(format!("{name} ({addr}): {e}"));
                continue;
            }
        };
        for (group, infos) in table.data {
            let clients = groups.entry(group).or_default();
            clients.extend(infos.into_iter().map(|p| {
                json!({
                    "clientId": p.client_id, "clientAddr": p.remote_ip.trim_start_matches('/'),
                    "language": p.language, "version": p.version,
                    "versionName": version_text(p.version),
                    "lastUpdateTimestamp": p.last_update_timestamp, "brokerName": name,
                })
            }));
        }
    }
    Ok((groups, errors))
}

async fn online(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let system = show_system(&Params(q))?;
    let (groups, errors) = online_producers(&state).await?;
    let items: Vec<Value> = groups
        .into_iter()
        .filter(|(g, _)| system || !naming::is_system_group(g))
        .take(super::MAX_PAGE_SIZE)
        .map(|(group, clients)| json!({ "group": group, "clients": clients }))
        .collect();
    Ok(Json(json!({ "items": items, "errors": errors })))
}

async fn producers(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let params = Params(q);
    let group = params.required("group")?;
    let topic = params.required("topic")?;
    check_group(group)?;
    check_topic(topic)?;
    // A group with no producer connected on any master is an empty list here, not an error.
    let conn = match state.admin.producer_connections(group, topic).await {
        Ok(conn) => conn,
        Err(comet_client::ClientError::Broker { .. } | comet_client::ClientError::Client(_)) => {
            ProducerConnection::default()
        }
        Err(e) => return Err(e.into()),
    };
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
    Ok(Json(
        json!({ "group": group, "topic": topic, "clients": clients }),
    ))
}
