//! Strict JSON bodies: malformed JSON, a wrong type, a missing field, an unknown field or a
//! key named twice in one object (at any depth, resume payloads included) is
//! `400 INVALID_BODY` (the request types use `deny_unknown_fields`), never axum's default 422.

use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use crate::error::ApiError;

mod unique_keys;

/// Largest request body the API reads (snapshots ride in the interrupt body, base64).
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// A JSON request body parsed strictly.
pub struct StrictJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for StrictJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        // Read up to our own limit rather than axum's 2 MB default, which would refuse an
        // oversized `complete` answer that the design keeps in the blob store.
        let bytes = axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES)
            .await
            .map_err(|e| ApiError::invalid_body(format!("could not read body: {e}")))?;
        parse(&bytes).map(StrictJson)
    }
}

/// Parses a request body strictly (see the module doc): the one way the API reads JSON, so
/// no body is read last-key-wins.
pub(crate) fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let invalid = |e: serde_json::Error| ApiError::invalid_body(format!("invalid JSON body: {e}"));
    serde_json::from_slice::<unique_keys::UniqueKeys>(bytes).map_err(invalid)?;
    serde_json::from_slice(bytes).map_err(invalid)
}
