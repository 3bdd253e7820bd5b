//! `POST /v1/batches/decide` through the real router: the approval tool runs alone in its
//! batch — the first approval call is kept, the rest are cancelled with texts the model can
//! act on — and the same input always gives the same answer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use axum::http::StatusCode;
use serde_json::json;
use support::{TestApp, assert_code, assert_error};

const PATH: &str = "/v1/batches/decide";

#[tokio::test]
async fn keeps_the_first_approval_call_and_cancels_the_rest() {
    let app = TestApp::new().await;
    let body = json!({
        "approval_tool": "request_approval",
        "tool_uses": [
            {"toolUseId": "t1", "name": "run_script"},
            {"toolUseId": "t2", "name": "request_approval"},
            {"toolUseId": "t3", "name": "request_approval"},
            {"toolUseId": "t4", "name": "fetch"},
        ],
    });
    let (s, b) = app.as_runtime().post(PATH, body.clone()).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        b,
        json!({"cancel": {
            "t1": "call the approval tool on its own",
            "t3": "merged into the first approval request",
            "t4": "call the approval tool on its own",
        }})
    );
    let (_, again) = app.as_runtime().post(PATH, body).await;
    assert_eq!(again.to_string(), b.to_string(), "same input, same answer");
}

#[tokio::test]
async fn without_an_approval_call_nothing_is_cancelled() {
    let app = TestApp::new().await;
    for uses in [
        json!([]),
        json!([{"toolUseId": "a", "name": "run_script"}, {"toolUseId": "b", "name": "fetch"}]),
    ] {
        let (s, b) = app
            .as_runtime()
            .post(
                PATH,
                json!({"approval_tool": "request_approval", "tool_uses": uses}),
            )
            .await;
        assert_eq!((s, b), (StatusCode::OK, json!({"cancel": {}})));
    }
    let (_, b) = app.as_runtime().post(PATH, json!({"approval_tool": "request_approval", "tool_uses": [{"toolUseId": "only", "name": "request_approval"}]}))
        .await;
    assert_eq!(b, json!({"cancel": {}}));
}

#[tokio::test]
async fn bad_requests() {
    let app = TestApp::new().await;
    let ok = json!({"approval_tool": "x", "tool_uses": []});
    assert_eq!(
        app.anonymous().post(PATH, ok.clone()).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(app.as_admin().post(PATH, ok).await.0, StatusCode::FORBIDDEN);
    for raw in [
        "[",
        r#"{"tool_uses": []}"#,
        r#"{"approval_tool": "x", "tool_uses": [], "extra": 1}"#,
        r#"{"approval_tool": "x", "tool_uses": [{"toolUseId": "a"}]}"#,
        r#"{"approval_tool": "x", "tool_uses": [{"toolUseId": "a", "name": "x", "input": {}}]}"#,
        r#"{"approval_tool": "x", "tool_uses": [{"tool_use_id": "a", "name": "x"}]}"#,
    ] {
        let (s, b) = app.as_runtime().post_raw(PATH, raw).await;
        assert_error(s, &b, (StatusCode::BAD_REQUEST, "INVALID_BODY"), raw);
    }
    let dup = json!({"approval_tool": "x", "tool_uses": [{"toolUseId": "a", "name": "x"}, {"toolUseId": "a", "name": "y"}]});
    let (s, b) = app.as_runtime().post(PATH, dup).await;
    assert_code(s, &b, (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_INPUT"));
    let (s, b) = app
        .as_runtime()
        .post(PATH, json!({"approval_tool": "", "tool_uses": []}))
        .await;
    assert_code(s, &b, (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_INPUT"));
}
