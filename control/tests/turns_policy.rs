//! A turn's policy through the real router: admin, launch and chat grants merged for this turn
//! only, wildcards stored before the suffix rule tightened granting nothing, and the turn's own
//! credential reading its policy and nothing else.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use egressgate_store::Host;
use serde_json::json;
use support::{TestApp, assert_code, assert_error, code};

#[tokio::test]
async fn policy_merges_admin_launch_and_chat_grants_for_this_turn_only() {
    let app = TestApp::new().await;
    let (s, _) = app.admin_site("*.pythonhosted.org").await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, _) = app.admin_package("numpy").await;
    assert_eq!(s, StatusCode::CREATED);
    let t = app
        .open_turn_with("u", "c", true, json!({"sites": ["pypi.org", "files.pythonhosted.org"], "packages": ["Pandas", "numpy"]}))
        .await;
    let hour = Duration::from_secs(3600);
    app.insert_approvals(&[
        ("u", "c", "site", "data.example.com", hour),
        ("u", "c", "package", "requests", hour),
        ("u", "c", "site", "old.example.com", Duration::ZERO),
        ("u", "other-chat", "site", "elsewhere.example.com", hour),
        ("someone-else", "c", "site", "theirs.example.com", hour),
    ])
    .await;
    let (s, b) = app.turn_get(&t.turn_id, "policy").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["turn_id"], t.turn_id.as_str());
    assert_eq!(
        b["sites"],
        json!([
            "*.pythonhosted.org",
            "data.example.com",
            "files.pythonhosted.org",
            "pypi.org"
        ])
    );
    assert_eq!(b["packages"], json!(["numpy", "pandas", "requests"]));
    assert_eq!(b["expires_at"], t.body["expires_at"]);

    // A later turn of the same chat sees the chat's approvals but not the first turn's launch list.
    let t2 = app.turn("u", "c").await;
    let (_, b2) = app.turn_get(&t2, "policy").await;
    assert_eq!(
        b2["sites"],
        json!(["*.pythonhosted.org", "data.example.com"])
    );
    assert_eq!(b2["packages"], json!(["numpy", "requests"]));

    app.expire_turn(&t.turn_id).await;
    let (s, b) = app.turn_get(&t.turn_id, "policy").await;
    assert_code(s, &b, (StatusCode::GONE, "TURN_EXPIRED"));
}

#[tokio::test]
async fn wildcards_stored_before_the_suffix_rule_tightened_allow_nothing() {
    // Rows an older release accepted: an admin pattern and a chat approval above the private
    // rule `s3.amazonaws.com`. Neither may open a bucket, nor appear in the policy.
    let app = TestApp::new().await;
    app.exec_sql(
        "INSERT INTO admin_sites (pattern, note, created_at) VALUES ('*.amazonaws.com', NULL, 0)",
    )
    .await;
    app.insert_approval(
        "u",
        "c",
        "site",
        "*.core.windows.net",
        Duration::from_secs(3600),
    )
    .await;
    let t = app.turn("u", "c").await;
    let (s, b) = app.turn_get(&t, "policy").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["sites"], json!([]));
    let (user, chat) = (
        egressgate_store::UserId::parse("u").unwrap(),
        egressgate_store::ChatId::parse("c").unwrap(),
    );
    let turn = egressgate_store::TurnId::from_db(t.clone());
    for h in [
        "attacker-bucket.s3.amazonaws.com",
        "x.blob.core.windows.net",
    ] {
        let host = egressgate_store::Host::parse(h).unwrap();
        let allowed = app
            .store
            .site_allowed(
                egressgate_store::db::policy::ApprovalsOf {
                    user: &user,
                    chat: &chat,
                    turn: &turn,
                },
                &host,
                egressgate_store::Timestamp::now(),
            )
            .await
            .unwrap();
        assert!(allowed.is_none(), "{h}");
    }
}

/// `Authorization: Basic base64(turn_id:secret)` from a turn's `proxy_url`.
fn turn_credential(proxy_url: &str) -> String {
    use base64::Engine as _;
    let userinfo = proxy_url
        .split_once("://")
        .unwrap()
        .1
        .rsplit_once('@')
        .unwrap()
        .0;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(userinfo)
    )
}

async fn get_with(
    app: &TestApp,
    method: &str,
    path: &str,
    authorization: &str,
) -> (StatusCode, serde_json::Value) {
    let req = axum::http::Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", authorization)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(if method == "GET" {
            ""
        } else {
            "{}"
        }))
        .unwrap();
    let (s, _, b) = app.send(req).await;
    (s, b)
}

#[tokio::test]
async fn the_turn_credential_reads_its_own_policy_and_nothing_else() {
    let app = TestApp::new().await;
    app.admin_site("*.pythonhosted.org").await;
    let t = app
        .open_turn_with("u", "c", true, json!({"packages": ["numpy"]}))
        .await;
    let other = app.open_turn("u", "c2", true).await;
    let cred = turn_credential(&t.proxy_url);
    let path = format!("/v1/turns/{}/policy", t.turn_id);

    let (s, by_credential) = get_with(&app, "GET", &path, &cred).await;
    assert_eq!(s, StatusCode::OK, "{by_credential}");
    let (_, by_runtime) = app.turn_get(&t.turn_id, "policy").await;
    assert_eq!(by_credential, by_runtime);

    // Another turn's policy, and a turn that does not exist, look the same.
    let (s1, b1) = get_with(
        &app,
        "GET",
        &format!("/v1/turns/{}/policy", other.turn_id),
        &cred,
    )
    .await;
    let (s2, b2) = get_with(
        &app,
        "GET",
        "/v1/turns/t_AAAAAAAAAAAAAAAAAAAAAA/policy",
        &cred,
    )
    .await;
    assert_code(s1, &b1, (StatusCode::NOT_FOUND, "TURN_NOT_FOUND"));
    assert_eq!((s1, &b1), (s2, &b2));

    // Every other endpoint refuses the credential as it refuses no token at all.
    for (method, p) in [
        ("GET", format!("/v1/turns/{}/refusals", t.turn_id)),
        ("GET", format!("/v1/turns/{}/egress", t.turn_id)),
        ("POST", format!("/v1/turns/{}/approval-requests", t.turn_id)),
        ("POST", "/v1/turns".to_owned()),
        ("POST", "/v1/interrupts".to_owned()),
        (
            "GET",
            "/v1/interrupts/int_AAAAAAAAAAAAAAAAAAAAAA/outcome".to_owned(),
        ),
        ("GET", "/v1/chats/c/approvals".to_owned()),
        ("POST", "/v1/chats/c/interrupt/reissue".to_owned()),
        ("GET", "/v1/admin/sites".to_owned()),
        ("GET", "/v1/admin/audit".to_owned()),
        ("POST", "/v1/batches/decide".to_owned()),
    ] {
        let (s, b) = get_with(&app, method, &p, &cred).await;
        assert_eq!(
            (s, code(&b)),
            (StatusCode::UNAUTHORIZED, "UNAUTHORIZED"),
            "{method} {p}: {b}"
        );
    }

    // Wrong secret, unknown turn, malformed value: 401, like the proxy's 407.
    let wrong = turn_credential(&format!("http://{}:not-the-secret@x", t.turn_id));
    let unknown = turn_credential("http://t_AAAAAAAAAAAAAAAAAAAAAA:s@x");
    for bad in [wrong.as_str(), unknown.as_str(), "Basic !!!", "Basic "] {
        let (s, b) = get_with(&app, "GET", &path, bad).await;
        assert_error(s, &b, (StatusCode::UNAUTHORIZED, "UNAUTHORIZED"), bad);
    }

    // An expired turn's credential no longer reads anything.
    app.expire_turn(&t.turn_id).await;
    let (s, b) = get_with(&app, "GET", &path, &cred).await;
    assert_code(s, &b, (StatusCode::UNAUTHORIZED, "UNAUTHORIZED"));
}

#[tokio::test]
async fn a_launch_wildcard_stored_before_the_rule_tightened_grants_nothing() {
    let app = TestApp::new().await;
    let t = app.turn_with_sites("u", "c", &["files.example.com"]).await;
    app.exec_sql(&format!(
        "UPDATE turns SET sites = '[\"files.example.com\",\"*.amazonaws.com\"]' WHERE turn_id = '{t}'"
    ))
    .await;
    let (s, b) = app.turn_get(&t, "policy").await;
    assert_eq!(s, StatusCode::OK, "the turn stays usable: {b}");
    assert_eq!(b["sites"], json!(["files.example.com"]));
    let turn = app.stored_turn(&t).await;
    let bucket = Host::parse("attacker-bucket.s3.amazonaws.com").unwrap();
    assert!(!turn.launch.sites.iter().any(|p| p.matches(&bucket)));
}
