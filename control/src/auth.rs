//! API authentication: bearer tokens compared against stored SHA-256 hashes in constant time,
//! each holding scopes, and the runtime's `X-Egressgate-User` naming the person on
//! chat-scoped calls.
//!
//! Two kinds of token: the env tokens (`EGRESSGATE_RUNTIME_TOKEN` holds every scope but
//! `admin`, `EGRESSGATE_ADMIN_TOKEN` holds `admin`), kept in memory; and named tokens with
//! chosen scopes and an optional expiry, managed through `/v1/admin/tokens` and read from the
//! database on every request, so a new one works and a removed one stops at once. Missing,
//! unknown or expired → `401`; a token without the endpoint's scope → `403`.

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use egressgate_store::db::tokens::{Scope, Scopes};
use egressgate_store::{Secret, SecretHash, Timestamp, UserId};

use crate::AppState;
use crate::error::ApiError;

/// The hashes of the two env API tokens.
#[derive(Clone, Debug)]
pub struct Tokens {
    /// Administrator token hash.
    pub admin: SecretHash,
    /// Agent-runtime token hash.
    pub runtime: SecretHash,
}

fn unauthorized(why: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", why)
}

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

/// The scopes a token holds, by its hash, and when it expires (`None`: never): the env tokens
/// first (both hashes always compared, so timing does not say which one a guess was close
/// to), then the named tokens.
async fn grant_of(
    state: &AppState,
    hash: &SecretHash,
) -> Result<(Scopes, Option<Timestamp>), ApiError> {
    let admin = state.tokens.admin.matches_hash(hash);
    let runtime = state.tokens.runtime.matches_hash(hash);
    if admin || runtime {
        let mut scopes = Vec::new();
        if admin {
            scopes.extend(Scopes::ADMIN.iter());
        }
        if runtime {
            scopes.extend(Scopes::RUNTIME.iter());
        }
        return Ok((Scopes::of(scopes), None));
    }
    let named = state
        .store
        .token_by_hash(hash)
        .await?
        .ok_or_else(|| unauthorized("unknown bearer token"))?;
    if named
        .expires_at
        .is_some_and(|at| at.has_passed(Timestamp::now()))
    {
        return Err(unauthorized("this bearer token has expired"));
    }
    Ok((named.scopes, named.expires_at))
}

/// The scopes a presented token holds.
async fn scopes_of(state: &AppState, presented: &Secret) -> Result<Scopes, ApiError> {
    grant_of(state, &presented.hash()).await.map(|(s, _)| s)
}

/// Checks that the request's bearer token holds one of `any` (the first is named in the
/// refusal).
async fn authenticate(parts: &Parts, state: &AppState, any: &[Scope]) -> Result<(), ApiError> {
    let presented = bearer(parts).ok_or_else(|| unauthorized("missing bearer token"))?;
    let held = scopes_of(state, &presented).await?;
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
/// If the token with this hash holds the `admin` scope right now, when it expires (`None`:
/// never). The console signs in with it and re-checks it on every request, so removing or
/// expiring the token ends its sessions at once.
pub(crate) async fn admin_token_expiry(
    state: &AppState,
    hash: &SecretHash,
) -> Option<Option<Timestamp>> {
    match grant_of(state, hash).await {
        Ok((scopes, expires)) if scopes.contains(Scope::Admin) => Some(expires),
        _ => None,
    }
}

/// Proof of the `admin` scope: a bearer token holding it, or (without an `Authorization`
/// header) the admin console's session cookie plus, unless it only reads, the session's CSRF
/// token.
pub struct AdminAuth;

impl FromRequestParts<AppState> for AdminAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if !parts
            .headers
            .contains_key(axum::http::header::AUTHORIZATION)
            && let Some(by_cookie) =
                crate::ui::session::admin_by_cookie(state, &parts.method, &parts.headers).await
        {
            return by_cookie.map(|()| Self);
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
