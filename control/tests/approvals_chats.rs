//! Approval rows and chats: what an approval writes, a decline removing only its own card's
//! rows, listing and revoking, hiding a chat, and another user's chat answering exactly like
//! a nonexistent one.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cards;
mod support;

use std::time::Duration;

use axum::http::StatusCode;
use egressgate_store::Timestamp;
use serde_json::json;
use support::{Answer, TestApp, assert_code, code};

/// `DELETE /v1/chats/c1/approvals/{kind}/{value}` as `user`: revoking one approval row of
/// chat `c1`, the chat every row here uses.
async fn revoke(app: &TestApp, user: &str, kind: &str, value: &str) -> Answer {
    let path = format!("/v1/chats/c1/approvals/{kind}/{value}");
    app.as_user(user).delete(&path).await
}

#[tokio::test]
async fn an_approval_writes_rows_the_chat_can_list() {
    let app = TestApp::new().await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &["requests"]).await;
    cards::approve(&app, &r).await;
    let (status, body) = app.as_user("alice").get("/v1/chats/c1/approvals").await;
    assert_eq!(status, StatusCode::OK);
    let rows = body["approvals"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["kind"], "site");
    assert_eq!(rows[0]["value"], "files.example.com");
    assert_eq!(rows[0]["card_id"], r.id.as_str());
    let exp = Timestamp::parse_rfc3339(rows[0]["expires_at"].as_str().unwrap()).unwrap();
    assert!(
        exp > Timestamp::now().plus(Duration::from_secs(23 * 3600)),
        "approval-ttl 24h"
    );
    assert_eq!(rows[1]["kind"], "package");
    assert_eq!(rows[1]["value"], "requests");
    // The same chat id under another user is another (empty) chat.
    let (status, body) = app.as_user("mallory").get("/v1/chats/c1/approvals").await;
    assert_eq!((status, body), (StatusCode::OK, json!({"approvals": []})));
    let (status, _) = app.as_runtime().get("/v1/chats/c1/approvals").await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "the user header is required"
    );
}

#[tokio::test]
async fn a_decline_removes_only_its_own_cards_rows() {
    let app = TestApp::new().await;
    let a = cards::completed(&app, "alice", "c1", &["a.example.com"]).await;
    app.insert_approval(
        "alice",
        "c1",
        "site",
        "other.example.com",
        Duration::from_secs(600),
    )
    .await;
    let b = cards::card(&app, "alice", "c1", &["b.example.com"], &[]).await;
    // A row stamped with b's id (as a chained or earlier claim of b would leave).
    app.exec_sql(&format!(
        "INSERT INTO approvals (user_id, chat_id, kind, value, card_id, created_at, expires_at) \
         VALUES ('alice', 'c1', 'site', 'b.example.com', '{}', 0, {})",
        b.id,
        Timestamp::now().plus(Duration::from_secs(600)).millis()
    ))
    .await;
    let (status, body) = cards::resume(&app, &b.id, &b.secret, json!({"approved": false})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"]["outcome"], "declined");
    let left = |card: &str| format!("SELECT COUNT(*) FROM approvals WHERE card_id = '{card}'");
    assert_eq!(app.count(&left(&b.id)).await, 0);
    assert_eq!(app.count(&left(&a.id)).await, 1);
    assert_eq!(app.count(&left("int_test")).await, 1);
}

#[tokio::test]
async fn revoking_one_approval() {
    let app = TestApp::new().await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &["requests"]).await;
    cards::approve(&app, &r).await;
    // The person may type the value as they see it; it is normalised like the card.
    let (status, body) = revoke(&app, "alice", "site", "Files.Example.com").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, list) = app.as_user("alice").get("/v1/chats/c1/approvals").await;
    assert_eq!(list["approvals"].as_array().unwrap().len(), 1);
    assert_eq!(app.audit_rows("approval_revoked").await, 1);
    // Gone, another user's, or an unknown kind: not found.
    for (user, kind, value) in [
        ("alice", "site", "files.example.com"),
        ("mallory", "package", "requests"),
        ("alice", "host", "requests"),
    ] {
        let (status, body) = revoke(&app, user, kind, value).await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::NOT_FOUND, "APPROVAL_NOT_FOUND"),
            "{kind}/{value} as {user}"
        );
    }
    let (status, _) = revoke(&app, "alice", "package", "requests").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn hiding_a_chat_expires_its_card_and_revokes_everything() {
    let app = TestApp::new().await;
    cards::completed(&app, "alice", "c1", &["a.example.com"]).await;
    let pending = cards::card(&app, "alice", "c1", &["b.example.com"], &[]).await;

    // Another user's chat of the same id, and an unknown chat, are not found.
    let (status, body) = app.as_user("mallory").delete("/v1/chats/c1").await;
    assert_code(status, &body, (StatusCode::NOT_FOUND, "CHAT_NOT_FOUND"));
    let (status, _) = app.as_user("alice").delete("/v1/chats/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, body) = app.as_user("alice").delete("/v1/chats/c1").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = cards::click(&app, &pending).await;
    assert_code(status, &body, (StatusCode::GONE, "INTERRUPT_EXPIRED"));
    let (_, list) = app.as_user("alice").get("/v1/chats/c1/approvals").await;
    assert_eq!(list, json!({"approvals": []}));
    assert_eq!(app.count("SELECT COUNT(*) FROM approvals").await, 0);
    assert_eq!(app.audit_rows("chat_hidden").await, 1);
    // New turns are refused.
    let body = json!({"user_id": "alice", "chat_id": "c1", "can_ask_human": true});
    let (status, body) = app.as_runtime().post("/v1/turns", body).await;
    assert_code(status, &body, (StatusCode::GONE, "CHAT_HIDDEN"));
    // Hiding twice is harmless.
    let (status, _) = app.as_user("alice").delete("/v1/chats/c1").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn an_audit_failure_revokes_nothing() {
    let app = TestApp::new().await;
    app.insert_approval(
        "alice",
        "c1",
        "site",
        "a.example.com",
        Duration::from_secs(600),
    )
    .await;
    app.open_turn("alice", "c1", true).await;
    cards::break_audit(&app).await;
    let (status, body) = revoke(&app, "alice", "site", "a.example.com").await;
    assert_code(
        status,
        &body,
        (StatusCode::SERVICE_UNAVAILABLE, "AUDIT_FAILED"),
    );
    let (status, body) = app.as_user("alice").delete("/v1/chats/c1").await;
    assert_code(
        status,
        &body,
        (StatusCode::SERVICE_UNAVAILABLE, "AUDIT_FAILED"),
    );
    assert_eq!(app.count("SELECT COUNT(*) FROM approvals").await, 1);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM chats WHERE hidden_at IS NULL")
            .await,
        1
    );
}
