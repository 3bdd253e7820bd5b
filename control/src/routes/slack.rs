//! `POST /v1/slack/interactions`: a click on a card's Slack message. Nothing changes unless
//! the request is Slack's (signature and timestamp, [`verify`]), seen for the first time
//! (across processes), from a Slack user the administrator mapped to the card's own user who
//! may approve; then the card is resumed exactly as the card page resumes it (a handoff claim
//! the runtime takes over), and the message is replaced through the click's `response_url`
//! with the outcome. A second click says what already happened.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::{Extension, Json};
use egressgate_store::card::Card;
use egressgate_store::db::interrupts::{Decision, Outcome, Pointer};
use egressgate_store::db::resume::Decider;
use egressgate_store::{Timestamp, UserId};
use serde_json::{Value, json};
use sha2::Digest as _;

use super::openapi::schemas;
use super::pointer;
use super::resume::{Answerer, answer};
use crate::decision::ResumeStatus;
use crate::error::ApiError;
use crate::notify::slack::blocks::{self, Choice};
use crate::notify::slack::{self as slack_notify, verify};
use crate::resume_guard::ResumeGuard;
use crate::state::AppState;

/// How long accepted signatures are remembered: past the timestamp window either way.
const REPLAY_KEEP: std::time::Duration =
    std::time::Duration::from_secs(2 * verify::MAX_SKEW_SECS.unsigned_abs() + 60);

/// The parts of Slack's `block_actions` payload a click needs.
struct Click {
    slack_user: String,
    choice: Choice,
    interrupt_id: String,
    response_url: Option<String>,
}

impl Click {
    /// `None` for any other interaction (another type, an action that is not ours).
    fn read(p: &Value) -> Option<Self> {
        if p["type"] != "block_actions" {
            return None;
        }
        let action = p["actions"].as_array()?.first()?;
        Some(Self {
            slack_user: p["user"]["id"].as_str()?.to_owned(),
            choice: Choice::parse(action["action_id"].as_str()?)?,
            interrupt_id: action["value"].as_str()?.to_owned(),
            response_url: p["response_url"].as_str().map(str::to_owned),
        })
    }
}

/// What became of a verified click: the answer's `outcome` and the words the clicker sees.
struct Said {
    outcome: &'static str,
    text: String,
    /// The message that replaces the card, when the click answered it.
    replace: Option<Value>,
}

impl Said {
    fn only(outcome: &'static str, text: impl Into<String>) -> Self {
        Self {
            outcome,
            text: text.into(),
            replace: None,
        }
    }
}

#[utoipa::path(post, path = "/v1/slack/interactions", tag = "approval",
    request_body(content = String, content_type = "application/x-www-form-urlencoded", description = "Slack's interaction request: `payload` (JSON), signed with `X-Slack-Signature` over `X-Slack-Request-Timestamp` and the raw body."),
    responses((status = 200, description = "A verified request: `{\"outcome\", \"text\"}`. `outcome` is `approved`, `denied`, `already_answered`, `unknown_user`, `other_user`, `cannot_approve`, `not_found`, `expired`, `in_progress`, `invalid`, `busy` or `ignored`; only `approved` and `denied` changed anything. The clicker is answered through the payload's `response_url`.", body = schemas::SlackAnswer),
        (status = 400, description = "`INVALID_BODY`: no `payload` form field holding JSON.", body = schemas::ErrorBody),
        (status = 401, description = "`SLACK_UNVERIFIED`: a missing or wrong signature, or a timestamp more than five minutes from now.", body = schemas::ErrorBody),
        (status = 404, description = "`SLACK_NOT_CONFIGURED`: no `--slack-signing-secret`, so no request can be verified.", body = schemas::ErrorBody),
        (status = 409, description = "`SLACK_REPLAYED`: this exact signed request was already accepted.", body = schemas::ErrorBody)))]
/// `POST /v1/slack/interactions`.
pub(crate) async fn interactions(
    axum::extract::State(state): axum::extract::State<AppState>,
    Extension(guard): Extension<Arc<ResumeGuard>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let Some(secret) = &state.settings.slack.signing_secret else {
        return Err(ApiError::not_found(
            "SLACK_NOT_CONFIGURED",
            "Slack is not configured on this gate (--slack-signing-secret)",
        ));
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let now = Timestamp::now();
    let signature = header("x-slack-signature");
    verify::check(
        secret.expose(),
        header("x-slack-request-timestamp"),
        signature,
        &body,
        now.millis() / 1000,
    )
    .map_err(|e| ApiError::new(StatusCode::UNAUTHORIZED, "SLACK_UNVERIFIED", e.to_string()))?;
    let seen = hex::encode(sha2::Sha256::digest(signature.unwrap_or_default()));
    if !state
        .store
        .slack_request_first_seen(&seen, now, REPLAY_KEEP)
        .await?
    {
        return Err(ApiError::conflict(
            "SLACK_REPLAYED",
            "this request was already received; nothing was changed",
        ));
    }
    let payload: Value = url::form_urlencoded::parse(&body)
        .find(|(k, _)| k == "payload")
        .and_then(|(_, v)| serde_json::from_str(&v).ok())
        .ok_or_else(|| ApiError::invalid_body("expected a form field `payload` holding JSON"))?;
    let Some(click) = Click::read(&payload) else {
        return Ok(Json(json!({"outcome": "ignored", "text": ""})));
    };
    let said = judge(&state, &guard, &click, now).await?;
    tracing::info!(slack_user = %click.slack_user, interrupt_id = %click.interrupt_id,
        outcome = said.outcome, "slack click");
    if let (Some(url), Some(egress)) = (&click.response_url, &state.settings.webhooks.egress) {
        let message = said
            .replace
            .clone()
            .unwrap_or_else(|| slack_notify::ephemeral(&said.text));
        let (egress, url) = (egress.clone(), url.clone());
        let suffixes = state.settings.internal_suffixes.clone();
        let timeout = state.settings.webhooks.timeout;
        tokio::spawn(async move {
            slack_notify::respond(egress.as_ref(), &suffixes, &url, message, timeout).await;
        });
    }
    Ok(Json(json!({"outcome": said.outcome, "text": said.text})))
}

/// Maps the click to its user and card, checks both, and resumes.
async fn judge(
    state: &AppState,
    guard: &ResumeGuard,
    click: &Click,
    now: Timestamp,
) -> Result<Said, ApiError> {
    let Some(user) = state.store.user_by_slack_id(&click.slack_user).await? else {
        return Ok(Said::only(
            "unknown_user",
            "Your Slack account is not linked to an egressgate user, so nothing was changed. \
             Ask an administrator to set your slack_user_id.",
        ));
    };
    let p = match pointer::find(state, &click.interrupt_id, now).await {
        Ok(p) => p,
        Err(_) => {
            return Ok(Said::only(
                "not_found",
                "This approval request no longer exists.",
            ));
        }
    };
    if p.user != user {
        return Ok(Said::only(
            "other_user",
            "This request is another person's to answer; nothing was changed.",
        ));
    }
    let may = state
        .store
        .can_approve(&user)
        .await?
        .unwrap_or(state.settings.default_can_approve);
    if !may {
        return Ok(Said::only(
            "cannot_approve",
            "You may not approve requests; nothing was changed.",
        ));
    }
    resume(state, guard, click, &user, p, now).await
}

async fn resume(
    state: &AppState,
    guard: &ResumeGuard,
    click: &Click,
    user: &UserId,
    p: Pointer,
    now: Timestamp,
) -> Result<Said, ApiError> {
    let earlier = p.decision.clone();
    let card = p.card.clone();
    let who = Answerer {
        guard,
        decider: Decider::Person(user),
        runtime: false,
    };
    let payload = click.choice.payload();
    let status = ResumeStatus::of(Some(&json!("resolved")));
    let done = answer(state, p, status, Some(&payload), who, now).await;
    let already = |d: Option<Decision>| match d {
        Some(d) => Said::only(
            "already_answered",
            format!("This request was already answered: {}.", outcome_word(&d)),
        ),
        None => Said::only(
            "in_progress",
            "This request is being answered right now; nothing was changed.",
        ),
    };
    let v = match done {
        Ok(v) if v["replayed"] == true => return Ok(already(earlier)),
        Ok(v) => v,
        Err(e) => {
            return Ok(match e.code {
                "RESUME_IN_PROGRESS" | "DECISION_CONFLICT" => already(earlier),
                "INTERRUPT_EXPIRED" => {
                    Said::only("expired", format!("Nothing was changed: {}.", e.message))
                }
                "BUSY" => Said::only("busy", "Too many answers in progress; try again shortly."),
                "INVALID_DECISION" => Said::only("invalid", e.message),
                _ => return Err(e),
            });
        }
    };
    let decision: Decision = serde_json::from_value(v["decision"].clone())
        .map_err(|_| ApiError::invalid_body("internal: unreadable decision"))?;
    Ok(answered(&card, &decision, &click.slack_user))
}

fn answered(card: &Card, decision: &Decision, slack_user: &str) -> Said {
    let outcome = match decision.outcome {
        Outcome::Approved => "approved",
        Outcome::Declined | Outcome::Cancelled => "denied",
    };
    let note = "The agent continues once its runtime picks the answer up.";
    Said {
        outcome,
        text: format!("Request {}.", outcome_word(decision)),
        replace: Some(blocks::answered(card, decision, slack_user, note)),
    }
}

fn outcome_word(d: &Decision) -> &'static str {
    match d.outcome {
        Outcome::Approved => "approved",
        Outcome::Declined | Outcome::Cancelled => "denied",
    }
}
