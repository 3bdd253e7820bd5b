//! `Host::parse` and `SitePattern::parse` on arbitrary UTF-8.
//!
//! Invariants checked (a panic is a finding):
//! * `Host::parse` is idempotent: `parse(h.as_str()) == h`, and `is_ip_literal` / `as_ip`
//!   agree across the re-parse.
//! * Canonical form: bracketed IPv6 (`[` + std's canonical Display + `]`), or ASCII with no
//!   upper case, no trailing dot, length <= 253, every label 1..=63 bytes, and none of the
//!   characters that would end or escape a URL authority (so the text can be embedded in a
//!   URL, a CONNECT line or a SQL key verbatim).
//! * Differential against the `url` crate (WHATWG host parser, what a client resolves): if a
//!   URL parser reads the host as an IP address, `Host` must call it an IP literal; if `Host`
//!   says "name", the URL parser must agree on exactly that name.
//! * `SitePattern::parse` never accepts an IP literal or an internal name (checked through the
//!   `Host` methods, with and without operator-configured suffixes), round-trips through
//!   `from_db(to_key())`, is idempotent on its key, and matches what its key says.
#![no_main]

use egressgate_store::{Host, SitePattern};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    check_host(s);
    check_pattern(s);
    // Also exercise the wildcard path and from_db on the raw input.
    check_pattern(&format!("*.{s}"));
    if let Some(p) = SitePattern::from_db(s) {
        assert_eq!(p.to_key(), s, "from_db accepted a non-canonical key");
    }
});

fn check_host(s: &str) {
    let h = match Host::parse(s) {
        Ok(h) => h,
        // Refusing is always safe; nothing to check.
        Err(_) => return,
    };
    let t = h.as_str();
    let again = Host::parse(t).unwrap_or_else(|e| panic!("{s:?} -> {t:?} fails re-parse: {e}"));
    assert_eq!(
        again,
        h,
        "not idempotent: {s:?} -> {t:?} -> {:?}",
        again.as_str()
    );
    assert_eq!(again.is_ip_literal(), h.is_ip_literal());
    assert_eq!(again.as_ip(), h.as_ip());
    assert_eq!(h.to_string(), t);
    if h.as_ip().is_some() {
        assert!(
            h.is_ip_literal(),
            "{t:?} has an address but is not an IP literal"
        );
    }

    if let Some(inner) = t.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .unwrap_or_else(|| panic!("unclosed bracket {t:?}"));
        let ip: std::net::Ipv6Addr = inner.parse().unwrap_or_else(|_| panic!("bad IPv6 {t:?}"));
        assert_eq!(ip.to_string(), inner, "IPv6 not in canonical form");
        assert!(h.is_ip_literal());
    } else {
        assert!(t.is_ascii(), "non-ASCII canonical host {t:?}");
        assert!(
            !t.bytes().any(|b| b.is_ascii_uppercase()),
            "upper case in {t:?}"
        );
        assert!(!t.ends_with('.'), "trailing dot in {t:?}");
        assert!(
            !t.is_empty() && t.len() <= 253,
            "bad length {} for {t:?}",
            t.len()
        );
        for label in t.split('.') {
            assert!((1..=63).contains(&label.len()), "label {label:?} in {t:?}");
        }
        for b in t.bytes() {
            assert!(
                b > b' ' && b != 0x7f && !b"/\\?#@:[]%<>^|".contains(&b),
                "authority-breaking byte {:?} in {t:?}",
                b as char
            );
        }
        // The canonical text in a URL must be read back as itself, and as an address iff we
        // call it an IP literal.
        match url::Url::parse(&format!("http://{t}/")).map(|u| u.host().map(|h| h.to_owned())) {
            Ok(Some(url::Host::Domain(d))) => {
                assert_eq!(d, t, "url crate rewrites canonical host");
                assert!(
                    !looks_numeric_to_url(t),
                    "url crate took ends-in-a-number {t:?} as a name"
                );
            }
            Ok(Some(url::Host::Ipv4(a))) => {
                assert!(
                    h.is_ip_literal(),
                    "{t:?} is {a} to a URL parser but not an IP literal"
                );
            }
            Ok(other) => panic!("canonical {t:?} parsed by url as {other:?}"),
            Err(e) => {
                // WHATWG fails hosts that "end in a number" but are not valid IPv4
                // (`example.0x10`, `1.2.3.4.5`): those must be refused as IP literals too.
                assert!(
                    h.is_ip_literal(),
                    "{t:?}: url crate rejects it ({e}) yet it is a name"
                );
            }
        }
        differential_accept(s, &h);
    }
}

/// True if WHATWG's "ends in a number" rule would apply (only used for a sanity assert).
fn looks_numeric_to_url(t: &str) -> bool {
    let last = t.rsplit('.').next().unwrap_or(t);
    (!last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()))
        || last
            .strip_prefix("0x")
            .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Inputs the url crate would take as a whole authority host (no delimiters, no characters it
/// strips or trims), so `http://{s}/` has exactly `s` as its host.
fn embeddable(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('[')
        && !s
            .chars()
            .any(|c| c <= ' ' || c == '\u{7f}' || matches!(c, '/' | '\\' | '?' | '#' | '@' | ':'))
}

fn url_host(s: &str) -> Option<url::Host<String>> {
    if !embeddable(s) {
        return None;
    }
    url::Url::parse(&format!("http://{s}/"))
        .ok()?
        .host()
        .map(|h| h.to_owned())
}

/// `Host::parse` accepted a non-bracketed name: a URL parser must not see an address we call
/// a name, and must agree on the name.
fn differential_accept(s: &str, h: &Host) {
    match url_host(s) {
        Some(url::Host::Domain(d)) => {
            let d = d.strip_suffix('.').unwrap_or(&d);
            assert_eq!(d, h.as_str(), "url crate and Host disagree on {s:?}");
        }
        Some(url::Host::Ipv4(a)) => {
            assert!(
                h.is_ip_literal(),
                "{s:?} is {a} to a URL parser, Host says name {h}"
            );
        }
        Some(url::Host::Ipv6(_)) => unreachable!("no brackets in an embeddable input"),
        None => {
            if embeddable(s) {
                assert!(
                    h.is_ip_literal(),
                    "url crate rejects {s:?}, Host accepts name {h}"
                );
            }
        }
    }
}

fn skip_known() -> bool {
    static SKIP: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SKIP.get_or_init(|| std::env::var_os("EGRESSGATE_FUZZ_SKIP_KNOWN").is_some_and(|v| v == "1"))
}

fn check_pattern(s: &str) {
    let extra = [Host::parse("example-corp.net").unwrap_or_else(|e| panic!("{e}"))];
    for extra in [&[][..], &extra[..]] {
        let Ok(p) = SitePattern::parse(s, extra) else {
            continue;
        };
        let h = match &p {
            SitePattern::Exact(h) | SitePattern::Subdomains(h) => h,
        };
        // KNOWN-1 (see README / findings/): `＊` (U+FF0A) is IDNA-mapped to `*` after the
        // wildcard check, so `＊.com` is accepted as Exact("*.com"), stored as the key "*.com"
        // and read back as a wildcard over all of .com. Fixed in d79aa29; asserted by default
        // as a regression check. EGRESSGATE_FUZZ_SKIP_KNOWN=1 skips it (used before the fix).
        if h.as_str().contains('*') && skip_known() {
            continue;
        }
        assert!(!h.is_ip_literal(), "pattern {s:?} accepted IP literal {h}");
        assert!(
            !h.is_internal(extra),
            "pattern {s:?} accepted internal name {h}"
        );
        assert!(
            !h.has_internal_suffix(extra),
            "pattern {s:?} accepted internal suffix {h}"
        );
        assert_eq!(
            Host::parse(h.as_str()).as_ref(),
            Ok(h),
            "pattern host not canonical"
        );
        let key = p.to_key();
        assert_eq!(p.to_string(), key);
        assert_eq!(
            SitePattern::from_db(&key),
            Some(p.clone()),
            "from_db(to_key) for {s:?}"
        );
        assert_eq!(
            SitePattern::parse(&key, extra),
            Ok(p.clone()),
            "pattern not idempotent"
        );
        match &p {
            SitePattern::Exact(h) => {
                assert!(p.matches(h));
                assert!(SitePattern::candidate_keys(h).contains(&key));
            }
            SitePattern::Subdomains(h) => {
                assert!(!p.matches(h), "wildcard matches its apex");
                if let Ok(sub) = Host::parse(&format!("a.{h}")) {
                    assert!(p.matches(&sub));
                    assert!(SitePattern::candidate_keys(&sub).contains(&key));
                }
            }
        }
    }
}
