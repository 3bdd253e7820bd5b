//! The package registries the proxy knows: which hosts belong to an enabled registry
//! (`--registry pypi|npm`, `--registry-mirror ECOSYSTEM=HOST[,HOST…]`), and what each request
//! to them is about — a package (canonical, as `store::package` spells it) with the version
//! it names, registry metadata that names no package, or something the proxy cannot map
//! (refused, never guessed). Pure: no I/O, so the mapping is unit-tested and fuzzed; the
//! bounds on the proxy's own wheel reads live here too ([`reads`]), as plain state that both
//! the shared state and the package rule import.

mod npm;
mod path;
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

/// One registry request as judged: what it is about, and the path the origin is sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judged {
    /// What the request is about.
    pub mapping: Mapping,
    /// The judged segments re-encoded ([`path::Segments::encode`]): the only path forwarded,
    /// so the origin receives exactly what was judged. `None` when unmappable.
    pub path: Option<String>,
}

/// Judges one request to a registry of `eco`: `target` is its origin-form path with the query,
/// if any. Only reads (`GET`, `HEAD`) are mapped: a publish or any other write is refused.
/// The path is split on `/` before each segment is percent-decoded, under the rules of
/// [`path`], so an upstream that decodes, normalises or cuts paths cannot be sent to another
/// package than the one judged. A query is not judged, so a request with one is unmappable
/// (installers send none).
pub fn judge(eco: Ecosystem, method: &Method, target: &str) -> Judged {
    let unmappable = Judged {
        mapping: Mapping::Unmappable,
        path: None,
    };
    if method != Method::GET && method != Method::HEAD {
        return unmappable;
    }
    let Some(segments) = path::Segments::parse(target, eco == Ecosystem::Npm) else {
        return unmappable;
    };
    let segs = segments.as_strs();
    let mapping = match eco {
        Ecosystem::Pypi => pypi::map(&segs, segments.trailing_slash),
        Ecosystem::Npm => npm::map(&segs, segments.trailing_slash),
    };
    match mapping {
        Mapping::Unmappable => unmappable,
        mapping => Judged {
            mapping,
            path: Some(segments.encode()),
        },
    }
}

/// What one request to a registry of `eco` is about (see [`judge`]).
pub fn map(eco: Ecosystem, method: &Method, target: &str) -> Mapping {
    judge(eco, method, target).mapping
}

impl Mapping {
    /// A request about the package `spec` (`pip:NAME`, `npm:NAME`) at `version`. Both
    /// registries build their answer here, so a name the store's parser refuses is
    /// unmappable (refused, never guessed) the same way for each.
    fn package(spec: &str, version: Option<&str>, artifact: Artifact) -> Self {
        match Package::parse(spec) {
            Ok(package) => Self::Package {
                package,
                version: version.map(str::to_owned),
                artifact,
            },
            Err(_) => Self::Unmappable,
        }
    }
}

/// The registries' unit tests' shared checks: one table of paths and what each maps to.
#[cfg(test)]
mod expect {
    use super::{Artifact, Ecosystem, Mapping, Package, map};
    use http::Method;

    /// The package mapping a test expects. Unlike [`Mapping::package`] a spec that does not
    /// parse panics, so a typo in a test fails instead of expecting `Unmappable`.
    pub(super) fn pkg(spec: &str, version: Option<&str>, artifact: Artifact) -> Mapping {
        Mapping::Package {
            package: Package::parse(spec).unwrap_or_else(|e| unreachable!("{spec}: {e}")),
            version: version.map(str::to_owned),
            artifact,
        }
    }

    /// Asserts that a `GET` of each `good` path to a registry of `eco` maps to its mapping,
    /// and that each `bad` path is unmappable.
    pub(super) fn table(eco: Ecosystem, good: &[(&str, Mapping)], bad: &[&str]) {
        for (path, want) in good {
            assert_eq!(&map(eco, &Method::GET, path), want, "{path:?}");
        }
        for path in bad {
            assert_eq!(
                map(eco, &Method::GET, path),
                Mapping::Unmappable,
                "{path:?}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path of up to three segments drawn from spellings an attacker would try: what
    /// is judged is forwarded re-encoded, and the forwarded path is judged the same.
    #[test]
    fn every_judged_path_re_encodes_to_the_same_judgement() {
        let pieces = [
            "approved",
            "evil",
            "-",
            "@scope",
            "@scope%2fapproved",
            "@scope%2Fapproved",
            "approved-1.0.0.tgz",
            "%2e%2e",
            "..",
            ".",
            "a%2fb",
            "%252f",
            "a%5cb",
            "a%3fb",
            "a;b",
            "latest",
            "1.0.0",
            "simple",
            "packages",
            "pypi",
            "json",
            "numpy-1.0-py3-none-any.whl",
            "x-1.0%2Bcpu.tar.gz",
            "lod%61sh",
            "",
        ];
        let mut mapped = 0;
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    for end in ["", "/"] {
                        for path in [format!("/{a}{end}"), format!("/{a}/{b}/{c}{end}")] {
                            for eco in [Ecosystem::Pypi, Ecosystem::Npm] {
                                let j = judge(eco, &Method::GET, &path);
                                let Some(forwarded) = &j.path else {
                                    assert_eq!(j.mapping, Mapping::Unmappable, "{path}");
                                    continue;
                                };
                                mapped += 1;
                                let again = judge(eco, &Method::GET, forwarded);
                                assert_eq!(again, j, "{path} -> {forwarded}");
                                for bad in ["?", "#", ";", "\\", "//", "%25", "%5C", "/../", "/./"]
                                {
                                    assert!(!forwarded.contains(bad), "{path} -> {forwarded}");
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(mapped > 1000, "{mapped}");
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
