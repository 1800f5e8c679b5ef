//! The overview (clusters, brokers with address, version, role, message rates, today's and
//! yesterday's counts and disk use), the name servers' reachability and the ACL listing.
//! Rates come from [`crate::sampler::broker_rates`].

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use comet_protocol::time::now_millis;
use futures::future::join_all;
use serde_json::{Value, json};

use crate::error::ApiResult;
use crate::sampler::{broker_rates, brokers_of};
use crate::state::AppState;

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/overview", get(overview))
        .route("/api/status", get(status))
        .route("/api/acl", get(acl))
}

/// Whether the name servers answer now, and when they last did: asks them for the cluster
/// (GET_BROKER_CLUSTER_INFO). Always a 200, so a page can poll it through an outage.
async fn status(State(state): State<Arc<AppState>>) -> Json<Value> {
    match state.admin.cluster_info().await {
        Ok(_) => state.health.reached(now_millis()),
        Err(e) => state.health.failed(now_millis(), e.to_string()),
    }
    let health = state.health.state();
    Json(json!({
        "namesrv": state.admin.config().namesrv_addr,
        "ok": health.ok,
        "error": health.error,
        "lastOkMs": health.last_ok_ms,
        "checkedMs": health.checked_ms,
        "now": now_millis(),
        "sampleIntervalSecs": state.config.sample_interval_secs,
    }))
}

fn number(info: &BTreeMap<String, String>, key: &str) -> Option<i64> {
    info.get(key)?.trim().parse().ok()
}

/// `now - then` of two counters, when the broker reports both.
fn between(info: &BTreeMap<String, String>, now: &str, then: &str) -> Option<i64> {
    Some(number(info, now)?.saturating_sub(number(info, then)?))
}

/// The disk use as a percentage (the broker reports a ratio, -1 when unknown).
fn disk_percent(info: &BTreeMap<String, String>) -> Option<f64> {
    let ratio: f64 = info.get("commitLogDiskRatio")?.trim().parse().ok()?;
    (0.0..=1.0)
        .contains(&ratio)
        .then(|| (ratio * 1000.0).round() / 10.0)
}

/// One broker's row of the overview from its runtime figures.
fn broker_row(state: &AppState, addr: &str, info: &BTreeMap<String, String>) -> Value {
    let (put, get) = broker_rates(state, addr, info);
    json!({
        "version": info.get("brokerVersionDesc"),
        "putTps": put, "getTps": get,
        "todayIn": between(info, "msgPutTotalTodayNow", "msgPutTotalTodayMorning"),
        "todayOut": between(info, "msgGetTotalTodayNow", "msgGetTotalTodayMorning"),
        "yesterdayIn": between(info, "msgPutTotalTodayMorning", "msgPutTotalYesterdayMorning"),
        "yesterdayOut": between(info, "msgGetTotalTodayMorning", "msgGetTotalYesterdayMorning"),
        "diskPercent": disk_percent(info),
        "diskFull": info.get("diskFull"),
        "commitLogMaxOffset": info.get("commitLogMaxOffset"),
        "bootTimestamp": info.get("bootTimestamp"),
        "runtime": info.get("runtime"),
    })
}

/// The ACL accounts of every master (ACL 1.0, `plain_acl.yml`), without secret keys. A broker
/// with ACL off, or one that does not answer the request, is listed with the reason.
async fn acl(State(state): State<Arc<AppState>>) -> ApiResult<Json<Value>> {
    let masters = state.admin.master_addrs(None).await?;
    let answers = join_all(masters.iter().map(|(_, addr)| state.admin.acl_config(addr))).await;
    let mut enabled = false;
    let mut brokers = Vec::new();
    for ((name, addr), answer) in masters.into_iter().zip(answers) {
        brokers.push(match answer {
            Ok(listing) => {
                enabled = true;
                let accounts: Vec<Value> = listing
                    .plain_access_configs
                    .iter()
                    .map(|a| {
                        json!({
                            "accessKey": a.access_key, "admin": a.admin,
                            "whiteRemoteAddress": a.white_remote_address,
                            "defaultTopicPerm": a.default_topic_perm,
                            "defaultGroupPerm": a.default_group_perm,
                            "topicPerms": a.topic_perms, "groupPerms": a.group_perms,
                        })
                    })
                    .collect();
                json!({
                    "brokerName": name, "addr": addr,
                    "globalWhiteAddrs": listing.global_white_addrs, "accounts": accounts,
                })
            }
            Err(e) => json!({ "brokerName": name, "addr": addr, "error": e.to_string() }),
        });
    }
    Ok(Json(json!({ "enabled": enabled, "brokers": brokers })))
}

async fn overview(State(state): State<Arc<AppState>>) -> ApiResult<Json<Value>> {
    let info = match state.admin.cluster_info().await {
        Ok(info) => info,
        Err(e) => {
            state.health.failed(now_millis(), e.to_string());
            return Err(e.into());
        }
    };
    state.health.reached(now_millis());
    let brokers = brokers_of(&info);
    let runtime = join_all(
        brokers
            .iter()
            .map(|(_, _, _, addr)| state.admin.broker_runtime_info(addr)),
    )
    .await;
    let mut rows = Vec::new();
    let (mut put_sum, mut get_sum) = (0.0, 0.0);
    for ((cluster, name, id, addr), runtime) in brokers.into_iter().zip(runtime) {
        let mut row = match runtime {
            Ok(info) => broker_row(&state, &addr, &info),
            Err(e) => json!({ "error": e.to_string() }),
        };
        put_sum += row["putTps"].as_f64().unwrap_or(0.0);
        get_sum += row["getTps"].as_f64().unwrap_or(0.0);
        row["cluster"] = json!(cluster);
        row["brokerName"] = json!(name);
        row["brokerId"] = json!(id);
        row["addr"] = json!(addr);
        row["role"] = json!(if id == 0 { "master" } else { "slave" });
        rows.push(row);
    }
    Ok(Json(json!({
        "namesrv": state.admin.config().namesrv_addr,
        "clusters": info.cluster_addr_table.keys().collect::<Vec<_>>(),
        "brokers": rows,
        "putTps": put_sum,
        "getTps": get_sum,
    })))
}
