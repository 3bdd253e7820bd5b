//! The plain HTTP endpoints the binary adds beside the planes: `/metrics` (the shared
//! registry, with the control plane's card counts re-read before each scrape), and the health
//! endpoints of a proxy-only process.

use std::sync::Arc;

use egressgate_store::Store;
use prometheus_client::registry::Registry;

/// `/metrics`; with `cards`, the control plane's card counts are re-read before each scrape.
pub(super) fn metrics_router(
    registry: Arc<Registry>,
    cards: Option<(egressgate_control::metrics::ControlMetrics, Store)>,
) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let registry = registry.clone();
            let cards = cards.clone();
            async move {
                if let Some((m, store)) = &cards {
                    m.refresh_cards(store).await;
                }
                let mut text = String::new();
                match prometheus_client::encoding::text::encode(&mut text, &registry) {
                    Ok(()) => (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        text,
                    )
                        .into_response_parts(),
                    Err(_) => (
                        [(axum::http::header::CONTENT_TYPE, "text/plain")],
                        String::new(),
                    )
                        .into_response_parts(),
                }
            }
        }),
    )
}

/// Health endpoints for a proxy-only process.
pub(super) fn health_router(store: Store) -> axum::Router {
    axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route(
            "/readyz",
            axum::routing::get(move || {
                let store = store.clone();
                async move {
                    match store.ping().await {
                        Ok(()) => (axum::http::StatusCode::OK, "ready"),
                        Err(_) => (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            "database unavailable",
                        ),
                    }
                }
            }),
        )
}

trait IntoParts {
    fn into_response_parts(self) -> axum::response::Response;
}

impl<T: axum::response::IntoResponse> IntoParts for T {
    fn into_response_parts(self) -> axum::response::Response {
        self.into_response()
    }
}
