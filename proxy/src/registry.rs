//! The package registries the proxy knows: which hosts belong to an enabled registry
//! (`--registry pypi|npm`, `--registry-mirror ECOSYSTEM=HOST[,HOST…]`), and what each request
//! to them is about — a package (canonical, as `store::package` spells it) with the version
//! it names, registry metadata that names no package, or something the proxy cannot map
//! (refused, never guessed). Pure: no I/O, so the mapping is unit-tested and fuzzed; the
//! bounds on the proxy's own wheel reads live here too ([`reads`]), as plain state that both
//! the shared state and the package rule import.

mod npm;
mod pypi;
pub mod reads;
pub mod wheel;

use std::collections::HashMap;

use egressgate_store::{Host, Package};
use http::Method;

/// A package ecosystem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ecosystem {
    /// The Python Package Index (simple index, JSON API, files host).
    Pypi,
    /// The npm registry (packuments and tarballs).
    Npm,
}

impl Ecosystem {
    /// Parses the flag spelling (`pypi`, `npm`).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "pypi" => Some(Self::Pypi),
            "npm" => Some(Self::Npm),
            _ => None,
        }
    }

    /// The flag spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pypi => "pypi",
            Self::Npm => "npm",
        }
    }

    /// The public registry's hosts, a bundle that belongs together: enabling the registry
    /// enables them all (the index and the host its files come from).
    pub fn builtin_hosts(self) -> &'static [&'static str] {
        match self {
            Self::Pypi => &["pypi.org", "files.pythonhosted.org"],
            Self::Npm => &["registry.npmjs.org"],
        }
    }
}

/// What one registry request is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mapping {
    /// Registry metadata that names no package (the index root): allowed.
    Metadata,
    /// A request about one package.
    Package {
        /// The canonical package.
        package: Package,
        /// The version it names, if any.
        version: Option<String>,
        /// A file that installs code (a wheel, an sdist, a tarball), not metadata.
        artifact: Artifact,
    },
    /// Not a request the proxy can tie to a package: refused, never guessed.
    Unmappable,
}

/// What kind of file a package request fetches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Artifact {
    /// Metadata about the package (index page, JSON API, packument, PEP 658 metadata).
    None,
    /// A wheel (its `METADATA` names its dependencies).
    Wheel,
    /// Any other installable file (sdist, npm tarball).
    Other,
}

/// The hosts of the enabled registries.
#[derive(Clone, Debug, Default)]
pub struct Registries {
    hosts: HashMap<Host, Ecosystem>,
}

impl Registries {
    /// Enables a built-in registry with its public hosts.
    pub fn enable(&mut self, eco: Ecosystem) {
        for h in eco.builtin_hosts() {
            if let Ok(host) = Host::parse(h) {
                self.hosts.insert(host, eco);
            }
        }
    }

    /// Adds a private mirror's hosts, judged like the registry's own.
    pub fn add_mirror(&mut self, eco: Ecosystem, hosts: impl IntoIterator<Item = Host>) {
        for h in hosts {
            self.hosts.insert(h, eco);
        }
    }

    /// The ecosystem whose registry `host` belongs to, if any.
    pub fn ecosystem(&self, host: &Host) -> Option<Ecosystem> {
        self.hosts.get(host).copied()
    }

    /// Whether no registry is enabled.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }
}

/// Maps one request to a registry of `eco`. Only reads (`GET`, `HEAD`) are mapped: a
/// publish or any other write is refused. The path is split on `/` before each segment is
/// percent-decoded, and dot segments or empty segments inside the path are refused, so an
/// upstream that normalises paths cannot be sent to another package than the one judged.
pub fn map(eco: Ecosystem, method: &Method, path: &str) -> Mapping {
    if method != Method::GET && method != Method::HEAD {
        return Mapping::Unmappable;
    }
    let Some(segments) = segments(path) else {
        return Mapping::Unmappable;
    };
    let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
    match eco {
        Ecosystem::Pypi => pypi::map(&segs),
        Ecosystem::Npm => npm::map(&segs),
    }
}

/// The decoded segments of an absolute path, without the empty one a trailing `/` leaves;
/// `None` for anything odd (no leading `/`, empty or dot segments, bad UTF-8, control
/// characters or a backslash after decoding).
fn segments(path: &str) -> Option<Vec<String>> {
    let rest = path.strip_prefix('/')?;
    if rest.is_empty() {
        return Some(Vec::new());
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    rest.split('/')
        .map(|raw| {
            let seg = percent_encoding::percent_decode_str(raw)
                .decode_utf8()
                .ok()?
                .into_owned();
            let odd = seg.is_empty()
                || seg == "."
                || seg == ".."
                || seg.chars().any(|c| c.is_control() || c == '\\');
            (!odd).then_some(seg)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_decoded_and_odd_paths_refused() {
        assert_eq!(segments("/"), Some(vec![]));
        assert_eq!(
            segments("/simple/numpy/"),
            Some(vec!["simple".into(), "numpy".into()])
        );
        assert_eq!(segments("/@scope%2fname"), Some(vec!["@scope/name".into()]));
        for odd in [
            "",
            "simple/",
            "/simple//numpy/",
            "/simple/../victim/",
            "/simple/%2e%2e/victim/",
            "/simple/./numpy/",
            "/simple/a%5cb/",
            "/simple/%ff/",
            "/simple/a%0ab/",
        ] {
            assert_eq!(segments(odd), None, "{odd:?}");
        }
    }

    #[test]
    fn writes_are_unmappable() {
        assert_eq!(
            map(Ecosystem::Npm, &Method::PUT, "/left-pad"),
            Mapping::Unmappable
        );
        assert_eq!(
            map(Ecosystem::Pypi, &Method::POST, "/"),
            Mapping::Unmappable
        );
    }

    #[test]
    fn hosts_of_enabled_registries() {
        let mut r = Registries::default();
        assert!(r.is_empty());
        r.enable(Ecosystem::Pypi);
        let host = |s: &str| Host::parse(s).unwrap_or_else(|e| unreachable!("{e}"));
        r.add_mirror(Ecosystem::Npm, [host("npm.corp.example")]);
        assert_eq!(
            r.ecosystem(&host("files.pythonhosted.org")),
            Some(Ecosystem::Pypi)
        );
        assert_eq!(r.ecosystem(&host("pypi.org")), Some(Ecosystem::Pypi));
        assert_eq!(r.ecosystem(&host("npm.corp.example")), Some(Ecosystem::Npm));
        assert_eq!(r.ecosystem(&host("registry.npmjs.org")), None);
        assert_eq!(Ecosystem::parse("PyPI"), Some(Ecosystem::Pypi));
        assert_eq!(Ecosystem::parse("cargo"), None);
    }
}
