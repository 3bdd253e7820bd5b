//! CORS: off by default (no header for any origin); with `--cors-origin`, exactly the
//! configured origins get a preflight answer and the allow-origin header.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use axum::body::Body;
use axum::http::{Request, Response};
use support::TestApp;
use tower::ServiceExt as _;

async fn preflight(app: &TestApp, origin: &str) -> Response<Body> {
    let req = Request::builder()
        .method("OPTIONS")
        .uri("/v1/turns")
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization,content-type",
        )
        .body(Body::empty())
        .unwrap();
    app.router.clone().oneshot(req).await.unwrap()
}

async fn simple_get(app: &TestApp, origin: &str) -> Response<Body> {
    let req = Request::builder()
        .uri("/openapi.json")
        .header("origin", origin)
        .body(Body::empty())
        .unwrap();
    app.router.clone().oneshot(req).await.unwrap()
}

#[tokio::test]
async fn off_by_default() {
    let app = TestApp::new().await;
    let r = preflight(&app, "https://app.example.com").await;
    assert!(r.headers().get("access-control-allow-origin").is_none());
    let r = simple_get(&app, "https://app.example.com").await;
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn only_configured_origins() {
    let app =
        TestApp::configured(|s| s.cors_origins = vec!["https://app.example.com".into()]).await;
    let r = preflight(&app, "https://app.example.com").await;
    assert_eq!(r.status(), 200);
    let h = r.headers();
    assert_eq!(h["access-control-allow-origin"], "https://app.example.com");
    assert!(
        h["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("POST")
    );
    assert!(
        h["access-control-allow-headers"]
            .to_str()
            .unwrap()
            .contains("authorization")
    );
    assert!(h.get("access-control-allow-credentials").is_none());
    let r = simple_get(&app, "https://app.example.com").await;
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://app.example.com"
    );

    for other in ["https://evil.example.com", "http://app.example.com", "null"] {
        let r = preflight(&app, other).await;
        assert!(
            r.headers().get("access-control-allow-origin").is_none(),
            "{other}"
        );
        let r = simple_get(&app, other).await;
        assert!(
            r.headers().get("access-control-allow-origin").is_none(),
            "{other}"
        );
    }
}

async fn post_turn(app: &TestApp, origin: &str) -> Response<Body> {
    let req = Request::builder()
        .method("POST")
        .uri("/v1/turns")
        .header("origin", origin)
        .header("sec-fetch-site", "cross-site")
        .header(
            "authorization",
            format!("Bearer {}", support::RUNTIME_TOKEN),
        )
        .header("content-type", "application/json")
        .body(Body::from(
            r#"{"user_id":"u","chat_id":"c","can_ask_human":true}"#,
        ))
        .unwrap();
    app.router.clone().oneshot(req).await.unwrap()
}

/// The preflight is only half: the real cross-site write from an allowed origin must pass
/// the same-origin guard too, while any other site is still refused.
#[tokio::test]
async fn an_allowed_origin_can_write_and_others_cannot() {
    let app =
        TestApp::configured(|s| s.cors_origins = vec!["https://app.example.com".into()]).await;
    let r = post_turn(&app, "https://app.example.com").await;
    assert_eq!(r.status(), 201);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://app.example.com"
    );
    let r = post_turn(&app, "https://evil.example.com").await;
    assert_eq!(r.status(), 403);
    let off = TestApp::new().await;
    assert_eq!(
        post_turn(&off, "https://app.example.com").await.status(),
        403
    );
}
