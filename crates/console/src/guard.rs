//! The guard in front of every page and API call but the login page: a live session, and for a
//! write its CSRF token and the admin role (see the module docs of [`crate::auth`]).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use crate::auth::{CSRF_HEADER, Role, session_id};
use crate::error::ApiError;
use crate::state::AppState;

/// Whether a request with this method changes something.
fn is_write(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The request every open page makes on its own every few seconds: it does not count as
/// activity, so an open page does not keep an idle session alive.
pub const PASSIVE_PATH: &str = "/api/status";
/// Header of the reads a page makes on its own (its periodic refreshes): like
/// [`PASSIVE_PATH`], they do not count as activity.
pub const BACKGROUND_HEADER: &str = "x-comet-background";

/// The guard in front of every page and API call but the login page: see the module docs.
pub async fn require_session(
    State(state): State<Arc<AppState>>,
    mut request: Request,
    next: Next,
) -> Response {
    let is_api = request.uri().path().starts_with("/api/");
    let passive = request.uri().path() == PASSIVE_PATH
        || (!is_write(request.method()) && request.headers().contains_key(BACKGROUND_HEADER));
    let session = session_id(request.headers()).and_then(|id| {
        if passive {
            state.sessions.peek(&id)
        } else {
            state.sessions.touch(&id)
        }
    });
    let Some(session) = session else {
        return if is_api {
            ApiError::new(StatusCode::UNAUTHORIZED, "login required").into_response()
        } else {
            Redirect::to("/login").into_response()
        };
    };
    if is_write(request.method()) {
        let token = request
            .headers()
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok());
        if token != Some(session.csrf.as_str()) {
            return ApiError::new(StatusCode::FORBIDDEN, "missing or wrong CSRF token")
                .into_response();
        }
        if session.role != Role::Admin {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "the read-only account cannot change anything",
            )
            .into_response();
        }
    }
    request.extensions_mut().insert(session);
    next.run(request).await
}
