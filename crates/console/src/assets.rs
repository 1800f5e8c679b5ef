//! The page's files, embedded in the binary: the login page, the single-page console, its
//! scripts and the style sheet. No file is served from disk.
//!
//! The console's script is split by page family; `app.html` loads every file of [`APP_SCRIPTS`]
//! in order (`app.js` first: the helpers and the router the others use).

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

const LOGIN_HTML: &str = include_str!("../assets/login.html");
const APP_HTML: &str = include_str!("../assets/app.html");
const LOGIN_JS: &str = include_str!("../assets/login.js");
const APP_CSS: &str = include_str!("../assets/app.css");

/// The console's scripts: URL path and text, in load order. Served to logged-in sessions only.
pub(crate) const APP_SCRIPTS: &[(&str, &str)] = &[
    ("/static/app.js", include_str!("../assets/app.js")),
    ("/static/chart.js", include_str!("../assets/chart.js")),
    ("/static/cluster.js", include_str!("../assets/cluster.js")),
    ("/static/topics.js", include_str!("../assets/topics.js")),
    ("/static/groups.js", include_str!("../assets/groups.js")),
    ("/static/messages.js", include_str!("../assets/messages.js")),
    ("/static/trace.js", include_str!("../assets/trace.js")),
];

fn file(content_type: &'static str, text: &'static str) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, content_type)], text)
}

pub(crate) async fn login_page() -> impl IntoResponse {
    file("text/html; charset=utf-8", LOGIN_HTML)
}

pub(crate) async fn app_page() -> impl IntoResponse {
    file("text/html; charset=utf-8", APP_HTML)
}

pub(crate) async fn login_js() -> impl IntoResponse {
    file("text/javascript; charset=utf-8", LOGIN_JS)
}

pub(crate) async fn app_css() -> impl IntoResponse {
    file("text/css; charset=utf-8", APP_CSS)
}

/// A route for each of [`APP_SCRIPTS`].
pub(crate) fn script_routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    APP_SCRIPTS
        .iter()
        .fold(Router::new(), |router, (path, text)| {
            let text: &'static str = text;
            router.route(
                path,
                get(move || async move { file("text/javascript; charset=utf-8", text) }),
            )
        })
}
