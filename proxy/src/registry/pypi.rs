//! PyPI's request shapes: the simple index (PEP 503 HTML and PEP 691 JSON share paths),
//! the JSON API, and files (`/packages/…/FILENAME`, on the files host or a mirror such as
//! pypiserver's flat `/packages/FILENAME`), whose project comes from the filename alone.

use std::str::FromStr as _;

use egressgate_store::Package;

use super::{Artifact, Mapping};

/// Maps decoded path segments.
pub(super) fn map(segs: &[&str]) -> Mapping {
    match segs {
        [] | ["simple"] => Mapping::Metadata,
        ["simple", name] => package(name, None, Artifact::None),
        ["pypi", name, "json"] => package(name, None, Artifact::None),
        ["pypi", name, version, "json"] => package(name, Some(version), Artifact::None),
        ["packages", .., file] => file_mapping(file),
        _ => Mapping::Unmappable,
    }
}

fn package(name: &str, version: Option<&str>, artifact: Artifact) -> Mapping {
    match Package::parse(&format!("pip:{name}")) {
        Ok(package) => Mapping::Package {
            package,
            version: version.map(str::to_owned),
            artifact,
        },
        Err(_) => Mapping::Unmappable,
    }
}

/// Source distribution suffixes (PEP 625's `.tar.gz` and the legacy ones pip still reads).
const SDIST: [&str; 6] = [".tar.gz", ".zip", ".tar.bz2", ".tar.xz", ".tgz", ".tar"];

/// A file's project and version from its name: a wheel (`name-ver(-build)?-py-abi-plat.whl`,
/// whose name part never holds `-`), its PEP 658 metadata (`….whl.metadata`), or an sdist
/// (`name-ver.tar.gz`). Anything else is unmappable.
fn file_mapping(file: &str) -> Mapping {
    let (file, metadata) = match file.strip_suffix(".metadata") {
        Some(f) => (f, true),
        None => (file, false),
    };
    if let Some(stem) = file.strip_suffix(".whl") {
        let parts: Vec<&str> = stem.split('-').collect();
        if !matches!(parts.len(), 5 | 6) || !is_version(parts[1]) {
            return Mapping::Unmappable;
        }
        let artifact = if metadata {
            Artifact::None
        } else {
            Artifact::Wheel
        };
        return package(parts[0], Some(parts[1]), artifact);
    }
    let Some(stem) = SDIST.iter().find_map(|s| file.strip_suffix(s)) else {
        return Mapping::Unmappable;
    };
    match sdist_split(stem) {
        Some((name, version)) => {
            let artifact = if metadata {
                Artifact::None
            } else {
                Artifact::Other
            };
            package(name, Some(version), artifact)
        }
        None => Mapping::Unmappable,
    }
}

/// Splits an sdist stem into (name, version). Legacy names may hold `-`, so every `-` is a
/// candidate split point whose left side is a valid name and right side a PEP 440 version;
/// exactly one candidate must remain. `victim-1.0-1` could be project `victim` version
/// `1.0-1` (a post release) or project `victim-1.0` version `1`: ambiguous, so unmappable,
/// never a guess that might name another (approved) project.
fn sdist_split(stem: &str) -> Option<(&str, &str)> {
    let mut found = None;
    for (i, _) in stem.match_indices('-') {
        let (name, version) = (&stem[..i], &stem[i + 1..]);
        if Package::parse(&format!("pip:{name}")).is_ok() && is_version(version) {
            if found.is_some() {
                return None;
            }
            found = Some((name, version));
        }
    }
    found
}

fn is_version(v: &str) -> bool {
    !v.is_empty() && pep440_rs::Version::from_str(v).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Ecosystem;
    use crate::registry::map as map_path;
    use http::Method;

    fn map(path: &str) -> Mapping {
        map_path(Ecosystem::Pypi, &Method::GET, path)
    }

    fn pkg(name: &str, version: Option<&str>, artifact: Artifact) -> Mapping {
        Mapping::Package {
            package: Package::parse(name).unwrap_or_else(|e| unreachable!("{e}")),
            version: version.map(str::to_owned),
            artifact,
        }
    }

    #[test]
    fn index_and_json_api() {
        assert_eq!(map("/"), Mapping::Metadata);
        assert_eq!(map("/simple/"), Mapping::Metadata);
        assert_eq!(map("/simple/NumPy/"), pkg("numpy", None, Artifact::None));
        assert_eq!(
            map("/simple/zope.interface"),
            pkg("zope-interface", None, Artifact::None)
        );
        assert_eq!(
            map("/pypi/Requests/json"),
            pkg("requests", None, Artifact::None)
        );
        assert_eq!(
            map("/pypi/requests/2.32.3/json"),
            pkg("requests", Some("2.32.3"), Artifact::None)
        );
        for bad in [
            "/simple/-bad-/",
            "/simple/a/b/",
            "/pypi/requests",
            "/admin/",
            "/simple/a%2fb/",
            "/favicon.ico",
        ] {
            assert_eq!(map(bad), Mapping::Unmappable, "{bad:?}");
        }
    }

    #[test]
    fn files_map_to_their_project() {
        assert_eq!(
            map("/packages/ab/cd/ef0123/numpy-2.1.3-cp312-cp312-manylinux_2_17_x86_64.whl"),
            pkg("numpy", Some("2.1.3"), Artifact::Wheel)
        );
        assert_eq!(
            map("/packages/Foo_Bar-1.0-1-py3-none-any.whl"),
            pkg("foo-bar", Some("1.0"), Artifact::Wheel)
        );
        assert_eq!(
            map("/packages/foo_bar-1.0-py3-none-any.whl.metadata"),
            pkg("foo-bar", Some("1.0"), Artifact::None)
        );
        assert_eq!(
            map("/packages/python-dateutil-2.8.2.tar.gz"),
            pkg("python-dateutil", Some("2.8.2"), Artifact::Other)
        );
        assert_eq!(
            map("/packages/requests-2.32.3.zip"),
            pkg("requests", Some("2.32.3"), Artifact::Other)
        );
        for bad in [
            // Ambiguous: `victim` 1.0-1 (post release) or `victim-1.0` 1.
            "/packages/victim-1.0-1.tar.gz",
            "/packages/numpy-2.1.3.exe",
            "/packages/numpy.whl",
            "/packages/numpy-x-py3-none-any.whl",
            "/packages/numpy-1.0-py3-none.whl",
            "/packages/nodash.tar.gz",
            "/packages/",
        ] {
            assert_eq!(map(bad), Mapping::Unmappable, "{bad:?}");
        }
    }
}
