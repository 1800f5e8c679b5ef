//! The console tests' harness: a [`Cluster`] and the console's router over it, driven request
//! by request with `tower::ServiceExt::oneshot`, with logins, CSRF tokens and JSON answers.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use comet_broker::{BrokerConfig, BrokerHandle};
use comet_client::ClientConfig;
use comet_console::{AppState, ConsoleConfig};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use crate::cluster::Cluster;
use crate::wait::eventually;

/// The admin password the tests configure.
pub const ADMIN_PASSWORD: &str = "admin-password-1";
/// The viewer password the tests configure.
pub const VIEWER_PASSWORD: &str = "viewer-password-1";

/// A name server, a broker and a console over them.
pub struct Env {
    pub cluster: Cluster,
    pub namesrv_addr: String,
    pub state: Arc<AppState>,
    pub router: Router,
}

/// An answer: status, headers and the body as JSON (`Value::Null` when it is not JSON).
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub json: Value,
    pub text: String,
}

/// A logged-in session: its cookie and CSRF token.
#[derive(Clone)]
pub struct Login {
    pub cookie: String,
    pub csrf: String,
}

impl Env {
    /// A cluster and a console with the test passwords and `tweak` applied to its config.
    pub async fn start(tweak: impl FnOnce(&mut ConsoleConfig)) -> Env {
        Self::start_with(|_| {}, tweak).await
    }

    /// As [`Env::start`], with `broker_tweak` applied to the broker's config too.
    pub async fn start_with(
        broker_tweak: impl FnOnce(&mut BrokerConfig),
        tweak: impl FnOnce(&mut ConsoleConfig),
    ) -> Env {
        let cluster = Cluster::start_with(broker_tweak).await;
        cluster.broker().register_now().await;
        let namesrv_addr = cluster.namesrv_addr();
        let mut console = ConsoleConfig {
            password: Some(ADMIN_PASSWORD.to_owned()),
            read_only_password: Some(VIEWER_PASSWORD.to_owned()),
            data_dir: cluster.dir.path().join("console"),
            port: 0,
            ..ConsoleConfig::default()
        };
        tweak(&mut console);
        // Frequent heartbeats, so the console's producer shows in producer connections quickly.
        let mut client = ClientConfig::new(namesrv_addr.clone());
        client.heartbeat_broker_interval = Duration::from_millis(200);
        let (state, _) = comet_console::build_state(console, client).expect("console state");
        let router = comet_console::router(state.clone());
        Env {
            cluster,
            namesrv_addr,
            state,
            router,
        }
    }

    /// Stops the name server (the broker and the console keep running).
    pub async fn stop_namesrv(&mut self) {
        self.cluster.stop_namesrv().await;
    }

    /// The running broker.
    pub fn broker(&self) -> &BrokerHandle {
        self.cluster.broker()
    }

    pub fn broker_addr(&self) -> String {
        self.cluster.broker_addr()
    }

    /// One request through the router.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        login: Option<&Login>,
        csrf: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> Answer {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(login) = login {
            request = request.header(header::COOKIE, &login.cookie);
        }
        if let Some(token) = csrf {
            request = request.header("x-csrf-token", token);
        }
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(Body::from(body.unwrap_or_default()))
            .expect("request");
        let response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .expect("router answers");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Answer {
            status,
            headers,
            json,
            text,
        }
    }

    /// GET as `login`.
    pub async fn get(&self, path: &str, login: &Login) -> Answer {
        self.call(Method::GET, path, Some(login), None, None).await
    }

    /// A write as `login`, with its CSRF token.
    pub async fn write(&self, method: Method, path: &str, login: &Login, body: Value) -> Answer {
        let body = serde_json::to_vec(&body).expect("json");
        self.call(method, path, Some(login), Some(&login.csrf), Some(body))
            .await
    }

    /// Logs in; the answer, and the session when it succeeded.
    pub async fn try_login(&self, user: &str, password: &str) -> (Answer, Option<Login>) {
        let body = serde_json::json!({ "user": user, "password": password });
        let answer = self
            .call(
                Method::POST,
                "/api/login",
                None,
                None,
                Some(serde_json::to_vec(&body).expect("json")),
            )
            .await;
        let cookie = answer
            .headers
            .get(header::SET_COOKIE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(str::to_owned);
        let login = match (answer.status, cookie) {
            (StatusCode::OK, Some(cookie)) => Some(Login {
                cookie,
                csrf: answer.json["csrf"].as_str().unwrap_or_default().to_owned(),
            }),
            _ => None,
        };
        (answer, login)
    }

    /// Logs in as `admin`.
    pub async fn admin(&self) -> Login {
        self.try_login("admin", ADMIN_PASSWORD)
            .await
            .1
            .expect("admin logs in")
    }

    /// Creates `topic` through the console and waits until the name server routes it.
    pub async fn create_topic(&self, login: &Login, topic: &str, queues: i32) {
        let answer = self
            .write(
                Method::POST,
                "/api/topics",
                login,
                serde_json::json!({ "topic": topic, "readQueueNums": queues, "writeQueueNums": queues }),
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "create {topic}: {}",
            answer.text
        );
        self.broker().register_now().await;
        let admin = &self.state.admin;
        eventually("the topic's route", || async {
            admin.topic_route(topic).await.is_ok()
        })
        .await;
    }

    /// Sends a test message through the console; returns its answer.
    pub async fn send(&self, login: &Login, topic: &str, body: Value) -> Answer {
        let path = format!("/api/topics/{}/messages", encode(topic));
        self.write(Method::POST, &path, login, body).await
    }

    /// The group's committed offset of a queue on the broker (-1 if none).
    pub fn committed_offset(&self, group: &str, topic: &str, queue_id: i32) -> i64 {
        self.cluster.committed_offset(group, topic, queue_id)
    }

    /// Creates the subscription group `group` on the broker (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP),
    /// as an operator does before a group commits offsets.
    pub async fn create_group(&self, group: &str) {
        let admin = &self.state.admin;
        let mut request = admin
            .api()
            .request(comet_protocol::code::RequestCode::UpdateAndCreateSubscriptiongroup);
        let body = serde_json::json!({ "groupName": group }).to_string();
        request.body = Some(body.into_bytes().into());
        admin
            .api()
            .invoke_success(&self.broker_addr(), request, admin.timeout())
            .await
            .expect("group created");
    }

    /// Whether the name server routes `topic`.
    pub async fn topic_exists(&self, topic: &str) -> bool {
        self.state.admin.topic_route(topic).await.is_ok()
    }
}

/// Percent-encodes the characters of topic and group names a path cannot hold as they are.
pub fn encode(name: &str) -> String {
    name.replace('%', "%25").replace('|', "%7C")
}
