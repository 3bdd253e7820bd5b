//! The two tools' logic over the control API: every decision is the REST handlers' (the
//! approval tool's fixed answer order, registration, resume exactly once); this file only
//! calls them in order and turns their answers into what a model can act on.

use axum::http::Method;
use serde::Deserialize;
use serde_json::{Value, json};

use super::backend::{Answer, Backend, BackendError};

/// The approval tool's arguments, exactly the fields of `/v1/tools/approval.json`. The turn
/// is not among them: it is bound by how the server was started or by the HTTP header.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalArgs {
    reason: String,
    #[serde(default)]
    urls: Vec<String>,
    #[serde(default)]
    packages: Vec<String>,
}

/// What the first step produced.
pub enum Step {
    /// The tool's final answer (an outcome that needs no person, or an error to show).
    Done(ToolAnswer),
    /// A card was registered: a person must answer it.
    Ask(Registered),
}

/// A tool result: JSON for the model, and whether it is an error result.
#[derive(Debug, Clone)]
pub struct ToolAnswer {
    /// The JSON shown to the model (also its text content).
    pub body: Value,
    /// `isError` of the result.
    pub is_error: bool,
}

impl ToolAnswer {
    fn ok(body: Value) -> Self {
        Self {
            body,
            is_error: false,
        }
    }

    fn error(body: Value) -> Self {
        Self {
            body,
            is_error: true,
        }
    }

    /// The API could not be reached: an error result, never a guess.
    pub fn unreachable(e: &BackendError) -> Self {
        Self::error(
            json!({"error": {"code": "CONTROL_UNREACHABLE", "message": format!("{e}; try again")}}),
        )
    }
}

/// A registered card: what the person is asked, and its secret (never shown to the model).
#[derive(Debug, Clone)]
pub struct Registered {
    /// The interrupt id.
    pub interrupt_id: String,
    /// The AG-UI interrupt object.
    pub interrupt: Value,
    /// The card's question, in words.
    pub message: String,
    /// The resume secret.
    pub secret: String,
    /// When the card stops being answerable (RFC 3339).
    pub expires_at: String,
}

/// How the person answered, as the protocol reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersonSaid {
    /// Approve.
    Approve,
    /// Decline.
    Decline,
    /// Dismissed without answering.
    Cancel,
}

/// An API error passed through to the model as an error result.
fn api_error(a: Answer) -> ToolAnswer {
    ToolAnswer::error(a.body)
}

/// Calls the API and expects `want`: the answer's body, or the tool's error result (the API's
/// own error passed through, or the API could not be reached).
async fn expect(
    backend: &Backend,
    method: Method,
    path: &str,
    body: Option<&Value>,
    want: u16,
) -> Result<Value, ToolAnswer> {
    match backend.call(method, path, body).await {
        Ok(a) if a.status == want => Ok(a.body),
        Ok(a) => Err(api_error(a)),
        Err(e) => Err(ToolAnswer::unreachable(&e)),
    }
}

/// `egress_refusals`: what the proxy refused this turn.
pub async fn refusals(backend: &Backend, turn: &str) -> ToolAnswer {
    let path = format!("/v1/turns/{turn}/refusals");
    match expect(backend, Method::GET, &path, None, 200).await {
        Ok(mut body) => {
            let approvable = body["refusals"]
                .as_array()
                .is_some_and(|r| r.iter().any(|x| x["approvable"] == true));
            if let Some(obj) = body.as_object_mut() {
                obj.insert(
                    "next_step".into(),
                    json!(if approvable {
                        "call request_egress_approval for the approvable hosts; do not try to get around the proxy"
                    } else {
                        "nothing here can be approved by a person; continue without it and say so"
                    }),
                );
            }
            ToolAnswer::ok(body)
        }
        Err(answer) => answer,
    }
}

/// The first call of the approval tool: the server's fixed answer order, then (on `ask`)
/// the card's registration.
pub async fn request(backend: &Backend, turn: &str, args: Value) -> Step {
    ask(backend, turn, args).await.unwrap_or_else(Step::Done)
}

/// [`request`], with any answer that ends the tool call as the error.
async fn ask(backend: &Backend, turn: &str, args: Value) -> Result<Step, ToolAnswer> {
    let args: ApprovalArgs = serde_json::from_value(args).map_err(|e| {
        ToolAnswer::error(json!({"error": {
            "code": "INVALID_BODY",
            "message": format!("invalid arguments: {e}; give reason, and optionally urls and packages")
        }}))
    })?;
    let body = json!({"reason": args.reason, "urls": args.urls, "packages": args.packages});
    let path = format!("/v1/turns/{turn}/approval-requests");
    let first = expect(backend, Method::POST, &path, Some(&body), 200).await?;
    if first["outcome"] != "ask" {
        return Ok(Step::Done(ToolAnswer::ok(first)));
    }
    let draft = json!({"draft_id": first["draft_id"]});
    let reg = expect(backend, Method::POST, "/v1/interrupts", Some(&draft), 201).await?;
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    Ok(Step::Ask(Registered {
        interrupt_id: text(&reg["interrupt"]["id"]),
        message: text(&reg["interrupt"]["message"]),
        expires_at: text(&reg["interrupt"]["expiresAt"]),
        secret: text(&reg["resume_secret"]),
        interrupt: reg["interrupt"].clone(),
    }))
}

/// The model's answer while a person has not answered (no way to ask through the protocol,
/// or the answer is not in yet): the interrupt, so the runtime can pause on it.
pub fn waiting(card: &Registered) -> ToolAnswer {
    ToolAnswer::ok(json!({
        "outcome": "pending",
        "code": "INTERRUPT_PENDING",
        "interrupt_id": card.interrupt_id,
        "interrupt": card.interrupt,
        "message": "a person must answer this approval request; stop here and wait for the answer, do not ask again",
    }))
}

/// The model's answer for a decision.
fn decided(interrupt_id: &str, decision: &Value, replayed: bool) -> Value {
    let outcome = decision["outcome"].as_str().unwrap_or("declined");
    let message = match outcome {
        "approved" => "approved: run the step again; the proxy allows it from the next request",
        "cancelled" => "nobody answered the request; continue without that data and say so",
        _ => {
            "the person declined; continue without that data and say so, and do not ask again in this turn"
        }
    };
    let mut v = json!({
        "outcome": outcome,
        "interrupt_id": interrupt_id,
        "sites": decision["sites"],
        "packages": decision["packages"],
        "message": message,
    });
    if replayed && let Some(o) = v.as_object_mut() {
        o.insert("replayed".into(), json!(true));
    }
    v
}

/// Answers the card through the resume endpoint (which claims at most once and replays a
/// done card), then completes the claim with the tool's answer so a replay returns it.
pub async fn answer(
    backend: &Backend,
    interrupt_id: &str,
    secret: &str,
    said: PersonSaid,
) -> ToolAnswer {
    let entry = match said {
        PersonSaid::Approve => {
            json!({"interruptId": interrupt_id, "status": "resolved", "payload": {"approved": true}})
        }
        PersonSaid::Decline => {
            json!({"interruptId": interrupt_id, "status": "resolved", "payload": {"approved": false}})
        }
        PersonSaid::Cancel => json!({"interruptId": interrupt_id, "status": "cancelled"}),
    };
    let body = json!({"secret": secret, "resume": [entry]});
    let a = match backend
        .call(
            Method::POST,
            &format!("/v1/interrupts/{interrupt_id}/resume"),
            Some(&body),
        )
        .await
    {
        Ok(a) => a,
        Err(e) => return ToolAnswer::unreachable(&e),
    };
    match (a.status, a.body["state"].as_str()) {
        (200, Some("done")) => {
            let mut answer = a.body["answer"].clone();
            if !answer.is_object() {
                answer = decided(interrupt_id, &a.body["decision"], false);
            }
            if let Some(o) = answer.as_object_mut() {
                o.insert("replayed".into(), json!(true));
            }
            ToolAnswer::ok(answer)
        }
        (200, Some("claimed")) => {
            let result = decided(interrupt_id, &a.body["decision"], false);
            let done = backend
                .call(
                    Method::POST,
                    &format!("/v1/interrupts/{interrupt_id}/complete"),
                    Some(&json!({"claim_id": a.body["claim"]["claim_id"], "answer": result})),
                )
                .await;
            if let Ok(d) = &done
                && d.status != 200
            {
                tracing::warn!(
                    status = d.status,
                    interrupt_id,
                    "completing the claim failed"
                );
            }
            ToolAnswer::ok(result)
        }
        (409, _) if a.body["error"]["code"] == "RESUME_IN_PROGRESS" => ToolAnswer::ok(json!({
            "outcome": "pending",
            "code": "RESUME_IN_PROGRESS",
            "interrupt_id": interrupt_id,
            "message": "the answer is being applied; wait and call again",
        })),
        _ => api_error(a),
    }
}

/// After a person answered on the card page (URL mode): the stored outcome, never
/// re-merged. A card nobody answered is cancelled, so the chat is not left with an open one.
pub async fn after_page(backend: &Backend, card: &Registered, person_went: bool) -> ToolAnswer {
    let a = match backend
        .call(
            Method::GET,
            &format!("/v1/interrupts/{}/outcome", card.interrupt_id),
            None,
        )
        .await
    {
        Ok(a) if a.status == 200 => a,
        Ok(a) => return api_error(a),
        Err(e) => return ToolAnswer::unreachable(&e),
    };
    match a.body["state"].as_str() {
        Some("claimed" | "done") => {
            ToolAnswer::ok(decided(&card.interrupt_id, &a.body["decision"], false))
        }
        Some("pending") if person_went => waiting(card),
        Some("pending") => {
            answer(
                backend,
                &card.interrupt_id,
                &card.secret,
                PersonSaid::Cancel,
            )
            .await
        }
        _ => ToolAnswer::ok(json!({
            "outcome": "expired",
            "interrupt_id": card.interrupt_id,
            "message": "the approval request expired; continue without that data and say so",
        })),
    }
}
