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
use serde_json::{Value, json};
use support::{TestApp, code};

async fn ask(app: &TestApp, turn: &str, urls: &[&str], packages: &[&str]) -> (StatusCode, Value) {
    app.as_runtime()
        .post(
            &format!("/v1/turns/{turn}/approval-requests"),
            json!({"reason": "the analysis needs the data", "urls": urls, "packages": packages}),
        )
        .await
}

/// The tool's `ask`, registered: the card's id and secret.
async fn ask_and_register(app: &TestApp, turn: &str, urls: &[&str]) -> cards::Registered {
    let (status, body) = ask(app, turn, urls, &[]).await;
    assert_eq!(
        (status, &body["outcome"]),
        (StatusCode::OK, &json!("ask")),
        "{body}"
    );
    cards::register(app, body["draft_id"].as_str().unwrap(), json!({})).await
}

async fn drafts(app: &TestApp) -> i64 {
    app.count("SELECT COUNT(*) FROM drafts").await
}

#[tokio::test]
async fn a_declined_request_is_not_asked_again_in_the_same_turn() {
    let app = TestApp::new().await;
    let turn = app.open_turn("alice", "c1", true).await;
    let r = ask_and_register(&app, &turn.turn_id, &["https://files.example.com/a.csv"]).await;
    let (status, _) = cards::resume(&app, &r.id, &r.secret, json!({"approved": false})).await;
    assert_eq!(status, StatusCode::OK);

    let before = drafts(&app).await;
    for _ in 0..2 {
        let (status, body) = ask(
            &app,
            &turn.turn_id,
            &["https://files.example.com/b.csv"],
            &[],
        )
        .await;
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
    assert_eq!(
        drafts(&app).await,
        before,
        "no draft for a declined request"
    );

    // Something new in the same turn is still asked for, without what was declined.
    let (_, body) = ask(
        &app,
        &turn.turn_id,
        &[
            "https://files.example.com/c.csv",
            "https://pypi.org/simple/",
        ],
        &[],
    )
    .await;
    assert_eq!(body["outcome"], "ask", "{body}");
    assert_eq!(body["card"]["sites"], json!(["pypi.org"]));
    assert_eq!(body["card"]["urls"], json!(["https://pypi.org/simple/"]));

    // A new user message is a new turn: the person may be asked again.
    let next = app.open_turn("alice", "c1", true).await;
    let (_, body) = ask(
        &app,
        &next.turn_id,
        &["https://files.example.com/b.csv"],
        &[],
    )
    .await;
    assert_eq!(body["outcome"], "ask", "{body}");
}

#[tokio::test]
async fn a_dismissed_card_counts_as_declined_and_an_approved_one_as_approved() {
    let app = TestApp::new().await;
    let turn = app.open_turn("alice", "c1", true).await;
    let r = ask_and_register(&app, &turn.turn_id, &["https://files.example.com/a.csv"]).await;
    let (status, _) = app
        .anonymous()
        .post(
            &format!("/v1/interrupts/{}/resume", r.id),
            json!({"secret": r.secret, "resume": [{"interruptId": r.id, "status": "cancelled"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, body) = ask(
        &app,
        &turn.turn_id,
        &["https://files.example.com/a.csv"],
        &[],
    )
    .await;
    assert_eq!(body["code"], "DECLINED_THIS_TURN", "{body}");

    let app = TestApp::new().await;
    let turn = app.open_turn("alice", "c1", true).await;
    let r = ask_and_register(&app, &turn.turn_id, &["https://files.example.com/a.csv"]).await;
    cards::approve(&app, &r).await;
    let (_, body) = ask(
        &app,
        &turn.turn_id,
        &["https://files.example.com/a.csv"],
        &[],
    )
    .await;
    assert_eq!(body["outcome"], "already_approved", "{body}");
}

#[tokio::test]
async fn asking_while_the_card_waits_answers_with_that_card() {
    let app = TestApp::new().await;
    let turn = app.open_turn("alice", "c1", true).await;
    let r = ask_and_register(&app, &turn.turn_id, &["https://files.example.com/a.csv"]).await;
    let before = drafts(&app).await;
    for urls in [
        vec!["https://files.example.com/a.csv"],
        vec!["https://pypi.org/simple/"],
    ] {
        let (status, body) = ask(&app, &turn.turn_id, &urls, &[]).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["outcome"], "pending", "{body}");
        assert_eq!(body["code"], "INTERRUPT_PENDING");
        assert_eq!(body["interrupt_id"], json!(r.id));
        assert_eq!(body["state"], "pending");
        assert_eq!(body["card"]["sites"], json!(["files.example.com"]));
        assert!(body.get("draft_id").is_none());
    }
    assert_eq!(
        drafts(&app).await,
        before,
        "no draft that registration would refuse"
    );

    // Earlier steps still answer first: a bad request is still 422.
    let (status, body) = ask(&app, &turn.turn_id, &["ftp://x.example.com/"], &[]).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_INPUT")
    );

    // Once the person answered (claimed), the holder may chain: the tool drafts again.
    let claim = cards::approve(&app, &r).await;
    let (_, body) = ask(&app, &turn.turn_id, &["https://pypi.org/simple/"], &[]).await;
    assert_eq!(body["outcome"], "ask", "{body}");
    let chained = cards::register_with(
        &app,
        body["draft_id"].as_str().unwrap(),
        json!({"claim_id": claim}),
    )
    .await;
    assert_eq!(chained.0, StatusCode::CREATED, "{}", chained.1);
}

#[tokio::test]
async fn a_card_of_a_superseded_turn_is_refused_at_registration() {
    let app = TestApp::new().await;
    let turn = app.open_turn("alice", "c1", true).await;
    let (_, body) = ask(
        &app,
        &turn.turn_id,
        &["https://files.example.com/a.csv"],
        &[],
    )
    .await;
    let draft = body["draft_id"].as_str().unwrap().to_owned();
    // The person typed again before the runtime registered the card.
    app.open_turn("alice", "c1", true).await;
    let (status, body) = cards::register_with(&app, &draft, json!({"snapshot": "AAEC"})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::GONE, "TURN_SUPERSEDED"),
        "{body}"
    );
    assert_eq!(app.count("SELECT COUNT(*) FROM interrupts").await, 0);
    let unused =
        format!("SELECT COUNT(*) FROM drafts WHERE draft_id = '{draft}' AND used_at IS NULL");
    assert_eq!(app.count(&unused).await, 1, "nothing was written");
    let blobs = std::fs::read_dir(&app.blob_dir)
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(blobs, 0, "no snapshot was written");

    // A hidden chat: 410 CHAT_HIDDEN at registration too.
    let t2 = app.open_turn("alice", "c2", true).await;
    let (_, body) = ask(&app, &t2.turn_id, &["https://files.example.com/a.csv"], &[]).await;
    let d2 = body["draft_id"].as_str().unwrap().to_owned();
    app.hide_chat("alice", "c2").await;
    let (status, body) = cards::register_with(&app, &d2, json!({})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::GONE, "CHAT_HIDDEN"),
        "{body}"
    );

    // The current turn's card registers as before.
    let t3 = app.open_turn("alice", "c1", true).await;
    let r = ask_and_register(&app, &t3.turn_id, &["https://files.example.com/a.csv"]).await;
    assert!(r.id.starts_with("int_"));
}
