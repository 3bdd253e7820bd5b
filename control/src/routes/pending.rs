//! `GET /v1/users/{user_id}/interrupts?state=pending`: a user's open cards across chats, so a
//! runtime can show a badge and re-render after a reload. No secrets: a runtime that renders
//! one reissues it (`POST /v1/chats/{chat_id}/interrupt/reissue`), per the rotation rule.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use egressgate_store::card::Card;
use egressgate_store::{Timestamp, UserId};
use serde_json::Value;

use super::interrupts::interrupt_json;
use super::openapi::schemas;
use crate::auth::CardsReadAuth;
use crate::error::ApiError;
use crate::holder::names_another_user;
use crate::state::AppState;
use crate::validate;

/// Most cards one answer lists (one open card per chat, so this is a lot of chats).
const MAX_LISTED: i64 = 500;

/// The query: only `state=pending` is served (the default).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PendingQuery {
    #[serde(default)]
    state: Option<String>,
}

/// One open card.
#[derive(serde::Serialize)]
pub(crate) struct PendingCard {
    interrupt_id: String,
    chat_id: String,
    turn_id: String,
    message: String,
    card: Card,
    created_at: Timestamp,
    expires_at: Timestamp,
    /// The AG-UI interrupt, for a runtime that re-renders it.
    interrupt: Value,
}

/// The answer.
#[derive(serde::Serialize)]
pub(crate) struct PendingList {
    user_id: String,
    interrupts: Vec<PendingCard>,
}

#[utoipa::path(get, path = "/v1/users/{user_id}/interrupts", tag = "approval", security(("runtime" = [])),
    params(("user_id" = String, Path, description = "The person."), ("state" = Option<String>, Query, description = "Only `pending` (the default)."),
        ("X-Egressgate-User" = Option<String>, Header, description = "The person the runtime speaks for, if it says: naming another user than the path lists nothing, as for a user without cards.")),
    responses((status = 200, description = "The user's open cards across chats, without secrets: `{\"user_id\", \"interrupts\": [{\"interrupt_id\", \"chat_id\", \"turn_id\", \"message\", \"card\", \"created_at\", \"expires_at\", \"interrupt\"}]}`.", body = schemas::PendingCards),
        (status = 422, description = "`INVALID_INPUT`: a malformed user id or a state other than pending.", body = schemas::ErrorBody)))]
/// `GET /v1/users/{user_id}/interrupts`.
pub(crate) async fn list(
    _: CardsReadAuth,
    State(state): State<AppState>,
    Path(user): Path<String>,
    headers: HeaderMap,
    query: Result<Query<PendingQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<PendingList>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::invalid_input(format!("bad query: {e}")))?;
    if q.state.as_deref().is_some_and(|s| s != "pending") {
        return Err(ApiError::invalid_input(
            "state: only `pending` is listed (answered cards are read by id)",
        ));
    }
    let user = validate::user_id("user_id", &user)?;
    // A runtime that names the person (`X-Egressgate-User`) sees only that person's cards:
    // another user's list is answered as the empty list of a user without cards.
    let interrupts = if names_another_user(&headers, &user) {
        Vec::new()
    } else {
        pending_of(&state, &user).await?
    };
    Ok(Json(PendingList {
        user_id: user.as_str().to_owned(),
        interrupts,
    }))
}

/// `user`'s open cards across chats, newest last: what the runtime's list and the person's
/// inbox both show.
pub(crate) async fn pending_of(
    state: &AppState,
    user: &UserId,
) -> Result<Vec<PendingCard>, ApiError> {
    let rows = state
        .store
        .pending_interrupts(user, Timestamp::now(), MAX_LISTED)
        .await?;
    Ok(rows
        .into_iter()
        .map(|p| PendingCard {
            interrupt_id: p.id.as_str().to_owned(),
            chat_id: p.chat.as_str().to_owned(),
            turn_id: p.turn_id.as_str().to_owned(),
            message: p.card.message(),
            interrupt: interrupt_json(&p),
            created_at: p.created_at,
            expires_at: p.expires_at,
            card: p.card,
        })
        .collect())
}
