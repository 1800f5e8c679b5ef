//! The JSON API and the routes of the page.
//!
//! Lists are paged and filtered on the server ([`Paging`]) so a cluster with thousands of topics
//! and groups stays fast. Every parameter is checked here and refused with a 400 and a JSON
//! `{"error": ...}` before anything is sent to the cluster; a name the cluster does not know is a
//! 404.

mod brokers;
mod charts;
mod cluster;
mod groups;
mod messages;
mod pickers;
mod producers;
mod topics;

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json};
use base64::Engine;
use comet_protocol::message::MessageExt;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::assets;
use crate::auth::{self, Session};
use crate::error::{ApiError, ApiResult};
use crate::guard;
use crate::state::AppState;

/// Largest page of a list.
pub const MAX_PAGE_SIZE: usize = 500;
/// Page size when none is asked for.
pub const DEFAULT_PAGE_SIZE: usize = 50;
/// Most messages one query returns.
pub const MAX_MESSAGE_RESULTS: usize = 1000;
/// Largest request body.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Longest text filter or name parameter.
pub const MAX_PARAM_LEN: usize = 512;

/// The Content-Security-Policy of every response: nothing inline, nothing from elsewhere.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The console's routes over `state`.
pub fn router(state: Arc<AppState>) -> Router {
    let guarded = Router::new()
        .route("/", get(assets::app_page))
        .merge(assets::script_routes())
        .route("/api/session", get(session_info))
        .route("/api/logout", post(logout))
        .merge(cluster::routes())
        .merge(brokers::routes())
        .merge(charts::routes())
        .merge(pickers::routes())
        .merge(producers::routes())
        .merge(topics::routes())
        .merge(groups::routes())
        .merge(messages::routes())
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            guard::require_session,
        ));
    Router::new()
        .route("/login", get(assets::login_page))
        .route("/static/login.js", get(assets::login_js))
        .route("/static/app.css", get(assets::app_css))
        .route("/api/login", post(login))
        .merge(guarded)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn(security_headers))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such page")
}

/// Adds the security headers to every response.
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    let fixed = [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

#[derive(Deserialize)]
struct LoginForm {
    user: String,
    password: String,
}

async fn login(
    State(state): State<Arc<AppState>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    // A cross-site HTML form can post text/plain or form data without a preflight, never JSON.
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the login is a JSON body (content-type: application/json)",
        ));
    }
    let form: LoginForm = parse_json(&body)?;
    if form.user.len() > MAX_PARAM_LEN || form.password.len() > MAX_PARAM_LEN {
        return Err(ApiError::bad_request("user or password too long"));
    }
    if state.sessions.login_locked(&form.user) {
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too many failed logins: try again in a minute",
        ));
    }
    let checker = state.clone();
    let user = form.user.clone();
    let role = tokio::task::spawn_blocking(move || checker.accounts.verify(&user, &form.password))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let Some(role) = role else {
        state.sessions.login_failed(&form.user);
        tracing::warn!(user = %form.user, "console login refused");
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "wrong user or password",
        ));
    };
    state.sessions.login_succeeded(&form.user);
    let (id, session) = state.sessions.create(&form.user, role);
    let cookie = auth::session_cookie(&id, state.config.session_timeout_secs);
    let mut response = Json(json!({
        "user": session.user,
        "role": session.role,
        "canWrite": session.role == auth::Role::Admin,
        "csrf": session.csrf,
    }))
    .into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie)
            .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?,
    );
    Ok(response)
}

async fn logout(State(state): State<Arc<AppState>>, request: Request) -> Response {
    if let Some(id) = auth::session_id(request.headers()) {
        state.sessions.remove(&id);
    }
    let mut response = Json(json!({ "ok": true })).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "comet_console_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
        ),
    );
    response
}

/// The session's account, its role, whether it may change anything (the page shows no write
/// control when it may not; the server refuses the writes of a read-only session regardless)
/// and its CSRF token.
async fn session_info(Extension(session): Extension<Session>) -> Json<Value> {
    Json(json!({
        "user": session.user,
        "role": session.role,
        "canWrite": session.role == auth::Role::Admin,
        "csrf": session.csrf,
    }))
}

/// A JSON request body, or a 400 naming what is wrong with it.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("bad JSON body: {e}")))
}

/// Query parameters, checked one by one.
pub struct Params(pub HashMap<String, String>);

impl Params {
    /// A text parameter, trimmed; empty counts as absent; too long is a 400.
    pub fn text(&self, name: &str) -> ApiResult<Option<&str>> {
        match self.0.get(name).map(|v| v.trim()) {
            None | Some("") => Ok(None),
            Some(v) if v.len() > MAX_PARAM_LEN => Err(ApiError::bad_request(format!(
                "{name} is longer than {MAX_PARAM_LEN} bytes"
            ))),
            Some(v) => Ok(Some(v)),
        }
    }

    /// A required text parameter.
    pub fn required(&self, name: &str) -> ApiResult<&str> {
        self.text(name)?
            .ok_or_else(|| ApiError::bad_request(format!("{name} is required")))
    }

    /// A whole-number parameter in `[min, max]`, `default` when absent.
    pub fn number(&self, name: &str, default: i64, min: i64, max: i64) -> ApiResult<i64> {
        let Some(text) = self.text(name)? else {
            return Ok(default);
        };
        let value: i64 = text.parse().map_err(|_| {
            ApiError::bad_request(format!("{name} must be a whole number, got {text:?}"))
        })?;
        if value < min || value > max {
            return Err(ApiError::bad_request(format!(
                "{name} must be between {min} and {max}, got {value}"
            )));
        }
        Ok(value)
    }

    /// The page and page size of a list.
    pub fn paging(&self) -> ApiResult<Paging> {
        let page = self.number("page", 1, 1, 1_000_000)?;
        let size = self.number("size", DEFAULT_PAGE_SIZE as i64, 1, MAX_PAGE_SIZE as i64)?;
        Ok(Paging {
            page: usize::try_from(page).unwrap_or(1),
            size: usize::try_from(size).unwrap_or(DEFAULT_PAGE_SIZE),
        })
    }
}

/// One page of a list: `page` counts from 1.
#[derive(Debug, Clone, Copy)]
pub struct Paging {
    /// The page, from 1.
    pub page: usize,
    /// Items per page.
    pub size: usize,
}

impl Paging {
    /// The page's items of `items`, and the page as JSON fields.
    pub fn slice<T: Clone>(&self, items: &[T]) -> Vec<T> {
        let start = (self.page - 1).saturating_mul(self.size);
        items.iter().skip(start).take(self.size).cloned().collect()
    }

    /// `{"total", "page", "size", "items"}`.
    pub fn wrap(&self, total: usize, items: Vec<Value>) -> Value {
        json!({ "total": total, "page": self.page, "size": self.size, "items": items })
    }
}

/// A topic name from a path or a body: legal characters and length, else a 400.
pub fn check_topic(topic: &str) -> ApiResult<()> {
    comet_protocol::naming::validate_topic(topic)
        .map_err(|e| ApiError::bad_request(format!("bad topic name {topic:?}: {e}")))
}

/// A group name from a path or a body: legal characters and length, else a 400.
pub fn check_group(group: &str) -> ApiResult<()> {
    comet_protocol::naming::validate_group(group)
        .map_err(|e| ApiError::bad_request(format!("bad group name {group:?}: {e}")))
}

/// A message as the page shows it. The body is sent both as (lossy) UTF-8 text and as base64,
/// so the page can show it as text, JSON or hex.
pub fn message_json(msg: &MessageExt) -> Value {
    let properties: serde_json::Map<String, Value> = msg
        .properties
        .iter()
        .map(|(k, v)| (k.to_owned(), Value::String(v.to_owned())))
        .collect();
    json!({
        "msgId": msg.msg_id(),
        "offsetMsgId": msg.offset_msg_id(),
        "topic": msg.topic,
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "tags": msg.tags(),
        "keys": msg.keys().collect::<Vec<_>>(),
        "properties": properties,
        "bornTimestamp": msg.born_timestamp,
        "bornHost": msg.born_host.to_string(),
        "storeTimestamp": msg.store_timestamp,
        "storeHost": msg.store_host.to_string(),
        "reconsumeTimes": msg.reconsume_times,
        "bodyLength": msg.body.len(),
        "bodyText": String::from_utf8_lossy(&msg.body),
        "bodyBase64": base64::engine::general_purpose::STANDARD.encode(&msg.body),
    })
}

/// Whether a `system=true|false` parameter asks for system names too.
pub fn show_system(params: &Params) -> ApiResult<bool> {
    match params.text("system")? {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "system must be true or false, got {other:?}"
        ))),
    }
}
