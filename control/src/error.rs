//! The API's one error type: a status, an UPPER_SNAKE code and a message written for the
//! caller. Database text never reaches a response; it goes to the log instead.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use egressgate_store::StoreError;

/// An error response `{"error": {"code", "message"}}`.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine-readable code.
    pub code: &'static str,
    /// Human-readable explanation.
    pub message: String,
    /// Seconds for a `Retry-After` header (rate limits).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// Any status and code.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The same error with `Retry-After: secs`.
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// `400 INVALID_BODY`: malformed JSON or an unknown field.
    pub fn invalid_body(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "INVALID_BODY", message)
    }

    /// `422 INVALID_INPUT`: well-formed but unacceptable values.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "INVALID_INPUT", message)
    }

    /// `404` with a resource-specific code.
    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    /// `409`: the request collides with the current state (a pending card, a lost claim).
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    /// `410`: the thing exists but can no longer be used (expired, hidden, past a deadline).
    pub fn gone(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::GONE, code, message)
    }
}

/// What a store write that reports whether it found its row answers (a removal, a revocation,
/// a heartbeat on a held claim): `Ok` when it did, `missing()` (the endpoint's `404`, or its
/// lost claim) when it did not. The routes whose write is also their existence check say it
/// this one way, so none of them can answer success for a row that was not there.
pub(crate) fn found(changed: bool, missing: impl FnOnce() -> ApiError) -> Result<(), ApiError> {
    if changed { Ok(()) } else { Err(missing()) }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Audit(_) => {
                tracing::error!(error = %e, "audit write failed; change rolled back");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "AUDIT_FAILED",
                    "the change could not be audited, so it was not made",
                )
            }
            _ => {
                tracing::error!(error = %e, "store error");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "STORE_UNAVAILABLE",
                    "the database is unavailable; try again",
                )
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        let mut resp = (self.status, axum::Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        // For the metrics middleware: errors are counted by code without reading the body.
        resp.extensions_mut().insert(ErrorCode(self.code));
        resp
    }
}

/// The code of an error response, carried as a response extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorCode(pub &'static str);
