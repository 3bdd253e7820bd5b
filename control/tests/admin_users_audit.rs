//! The administration API's users and audit log through the real router: a user's
//! `can_approve` is stored and audited, and the audit query filters (kind, since, limit) and
//! validates what it is given.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use axum::http::StatusCode;
use serde_json::{Value, json};
use support::{INVALID_INPUT, TestApp, assert_error};

/// `GET /v1/admin/audit?{query}` as the administrator (200 asserted).
async fn audit(app: &TestApp, query: &str) -> Value {
    let (s, b) = app
        .as_admin()
        .get(&format!("/v1/admin/audit?{query}"))
        .await;
    assert_eq!(s, StatusCode::OK, "{query}: {b}");
    b
}

#[tokio::test]
async fn users_permission_is_stored_and_audited() {
    let app = TestApp::new().await;
    let user = egressgate_store::UserId::parse("alice").unwrap();
    assert_eq!(app.store.can_approve(&user).await.unwrap(), None);
    for can in [false, true] {
        let permission = json!({"can_approve": can});
        let (s, b) = app
            .as_admin()
            .put("/v1/admin/users/alice", permission)
            .await;
        assert_eq!(s, StatusCode::OK, "{b}");
        assert_eq!(b, json!({"user_id": "alice", "can_approve": can}));
        assert_eq!(app.store.can_approve(&user).await.unwrap(), Some(can));
    }
    let audit = audit(&app, "kind=admin_change").await;
    let rows = audit["audit"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["actor"], "admin");
    assert_eq!(rows[0]["detail"]["user_id"], "alice");
    assert_eq!(rows[0]["detail"]["can_approve"], false);
}

#[tokio::test]
async fn audit_filters_and_validates_its_query() {
    let app = TestApp::new().await;
    for p in ["a.example.com", "b.example.com", "c.example.com"] {
        app.admin_site(p).await;
    }
    app.open_turn("u", "chat-9", true).await;

    let all = audit(&app, "").await;
    let rows = all["audit"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "oldest first: {ids:?}");
    for r in rows {
        for key in ["id", "at", "kind", "actor", "detail"] {
            assert!(r.get(key).is_some(), "{key} in {r}");
        }
        assert!(r["at"].as_str().unwrap().ends_with('Z'));
    }
    let turn_row = rows.iter().find(|r| r["kind"] == "turn_opened").unwrap();
    assert_eq!(turn_row["chat_id"], "chat-9");
    assert!(
        rows.iter()
            .filter(|r| r["kind"] == "admin_change")
            .all(|r| r.get("chat_id").is_none())
    );

    // (query, how many rows)
    for (query, n) in [
        ("kind=turn_opened", 1),
        ("limit=2", 2),
        ("since=2999-01-01T00:00:00Z", 0),
        ("since=2000-01-01T00:00:00Z&kind=admin_change&limit=1000", 3),
    ] {
        let b = audit(&app, query).await;
        let rows = b["audit"].as_array().map(Vec::len);
        assert_eq!(
            (rows, b.as_object().map(|o| o.len())),
            (Some(n), Some(1)),
            "{query}: {b}"
        );
    }

    for bad in [
        "since=yesterday",
        "kind=everything",
        "limit=0",
        "limit=1001",
        "limit=ten",
        "colour=red",
    ] {
        let (s, b) = app.as_admin().get(&format!("/v1/admin/audit?{bad}")).await;
        assert_error(s, &b, INVALID_INPUT, bad);
    }
}

/// Every route that names a user in its path parses that id the same way, and refuses a
/// malformed one with the same words, before it looks anything up.
#[tokio::test]
async fn a_malformed_user_id_in_a_path_is_refused_alike_everywhere() {
    let app = TestApp::new().await;
    let words = "user_id must be 1 to 200 bytes without control characters";
    for bad in ["a".repeat(201), "bob%01".to_owned()] {
        let answers = [
            app.as_admin().get(&format!("/v1/admin/users/{bad}")).await,
            app.as_admin()
                .put(
                    &format!("/v1/admin/users/{bad}"),
                    json!({"can_approve": true}),
                )
                .await,
            app.as_runtime()
                .get(&format!("/v1/users/{bad}/interrupts"))
                .await,
            app.as_runtime()
                .post(&format!("/v1/users/{bad}/inbox-link"), json!({}))
                .await,
        ];
        for (route, (s, b)) in answers.iter().enumerate() {
            assert_error(*s, b, INVALID_INPUT, &format!("route {route}, {bad}"));
            assert_eq!(b["error"]["message"], words, "route {route}, {bad}: {b}");
        }
    }
}
