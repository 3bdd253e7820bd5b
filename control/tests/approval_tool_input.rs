//! The approval tool's step 1 through the real router: what it refuses before it looks at any
//! grant (invalid entries, caps, malformed bodies, the caller and the turn), each naming the
//! entry and why and writing nothing; and a probing script that cannot lock the card.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cards;
mod support;

use std::time::Duration;

use axum::http::StatusCode;
use cards::ask;
use serde_json::json;
use support::{INVALID_BODY, INVALID_INPUT, TestApp, assert_error, assert_invalid_input, message};

const TURN_NOT_FOUND: (StatusCode, &str) = (StatusCode::NOT_FOUND, "TURN_NOT_FOUND");

async fn drafts(app: &TestApp) -> i64 {
    app.count("SELECT COUNT(*) FROM drafts").await
}

// Step 1.
#[tokio::test]
async fn step1_invalid_input_names_the_entry_and_why_and_writes_nothing() {
    let app = TestApp::new().await;
    let t = app.turn("u", "c").await;
    let cases = [
        (
            json!({"reason": "r", "urls": ["https://ok.example.com/", "ftp://files.example.com/x"]}),
            "urls[1]",
            "http and https",
        ),
        (
            json!({"reason": "r", "urls": ["https://user:pw@files.example.com/x"]}),
            "urls[0]",
            "credentials",
        ),
        (
            json!({"reason": "r", "urls": ["not a url"]}),
            "urls[0]",
            "absolute URL",
        ),
        (
            json!({"reason": "r", "urls": ["http://127.0.0.1/x"]}),
            "urls[0]",
            "IP literal",
        ),
        (
            json!({"reason": "r", "urls": ["http://2130706433/x"]}),
            "urls[0]",
            "IP literal",
        ),
        (
            json!({"reason": "r", "urls": ["http://[::1]/x"]}),
            "urls[0]",
            "IP literal",
        ),
        (
            json!({"reason": "r", "urls": ["http://metadata.internal/x"]}),
            "urls[0]",
            "internal",
        ),
        (
            json!({"reason": "r", "urls": ["http://localhost:8080/x"]}),
            "urls[0]",
            "internal",
        ),
        (
            json!({"reason": "r", "urls": ["http://intranet/x"]}),
            "urls[0]",
            "internal",
        ),
        (
            json!({"reason": "r", "packages": ["requests", "not valid!"]}),
            "packages[1]",
            "PyPI",
        ),
        (
            json!({"reason": "r", "packages": ["cargo:serde"]}),
            "packages[0]",
            "ecosystem",
        ),
        (
            json!({"reason": "", "urls": ["https://files.example.com/"]}),
            "reason",
            "",
        ),
        (
            json!({"reason": "   ", "urls": ["https://files.example.com/"]}),
            "reason",
            "",
        ),
        (
            json!({"reason": "x".repeat(501), "urls": ["https://files.example.com/"]}),
            "reason",
            "500",
        ),
    ];
    for (body, entry, why) in cases {
        let (s, b) = ask(&app, &t, body.clone()).await;
        assert_invalid_input(s, &b, entry, why, &body.to_string());
        assert!(
            !message(&b).contains("pw@"),
            "credentials never echoed: {b}"
        );
    }
    let (s, _) = ask(
        &app,
        &t,
        json!({"reason": "x".repeat(500), "urls": ["https://files.example.com/"]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "500 characters is allowed");
    assert_eq!(drafts(&app).await, 1);
}

#[tokio::test]
async fn step1_card_caps() {
    let app = TestApp::configured(|s| {
        s.card_caps.sites = 2;
        s.card_caps.urls = 3;
        s.card_caps.packages = 2;
    })
    .await;
    let t = app.turn("u", "c").await;
    let four_urls: Vec<String> = (0..4)
        .map(|i| format!("https://a.example.com/{i}"))
        .collect();
    for (body, cap) in [
        (
            json!({"reason": "r", "urls": ["https://a.example.com/", "https://b.example.com/", "https://c.example.com/"]}),
            "at most 2 sites",
        ),
        (json!({"reason": "r", "urls": four_urls}), "at most 3 URLs"),
        (
            json!({"reason": "r", "packages": ["a", "b", "c"]}),
            "at most 2 packages",
        ),
    ] {
        let (s, b) = ask(&app, &t, body).await;
        assert_error(s, &b, INVALID_INPUT, cap);
        assert!(message(&b).contains(cap), "{b}");
    }
    // Refused hosts do not lock the tool: they fill the card's free places (below).
    assert_eq!(drafts(&app).await, 0);
}

#[tokio::test]
async fn probing_more_hosts_than_a_card_holds_keeps_the_card_usable() {
    let app = TestApp::configured(|s| s.card_caps.sites = 5).await;
    let t = app.turn("u", "c").await;
    // A script probes 30 hosts, then the one it needed is refused last.
    for i in 0..30 {
        app.refuse_unapproved(&t, &format!("probe{i:02}.example.net"))
            .await;
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    app.refuse_unapproved(&t, "latest.example.net").await;
    let body = json!({"reason": "r", "urls": ["https://data.example.org/x.csv", "https://probe00.example.net/"]});
    let (s, first) = ask(&app, &t, body.clone()).await;
    assert_eq!(s, StatusCode::OK, "{first}");
    assert_eq!(first["outcome"], "ask");
    let card = &first["card"];
    let sites: Vec<&str> = card["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(sites.len(), 5, "{card}");
    // Named hosts always make it; the most recent refusal fills a free place.
    for must in [
        "data.example.org",
        "probe00.example.net",
        "latest.example.net",
    ] {
        assert!(sites.contains(&must), "{must} missing from {card}");
    }
    assert_eq!(card["sites_not_shown"], 31 - 4, "{card}");
    // The same facts give the same card.
    let (_, again) = ask(&app, &t, body).await;
    assert_eq!(again["card"], first["card"]);

    // The approval grants only what the card listed.
    let reg = cards::register(&app, first["draft_id"].as_str().unwrap(), json!({})).await;
    let message = reg.body["interrupt"]["message"].as_str().unwrap();
    let not_shown = "27 more blocked sites not shown";
    assert!(message.contains(not_shown), "{message}");
    let (s, res) = cards::click(&app, &reg).await;
    assert_eq!(s, StatusCode::OK, "{res}");
    assert_eq!(res["decision"]["sites"], card["sites"]);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM approvals WHERE kind = 'site'")
            .await,
        5
    );

    // Only the agent's own named entries over the caps are refused.
    let named: Vec<String> = (0..6)
        .map(|i| format!("https://n{i}.example.org/"))
        .collect();
    let (s, b) = ask(&app, &t, json!({"reason": "r", "urls": named})).await;
    assert_error(s, &b, INVALID_INPUT, "six named sites over a cap of five");
}

#[tokio::test]
async fn bad_json_and_unknown_fields_are_400_and_write_nothing() {
    let app = TestApp::new().await;
    let t = app.turn("u", "c").await;
    let path = format!("/v1/turns/{}/approval-requests", t);
    for raw in [
        "{",
        r#"{"reason": "r", "urls": ["https://a.example.com/"], "user_id": "admin"}"#,
        r#"{"reason": "r", "can_ask_human": true}"#,
        r#"{"urls": ["https://a.example.com/"]}"#,
        r#"{"reason": "r", "urls": "https://a.example.com/"}"#,
        r#"{"reason": 1}"#,
    ] {
        let (s, b) = app.as_runtime().post_raw(&path, raw).await;
        assert_error(s, &b, INVALID_BODY, raw);
    }
    assert_eq!(drafts(&app).await, 0);
}

#[tokio::test]
async fn auth_and_turn_lookup() {
    let app = TestApp::new().await;
    let t = app.turn("alice", "c").await;
    let path = format!("/v1/turns/{}/approval-requests", t);
    let body = json!({"reason": "r", "urls": ["https://a.example.com/"]});
    let (s, _) = app.anonymous().post(&path, body.clone()).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _) = app.as_admin().post(&path, body.clone()).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, b) = app.as_user("mallory").post(&path, body.clone()).await;
    assert_error(s, &b, TURN_NOT_FOUND, "another user's turn");
    let unknown = egressgate_store::TurnId::generate();
    for id in [unknown.as_str(), "garbage"] {
        let (s, b) = ask(&app, id, body.clone()).await;
        assert_error(s, &b, TURN_NOT_FOUND, id);
    }
    assert_eq!(drafts(&app).await, 0);
    let (s, _) = app.as_user("alice").post(&path, body.clone()).await;
    assert_eq!(s, StatusCode::OK);

    app.expire_turn(&t).await;
    let (s, b) = ask(&app, &t, body).await;
    assert_error(s, &b, (StatusCode::GONE, "TURN_EXPIRED"), "an expired turn");
    assert_eq!(drafts(&app).await, 1);
}

#[tokio::test]
async fn a_hidden_chat_cannot_ask() {
    let app = TestApp::new().await;
    let t = app.turn("u", "c").await;
    app.hide_chat("u", "c").await;
    let (s, b) = ask(
        &app,
        &t,
        json!({"reason": "r", "urls": ["https://a.example.com/"]}),
    )
    .await;
    assert_error(s, &b, (StatusCode::GONE, "CHAT_HIDDEN"), "a hidden chat");
    assert_eq!(drafts(&app).await, 0);
}
