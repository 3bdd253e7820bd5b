//! CORS for the configured browser origins (`--cors-origin`), off by default: without an
//! origin no CORS header is ever sent, so browsers keep the same-origin rule.

use axum::http::{HeaderName, HeaderValue, Method, header};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// The layer for `origins`, or `None` when none is configured. Credentials (cookies) are
/// never allowed: the API authenticates with bearer tokens and resume secrets only.
pub(crate) fn layer(origins: &[String]) -> Option<CorsLayer> {
    let list: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    if list.is_empty() {
        return None;
    }
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(list))
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::ACCEPT,
                HeaderName::from_static("x-egressgate-user"),
                HeaderName::from_static("x-egressgate-turn"),
                HeaderName::from_static("mcp-session-id"),
                HeaderName::from_static("mcp-protocol-version"),
                HeaderName::from_static("last-event-id"),
            ])
            .expose_headers([HeaderName::from_static("mcp-session-id")])
            .max_age(std::time::Duration::from_secs(600)),
    )
}
