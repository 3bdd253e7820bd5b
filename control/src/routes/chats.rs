//! A person's control over their chat: list its approvals, revoke one, or hide the chat
//! (which expires its open request and revokes everything). Another user's chat answers
//! exactly like one that does not exist.

use axum::Json;
use axum::extract::{Path, State};
use egressgate_store::db::policy::ApprovalKind;
use egressgate_store::{ChatId, Host, Package, Timestamp};
use serde_json::{Value, json};

use crate::AppState;
use crate::auth::ChatUser;
use crate::error::ApiError;

fn approval_not_found() -> ApiError {
    ApiError::not_found("APPROVAL_NOT_FOUND", "no such approval in this chat")
}

fn chat_not_found() -> ApiError {
    ApiError::not_found("CHAT_NOT_FOUND", "no such chat")
}

/// `GET /v1/chats/{chat_id}/approvals`.
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

/// The stored spelling of a value as a person may type it (`Files.Example.com.`, `Requests`).
fn canonical(kind: ApprovalKind, value: &str) -> String {
    match kind {
        ApprovalKind::Site => Host::parse(value).map(|h| h.as_str().to_owned()).ok(),
        ApprovalKind::Package => Package::parse(value).map(|p| p.as_str().to_owned()).ok(),
    }
    .unwrap_or_else(|| value.to_owned())
}

/// `DELETE /v1/chats/{chat_id}/approvals/{kind}/{value}`.
pub(crate) async fn revoke(
    ChatUser(user): ChatUser,
    State(state): State<AppState>,
    Path((chat_id, kind, value)): Path<(String, String, String)>,
) -> Result<Json<Value>, ApiError> {
    let chat = ChatId::parse(&chat_id).ok_or_else(approval_not_found)?;
    let kind = ApprovalKind::parse(&kind).ok_or_else(approval_not_found)?;
    let value = canonical(kind, &value);
    if !state
        .store
        .revoke_approval(&user, &chat, kind, &value, Timestamp::now())
        .await?
    {
        return Err(approval_not_found());
    }
    Ok(Json(json!({"revoked": {"kind": kind, "value": value}})))
}

/// `DELETE /v1/chats/{chat_id}`: hide the chat.
pub(crate) async fn hide(
    ChatUser(user): ChatUser,
    State(state): State<AppState>,
    Path(chat_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let chat = ChatId::parse(&chat_id).ok_or_else(chat_not_found)?;
    if !state
        .store
        .hide_chat(&user, &chat, Timestamp::now())
        .await?
    {
        return Err(chat_not_found());
    }
    Ok(Json(json!({"chat_id": chat, "hidden": true})))
}
