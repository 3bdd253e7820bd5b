//! The host normaliser: one definition of "what host is this" shared by the proxy, the approval
//! tool and every stored pattern, so the gate and the card can never disagree.

use std::borrow::Cow;
use std::net::{IpAddr, Ipv6Addr};

use idna::uts46::{AsciiDenyList, DnsLength, Hyphens, Uts46};

/// Longest DNS name (without the root dot), RFC 1035.
const MAX_NAME_LEN: usize = 253;
/// Longest DNS label, RFC 1035.
const MAX_LABEL_LEN: usize = 63;

/// Why a string is not a host at all (as opposed to a host we refuse).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Nothing left after trimming.
    #[error("empty host name")]
    Empty,
    /// Percent-escapes that do not decode to UTF-8.
    #[error("host name has invalid percent-encoding")]
    BadEscape,
    /// IDNA (UTS #46) rejected the name: forbidden characters or bad punycode.
    #[error("host name is not a valid internationalised domain name")]
    Idna,
    /// A label outside 1..=63 bytes or a name over 253 bytes.
    #[error("host name has an empty label or exceeds DNS length limits")]
    Length,
    /// Brackets that do not hold an IPv6 address.
    #[error("bracketed host is not an IPv6 address")]
    BadIpv6,
}

/// A host name in canonical form: ASCII (A-labels), lower-case, no trailing dot, DNS lengths
/// checked. IPv6 literals are kept bracketed. Only [`Host::parse`] makes one, so holding a
/// `Host` proves the normaliser ran.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct Host(Box<str>);

/// Suffixes that only make sense inside a network: a name under them is never a public site.
const INTERNAL_SUFFIXES: &[&str] = &[
    "localhost",
    "local",
    "internal",
    "lan",
    "home.arpa",
    "localdomain",
    "corp",
    "svc",
    "cluster.local",
    "in-addr.arpa",
    "ip6.arpa",
    "intranet",
    "private",
];

impl Host {
    /// Normalises a host as it appears in a URL authority, a CONNECT target, a TLS SNI or a
    /// pattern: percent-decoding, IDNA mapping (which also lower-cases and maps full-width
    /// dots), one trailing dot stripped, then DNS length rules.
    pub fn parse(input: &str) -> Result<Self, HostError> {
        if input.is_empty() {
            return Err(HostError::Empty);
        }
        if let Some(inner) = input.strip_prefix('[') {
            let inner = inner.strip_suffix(']').ok_or(HostError::BadIpv6)?;
            // Zone ids (`%25eth0`) are link-local by definition: refuse to understand them.
            let ip: Ipv6Addr = inner.parse().map_err(|_| HostError::BadIpv6)?;
            return Ok(Self(format!("[{ip}]").into_boxed_str()));
        }
        if input.contains(':') {
            // A bare IPv6 address (e.g. from an SNI or a sloppy client): canonical bracketed form.
            let ip: Ipv6Addr = input.parse().map_err(|_| HostError::BadIpv6)?;
            return Ok(Self(format!("[{ip}]").into_boxed_str()));
        }
        let decoded = percent_decode(input)?;
        let ascii = Uts46::new()
            .to_ascii(
                decoded.as_bytes(),
                AsciiDenyList::URL,
                Hyphens::Allow,
                DnsLength::Ignore,
            )
            .map_err(|_| HostError::Idna)?;
        let name = ascii.strip_suffix('.').unwrap_or(&ascii);
        if name.is_empty() {
            return Err(HostError::Empty);
        }
        // After mapping only letters, digits, '-', '_' and dots may remain: anything else
        // (e.g. a full-width asterisk mapped to '*') would let a name read back as a pattern.
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return Err(HostError::Idna);
        }
        if name.len() > MAX_NAME_LEN
            || name
                .split('.')
                .any(|l| l.is_empty() || l.len() > MAX_LABEL_LEN)
        {
            return Err(HostError::Length);
        }
        Ok(Self(name.into()))
    }

    /// The canonical text, used as the database key.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True for any spelling a URL parser or resolver would turn into an address: IPv6 in
    /// brackets, dotted quads, and the WHATWG "ends in a number" forms (`2130706433`,
    /// `0x7f.1`, `0177.0.0.1`, `127.1`). Such names are refused before DNS, so no allow rule
    /// can ever be written for an address.
    pub fn is_ip_literal(&self) -> bool {
        if self.0.starts_with('[') {
            return true;
        }
        let last = self.0.rsplit('.').next().unwrap_or(&self.0);
        let numeric = !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit());
        let hex = last
            .strip_prefix("0x")
            .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
        numeric || hex || self.0.parse::<IpAddr>().is_ok()
    }

    /// The address an IP-literal host names in its plain spellings, for logs and tests only;
    /// decisions never depend on it (every IP literal is refused).
    pub fn as_ip(&self) -> Option<IpAddr> {
        let s = self.0.trim_start_matches('[').trim_end_matches(']');
        s.parse().ok()
    }

    /// True for single-label names and names under a suffix that only exists inside a network
    /// (`localhost`, `.internal`, `.svc`, reverse-DNS zones, ...), plus operator-configured
    /// suffixes.
    pub fn is_internal(&self, extra_suffixes: &[Host]) -> bool {
        !self.0.contains('.') || self.has_internal_suffix(extra_suffixes)
    }

    /// The named-suffix half of [`Host::is_internal`] (without the single-label rule).
    pub fn has_internal_suffix(&self, extra_suffixes: &[Host]) -> bool {
        INTERNAL_SUFFIXES
            .iter()
            .copied()
            .chain(extra_suffixes.iter().map(Host::as_str))
            .any(|suffix| self.is_within(suffix))
    }

    /// The host itself or a sub-domain of `suffix` (label-aligned: `badexample.com` is not
    /// within `example.com`).
    pub fn is_within(&self, suffix: &str) -> bool {
        self.0.as_ref() == suffix || self.is_strictly_within(suffix)
    }

    /// A proper sub-domain of `suffix`, never the apex: what `*.suffix` matches.
    pub fn is_strictly_within(&self, suffix: &str) -> bool {
        self.0.len() > suffix.len() + 1
            && self.0.ends_with(suffix)
            && self.0.as_bytes()[self.0.len() - suffix.len() - 1] == b'.'
    }

    /// Every proper parent domain, nearest first (`a.b.c` → `b.c`, `c`): the keys a wildcard
    /// pattern matching this host can have, so a lookup is an indexed `IN (...)`.
    pub fn parents(&self) -> impl Iterator<Item = &str> {
        let s: &str = &self.0;
        s.match_indices('.').map(move |(i, _)| &s[i + 1..])
    }
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Decodes `%XX` escapes (a URL host may carry them) so `%31%32%37.0.0.1` is judged as what a
/// client would really resolve.
fn percent_decode(input: &str) -> Result<Cow<'_, str>, HostError> {
    if !input.contains('%') {
        return Ok(Cow::Borrowed(input));
    }
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or(HostError::BadEscape)?;
            let hex = std::str::from_utf8(hex).map_err(|_| HostError::BadEscape)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| HostError::BadEscape)?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map(Cow::Owned)
        .map_err(|_| HostError::BadEscape)
}

/// A host that a test table spells validly; a malformed one fails the test with its error.
/// Every test module of the crate that needs hosts builds them with it.
#[cfg(test)]
pub(crate) fn test_host(s: &str) -> Host {
    match Host::parse(s) {
        Ok(h) => h,
        Err(e) => unreachable!("{s}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::test_host as h;

    #[test]
    fn normalises_case_trailing_dot_and_idn() {
        assert_eq!(h("Files.Example.COM.").as_str(), "files.example.com");
        assert_eq!(h("bücher.example").as_str(), "xn--bcher-kva.example");
        assert_eq!(h("XN--BCHER-KVA.example").as_str(), "xn--bcher-kva.example");
        assert_eq!(h("ｅｘａｍｐｌｅ．ｃｏｍ").as_str(), "example.com");
        assert_eq!(h("%65xample.com").as_str(), "example.com");
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            ".",
            "a..b",
            "exa mple.com",
            "a/b",
            "a@b",
            "[::1",
            "[zz]",
            "%zz.com",
            "example.com..",
        ] {
            assert!(Host::parse(bad).is_err(), "{bad:?} should be rejected");
        }
        assert_eq!(
            Host::parse(&format!("{}.com", "a".repeat(64))),
            Err(HostError::Length)
        );
        assert!(Host::parse(&format!("{}.com", "a".repeat(63))).is_ok());
    }

    #[test]
    fn every_ip_spelling_is_a_literal() {
        for s in [
            "1.2.3.4",
            "127.0.0.1.",
            "2130706433",
            "0x7f000001",
            "0x7f.1",
            "0177.0.0.1",
            "127.1",
            "017700000001",
            "[::1]",
            "[::ffff:127.0.0.1]",
            "[::ffff:0:127.0.0.1]",
            "[::ffff:0:7f00:1]",
            "[64:ff9b::127.0.0.1]",
            "[::127.0.0.1]",
            "::ffff:0:127.0.0.1",
            "0X7F.1",
            "0x7f.0x0.0x0.0x1",
            "127.0.0.0x1",
            "4294967295",
            "0",
            "::1",
            "1.2.3.0x4",
            "０x7f.1",
            "１２７．０．０．１",
            "%31%32%37.0.0.1",
            "0x",
            "example.0x10",
        ] {
            assert!(h(s).is_ip_literal(), "{s} should be an IP literal");
        }
        for s in [
            "example.com",
            "1e100.net",
            "123.example.com",
            "0x.example.org",
        ] {
            assert!(!h(s).is_ip_literal(), "{s} should be a name");
        }
        assert_eq!(h("[::FFFF:127.0.0.1]").as_str(), "[::ffff:127.0.0.1]");
    }

    #[test]
    fn internal_names() {
        let extra = [h("example-corp.net")];
        for s in [
            "localhost",
            "LOCALHOST.",
            "foo.localhost",
            "printer.local",
            "db.internal",
            "nas.lan",
            "x.home.arpa",
            "box.localdomain",
            "git.corp",
            "api.default.svc",
            "api.ns.svc.cluster.local",
            "1.0.0.127.in-addr.arpa",
            "intranet",
            "wiki.example-corp.net",
        ] {
            assert!(h(s).is_internal(&extra), "{s} should be internal");
        }
        for s in [
            "example.com",
            "local.example.com",
            "svc.example.org",
            "notlocalhost.com",
        ] {
            assert!(!h(s).is_internal(&extra), "{s} should be public-looking");
        }
    }

    #[test]
    fn containment_is_label_aligned() {
        assert!(h("a.example.com").is_strictly_within("example.com"));
        assert!(!h("example.com").is_strictly_within("example.com"));
        assert!(!h("badexample.com").is_within("example.com"));
        let parents: Vec<_> = h("a.b.example.com").parents().map(str::to_owned).collect();
        assert_eq!(parents, ["b.example.com", "example.com", "com"]);
    }
}
