//! Strict JSON bodies: malformed JSON, a wrong type, a missing field or an unknown field is
//! `400 INVALID_BODY` (the request types use `deny_unknown_fields`), never axum's default 422.

use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use crate::error::ApiError;

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
        serde_json::from_slice(&bytes)
            .map(StrictJson)
            .map_err(|e| ApiError::invalid_body(format!("invalid JSON body: {e}")))
    }
}
