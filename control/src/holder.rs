//! Callers who prove themselves with a resume secret or a claim id. A bearer token is not
//! required there; but when the runtime sends its token and `X-Egressgate-User`, the card
//! must be that user's, so a runtime cannot answer for somebody else.

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::request::Parts;
use egressgate_store::UserId;

use crate::AppState;
use crate::auth::{RuntimeAuth, USER_HEADER};
use crate::error::ApiError;

/// The user the runtime names, if it sent its token and the user header.
pub struct SecretHolder(pub Option<UserId>);

/// The `X-Egressgate-User` header, if present and well-formed.
pub fn user_header(headers: &HeaderMap) -> Option<UserId> {
    headers
        .get(USER_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(UserId::parse)
}

impl SecretHolder {
    /// Whether a card of `owner` may be answered by this caller.
    pub fn may_act_for(&self, owner: &UserId) -> bool {
        self.0.as_ref().is_none_or(|u| u == owner)
    }
}

impl FromRequestParts<AppState> for SecretHolder {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if !parts
            .headers
            .contains_key(axum::http::header::AUTHORIZATION)
        {
            return Ok(Self(None));
        }
        RuntimeAuth::from_request_parts(parts, state).await?;
        // A header that is there but unreadable must not silently turn a named person's
        // click into an anonymous one.
        if parts.headers.contains_key(USER_HEADER) && user_header(&parts.headers).is_none() {
            return Err(ApiError::new(
                axum::http::StatusCode::BAD_REQUEST,
                "MISSING_USER",
                "X-Egressgate-User is not a valid user id",
            ));
        }
        Ok(Self(user_header(&parts.headers)))
    }
}
