//! Resuming exactly once: real concurrent clicks, leases that lapse, the claim cap,
//! heartbeats bounded by the deadline, complete-then-replay, fail-closed decisions, and the
//! checks that expire a stale card (newer turn, hidden chat, lost right to approve).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cards;
mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use egressgate_control::Settings;
use egressgate_store::{Timestamp, UserId};
use serde_json::{Value, json};
use support::{TestApp, code};

fn short_lease() -> Settings {
    Settings {
        lease: Duration::from_millis(300),
        ..Settings::default()
    }
}

#[tokio::test]
async fn fifty_concurrent_clicks_claim_exactly_once() {
    let app = Arc::new(TestApp::new().await);
    let r = cards::card(
        &app,
        "alice",
        "c1",
        &["files.example.com", "pypi.org"],
        &["requests"],
    )
    .await;
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (app, id, secret) = (Arc::clone(&app), r.id.clone(), r.secret.clone());
            tokio::spawn(async move {
                cards::resume(&app, &id, &secret, json!({"approved": true})).await
            })
        })
        .collect();
    let (mut claimed, mut in_progress, mut busy) = (0, 0, 0);
    for t in tasks {
        let (status, body) = t.await.unwrap();
        match (status, code(&body)) {
            (StatusCode::OK, _) => {
                claimed += 1;
                assert_eq!(body["state"], "claimed");
                assert_eq!(body["snapshot"], "c25hcHNob3Q=");
            }
            (StatusCode::CONFLICT, "RESUME_IN_PROGRESS") => in_progress += 1,
            (StatusCode::TOO_MANY_REQUESTS, "BUSY") => busy += 1,
            other => panic!("unexpected {other:?}: {body}"),
        }
    }
    assert_eq!(
        claimed, 1,
        "exactly one claim ({in_progress} in progress, {busy} busy)"
    );
    assert_eq!(in_progress + busy, 49);
    assert_eq!(app.count("SELECT COUNT(*) FROM approvals").await, 3);
    assert_eq!(app.audit_rows("approval_resolved").await, 1);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM interrupts WHERE claim_count = 1")
            .await,
        1
    );
}

#[tokio::test]
async fn the_claim_answer_has_the_design_shape_and_extends_the_turn() {
    let app = TestApp::new().await;
    let (turn, d) = cards::draft(
        &app,
        "alice",
        "c1",
        &["files.example.com"],
        &["numpy", "requests"],
        None,
    )
    .await;
    let r = cards::register(&app, &d, json!({"snapshot": "AAECAw=="})).await;
    let (status, body) = cards::resume(
        &app,
        &r.id,
        &r.secret,
        json!({"approved": true, "packages": ["requests"]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["decision"],
        json!({"outcome": "approved", "sites": ["files.example.com"], "packages": ["requests"]})
    );
    assert_eq!(body["snapshot"], "AAECAw==");
    let claim = &body["claim"];
    assert!(claim["claim_id"].as_str().unwrap().len() >= 22);
    let lease = Timestamp::parse_rfc3339(claim["lease_expires_at"].as_str().unwrap()).unwrap();
    let deadline = Timestamp::parse_rfc3339(claim["deadline"].as_str().unwrap()).unwrap();
    assert!(lease <= deadline);
    // The claim id is stored hashed only.
    let leaked = format!(
        "SELECT COUNT(*) FROM interrupts WHERE claim_hash = '{}'",
        claim["claim_id"].as_str().unwrap()
    );
    assert_eq!(app.count(&leaked).await, 0);
    // The narrowed package list is what was approved.
    assert_eq!(
        app.count("SELECT COUNT(*) FROM approvals WHERE kind = 'package' AND value = 'numpy'")
            .await,
        0
    );
    assert_eq!(
        app.count(&format!(
            "SELECT COUNT(*) FROM approvals WHERE card_id = '{}'",
            r.id
        ))
        .await,
        2
    );
    // The turn's credential lives at least until the claim's deadline.
    let extended = format!(
        "SELECT COUNT(*) FROM turns WHERE turn_id = '{turn}' AND expires_at >= {}",
        deadline.millis()
    );
    assert_eq!(app.count(&extended).await, 1);
}

#[tokio::test]
async fn a_lapsed_lease_lets_the_next_click_claim() {
    let app = TestApp::with_settings(short_lease()).await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &[]).await;
    let first = cards::approve(&app, &r).await;
    let (status, body) = cards::resume(&app, &r.id, &r.secret, json!({"approved": true})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "RESUME_IN_PROGRESS")
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let second = cards::approve(&app, &r).await;
    assert_ne!(first, second);
    // The first worker's claim is gone.
    let (status, body) =
        cards::claim_call(&app, &r.id, "heartbeat", json!({"claim_id": first})).await;
    assert_eq!((status, code(&body)), (StatusCode::CONFLICT, "CLAIM_LOST"));
    let (status, body) =
        cards::claim_call(&app, &r.id, "complete", json!({"claim_id": first})).await;
    assert_eq!((status, code(&body)), (StatusCode::CONFLICT, "CLAIM_LOST"));
    let (status, _) =
        cards::claim_call(&app, &r.id, "heartbeat", json!({"claim_id": second})).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn past_the_claim_cap_the_card_is_denied_and_its_rows_deleted() {
    let settings = Settings {
        claim_cap: 2,
        ..short_lease()
    };
    let app = TestApp::with_settings(settings).await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &["requests"]).await;
    cards::approve(&app, &r).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    cards::approve(&app, &r).await;
    let stamped = format!("SELECT COUNT(*) FROM approvals WHERE card_id = '{}'", r.id);
    assert_eq!(app.count(&stamped).await, 2);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (status, body) = cards::resume(&app, &r.id, &r.secret, json!({"approved": true})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::GONE, "INTERRUPT_EXPIRED")
    );
    assert_eq!(app.count(&stamped).await, 0);
    assert_eq!(app.audit_rows("claim_cap_expired").await, 1);
    let (_, outcome) = app
        .as_runtime()
        .get(&format!("/v1/interrupts/{}/outcome", r.id))
        .await;
    assert_eq!(outcome["state"], "expired");
    assert_eq!(outcome["decision"]["outcome"], "declined");
    let (status, _) = cards::resume(&app, &r.id, &r.secret, json!({"approved": true})).await;
    assert_eq!(status, StatusCode::GONE);
}

#[tokio::test]
async fn heartbeats_never_pass_the_deadline() {
    let settings = Settings {
        lease: Duration::from_secs(30),
        resume_deadline: Duration::from_millis(600),
        ..Settings::default()
    };
    let app = TestApp::with_settings(settings).await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &[]).await;
    let (_, body) = cards::resume(&app, &r.id, &r.secret, json!({"approved": true})).await;
    let claim = body["claim"]["claim_id"].as_str().unwrap().to_owned();
    let deadline = body["claim"]["deadline"].as_str().unwrap().to_owned();
    assert_eq!(
        body["claim"]["lease_expires_at"],
        deadline.as_str(),
        "the lease is capped at the deadline"
    );
    let (status, hb) =
        cards::claim_call(&app, &r.id, "heartbeat", json!({"claim_id": claim})).await;
    assert_eq!(status, StatusCode::OK);
    let lease = Timestamp::parse_rfc3339(hb["lease_expires_at"].as_str().unwrap()).unwrap();
    assert!(lease <= Timestamp::parse_rfc3339(&deadline).unwrap());
    tokio::time::sleep(Duration::from_millis(700)).await;
    let (status, body) =
        cards::claim_call(&app, &r.id, "heartbeat", json!({"claim_id": claim})).await;
    assert_eq!((status, code(&body)), (StatusCode::GONE, "DEADLINE_PASSED"));
    // A stranger's claim id is simply not the claim.
    let (status, body) =
        cards::claim_call(&app, &r.id, "heartbeat", json!({"claim_id": "nope"})).await;
    assert_eq!((status, code(&body)), (StatusCode::CONFLICT, "CLAIM_LOST"));
}

#[tokio::test]
async fn complete_then_replay_runs_nothing_and_takes_no_slot() {
    let settings = Settings {
        resume_slots_per_user: 1,
        ..Settings::default()
    };
    let app = TestApp::with_settings(settings).await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &[]).await;
    let claim = cards::approve(&app, &r).await;
    assert_eq!(app.count("SELECT COUNT(*) FROM resume_slots").await, 1);
    let answer = json!({"text": "Downloaded the file; the mean is 4.2."});
    let (status, body) = cards::claim_call(
        &app,
        &r.id,
        "complete",
        json!({"claim_id": claim, "answer": answer}),
    )
    .await;
    assert_eq!((status, body), (StatusCode::OK, json!({"state": "done"})));
    assert_eq!(
        app.count("SELECT COUNT(*) FROM resume_slots").await,
        0,
        "complete releases the slot"
    );
    // Completing again with the same claim is harmless.
    let (status, _) = cards::claim_call(&app, &r.id, "complete", json!({"claim_id": claim})).await;
    assert_eq!(status, StatusCode::OK);

    // Alice's other card now holds her only resume slot.
    let other = cards::card(&app, "alice", "c2", &["pypi.org"], &[]).await;
    let _held = cards::approve(&app, &other).await;
    // A second Approve on the done card replays, even with alice's only slot taken.
    let (status, body) = cards::resume(&app, &r.id, &r.secret, json!({"approved": true})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], "done");
    assert_eq!(body["replayed"], true);
    assert_eq!(body["answer"], answer);
    assert_eq!(body["decision"]["outcome"], "approved");
    assert_eq!(app.audit_rows("approval_resolved").await, 2);
    assert_eq!(
        app.count(&format!(
            "SELECT COUNT(*) FROM interrupts WHERE interrupt_id = '{}' AND claim_count = 1",
            r.id
        ))
        .await,
        1
    );
}

#[tokio::test]
async fn a_large_answer_is_kept_in_the_blob_store_and_replayed_whole() {
    let settings = Settings {
        item_max_bytes: 3_000,
        ..Settings::default()
    };
    let app = TestApp::with_settings(settings).await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &[]).await;
    let claim = cards::approve(&app, &r).await;
    let answer = Value::String("y".repeat(20_000));
    let (status, _) = cards::claim_call(
        &app,
        &r.id,
        "complete",
        json!({"claim_id": claim, "answer": answer}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        app.count(
            "SELECT COUNT(*) FROM interrupts WHERE answer IS NULL AND answer_key IS NOT NULL"
        )
        .await,
        1
    );
    let (_, body) = cards::resume(&app, &r.id, &r.secret, json!({"approved": true})).await;
    assert_eq!(body["answer"], answer);
}

#[tokio::test]
async fn a_multi_megabyte_answer_is_accepted_and_replayed() {
    let app = TestApp::new().await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &[]).await;
    let claim = cards::approve(&app, &r).await;
    let answer = Value::String("z".repeat(3 * 1024 * 1024));
    let (status, body) = cards::claim_call(
        &app,
        &r.id,
        "complete",
        json!({"claim_id": claim, "answer": answer}),
    )
    .await;
    assert_eq!((status, body), (StatusCode::OK, json!({"state": "done"})));
    let (_, body) = cards::resume(&app, &r.id, &r.secret, json!({"approved": true})).await;
    assert_eq!(body["answer"], answer);
}

#[tokio::test]
async fn a_second_card_of_the_same_user_waits_for_a_slot() {
    let settings = Settings {
        resume_slots_per_user: 1,
        ..Settings::default()
    };
    let app = TestApp::with_settings(settings).await;
    let a = cards::card(&app, "alice", "c1", &["a.example.com"], &[]).await;
    let b = cards::card(&app, "alice", "c2", &["b.example.com"], &[]).await;
    let claim = cards::approve(&app, &a).await;
    let (status, body) = cards::resume(&app, &b.id, &b.secret, json!({"approved": true})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::TOO_MANY_REQUESTS, "BUSY")
    );
    assert_eq!(
        app.count(&format!(
            "SELECT COUNT(*) FROM interrupts WHERE interrupt_id = '{}' AND state = 'pending'",
            b.id
        ))
        .await,
        1
    );
    cards::claim_call(&app, &a.id, "complete", json!({"claim_id": claim})).await;
    cards::approve(&app, &b).await;
}

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
        let r = cards::card(&app, &format!("u{i}"), "c1", &["files.example.com"], &[]).await;
        let (status, body) = cards::resume(&app, &r.id, &r.secret, payload).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(
            body["decision"],
            json!({"outcome": "declined", "sites": [], "packages": []})
        );
    }
    let r = cards::card(&app, "alice", "cx", &["files.example.com"], &[]).await;
    let body = cards::resume_body(&r.id, &r.secret, "cancelled", json!({"approved": true}));
    let (status, body) = app
        .anonymous()
        .post(&format!("/v1/interrupts/{}/resume", r.id), body)
        .await;
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
        let r = cards::card(&app, &format!("u{i}"), "c1", &["files.example.com"], &[]).await;
        let body = json!({"secret": r.secret, "resume": [
            {"interruptId": r.id, "status": status, "payload": {"approved": true}}
        ]});
        let (code_, body) = app
            .anonymous()
            .post(&format!("/v1/interrupts/{}/resume", r.id), body)
            .await;
        assert_eq!(code_, StatusCode::OK, "status {status}: {body}");
        assert_eq!(
            body["decision"],
            json!({"outcome": "declined", "sites": [], "packages": []}),
            "status {status}"
        );
    }
    // A missing status is a missing field: it declines too.
    let r = cards::card(&app, "u-missing", "c1", &["files.example.com"], &[]).await;
    let body = json!({"secret": r.secret, "resume": [
        {"interruptId": r.id, "payload": {"approved": true}}
    ]});
    let (status, body) = app
        .anonymous()
        .post(&format!("/v1/interrupts/{}/resume", r.id), body)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"]["outcome"], "declined");
    assert_eq!(app.count("SELECT COUNT(*) FROM approvals").await, 0);
}

#[tokio::test]
async fn an_entry_without_its_interrupt_id_is_incomplete() {
    let app = TestApp::new().await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &[]).await;
    let path = format!("/v1/interrupts/{}/resume", r.id);
    for body in [
        json!({"secret": r.secret, "resume": [{"status": "resolved", "payload": {"approved": true}}]}),
        json!({"secret": r.secret}),
    ] {
        let (status, resp) = app.anonymous().post(&path, body.clone()).await;
        assert_eq!(
            (status, code(&resp)),
            (StatusCode::UNPROCESSABLE_ENTITY, "INCOMPLETE_RESUME"),
            "{body}: {resp}"
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
        assert_eq!(
            (status, code(&body)),
            (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_DECISION")
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
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while app
        .count("SELECT COUNT(*) FROM interrupts WHERE rejected_count = 2")
        .await
        != 1
    {
        assert!(std::time::Instant::now() < deadline, "count never written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(app.audit_rows("decision_rejected").await, 1);
}

#[tokio::test]
async fn a_reclaim_must_repeat_the_first_decision() {
    let app = TestApp::with_settings(short_lease()).await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &[]).await;
    cards::approve(&app, &r).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (status, body) = cards::resume(&app, &r.id, &r.secret, json!({"approved": false})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "DECISION_CONFLICT")
    );
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
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &[]).await;
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
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &[]).await;
    let path = format!("/v1/interrupts/{}/resume", r.id);
    let entry = json!({"interruptId": r.id, "status": "resolved", "payload": {"approved": true}});
    let other = json!({"interruptId": "int_BBBBBBBBBBBBBBBBBBBBBB", "status": "resolved"});
    for resume in [json!([]), json!([entry, entry]), json!([other])] {
        let (status, body) = app
            .anonymous()
            .post(&path, json!({"secret": r.secret, "resume": resume}))
            .await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::UNPROCESSABLE_ENTITY, "INCOMPLETE_RESUME")
        );
    }
    let bad = json!({"secret": r.secret, "resume": [entry], "extra": 1});
    let (status, body) = app.anonymous().post(&path, bad).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "INVALID_BODY")
    );
    // metadata is accepted and ignored; the payload may carry anything.
    let ok = json!({"secret": r.secret, "resume": [{"interruptId": r.id, "status": "resolved",
        "payload": {"approved": true, "note": "fine"}, "metadata": {"client": "x"}}]});
    let (status, _) = app.anonymous().post(&path, ok).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_newer_turn_expires_the_pending_card() {
    let app = TestApp::new().await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &[]).await;
    app.open_turn("alice", "c1", true).await;
    let (status, body) = cards::resume(&app, &r.id, &r.secret, json!({"approved": true})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::GONE, "INTERRUPT_EXPIRED")
    );
    assert_eq!(app.count("SELECT COUNT(*) FROM approvals").await, 0);
}

#[tokio::test]
async fn a_newer_turn_seen_only_at_resume_expires_the_card() {
    let app = TestApp::new().await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &[]).await;
    // The chat moved on without the turn endpoint's own expiry (another process, a race).
    app.exec_sql("UPDATE chats SET turn_seq = turn_seq + 1")
        .await;
    let (status, body) = cards::resume(&app, &r.id, &r.secret, json!({"approved": true})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::GONE, "INTERRUPT_EXPIRED")
    );
    assert_eq!(
        app.count("SELECT COUNT(*) FROM interrupts WHERE state = 'expired'")
            .await,
        1
    );
}

#[tokio::test]
async fn losing_the_right_to_approve_expires_the_card() {
    let app = TestApp::new().await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &[]).await;
    let alice = UserId::parse("alice").unwrap();
    app.store
        .set_user(
            &alice,
            egressgate_store::db::admin::UserChange {
                can_approve: Some(false),
                mode: None,
            },
            "admin",
            Timestamp::now(),
        )
        .await
        .unwrap();
    let (status, body) = cards::resume(&app, &r.id, &r.secret, json!({"approved": true})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::GONE, "INTERRUPT_EXPIRED")
    );
    assert_eq!(app.count("SELECT COUNT(*) FROM approvals").await, 0);
    assert_eq!(app.count("SELECT COUNT(*) FROM resume_slots").await, 0);
    let (_, outcome) = app
        .as_runtime()
        .get(&format!("/v1/interrupts/{}/outcome", r.id))
        .await;
    assert_eq!(outcome["state"], "expired");
}

#[tokio::test]
async fn an_expired_card_reports_expired_not_unknown() {
    let app = TestApp::new().await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &[]).await;
    app.exec_sql("UPDATE interrupts SET expires_at = 1").await;
    let (status, body) = cards::resume(&app, &r.id, &r.secret, json!({"approved": true})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::GONE, "INTERRUPT_EXPIRED")
    );
}

#[tokio::test]
async fn an_audit_failure_leaves_the_card_unclaimed() {
    let app = TestApp::new().await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &[]).await;
    cards::break_audit(&app).await;
    let (status, body) = cards::resume(&app, &r.id, &r.secret, json!({"approved": true})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::SERVICE_UNAVAILABLE, "AUDIT_FAILED")
    );
    let pending = "SELECT COUNT(*) FROM interrupts WHERE state = 'pending' AND claim_count = 0 AND decision IS NULL";
    assert_eq!(app.count(pending).await, 1);
    assert_eq!(app.count("SELECT COUNT(*) FROM approvals").await, 0);
}

#[tokio::test]
async fn a_key_named_twice_is_a_400_and_claims_nothing() {
    let app = TestApp::new().await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &[]).await;
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
        assert_eq!(
            (status, code(&body)),
            (StatusCode::BAD_REQUEST, "INVALID_BODY"),
            "{raw}: {body}"
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
