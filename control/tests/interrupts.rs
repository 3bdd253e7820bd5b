//! Registering interrupts: the AG-UI shape, draft checks before the one-open rule, one open
//! request per chat under concurrency, reissue, outcome and chained cards. What is stored
//! beside the row (snapshots, long answers, their failures and the janitor) is in
//! `interrupts_storage.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cards;
mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use egressgate_store::Timestamp;
use serde_json::json;
use support::{TestApp, assert_code};

#[tokio::test]
async fn registration_returns_an_ag_ui_interrupt() {
    let app = TestApp::new().await;
    let (_, d) = cards::draft(
        &app,
        "alice",
        "c1",
        &["files.example.com", "pypi.org"],
        &[],
        Some("call_7"),
    )
    .await;
    let r = cards::register(&app, &d, json!({})).await;
    let i = &r.body["interrupt"];
    assert!(i["id"].as_str().unwrap().starts_with("int_"));
    assert_eq!(i["reason"], "tool_call");
    assert_eq!(i["toolCallId"], "call_7");
    assert_eq!(
        i["message"],
        "Allow connections (downloads and uploads) to files.example.com and pypi.org for the rest of this chat?"
    );
    let schema = &i["responseSchema"];
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["properties"]["approved"]["type"], "boolean");
    assert_eq!(schema["properties"]["packages"]["type"], "array");
    assert_eq!(schema["required"], json!(["approved"]));
    let expires = i["expiresAt"].as_str().unwrap();
    assert!(expires.ends_with('Z'));
    let at = Timestamp::parse_rfc3339(expires).unwrap();
    assert!(
        at > Timestamp::now().plus(Duration::from_secs(3000)),
        "default interrupt-ttl is 1h"
    );
    assert_eq!(
        r.body["card"]["sites"],
        json!(["files.example.com", "pypi.org"])
    );
    assert!(r.secret.len() >= 22, "at least 128 bits");
    // Only the hash is kept.
    let leaked = format!(
        "SELECT COUNT(*) FROM interrupts WHERE secret_hash = '{}'",
        r.secret
    );
    assert_eq!(app.count(&leaked).await, 0);
    let audited = "SELECT COUNT(*) FROM audit WHERE kind = 'approval_requested'";
    assert_eq!(app.count(audited).await, 1);

    // Without a tool call id: the namespaced custom reason and no toolCallId key.
    let (_, d) = cards::draft(&app, "alice", "c2", &[], &["requests"], None).await;
    let r = cards::register(&app, &d, json!({})).await;
    assert_eq!(r.body["interrupt"]["reason"], "egressgate:approval");
    assert!(r.body["interrupt"].get("toolCallId").is_none());
}

#[tokio::test]
async fn draft_errors_come_before_the_one_open_rule() {
    let app = TestApp::new().await;
    let (status, body) = cards::register_with(&app, "dr_AAAAAAAAAAAAAAAAAAAAAA", json!({})).await;
    assert_code(status, &body, (StatusCode::NOT_FOUND, "DRAFT_NOT_FOUND"));
    let (status, body) = cards::register_with(&app, "nonsense", json!({})).await;
    assert_code(status, &body, (StatusCode::NOT_FOUND, "DRAFT_NOT_FOUND"));

    let (turn, d) = cards::draft(&app, "alice", "c1", &["files.example.com"], &[], None).await;
    cards::register(&app, &d, json!({})).await;
    // Used draft while the chat has an open request: DRAFT_USED, not INTERRUPT_PENDING.
    let (status, body) = cards::register_with(&app, &d, json!({})).await;
    assert_code(status, &body, (StatusCode::CONFLICT, "DRAFT_USED"));
    // Expired draft while the chat has an open request: DRAFT_NOT_FOUND.
    let d2 = cards::draft_in_turn(&app, &turn, &["pypi.org"], &[], None).await;
    app.exec_sql(&format!(
        "UPDATE drafts SET expires_at = 1 WHERE draft_id = '{d2}'"
    ))
    .await;
    let (status, body) = cards::register_with(&app, &d2, json!({})).await;
    assert_code(status, &body, (StatusCode::NOT_FOUND, "DRAFT_NOT_FOUND"));
    // A usable draft in the same chat meets the one-open rule.
    let d3 = cards::draft_in_turn(&app, &turn, &["pypi.org"], &[], None).await;
    let (status, body) = cards::register_with(&app, &d3, json!({})).await;
    assert_code(status, &body, (StatusCode::CONFLICT, "INTERRUPT_PENDING"));
    let unused = format!("SELECT COUNT(*) FROM drafts WHERE draft_id = '{d3}' AND used_at IS NULL");
    assert_eq!(
        app.count(&unused).await,
        1,
        "a refused registration leaves the draft usable"
    );
}

#[tokio::test]
async fn concurrent_registrations_in_one_chat_create_exactly_one_request() {
    let app = Arc::new(TestApp::new().await);
    let turn = app.turn("alice", "c1").await;
    let mut drafts = Vec::new();
    for i in 0..8 {
        drafts.push(
            cards::draft_in_turn(&app, &turn, &[&format!("h{i}.example.com")], &[], None).await,
        );
    }
    let answers = support::race::at_once(drafts.into_iter().map(|d| {
        let app = Arc::clone(&app);
        async move { cards::register_with(&app, &d, json!({"snapshot": "AAEC"})).await }
    }))
    .await;
    let pending = (StatusCode::CONFLICT, "INTERRUPT_PENDING");
    support::race::one_winner(&answers, StatusCode::CREATED, &[pending]);
    app.assert_counts(&[
        ("SELECT COUNT(*) FROM interrupts", 1),
        ("SELECT COUNT(*) FROM drafts WHERE used_at IS NOT NULL", 1),
    ])
    .await;
}

#[tokio::test]
async fn a_closed_request_makes_room_for_the_next_card() {
    let app = TestApp::new().await;
    let (turn, r, claim) = cards::claimed(&app, "alice", "c1", &["a.example.com"]).await;
    let (status, _) = cards::claim(&app, &r, "complete", &claim).await;
    assert_eq!(status, StatusCode::OK);
    // Done: a new card may replace it (in the same turn, as a resumed run would).
    let d = cards::draft_in_turn(&app, &turn, &["b.example.com"], &[], None).await;
    let r2 = cards::register(&app, &d, json!({})).await;
    assert_ne!(r2.id, r.id);
    // Past its logical expiry, a pending request no longer blocks either.
    app.exec_sql("UPDATE interrupts SET expires_at = 1").await;
    let d = cards::draft_in_turn(&app, &turn, &["c.example.com"], &[], None).await;
    cards::register(&app, &d, json!({})).await;
}

#[tokio::test]
async fn reissue_makes_the_old_secret_stop_working() {
    let app = TestApp::new().await;
    let r = cards::files_card(&app, "alice", "c1").await;
    let path = "/v1/chats/c1/interrupt/reissue";
    let (status, body) = app.as_user("alice").post(path, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["interrupt"]["id"], r.id.as_str());
    let fresh = body["resume_secret"].as_str().unwrap();
    assert_ne!(fresh, r.secret);
    let (status, body) = cards::click(&app, &r).await;
    assert_code(
        status,
        &body,
        (StatusCode::NOT_FOUND, "INTERRUPT_NOT_FOUND"),
    );
    let (status, _) = cards::resume(&app, &r.id, fresh, json!({"approved": true})).await;
    assert_eq!(status, StatusCode::OK);
    // Another user, or a chat without an open request: not found.
    let (status, body) = app.as_user("mallory").post(path, json!({})).await;
    assert_code(
        status,
        &body,
        (StatusCode::NOT_FOUND, "INTERRUPT_NOT_FOUND"),
    );
    let (status, _) = app
        .as_user("alice")
        .post("/v1/chats/none/interrupt/reissue", json!({}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn outcome_answers_from_stored_data() {
    let app = TestApp::new().await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &["requests"]).await;
    let path = format!("/v1/interrupts/{}/outcome", r.id);
    let (status, body) = app.as_runtime().get(&path).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["state"], "pending");
    assert_eq!(body["decision"], json!(null));
    assert_eq!(body["card"]["packages"], json!(["requests"]));
    // Whose card it is, so a new runtime process can name them in its takeover.
    assert_eq!(body["user_id"], "alice");
    let (status, _) = app.anonymous().get(&path).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = app.as_user("mallory").get(&path).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    cards::resume(
        &app,
        &r.id,
        &r.secret,
        json!({"approved": true, "packages": []}),
    )
    .await;
    let (_, body) = app.as_runtime().get(&path).await;
    assert_eq!(body["state"], "claimed");
    assert_eq!(
        body["decision"],
        json!({"outcome": "approved", "sites": ["files.example.com"], "packages": []})
    );

    let r = cards::files_card(&app, "alice", "c2").await;
    app.exec_sql(&format!(
        "UPDATE interrupts SET expires_at = 1 WHERE interrupt_id = '{}'",
        r.id
    ))
    .await;
    let (_, body) = app
        .as_runtime()
        .get(&format!("/v1/interrupts/{}/outcome", r.id))
        .await;
    assert_eq!(
        body["state"], "expired",
        "past its logical expiry, even though the row says pending"
    );
}

#[tokio::test]
async fn a_chained_card_replaces_the_request_under_a_live_claim() {
    let app = TestApp::new().await;
    let (turn, first, claim) = cards::claimed(&app, "alice", "c1", &["a.example.com"]).await;

    // A claim id nobody holds: CLAIM_LOST and nothing written.
    let d2 = cards::draft_in_turn(&app, &turn, &["b.example.com"], &[], None).await;
    let (status, body) = cards::register_with(&app, &d2, json!({"claim_id": "not-a-claim"})).await;
    assert_code(status, &body, (StatusCode::CONFLICT, "CLAIM_LOST"));
    let still_claimed = format!(
        "SELECT COUNT(*) FROM interrupts WHERE interrupt_id = '{}' AND state = 'claimed'",
        first.id
    );
    let unused = format!("SELECT COUNT(*) FROM drafts WHERE draft_id = '{d2}' AND used_at IS NULL");
    app.assert_counts(&[(&still_claimed, 1), (&unused, 1)])
        .await;

    // With the live claim: replaced in place, new id, fresh secret, counter reset.
    let chained = cards::register(&app, &d2, json!({"claim_id": claim})).await;
    assert_ne!(chained.id, first.id);
    assert_ne!(chained.secret, first.secret);
    let reset = format!(
        "SELECT COUNT(*) FROM interrupts WHERE interrupt_id = '{}' AND state = 'pending' AND claim_count = 0 AND claim_hash IS NULL",
        chained.id
    );
    app.assert_counts(&[(&reset, 1), ("SELECT COUNT(*) FROM interrupts", 1)])
        .await;
    // The old claim is gone with the old request.
    let (status, body) = cards::claim(&app, &first, "heartbeat", &claim).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // The first card's approvals stay; the new card is answerable.
    assert_eq!(
        app.count(&format!(
            "SELECT COUNT(*) FROM approvals WHERE card_id = '{}'",
            first.id
        ))
        .await,
        1
    );
    cards::approve(&app, &chained).await;
    // Chaining again with the (now replaced) first claim fails.
    let d3 = cards::draft_in_turn(&app, &turn, &["c.example.com"], &[], None).await;
    let (status, body) = cards::register_with(&app, &d3, json!({"claim_id": claim})).await;
    assert_code(status, &body, (StatusCode::CONFLICT, "CLAIM_LOST"));
}
