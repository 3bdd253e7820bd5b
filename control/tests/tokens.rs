//! Named, scoped API tokens through the real router: created by an admin (the secret shown
//! once, only its SHA-256 stored), each endpoint family behind its scope (`401` missing,
//! unknown or expired; `403` wrong scope), rotated without a restart, audited without the
//! secret; the env tokens stay the default (runtime = every runtime scope, admin = admin).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use axum::http::StatusCode;
use egressgate_store::Secret;
use serde_json::{Value, json};
use support::{TestApp, assert_code, assert_error, code, message};

async fn create(app: &TestApp, name: &str, scopes: &[&str]) -> String {
    let (s, b) = app
        .as_admin()
        .post("/v1/admin/tokens", json!({"name": name, "scopes": scopes}))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    b["token"].as_str().unwrap().to_owned()
}

/// One request per endpoint family, each needing one scope; returns the statuses.
async fn reach(app: &TestApp, token: &str) -> Vec<(&'static str, StatusCode)> {
    let t = Some(token);
    let turn = app.turn("u", "c").await;
    let mut out = Vec::new();
    let (s, _) = app
        .with_token(t)
        .post(
            "/v1/turns",
            json!({"user_id": "u", "chat_id": "c9", "can_ask_human": true}),
        )
        .await;
    out.push(("turns", s));
    let (s, _) = app
        .with_token(t)
        .get(&format!("/v1/turns/{}/refusals", turn))
        .await;
    out.push(("turns", s));
    let (s, _) = app
        .with_token(t)
        .post(
            "/v1/batches/decide",
            json!({"tool_uses": [], "approval_tool": "a"}),
        )
        .await;
    out.push(("approvals", s));
    let (s, _) = app
        .with_token(t)
        .get("/v1/interrupts/int_AAAAAAAAAAAAAAAAAAAAAA/outcome")
        .await;
    out.push(("cards:read", s));
    let (s, _) = app.get("/v1/chats/c/approvals", t, Some("u")).await;
    out.push(("chats", s));
    let (s, _) = app.with_token(t).get("/v1/admin/sites").await;
    out.push(("admin", s));
    out
}

fn allowed(s: StatusCode) -> bool {
    s != StatusCode::UNAUTHORIZED && s != StatusCode::FORBIDDEN
}

#[tokio::test]
async fn each_scope_opens_its_endpoints_only() {
    let app = TestApp::new().await;
    for scope in ["turns", "approvals", "cards:read", "chats", "admin"] {
        let token = create(&app, &format!("only-{}", scope.replace(':', "-")), &[scope]).await;
        for (needs, status) in reach(&app, &token).await {
            // Outcomes are read by the approval tool's resume branch as well.
            if needs == scope || (needs == "cards:read" && scope == "approvals") {
                assert!(
                    allowed(status),
                    "{scope} token on a {needs} endpoint: {status}"
                );
            } else {
                assert_eq!(
                    status,
                    StatusCode::FORBIDDEN,
                    "{scope} token on a {needs} endpoint"
                );
            }
        }
    }
    // The env tokens: the runtime one holds every runtime scope, the admin one only admin.
    for (needs, status) in reach(&app, support::RUNTIME_TOKEN).await {
        assert_eq!(
            allowed(status),
            needs != "admin",
            "runtime token on {needs}: {status}"
        );
    }
    for (needs, status) in reach(&app, support::ADMIN_TOKEN).await {
        assert_eq!(
            allowed(status),
            needs == "admin",
            "admin token on {needs}: {status}"
        );
    }
    let (s, b) = app.as_runtime().get("/v1/admin/tokens").await;
    assert_code(s, &b, (StatusCode::FORBIDDEN, "FORBIDDEN"));
}

#[tokio::test]
async fn the_secret_is_shown_once_and_stored_as_sha256_only() {
    let app = TestApp::new().await;
    let (s, b) = app
        .as_admin()
        .post(
            "/v1/admin/tokens",
            json!({"name": "ci", "scopes": ["turns", "cards:read"], "ttl_seconds": 3600}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let token = b["token"].as_str().unwrap();
    assert!(token.len() >= 43, "256 random bits");
    assert_eq!(b["scopes"], json!(["turns", "cards:read"]));
    assert!(b["expires_at"].as_str().unwrap().ends_with('Z'));
    let hash = Secret::from_presented(token).hash();
    let stored = format!(
        "SELECT COUNT(*) FROM scoped_tokens WHERE name = 'ci' AND token_hash = '{}'",
        hash.as_str()
    );
    assert_eq!(app.count(&stored).await, 1);
    let (s, list) = app.as_admin().get("/v1/admin/tokens").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(list["tokens"][0]["name"], "ci");
    assert!(list["tokens"][0].get("token").is_none());
    assert!(!list.to_string().contains(token) && !list.to_string().contains(hash.as_str()));
    // Audited, without the secret.
    assert_eq!(app.audit_rows("admin_change").await, 1);
    let (_, audit) = app
        .as_admin()
        .get("/v1/admin/audit?kind=admin_change")
        .await;
    assert!(!audit.to_string().contains(token), "{audit}");
    assert_eq!(audit["audit"][0]["detail"]["value"], "ci");
}

#[tokio::test]
async fn rotation_needs_no_restart_and_expiry_is_401() {
    let app = TestApp::new().await;
    let old = create(&app, "runtime-a", &["turns"]).await;
    let (s, _) = app
        .with_token(Some(&old))
        .get("/v1/turns/t_AAAAAAAAAAAAAAAAAAAAAA/policy")
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "works on the very next request");
    let new = create(&app, "runtime-b", &["turns"]).await;
    let (s, _) = app.as_admin().delete("/v1/admin/tokens/runtime-a").await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, b) = app
        .with_token(Some(&old))
        .get("/v1/turns/t_AAAAAAAAAAAAAAAAAAAAAA/policy")
        .await;
    assert_eq!(
        (s, code(&b)),
        (StatusCode::UNAUTHORIZED, "UNAUTHORIZED"),
        "removed: stops at once"
    );
    let (s, _) = app
        .with_token(Some(&new))
        .get("/v1/turns/t_AAAAAAAAAAAAAAAAAAAAAA/policy")
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, b) = app.as_admin().delete("/v1/admin/tokens/runtime-a").await;
    assert_code(s, &b, (StatusCode::NOT_FOUND, "TOKEN_NOT_FOUND"));
    assert_eq!(app.audit_rows("admin_change").await, 3);

    // Expired (now ≥ its expiry): 401, like an unknown token.
    app.exec_sql("UPDATE scoped_tokens SET expires_at = 0 WHERE name = 'runtime-b'")
        .await;
    let (s, b) = app
        .with_token(Some(&new))
        .get("/v1/turns/t_AAAAAAAAAAAAAAAAAAAAAA/policy")
        .await;
    assert_code(s, &b, (StatusCode::UNAUTHORIZED, "UNAUTHORIZED"));
    assert!(message(&b).contains("expired"), "{b}");
}

#[tokio::test]
async fn bad_token_requests_are_refused_and_write_nothing() {
    let app = TestApp::new().await;
    create(&app, "taken", &["turns"]).await;
    let cases: [(Value, StatusCode, &str); 7] = [
        (
            json!({"name": "x", "scopes": ["root"]}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "INVALID_INPUT",
        ),
        (
            json!({"name": "x", "scopes": []}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "INVALID_INPUT",
        ),
        (
            json!({"name": "a b", "scopes": ["turns"]}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "INVALID_INPUT",
        ),
        (
            json!({"name": "x", "scopes": ["turns"], "ttl_seconds": 0}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "INVALID_INPUT",
        ),
        (
            json!({"name": "taken", "scopes": ["admin"]}),
            StatusCode::CONFLICT,
            "TOKEN_EXISTS",
        ),
        (
            json!({"name": "x", "scopes": ["turns"], "secret": "mine"}),
            StatusCode::BAD_REQUEST,
            "INVALID_BODY",
        ),
        (
            json!({"name": "x"}),
            StatusCode::BAD_REQUEST,
            "INVALID_BODY",
        ),
    ];
    for (body, status, want) in cases {
        let (s, b) = app.as_admin().post("/v1/admin/tokens", body.clone()).await;
        assert_error(s, &b, (status, want), &body.to_string());
    }
    let (s, b) = app
        .as_admin()
        .post_raw(
            "/v1/admin/tokens",
            r#"{"name": "x", "scopes": ["turns"], "scopes": ["admin"]}"#,
        )
        .await;
    assert_code(s, &b, (StatusCode::BAD_REQUEST, "INVALID_BODY"));
    assert_eq!(app.count("SELECT COUNT(*) FROM scoped_tokens").await, 1);
    assert_eq!(app.audit_rows("admin_change").await, 1);
    // A token never created is 401; a scoped token is never accepted as the admin token.
    let (s, _) = app
        .with_token(Some("not-a-token-at-all"))
        .get("/v1/admin/tokens")
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_credential_or_user_sent_twice_is_400_and_changes_nothing() {
    let app = TestApp::new().await;
    let body = json!({"user_id": "u", "chat_id": "c", "can_ask_human": true}).to_string();
    for headers in [
        [
            ("authorization", format!("Bearer {}", support::ADMIN_TOKEN)),
            (
                "authorization",
                format!("Bearer {}", support::RUNTIME_TOKEN),
            ),
        ],
        [
            (
                "authorization",
                format!("Bearer {}", support::RUNTIME_TOKEN),
            ),
            ("authorization", "Bearer not-a-token".to_owned()),
        ],
        [
            ("x-egressgate-user", "u".to_owned()),
            ("x-egressgate-user", "mallory".to_owned()),
        ],
    ] {
        let mut req =
            axum::http::Request::post("/v1/turns").header("content-type", "application/json");
        if headers[0].0 != "authorization" {
            req = req.header(
                "authorization",
                format!("Bearer {}", support::RUNTIME_TOKEN),
            );
        }
        for (k, v) in &headers {
            req = req.header(*k, v);
        }
        let (s, _, b) = app
            .send(req.body(axum::body::Body::from(body.clone())).unwrap())
            .await;
        assert_eq!(
            (s, code(&b)),
            (StatusCode::BAD_REQUEST, "INVALID_HEADER"),
            "{headers:?}"
        );
    }
    assert_eq!(app.count("SELECT COUNT(*) FROM turns").await, 0);
}
