//! A turn's record through the real router: the proxy's check-and-record in one transaction,
//! the refusal list and its overflow, the egress summary, and the turns nobody may read.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use egressgate_store::db::refusals::{EgressEvent, RefusalCandidate, RefusalEvent, Subject};
use egressgate_store::{ChatId, Host, RefusalReason, Timestamp, TurnId, UserId};
use serde_json::json;
use support::{TestApp, code};

/// The proxy's refusal path: hosts the chat's approvals or the administrators' list allow
/// come back allowed and leave no record; the rest, and plain refusals in the same batch, are
/// recorded in the same transaction.
#[tokio::test]
async fn refuse_unless_allowed_checks_and_records_in_one_transaction() {
    let app = TestApp::new().await;
    let t = app.turn("u", "c").await;
    app.admin_site("admin.example.com").await;
    let minute = Duration::from_secs(60);
    app.insert_approvals(&[
        ("u", "c", "site", "*.approved.example.com", minute),
        ("u", "other-chat", "site", "elsewhere.example.com", minute),
    ])
    .await;
    let ev = |host: &str, reason| support::setup::refusal(&t, host, reason);
    let candidate = |host: &str| RefusalCandidate {
        event: ev(host, RefusalReason::NotApproved),
        user: UserId::parse("u").unwrap(),
        chat: ChatId::parse("c").unwrap(),
        subject: Subject::Site(Host::parse(host).unwrap()),
    };
    let verdicts = app
        .store
        .refuse_unless_allowed(
            &[
                candidate("files.approved.example.com"),
                candidate("admin.example.com"),
                candidate("blocked.example.com"),
                candidate("elsewhere.example.com"),
                candidate("blocked.example.com"),
            ],
            &[ev("private.example.com", RefusalReason::PrivateAddress)],
            100,
            Timestamp::now(),
        )
        .await
        .unwrap();
    let kinds: Vec<Option<&str>> = verdicts
        .iter()
        .map(|g| g.as_ref().map(|g| g.kind_str()))
        .collect();
    assert_eq!(
        kinds,
        [Some("approval"), Some("admin"), None, None, None],
        "each allow names the grant behind it"
    );
    // The approval's grant carries the row's expiry (about 60 s from now), the admin's none.
    let approval_expiry = verdicts[0].as_ref().and_then(|g| g.expires_at).unwrap();
    let left = approval_expiry.millis() - Timestamp::now().millis();
    assert!((50_000..=60_000).contains(&left), "{left} ms left");
    assert_eq!(verdicts[1].as_ref().unwrap().expires_at, None);
    let (s, b) = app.turn_get(&t, "refusals").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let mut rows: Vec<(String, String, i64)> = b["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["host"].as_str().unwrap().to_owned(),
                r["reason"].as_str().unwrap().to_owned(),
                r["count"].as_i64().unwrap(),
            )
        })
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        [
            (
                "blocked.example.com".to_owned(),
                "not_approved".to_owned(),
                2
            ),
            (
                "elsewhere.example.com".to_owned(),
                "not_approved".to_owned(),
                1
            ),
            (
                "private.example.com".to_owned(),
                "private_address".to_owned(),
                1
            ),
        ],
        "{b}"
    );
}

#[tokio::test]
async fn refusals_list_the_record_and_the_overflow() {
    let app = TestApp::new().await;
    let t = app.turn("u", "c").await;
    let ev = |host: &str, port, reason, url: Option<&str>| RefusalEvent {
        port,
        url: url.map(Into::into),
        ..support::setup::refusal(&t, host, reason)
    };
    app.store
        .record_refusals(
            &[
                ev("pypi.org", 443, RefusalReason::NotApproved, None),
                ev("pypi.org", 443, RefusalReason::NotApproved, None),
                ev(
                    "files.example.com",
                    80,
                    RefusalReason::NotApproved,
                    Some("http://files.example.com/a.csv"),
                ),
                ev(
                    "third.example.com",
                    443,
                    RefusalReason::PrivateAddress,
                    None,
                ),
            ],
            2,
        )
        .await
        .unwrap();
    let (s, b) = app.turn_get(&t, "refusals").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["turn_id"], t.as_str());
    assert_eq!(b["overflow"], 1, "third host past max-refusals-per-turn");
    let rows = b["refusals"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let pypi = rows.iter().find(|r| r["host"] == "pypi.org").unwrap();
    assert_eq!(pypi["count"], 2);
    assert_eq!(pypi["port"], 443);
    assert_eq!(pypi["reason"], "not_approved");
    assert_eq!(pypi["approvable"], true);
    assert!(pypi.get("url").is_none());
    assert!(pypi["first_seen"].as_str().unwrap().ends_with('Z'));
    assert!(pypi["last_seen"].is_string());
    let files = rows
        .iter()
        .find(|r| r["host"] == "files.example.com")
        .unwrap();
    assert_eq!(files["url"], "http://files.example.com/a.csv");

    // Another turn of the same chat has its own record.
    let t2 = app.turn("u", "c").await;
    let (_, b2) = app.turn_get(&t2, "refusals").await;
    assert_eq!(b2["refusals"], json!([]));
    assert_eq!(b2["overflow"], 0);
}

#[tokio::test]
async fn egress_summarises_allowed_traffic_per_host() {
    let app = TestApp::new().await;
    let t = app.turn("u", "c").await;
    let turn = TurnId::parse(&t).unwrap();
    let ev = |up, down| EgressEvent {
        turn: turn.clone(),
        host: Host::parse("pypi.org").unwrap(),
        connections: 1,
        bytes_up: up,
        bytes_down: down,
        at: Timestamp::now(),
    };
    app.store
        .record_egress(&[ev(10, 1000), ev(5, 500)])
        .await
        .unwrap();
    let (s, b) = app.turn_get(&t, "egress").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["turn_id"], t.as_str());
    let rows = b["egress"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["host"], "pypi.org");
    assert_eq!(rows[0]["connections"], 2);
    assert_eq!(rows[0]["bytes_up"], 15);
    assert_eq!(rows[0]["bytes_down"], 1500);
    assert!(rows[0]["first_seen"].is_string() && rows[0]["last_seen"].is_string());
}

#[tokio::test]
async fn unknown_malformed_or_other_users_turns_are_not_found() {
    let app = TestApp::new().await;
    let t = app.turn("alice", "c").await;
    let unknown = TurnId::generate();
    for id in [unknown.as_str(), "nonsense", "t_"] {
        for what in ["refusals", "egress", "policy"] {
            let (s, b) = app
                .as_runtime()
                .get(&format!("/v1/turns/{id}/{what}"))
                .await;
            assert_eq!(
                (s, code(&b)),
                (StatusCode::NOT_FOUND, "TURN_NOT_FOUND"),
                "{id} {what}"
            );
        }
    }
    for what in ["refusals", "egress", "policy"] {
        let path = format!("/v1/turns/{}/{what}", t);
        let (s, b) = app.as_user("mallory").get(&path).await;
        assert_eq!(
            (s, code(&b)),
            (StatusCode::NOT_FOUND, "TURN_NOT_FOUND"),
            "{what}"
        );
        let (s, _) = app.as_user("alice").get(&path).await;
        assert_eq!(s, StatusCode::OK, "{what}");
        let (s, _) = app.anonymous().get(&path).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED);
        let (s, _) = app.as_admin().get(&path).await;
        assert_eq!(s, StatusCode::FORBIDDEN);
    }
}
