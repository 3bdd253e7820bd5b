//! API authentication: bearer tokens compared against stored SHA-256 hashes in constant time,
//! two roles, and the runtime's `X-Egressgate-User` naming the person on chat-scoped calls.

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use egressgate_store::{Secret, SecretHash, UserId};

use crate::AppState;
use crate::error::ApiError;

/// The hashes of the two API tokens.
#[derive(Clone, Debug)]
pub struct Tokens {
    /// Administrator token hash.
    pub admin: SecretHash,
    /// Agent-runtime token hash.
    pub runtime: SecretHash,
}

/// Which role a presented token has, if any. Both hashes are always compared so timing does
/// not say which role a guess was close to.
fn role_of(tokens: &Tokens, presented: &Secret) -> Option<egressgate_store::db::admin::Role> {
    use egressgate_store::db::admin::Role;
    let admin = tokens.admin.matches(presented);
    let runtime = tokens.runtime.matches(presented);
    match (admin, runtime) {
        (true, _) => Some(Role::Admin),
        (false, true) => Some(Role::Runtime),
        _ => None,
    }
}

/// Whether `presented` is the admin token (the console's sign-in).
pub(crate) fn is_admin_token(state: &AppState, presented: &Secret) -> bool {
    role_of(&state.tokens, presented) == Some(egressgate_store::db::admin::Role::Admin)
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

fn authenticate(
    parts: &Parts,
    state: &AppState,
    want: egressgate_store::db::admin::Role,
) -> Result<(), ApiError> {
    let presented = bearer(parts).ok_or_else(|| {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "UNAUTHORIZED",
            "missing bearer token",
        )
    })?;
    match role_of(&state.tokens, &presented) {
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "UNAUTHORIZED",
            "unknown bearer token",
        )),
        Some(role) if role == want => Ok(()),
        Some(_) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "FORBIDDEN",
            format!("this endpoint needs the {} token", want.as_str()),
        )),
    }
}

/// Proof that the request carried the runtime token.
pub struct RuntimeAuth;

impl FromRequestParts<AppState> for RuntimeAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        authenticate(parts, state, egressgate_store::db::admin::Role::Runtime).map(|()| Self)
    }
}

/// Proof that the request carried the admin token, or (without an `Authorization` header)
/// the admin console's session cookie plus, unless it only reads, the session's CSRF token.
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
        authenticate(parts, state, egressgate_store::db::admin::Role::Admin).map(|()| Self)
    }
}

/// The runtime token plus the person it speaks for (`X-Egressgate-User`), for chat-scoped
/// endpoints.
pub struct ChatUser(pub UserId);

/// The header naming the person on chat-scoped endpoints.
pub const USER_HEADER: &str = "x-egressgate-user";

impl FromRequestParts<AppState> for ChatUser {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        authenticate(parts, state, egressgate_store::db::admin::Role::Runtime)?;
        let user = parts
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
            })?;
        Ok(Self(user))
    }
}
