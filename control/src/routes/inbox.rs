//! Finding the card: the runtime asks for a person's inbox link (`POST
//! /v1/users/{user_id}/inbox-link`), and the inbox page, holding the link's secret, reads the
//! person's pending cards (`POST /v1/inbox/cards`) and follows their events (`POST
//! /v1/inbox/events`). POST, so the secret travels in a body and never in a URL or a log.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse as _;
use axum::response::Response;
use egressgate_store::Timestamp;
use serde_json::{Value, json};

use super::events::{self, Follow};
use super::openapi::schemas;
use super::pending::pending_of;
use crate::auth::ApprovalsAuth;
use crate::body::StrictJson;
use crate::credentials::guard::Gate;
use crate::error::ApiError;
use crate::holder::names_another_user;
use crate::state::AppState;
use crate::validate;

fn user_not_found() -> ApiError {
    ApiError::not_found(
        "USER_NOT_FOUND",
        "no such user: no turn was ever opened for them and no administrator set them",
    )
}

#[utoipa::path(post, path = "/v1/users/{user_id}/inbox-link", tag = "approval", security(("runtime" = [])),
    params(("user_id" = String, Path, description = "The person."),
        ("X-Egressgate-User" = Option<String>, Header, description = "The person the runtime speaks for, if it says: naming another user than the path is answered as for an unknown user.")),
    responses((status = 201, description = "`{\"url\", \"expires_at\"}`: the person's inbox page with a secret in the fragment, shown once. `url` starts with `--control-public-url`; without it, it is the path alone (`/ui/inbox#…`) for the runtime to put its own origin before. The link opens this user's pending cards (and answering them) until `expires_at` (`--inbox-link-ttl`).", body = schemas::InboxLink),
        (status = 404, description = "`USER_NOT_FOUND`: no turn was ever opened for the user and no administrator set them (or the runtime names another user).", body = schemas::ErrorBody),
        (status = 422, description = "`INVALID_INPUT`: a malformed user id.", body = schemas::ErrorBody)))]
/// `POST /v1/users/{user_id}/inbox-link`.
pub(crate) async fn inbox_link(
    _: ApprovalsAuth,
    State(state): State<AppState>,
    Path(user): Path<String>,
    headers: HeaderMap,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let user = validate::user_id("user_id", &user)?;
    if names_another_user(&headers, &user) || !state.store.user_known(&user).await? {
        return Err(user_not_found());
    }
    let issued = crate::inbox::issue(&state, &user, Timestamp::now()).await?;
    let base = state.settings.link_base.as_deref().unwrap_or("");
    let url = crate::links::inbox(base, issued.secret.expose());
    Ok((
        StatusCode::CREATED,
        Json(json!({"url": url, "expires_at": issued.expires_at})),
    ))
}

/// The inbox page's request: only the secret from the link's fragment.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct InboxBody {
    secret: String,
}

#[utoipa::path(post, path = "/v1/inbox/cards", tag = "approval", request_body = InboxBody,
    responses((status = 200, description = "The link's user's pending cards across chats: `{\"user_id\", \"expires_at\" (the link's), \"interrupts\": [...]}`, each entry as `GET /v1/users/{user_id}/interrupts` lists it. A card page opened with the same secret (`/ui/cards/{id}#secret=…`) shows and answers that card.", body = schemas::InboxCards),
        (status = 401, description = "`UNAUTHORIZED`: not a valid inbox link (unknown, or a wrong secret).", body = schemas::ErrorBody),
        (status = 410, description = "`INBOX_LINK_EXPIRED`: the link expired; the runtime can ask for a new one.", body = schemas::ErrorBody)))]
/// `POST /v1/inbox/cards`.
pub(crate) async fn inbox_cards(
    State(state): State<AppState>,
    gate: Gate,
    StrictJson(body): StrictJson<InboxBody>,
) -> Result<Json<Value>, ApiError> {
    let link = crate::inbox::holder(&state, &gate, &body.secret, Timestamp::now()).await?;
    let interrupts = pending_of(&state, &link.user).await?;
    Ok(Json(json!({
        "user_id": link.user,
        "expires_at": link.expires_at,
        "interrupts": interrupts,
    })))
}

#[utoipa::path(post, path = "/v1/inbox/events", tag = "approval", request_body = InboxBody,
    params(("Last-Event-ID" = Option<String>, Header, description = "Resume after this event id.")),
    responses((status = 200, description = "Server-sent events of every chat of the link's user, as `GET /v1/chats/{chat_id}/events` sends them (`approval.requested`, `approval.resolved`, ...); the stream ends when the link expires.", content_type = "text/event-stream", body = String),
        (status = 401, description = "`UNAUTHORIZED`: not a valid inbox link (unknown, or a wrong secret).", body = schemas::ErrorBody),
        (status = 410, description = "`INBOX_LINK_EXPIRED`: the link expired.", body = schemas::ErrorBody),
        (status = 422, description = "`INVALID_INPUT`: a malformed Last-Event-ID.", body = schemas::ErrorBody)))]
/// `POST /v1/inbox/events`.
pub(crate) async fn inbox_events(
    State(state): State<AppState>,
    gate: Gate,
    headers: HeaderMap,
    StrictJson(body): StrictJson<InboxBody>,
) -> Result<Response, ApiError> {
    let link = crate::inbox::holder(&state, &gate, &body.secret, Timestamp::now()).await?;
    let follow = Follow::User(link.user);
    let sse = events::open(state.store, follow, &headers, Some(link.expires_at)).await?;
    Ok(sse.into_response())
}
