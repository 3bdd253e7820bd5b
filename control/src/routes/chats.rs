//! A person's control over their chat: list its approvals, revoke one, or hide the chat
//! (which expires its open request and revokes everything). Another user's chat answers
//! exactly like one that does not exist.

use axum::Json;
use axum::extract::{Path, State};
use egressgate_store::db::policy::ApprovalKind;
use egressgate_store::{ChatId, Host, PackageSpec, Timestamp};
use serde_json::{Value, json};

use super::openapi::schemas;
use super::openapi::shared::{ChatParams, MissingUser};
use crate::auth::ChatUser;
use crate::error::{ApiError, found};
use crate::state::AppState;

fn approval_not_found() -> ApiError {
    ApiError::not_found("APPROVAL_NOT_FOUND", "no such approval in this chat")
}

fn chat_not_found() -> ApiError {
    ApiError::not_found("CHAT_NOT_FOUND", "no such chat")
}

/// `GET /v1/chats/{chat_id}/approvals`.
#[utoipa::path(get, path = "/v1/chats/{chat_id}/approvals", tag = "chats", security(("runtime" = [])), params(ChatParams),
    responses((status = 200, description = "The chat's live approvals (empty for an unknown chat).", body = schemas::Approvals), MissingUser))]
pub(crate) async fn list_approvals(
    ChatUser(user): ChatUser,
    State(state): State<AppState>,
    Path(chat_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let approvals = match ChatId::parse(&chat_id) {
        Some(chat) => {
            state
                .store
                .chat_approvals(&user, &chat, Timestamp::now())
                .await?
        }
        None => Vec::new(),
    };
    Ok(Json(json!({"approvals": approvals})))
}

/// The approval a revoke path names (`{kind}/{value}`), read once for the chat's revoke and
/// the user's: they look it up, and answer with it, alike.
pub(super) struct Revocation {
    pub(super) kind: ApprovalKind,
    /// The stored spelling of the value as a person may type it (`Files.Example.com.`,
    /// `Requests`).
    pub(super) value: String,
}

impl Revocation {
    /// `missing()` (the endpoint's own `404`) for a kind that is neither `site` nor `package`.
    pub(super) fn parse(
        kind: &str,
        value: &str,
        missing: fn() -> ApiError,
    ) -> Result<Self, ApiError> {
        let kind = ApprovalKind::parse(kind).ok_or_else(missing)?;
        let value = match kind {
            ApprovalKind::Site => Host::parse(value).map(|h| h.as_str().to_owned()).ok(),
            ApprovalKind::Package => PackageSpec::parse(value)
                .map(|p| p.as_str().to_owned())
                .ok(),
        }
        .unwrap_or_else(|| value.to_owned());
        Ok(Self { kind, value })
    }

    /// `{"revoked": {"kind", "value"}}`, once the store found the approval.
    pub(super) fn answer(self) -> Json<Value> {
        Json(json!({"revoked": {"kind": self.kind, "value": self.value}}))
    }
}

/// `DELETE /v1/chats/{chat_id}/approvals/{kind}/{value}`.
#[utoipa::path(delete, path = "/v1/chats/{chat_id}/approvals/{kind}/{value}", tag = "chats", security(("runtime" = [])),
    params(("chat_id" = String, Path, min_length = 1, max_length = 200, pattern = "^[!-~]+$", description = "The chat's id (of the user named by the header)."), ("kind" = String, Path, description = "`site` or `package`."), ("value" = String, Path, description = "The host or package name, any spelling; a bare package name revokes every pin of it, a pinned one only that row."), ("X-Egressgate-User" = String, Header, min_length = 1, max_length = 200, pattern = "^[!-~]+$", description = "The person the runtime speaks for.")),
    responses((status = 200, description = "Revoked; effective from the next request at the latest.", body = schemas::Revoked), MissingUser,
        (status = 404, description = "`APPROVAL_NOT_FOUND`: no such approval in this chat.", body = schemas::ErrorBody)))]
pub(crate) async fn revoke(
    ChatUser(user): ChatUser,
    State(state): State<AppState>,
    Path((chat_id, kind, value)): Path<(String, String, String)>,
) -> Result<Json<Value>, ApiError> {
    let chat = ChatId::parse(&chat_id).ok_or_else(approval_not_found)?;
    let r = Revocation::parse(&kind, &value, approval_not_found)?;
    let revoked = state
        .store
        .revoke_approval(&user, &chat, r.kind, &r.value, Timestamp::now())
        .await?;
    found(revoked, approval_not_found)?;
    Ok(r.answer())
}

/// `DELETE /v1/chats/{chat_id}`: hide the chat.
#[utoipa::path(delete, path = "/v1/chats/{chat_id}", tag = "chats", security(("runtime" = [])), params(ChatParams),
    responses((status = 200, description = "Hidden: its open request can no longer be resumed, its approvals are revoked, new turns get `410 CHAT_HIDDEN`.", body = schemas::Hidden), MissingUser,
        (status = 404, description = "`CHAT_NOT_FOUND`: no such chat.", body = schemas::ErrorBody)))]
pub(crate) async fn hide(
    ChatUser(user): ChatUser,
    State(state): State<AppState>,
    Path(chat_id): Path<String>,
) -> Result<Json<schemas::Hidden>, ApiError> {
    let chat = ChatId::parse(&chat_id).ok_or_else(chat_not_found)?;
    let hidden = state
        .store
        .hide_chat(&user, &chat, Timestamp::now())
        .await?;
    found(hidden, chat_not_found)?;
    Ok(Json(schemas::Hidden {
        chat_id: chat,
        hidden: true,
    }))
}
