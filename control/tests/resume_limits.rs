//! Unauthenticated resume attempts stay cheap and few: failures are tallied in memory and
//! written per card in batches (never one write per attempt), limited per client and per card
//! with `429 TOO_MANY_ATTEMPTS` + `Retry-After` decided before the database is asked, and the
//! card's real holder is not locked out by a flood on the card.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cards;
mod support;

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use egressgate_control::Settings;
use egressgate_control::settings::Budget;
use serde_json::{Value, json};
use support::{TestApp, assert_code};

fn limits(per_client: u32, per_card: u32, window: Duration) -> Settings {
    Settings {
        resume_failures_per_client: Budget {
            per_window: per_client,
            window,
        },
        resume_failures_per_card: Budget {
            per_window: per_card,
            window,
        },
        ..Settings::default()
    }
}

/// A resume without a bearer token; the status, the `Retry-After` header and the body.
async fn resume(app: &TestApp, id: &str, secret: &str) -> (StatusCode, Option<u64>, Value) {
    let body = cards::resume_body(id, secret, "resolved", json!({"approved": true}));
    let req = Request::post(format!("/v1/interrupts/{id}/resume"))
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let (status, headers, body) = app.send(req).await;
    let retry = headers
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    (status, retry, body)
}

/// Logs every write of a card's `rejected_count` into `rejection_writes`, on either backend.
async fn count_rejection_writes(app: &TestApp) {
    app.exec_sql("CREATE TABLE rejection_writes (n INTEGER)")
        .await;
    if app.db_url.starts_with("postgres") {
        app.exec_sql(
            "CREATE FUNCTION log_rejection_write() RETURNS trigger AS $$ BEGIN \
             INSERT INTO rejection_writes VALUES (1); RETURN NEW; END $$ LANGUAGE plpgsql",
        )
        .await;
        app.exec_sql(
            "CREATE TRIGGER log_rejection_write AFTER UPDATE OF rejected_count ON interrupts \
             FOR EACH ROW EXECUTE FUNCTION log_rejection_write()",
        )
        .await;
    } else {
        app.exec_sql(
            "CREATE TRIGGER log_rejection_write AFTER UPDATE OF rejected_count ON interrupts \
             BEGIN INSERT INTO rejection_writes VALUES (1); END",
        )
        .await;
    }
}

const REJECTED: &str = "SELECT CAST(COALESCE(SUM(rejected_count), 0) AS BIGINT) FROM interrupts";

#[tokio::test]
async fn wrong_secrets_are_written_in_batches_not_one_by_one() {
    let app = TestApp::with_settings(Settings {
        rejection_flush_after: Duration::from_secs(3600),
        rejection_flush_at: 20,
        ..limits(1000, 1000, Duration::from_secs(60))
    })
    .await;
    let r = cards::files_card(&app, "alice", "c1").await;
    count_rejection_writes(&app).await;
    for i in 0..50 {
        let (s, _, b) = resume(&app, &r.id, &format!("guess-{i}")).await;
        assert_code(s, &b, (StatusCode::NOT_FOUND, "INTERRUPT_NOT_FOUND"));
    }
    // Each batch takes what is pending when it runs (20 or a few more); the rest waits in
    // memory for the hour-long delay.
    app.wait_for_count(REJECTED, |n| n >= 40).await;
    let writes = app.count("SELECT COUNT(*) FROM rejection_writes").await;
    assert!(
        (1..=3).contains(&writes),
        "{writes} writes for 50 rejections"
    );
    assert!(app.count(REJECTED).await <= 50);
    assert_eq!(
        app.audit_rows("decision_rejected").await,
        1,
        "one row per card"
    );
    // The holder is unaffected.
    cards::approve(&app, &r).await;
}

#[tokio::test]
async fn a_few_rejections_are_written_after_the_flush_delay() {
    let app = TestApp::configured(|s| s.rejection_flush_after = Duration::from_millis(100)).await;
    let r = cards::files_card(&app, "alice", "c1").await;
    for _ in 0..3 {
        let (s, _, _) = resume(&app, &r.id, "nope").await;
        assert_eq!(s, StatusCode::NOT_FOUND);
    }
    app.wait_for_count(REJECTED, |n| n == 3).await;
    assert_eq!(app.audit_rows("decision_rejected").await, 1);
}

#[tokio::test]
async fn a_flooded_card_is_429_for_guesses_but_its_holder_still_gets_in() {
    let app = TestApp::with_settings(limits(1000, 5, Duration::from_secs(600))).await;
    let r = cards::files_card(&app, "alice", "c1").await;
    for _ in 0..5 {
        let (s, _, _) = resume(&app, &r.id, "guess").await;
        assert_eq!(s, StatusCode::NOT_FOUND);
    }
    let (s, retry, b) = resume(&app, &r.id, "guess").await;
    assert_code(s, &b, (StatusCode::TOO_MANY_REQUESTS, "TOO_MANY_ATTEMPTS"));
    assert!(retry.is_some_and(|r| (1..=120).contains(&r)), "{retry:?}");
    // Other cards are not limited by this one's flood.
    let other = cards::files_card(&app, "bob", "c1").await;
    let (s, _, _) = resume(&app, &other.id, "guess").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // The right secret is still checked, in memory, and claims.
    let (s, _, b) = resume(&app, &r.id, &r.secret).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["decision"]["outcome"], "approved");
}

#[tokio::test]
async fn a_client_past_its_limit_is_429_before_the_database_until_the_window_passes() {
    // Three tokens over 6 s: one refills every 2 s, far longer than the four requests below
    // take even on a loaded CI machine (a 900 ms window refilled one mid-test there).
    let window = Duration::from_secs(6);
    let app = TestApp::with_settings(limits(3, 1000, window)).await;
    let r = cards::files_card(&app, "alice", "c1").await;
    // Unknown ids and wrong secrets alike count against the client.
    for (id, secret) in [
        ("int_AAAAAAAAAAAAAAAAAAAAAA", r.secret.as_str()),
        ("not-an-id", "x"),
        (r.id.as_str(), "guess"),
    ] {
        let (s, _, _) = resume(&app, id, secret).await;
        assert_eq!(s, StatusCode::NOT_FOUND);
    }
    let (s, retry, b) = resume(&app, &r.id, &r.secret).await;
    assert_code(s, &b, (StatusCode::TOO_MANY_REQUESTS, "TOO_MANY_ATTEMPTS"));
    assert!(retry.is_some_and(|r| (1..=2).contains(&r)), "{retry:?}");
    // Once a token has refilled, the holder's answer claims.
    let deadline = Instant::now() + Duration::from_secs(20);
    let (s, b) = loop {
        let (s, _, b) = resume(&app, &r.id, &r.secret).await;
        if s != StatusCode::TOO_MANY_REQUESTS || Instant::now() > deadline {
            break (s, b);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(s, StatusCode::OK, "{b}");
    // Limited answers never reach the database: with it closed, they are still 429s.
    for _ in 0..3 {
        resume(&app, "int_AAAAAAAAAAAAAAAAAAAAAA", "x").await;
    }
    app.store.close().await;
    let (s, _, b) = resume(&app, &r.id, "guess").await;
    assert_code(s, &b, (StatusCode::TOO_MANY_REQUESTS, "TOO_MANY_ATTEMPTS"));
}

#[tokio::test]
async fn a_reissued_secret_is_not_refused_by_the_old_secrets_limit() {
    let app = TestApp::with_settings(limits(1000, 2, Duration::from_secs(600))).await;
    let r = cards::files_card(&app, "alice", "c1").await;
    for _ in 0..2 {
        resume(&app, &r.id, "guess").await;
    }
    let (s, b) = app
        .as_user("alice")
        .post("/v1/chats/c1/interrupt/reissue", json!({}))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let fresh = b["resume_secret"].as_str().unwrap();
    let (s, _, b) = resume(&app, &r.id, &r.secret).await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "the old secret stopped working: {b}"
    );
    let (s, _, b) = resume(&app, &r.id, fresh).await;
    assert_eq!(s, StatusCode::OK, "{b}");
}
