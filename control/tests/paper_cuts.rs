//! The model's paper cuts, each a deterministic answer in the approval tool's fixed order:
//! what the person declined is not asked again in the same turn (`DECLINED_THIS_TURN`, until
//! a new turn); while the chat's card waits, the tool answers with that card (`pending`,
//! `INTERRUPT_PENDING`) instead of a draft that registration would refuse; and a card whose
//! turn was superseded is refused at registration (`410 TURN_SUPERSEDED`), not at the first
//! click.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cards;
mod support;

use axum::http::StatusCode;
use cards::{ask_urls, asked};
use serde_json::json;
use support::{INVALID_INPUT, TestApp, assert_error};

const A_CSV: &str = "https://files.example.com/a.csv";
const B_CSV: &str = "https://files.example.com/b.csv";
const PYPI: &str = "https://pypi.org/simple/";

async fn drafts(app: &TestApp) -> i64 {
    app.count("SELECT COUNT(*) FROM drafts").await
}

/// The draft the approval tool made for `urls` in `turn` (outcome `ask`), not registered yet.
async fn draft_for(app: &TestApp, turn: &str, urls: &[&str]) -> String {
    let (_, body) = ask_urls(app, turn, urls).await;
    assert_eq!(body["outcome"], "ask", "{body}");
    body["draft_id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_declined_request_is_not_asked_again_in_the_same_turn() {
    let app = TestApp::new().await;
    let turn = app.turn("alice", "c1").await;
    let r = asked(&app, &turn, &[A_CSV]).await;
    let (status, _) = cards::resume(&app, &r.id, &r.secret, json!({"approved": false})).await;
    assert_eq!(status, StatusCode::OK);

    let before = drafts(&app).await;
    for _ in 0..2 {
        let (status, body) = ask_urls(&app, &turn, &[B_CSV]).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            body,
            json!({
                "outcome": "denied",
                "code": "DECLINED_THIS_TURN",
                "message": "The person declined sites files.example.com in this turn; do not ask again \
                            until the next user message. Continue without that data and say so."
            })
        );
    }
    let after = drafts(&app).await;
    assert_eq!(after, before, "no draft for a declined request");

    // Something new in the same turn is still asked for, without what was declined.
    let (_, body) = ask_urls(&app, &turn, &["https://files.example.com/c.csv", PYPI]).await;
    assert_eq!(body["outcome"], "ask", "{body}");
    assert_eq!(body["card"]["sites"], json!(["pypi.org"]));
    assert_eq!(body["card"]["urls"], json!([PYPI]));

    // A new user message is a new turn: the person may be asked again.
    let next = app.turn("alice", "c1").await;
    let (_, body) = ask_urls(&app, &next, &[B_CSV]).await;
    assert_eq!(body["outcome"], "ask", "{body}");
}

#[tokio::test]
async fn a_dismissed_card_counts_as_declined_and_an_approved_one_as_approved() {
    // (how the person answered, what asking again in the same turn answers: field, value)
    for (answer, field, want) in [
        ("dismissed", "code", "DECLINED_THIS_TURN"),
        ("approved", "outcome", "already_approved"),
    ] {
        let app = TestApp::new().await;
        let turn = app.turn("alice", "c1").await;
        let r = asked(&app, &turn, &[A_CSV]).await;
        if answer == "dismissed" {
            assert_eq!(cards::dismiss(&app, &r).await, StatusCode::OK);
        } else {
            cards::approve(&app, &r).await;
        }
        let (_, body) = ask_urls(&app, &turn, &[A_CSV]).await;
        assert_eq!(body[field], want, "{answer}: {body}");
    }
}

#[tokio::test]
async fn asking_while_the_card_waits_answers_with_that_card() {
    let app = TestApp::new().await;
    let turn = app.turn("alice", "c1").await;
    let r = asked(&app, &turn, &[A_CSV]).await;
    let before = drafts(&app).await;
    for url in [A_CSV, PYPI] {
        let (status, body) = ask_urls(&app, &turn, &[url]).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["outcome"], "pending", "{body}");
        assert_eq!(body["code"], "INTERRUPT_PENDING");
        assert_eq!(body["interrupt_id"], json!(r.id));
        assert_eq!(body["state"], "pending");
        assert_eq!(body["card"]["sites"], json!(["files.example.com"]));
        assert!(body.get("draft_id").is_none());
    }
    let after = drafts(&app).await;
    assert_eq!(after, before, "no draft that registration would refuse");

    // Earlier steps still answer first: a bad request is still 422.
    let (status, body) = ask_urls(&app, &turn, &["ftp://x.example.com/"]).await;
    assert_error(
        status,
        &body,
        INVALID_INPUT,
        "a bad URL while the card waits",
    );

    // Once the person answered (claimed), the holder may chain: the tool drafts again.
    let claim = cards::approve(&app, &r).await;
    let draft = draft_for(&app, &turn, &[PYPI]).await;
    let chained = cards::register_with(&app, &draft, json!({"claim_id": claim})).await;
    assert_eq!(chained.0, StatusCode::CREATED, "{}", chained.1);
}

#[tokio::test]
async fn a_card_of_a_superseded_turn_is_refused_at_registration() {
    let app = TestApp::new().await;
    let turn = app.turn("alice", "c1").await;
    let draft = draft_for(&app, &turn, &[A_CSV]).await;
    // The person typed again before the runtime registered the card.
    app.turn("alice", "c1").await;
    let (status, body) = cards::register_with(&app, &draft, json!({"snapshot": "AAEC"})).await;
    let superseded = (StatusCode::GONE, "TURN_SUPERSEDED");
    assert_error(status, &body, superseded, "a card of a superseded turn");
    assert_eq!(app.count("SELECT COUNT(*) FROM interrupts").await, 0);
    let unused =
        format!("SELECT COUNT(*) FROM drafts WHERE draft_id = '{draft}' AND used_at IS NULL");
    assert_eq!(app.count(&unused).await, 1, "nothing was written");
    let blobs = std::fs::read_dir(&app.blob_dir)
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(blobs, 0, "no snapshot was written");

    // A hidden chat: 410 CHAT_HIDDEN at registration too.
    let t2 = app.turn("alice", "c2").await;
    let d2 = draft_for(&app, &t2, &[A_CSV]).await;
    app.hide_chat("alice", "c2").await;
    let (status, body) = cards::register_with(&app, &d2, json!({})).await;
    assert_error(
        status,
        &body,
        (StatusCode::GONE, "CHAT_HIDDEN"),
        "a hidden chat",
    );

    // The current turn's card registers as before.
    let t3 = app.turn("alice", "c1").await;
    let r = asked(&app, &t3, &[A_CSV]).await;
    assert!(r.id.starts_with("int_"));
}
