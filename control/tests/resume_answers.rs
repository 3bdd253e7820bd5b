//! What the person's answer means when resuming a card: only an explicit `true` approves, an
//! unknown status declines, a malformed or incomplete resume claims nothing, a reclaim must
//! repeat the first decision, and a wrong secret, an unknown card and another user's card
//! look the same.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cards;
mod support;

use axum::http::StatusCode;
use serde_json::json;
use support::{TestApp, assert_code, assert_error, code};

#[tokio::test]
async fn only_an_explicit_true_approves() {
    let app = TestApp::new().await;
    for (i, payload) in [
        json!({"approved": "true"}),
        json!({}),
        json!({"approved": 1}),
        json!("yes"),
    ]
    .into_iter()
    .enumerate()
    {
        // One user per card: an unfinished claim holds its user's resume slot.
        let r = cards::files_card(&app, &format!("u{i}"), "c1").await;
        let (status, body) = cards::resume(&app, &r.id, &r.secret, payload).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(
            body["decision"],
            json!({"outcome": "declined", "sites": [], "packages": []})
        );
    }
    let r = cards::files_card(&app, "alice", "cx").await;
    let body = cards::resume_body(&r.id, &r.secret, "cancelled", json!({"approved": true}));
    let (status, body) = cards::resume_as(&app, &r, body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["decision"]["outcome"], "cancelled");
    assert_eq!(app.count("SELECT COUNT(*) FROM approvals").await, 0);
}

#[tokio::test]
async fn an_unknown_or_missing_status_declines() {
    let app = TestApp::new().await;
    for (i, status) in [
        json!("approved"),
        json!("RESOLVED"),
        json!(1),
        json!(null),
        json!({"resolved": true}),
    ]
    .into_iter()
    .enumerate()
    {
        let r = cards::files_card(&app, &format!("u{i}"), "c1").await;
        let body = json!({"secret": r.secret, "resume": [
            {"interruptId": r.id, "status": status, "payload": {"approved": true}}
        ]});
        let (code_, body) = cards::resume_as(&app, &r, body).await;
        assert_eq!(code_, StatusCode::OK, "status {status}: {body}");
        assert_eq!(
            body["decision"],
            json!({"outcome": "declined", "sites": [], "packages": []}),
            "status {status}"
        );
    }
    // A missing status is a missing field: it declines too.
    let r = cards::files_card(&app, "u-missing", "c1").await;
    let body = json!({"secret": r.secret, "resume": [
        {"interruptId": r.id, "payload": {"approved": true}}
    ]});
    let (status, body) = cards::resume_as(&app, &r, body).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"]["outcome"], "declined");
    assert_eq!(app.count("SELECT COUNT(*) FROM approvals").await, 0);
}

#[tokio::test]
async fn an_entry_without_its_interrupt_id_is_incomplete() {
    let app = TestApp::new().await;
    let r = cards::files_card(&app, "alice", "c1").await;
    for body in [
        json!({"secret": r.secret, "resume": [{"status": "resolved", "payload": {"approved": true}}]}),
        json!({"secret": r.secret}),
    ] {
        let (status, resp) = cards::resume_as(&app, &r, body.clone()).await;
        assert_error(
            status,
            &resp,
            (StatusCode::UNPROCESSABLE_ENTITY, "INCOMPLETE_RESUME"),
            &body.to_string(),
        );
    }
    assert_eq!(app.count("SELECT COUNT(*) FROM approvals").await, 0);
}

#[tokio::test]
async fn an_invalid_decision_claims_nothing() {
    let app = TestApp::new().await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &["requests"]).await;
    for packages in [json!(["requests", "torch"]), json!("requests")] {
        let (status, body) = cards::resume(
            &app,
            &r.id,
            &r.secret,
            json!({"approved": true, "packages": packages}),
        )
        .await;
        assert_code(
            status,
            &body,
            (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_DECISION"),
        );
    }
    let untouched = format!(
        "SELECT COUNT(*) FROM interrupts WHERE interrupt_id = '{}' AND state = 'pending' AND claim_count = 0 AND decision IS NULL",
        r.id
    );
    assert_eq!(app.count(&untouched).await, 1);
    assert_eq!(app.count("SELECT COUNT(*) FROM approvals").await, 0);
    assert_eq!(app.count("SELECT COUNT(*) FROM resume_slots").await, 0);
    // Rejections are aggregated per card: one audit row, the count on the card (written in
    // a batch shortly after).
    let rejected_twice = "SELECT COUNT(*) FROM interrupts WHERE rejected_count = 2";
    app.wait_for_count(rejected_twice, |n| n == 1).await;
    assert_eq!(app.audit_rows("decision_rejected").await, 1);
}

#[tokio::test]
async fn a_reclaim_must_repeat_the_first_decision() {
    let app = TestApp::with_settings(cards::short_lease()).await;
    let r = cards::files_card(&app, "alice", "c1").await;
    cards::approve(&app, &r).await;
    cards::lapse_lease().await;
    let (status, body) = cards::resume(&app, &r.id, &r.secret, json!({"approved": false})).await;
    assert_code(status, &body, (StatusCode::CONFLICT, "DECISION_CONFLICT"));
    assert_eq!(
        app.count("SELECT COUNT(*) FROM approvals").await,
        1,
        "the conflicting answer changed nothing"
    );
    cards::approve(&app, &r).await;
}

#[tokio::test]
async fn wrong_secret_unknown_id_and_another_user_look_the_same() {
    let app = TestApp::new().await;
    let r = cards::files_card(&app, "alice", "c1").await;
    let (s1, wrong) = cards::resume(&app, &r.id, "not-the-secret", json!({"approved": true})).await;
    let unknown_id = "int_AAAAAAAAAAAAAAAAAAAAAA";
    let (s2, unknown) = cards::resume(&app, unknown_id, &r.secret, json!({"approved": true})).await;
    let body = cards::resume_body(&r.id, &r.secret, "resolved", json!({"approved": true}));
    let path = format!("/v1/interrupts/{}/resume", r.id);
    let (s3, other) = app.as_user("mallory").post(&path, body.clone()).await;
    assert_eq!(
        (s1, s2, s3),
        (
            StatusCode::NOT_FOUND,
            StatusCode::NOT_FOUND,
            StatusCode::NOT_FOUND
        )
    );
    assert_eq!(wrong, unknown);
    assert_eq!(wrong, other);
    assert_eq!(code(&wrong), "INTERRUPT_NOT_FOUND");
    // The card's own user, through the runtime, may answer.
    let (status, _) = app.as_user("alice").post(&path, body).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn an_incomplete_resume_is_refused() {
    let app = TestApp::new().await;
    let r = cards::files_card(&app, "alice", "c1").await;
    let entry = json!({"interruptId": r.id, "status": "resolved", "payload": {"approved": true}});
    let other = json!({"interruptId": "int_BBBBBBBBBBBBBBBBBBBBBB", "status": "resolved"});
    for resume in [json!([]), json!([entry, entry]), json!([other])] {
        let answer = json!({"secret": r.secret, "resume": resume});
        let (status, body) = cards::resume_as(&app, &r, answer).await;
        assert_code(
            status,
            &body,
            (StatusCode::UNPROCESSABLE_ENTITY, "INCOMPLETE_RESUME"),
        );
    }
    let bad = json!({"secret": r.secret, "resume": [entry], "extra": 1});
    let (status, body) = cards::resume_as(&app, &r, bad).await;
    assert_code(status, &body, (StatusCode::BAD_REQUEST, "INVALID_BODY"));
    // A payload field the gate does not know fails closed (issue 25): refused, nothing claimed.
    let unknown = json!({"secret": r.secret, "resume": [{"interruptId": r.id, "status": "resolved",
        "payload": {"approved": true, "note": "fine"}}]});
    let (status, body) = cards::resume_as(&app, &r, unknown).await;
    assert_code(
        status,
        &body,
        (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_DECISION"),
    );
    // metadata is accepted and ignored.
    let ok = json!({"secret": r.secret, "resume": [{"interruptId": r.id, "status": "resolved",
        "payload": {"approved": true}, "metadata": {"client": "x"}}]});
    let (status, _) = cards::resume_as(&app, &r, ok).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_key_named_twice_is_a_400_and_claims_nothing() {
    let app = TestApp::new().await;
    let r = cards::files_card(&app, "alice", "c1").await;
    let path = format!("/v1/interrupts/{}/resume", r.id);
    let (id, secret) = (&r.id, &r.secret);
    for raw in [
        // Last-wins would approve this one.
        format!(
            r#"{{"secret":"{secret}","resume":[{{"interruptId":"{id}","status":"resolved","payload":{{"approved":false,"approved":true}}}}]}}"#
        ),
        format!(
            r#"{{"secret":"{secret}","resume":[{{"interruptId":"{id}","status":"cancelled","status":"resolved","payload":{{"approved":true}}}}]}}"#
        ),
        format!(
            r#"{{"secret":"nope","secret":"{secret}","resume":[{{"interruptId":"{id}","status":"resolved","payload":{{"approved":true}}}}]}}"#
        ),
        format!(
            r#"{{"secret":"{secret}","resume":[{{"interruptId":"{id}","status":"resolved","payload":{{"approved":true,"packages":[],"packages":["x"]}},"metadata":{{"a":1,"a":2}}}}]}}"#
        ),
    ] {
        let (status, body) = app.anonymous().post_raw(&path, &raw).await;
        assert_error(
            status,
            &body,
            (StatusCode::BAD_REQUEST, "INVALID_BODY"),
            &raw,
        );
    }
    let untouched = format!(
        "SELECT COUNT(*) FROM interrupts WHERE interrupt_id = '{id}' AND state = 'pending' AND claim_count = 0"
    );
    assert_eq!(app.count(&untouched).await, 1);
    assert_eq!(app.count("SELECT COUNT(*) FROM approvals").await, 0);
    // The person's real, unambiguous answer still works.
    cards::approve(&app, &r).await;
}
