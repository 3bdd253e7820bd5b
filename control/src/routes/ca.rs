//! The deployment CA's certificate, public: a sandbox (or anyone setting up a client) fetches
//! it to trust the leaves the proxy presents for inspected hosts. Read from where the CA is
//! kept on every request, so a rotation shows at once; never made here (the proxy makes it
//! when it starts, as does `egressgate ca print`), so an unauthenticated request writes
//! nothing.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use egressgate_store::Timestamp;
use egressgate_store::ca::CaError;

use super::openapi::schemas;
use crate::error::ApiError;
use crate::state::AppState;

/// `GET /v1/ca.pem`: the CA certificates clients should trust (PEM: the signing CA, then a
/// rotated-out one during its overlap); no token needed.
#[utoipa::path(get, path = "/v1/ca.pem", tag = "meta", responses(
    (status = 200, description = "The deployment CA certificate (PEM), followed during a rotation's overlap by the previous one.", content_type = "application/x-pem-file", body = String),
    (status = 404, description = "`CA_NOT_FOUND`: no CA has been made yet (the proxy makes it when it starts, as does `egressgate ca print`; this endpoint never does). `NOT_FOUND`: this process was started without a CA.", body = schemas::ErrorBody),
    (status = 503, description = "`STORE_UNAVAILABLE`: the CA could not be read.", body = schemas::ErrorBody)))]
pub(crate) async fn ca_pem(State(state): State<AppState>) -> Result<Response, ApiError> {
    let home = state
        .settings
        .ca
        .as_ref()
        .ok_or_else(|| ApiError::not_found("NOT_FOUND", "this deployment has no CA"))?;
    let pem = home
        .trusted_pem(Timestamp::now())
        .await
        .map_err(|e| match e {
            CaError::Missing => ApiError::not_found("CA_NOT_FOUND", e.to_string()),
            e => {
                tracing::error!(error = %e, "cannot read the deployment CA");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "STORE_UNAVAILABLE",
                    "the deployment CA is unavailable; try again",
                )
            }
        })?;
    Ok(([(header::CONTENT_TYPE, "application/x-pem-file")], pem).into_response())
}
