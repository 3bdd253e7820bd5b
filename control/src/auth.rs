//! API authentication: bearer tokens compared against stored SHA-256 hashes in constant time,
//! each holding scopes, and the runtime's `X-Egressgate-User` naming the person on
//! chat-scoped calls.
//!
//! Two kinds of token: the env tokens (`EGRESSGATE_RUNTIME_TOKEN` holds every scope but
//! `admin`, `EGRESSGATE_ADMIN_TOKEN` holds `admin`), kept in memory; and named tokens with
//! chosen scopes and an optional expiry, managed through `/v1/admin/tokens` and read from the
//! database on every request, so a new one works and a removed one stops at once. Missing,
//! unknown or expired → `401`; a token without the endpoint's scope → `403`. A client address
//! that keeps failing is answered `429` before the database is asked (`credentials::guard`).

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use egressgate_store::db::tokens::Scope;
use egressgate_store::{Secret, UserId};

use crate::credentials::guard::Gate;
use crate::credentials::{grant_of, unauthorized};
use crate::error::ApiError;
use crate::state::AppState;
pub use crate::state::Tokens;

fn bearer(parts: &Parts) -> Option<Secret> {
    let value = parts
        .headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))?;
    Some(Secret::from_presented(token.trim()))
}

/// Checks that the request's bearer token holds one of `any` (the first is named in the
/// refusal). A missing token is a failure charged to the client like an unknown one.
async fn authenticate(parts: &Parts, state: &AppState, any: &[Scope]) -> Result<(), ApiError> {
    let gate = Gate::of(parts);
    let Some(presented) = bearer(parts) else {
        gate.admit()?;
        gate.failed();
        return Err(unauthorized("missing bearer token"));
    };
    let (held, _) = grant_of(state, &presented.hash(), &gate).await?;
    if any.iter().any(|s| held.contains(*s)) {
        Ok(())
    } else {
        let names: Vec<&str> = any.iter().map(|s| s.as_str()).collect();
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "FORBIDDEN",
            format!(
                "this endpoint needs a token with the {} scope",
                names.join(" or ")
            ),
        ))
    }
}

macro_rules! scoped_auth {
    ($(#[$doc:meta])* $name:ident, $($scope:expr),+) => {
        $(#[$doc])*
        pub struct $name;

        impl FromRequestParts<AppState> for $name {
            type Rejection = ApiError;

            async fn from_request_parts(
                parts: &mut Parts,
                state: &AppState,
            ) -> Result<Self, ApiError> {
                authenticate(parts, state, &[$($scope),+]).await.map(|()| Self)
            }
        }
    };
}

scoped_auth!(
    /// Proof of the `turns` scope: open turns, read their refusals, egress and policy.
    TurnsAuth,
    Scope::Turns
);
scoped_auth!(
    /// Proof of the `approvals` scope: the approval tool, interrupts, claims, batches.
    ApprovalsAuth,
    Scope::Approvals
);
scoped_auth!(
    /// Proof of the `cards:read` or the `approvals` scope: read cards' outcomes (the approval
    /// tool's resume branch reads them too).
    CardsReadAuth,
    Scope::CardsRead,
    Scope::Approvals
);

/// Whether the request presents a bearer token at all: without one, the console's cookie or
/// a bare secret may stand in, depending on the endpoint.
pub(crate) fn presents_token(parts: &Parts) -> bool {
    parts
        .headers
        .contains_key(axum::http::header::AUTHORIZATION)
}

/// Proof of the `admin` scope: a bearer token holding it, or (without an `Authorization`
/// header) the admin console's session cookie plus, unless it only reads, the session's CSRF
/// token.
pub struct AdminAuth;

impl FromRequestParts<AppState> for AdminAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if !presents_token(parts) {
            // A cookie is looked up in the database: the failure limit comes first.
            let gate = Gate::of(parts);
            gate.admit()?;
            if let Some(by_cookie) =
                crate::ui::session::admin_by_cookie(state, &parts.method, &parts.headers).await
            {
                if by_cookie
                    .as_ref()
                    .is_err_and(|e| e.status == StatusCode::UNAUTHORIZED)
                {
                    gate.failed();
                }
                return by_cookie.map(|()| Self);
            }
        }
        authenticate(parts, state, &[Scope::Admin])
            .await
            .map(|()| Self)
    }
}

/// The header naming the person on chat-scoped endpoints.
pub const USER_HEADER: &str = "x-egressgate-user";

/// The user `X-Egressgate-User` names, after `need` was checked.
async fn named_user(parts: &Parts, state: &AppState, need: Scope) -> Result<UserId, ApiError> {
    authenticate(parts, state, &[need]).await?;
    parts
        .headers
        .get(USER_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(UserId::parse)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "MISSING_USER",
                "chat-scoped endpoints need the X-Egressgate-User header",
            )
        })
}

/// A `chats` token plus the person it speaks for, for a chat's approvals and hiding it.
pub struct ChatUser(pub UserId);

impl FromRequestParts<AppState> for ChatUser {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        named_user(parts, state, Scope::Chats).await.map(Self)
    }
}

/// An `approvals` token plus the person it speaks for (reissuing a chat's card secret).
pub struct ApprovalsUser(pub UserId);

impl FromRequestParts<AppState> for ApprovalsUser {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        named_user(parts, state, Scope::Approvals).await.map(Self)
    }
}
