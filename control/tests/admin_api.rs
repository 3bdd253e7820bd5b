//! The administration API through the real router: pre-approved site and package lists
//! (validated, canonical, 201/200/204/404), who may call them, and strict bodies. User
//! permissions and the audit query are in `admin_users_audit.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use axum::http::StatusCode;
use serde_json::{Value, json};
use support::{
    INVALID_BODY, INVALID_INPUT, NOT_FOUND, TestApp, assert_error, assert_invalid_input, pluck,
};

/// What the administrator's list `list` holds now (`sites` by pattern, `packages` by name).
async fn listed(app: &TestApp, list: &str) -> Vec<String> {
    let (s, b) = app.as_admin().get(&format!("/v1/admin/{list}")).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let key = if list == "sites" { "/pattern" } else { "/name" };
    pluck(&b[list], key)
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// Adds `sent` with `note` to `list` and asserts a new entry: `201`, stored in canonical form
/// (`canonical`) with the note kept and a creation time. The answer.
async fn adds(app: &TestApp, list: &str, sent: &str, canonical: &str, note: &str) -> Value {
    let field = if list == "sites" { "pattern" } else { "name" };
    let body = json!({field: sent, "note": note});
    let (s, b) = app
        .as_admin()
        .post(&format!("/v1/admin/{list}"), body)
        .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(b[field], canonical);
    assert_eq!(b["note"], note);
    assert!(b["created_at"].is_string(), "{b}");
    b
}

/// Removes `entry` (as spelt) from `list` and asserts the answer: 204, or 404 `NOT_FOUND`.
async fn removes(app: &TestApp, list: &str, entry: &str, want: StatusCode) {
    let (s, b) = app
        .as_admin()
        .delete(&format!("/v1/admin/{list}/{entry}"))
        .await;
    assert_eq!(s, want, "remove {entry}: {b}");
    if want == StatusCode::NOT_FOUND {
        assert_error(s, &b, NOT_FOUND, entry);
    }
}

#[tokio::test]
async fn sites_add_is_201_then_200_and_stored_canonically() {
    let app = TestApp::new().await;
    let b = adds(
        &app,
        "sites",
        "*.Example.COM.",
        "*.example.com",
        "vendor data",
    )
    .await;
    let created = b["created_at"].as_str().unwrap().to_owned();
    assert!(created.ends_with('Z'));

    let (s, b) = app.admin_site("*.example.com").await;
    assert_eq!(s, StatusCode::OK, "already there: {b}");
    assert_eq!(b["created_at"], created.as_str());
    assert_eq!(b["note"], "vendor data", "re-adding changes nothing");

    let (s, b) = app.admin_site("files.example.org").await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(b["note"], serde_json::Value::Null);

    assert_eq!(
        listed(&app, "sites").await,
        ["*.example.com", "files.example.org"]
    );
    let audited = app.audit_rows("admin_change").await;
    assert_eq!(audited, 2, "no audit for a no-op");
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
        let (s, b) = app.admin_site(p).await;
        assert_invalid_input(s, &b, "pattern", why, p);
    }
    assert!(listed(&app, "sites").await.is_empty());
    app.assert_empty(&["audit"]).await;
}

#[tokio::test]
async fn sites_delete_is_204_then_404_with_any_spelling() {
    let app = TestApp::new().await;
    for p in ["*.example.com", "files.example.org"] {
        app.admin_site(p).await;
    }
    for (spelling, want) in [
        ("%2A.Example.com", StatusCode::NO_CONTENT),
        ("*.example.com", StatusCode::NOT_FOUND),
        ("FILES.example.org.", StatusCode::NO_CONTENT),
        ("not%20a%20pattern", StatusCode::NOT_FOUND),
    ] {
        removes(&app, "sites", spelling, want).await;
    }
    assert!(listed(&app, "sites").await.is_empty());
    let (_, audit) = app
        .as_admin()
        .get("/v1/admin/audit?kind=admin_change")
        .await;
    let actions = pluck(&audit["audit"], "/detail/action");
    assert_eq!(actions, ["add", "add", "remove", "remove"]);
}

#[tokio::test]
async fn packages_are_canonical_and_removable() {
    let app = TestApp::new().await;
    adds(&app, "packages", "Foo_Bar.baz", "foo-bar-baz", "n").await;
    // (as sent, the answer, the canonical name)
    for (sent, want, name) in [
        ("pip:foo-bar-baz", StatusCode::OK, "foo-bar-baz"),
        ("npm:@types/node", StatusCode::CREATED, "npm:@types/node"),
    ] {
        let (s, b) = app.admin_package(sent).await;
        assert_eq!((s, b["name"].as_str()), (want, Some(name)), "{sent}: {b}");
    }
    for bad in ["gem:rails", "npm:Upper", "bad name", ""] {
        let (s, b) = app.admin_package(bad).await;
        assert_invalid_input(s, &b, "name", "", bad);
    }
    assert_eq!(
        listed(&app, "packages").await,
        ["foo-bar-baz", "npm:@types/node"]
    );
    for (spelling, want) in [
        ("npm:@types%2Fnode", StatusCode::NO_CONTENT),
        ("Foo.Bar_Baz", StatusCode::NO_CONTENT),
        ("foo-bar-baz", StatusCode::NOT_FOUND),
    ] {
        removes(&app, "packages", spelling, want).await;
    }
    assert!(listed(&app, "packages").await.is_empty());
}

#[tokio::test]
async fn package_pins_are_canonical_and_bad_pins_are_refused() {
    let app = TestApp::new().await;
    for (sent, want, name) in [
        ("NumPy == 2.1.*", StatusCode::CREATED, "numpy==2.1.*"),
        ("npm:lodash@^4", StatusCode::CREATED, "npm:lodash@^4"),
        // The same pin spelt another way is the same entry.
        ("pip:numpy==2.1.*", StatusCode::OK, "numpy==2.1.*"),
    ] {
        let (s, b) = app.admin_package(sent).await;
        assert_eq!((s, b["name"].as_str()), (want, Some(name)), "{sent}: {b}");
    }
    for bad in [
        "numpy==",
        "numpy==two",
        "==1.0",
        "npm:lodash@",
        "npm:lodash@^x",
    ] {
        let (s, b) = app.admin_package(bad).await;
        assert_error(s, &b, INVALID_INPUT, bad);
        assert!(support::message(&b).contains("name"), "{b}");
    }
    assert_eq!(
        listed(&app, "packages").await,
        ["npm:lodash@^4", "numpy==2.1.*"]
    );
    // Launch-time packages take pins too; a bad one opens no turn.
    let before = app.count("SELECT COUNT(*) FROM turns").await;
    let turn = json!({"user_id": "u", "chat_id": "c", "can_ask_human": true, "packages": ["ok", "numpy>>1"]});
    let (s, b) = app.as_runtime().post("/v1/turns", turn).await;
    assert_invalid_input(s, &b, "", "packages[1]", "a bad launch pin");
    assert_eq!(app.count("SELECT COUNT(*) FROM turns").await, before);
    let packages = json!({"packages": ["Requests>=2,<3", "npm:@types/node@^20"]});
    let t = app.open_turn_with("u", "c", true, packages).await;
    let (_, policy) = app.turn_get(&t.turn_id, "policy").await;
    assert!(policy.to_string().contains("requests>=2,<3"), "{policy}");
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
    let runtime = app.as_runtime();
    let site = json!({"pattern": "example.com"});
    let (s, _) = runtime.post("/v1/admin/sites", site).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let user = json!({"can_approve": false});
    let (s, _) = runtime.put("/v1/admin/users/u", user).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    app.assert_empty(&["admin_sites", "users"]).await;
}

#[tokio::test]
async fn strict_bodies_write_nothing() {
    let app = TestApp::new().await;
    let admin = app.as_admin();
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
        ("/v1/admin/users/u", r#"{"can_approve": "yes"}"#),
        (
            "/v1/admin/users/u",
            r#"{"can_approve": true, "admin": true}"#,
        ),
    ] {
        let (s, b) = if path.contains("users") {
            admin.put(path, serde_json::from_str(raw).unwrap()).await
        } else {
            admin.post_raw(path, raw).await
        };
        assert_error(s, &b, INVALID_BODY, raw);
    }
    let long = json!({"pattern": "example.com", "note": "x".repeat(501)});
    let (s, b) = admin.post("/v1/admin/sites", long).await;
    assert_error(s, &b, INVALID_INPUT, "a note of 501 characters");
    app.assert_empty(&["admin_sites", "admin_packages", "users", "audit"])
        .await;
}
