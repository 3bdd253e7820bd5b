//! The approval loop as a runtime drives it: a turn with extra fields, waiting for a refusal
//! row, asking (approval tool then interrupt), resuming and approving a card.

use std::time::Duration;

use super::{Api, RUNTIME, Resp, Turn};

/// Opens a turn with extra fields in the body (e.g. `ttl_seconds`).
pub async fn turn_with(api: &Api, body: serde_json::Value) -> Turn {
    let r = api.post("/v1/turns", RUNTIME, body).await;
    assert_eq!(r.status, 201, "open turn: {}", r.text());
    let url = url::Url::parse(r.json()["proxy_url"].as_str().unwrap()).unwrap();
    Turn {
        id: url.username().to_owned(),
        credential: format!("{}:{}", url.username(), url.password().unwrap()),
    }
}

/// Polls the turn's refusal record until a row with `reason` appears (bounded by `secs`).
pub async fn wait_for_refusal(
    api: &Api,
    turn: &Turn,
    reason: &str,
    secs: u64,
) -> Option<serde_json::Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let rec = api.refusals(turn).await;
        if let Some(row) = rec["refusals"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["reason"] == reason))
        {
            return Some(row.clone());
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Asserts the turn's refusal record gets a row with `reason` (bounded, 5 s), showing the
/// record otherwise; returns that row.
pub async fn assert_recorded(api: &Api, turn: &Turn, reason: &str) -> serde_json::Value {
    match wait_for_refusal(api, turn, reason, 5).await {
        Some(row) => row,
        None => panic!("no {reason} recorded: {}", api.refusals(turn).await),
    }
}

/// Runs the approval tool for `urls` (plus what the turn was refused) and registers the
/// interrupt; returns (interrupt id, resume secret).
pub async fn ask(api: &Api, turn: &Turn, urls: &[&str]) -> (String, String) {
    let body = serde_json::json!({"reason": "the analysis needs the data file", "urls": urls});
    let (_, id, secret) = ask_with(api, turn, body).await;
    (id, secret)
}

/// Asks for `urls` (plus what the turn was refused) and answers the card at once with
/// `payload` (a scope, an access level, a cap, a path): the resume's answer, then the card's
/// interrupt id and resume secret for a second answer. One place for the rows that check
/// what a person's narrowed decision does, so they all ask the same way.
pub async fn ask_and_answer(
    api: &Api,
    turn: &Turn,
    urls: &[&str],
    payload: serde_json::Value,
) -> (Resp, String, String) {
    let (id, secret) = ask(api, turn, urls).await;
    (answer_card(api, &id, &secret, payload).await, id, secret)
}

/// Runs the approval tool with `body`, expecting a card, and registers the interrupt;
/// returns (the card, interrupt id, resume secret).
pub async fn ask_with(
    api: &Api,
    turn: &Turn,
    body: serde_json::Value,
) -> (serde_json::Value, String, String) {
    let r = approval_request(api, turn, body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["outcome"], "ask", "{v}");
    let card = v["card"].clone();
    let r = register(api, serde_json::json!({"draft_id": v["draft_id"]})).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    (
        card,
        v["interrupt"]["id"].as_str().unwrap().to_owned(),
        v["resume_secret"].as_str().unwrap().to_owned(),
    )
}

/// The approval tool: `POST /v1/turns/{turn}/approval-requests` with `body`.
pub async fn approval_request(api: &Api, turn: &Turn, body: serde_json::Value) -> Resp {
    let path = format!("/v1/turns/{}/approval-requests", turn.id);
    api.post(&path, RUNTIME, body).await
}

/// Registers a draft as an interrupt: `POST /v1/interrupts` with `body` (`draft_id`, and
/// `snapshot` or `claim_id` when the row needs them).
pub async fn register(api: &Api, body: serde_json::Value) -> Resp {
    api.post("/v1/interrupts", RUNTIME, body).await
}

/// The person answers card `id` with `payload` (status `resolved`): the resume's answer.
pub async fn answer_card(api: &Api, id: &str, secret: &str, payload: serde_json::Value) -> Resp {
    resume(api, id, secret, "resolved", payload).await
}

/// The person clicks Approve on card `id`: its resume answer, unchecked.
pub async fn click_approve(api: &Api, id: &str, secret: &str) -> Resp {
    let approved = serde_json::json!({"approved": true});
    resume(api, id, secret, "resolved", approved).await
}

/// Resumes interrupt `id` with one decision, with the card's secret.
pub async fn resume(
    api: &Api,
    id: &str,
    secret: &str,
    status: &str,
    payload: serde_json::Value,
) -> Resp {
    api.call(
        "POST",
        &format!("/v1/interrupts/{id}/resume"),
        None,
        None,
        Some(&resume_body(id, secret, status, payload)),
    )
    .await
}

/// The body of a resume with one entry for card `id`.
pub fn resume_body(id: &str, secret: &str, status: &str, payload: serde_json::Value) -> String {
    serde_json::json!({"secret": secret, "resume": [{"interruptId": id, "status": status, "payload": payload}]})
        .to_string()
}

/// Answers card `id` with `{"approved": true}` (which claims it and extends its turn) and
/// asserts the claim.
pub async fn approve_card(api: &Api, id: &str, secret: &str) {
    let r = resume(
        api,
        id,
        secret,
        "resolved",
        serde_json::json!({"approved": true}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["state"], "claimed", "{}", r.text());
}

/// The resumed run finishes: `POST /v1/interrupts/{id}/complete` with its claim (which frees
/// the user's resume slot).
pub async fn complete(api: &Api, id: &str, claim: &serde_json::Value) -> Resp {
    let body = serde_json::json!({"claim_id": claim["claim_id"]}).to_string();
    let path = format!("/v1/interrupts/{id}/complete");
    api.call("POST", &path, None, None, Some(&body)).await
}

/// A person asks for `urls` and approves the card at once (ask, interrupt, resume approved):
/// returns (interrupt id, resume secret).
pub async fn approved(api: &Api, turn: &Turn, urls: &[&str]) -> (String, String) {
    let (id, secret) = ask(api, turn, urls).await;
    approve_card(api, &id, &secret).await;
    (id, secret)
}
