//! The console's, card page's and inbox's static files, compiled into the binary (`include_str!`: a
//! handful of small text files needs no embedding crate) and served under names carrying a
//! hash of their content, so they can be cached forever and a new build is never stale.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use sha2::{Digest as _, Sha256};

use crate::error::ApiError;

/// One embedded file.
pub(crate) struct Asset {
    /// The name pages link to: `stem.HASH.ext`.
    pub(crate) hashed: String,
    body: &'static str,
    content_type: &'static str,
}

const FILES: [(&str, &str, &str); 6] = [
    ("icon.svg", include_str!("assets/icon.svg"), "image/svg+xml"),
    (
        "ui.css",
        include_str!("assets/ui.css"),
        "text/css; charset=utf-8",
    ),
    (
        "card.js",
        include_str!("assets/card.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "admin.js",
        include_str!("assets/admin.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "fragment.js",
        include_str!("assets/fragment.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "inbox.js",
        include_str!("assets/inbox.js"),
        "text/javascript; charset=utf-8",
    ),
];

static ASSETS: LazyLock<Vec<(&'static str, Asset)>> = LazyLock::new(|| {
    FILES
        .iter()
        .map(|&(name, body, content_type)| {
            let digest = Sha256::digest(body.as_bytes());
            let short: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
            let hashed = match name.rsplit_once('.') {
                Some((stem, ext)) => format!("{stem}.{short}.{ext}"),
                None => format!("{name}.{short}"),
            };
            (
                name,
                Asset {
                    hashed,
                    body,
                    content_type,
                },
            )
        })
        .collect()
});

/// The hashed URL path of an embedded file by its plain name (`""` if there is none, which
/// a test would catch at once).
pub(crate) fn url(name: &str) -> String {
    ASSETS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or_else(String::new, |(_, a)| format!("/ui/assets/{}", a.hashed))
}

/// `GET /ui/assets/{file}`: only hashed names are served, with immutable caching.
pub(crate) async fn serve(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(_, a)| a.hashed == file) {
        Some((_, a)) => (
            [
                (header::CONTENT_TYPE, a.content_type),
                (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
            ],
            a.body,
        )
            .into_response(),
        None => ApiError::not_found("NOT_FOUND", "no such asset").into_response(),
    }
}
