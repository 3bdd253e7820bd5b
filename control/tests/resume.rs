//! Resuming exactly once: real concurrent clicks, leases that lapse, the claim cap,
//! heartbeats bounded by the deadline, complete-then-replay and the resume slots. What a
//! decision means is in `resume_answers.rs`; the checks that expire a stale card in
//! `resume_stale.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cards;
mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use egressgate_control::Settings;
use egressgate_store::Timestamp;
use serde_json::{Value, json};
use support::{TestApp, assert_code, assert_error};

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
    let answers = support::race::at_once((0..50).map(|_| {
        let (app, id, secret) = (Arc::clone(&app), r.id.clone(), r.secret.clone());
        async move { cards::resume(&app, &id, &secret, json!({"approved": true})).await }
    }))
    .await;
    let lose = [
        (StatusCode::CONFLICT, "RESUME_IN_PROGRESS"),
        (StatusCode::TOO_MANY_REQUESTS, "BUSY"),
    ];
    let claimed = support::race::one_winner(&answers, StatusCode::OK, &lose);
    assert_eq!(claimed["state"], "claimed");
    assert_eq!(claimed["snapshot"], "c25hcHNob3Q=");
    assert_eq!(app.audit_rows("approval_resolved").await, 1);
    app.assert_counts(&[
        ("SELECT COUNT(*) FROM approvals", 3),
        ("SELECT COUNT(*) FROM interrupts WHERE claim_count = 1", 1),
    ])
    .await;
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
    // The narrowed package list is what was approved.
    let numpy = "SELECT COUNT(*) FROM approvals WHERE kind = 'package' AND value = 'numpy'";
    let approved = format!("SELECT COUNT(*) FROM approvals WHERE card_id = '{}'", r.id);
    app.assert_counts(&[(&leaked, 0), (numpy, 0), (&approved, 2)])
        .await;
    // The turn's credential lives at least until the claim's deadline.
    let extended = format!(
        "SELECT COUNT(*) FROM turns WHERE turn_id = '{turn}' AND expires_at >= {}",
        deadline.millis()
    );
    assert_eq!(app.count(&extended).await, 1);
}

#[tokio::test]
async fn a_lapsed_lease_lets_the_next_click_claim() {
    let app = TestApp::with_settings(cards::short_lease()).await;
    let r = cards::files_card(&app, "alice", "c1").await;
    let first = cards::approve(&app, &r).await;
    let (status, body) = cards::click(&app, &r).await;
    let in_progress = (StatusCode::CONFLICT, "RESUME_IN_PROGRESS");
    assert_error(
        status,
        &body,
        in_progress,
        "a second click while the first is held",
    );
    cards::lapse_lease().await;
    let second = cards::approve(&app, &r).await;
    assert_ne!(first, second);
    // The first worker's claim is gone.
    let (status, body) = cards::claim(&app, &r, "heartbeat", &first).await;
    assert_code(status, &body, (StatusCode::CONFLICT, "CLAIM_LOST"));
    let (status, body) = cards::claim(&app, &r, "complete", &first).await;
    assert_code(status, &body, (StatusCode::CONFLICT, "CLAIM_LOST"));
    let (status, _) = cards::claim(&app, &r, "heartbeat", &second).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn past_the_claim_cap_the_card_is_denied_and_its_rows_deleted() {
    let settings = Settings {
        claim_cap: 2,
        ..cards::short_lease()
    };
    let app = TestApp::with_settings(settings).await;
    let r = cards::card(&app, "alice", "c1", &["files.example.com"], &["requests"]).await;
    cards::approve(&app, &r).await;
    cards::lapse_lease().await;
    cards::approve(&app, &r).await;
    let stamped = format!("SELECT COUNT(*) FROM approvals WHERE card_id = '{}'", r.id);
    assert_eq!(app.count(&stamped).await, 2);
    cards::lapse_lease().await;
    let (status, body) = cards::click(&app, &r).await;
    assert_code(status, &body, (StatusCode::GONE, "INTERRUPT_EXPIRED"));
    assert_eq!(app.count(&stamped).await, 0);
    assert_eq!(app.audit_rows("claim_cap_expired").await, 1);
    let (_, outcome) = app
        .as_runtime()
        .get(&format!("/v1/interrupts/{}/outcome", r.id))
        .await;
    assert_eq!(outcome["state"], "expired");
    assert_eq!(outcome["decision"]["outcome"], "declined");
    let (status, _) = cards::click(&app, &r).await;
    assert_eq!(status, StatusCode::GONE);
}

#[tokio::test]
async fn heartbeats_never_pass_the_deadline() {
    let app = TestApp::configured(|s| {
        s.lease = Duration::from_secs(30);
        s.resume_deadline = Duration::from_millis(600);
    })
    .await;
    let r = cards::files_card(&app, "alice", "c1").await;
    let (_, body) = cards::click(&app, &r).await;
    let claim = body["claim"]["claim_id"].as_str().unwrap().to_owned();
    let deadline = body["claim"]["deadline"].as_str().unwrap().to_owned();
    assert_eq!(
        body["claim"]["lease_expires_at"],
        deadline.as_str(),
        "the lease is capped at the deadline"
    );
    let (status, hb) = cards::claim(&app, &r, "heartbeat", &claim).await;
    assert_eq!(status, StatusCode::OK);
    let lease = Timestamp::parse_rfc3339(hb["lease_expires_at"].as_str().unwrap()).unwrap();
    assert!(lease <= Timestamp::parse_rfc3339(&deadline).unwrap());
    tokio::time::sleep(Duration::from_millis(700)).await;
    let (status, body) = cards::claim(&app, &r, "heartbeat", &claim).await;
    assert_code(status, &body, (StatusCode::GONE, "DEADLINE_PASSED"));
    // A stranger's claim id is simply not the claim.
    let (status, body) = cards::claim(&app, &r, "heartbeat", "nope").await;
    assert_code(status, &body, (StatusCode::CONFLICT, "CLAIM_LOST"));
}

#[tokio::test]
async fn complete_then_replay_runs_nothing_and_takes_no_slot() {
    let app = TestApp::configured(|s| s.resume_slots_per_user = 1).await;
    let r = cards::files_card(&app, "alice", "c1").await;
    let claim = cards::approve(&app, &r).await;
    assert_eq!(app.count("SELECT COUNT(*) FROM resume_slots").await, 1);
    let answer = json!({"text": "Downloaded the file; the mean is 4.2."});
    let (status, body) = cards::complete_with(&app, &r, &claim, &answer).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"state": "done"})));
    assert_eq!(
        app.count("SELECT COUNT(*) FROM resume_slots").await,
        0,
        "complete releases the slot"
    );
    // Completing again with the same claim is harmless.
    let (status, _) = cards::claim(&app, &r, "complete", &claim).await;
    assert_eq!(status, StatusCode::OK);

    // Alice's other card now holds her only resume slot.
    let other = cards::card(&app, "alice", "c2", &["pypi.org"], &[]).await;
    let _held = cards::approve(&app, &other).await;
    // A second Approve on the done card replays, even with alice's only slot taken.
    let (status, body) = cards::click(&app, &r).await;
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
    // (the item size limit, the answer): over the limit, and a multi-megabyte answer
    for (item_max_bytes, answer) in [
        (Some(3_000), "y".repeat(20_000)),
        (None, "z".repeat(3 * 1024 * 1024)),
    ] {
        let defaults = Settings::default();
        let settings = Settings {
            item_max_bytes: item_max_bytes.unwrap_or(defaults.item_max_bytes),
            ..defaults
        };
        let app = TestApp::with_settings(settings).await;
        let r = cards::files_card(&app, "alice", "c1").await;
        let claim = cards::approve(&app, &r).await;
        let answer = Value::String(answer);
        let (status, body) = cards::complete_with(&app, &r, &claim, &answer).await;
        assert_eq!((status, body), (StatusCode::OK, json!({"state": "done"})));
        let in_blob =
            "SELECT COUNT(*) FROM interrupts WHERE answer IS NULL AND answer_key IS NOT NULL";
        assert_eq!(app.count(in_blob).await, 1, "{item_max_bytes:?}");
        let (_, body) = cards::click(&app, &r).await;
        assert_eq!(body["answer"], answer);
    }
}

#[tokio::test]
async fn a_second_card_of_the_same_user_waits_for_a_slot() {
    let app = TestApp::configured(|s| s.resume_slots_per_user = 1).await;
    let a = cards::card(&app, "alice", "c1", &["a.example.com"], &[]).await;
    let b = cards::card(&app, "alice", "c2", &["b.example.com"], &[]).await;
    let claim = cards::approve(&app, &a).await;
    let (status, body) = cards::click(&app, &b).await;
    assert_code(status, &body, (StatusCode::TOO_MANY_REQUESTS, "BUSY"));
    assert_eq!(
        app.count(&format!(
            "SELECT COUNT(*) FROM interrupts WHERE interrupt_id = '{}' AND state = 'pending'",
            b.id
        ))
        .await,
        1
    );
    cards::claim(&app, &a, "complete", &claim).await;
    cards::approve(&app, &b).await;
}
