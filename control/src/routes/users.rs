//! A user as the administrator keeps them: whether they may approve, their own mode, and how
//! to reach them outside the API (a Slack user id that maps a click back to them, an e-mail
//! address cards are mailed to). `PUT` changes any of these in one audited transaction; `GET`
//! shows them.

use axum::Json;
use axum::extract::{Path, State};
use egressgate_store::db::admin::UserChange;
use egressgate_store::db::contacts::ContactChange;
use egressgate_store::{Mode, StoreError, Timestamp};
use serde::{Deserialize, Deserializer};

use super::admin::ACTOR;
use super::openapi::schemas;
use crate::auth::AdminAuth;
use crate::body::StrictJson;
use crate::error::ApiError;
use crate::state::AppState;
use crate::validate;

/// `PUT /v1/admin/users/{user_id}` body. For the contact fields, absent leaves the value as
/// it is and `null` clears it.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UserBody {
    #[serde(default)]
    can_approve: Option<bool>,
    #[serde(default)]
    mode: Option<String>,
    /// The person's Slack user id (`U…` or `W…`); `null` clears it. Unique across users.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, nullable)]
    slack_user_id: Option<Option<String>>,
    /// The person's e-mail address; `null` clears it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, nullable)]
    email: Option<Option<String>>,
}

/// A field that is present (its value possibly `null`), told apart from an absent one.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// `PUT /v1/admin/users/{user_id}` `{"can_approve"?, "mode"?, "slack_user_id"?, "email"?}`
/// (at least one) → `200` with what was set.
#[utoipa::path(put, path = "/v1/admin/users/{user_id}", tag = "admin", security(("admin" = [])), request_body = UserBody, params(("user_id" = String, Path, description = "The user.")),
    responses((status = 200, description = "What was set: the user's permission to approve, mode and/or contacts.", body = schemas::UserPermission),
        (status = 409, description = "`CONFLICT`: the Slack user id belongs to another user.", body = schemas::ErrorBody),
        (status = 422, description = "`INVALID_INPUT`: a malformed user id, an unknown mode, a Slack user id or e-mail address that is not one, or nothing to change.", body = schemas::ErrorBody)))]
pub(crate) async fn set_user(
    _auth: AdminAuth,
    State(state): State<AppState>,
    Path(user_id): Path<String>,
    StrictJson(body): StrictJson<UserBody>,
) -> Result<Json<schemas::UserPermission>, ApiError> {
    let user = validate::user_id("user_id", &user_id)?;
    let mode = body
        .mode
        .as_deref()
        .map(|m| {
            Mode::parse(m).ok_or_else(|| {
                ApiError::invalid_input(format!(
                    "mode: expected \"enforce\" or \"shadow\", got {}",
                    validate::quote(m)
                ))
            })
        })
        .transpose()?;
    let contacts = ContactChange {
        slack_user_id: body
            .slack_user_id
            .map(|v| v.map(|s| validate::slack_user_id(&s)).transpose())
            .transpose()?,
        email: body
            .email
            .map(|v| v.map(|s| validate::email(&s)).transpose())
            .transpose()?,
    };
    if body.can_approve.is_none() && mode.is_none() && contacts.is_empty() {
        return Err(ApiError::invalid_input(
            "nothing to change: give can_approve, mode, slack_user_id and/or email",
        ));
    }
    let change = UserChange {
        can_approve: body.can_approve,
        mode,
        contacts: contacts.clone(),
    };
    match state
        .store
        .set_user(&user, change, ACTOR, Timestamp::now())
        .await
    {
        Err(StoreError::Taken(what)) => {
            return Err(ApiError::conflict(
                "CONFLICT",
                format!("{what}: it already belongs to another user"),
            ));
        }
        done => done?,
    }
    Ok(Json(schemas::UserPermission {
        user_id: user,
        can_approve: body.can_approve,
        mode: mode.map(|m| m.as_str()),
        slack_user_id: contacts.slack_user_id,
        email: contacts.email,
    }))
}

/// `GET /v1/admin/users/{user_id}`: whether the user may approve now (the deployment's
/// default where nothing was set), their own mode if one was set, and how to reach them.
#[utoipa::path(get, path = "/v1/admin/users/{user_id}", tag = "admin", security(("admin" = [])), params(("user_id" = String, Path, description = "The user.")),
    responses((status = 200, description = "Whether the user may approve, their own mode (`null`: the deployment's applies), and their contacts.", body = schemas::AdminUser),
        (status = 422, description = "`INVALID_INPUT`: a malformed user id.", body = schemas::ErrorBody)))]
pub(crate) async fn get_user(
    _auth: AdminAuth,
    State(state): State<AppState>,
    Path(user_id): Path<String>,
) -> Result<Json<schemas::AdminUser>, ApiError> {
    let user = validate::user_id("user_id", &user_id)?;
    let s = &state.store;
    let can_approve = s
        .can_approve(&user)
        .await?
        .unwrap_or(state.settings.default_can_approve);
    let mode = s.user_mode(&user).await?.map(Mode::as_str);
    let contacts = s.contacts(&user).await?;
    Ok(Json(schemas::AdminUser {
        user_id: user,
        can_approve,
        mode,
        slack_user_id: contacts.slack_user_id,
        email: contacts.email,
    }))
}
