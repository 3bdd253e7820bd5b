//! CORS: off by default (no header for any origin); with `--cors-origin`, exactly the
//! configured origins get a preflight answer and the allow-origin header.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use axum::body::Body;
use axum::http::{Request, Response};
use support::TestApp;
use tower::ServiceExt as _;

/// The one origin the configured app allows.
const APP: &str = "https://app.example.com";

/// An app with `--cors-origin` [`APP`].
async fn allowing_app() -> TestApp {
    TestApp::configured(|s| s.cors_origins = vec![APP.into()]).await
}

/// A request to `uri` from a page of `origin`, for the caller to finish.
fn from_origin(method: &str, uri: &str, origin: &str) -> axum::http::request::Builder {
    Request::builder()
        .method(method)
        .uri(uri)
        .header("origin", origin)
}

/// Sends `req` through the app.
async fn send(app: &TestApp, req: Request<Body>) -> Response<Body> {
    app.router.clone().oneshot(req).await.unwrap()
}

async fn preflight(app: &TestApp, origin: &str) -> Response<Body> {
    let req = from_origin("OPTIONS", "/v1/turns", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization,content-type",
        )
        .body(Body::empty())
        .unwrap();
    send(app, req).await
}

async fn simple_get(app: &TestApp, origin: &str) -> Response<Body> {
    let req = from_origin("GET", "/openapi.json", origin)
        .body(Body::empty())
        .unwrap();
    send(app, req).await
}

#[tokio::test]
async fn off_by_default() {
    let app = TestApp::new().await;
    let r = preflight(&app, APP).await;
    assert!(r.headers().get("access-control-allow-origin").is_none());
    let r = simple_get(&app, APP).await;
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn only_configured_origins() {
    let app = allowing_app().await;
    let r = preflight(&app, APP).await;
    assert_eq!(r.status(), 200);
    let h = r.headers();
    assert_eq!(h["access-control-allow-origin"], APP);
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
    let r = simple_get(&app, APP).await;
    assert_eq!(r.headers()["access-control-allow-origin"], APP);

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
    let req = from_origin("POST", "/v1/turns", origin)
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
    send(app, req).await
}

/// The preflight is only half: the real cross-site write from an allowed origin must pass
/// the same-origin guard too, while any other site is still refused.
#[tokio::test]
async fn an_allowed_origin_can_write_and_others_cannot() {
    let app = allowing_app().await;
    let r = post_turn(&app, APP).await;
    assert_eq!(r.status(), 201);
    assert_eq!(r.headers()["access-control-allow-origin"], APP);
    let r = post_turn(&app, "https://evil.example.com").await;
    assert_eq!(r.status(), 403);
    let off = TestApp::new().await;
    assert_eq!(post_turn(&off, APP).await.status(), 403);
}
