//! The control plane: the JSON API the agent runtime, the person's client and administrators
//! use. It turns the proxy's refusals into cards, cards into interrupts, and a person's answer
//! into approval rows that the proxy reads on its very next request. It meets the proxy only
//! in the database.

pub mod auth;
pub mod batch;
pub mod body;
pub mod error;
pub mod mcp;
pub mod metrics;
pub mod notify;
pub mod settings;

mod access_log;
mod approval;
mod buckets;
mod bulk;
mod cors;
mod credentials;
mod decision;
mod grants;
mod holder;
mod inbox;
mod links;
mod resume_guard;
mod routes;
mod state;
mod turn_access;
mod ui;
mod validate;

pub use error::ApiError;
pub use settings::Settings;
pub use state::{AppState, Tokens};

/// The OpenAPI 3.1 document of the whole API (what `GET /openapi.json` serves).
pub fn openapi_document() -> serde_json::Value {
    routes::openapi::document().clone()
}

/// The approval tool's input schema (what `GET /v1/tools/approval.json` serves).
pub fn approval_tool_schema() -> serde_json::Value {
    approval::schema::approval_tool_schema()
}

/// Every error code the API can answer with.
pub fn error_codes() -> &'static [&'static str] {
    routes::openapi::schemas::ERROR_CODES
}

/// The whole API as a router, so tests can drive it without a socket and the binary can
/// serve it on any listener.
pub fn app(state: AppState) -> axum::Router {
    let cors = cors::layer(&state.settings.cors_origins);
    let api = routes::router(state.clone());
    let router = routes::guarded(api.clone().merge(mcp::router(state.clone(), api)), &state)
        .layer(axum::middleware::from_fn(access_log::log));
    match cors {
        Some(layer) => router.layer(layer),
        None => router,
    }
}

/// [`app`] with every request counted in `metrics` (by route template, method, status and
/// error code).
pub fn app_with_metrics(state: AppState, metrics: metrics::ControlMetrics) -> axum::Router {
    app(state).layer(axum::middleware::from_fn_with_state(
        metrics,
        metrics::track,
    ))
}
