//! The page's files, embedded in the binary: the login page, the single-page console and their
//! script and style sheet. No file is served from disk.

use axum::http::header;
use axum::response::IntoResponse;

const LOGIN_HTML: &str = include_str!("../assets/login.html");
const APP_HTML: &str = include_str!("../assets/app.html");
const LOGIN_JS: &str = include_str!("../assets/login.js");
const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");

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

pub(crate) async fn app_js() -> impl IntoResponse {
    file("text/javascript; charset=utf-8", APP_JS)
}

pub(crate) async fn app_css() -> impl IntoResponse {
    file("text/css; charset=utf-8", APP_CSS)
}
