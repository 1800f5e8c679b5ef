//! The overview: clusters, brokers (address, version, role), message rates and disk.
//!
//! Apache brokers report rates in their runtime info (`putTps`, and `getTransferredTps` or, in
//! older versions, `getTransferedTps`; the first number is the latest); when a broker reports only counters (`putMessageTimesTotal`,
//! `getTransferedTimes`, as Comet does), the rate is the counter's change since the previous
//! overview, kept per broker.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use futures::future::join_all;
use serde_json::{Value, json};

use crate::error::ApiResult;
use crate::state::{AppState, CounterSample};

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/overview", get(overview))
        .route("/api/acl", get(acl))
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

/// The first number of a rate figure ("12.5 10.1 9.8" → 12.5).
fn first_rate(text: Option<&String>) -> Option<f64> {
    text?.split_whitespace().next()?.parse().ok()
}

fn counter(info: &BTreeMap<String, String>, key: &str) -> Option<u64> {
    info.get(key)?.trim().parse().ok()
}

/// `(put, get)` messages per second of the broker at `addr`.
fn rates(
    state: &AppState,
    addr: &str,
    info: &BTreeMap<String, String>,
) -> (Option<f64>, Option<f64>) {
    let put = first_rate(info.get("putTps"));
    let get = first_rate(
        info.get("getTransferredTps")
            .or_else(|| info.get("getTransferedTps")),
    );
    if put.is_some() && get.is_some() {
        return (put, get);
    }
    let (Some(put_total), Some(get_total)) = (
        counter(info, "putMessageTimesTotal"),
        counter(info, "getTransferedTimes"),
    ) else {
        return (put, get);
    };
    let now = CounterSample {
        at: Instant::now(),
        put: put_total,
        get: get_total,
    };
    let previous = state.samples.lock().insert(addr.to_owned(), now);
    let Some(previous) = previous else {
        return (put, get);
    };
    let secs = now.at.duration_since(previous.at).as_secs_f64();
    if secs <= 0.0 {
        return (put, get);
    }
    let rate = |a: u64, b: u64| a.saturating_sub(b) as f64 / secs;
    (
        put.or(Some(rate(now.put, previous.put))),
        get.or(Some(rate(now.get, previous.get))),
    )
}

async fn overview(State(state): State<Arc<AppState>>) -> ApiResult<Json<Value>> {
    let info = state.admin.cluster_info().await?;
    let mut brokers = Vec::new();
    for (name, data) in &info.broker_addr_table {
        for (id, addr) in &data.broker_addrs {
            brokers.push((data.cluster.clone(), name.clone(), *id, addr.clone()));
        }
    }
    brokers.sort();
    let runtime = join_all(
        brokers
            .iter()
            .map(|(_, _, _, addr)| state.admin.broker_runtime_info(addr)),
    )
    .await;
    let mut rows = Vec::new();
    let (mut put_sum, mut get_sum) = (0.0, 0.0);
    for ((cluster, name, id, addr), runtime) in brokers.into_iter().zip(runtime) {
        let row = match runtime {
            Ok(info) => {
                let (put, get) = rates(&state, &addr, &info);
                put_sum += put.unwrap_or(0.0);
                get_sum += get.unwrap_or(0.0);
                json!({
                    "cluster": cluster, "brokerName": name, "brokerId": id, "addr": addr,
                    "role": if id == 0 { "master" } else { "slave" },
                    "version": info.get("brokerVersionDesc"),
                    "putTps": put, "getTps": get,
                    "diskRatio": info.get("commitLogDiskRatio"),
                    "diskFull": info.get("diskFull"),
                    "commitLogMaxOffset": info.get("commitLogMaxOffset"),
                    "bootTimestamp": info.get("bootTimestamp"),
                })
            }
            Err(e) => json!({
                "cluster": cluster, "brokerName": name, "brokerId": id, "addr": addr,
                "role": if id == 0 { "master" } else { "slave" },
                "error": e.to_string(),
            }),
        };
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
