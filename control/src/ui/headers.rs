//! Security headers, built once and added to every response by middleware, and the
//! same-origin check on state-changing requests: a browser on another site can neither frame
//! a page nor post to the API with this site's cookie.

use std::sync::LazyLock;

use axum::extract::Request;
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};

use crate::error::ApiError;

/// The policy: nothing but this origin's own scripts, styles and fetches; no inline script,
/// no framing, no `<base>`, forms only to this origin.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
     form-action 'self'";

static HEADERS: LazyLock<Vec<(HeaderName, HeaderValue)>> = LazyLock::new(|| {
    vec![
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
    ]
});

/// Adds the security headers to every response (API answers too: harmless there, and no
/// route can forget them).
pub(crate) async fn security_headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    for (name, value) in HEADERS.iter() {
        h.insert(name.clone(), value.clone());
    }
    res
}

/// Whether a browser says this request came from another site: an `Origin` that is not this
/// `Host` (scheme ignored: TLS may end in front of us), `Origin: null`, or
/// `Sec-Fetch-Site: cross-site`. Requests without those headers (runtimes, curl) pass.
pub(crate) fn cross_site(headers: &HeaderMap) -> bool {
    if headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes() == b"cross-site")
    {
        return true;
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return false;
    };
    let origin_host = origin.to_str().ok().and_then(|o| {
        o.strip_prefix("http://")
            .or_else(|| o.strip_prefix("https://"))
    });
    let Some(origin_host) = origin_host else {
        return true;
    };
    // A reverse proxy that rewrites `Host` reports the browser's in `X-Forwarded-Host`; a
    // cross-site page cannot set that header without a CORS preflight, which we never grant.
    let names = [header::HOST.as_str(), "x-forwarded-host"];
    !names.iter().any(|name| {
        headers
            .get(*name)
            .and_then(|h| h.to_str().ok())
            .is_some_and(|h| h.trim().eq_ignore_ascii_case(origin_host))
    })
}

/// Refuses state-changing requests that a browser marks as coming from another site, unless
/// the site is one the operator allowed with `--cors-origin` (an exact origin match: those
/// pages call the API with a bearer token, and the console's `SameSite=Strict` cookie never
/// travels cross-site).
pub(crate) async fn same_origin(
    axum::extract::State(state): axum::extract::State<crate::state::AppState>,
    req: Request,
    next: Next,
) -> Response {
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let allowed = req
        .headers()
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .is_some_and(|o| state.settings.cors_origins.iter().any(|a| a == o));
    if !safe && !allowed && cross_site(req.headers()) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "CROSS_ORIGIN",
            "state-changing requests from another site are refused",
        )
        .into_response();
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn only_browsers_saying_another_site_are_cross_site() {
        // Runtimes and curl send neither Origin nor Sec-Fetch-Site.
        assert!(!cross_site(&headers(&[("host", "gate:8080")])));
        assert!(!cross_site(&headers(&[
            ("host", "gate:8080"),
            ("origin", "http://gate:8080")
        ])));
        // Behind a reverse proxy that rewrites Host.
        assert!(!cross_site(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("x-forwarded-host", "gate.example.org"),
            ("origin", "https://gate.example.org")
        ])));
        // TLS may end in front of us: the scheme is not compared.
        assert!(!cross_site(&headers(&[
            ("host", "Gate:8080"),
            ("origin", "https://gate:8080")
        ])));
        for bad in [
            &[("host", "gate:8080"), ("origin", "http://evil.example")][..],
            &[("host", "gate:8080"), ("origin", "http://gate:8081")],
            &[("host", "gate:8080"), ("origin", "null")],
            &[("host", "gate:8080"), ("origin", "http://gate:8080.evil")],
            &[("origin", "http://gate:8080")],
            &[("host", "gate:8080"), ("sec-fetch-site", "cross-site")],
            &[
                ("x-forwarded-host", "evil.example"),
                ("origin", "http://gate:8080"),
            ],
        ] {
            assert!(cross_site(&headers(bad)), "{bad:?}");
        }
    }
}
