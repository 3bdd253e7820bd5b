//! A person's user-scope approvals (a site or package granted to every chat of theirs, where
//! the administrator allows it): list them and revoke one. Authorised like a chat's approvals
//! (a `chats` token and `X-Egressgate-User`); another user's list answers exactly like an
//! empty one, and another user's approval like one that does not exist.

use axum::Json;
use axum::extract::{Path, State};
use egressgate_store::{Timestamp, UserId};
use serde_json::{Value, json};

use super::chats::Revocation;
use super::openapi::schemas;
use super::openapi::shared::MissingUser;
use crate::auth::ChatUser;
use crate::error::{ApiError, found};
use crate::state::AppState;

/// `Some(user)` when the path names the person the header speaks for.
fn same_user(named: &UserId, path: &str) -> bool {
    UserId::parse(path).is_some_and(|u| u == *named)
}

/// `GET /v1/users/{user_id}/approvals`.
#[utoipa::path(get, path = "/v1/users/{user_id}/approvals", tag = "chats", security(("runtime" = [])),
    params(("user_id" = String, Path, min_length = 1, max_length = 200, pattern = "^[!-~]+$", description = "The person (the one the header names)."), ("X-Egressgate-User" = String, Header, min_length = 1, max_length = 200, pattern = "^[!-~]+$", description = "The person the runtime speaks for.")),
    responses((status = 200, description = "The user's live user-scope approvals (they apply to every chat of the user; empty for another user).", body = schemas::Approvals), MissingUser))]
pub(crate) async fn list(
    ChatUser(user): ChatUser,
    State(state): State<AppState>,
    Path(user_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let approvals = if same_user(&user, &user_id) {
        state.store.user_approvals(&user, Timestamp::now()).await?
    } else {
        Vec::new()
    };
    Ok(Json(json!({"approvals": approvals})))
}

/// `DELETE /v1/users/{user_id}/approvals/{kind}/{value}`.
#[utoipa::path(delete, path = "/v1/users/{user_id}/approvals/{kind}/{value}", tag = "chats", security(("runtime" = [])),
    params(("user_id" = String, Path, min_length = 1, max_length = 200, pattern = "^[!-~]+$", description = "The person (the one the header names)."), ("kind" = String, Path, description = "`site` or `package`."), ("value" = String, Path, description = "The host or package name, any spelling."), ("X-Egressgate-User" = String, Header, min_length = 1, max_length = 200, pattern = "^[!-~]+$", description = "The person the runtime speaks for.")),
    responses((status = 200, description = "Revoked in every chat of the user; effective from the next request at the latest.", body = schemas::Revoked), MissingUser,
        (status = 404, description = "`APPROVAL_NOT_FOUND`: no such user-scope approval.", body = schemas::ErrorBody)))]
pub(crate) async fn revoke(
    ChatUser(user): ChatUser,
    State(state): State<AppState>,
    Path((user_id, kind, value)): Path<(String, String, String)>,
) -> Result<Json<Value>, ApiError> {
    let not_found = || ApiError::not_found("APPROVAL_NOT_FOUND", "no such user-scope approval");
    if !same_user(&user, &user_id) {
        return Err(not_found());
    }
    let r = Revocation::parse(&kind, &value, not_found)?;
    let revoked = state
        .store
        .revoke_user_approval(&user, r.kind, &r.value, Timestamp::now())
        .await?;
    found(revoked, not_found)?;
    Ok(r.answer())
}
