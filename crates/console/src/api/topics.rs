//! Topics: the filtered, paged list; one topic's route, queues and consumers; create or update;
//! a test message; delete.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use comet_client::admin::TopicTarget;
use comet_client::admin::topic::default_topic_config;
use comet_client::message::Message;
use comet_protocol::body::{ClusterInfo, perm};
use comet_protocol::naming;
use serde::Deserialize;
use serde_json::{Value, json};

use super::show_system;
use super::{Params, check_topic, parse_json};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Largest queue count a topic may be given here.
pub const MAX_QUEUE_NUMS: i32 = 1024;
/// Most user properties a test message may carry.
pub const MAX_TEST_PROPERTIES: usize = 32;

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/topics", get(list).post(create))
        .route("/api/topics/{topic}", get(detail).delete(delete))
        .route("/api/topics/{topic}/messages", post(send_test))
}

/// The kind of a topic, as the list's filter names it.
pub fn topic_kind(topic: &str, cluster: &ClusterInfo) -> &'static str {
    if naming::is_retry_topic(topic) {
        "retry"
    } else if naming::is_dlq_topic(topic) {
        "dlq"
    } else if naming::is_system_topic(topic, |name| {
        cluster.cluster_addr_table.contains_key(name)
            || cluster.broker_addr_table.contains_key(name)
    }) {
        "system"
    } else {
        "normal"
    }
}

async fn list(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let params = Params(q);
    let paging = params.paging()?;
    let kind = params.text("type")?.unwrap_or("all");
    if !["all", "normal", "retry", "dlq", "system"].contains(&kind) {
        return Err(ApiError::bad_request(format!(
            "type must be all, normal, retry, dlq or system, got {kind:?}"
        )));
    }
    let system = show_system(&params)?;
    let filter = params.text("q")?.map(str::to_lowercase);
    let (topics, cluster) =
        futures::try_join!(state.admin.topic_list(), state.admin.cluster_info())?;
    let matching: Vec<(String, &'static str)> = topics
        .into_iter()
        .map(|t| {
            let k = topic_kind(&t, &cluster);
            (t, k)
        })
        .filter(|(_, k)| match kind {
            "all" => system || *k != "system",
            _ => *k == kind,
        })
        .filter(|(t, _)| filter.as_ref().is_none_or(|f| t.to_lowercase().contains(f)))
        .collect();
    let items = paging
        .slice(&matching)
        .into_iter()
        .map(|(name, kind)| json!({ "name": name, "type": kind }))
        .collect();
    Ok(Json(paging.wrap(matching.len(), items)))
}

async fn detail(
    State(state): State<Arc<AppState>>,
    Path(topic): Path<String>,
) -> ApiResult<Json<Value>> {
    check_topic(&topic)?;
    let route = state.admin.topic_route(&topic).await?;
    let stats = state.admin.topic_stats(&topic).await?;
    let mut queues: Vec<Value> = stats
        .offset_table
        .iter()
        .map(|(mq, o)| {
            json!({
                "brokerName": mq.broker_name, "queueId": mq.queue_id,
                "minOffset": o.min_offset, "maxOffset": o.max_offset,
                "lastUpdateTimestamp": o.last_update_timestamp,
            })
        })
        .collect();
    queues.sort_by(|a, b| {
        (a["brokerName"].as_str(), a["queueId"].as_i64())
            .cmp(&(b["brokerName"].as_str(), b["queueId"].as_i64()))
    });
    let groups = state
        .admin
        .topic_consumer_groups(&topic)
        .await
        .unwrap_or_default();
    let mut consumers = Vec::new();
    for group in groups.iter().take(super::MAX_PAGE_SIZE) {
        let lag = state
            .admin
            .consume_stats(group, Some(&topic))
            .await
            .ok()
            .map(|s| s.diff_total());
        consumers.push(json!({ "group": group, "lag": lag }));
    }
    let brokers: Vec<Value> = route
        .broker_datas
        .iter()
        .map(|b| json!({ "cluster": b.cluster, "brokerName": b.broker_name, "addrs": b.broker_addrs }))
        .collect();
    let queue_datas: Vec<Value> = route
        .queue_datas
        .iter()
        .map(|q| {
            json!({
                "brokerName": q.broker_name, "readQueueNums": q.read_queue_nums,
                "writeQueueNums": q.write_queue_nums, "perm": q.perm,
                "permText": perm::to_text(q.perm),
            })
        })
        .collect();
    Ok(Json(json!({
        "topic": topic,
        "route": { "brokers": brokers, "queues": queue_datas },
        "queues": queues,
        "consumers": consumers,
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TopicForm {
    topic: String,
    #[serde(default)]
    cluster: Option<String>,
    #[serde(default = "default_queues")]
    read_queue_nums: i32,
    #[serde(default = "default_queues")]
    write_queue_nums: i32,
    #[serde(default = "default_perm")]
    perm: i32,
}

fn default_queues() -> i32 {
    comet_client::admin::topic::DEFAULT_ADMIN_QUEUE_NUMS
}

fn default_perm() -> i32 {
    6
}

/// The cluster a write targets: the one named, else the only one there is.
async fn target_cluster(state: &AppState, named: Option<&str>) -> ApiResult<String> {
    let info = state.admin.cluster_info().await?;
    match named {
        Some(c) if info.cluster_addr_table.contains_key(c) => Ok(c.to_owned()),
        Some(c) => Err(ApiError::not_found(format!("no cluster named {c:?}"))),
        None => {
            let mut names = info.cluster_addr_table.keys();
            match (names.next(), names.next()) {
                (Some(only), None) => Ok(only.clone()),
                (None, _) => Err(ApiError::not_found("the name server knows no cluster")),
                _ => Err(ApiError::bad_request(
                    "several clusters: name one with cluster",
                )),
            }
        }
    }
}

async fn create(State(state): State<Arc<AppState>>, body: Bytes) -> ApiResult<Json<Value>> {
    let form: TopicForm = parse_json(&body)?;
    check_topic(&form.topic)?;
    if naming::is_not_allowed_send_topic(&form.topic) {
        return Err(ApiError::bad_request(format!("{} is reserved", form.topic)));
    }
    for (name, n) in [
        ("readQueueNums", form.read_queue_nums),
        ("writeQueueNums", form.write_queue_nums),
    ] {
        if !(1..=MAX_QUEUE_NUMS).contains(&n) {
            return Err(ApiError::bad_request(format!(
                "{name} must be between 1 and {MAX_QUEUE_NUMS}, got {n}"
            )));
        }
    }
    if ![2, 4, 6].contains(&form.perm) {
        return Err(ApiError::bad_request(
            "perm must be 2 (write), 4 (read) or 6 (read-write)",
        ));
    }
    let cluster = target_cluster(&state, form.cluster.as_deref()).await?;
    let mut config = default_topic_config(form.topic.clone());
    config.read_queue_nums = form.read_queue_nums;
    config.write_queue_nums = form.write_queue_nums;
    config.perm = form.perm;
    let brokers = state
        .admin
        .create_topic(&TopicTarget::Cluster(cluster.clone()), &config)
        .await?;
    tracing::info!(topic = %form.topic, cluster = %cluster, "console: topic created or updated");
    Ok(Json(
        json!({ "topic": form.topic, "cluster": cluster, "brokers": brokers }),
    ))
}

async fn delete(
    State(state): State<Arc<AppState>>,
    Path(topic): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    check_topic(&topic)?;
    let params = Params(q);
    let route = state.admin.topic_route(&topic).await?;
    let clusters: BTreeSet<String> = match params.text("cluster")? {
        Some(c) => [target_cluster(&state, Some(c)).await?].into(),
        None => route
            .broker_datas
            .iter()
            .map(|b| b.cluster.clone())
            .collect(),
    };
    for cluster in &clusters {
        state.admin.delete_topic(&topic, cluster).await?;
    }
    tracing::info!(topic = %topic, "console: topic deleted");
    Ok(Json(json!({ "topic": topic, "clusters": clusters })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TestMessage {
    body: String,
    #[serde(default)]
    tags: Option<String>,
    #[serde(default)]
    keys: Option<String>,
    #[serde(default)]
    properties: HashMap<String, String>,
}

async fn send_test(
    State(state): State<Arc<AppState>>,
    Path(topic): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    check_topic(&topic)?;
    let form: TestMessage = parse_json(&body)?;
    if form.properties.len() > MAX_TEST_PROPERTIES {
        return Err(ApiError::bad_request(format!(
            "at most {MAX_TEST_PROPERTIES} properties"
        )));
    }
    state.admin.topic_route(&topic).await?;
    let mut msg = Message::new(topic.clone(), form.body.into_bytes());
    if let Some(tags) = form.tags.filter(|t| !t.trim().is_empty()) {
        msg.set_tags(tags);
    }
    if let Some(keys) = form.keys.filter(|k| !k.trim().is_empty()) {
        msg.set_keys(keys.split_whitespace());
    }
    for (k, v) in form.properties {
        msg.put_user_property(k, v)
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
    }
    let producer = state.producer().await?;
    let result = producer.send(msg).await?;
    Ok(Json(json!({
        "msgId": result.msg_id,
        "offsetMsgId": result.offset_msg_id,
        "status": format!("{:?}", result.send_status),
        "queueId": result.message_queue.queue_id,
        "queueOffset": result.queue_offset,
    })))
}
