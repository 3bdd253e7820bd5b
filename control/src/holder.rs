//! Callers who prove themselves with a resume secret or a claim id. A bearer token is not
//! required there; but when the runtime sends its token and `X-Egressgate-User`, the card
//! must be that user's, so a runtime cannot answer for somebody else.

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::request::Parts;
use egressgate_store::UserId;

use crate::auth::{ApprovalsAuth, USER_HEADER, presents_token};
use crate::error::ApiError;
use crate::state::AppState;

/// The client's address, when the server recorded it (`ConnectInfo`); resume limits key on it.
/// It is the TCP peer: behind a load balancer that is the balancer, so set the limits for it.
pub struct ClientAddr(pub Option<std::net::IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let peer = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0.ip());
        Ok(Self(peer))
    }
}

/// Who presents a secret: the user the runtime names (if it sent its token and the user
/// header), and whether the runtime token was sent at all. A claim made without the runtime
/// token (the card page, any bare secret holder) is a *handoff* claim: the runtime takes it
/// over to do the resumed work (`POST /v1/interrupts/{id}/takeover`).
pub struct SecretHolder {
    /// The person the runtime speaks for.
    pub user: Option<UserId>,
    /// Whether the request carried a token with the `approvals` scope.
    pub runtime: bool,
}

/// The `X-Egressgate-User` header, if present and well-formed.
pub fn user_header(headers: &HeaderMap) -> Option<UserId> {
    headers
        .get(USER_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(UserId::parse)
}

/// Whether the request's `X-Egressgate-User` is there and names someone other than `owner`
/// (an unreadable one names nobody, so it counts as another user): what the runtime may not
/// read is answered as if it did not exist.
pub fn names_another_user(headers: &HeaderMap, owner: &UserId) -> bool {
    headers.contains_key(USER_HEADER) && user_header(headers).is_none_or(|named| &named != owner)
}

impl SecretHolder {
    /// Whether a card of `owner` may be answered by this caller.
    pub fn may_act_for(&self, owner: &UserId) -> bool {
        self.user.as_ref().is_none_or(|u| u == owner)
    }
}

impl FromRequestParts<AppState> for SecretHolder {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if !presents_token(parts) {
            return Ok(Self {
                user: None,
                runtime: false,
            });
        }
        ApprovalsAuth::from_request_parts(parts, state).await?;
        // A header that is there but unreadable must not silently turn a named person's
        // click into an anonymous one.
        if parts.headers.contains_key(USER_HEADER) && user_header(&parts.headers).is_none() {
            return Err(ApiError::new(
                axum::http::StatusCode::BAD_REQUEST,
                "MISSING_USER",
                "X-Egressgate-User is not a valid user id",
            ));
        }
        Ok(Self {
            user: user_header(&parts.headers),
            runtime: true,
        })
    }
}
