//! The administration API through the real router: pre-approved site and package lists
//! (validated, canonical, 201/200/204/404), user permissions, and the audit log query.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use axum::http::StatusCode;
use serde_json::json;
use support::{TestApp, code, message};

#[tokio::test]
async fn sites_add_is_201_then_200_and_stored_canonically() {
    let app = TestApp::new().await;
    let (s, b) = app
        .as_admin()
        .post(
            "/v1/admin/sites",
            json!({"pattern": "*.Example.COM.", "note": "vendor data"}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(b["pattern"], "*.example.com");
    assert_eq!(b["note"], "vendor data");
    let created = b["created_at"].as_str().unwrap().to_owned();
    assert!(created.ends_with('Z'));

    let (s, b) = app.admin_site("*.example.com").await;
    assert_eq!(s, StatusCode::OK, "already there: {b}");
    assert_eq!(b["created_at"], created.as_str());
    assert_eq!(b["note"], "vendor data", "re-adding changes nothing");

    let (s, b) = app.admin_site("files.example.org").await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(b["note"], serde_json::Value::Null);

    let (s, b) = app.as_admin().get("/v1/admin/sites").await;
    assert_eq!(s, StatusCode::OK);
    let patterns: Vec<&str> = b["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pattern"].as_str().unwrap())
        .collect();
    assert_eq!(patterns, ["*.example.com", "files.example.org"]);
    assert_eq!(
        app.audit_rows("admin_change").await,
        2,
        "no audit for a no-op"
    );
}

#[tokio::test]
async fn dangerous_patterns_are_422_and_not_stored() {
    let app = TestApp::new().await;
    for (p, why) in [
        ("*", "public suffix"),
        ("*.com", "public suffix"),
        ("*.co.uk", "public suffix"),
        ("com", "internal"),
        ("co.uk", "public suffix"),
        // Wildcards above private public-suffix rules: every tenant's storage.
        ("*.amazonaws.com", "public suffix"),
        ("*.s3.amazonaws.com", "public suffix"),
        ("*.core.windows.net", "public suffix"),
        ("*.windows.net", "public suffix"),
        ("s3.amazonaws.com", "public suffix"),
        ("github.io", "public suffix"),
        ("1.2.3.4", "IP literal"),
        ("[::1]", "IP literal"),
        ("2130706433", "IP literal"),
        ("localhost", "internal"),
        ("*.internal", "internal"),
        ("printer.local", "internal"),
        ("a.*.example.com", "wildcard"),
        ("exa mple.com", "valid"),
        ("", "empty"),
    ] {
        let (s, b) = app
            .as_admin()
            .post("/v1/admin/sites", json!({"pattern": p}))
            .await;
        assert_eq!(
            (s, code(&b)),
            (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_INPUT"),
            "{p}: {b}"
        );
        assert!(
            message(&b).starts_with("pattern") && message(&b).contains(why),
            "{p}: {b}"
        );
    }
    let (_, b) = app.as_admin().get("/v1/admin/sites").await;
    assert_eq!(b, json!({"sites": []}));
    assert_eq!(app.count("SELECT COUNT(*) FROM audit").await, 0);
}

#[tokio::test]
async fn sites_delete_is_204_then_404_with_any_spelling() {
    let app = TestApp::new().await;
    for p in ["*.example.com", "files.example.org"] {
        app.as_admin()
            .post("/v1/admin/sites", json!({"pattern": p}))
            .await;
    }
    let (s, b) = app
        .as_admin()
        .delete("/v1/admin/sites/%2A.Example.com")
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{b}");
    let (s, b) = app.as_admin().delete("/v1/admin/sites/*.example.com").await;
    assert_eq!((s, code(&b)), (StatusCode::NOT_FOUND, "NOT_FOUND"));
    let (s, _) = app
        .as_admin()
        .delete("/v1/admin/sites/FILES.example.org.")
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, b) = app
        .as_admin()
        .delete("/v1/admin/sites/not%20a%20pattern")
        .await;
    assert_eq!((s, code(&b)), (StatusCode::NOT_FOUND, "NOT_FOUND"));
    let (_, b) = app.as_admin().get("/v1/admin/sites").await;
    assert_eq!(b, json!({"sites": []}));
    let (_, audit) = app
        .as_admin()
        .get("/v1/admin/audit?kind=admin_change")
        .await;
    let actions: Vec<&str> = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["detail"]["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["add", "add", "remove", "remove"]);
}

#[tokio::test]
async fn packages_are_canonical_and_removable() {
    let app = TestApp::new().await;
    let (s, b) = app
        .as_admin()
        .post(
            "/v1/admin/packages",
            json!({"name": "Foo_Bar.baz", "note": "n"}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(b["name"], "foo-bar-baz");
    assert_eq!(b["note"], "n");
    assert!(b["created_at"].is_string());
    let (s, _) = app.admin_package("pip:foo-bar-baz").await;
    assert_eq!(s, StatusCode::OK);
    let (s, b) = app.admin_package("npm:@types/node").await;
    assert_eq!(
        (s, &b["name"]),
        (StatusCode::CREATED, &json!("npm:@types/node"))
    );
    for bad in ["gem:rails", "npm:Upper", "bad name", ""] {
        let (s, b) = app
            .as_admin()
            .post("/v1/admin/packages", json!({"name": bad}))
            .await;
        assert_eq!(
            (s, code(&b)),
            (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_INPUT"),
            "{bad}"
        );
        assert!(message(&b).starts_with("name"), "{b}");
    }
    let (_, b) = app.as_admin().get("/v1/admin/packages").await;
    let names: Vec<&str> = b["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["foo-bar-baz", "npm:@types/node"]);

    let (s, _) = app
        .as_admin()
        .delete("/v1/admin/packages/npm:@types%2Fnode")
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = app
        .as_admin()
        .delete("/v1/admin/packages/Foo.Bar_Baz")
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, b) = app
        .as_admin()
        .delete("/v1/admin/packages/foo-bar-baz")
        .await;
    assert_eq!((s, code(&b)), (StatusCode::NOT_FOUND, "NOT_FOUND"));
    let (_, b) = app.as_admin().get("/v1/admin/packages").await;
    assert_eq!(b, json!({"packages": []}));
}

#[tokio::test]
async fn admin_endpoints_need_the_admin_token() {
    let app = TestApp::new().await;
    let reqs: [(&str, &str); 4] = [
        ("GET", "/v1/admin/sites"),
        ("GET", "/v1/admin/packages"),
        ("GET", "/v1/admin/audit"),
        ("DELETE", "/v1/admin/sites/example.com"),
    ];
    for (method, path) in reqs {
        for (token, want) in [
            (None, StatusCode::UNAUTHORIZED),
            (Some("nope"), StatusCode::UNAUTHORIZED),
            (app.runtime(), StatusCode::FORBIDDEN),
        ] {
            let (s, b) = match method {
                "GET" => app.with_token(token).get(path).await,
                _ => app.with_token(token).delete(path).await,
            };
            assert_eq!(s, want, "{method} {path} {token:?}: {b}");
        }
    }
    let (s, _) = app
        .as_runtime()
        .post("/v1/admin/sites", json!({"pattern": "example.com"}))
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, _) = app
        .as_runtime()
        .put("/v1/admin/users/u", json!({"can_approve": false}))
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(app.count("SELECT COUNT(*) FROM admin_sites").await, 0);
    assert_eq!(app.count("SELECT COUNT(*) FROM users").await, 0);
}

#[tokio::test]
async fn strict_bodies_write_nothing() {
    let app = TestApp::new().await;
    for (path, raw) in [
        (
            "/v1/admin/sites",
            r#"{"pattern": "example.com", "comment": "x"}"#,
        ),
        ("/v1/admin/sites", r#"{"pattern": 5}"#),
        ("/v1/admin/sites", "{"),
        ("/v1/admin/packages", r#"{"pattern": "requests"}"#),
        ("/v1/admin/packages", r#"{"name": "requests", "note": 1}"#),
        // A key named twice is ambiguous, whichever copy a parser would keep.
        (
            "/v1/admin/sites",
            r#"{"pattern": "files.example.com", "pattern": "*.example.com"}"#,
        ),
        (
            "/v1/admin/packages",
            r#"{"name": "requests", "note": "a", "note": "b"}"#,
        ),
    ] {
        let (s, b) = app.as_admin().post_raw(path, raw).await;
        assert_eq!(
            (s, code(&b)),
            (StatusCode::BAD_REQUEST, "INVALID_BODY"),
            "{raw}"
        );
    }
    let (s, b) = app
        .as_admin()
        .put("/v1/admin/users/u", json!({"can_approve": "yes"}))
        .await;
    assert_eq!((s, code(&b)), (StatusCode::BAD_REQUEST, "INVALID_BODY"));
    let (s, b) = app
        .as_admin()
        .put(
            "/v1/admin/users/u",
            json!({"can_approve": true, "admin": true}),
        )
        .await;
    assert_eq!((s, code(&b)), (StatusCode::BAD_REQUEST, "INVALID_BODY"));
    let long = "x".repeat(501);
    let (s, b) = app
        .as_admin()
        .post(
            "/v1/admin/sites",
            json!({"pattern": "example.com", "note": long}),
        )
        .await;
    assert_eq!(
        (s, code(&b)),
        (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_INPUT")
    );
    assert_eq!(app.count("SELECT COUNT(*) FROM admin_sites").await, 0);
    assert_eq!(app.count("SELECT COUNT(*) FROM admin_packages").await, 0);
    assert_eq!(app.count("SELECT COUNT(*) FROM users").await, 0);
    assert_eq!(app.count("SELECT COUNT(*) FROM audit").await, 0);
}

#[tokio::test]
async fn users_permission_is_stored_and_audited() {
    let app = TestApp::new().await;
    let user = egressgate_store::UserId::parse("alice").unwrap();
    assert_eq!(app.store.can_approve(&user).await.unwrap(), None);
    let (s, b) = app
        .as_admin()
        .put("/v1/admin/users/alice", json!({"can_approve": false}))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b, json!({"user_id": "alice", "can_approve": false}));
    assert_eq!(app.store.can_approve(&user).await.unwrap(), Some(false));
    let (s, _) = app
        .as_admin()
        .put("/v1/admin/users/alice", json!({"can_approve": true}))
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(app.store.can_approve(&user).await.unwrap(), Some(true));
    let (_, audit) = app
        .as_admin()
        .get("/v1/admin/audit?kind=admin_change")
        .await;
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
        app.as_admin()
            .post("/v1/admin/sites", json!({"pattern": p}))
            .await;
    }
    app.open_turn("u", "chat-9", true).await;

    let (s, b) = app.as_admin().get("/v1/admin/audit").await;
    assert_eq!(s, StatusCode::OK);
    let rows = b["audit"].as_array().unwrap();
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

    let (_, b) = app.as_admin().get("/v1/admin/audit?kind=turn_opened").await;
    assert_eq!(b["audit"].as_array().unwrap().len(), 1);
    let (_, b) = app.as_admin().get("/v1/admin/audit?limit=2").await;
    assert_eq!(b["audit"].as_array().unwrap().len(), 2);
    let (_, b) = app
        .as_admin()
        .get("/v1/admin/audit?since=2999-01-01T00:00:00Z")
        .await;
    assert_eq!(b, json!({"audit": []}));
    let (_, b) = app
        .as_admin()
        .get("/v1/admin/audit?since=2000-01-01T00:00:00Z&kind=admin_change&limit=1000")
        .await;
    assert_eq!(b["audit"].as_array().unwrap().len(), 3);

    for bad in [
        "since=yesterday",
        "kind=everything",
        "limit=0",
        "limit=1001",
        "limit=ten",
        "colour=red",
    ] {
        let (s, b) = app.as_admin().get(&format!("/v1/admin/audit?{bad}")).await;
        assert_eq!(
            (s, code(&b)),
            (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_INPUT"),
            "{bad}: {b}"
        );
    }
}

#[tokio::test]
async fn package_pins_are_canonical_and_bad_pins_are_refused() {
    let app = TestApp::new().await;
    let (s, b) = app.admin_package("NumPy == 2.1.*").await;
    assert_eq!(
        (s, &b["name"]),
        (StatusCode::CREATED, &json!("numpy==2.1.*")),
        "{b}"
    );
    let (s, b) = app.admin_package("npm:lodash@^4").await;
    assert_eq!(
        (s, &b["name"]),
        (StatusCode::CREATED, &json!("npm:lodash@^4")),
        "{b}"
    );
    // The same pin spelt another way is the same entry.
    let (s, _) = app.admin_package("pip:numpy==2.1.*").await;
    assert_eq!(s, StatusCode::OK);
    for bad in [
        "numpy==",
        "numpy==two",
        "==1.0",
        "npm:lodash@",
        "npm:lodash@^x",
    ] {
        let (s, b) = app
            .as_admin()
            .post("/v1/admin/packages", json!({"name": bad}))
            .await;
        assert_eq!(
            (s, code(&b)),
            (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_INPUT"),
            "{bad}"
        );
        assert!(message(&b).contains("name"), "{b}");
    }
    let (_, b) = app.as_admin().get("/v1/admin/packages").await;
    let names: Vec<&str> = b["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["npm:lodash@^4", "numpy==2.1.*"]);
    // Launch-time packages take pins too; a bad one opens no turn.
    let before = app.count("SELECT COUNT(*) FROM turns").await;
    let (s, b) = app.as_runtime().post("/v1/turns", json!({"user_id": "u", "chat_id": "c", "can_ask_human": true, "packages": ["ok", "numpy>>1"]}))
        .await;
    assert_eq!(
        (s, code(&b)),
        (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_INPUT"),
        "{b}"
    );
    assert!(message(&b).contains("packages[1]"), "{b}");
    assert_eq!(app.count("SELECT COUNT(*) FROM turns").await, before);
    let t = app
        .open_turn_with(
            "u",
            "c",
            true,
            json!({"packages": ["Requests>=2,<3", "npm:@types/node@^20"]}),
        )
        .await;
    let (_, policy) = app.turn_get(&t.turn_id, "policy").await;
    assert!(policy.to_string().contains("requests>=2,<3"), "{policy}");
}
