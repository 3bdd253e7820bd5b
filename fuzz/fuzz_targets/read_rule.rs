//! The `read` access rule and its path/query normaliser: `egressgate_proxy::access::{permits,
//! path::comparison_form, path::plain_segments}`.
//!
//! Input: a selector byte (method, whether a body follows, the headers sent), then the request
//! target (`path?query`) as UTF-8.
//!
//! Invariants checked (a panic is a finding):
//! * `full` permits everything; `read` permits only bodiless `GET`/`HEAD`/`OPTIONS` and a
//!   `POST` whose last path segment is exactly `git-upload-pack`, no query, git's content type.
//! * The comparison form is a fixed point: taking it again changes nothing.
//! * Differential against plain one-pass decoders applied 0..=3 times (what servers that
//!   decode once, twice or thrice read): if any of them reads `receive-pack` in the path or
//!   query, or a `_method` key in the query, `read` refuses.
//! * A fetch `read` lets through is a fetch to every such server: after 1..=3 decodes, with
//!   `\` read as `/`, `;params` dropped and dot segments resolved, the last segment is still
//!   `git-upload-pack` and at least one segment precedes it.
//! * `plain_segments` gives back the path it was given when joined.
#![no_main]

use egressgate_proxy::access::{self, Asked, path};
use egressgate_store::Access;
use http::{HeaderMap, HeaderValue, Method, Uri};
use libfuzzer_sys::fuzz_target;
use percent_encoding::percent_decode;

/// `s` decoded `passes` times by a plain one-pass decoder (with `+` as space for queries).
fn decoded(s: &str, passes: usize, plus: bool) -> String {
    let mut bytes = s.as_bytes().to_vec();
    for _ in 0..passes {
        if plus {
            bytes.iter_mut().filter(|b| **b == b'+').for_each(|b| *b = b' ');
        }
        bytes = percent_decode(&bytes).collect();
    }
    String::from_utf8_lossy(&bytes).to_ascii_lowercase()
}

/// The segments a server that resolves dot segments and drops `;params` reads.
fn resolved(p: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for seg in p.split(['/', '\\']) {
        let seg = seg.split(';').next().unwrap_or("");
        match seg {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s.to_owned()),
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let Ok(target) = std::str::from_utf8(rest) else { return };
    let Ok(uri) = target.parse::<Uri>() else { return };
    if uri.scheme().is_some() || uri.authority().is_some() {
        return;
    }
    let method = [Method::GET, Method::HEAD, Method::OPTIONS, Method::POST, Method::PUT]
        [usize::from(sel % 5)]
    .clone();
    let has_body = sel & 0x08 != 0;
    let mut headers = HeaderMap::new();
    if sel & 0x10 != 0 {
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-git-upload-pack-request"),
        );
    }
    if sel & 0x20 != 0 {
        headers.insert("x_http_method_override", HeaderValue::from_static("GET"));
    }
    let asked = Asked { method: &method, uri: &uri, headers: &headers, has_body };
    assert!(access::permits(Access::Full, &asked));
    let read = access::permits(Access::Read, &asked);
    let (p, q) = (uri.path(), uri.query());

    for text in [p, q.unwrap_or("")] {
        for plus in [false, true] {
            if let Some(form) = path::comparison_form(text, plus) {
                assert_eq!(
                    path::comparison_form(&form, plus).as_deref(),
                    Some(form.as_str()),
                    "not a fixed point: {text:?}"
                );
            }
        }
    }
    if let Some(segs) = path::plain_segments(p) {
        assert_eq!(format!("/{}", segs.join("/")), p);
    }
    if !read {
        return;
    }
    assert!(sel & 0x20 == 0, "an override header passed: {target:?}");
    for passes in 0..=3 {
        let (dp, dq) = (decoded(p, passes, false), decoded(q.unwrap_or(""), passes, true));
        assert!(!dp.contains("receive-pack"), "push in the path after {passes}: {target:?}");
        assert!(!dq.contains("receive-pack"), "push in the query after {passes}: {target:?}");
        let keyed = dq.split(['&', ';']).any(|kv| {
            let k = kv.split('=').next().unwrap_or("").trim_start();
            k.starts_with("_method") || k.starts_with(".method")
        });
        assert!(!keyed, "a _method key after {passes}: {target:?}");
    }
    if method == Method::POST {
        assert!(q.is_none() && sel & 0x10 != 0, "{target:?}");
        assert!(p.ends_with("/git-upload-pack"), "{target:?}");
        for passes in 1..=3 {
            let segs = resolved(&decoded(p, passes, false));
            assert!(
                segs.len() >= 2 && segs.last().map(String::as_str) == Some("git-upload-pack"),
                "a server decoding {passes} times reads {segs:?}: {target:?}"
            );
        }
    } else {
        assert!(!has_body, "a body on {method}: {target:?}");
        assert!(
            [Method::GET, Method::HEAD, Method::OPTIONS].contains(&method),
            "{method}: {target:?}"
        );
    }
});
