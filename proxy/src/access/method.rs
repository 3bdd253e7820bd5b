//! What can make a server act on another method or path than the request line says, which a
//! `read` grant refuses outright: method-override headers (`X-HTTP-Method-Override` and
//! friends, and the IIS-style path overrides) and `_method` query keys (Rails, Laravel,
//! Symfony, PHP frameworks).

use http::HeaderMap;

use super::path::comparison_form;

/// Header names (lower case, `-` for `_`: CGI and PHP read `X_HTTP_METHOD_OVERRIDE` as the
/// same variable) that ask a server to act on another method or path.
pub const OVERRIDE_HEADERS: [&str; 5] = [
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
    "x-original-url",
    "x-rewrite-url",
];

/// Whether any header asks the server to take another method or path than the request's.
pub fn has_override_header(headers: &HeaderMap) -> bool {
    headers.keys().any(|name| {
        let spelled = name.as_str().replace('_', "-");
        OVERRIDE_HEADERS.contains(&spelled.as_str())
    })
}

/// Whether the query names a `_method` key, in its comparison form (so `%5Fmethod`,
/// `_METHOD` and a key hidden behind an encoded `&` count), split at `&` and `;`, with a
/// key's leading spaces dropped and ` `, `.`, `[` read as `_` (as PHP reads names), so
/// `_method`, `_method[]` and `.method` all count. A query with no comparison form counts.
pub fn has_method_key(query: &str) -> bool {
    let Some(form) = comparison_form(query, true) else {
        return true;
    };
    form.split(['&', ';']).any(|pair| {
        let key = pair.split('=').next().unwrap_or("").trim_start();
        let key: String = key
            .chars()
            .map(|c| if matches!(c, ' ' | '.' | '[') { '_' } else { c })
            .collect();
        key.starts_with("_method")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn override_headers_in_any_spelling() {
        for name in [
            "X-HTTP-Method-Override",
            "x-http-method",
            "X-Method-Override",
            "x_http_method_override",
            "X-Original-URL",
            "x-rewrite-url",
        ] {
            let mut h = HeaderMap::new();
            h.insert(
                http::HeaderName::from_bytes(name.as_bytes())
                    .unwrap_or_else(|e| unreachable!("{e}")),
                http::HeaderValue::from_static("GET"),
            );
            assert!(has_override_header(&h), "{name}");
        }
        let mut h = HeaderMap::new();
        h.insert("x-http-methods", http::HeaderValue::from_static("PUT"));
        h.insert("accept", http::HeaderValue::from_static("*/*"));
        assert!(!has_override_header(&h));
    }

    #[test]
    fn method_keys_in_any_spelling() {
        for q in [
            "_method=PUT",
            "a=1&_method=put",
            "a=1;_METHOD=put",
            "%5Fmethod=PUT",
            "%255Fmethod=PUT",
            "_method%3DPUT",
            "a=1%26_method%3Dput",
            "_method[]=PUT",
            ".method=PUT",
            "+_method=PUT",
            "_method",
            "%252525252525",
        ] {
            assert!(has_method_key(q), "{q}");
        }
        for q in [
            "",
            "method=x",
            "payment_method=card",
            "a=_method",
            "x=%5Fmethod",
            "%20method=PUT",
        ] {
            assert!(!has_method_key(q), "{q}");
        }
    }
}
