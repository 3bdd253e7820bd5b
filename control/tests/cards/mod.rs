//! Helpers shared by the approval-tool, interrupt, resume and approvals tests: the approval
//! tool's request, a turn with a draft card (built through the store, so the card tests do not
//! depend on the approval tool's merging), registration, and the person's answers.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use axum::http::StatusCode;
use egressgate_store::{Card, Host, PackageSpec, Timestamp};
use serde_json::{Value, json};

use crate::support::{Answer, TestApp};

/// The approval tool: `POST /v1/turns/{turn_id}/approval-requests` with `body`.
pub async fn ask(app: &TestApp, turn_id: &str, body: Value) -> Answer {
    let path = format!("/v1/turns/{turn_id}/approval-requests");
    app.as_runtime().post(&path, body).await
}

/// The approval tool asked for `urls` (a fixed reason, no packages).
pub async fn ask_urls(app: &TestApp, turn_id: &str, urls: &[&str]) -> Answer {
    let reason = "the analysis needs the data";
    ask(
        app,
        turn_id,
        json!({"reason": reason, "urls": urls, "packages": []}),
    )
    .await
}

/// The approval tool asked for `urls` answers `ask`, and its draft is registered: the card.
pub async fn asked(app: &TestApp, turn_id: &str, urls: &[&str]) -> Registered {
    let (status, body) = ask_urls(app, turn_id, urls).await;
    let outcome = (status, body["outcome"].as_str());
    assert_eq!(outcome, (StatusCode::OK, Some("ask")), "{body}");
    register(app, body["draft_id"].as_str().unwrap(), json!({})).await
}

/// The lease of [`short_lease`]: short enough for a test to wait one out.
const SHORT_LEASE: std::time::Duration = std::time::Duration::from_millis(300);

/// Settings whose lease lapses in 300 ms, so a test can wait one out ([`lapse_lease`]).
pub fn short_lease() -> egressgate_control::Settings {
    egressgate_control::Settings {
        lease: SHORT_LEASE,
        ..egressgate_control::Settings::default()
    }
}

/// Waits until a claim taken now under [`short_lease`] has lapsed (the lease and 100 ms).
pub async fn lapse_lease() {
    tokio::time::sleep(SHORT_LEASE + std::time::Duration::from_millis(100)).await;
}

/// A registered card: its interrupt id and resume secret, plus the registration body.
pub struct Registered {
    /// Interrupt id.
    pub id: String,
    /// Resume secret.
    pub secret: String,
    /// The whole 201 body.
    pub body: Value,
}

/// Opens a turn for (user, chat) and stores a draft card with the given sites and packages.
/// Returns `(turn_id, draft_id)`.
pub async fn draft(
    app: &TestApp,
    user: &str,
    chat: &str,
    sites: &[&str],
    packages: &[&str],
    tool_call_id: Option<&str>,
) -> (String, String) {
    let turn = app.open_turn(user, chat, true).await;
    let draft = draft_in_turn(app, &turn.turn_id, sites, packages, tool_call_id).await;
    (turn.turn_id, draft)
}

/// Stores a draft card in an existing turn; returns the draft id.
pub async fn draft_in_turn(
    app: &TestApp,
    turn_id: &str,
    sites: &[&str],
    packages: &[&str],
    tool_call_id: Option<&str>,
) -> String {
    let turn = app.stored_turn(turn_id).await;
    let card = Card::new(
        sites.iter().map(|s| Host::parse(s).unwrap()).collect(),
        sites
            .iter()
            .map(|s| format!("https://{s}/data.csv"))
            .collect(),
        packages
            .iter()
            .map(|p| PackageSpec::parse(p).unwrap())
            .collect(),
        "the analysis needs the reference data".into(),
    );
    let id = app
        .store
        .create_draft(&turn, &card, tool_call_id, Timestamp::now())
        .await
        .unwrap();
    id.as_str().to_owned()
}

/// `POST /v1/interrupts` with `extra` fields merged into `{"draft_id"}`.
pub async fn register_with(app: &TestApp, draft_id: &str, extra: Value) -> (StatusCode, Value) {
    let mut body = json!({"draft_id": draft_id});
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        body[k] = v;
    }
    app.as_runtime().post("/v1/interrupts", body).await
}

/// Registers a draft, asserting `201`.
pub async fn register(app: &TestApp, draft_id: &str, extra: Value) -> Registered {
    let (status, body) = register_with(app, draft_id, extra).await;
    assert_eq!(status, StatusCode::CREATED, "register: {body}");
    Registered {
        id: body["interrupt"]["id"].as_str().unwrap().to_owned(),
        secret: body["resume_secret"].as_str().unwrap().to_owned(),
        body,
    }
}

/// A fresh turn, draft and registered card in one step.
pub async fn card(
    app: &TestApp,
    user: &str,
    chat: &str,
    sites: &[&str],
    packages: &[&str],
) -> Registered {
    let (_, d) = draft(app, user, chat, sites, packages, None).await;
    register(app, &d, json!({"snapshot": "c25hcHNob3Q="})).await
}

/// A card for `files.example.com` in a fresh turn of (user, chat): the common case.
pub async fn files_card(app: &TestApp, user: &str, chat: &str) -> Registered {
    card(app, user, chat, &["files.example.com"], &[]).await
}

/// The person clicks Approve (`{"approved": true}`): the answer, unchecked.
pub async fn click(app: &TestApp, r: &Registered) -> Answer {
    resume(app, &r.id, &r.secret, json!({"approved": true})).await
}

/// `POST /v1/interrupts/{id}/resume` with `body` as is, without a bearer token.
pub async fn resume_as(app: &TestApp, r: &Registered, body: Value) -> Answer {
    let path = format!("/v1/interrupts/{}/resume", r.id);
    app.anonymous().post(&path, body).await
}

/// `POST /v1/interrupts/{id}/{action}` (`heartbeat`, `complete`) with the claim id alone.
pub async fn claim(app: &TestApp, r: &Registered, action: &str, claim_id: &str) -> Answer {
    claim_call(app, &r.id, action, json!({"claim_id": claim_id})).await
}

/// The resumed run finishes with `answer`: `complete` with the claim.
pub async fn complete_with(app: &TestApp, r: &Registered, claim: &str, answer: &Value) -> Answer {
    let body = json!({"claim_id": claim, "answer": answer});
    claim_call(app, &r.id, "complete", body).await
}

/// The resume body for one entry.
pub fn resume_body(id: &str, secret: &str, status: &str, payload: Value) -> Value {
    json!({"secret": secret, "resume": [{"interruptId": id, "status": status, "payload": payload}]})
}

/// `POST /v1/interrupts/{id}/resume` without a bearer token.
pub async fn resume(app: &TestApp, id: &str, secret: &str, payload: Value) -> (StatusCode, Value) {
    let path = format!("/v1/interrupts/{id}/resume");
    app.anonymous()
        .post(&path, resume_body(id, secret, "resolved", payload))
        .await
}

/// The person dismisses the card (`cancelled`, no payload): the resume's status.
pub async fn dismiss(app: &TestApp, r: &Registered) -> StatusCode {
    let resume =
        json!({"secret": r.secret, "resume": [{"interruptId": r.id, "status": "cancelled"}]});
    resume_as(app, r, resume).await.0
}

/// Approves a card, asserting the claim; returns the claim id.
pub async fn approve(app: &TestApp, r: &Registered) -> String {
    let (status, body) = resume(app, &r.id, &r.secret, json!({"approved": true})).await;
    assert_eq!(status, StatusCode::OK, "resume: {body}");
    assert_eq!(body["state"], "claimed");
    body["claim"]["claim_id"].as_str().unwrap().to_owned()
}

/// A card for `sites` in a fresh turn of (user, chat), registered and approved, its run
/// holding the claim: (turn id, the card, claim id), for rows that go on in the same turn.
pub async fn claimed(
    app: &TestApp,
    user: &str,
    chat: &str,
    sites: &[&str],
) -> (String, Registered, String) {
    let (turn, d) = draft(app, user, chat, sites, &[], None).await;
    let r = register(app, &d, json!({})).await;
    let claim = approve(app, &r).await;
    (turn, r, claim)
}

/// A card for `sites` in a fresh turn of (user, chat), approved and its run completed: the
/// card, whose approval rows now stand on their own.
pub async fn completed(app: &TestApp, user: &str, chat: &str, sites: &[&str]) -> Registered {
    let r = card(app, user, chat, sites, &[]).await;
    let claim_id = approve(app, &r).await;
    claim(app, &r, "complete", &claim_id).await;
    r
}

/// `POST /v1/interrupts/{id}/{action}` with `{"claim_id", ...}`.
pub async fn claim_call(app: &TestApp, id: &str, action: &str, body: Value) -> (StatusCode, Value) {
    app.anonymous()
        .post(&format!("/v1/interrupts/{id}/{action}"), body)
        .await
}

/// Makes every audit insert fail, on either backend (fault injection).
pub async fn break_audit(app: &TestApp) {
    if app.db_url.starts_with("postgres") {
        app.exec_sql(
            "CREATE FUNCTION audit_fail() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'injected'; END $$ LANGUAGE plpgsql",
        )
        .await;
        app.exec_sql("CREATE TRIGGER audit_fail BEFORE INSERT ON audit FOR EACH ROW EXECUTE FUNCTION audit_fail()").await;
    } else {
        app.exec_sql("CREATE TRIGGER audit_fail BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'injected'); END").await;
    }
}
