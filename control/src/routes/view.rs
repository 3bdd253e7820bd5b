//! `POST /v1/interrupts/{id}/view`: the card for whoever holds its resume secret — what the
//! card page shows. The secret is checked exactly as resume step 2 does (hashed, constant
//! time, a dummy comparison for unknown ids, one identical 404 for unknown ids, wrong secrets
//! and other users); an expired card is `410 INTERRUPT_EXPIRED`. POST, so the secret travels
//! in a body and never in a URL or an access log.

use axum::Json;
use egressgate_store::Timestamp;
use egressgate_store::card::Card;
use egressgate_store::db::interrupts::{Decision, InterruptState};
use serde_json::Value;

use super::interrupts::interrupt_json;
use super::openapi::schemas;
use super::pointer::CardCall;
use super::resume::{Attempt, expired};
use crate::error::ApiError;

/// The page's request: only the secret from the link's fragment.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ViewBody {
    secret: String,
}

/// What a secret holder may see of a card.
#[derive(serde::Serialize)]
pub(crate) struct CardView {
    /// The card's (interrupt's) id.
    interrupt_id: String,
    /// pending, claimed or done (expired cards answer 410 instead).
    state: InterruptState,
    /// The consequence sentence.
    message: String,
    /// Sites, sample URLs, packages and the agent's reason.
    card: Card,
    /// When the card stops being answerable.
    expires_at: Timestamp,
    /// The decision, once a resume claimed the card.
    decision: Option<Decision>,
    /// The AG-UI interrupt, as the runtime got it.
    interrupt: Value,
    /// How far the page may narrow (or widen) the grant it offers.
    grant_options: GrantOptions,
}

/// What the card page needs to offer only choices a resume would accept: `user` scope where
/// the administrator allows it, `read` and path prefixes only for hosts the proxy inspects.
#[derive(serde::Serialize)]
pub(crate) struct GrantOptions {
    /// `--allow-user-scope`: the person may grant to all their chats.
    user_scope: bool,
    /// The card's sites the proxy inspects (sorted, as on the card).
    inspected_sites: Vec<String>,
}

#[utoipa::path(post, path = "/v1/interrupts/{id}/view", tag = "approval", request_body = ViewBody,
    params(("id" = String, Path, description = "The interrupt (card) id.")),
    responses((status = 200, description = "The card for the holder of its resume secret: `interrupt_id`, `state`, `message`, `card`, `expires_at`, `decision`, `interrupt`, `grant_options`.", body = schemas::CardView),
        (status = 404, description = "`INTERRUPT_NOT_FOUND`: unknown id, wrong secret or another user (identical in all cases).", body = schemas::ErrorBody),
        (status = 410, description = "`INTERRUPT_EXPIRED`: the card can no longer be answered.", body = schemas::ErrorBody),
        (status = 429, description = "`TOO_MANY_ATTEMPTS`: too many failed secrets from this client or on this card; see `Retry-After`.", body = schemas::ErrorBody)))]
/// `POST /v1/interrupts/{id}/view`.
pub(crate) async fn view(call: CardCall<Attempt, ViewBody>) -> Result<Json<CardView>, ApiError> {
    let now = call.now;
    let p = (call.caller)
        .authenticate(&call.state, &call.id, &call.body.secret, now)
        .await?;
    let shown = p.effective_state(now);
    if shown == InterruptState::Expired {
        return Err(expired("it is no longer answerable"));
    }
    let grant_options = GrantOptions {
        user_scope: call.state.settings.allow_user_scope,
        inspected_sites: crate::grants::inspected_sites(&call.state, &p.card.sites).await?,
    };
    Ok(Json(CardView {
        interrupt_id: p.id.as_str().to_owned(),
        state: shown,
        message: p.card.message(),
        interrupt: interrupt_json(&p),
        card: p.card,
        expires_at: p.expires_at,
        decision: p.decision,
        grant_options,
    }))
}
