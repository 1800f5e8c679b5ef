//! The console's security model: login, sessions, CSRF, roles, headers, and refusal of bad input.

use std::time::Duration;

use axum::http::{Method, StatusCode, header};
use comet_testkit::console::{ADMIN_PASSWORD, Env, Login, VIEWER_PASSWORD};
use serde_json::json;

#[tokio::test]
async fn pages_and_api_need_a_login() {
    let env = Env::start(|_| {}).await;
    for path in [
        "/api/overview",
        "/api/topics",
        "/api/groups",
        "/api/session",
        "/api/dlq/g",
        "/api/status",
        "/api/history?kind=cluster",
        "/api/pickers/topics",
        "/api/producers/online",
        "/api/brokers/127.0.0.1:10911",
        "/api/messages/trace?id=AB",
    ] {
        let answer = env.call(Method::GET, path, None, None, None).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{path}");
        assert!(answer.json["error"].is_string(), "{path}: {}", answer.text);
    }
    for path in [
        "/",
        "/static/app.js",
        "/static/chart.js",
        "/static/cluster.js",
        "/static/topics.js",
        "/static/groups.js",
        "/static/messages.js",
        "/static/trace.js",
    ] {
        let answer = env.call(Method::GET, path, None, None, None).await;
        assert_eq!(answer.status, StatusCode::SEE_OTHER, "{path}");
        assert_eq!(answer.headers[header::LOCATION], "/login");
    }
    let forged = Login {
        cookie: "comet_console_session=forged".to_owned(),
        csrf: "x".to_owned(),
    };
    assert_eq!(
        env.get("/api/topics", &forged).await.status,
        StatusCode::UNAUTHORIZED
    );
    let login_page = env.call(Method::GET, "/login", None, None, None).await;
    assert_eq!(login_page.status, StatusCode::OK);
    let csp = login_page.headers[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .expect("ascii");
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert!(!login_page.text.contains("<script>"), "no inline script");
}

#[tokio::test]
async fn wrong_passwords_and_unknown_users_are_refused() {
    let env = Env::start(|c| c.read_only_password = None).await;
    for (user, password) in [
        ("admin", "wrong-password"),
        ("admin", ""),
        ("root", ADMIN_PASSWORD),
        ("viewer", VIEWER_PASSWORD),
        ("viewer", ""),
    ] {
        let (answer, login) = env.try_login(user, password).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{user}/{password}");
        assert!(login.is_none());
        assert!(answer.headers.get(header::SET_COOKIE).is_none());
    }
    // The right password posted as a form (what a cross-site page can do) is not a login.
    let form = axum::http::Request::builder()
        .method(Method::POST)
        .uri("/api/login")
        .header(header::CONTENT_TYPE, "text/plain")
        .body(axum::body::Body::from(
            json!({ "user": "admin", "password": ADMIN_PASSWORD }).to_string(),
        ))
        .expect("request");
    let refused = tower::ServiceExt::oneshot(env.router.clone(), form)
        .await
        .expect("router answers");
    assert_eq!(refused.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(refused.headers().get(header::SET_COOKIE).is_none());
    let (answer, login) = env.try_login("admin", ADMIN_PASSWORD).await;
    assert_eq!(answer.status, StatusCode::OK);
    let cookie = answer.headers[header::SET_COOKIE].to_str().expect("ascii");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    let login = login.expect("logged in");
    assert!(login.csrf.len() >= 32);
    assert_eq!(env.get("/api/session", &login).await.json["role"], "admin");
}

#[tokio::test]
async fn a_generated_password_is_printed_once_and_only_its_hash_is_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = comet_console::ConsoleConfig {
        data_dir: dir.path().join("console"),
        ..Default::default()
    };
    let client = comet_client::ClientConfig::new("127.0.0.1:1");
    let (first, generated) =
        comet_console::build_state(config.clone(), client.clone()).expect("first start");
    let password = generated.expect("a password is generated at first start");
    assert!(password.len() >= 16);
    let stored =
        std::fs::read_to_string(dir.path().join("console/users.json")).expect("users.json");
    assert!(!stored.contains(&password), "only the hash is stored");
    assert!(stored.contains("$argon2"), "{stored}");
    assert_eq!(
        first.accounts.verify("admin", &password),
        Some(comet_console::auth::Role::Admin)
    );
    let (second, again) = comet_console::build_state(config, client).expect("second start");
    assert_eq!(again, None, "later starts reuse the stored hash");
    assert!(second.accounts.verify("admin", &password).is_some());
    assert!(second.accounts.verify("admin", "something else").is_none());
    assert!(
        second.accounts.verify("viewer", &password).is_none(),
        "no viewer without its password"
    );
}

#[tokio::test]
async fn sessions_expire_after_the_idle_timeout_and_at_logout() {
    let env = Env::start(|c| c.session_timeout_secs = 1).await;
    let login = env.admin().await;
    assert_eq!(env.get("/api/session", &login).await.status, StatusCode::OK);
    // That request restarted the idle time; once a full timeout has passed since it answered,
    // the session cannot be alive. The page's status poll on the way does not restart it.
    let expired_at = tokio::time::Instant::now() + Duration::from_millis(1100);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(env.get("/api/status", &login).await.status, StatusCode::OK);
    // Nor does a periodic refresh, which the page marks as made on its own.
    let refresh = axum::http::Request::builder()
        .uri("/api/overview")
        .header(header::COOKIE, &login.cookie)
        .header(comet_console::guard::BACKGROUND_HEADER, "1")
        .body(axum::body::Body::empty())
        .expect("request");
    let refreshed = tower::ServiceExt::oneshot(env.router.clone(), refresh)
        .await
        .expect("router answers");
    assert_eq!(refreshed.status(), StatusCode::OK);
    tokio::time::sleep_until(expired_at).await;
    assert_eq!(
        env.get("/api/status", &login).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        env.get("/api/session", &login).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        env.get("/api/topics", &login).await.status,
        StatusCode::UNAUTHORIZED
    );

    let env = Env::start(|_| {}).await;
    let login = env.admin().await;
    let out = env
        .write(Method::POST, "/api/logout", &login, json!({}))
        .await;
    assert_eq!(out.status, StatusCode::OK);
    assert_eq!(
        env.get("/api/session", &login).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn writes_need_the_session_csrf_token() {
    let env = Env::start(|_| {}).await;
    let login = env.admin().await;
    let body = serde_json::to_vec(&json!({ "topic": "CsrfTopic" })).expect("json");
    for token in [None, Some("wrong-token"), Some("")] {
        let answer = env
            .call(
                Method::POST,
                "/api/topics",
                Some(&login),
                token,
                Some(body.clone()),
            )
            .await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{token:?}");
        assert!(answer.json["error"].as_str().unwrap_or("").contains("CSRF"));
    }
    // Another session's token does not do either.
    let other = env.admin().await;
    let answer = env
        .call(
            Method::POST,
            "/api/topics",
            Some(&login),
            Some(&other.csrf),
            Some(body.clone()),
        )
        .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    let deleted = env
        .call(
            Method::DELETE,
            "/api/topics/TBW102",
            Some(&login),
            None,
            None,
        )
        .await;
    assert_eq!(deleted.status, StatusCode::FORBIDDEN);
    assert!(!env.topic_exists("CsrfTopic").await, "nothing was created");
    assert!(env.topic_exists("TBW102").await, "nothing was deleted");
    env.create_topic(&login, "CsrfTopic", 2).await;
}

#[tokio::test]
async fn the_read_only_account_reads_but_cannot_write() {
    let env = Env::start(|_| {}).await;
    let (answer, viewer) = env.try_login("viewer", VIEWER_PASSWORD).await;
    assert_eq!(answer.json["role"], "viewer");
    let viewer = viewer.expect("viewer logs in");
    assert_eq!(env.get("/api/topics", &viewer).await.status, StatusCode::OK);
    assert_eq!(
        env.get("/api/overview", &viewer).await.status,
        StatusCode::OK
    );
    let broker_config = format!("/api/brokers/{}/config", env.broker_addr());
    let writes = [
        (
            Method::POST,
            "/api/topics",
            json!({ "topic": "ViewerTopic" }),
        ),
        (
            Method::POST,
            "/api/groups/g/reset",
            json!({ "topic": "TBW102", "timestamp": 0 }),
        ),
        (
            Method::POST,
            "/api/dlq/g/resend",
            json!({ "msgIds": ["x"] }),
        ),
        (Method::DELETE, "/api/topics/TBW102", json!({})),
        (
            Method::POST,
            "/api/groups/g/skip",
            json!({ "topic": "TBW102" }),
        ),
        (Method::DELETE, "/api/groups/g", json!({})),
        (
            Method::POST,
            &broker_config,
            json!({ "key": "brokerPermission", "value": "2" }),
        ),
        (
            Method::POST,
            "/api/topics/TBW102/messages",
            json!({ "body": "x" }),
        ),
    ];
    for (method, path, body) in writes {
        let answer = env.write(method, path, &viewer, body).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{path}");
    }
    assert_eq!(env.broker().context().broker_permission(), 6);
    assert!(!env.topic_exists("ViewerTopic").await);
    assert!(env.topic_exists("TBW102").await);
}

#[tokio::test]
async fn bad_input_is_refused_with_a_clear_error_and_changes_nothing() {
    let env = Env::start(|_| {}).await;
    let login = env.admin().await;
    env.create_topic(&login, "BadInputTopic", 2).await;
    let before = env.state.admin.topic_list().await.expect("topics");
    let gets = [
        ("/api/topics?size=501", StatusCode::BAD_REQUEST),
        ("/api/topics?size=0", StatusCode::BAD_REQUEST),
        ("/api/topics?page=0", StatusCode::BAD_REQUEST),
        ("/api/topics?size=ten", StatusCode::BAD_REQUEST),
        ("/api/topics?type=bogus", StatusCode::BAD_REQUEST),
        ("/api/groups?size=100000", StatusCode::BAD_REQUEST),
        ("/api/topics/NoSuchTopic", StatusCode::NOT_FOUND),
        ("/api/topics/bad%20name", StatusCode::BAD_REQUEST),
        (
            "/api/messages/by-time?topic=BadInputTopic&begin=yesterday",
            StatusCode::BAD_REQUEST,
        ),
        (
            "/api/messages/by-time?topic=BadInputTopic&begin=5&end=1",
            StatusCode::BAD_REQUEST,
        ),
        (
            "/api/messages/by-time?topic=NoSuchTopic",
            StatusCode::NOT_FOUND,
        ),
        (
            "/api/messages/by-key?topic=BadInputTopic&key=k&limit=1001",
            StatusCode::BAD_REQUEST,
        ),
        (
            "/api/messages/by-key?topic=BadInputTopic",
            StatusCode::BAD_REQUEST,
        ),
        ("/api/messages/by-id?id=not-hex", StatusCode::BAD_REQUEST),
        ("/api/dlq/g?limit=-1", StatusCode::BAD_REQUEST),
        ("/api/no-such-api", StatusCode::NOT_FOUND),
    ];
    for (path, status) in gets {
        let answer = env.get(path, &login).await;
        assert_eq!(answer.status, status, "{path}: {}", answer.text);
        assert!(answer.json["error"].is_string(), "{path}: {}", answer.text);
    }
    let long = format!("/api/topics?q={}", "x".repeat(600));
    assert_eq!(env.get(&long, &login).await.status, StatusCode::BAD_REQUEST);
    let writes = [
        ("/api/topics", json!({ "topic": "bad name" })),
        (
            "/api/topics",
            json!({ "topic": "Fine", "readQueueNums": 0 }),
        ),
        (
            "/api/topics",
            json!({ "topic": "Fine", "writeQueueNums": 100000 }),
        ),
        ("/api/topics", json!({ "topic": "Fine", "perm": 7 })),
        ("/api/topics", json!({ "topic": "Fine", "unknownField": 1 })),
        ("/api/topics", json!({ "topic": "SCHEDULE_TOPIC_XXXX" })),
        (
            "/api/groups/g1/reset",
            json!({ "topic": "BadInputTopic", "timestamp": "yesterday" }),
        ),
        (
            "/api/groups/g1/reset",
            json!({ "topic": "BadInputTopic", "timestamp": -5 }),
        ),
        (
            "/api/groups/bad%20group/reset",
            json!({ "topic": "BadInputTopic", "timestamp": 0 }),
        ),
        ("/api/dlq/g1/resend", json!({ "msgIds": [] })),
        (
            "/api/topics/BadInputTopic/messages",
            json!({ "tags": "no body" }),
        ),
    ];
    for (path, body) in writes {
        let answer = env.write(Method::POST, path, &login, body.clone()).await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{path} {body}: {}",
            answer.text
        );
        assert!(answer.json["error"].is_string(), "{path}: {}", answer.text);
    }
    let unknown = env
        .write(
            Method::POST,
            "/api/groups/g1/reset",
            &login,
            json!({ "topic": "NoSuchTopic", "timestamp": 0 }),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.text);
    let garbage = env
        .call(
            Method::POST,
            "/api/topics",
            Some(&login),
            Some(&login.csrf),
            Some(b"{not json".to_vec()),
        )
        .await;
    assert_eq!(garbage.status, StatusCode::BAD_REQUEST);
    let huge = vec![b'x'; 2 * 1024 * 1024];
    let too_big = env
        .call(
            Method::POST,
            "/api/topics",
            Some(&login),
            Some(&login.csrf),
            Some(huge),
        )
        .await;
    assert_eq!(too_big.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        env.state.admin.topic_list().await.expect("topics"),
        before,
        "nothing changed"
    );
    assert_eq!(
        env.committed_offset("g1", "BadInputTopic", 0),
        -1,
        "no offset was committed"
    );
}

#[tokio::test]
async fn repeated_failed_logins_lock_the_account() {
    let env = Env::start(|_| {}).await;
    // Four failures, then the right password: the count starts again.
    for _ in 0..4 {
        assert_eq!(
            env.try_login("admin", "guess").await.0.status,
            StatusCode::UNAUTHORIZED
        );
    }
    assert!(env.try_login("admin", ADMIN_PASSWORD).await.1.is_some());
    for _ in 0..5 {
        assert_eq!(
            env.try_login("admin", "guess").await.0.status,
            StatusCode::UNAUTHORIZED
        );
    }
    let (locked, login) = env.try_login("admin", ADMIN_PASSWORD).await;
    assert_eq!(
        locked.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        locked.text
    );
    assert!(login.is_none());
    // The other account is not affected.
    assert!(env.try_login("viewer", VIEWER_PASSWORD).await.1.is_some());
}
