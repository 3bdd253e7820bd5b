//! The control plane: the JSON API the agent runtime, the person's client and administrators
//! use. It turns the proxy's refusals into cards, cards into interrupts, and a person's answer
//! into approval rows that the proxy reads on its very next request. It meets the proxy only
//! in the database.

pub mod auth;
pub mod batch;
pub mod body;
pub mod error;
pub mod metrics;
pub mod settings;

mod approval;
mod bulk;
mod decision;
mod grants;
mod holder;
mod routes;
mod turn_access;
mod validate;

use std::sync::Arc;

use egressgate_store::Store;

pub use auth::Tokens;
pub use error::ApiError;
pub use settings::Settings;

/// Everything a handler needs; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The database both planes share.
    pub store: Store,
    /// Limits and lifetimes.
    pub settings: Arc<Settings>,
    /// Hashes of the API bearer tokens.
    pub tokens: Arc<Tokens>,
    /// Where snapshots and oversized answers go (`DirBlobStore` under the data dir, or
    /// `DbBlobStore` when processes share PostgreSQL).
    pub blobs: Arc<dyn egressgate_store::blob::BlobStore>,
}

/// The whole API as a router, so tests can drive it without a socket and the binary can
/// serve it on any listener.
pub fn app(state: AppState) -> axum::Router {
    routes::router(state)
}

/// [`app`] with every request counted in `metrics` (by route template, method, status and
/// error code).
pub fn app_with_metrics(state: AppState, metrics: metrics::ControlMetrics) -> axum::Router {
    routes::router(state).layer(axum::middleware::from_fn_with_state(
        metrics,
        metrics::track,
    ))
}
