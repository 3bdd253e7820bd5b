//! The deployment CA's certificate, public: a sandbox (or anyone setting up a client) fetches
//! it to trust the leaves the proxy presents for inspected hosts. Read from where the CA is
//! kept on every request, so a rotation shows at once.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use egressgate_store::Timestamp;
use egressgate_store::ca::DeploymentCa;

use crate::AppState;

/// `GET /v1/ca.pem`: the CA certificate (PEM); no token needed.
#[utoipa::path(get, path = "/v1/ca.pem", tag = "meta", responses(
    (status = 200, description = "The deployment CA certificate (PEM).", content_type = "application/x-pem-file", body = String),
    (status = 503, description = "The CA could not be read (plain text).", content_type = "text/plain", body = String)))]
pub(crate) async fn ca_pem(State(state): State<AppState>) -> Response {
    let Some(home) = &state.settings.ca else {
        return (StatusCode::NOT_FOUND, "this deployment has no CA").into_response();
    };
    match DeploymentCa::load_or_create(home, Timestamp::now()).await {
        Ok(ca) => (
            [(header::CONTENT_TYPE, "application/x-pem-file")],
            ca.cert_pem().to_owned(),
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "cannot read the deployment CA");
            (StatusCode::SERVICE_UNAVAILABLE, "deployment CA unavailable").into_response()
        }
    }
}
