//! `SanitizedUrl::parse`, `SanitizedUrl::from_parts` and `Package::parse` on arbitrary UTF-8.
//!
//! Invariants checked (a panic is a finding):
//! * The display text starts with `http://` or `https://`, contains no `?` or `#` anywhere,
//!   and its authority (up to the first `/`) is exactly `host` or `host:port` — so no `@`,
//!   no userinfo.
//! * `host` is canonical (re-parses to itself); reading the text back with a URL parser gives
//!   the same host and port; `SanitizedUrl::parse(text)` is the same value (idempotent).
//! * `from_parts` with an arbitrary path never lets a query, fragment or userinfo through.
//! * `Package::parse` is idempotent on its own output and the output is in canonical shape.
#![no_main]

use egressgate_store::{Host, Package, SanitizedUrl};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    check_url(s);
    check_from_parts(s);
    check_package(s);
});

fn check_text(u: &SanitizedUrl, what: &str) {
    let t = &u.text;
    let rest = t
        .strip_prefix("http://")
        .or_else(|| t.strip_prefix("https://"))
        .unwrap_or_else(|| panic!("{what}: text {t:?} is not http(s)"));
    assert!(
        !t.contains(['?', '#']),
        "{what}: query/fragment survives in {t:?}"
    );
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    assert!(path.starts_with('/'), "{what}: no path in {t:?}");
    assert!(!authority.contains('@'), "{what}: userinfo in {t:?}");
    let host = u.host.as_str();
    let explicit = format!("{host}:{}", u.port);
    assert!(
        authority == host || authority == explicit,
        "{what}: authority {authority:?} is not {host:?} or {explicit:?}"
    );
    assert_eq!(
        Host::parse(host).as_ref(),
        Ok(&u.host),
        "{what}: host not canonical"
    );
}

fn check_url(s: &str) {
    let Ok(u) = SanitizedUrl::parse(s) else {
        return;
    };
    check_text(&u, s);
    let t = &u.text;
    let url = url::Url::parse(t).unwrap_or_else(|e| panic!("{s:?}: text {t:?} unparseable: {e}"));
    assert!(
        url.username().is_empty() && url.password().is_none(),
        "{t:?} has credentials"
    );
    assert!(
        url.query().is_none() && url.fragment().is_none(),
        "{t:?} has query/fragment"
    );
    let h = url
        .host_str()
        .unwrap_or_else(|| panic!("{t:?} has no host"));
    assert_eq!(
        Host::parse(h).as_ref(),
        Ok(&u.host),
        "{s:?}: text host {h:?} re-parses differently"
    );
    assert_eq!(
        url.port_or_known_default(),
        Some(u.port),
        "{s:?}: port changed in {t:?}"
    );
    let again = SanitizedUrl::parse(t).unwrap_or_else(|e| panic!("{s:?}: text {t:?} refused: {e}"));
    assert_eq!(again, u, "{s:?}: not idempotent");
}

fn check_from_parts(s: &str) {
    // First line picks a host, the rest is treated as a proxy-parsed path (may hold anything).
    let (host, path) = s.split_once('\n').unwrap_or(("example.com", s));
    let Ok(host) = Host::parse(host) else { return };
    let port = (path.len() as u16).wrapping_mul(257);
    for scheme in ["http", "https"] {
        for port in [port, 80, 443] {
            let u = SanitizedUrl::from_parts(scheme, &host, port, path);
            check_text(
                &u,
                &format!("from_parts({scheme:?}, {host}, {port}, {path:?})"),
            );
        }
    }
}

fn check_package(s: &str) {
    let Ok(p) = Package::parse(s) else { return };
    let k = p.as_str();
    assert_eq!(
        Package::parse(k).as_ref(),
        Ok(&p),
        "package {s:?} -> {k:?} not idempotent"
    );
    assert_eq!(p.to_string(), k);
    if let Some(name) = k.strip_prefix("npm:") {
        assert!(!name.is_empty() && name.len() <= 214, "npm length {k:?}");
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-._~@/".contains(&b)),
            "npm chars {k:?}"
        );
    } else {
        assert!(!k.is_empty() && k.len() <= 200, "pypi length {k:?}");
        assert!(
            k.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "pypi chars {k:?}"
        );
        assert!(
            !k.starts_with('-') && !k.ends_with('-') && !k.contains("--"),
            "pypi shape {k:?}"
        );
    }
}
