//! git's smart HTTP protocol under a `read` grant: fetch and clone post their wants to
//! `…/<repo>/git-upload-pack`, the one upload `read` lets through, in exactly the shape git
//! sends it; push (`git-receive-pack`, discovered by `GET …/info/refs?service=…`) never, in
//! any spelling.

use http::HeaderMap;
use http::header::CONTENT_TYPE;

use super::path::{comparison_form, plain_segments};

/// The content type git gives the body of a fetch's `POST …/git-upload-pack`.
pub const UPLOAD_PACK_REQUEST: &str = "application/x-git-upload-pack-request";

/// Whether the path or the query names git's push service: `receive-pack` anywhere in their
/// comparison forms (so `git%2Dreceive-pack`, `%252D`, `GIT-RECEIVE-PACK`, an encoded `=` or
/// `&` around it all count), or either has no comparison form.
pub fn names_receive_pack(path: &str, query: Option<&str>) -> bool {
    let mentions = |text: &str, plus_is_space: bool| {
        comparison_form(text, plus_is_space).is_none_or(|form| form.contains("receive-pack"))
    };
    mentions(path, false) || query.is_some_and(|q| mentions(q, true))
}

/// Whether a `POST` is git's fetch: a plain path (see [`plain_segments`]) of at least two
/// segments whose last is exactly `git-upload-pack`, no query, and exactly one `Content-Type`,
/// [`UPLOAD_PACK_REQUEST`] (any case, nothing after it).
pub fn is_fetch(path: &str, query: Option<&str>, headers: &HeaderMap) -> bool {
    let shaped = plain_segments(path)
        .is_some_and(|segs| segs.len() >= 2 && segs.last() == Some(&"git-upload-pack"));
    let mut types = headers.get_all(CONTENT_TYPE).iter();
    let typed = match (types.next(), types.next()) {
        (Some(one), None) => one
            .to_str()
            .is_ok_and(|v| v.trim().eq_ignore_ascii_case(UPLOAD_PACK_REQUEST)),
        _ => false,
    };
    shaped && query.is_none() && typed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(values: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(CONTENT_TYPE, http::HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn push_in_any_spelling() {
        for (path, query) in [
            ("/r.git/info/refs", Some("service=git-receive-pack")),
            ("/r.git/info/refs", Some("service=git%2Dreceive-pack")),
            ("/r.git/info/refs", Some("service=git%252dreceive-pack")),
            ("/r.git/info/refs", Some("service%3DGIT-RECEIVE-PACK")),
            ("/r.git/info/refs", Some("x=1%26service=git-receive-pack")),
            (
                "/r.git/info/refs",
                Some("service=git-upload-pack&service=git-receive-pack"),
            ),
            ("/r.git/info/refs", Some("%2525252525")),
            ("/r.git/git-receive-pack", None),
            ("/r.git/git%2Dreceive%2Dpack", None),
            ("/r.git/git-upload-pack/../git-receive-pack", None),
        ] {
            assert!(names_receive_pack(path, query), "{path}?{query:?}");
        }
        assert!(!names_receive_pack(
            "/r.git/info/refs",
            Some("service=git-upload-pack")
        ));
    }

    #[test]
    fn fetch_is_exactly_gits_request() {
        let git = typed(&[UPLOAD_PACK_REQUEST]);
        assert!(is_fetch("/r.git/git-upload-pack", None, &git));
        assert!(is_fetch("/org/r/git-upload-pack", None, &git));
        let upper = typed(&["Application/X-Git-Upload-Pack-Request"]);
        assert!(is_fetch("/r.git/git-upload-pack", None, &upper));
        for path in [
            "/git-upload-pack",
            "/r.git/git-upload-pack/",
            "/r.git//git-upload-pack",
            "/r.git/./git-upload-pack",
            "/x/../git-upload-pack",
            "/r.git/git-upload-pack;x",
            "/r.git/GIT-UPLOAD-PACK",
            "/r.git/git%2Dupload-pack",
            "/r.git%2Fgit-upload-pack",
            "/upload",
        ] {
            assert!(!is_fetch(path, None, &git), "{path}");
        }
        assert!(!is_fetch("/r.git/git-upload-pack", Some(""), &git));
        assert!(!is_fetch("/r.git/git-upload-pack", Some("x=1"), &git));
        for t in [
            &[][..],
            &["application/x-git-receive-pack-request"][..],
            &["application/x-git-upload-pack-request; charset=utf-8"][..],
            &["application/x-www-form-urlencoded"][..],
            &[UPLOAD_PACK_REQUEST, UPLOAD_PACK_REQUEST][..],
        ] {
            assert!(
                !is_fetch("/r.git/git-upload-pack", None, &typed(t)),
                "{t:?}"
            );
        }
    }
}
