//! The package registry rules: `egressgate_proxy::registry::judge` (request path → package,
//! and the path forwarded) for both ecosystems and every method, the wheel reader's central
//! directory walk, and the `Requires-Dist` reader.
//!
//! Invariants checked (a panic is a finding):
//! * No input panics any of them.
//! * A mapped package is canonical: `Package::parse` of its text gives it back.
//! * A file download (wheel, sdist, tarball) always names a version, and only reads map.
//! * The judgement is a function of the path: judging twice gives the same answer.
//! * A request is forwarded only as judged: a mapped request has a forwarded path, an
//!   unmappable one none; the forwarded path maps to the same judgement and re-encodes to
//!   itself (judged segments re-encode to a path that maps to the same judgement).
//! * No server can read another path out of the forwarded one: it holds no `?`, `#`, `;`,
//!   `\`, no `%` but the escapes of `+`, `!` and a scope's `/`; decoded once (as a naive
//!   file server does) it has no empty, `.` or `..` segment and names the same segments
//!   (a scope's `%2f` read as `/`, which npm serves as the same package).
//! * The dependency readers (of `METADATA` text, and of the input as a wheel) return at most
//!   50 canonical packages, and the central directory walk never reads out of bounds.
#![no_main]

use egressgate_proxy::registry::wheel::{self, central};
use egressgate_proxy::registry::{self, Artifact, Ecosystem, Mapping};
use egressgate_store::Package;
use libfuzzer_sys::fuzz_target;

/// The forwarded path as a server that decodes once reads it: its segments.
fn naive_segments(path: &str) -> Vec<String> {
    let decoded = path
        .replace("%2f", "/")
        .replace("%2B", "+")
        .replace("%21", "!");
    assert!(!decoded.contains('%'), "an escape left in {path:?}");
    let inner = decoded.trim_start_matches('/').trim_end_matches('/');
    if inner.is_empty() {
        return Vec::new();
    }
    inner.split('/').map(str::to_owned).collect()
}

fn check_forwarded(eco: Ecosystem, method: &http::Method, input: &str, m: &Mapping, path: &str) {
    for bad in ["?", "#", ";", "\\", "//"] {
        assert!(!path.contains(bad), "{bad:?} forwarded: {input:?} -> {path:?}");
    }
    let again = registry::judge(eco, method, path);
    assert_eq!(&again.mapping, m, "re-judged differently: {input:?} -> {path:?}");
    assert_eq!(again.path.as_deref(), Some(path), "not a fixed point: {input:?}");
    let segs = naive_segments(path);
    for s in &segs {
        assert!(
            !s.is_empty() && s != "." && s != "..",
            "a server resolves {path:?} (from {input:?})"
        );
    }
    // The scope's `/` is the only one decoding adds: the rest are the judged segments.
    let scoped = path.contains("%2f");
    assert!(!scoped || (eco == Ecosystem::Npm && path[1..].starts_with('@')));
    let inner = path.trim_matches('/');
    let judged_segments = if inner.is_empty() { 0 } else { inner.split('/').count() };
    assert_eq!(segs.len(), judged_segments + usize::from(scoped), "{path:?}");
}

fuzz_target!(|data: &[u8]| {
    let _ = central::find(data, |n| n.ends_with("/METADATA"));
    assert!(wheel::requires(data).len() <= 50);
    let Some((&selector, rest)) = data.split_first() else { return };
    let Ok(path) = std::str::from_utf8(rest) else { return };
    let method = match selector % 4 {
        0 => http::Method::GET,
        1 => http::Method::HEAD,
        2 => http::Method::POST,
        _ => http::Method::PUT,
    };
    for eco in [Ecosystem::Pypi, Ecosystem::Npm] {
        let j = registry::judge(eco, &method, path);
        assert_eq!(j, registry::judge(eco, &method, path), "not deterministic: {path:?}");
        assert_eq!(j.mapping, registry::map(eco, &method, path));
        match (&j.mapping, &j.path) {
            (Mapping::Unmappable, None) => {}
            (Mapping::Unmappable, Some(p)) => panic!("unmappable but forwarded: {path:?} -> {p:?}"),
            (_, None) => panic!("mapped but nothing to forward: {path:?}"),
            (m, Some(p)) => check_forwarded(eco, &method, path, m, p),
        }
        if let Mapping::Package { package, version, artifact } = &j.mapping {
            assert!(
                method == http::Method::GET || method == http::Method::HEAD,
                "{method} mapped: {path:?}"
            );
            assert_eq!(
                Package::parse(package.as_str()).as_ref(),
                Ok(package),
                "not canonical: {path:?} -> {package}"
            );
            if *artifact != Artifact::None {
                assert!(version.is_some(), "file without a version: {path:?}");
            }
        }
    }
    let deps = wheel::requires_dist(path);
    assert!(deps.len() <= 50);
    for d in &deps {
        assert_eq!(Package::parse(d.as_str()).as_ref(), Ok(d));
    }
});
