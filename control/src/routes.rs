//! The route table: one place that shows every endpoint and which module serves it.

use axum::Router;
use axum::routing::get;

use crate::AppState;

mod health;

pub(crate) fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .with_state(state)
}
