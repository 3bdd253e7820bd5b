//! `POST /v1/turns` and the turn read endpoints (refusals, egress, policy) through the real
//! router: status codes, JSON shapes, validation with nothing written, auth, hidden chats.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use egressgate_store::db::refusals::{EgressEvent, RefusalCandidate, RefusalEvent, Subject};
use egressgate_store::{ChatId, Host, RefusalReason, Secret, Timestamp, TurnId, UserId};
use serde_json::json;
use support::{TestApp, assert_code, assert_invalid_input, code, message};

fn credential(proxy_url: &str) -> (String, String) {
    let rest = proxy_url.strip_prefix("http://").expect("http scheme");
    let (userinfo, host) = rest.split_once('@').expect("userinfo");
    assert_eq!(host, "127.0.0.1:3128");
    let (id, secret) = userinfo.split_once(':').expect("id:secret");
    (id.to_owned(), secret.to_owned())
}

#[tokio::test]
async fn open_turn_returns_a_working_credential() {
    let app = TestApp::new().await;
    let before = Timestamp::now();
    let t = app.open_turn("alice", "chat-1", true).await;
    let (id, secret) = credential(&t.proxy_url);
    assert_eq!(id, t.turn_id);
    assert!(secret.len() >= 22, "at least 128 bits: {secret}");
    let stored = app
        .store
        .turn(&TurnId::parse(&id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(
        stored.secret_hash.matches(&Secret::from_presented(&secret)),
        "only the hash is kept"
    );
    assert_ne!(stored.secret_hash.as_str(), secret);
    let expires = Timestamp::parse_rfc3339(t.body["expires_at"].as_str().unwrap()).unwrap();
    assert_eq!(expires, stored.expires_at);
    let hour = before.plus(Duration::from_secs(3600));
    assert!(
        expires >= hour && expires <= hour.plus(Duration::from_secs(60)),
        "default ttl 1h"
    );
    assert!(t.body["expires_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(t.body.as_object().unwrap().len(), 3, "{}", t.body);
    let t2 = app.open_turn("alice", "chat-1", true).await;
    assert_ne!(t2.turn_id, t.turn_id);
    assert_ne!(credential(&t2.proxy_url).1, secret);
}

#[tokio::test]
async fn each_turn_advances_the_chat_counter_and_chats_are_per_user() {
    let app = TestApp::new().await;
    app.open_turn("alice", "c", true).await;
    app.open_turn("alice", "c", true).await;
    app.open_turn("bob", "c", true).await;
    let alice = app
        .store
        .chat_state(
            &egressgate_store::UserId::parse("alice").unwrap(),
            &egressgate_store::ChatId::parse("c").unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    let bob = app
        .store
        .chat_state(
            &egressgate_store::UserId::parse("bob").unwrap(),
            &egressgate_store::ChatId::parse("c").unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!((alice.turn_seq, bob.turn_seq), (2, 1));
}

#[tokio::test]
async fn ttl_seconds_is_bounded() {
    let app = TestApp::new().await;
    let now = Timestamp::now();
    let t = app
        .open_turn_with("u", "c", true, json!({"ttl_seconds": 60}))
        .await;
    let expires = Timestamp::parse_rfc3339(t.body["expires_at"].as_str().unwrap()).unwrap();
    assert!(
        expires >= now.plus(Duration::from_secs(60))
            && expires <= now.plus(Duration::from_secs(90))
    );
    for bad in [json!(0), json!(-5), json!(7 * 24 * 3600 + 1)] {
        let (s, b) = app
            .as_runtime()
            .post(
                "/v1/turns",
                json!({"user_id": "u", "chat_id": "c", "can_ask_human": true, "ttl_seconds": bad}),
            )
            .await;
        assert_eq!(
            (s, code(&b)),
            (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_INPUT"),
            "{bad}: {b}"
        );
        assert!(message(&b).contains("ttl_seconds"));
    }
}

#[tokio::test]
async fn bad_launch_lists_are_422_naming_the_entry_and_nothing_is_written() {
    let app = TestApp::new().await;
    let cases = [
        (
            json!({"sites": ["ok.example.com", "*.com"]}),
            "sites[1]",
            "public suffix",
        ),
        (json!({"sites": ["*.co.uk"]}), "sites[0]", "public suffix"),
        (
            json!({"sites": ["files.example.com", "*.amazonaws.com"]}),
            "sites[1]",
            "public suffix",
        ),
        (
            json!({"sites": ["*.core.windows.net"]}),
            "sites[0]",
            "public suffix",
        ),
        (
            json!({"sites": ["s3.amazonaws.com"]}),
            "sites[0]",
            "public suffix",
        ),
        (json!({"sites": ["*"]}), "sites[0]", "public suffix"),
        (json!({"sites": ["10.0.0.1"]}), "sites[0]", "IP literal"),
        (json!({"sites": ["0x7f.1"]}), "sites[0]", "IP literal"),
        (json!({"sites": ["db.internal"]}), "sites[0]", "internal"),
        (json!({"sites": ["localhost"]}), "sites[0]", "internal"),
        (
            json!({"sites": ["a.*.example.com"]}),
            "sites[0]",
            "wildcard",
        ),
        (
            json!({"packages": ["requests", "gem:rails"]}),
            "packages[1]",
            "ecosystem",
        ),
        (json!({"packages": ["npm:Bad"]}), "packages[0]", "npm"),
        (json!({"user_id": ""}), "user_id", "1 to 200"),
        (json!({"chat_id": "a\nb"}), "chat_id", "control"),
    ];
    for (extra, entry, why) in cases {
        let mut body = json!({"user_id": "u", "chat_id": "c", "can_ask_human": true});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (s, b) = app.as_runtime().post("/v1/turns", body).await;
        assert_invalid_input(s, &b, entry, why, &extra.to_string());
    }
    assert_eq!(app.count("SELECT COUNT(*) FROM turns").await, 0);
    assert_eq!(app.count("SELECT COUNT(*) FROM chats").await, 0);
    assert_eq!(app.count("SELECT COUNT(*) FROM audit").await, 0);
}

#[tokio::test]
async fn malformed_bodies_are_400_invalid_body_and_nothing_is_written() {
    let app = TestApp::new().await;
    for raw in [
        "{not json",
        r#"{"user_id": "u", "chat_id": "c", "can_ask_human": true, "extra": 1}"#,
        r#"{"user_id": "u", "chat_id": "c"}"#,
        r#"{"user_id": "u", "chat_id": "c", "can_ask_human": "yes"}"#,
        r#"{"user_id": 5, "chat_id": "c", "can_ask_human": true}"#,
        r#"{"user_id": "u", "chat_id": "c", "can_ask_human": true, "ttl_seconds": 1.5}"#,
        r#"{"user_id": "u", "chat_id": "c", "can_ask_human": false, "can_ask_human": true}"#,
        r#"{"user_id": "u", "user_id": "v", "chat_id": "c", "can_ask_human": true}"#,
        "",
    ] {
        let (s, b) = app.as_runtime().post_raw("/v1/turns", raw).await;
        assert_eq!(
            (s, code(&b)),
            (StatusCode::BAD_REQUEST, "INVALID_BODY"),
            "{raw}: {b}"
        );
    }
    assert_eq!(app.count("SELECT COUNT(*) FROM turns").await, 0);
}

#[tokio::test]
async fn opening_needs_the_runtime_token() {
    let app = TestApp::new().await;
    let body = json!({"user_id": "u", "chat_id": "c", "can_ask_human": true});
    let (s, b) = app.anonymous().post("/v1/turns", body.clone()).await;
    assert_code(s, &b, (StatusCode::UNAUTHORIZED, "UNAUTHORIZED"));
    let (s, _) = app
        .with_token(Some("guess"))
        .post("/v1/turns", body.clone())
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, b) = app.as_admin().post("/v1/turns", body).await;
    assert_code(s, &b, (StatusCode::FORBIDDEN, "FORBIDDEN"));
    assert_eq!(app.count("SELECT COUNT(*) FROM turns").await, 0);
}

#[tokio::test]
async fn a_hidden_chat_takes_no_new_turns_but_the_same_chat_id_of_another_user_does() {
    let app = TestApp::new().await;
    app.open_turn("alice", "c", true).await;
    app.hide_chat("alice", "c").await;
    let (s, b) = app
        .as_runtime()
        .post(
            "/v1/turns",
            json!({"user_id": "alice", "chat_id": "c", "can_ask_human": true}),
        )
        .await;
    assert_eq!((s, code(&b)), (StatusCode::GONE, "CHAT_HIDDEN"), "{b}");
    assert_eq!(
        app.count("SELECT COUNT(*) FROM turns").await,
        1,
        "no turn written"
    );
    assert_eq!(
        app.count("SELECT turn_seq FROM chats WHERE user_id = 'alice'")
            .await,
        1,
        "counter rolled back"
    );
    app.open_turn("bob", "c", true).await;
}

#[tokio::test]
async fn launch_grants_are_audited_canonically() {
    let app = TestApp::new().await;
    let t = app
        .open_turn_with(
            "u",
            "c",
            false,
            json!({"sites": ["Files.Example.COM.", "*.Example.org"], "packages": ["Foo_Bar"]}),
        )
        .await;
    let (s, b) = app.as_admin().get("/v1/admin/audit?kind=turn_opened").await;
    assert_eq!(s, StatusCode::OK);
    let rows = b["audit"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{b}");
    assert_eq!(rows[0]["chat_id"], "c");
    assert_eq!(rows[0]["detail"]["turn_id"], t.turn_id.as_str());
    assert_eq!(
        rows[0]["detail"]["sites"],
        json!(["*.example.org", "files.example.com"])
    );
    assert_eq!(rows[0]["detail"]["packages"], json!(["foo-bar"]));
    assert_eq!(rows[0]["detail"]["can_ask_human"], false);
}

/// The proxy's refusal path: hosts the chat's approvals or the administrators' list allow
/// come back allowed and leave no record; the rest, and plain refusals in the same batch, are
/// recorded in the same transaction.
#[tokio::test]
async fn refuse_unless_allowed_checks_and_records_in_one_transaction() {
    let app = TestApp::new().await;
    let t = app.turn("u", "c").await;
    let turn = TurnId::parse(&t).unwrap();
    app.admin_site("admin.example.com").await;
    app.insert_approval(
        "u",
        "c",
        "site",
        "*.approved.example.com",
        Duration::from_secs(60),
    )
    .await;
    app.insert_approval(
        "u",
        "other-chat",
        "site",
        "elsewhere.example.com",
        Duration::from_secs(60),
    )
    .await;
    let ev = |host: &str, reason| RefusalEvent {
        turn: turn.clone(),
        host: host.into(),
        port: 443,
        reason,
        url: None,
        package: None,
        at: Timestamp::now(),
        shadow: false,
        method: None,
    };
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
    let turn = TurnId::parse(&t).unwrap();
    let ev = |host: &str, port, reason, url: Option<&str>| RefusalEvent {
        turn: turn.clone(),
        host: host.into(),
        port,
        reason,
        url: url.map(Into::into),
        package: None,
        at: Timestamp::now(),
        shadow: false,
        method: None,
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
async fn every_request_on_an_expired_turn_is_410_turn_expired() {
    let app = TestApp::new().await;
    let t = app.turn("alice", "c").await;
    app.refuse_unapproved(&t, "pypi.org").await;
    app.expire_turn(&t).await;
    for what in ["refusals", "egress", "policy"] {
        let (s, b) = app
            .as_runtime()
            .get(&format!("/v1/turns/{}/{what}", t))
            .await;
        assert_eq!(
            (s, code(&b)),
            (StatusCode::GONE, "TURN_EXPIRED"),
            "{what}: {b}"
        );
        assert!(!message(&b).is_empty(), "{what}: {b}");
    }
    let (s, b) = app
        .as_runtime()
        .post(
            &format!("/v1/turns/{}/approval-requests", t),
            json!({"reason": "r"}),
        )
        .await;
    assert_eq!((s, code(&b)), (StatusCode::GONE, "TURN_EXPIRED"), "{b}");
}

#[tokio::test]
async fn unknown_paths_and_methods_answer_with_the_error_shape() {
    let app = TestApp::new().await;
    let (s, b) = app.as_runtime().get("/v1/no-such-endpoint").await;
    assert_eq!((s, code(&b)), (StatusCode::NOT_FOUND, "NOT_FOUND"), "{b}");
    assert!(!message(&b).is_empty(), "{b}");
    let (s, b) = app.as_runtime().delete("/v1/turns").await;
    assert_eq!(
        (s, code(&b)),
        (StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED"),
        "{b}"
    );
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
    app.insert_approval("u", "c", "site", "data.example.com", hour)
        .await;
    app.insert_approval("u", "c", "package", "requests", hour)
        .await;
    app.insert_approval("u", "c", "site", "old.example.com", Duration::ZERO)
        .await;
    app.insert_approval("u", "other-chat", "site", "elsewhere.example.com", hour)
        .await;
    app.insert_approval("someone-else", "c", "site", "theirs.example.com", hour)
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
    for h in [
        "attacker-bucket.s3.amazonaws.com",
        "x.blob.core.windows.net",
    ] {
        let host = egressgate_store::Host::parse(h).unwrap();
        let allowed = app
            .store
            .site_allowed(&user, &chat, &host, egressgate_store::Timestamp::now())
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
        assert_eq!(
            (s, code(&b)),
            (StatusCode::UNAUTHORIZED, "UNAUTHORIZED"),
            "{bad}: {b}"
        );
    }

    // An expired turn's credential no longer reads anything.
    app.expire_turn(&t.turn_id).await;
    let (s, b) = get_with(&app, "GET", &path, &cred).await;
    assert_eq!(
        (s, code(&b)),
        (StatusCode::UNAUTHORIZED, "UNAUTHORIZED"),
        "{b}"
    );
}

#[tokio::test]
async fn a_launch_wildcard_stored_before_the_rule_tightened_grants_nothing() {
    let app = TestApp::new().await;
    let t = app
        .open_turn_with("u", "c", true, json!({"sites": ["files.example.com"]}))
        .await;
    app.exec_sql(&format!(
        "UPDATE turns SET sites = '[\"files.example.com\",\"*.amazonaws.com\"]' WHERE turn_id = '{}'",
        t.turn_id
    ))
    .await;
    let (s, b) = app.turn_get(&t.turn_id, "policy").await;
    assert_eq!(s, StatusCode::OK, "the turn stays usable: {b}");
    assert_eq!(b["sites"], json!(["files.example.com"]));
    let turn = app
        .store
        .turn(&TurnId::parse(&t.turn_id).unwrap())
        .await
        .unwrap()
        .unwrap();
    let bucket = Host::parse("attacker-bucket.s3.amazonaws.com").unwrap();
    assert!(!turn.sites.iter().any(|p| p.matches(&bucket)));
}
