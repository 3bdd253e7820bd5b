//! Path-prefix grants: the one normal form a request path is compared in, and the prefixes a
//! person may grant. Both planes use it (the card's decision is checked with it, the proxy
//! matches requests with it), so what a person granted and what the proxy admits never
//! disagree. A path that some server could read as another one (an escaped separator, a
//! `;param`, an escape of an escape, a `..` above the root) has no normal form and is refused.

use percent_encoding::percent_decode;

/// Most bytes of one prefix (a URL path a person reads on a card).
pub const MAX_PREFIX_LEN: usize = 512;

/// Most prefixes in one grant.
pub const MAX_PREFIXES: usize = 16;

/// `raw` (a request target's path, as sent) in its normal form: percent escapes decoded once
/// (so `%2e`, `%2E` and `.` are the same byte), empty and `.` segments dropped, `..` taking
/// the segment before it away, a trailing `/` kept. `None` when some server could read it as
/// another path: it does not start with `/`; it holds `\`, `;`, a control byte or, once
/// decoded, `%`, `?`, `#` or an escaped `/`; it is not UTF-8; or a `..` climbs above the root.
pub fn normalise_path(raw: &str) -> Option<String> {
    if !raw.starts_with('/') || raw.bytes().any(|b| b == b'\\' || b == b';' || b < 0x20) {
        return None;
    }
    let decoded = percent_decode(raw.as_bytes()).decode_utf8().ok()?;
    let slashes = |s: &str| s.bytes().filter(|b| *b == b'/').count();
    if slashes(&decoded) != slashes(raw)
        || decoded
            .bytes()
            .any(|b| b < 0x20 || b == 0x7f || b"%?#\\;".contains(&b))
    {
        return None;
    }
    let mut segments: Vec<&str> = Vec::new();
    for seg in decoded.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segments.pop()?;
            }
            s => segments.push(s),
        }
    }
    let mut out = String::with_capacity(decoded.len());
    for s in &segments {
        out.push('/');
        out.push_str(s);
    }
    let last = decoded.rsplit('/').next().unwrap_or("");
    if out.is_empty() || decoded.ends_with('/') || last == "." || last == ".." {
        out.push('/');
    }
    Some(out)
}

/// One granted prefix, in normal form.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct PathPrefix(String);

/// Why a prefix cannot be granted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    /// It does not start with `/`.
    #[error("a path prefix starts with \"/\"")]
    NotAbsolute,
    /// Longer than [`MAX_PREFIX_LEN`].
    #[error("a path prefix is at most {MAX_PREFIX_LEN} bytes")]
    TooLong,
    /// It is not its own normal form (escapes, `//`, `.` or `..` segments, `;`).
    #[error(
        "a path prefix is written in its normal form (no escapes, `//`, `.` or `..` segments, `;`)"
    )]
    NotNormal,
}

impl PathPrefix {
    /// Accepts `text` only when it is already in normal form: a prefix the proxy could read
    /// otherwise than the person did is refused rather than rewritten.
    pub fn parse(text: &str) -> Result<Self, PrefixError> {
        if !text.starts_with('/') {
            return Err(PrefixError::NotAbsolute);
        }
        if text.len() > MAX_PREFIX_LEN {
            return Err(PrefixError::TooLong);
        }
        if text.contains('%') || normalise_path(text).as_deref() != Some(text) {
            return Err(PrefixError::NotNormal);
        }
        Ok(Self(text.to_owned()))
    }

    /// The prefix as granted.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the normal-form `path` lies under this prefix: `/org/` admits `/org/` and
    /// everything below it; `/org` admits `/org` itself and everything below `/org/`, never
    /// `/organisation`.
    pub fn admits(&self, path: &str) -> bool {
        let p = self.0.as_str();
        if p.ends_with('/') {
            path.starts_with(p)
        } else {
            path == p
                || path
                    .strip_prefix(p)
                    .is_some_and(|rest| rest.starts_with('/'))
        }
    }
}

/// Whether a request whose path is `raw` (as sent) lies under one of `prefixes`; a path with
/// no normal form lies under none.
pub fn admits_any(prefixes: &[PathPrefix], raw: &str) -> bool {
    normalise_path(raw).is_some_and(|p| prefixes.iter().any(|x| x.admits(&p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix(s: &str) -> PathPrefix {
        PathPrefix::parse(s).unwrap_or_else(|e| unreachable!("{s}: {e}"))
    }

    #[test]
    fn normal_form() {
        for (raw, normal) in [
            ("/", "/"),
            ("/org/repo/file", "/org/repo/file"),
            ("/org//repo/", "/org/repo/"),
            ("/org/./repo", "/org/repo"),
            ("/org/x/../repo", "/org/repo"),
            ("/org/x/..", "/org/"),
            ("/%6Frg/a", "/org/a"),
            ("/caf%C3%A9/", "/café/"),
        ] {
            assert_eq!(normalise_path(raw).as_deref(), Some(normal), "{raw}");
        }
        for odd in [
            "",
            "org",
            "/..",
            "/org/../../x",
            "/org%2Fx",
            "/org%2fx",
            "/org%5Cx",
            "/org\\x",
            "/org;x/",
            "/org%3Bx",
            "/org%25",
            "/org%252F",
            "/org%3F",
            "/org%23",
            "/org%00",
            "/%FF",
        ] {
            assert_eq!(normalise_path(odd), None, "{odd}");
        }
    }

    #[test]
    fn prefixes_are_granted_in_normal_form_only() {
        for ok in ["/", "/org/", "/org", "/org/repo/raw/main/", "/café/"] {
            assert_eq!(prefix(ok).as_str(), ok);
        }
        assert_eq!(PathPrefix::parse("org/"), Err(PrefixError::NotAbsolute));
        for bad in [
            "/org//",
            "/./org/",
            "/org/../x/",
            "/org/%41/",
            "/org;x/",
            "/org/.",
        ] {
            assert_eq!(PathPrefix::parse(bad), Err(PrefixError::NotNormal), "{bad}");
        }
        let long = format!("/{}", "a".repeat(MAX_PREFIX_LEN));
        assert_eq!(PathPrefix::parse(&long), Err(PrefixError::TooLong));
    }

    #[test]
    fn no_spelling_escapes_a_prefix() {
        let org = [prefix("/org/")];
        for inside in [
            "/org/",
            "/org/a",
            "/org//a",
            "/org/./a",
            "/%6frg/a",
            "/org/a/../b",
        ] {
            assert!(admits_any(&org, inside), "{inside}");
        }
        for escape in [
            "/org",
            "/other/",
            "/organisation/",
            "/org/../other/",
            "/org/%2e%2e/other/",
            "/org/%2E%2E/other/",
            "/org/.%2e/other/",
            "/org%2F..%2Fother/",
            "/org/..%2Fother/",
            "/org/%252e%252e/other/",
            "/org/..;/other/",
            "/org;/../other/",
            "/org/..\\other/",
            "/org/%5C../other/",
            "//org/../other/",
            "/./org/../other/",
            "/org/x/../../other/",
            "/ORG/",
            "/Org/a",
        ] {
            assert!(!admits_any(&org, escape), "{escape}");
        }
        let bare = [prefix("/org")];
        assert!(admits_any(&bare, "/org"));
        assert!(admits_any(&bare, "/org/x"));
        assert!(!admits_any(&bare, "/organisation"));
    }
}
