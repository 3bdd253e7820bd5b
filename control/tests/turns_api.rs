//! `POST /v1/turns` through the real router: the credential, the chat counter, the TTL bound,
//! validation with nothing written, auth, hidden chats, audited launch grants, and the error
//! shape of an expired turn or an unknown path. A turn's record is read in
//! `turns_refusals.rs`, its policy in `turns_policy.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use axum::http::StatusCode;
use egressgate_store::{ChatId, Secret, Timestamp, UserId};
use serde_json::json;
use support::{TestApp, assert_code, assert_error, assert_invalid_input, message};

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
    let stored = app.stored_turn(&id).await;
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
    let seq = async |user: &str| {
        let (user, chat) = (UserId::parse(user).unwrap(), ChatId::parse("c").unwrap());
        app.store.chat_state(&user, &chat).await.unwrap().unwrap()
    };
    let (alice, bob) = (seq("alice").await, seq("bob").await);
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
        assert_error(
            s,
            &b,
            (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_INPUT"),
            &bad.to_string(),
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
        assert_error(s, &b, (StatusCode::BAD_REQUEST, "INVALID_BODY"), raw);
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
    assert_code(s, &b, (StatusCode::GONE, "CHAT_HIDDEN"));
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
        assert_error(s, &b, (StatusCode::GONE, "TURN_EXPIRED"), what);
        assert!(!message(&b).is_empty(), "{what}: {b}");
    }
    let (s, b) = app
        .as_runtime()
        .post(
            &format!("/v1/turns/{}/approval-requests", t),
            json!({"reason": "r"}),
        )
        .await;
    assert_code(s, &b, (StatusCode::GONE, "TURN_EXPIRED"));
}

#[tokio::test]
async fn unknown_paths_and_methods_answer_with_the_error_shape() {
    let app = TestApp::new().await;
    let (s, b) = app.as_runtime().get("/v1/no-such-endpoint").await;
    assert_code(s, &b, (StatusCode::NOT_FOUND, "NOT_FOUND"));
    assert!(!message(&b).is_empty(), "{b}");
    let (s, b) = app.as_runtime().delete("/v1/turns").await;
    assert_code(
        s,
        &b,
        (StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED"),
    );
}
