//! Liveness (the process answers) and readiness (the database answers).

use axum::extract::State;
use axum::http::StatusCode;

use crate::state::AppState;

/// `GET /healthz`: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "meta", responses((status = 200, description = "`ok`", content_type = "text/plain", body = String)))]
pub(crate) async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz`: the database answers.
#[utoipa::path(get, path = "/readyz", tag = "meta", responses((status = 200, description = "`ready`", content_type = "text/plain", body = String), (status = 503, description = "The database is unavailable (plain text).", content_type = "text/plain", body = String)))]
pub(crate) async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    match state.store.ping().await {
        Ok(()) => (StatusCode::OK, "ready"),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "database unavailable"),
    }
}
