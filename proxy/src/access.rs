//! The access level check, the one place the forwarding path asks whether a request is within
//! what its grant opens. `read` means downloads: `GET`, `HEAD` and `OPTIONS` without a body,
//! and git's fetch and clone; nothing that can upload. Its parts, each in its room: the
//! comparison forms of paths and queries (`path`), what makes a server act on another method
//! (`method`), and git's smart HTTP (`git`).

pub mod git;
pub mod method;
pub mod path;

use egressgate_store::Access;
use http::{HeaderMap, Method, Request, Uri};
use hyper::body::Body;

/// What the rule needs of one request: its method, target, headers, and whether its framing
/// says a body follows.
#[derive(Clone, Copy, Debug)]
pub struct Asked<'a> {
    /// The request's method.
    pub method: &'a Method,
    /// Its target (only the path and the query are read).
    pub uri: &'a Uri,
    /// Its headers.
    pub headers: &'a HeaderMap,
    /// Whether a body may follow: HTTP/1 `Transfer-Encoding` or a `Content-Length` other than
    /// `0`; HTTP/2 a `HEADERS` frame without `END_STREAM` and no `content-length: 0`.
    pub has_body: bool,
}

impl<'a> Asked<'a> {
    /// The facts of a request as hyper parsed it (HTTP/1 or HTTP/2): its body counts as
    /// absent only when its framing says so before a byte of it is read.
    pub fn of<B: Body>(req: &'a Request<B>) -> Self {
        let body = req.body();
        Self {
            method: req.method(),
            uri: req.uri(),
            headers: req.headers(),
            has_body: !(body.is_end_stream() || body.size_hint().exact() == Some(0)),
        }
    }
}

/// Whether `access` allows the request.
pub fn permits(access: Access, asked: &Asked<'_>) -> bool {
    match access {
        Access::Full => true,
        Access::Read => read_permits(asked),
    }
}

/// `read`: never a method override or a mention of git's push service; then `GET`, `HEAD`,
/// `OPTIONS` without a body, or git's fetch (`POST …/<repo>/git-upload-pack`, see
/// [`git::is_fetch`]).
fn read_permits(asked: &Asked<'_>) -> bool {
    let (path, query) = (asked.uri.path(), asked.uri.query());
    // `git push` starts with `GET …/info/refs?service=git-receive-pack`: refusing it there
    // makes git report the 403 before it packs anything.
    if method::has_override_header(asked.headers)
        || query.is_some_and(method::has_method_key)
        || git::names_receive_pack(path, query)
    {
        return false;
    }
    let m = asked.method;
    if *m == Method::GET || *m == Method::HEAD || *m == Method::OPTIONS {
        return !asked.has_body;
    }
    // Fetch and clone post their wants: the one body `read` forwards.
    *m == Method::POST && git::is_fetch(path, query, asked.headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(access: Access, method: &str, uri: &str, headers: &[(&str, &str)], body: bool) -> bool {
        let m = Method::from_bytes(method.as_bytes()).unwrap_or_else(|e| unreachable!("{e}"));
        let u: Uri = uri.parse().unwrap_or_else(|e| unreachable!("{e}"));
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            let name = http::HeaderName::from_bytes(k.as_bytes());
            let value = http::HeaderValue::from_str(v);
            h.append(
                name.unwrap_or_else(|e| unreachable!("{e}")),
                value.unwrap_or_else(|e| unreachable!("{e}")),
            );
        }
        let asked = Asked {
            method: &m,
            uri: &u,
            headers: &h,
            has_body: body,
        };
        permits(access, &asked)
    }

    const GIT: &[(&str, &str)] = &[("content-type", git::UPLOAD_PACK_REQUEST)];

    #[test]
    fn read_is_bodiless_downloads_and_git_fetch_only() {
        for m in ["GET", "HEAD", "OPTIONS"] {
            assert!(ok(Access::Read, m, "/simple/requests/", &[], false), "{m}");
            assert!(!ok(Access::Read, m, "/simple/requests/", &[], true), "{m}");
        }
        for m in ["POST", "PUT", "DELETE", "PATCH", "PROPFIND", "get"] {
            assert!(!ok(Access::Read, m, "/upload", GIT, true), "{m}");
        }
        let fetch = "/r.git/info/refs?service=git-upload-pack";
        assert!(ok(Access::Read, "GET", fetch, &[], false));
        assert!(ok(
            Access::Read,
            "POST",
            "/r.git/git-upload-pack",
            GIT,
            true
        ));
        assert!(!ok(
            Access::Read,
            "POST",
            "/r.git/git-upload-pack",
            &[],
            true
        ));
        assert!(!ok(Access::Read, "POST", "/git-upload-pack", GIT, true));
        let push = "/r.git/info/refs?service=git%2Dreceive-pack";
        assert!(!ok(Access::Read, "GET", push, &[], false));
        assert!(!ok(
            Access::Read,
            "POST",
            "/r.git/git-receive-pack",
            GIT,
            true
        ));
        let overridden = [("x-http-method-override", "PUT")];
        assert!(!ok(Access::Read, "GET", "/f", &overridden, false));
        assert!(!ok(Access::Read, "GET", "/f?_method=PUT", &[], false));
        let mut both = overridden.to_vec();
        both.extend_from_slice(GIT);
        assert!(!ok(
            Access::Read,
            "POST",
            "/r.git/git-upload-pack",
            &both,
            true
        ));
        for m in ["GET", "POST", "PUT", "DELETE"] {
            let anything = "/r.git/git-receive-pack?_method=PUT";
            assert!(ok(Access::Full, m, anything, &overridden, true), "{m}");
        }
    }
}
