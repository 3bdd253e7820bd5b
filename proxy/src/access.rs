//! The per-request grant check, the one place the forwarding path asks whether a request is
//! within what its grant opens: its path prefixes (compared in the store's one normal form,
//! `egressgate_store::path_prefix`), then its access level. `read` means downloads: `GET`, `HEAD` and `OPTIONS` without a body,
//! and git's fetch and clone; nothing that can upload. Its parts, each in its room: the
//! comparison forms of paths and queries (`path`), what makes a server act on another method
//! (`method`), and git's smart HTTP (`git`).

pub mod git;
pub mod method;
pub mod path;

use egressgate_store::{Access, Grant, RefusalReason, path_prefix};
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

impl Asked<'_> {
    /// Whether the request sends data: a body, or a method made for sending one. A refusal
    /// of it is flagged as an upload on the card.
    pub fn uploads(&self) -> bool {
        self.has_body || method_uploads(self.method.as_str())
    }
}

/// Whether a method is made for sending data (`POST`, `PUT`, `PATCH`): what marks an upload
/// where the proxy knows only the method.
pub fn method_uploads(method: &str) -> bool {
    ["POST", "PUT", "PATCH"]
        .iter()
        .any(|m| m.eq_ignore_ascii_case(method))
}

/// Why `grant` does not cover the request, if it does not: its path lies under none of the
/// grant's path prefixes (`path_not_allowed`), or its access level does not cover it
/// (`method_not_allowed`).
pub fn refuses(grant: &Grant, asked: &Asked<'_>) -> Option<RefusalReason> {
    if let Some(prefixes) = &grant.paths
        && !path_prefix::admits_any(prefixes, asked.uri.path())
    {
        return Some(RefusalReason::PathNotAllowed);
    }
    (!permits(grant.access, asked)).then_some(RefusalReason::MethodNotAllowed)
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

    /// Every target of up to four pieces after a `/`, judged against servers that decode
    /// once, twice or three times (an exhaustive little cousin of the `read_rule` fuzz target):
    /// none of them reads git's push in what `read` passes, and a fetch `read` passes ends, to
    /// each of them, in `…/<repo>/git-upload-pack` once `\`, `;params` and dot segments are
    /// read as such a server reads them.
    #[test]
    fn no_spelling_of_push_or_of_another_fetch_path_passes() {
        const PIECES: [&str; 17] = [
            "/",
            "r.git",
            "git-upload-pack",
            "git-receive-pack",
            "receive",
            "-pack",
            "pack",
            "%2D",
            "%2d",
            "%25",
            "2D",
            "%2F",
            "%5C",
            "..",
            ";",
            "%2E",
            "info/refs?service=",
        ];
        let read_as = |text: &str, passes: usize| -> String {
            let once = |b: Vec<u8>| percent_encoding::percent_decode(&b).collect::<Vec<u8>>();
            let bytes = (0..passes).fold(text.as_bytes().to_vec(), |b, _| once(b));
            String::from_utf8_lossy(&bytes).to_ascii_lowercase()
        };
        let mut targets = vec![String::new()];
        let mut grown = targets.clone();
        for _ in 0..4 {
            grown = grown
                .iter()
                .flat_map(|t| PIECES.iter().map(move |p| format!("{t}{p}")))
                .collect();
            targets.extend(grown.iter().cloned());
        }
        let mut fetches = 0;
        for t in targets {
            let target = format!("/{t}");
            let Ok(uri) = target.parse::<Uri>() else {
                continue;
            };
            let (path, query) = (uri.path(), uri.query().unwrap_or(""));
            if ok(Access::Read, "GET", &target, &[], false) {
                for passes in 0..=3 {
                    let (p, q) = (read_as(path, passes), read_as(query, passes));
                    assert!(!p.contains("receive-pack"), "{target} after {passes}");
                    assert!(!q.contains("receive-pack"), "{target} after {passes}");
                }
            }
            if ok(Access::Read, "POST", &target, GIT, true) {
                fetches += 1;
                for passes in 1..=3 {
                    let mut segs: Vec<String> = Vec::new();
                    for seg in read_as(path, passes).split(['/', '\\']) {
                        match seg.split(';').next().unwrap_or("") {
                            "" | "." => {}
                            ".." => drop(segs.pop()),
                            s => segs.push(s.to_owned()),
                        }
                    }
                    let last = segs.last().map(String::as_str);
                    assert_eq!(last, Some("git-upload-pack"), "{target} after {passes}");
                    assert!(segs.len() >= 2, "{target} after {passes}: {segs:?}");
                }
            }
        }
        assert!(fetches > 0, "the pieces spell at least one fetch");
    }

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
